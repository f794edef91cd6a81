/* ticker.c - a thread that looks at a module's work every period while it
 * has some */
#include "fs/ticker.h"

#include <errno.h>
#include <time.h>

static void *ticker_main(void *arg)
{
	struct fs_ticker *t = arg;
	pthread_mutex_lock(t->mu);
	while (!t->stopping) {
		if (!t->busy()) {   /* nothing to look at: sleep until something comes */
			pthread_cond_wait(t->cv, t->mu);
			continue;
		}
		pthread_mutex_unlock(t->mu);
		t->tick();
		pthread_mutex_lock(t->mu);
		struct timespec until;
		clock_gettime(CLOCK_MONOTONIC, &until);   /* cv waits on it (start) */
		until.tv_nsec += t->period_ns;
		while (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		while (!t->stopping && !(t->hurry && *t->hurry) &&
		       pthread_cond_timedwait(t->cv, t->mu, &until) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(t->mu);
	return NULL;
}

int fs_ticker_start(struct fs_ticker *t)
{
	pthread_condattr_t a;
	pthread_mutex_lock(t->mu);
	/* waits are timed on the monotonic clock: a step of the wall clock
	 * neither stalls nor hurries them (nobody waits on cv yet) */
	if (!pthread_condattr_init(&a)) {
		if (!pthread_condattr_setclock(&a, CLOCK_MONOTONIC)) {
			pthread_cond_destroy(t->cv);
			pthread_cond_init(t->cv, &a);
		}
		pthread_condattr_destroy(&a);
	}
	t->stopping = 0;
	int rc = pthread_create(&t->thread, NULL, ticker_main, t);
	t->running = !rc;
	pthread_mutex_unlock(t->mu);
	return -rc;
}

void fs_ticker_stop(struct fs_ticker *t)
{
	pthread_mutex_lock(t->mu);
	int was = t->running;
	t->stopping = 1;
	t->running = 0;
	pthread_cond_broadcast(t->cv);
	pthread_mutex_unlock(t->mu);
	if (was)
		pthread_join(t->thread, NULL);
}
