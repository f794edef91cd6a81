/* prefetch.c - a helper thread that gathers the next training batches while the current one computes */
#define _GNU_SOURCE   /* SCHED_IDLE */
#include "engine/train/prefetch.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/train/rng.h"

/* Gathers step's batch into its slot with permutation copy who (0 = the
 * thread, 1 = the caller), no lock held. */
static void gather(struct dlt_prefetch *p, long step, int who)
{
	long e = (step - 1) / p->steps_per_epoch, k = (step - 1) % p->steps_per_epoch;
	int slot = (int)(step % p->depth);

	if (e != p->perm_epoch[who]) {
		struct dlt_rng rng;

		dlt_rng_seed(&rng, p->seed, (uint64_t)e, (uint64_t)p->rank);
		dlt_rng_permutation(&rng, p->perm[who], (size_t)p->d->n);
		p->perm_epoch[who] = e;
	}
	dlt_dataset_gather(p->d, p->perm[who] + (size_t)k * (size_t)p->batch, p->batch,
			   p->x[slot], p->y[slot]);
}

/* The thread: fills the ring in step order until the last step or quit. */
static void *loop(void *arg)
{
	struct dlt_prefetch *p = arg;

	pthread_mutex_lock(&p->mu);
	while (!p->quit && p->filled < p->last) {
		long step = p->filled + 1;

		if (step > p->released + p->depth - 1) {   /* ring full */
			p->idle = 1;
			pthread_cond_wait(&p->cv, &p->mu);
			p->idle = 0;
			continue;
		}
		p->busy = step;
		pthread_mutex_unlock(&p->mu);
		gather(p, step, 0);
		pthread_mutex_lock(&p->mu);
		p->busy = 0;
		if (step > p->filled)
			p->filled = step;
		if (p->waiting)
			pthread_cond_broadcast(&p->cv);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* Writes a byte in every page of buf so that the pages are faulted in now.
 * (A memset to 0 right after malloc may be compiled into calloc, which
 * touches nothing.) */
static void touch(void *buf, size_t len)
{
	volatile unsigned char *b = buf;
	long page = sysconf(_SC_PAGESIZE);

	for (size_t i = 0; i < len; i += (size_t)(page > 0 ? page : 4096))
		b[i] = 0;
	if (len)
		b[len - 1] = 0;
}

int dlt_prefetch_depth(int batch, int dim)
{
	size_t slot = (size_t)(batch > 0 ? batch : 1) * (size_t)(dim > 0 ? dim : 1) * sizeof(float);
	size_t fit = DLT_PREFETCH_RING_BYTES / slot;

	if (fit < DLT_PREFETCH_MIN_DEPTH)
		return DLT_PREFETCH_MIN_DEPTH;
	return fit > DLT_PREFETCH_MAX_DEPTH ? DLT_PREFETCH_MAX_DEPTH : (int)fit;
}

int dlt_prefetch_start(struct dlt_prefetch *p, const struct dlt_dataset *d, int batch,
		       long steps_per_epoch, uint64_t seed, int rank, long first, long last,
		       char *err, size_t errlen)
{
	int rc, ok = 1;

	memset(p, 0, sizeof *p);
	p->d = d;
	p->batch = batch;
	p->steps_per_epoch = steps_per_epoch > 0 ? steps_per_epoch : 1;
	p->seed = seed;
	p->rank = rank;
	p->last = last;
	p->filled = first - 1;
	p->released = first - 1;
	for (int i = 0; i < 2; i++) {
		p->perm_epoch[i] = -1;
		p->perm[i] = malloc((size_t)d->n * sizeof(uint32_t) + 1);
		ok = ok && p->perm[i];
	}
	p->depth = dlt_prefetch_depth(batch, d->dim);
	for (int i = 0; i < p->depth; i++) {
		size_t bytes = (size_t)batch * (size_t)d->dim * sizeof(float) + 1;

		p->x[i] = malloc(bytes);
		p->y[i] = malloc((size_t)batch + 1);
		ok = ok && p->x[i] && p->y[i];
		if (ok)
			touch(p->x[i], bytes);
	}
	if (!ok) {
		dlt_prefetch_stop(p);
		snprintf(err, errlen, "cannot allocate the batch buffers");
		return -ENOMEM;
	}
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	rc = pthread_create(&p->th, NULL, loop, p);
	if (rc) {
		pthread_mutex_destroy(&p->mu);
		pthread_cond_destroy(&p->cv);
		dlt_prefetch_stop(p);
		snprintf(err, errlen, "cannot start the prefetch thread: %s", strerror(rc));
		return -rc;
	}
	/* Lowest CPU priority: with as many busy ranks as cores (MPI polls
	 * while it waits) a helper that preempts a rank stalls both for a time
	 * slice; as SCHED_IDLE it only uses a core nobody else wants, and the
	 * caller gathers what it did not get to. Best effort. */
#ifdef SCHED_IDLE
	{
		struct sched_param sp = { .sched_priority = 0 };

		pthread_setschedparam(p->th, SCHED_IDLE, &sp);
	}
#endif
	p->started = 1;
	return 0;
}

void dlt_prefetch_get(struct dlt_prefetch *p, long step, const float **x,
		      const uint8_t **y)
{
	int slot = (int)(step % p->depth);

	pthread_mutex_lock(&p->mu);
	p->released = step - 1;   /* the previous step's buffer is free again */
	if (p->idle && p->released + p->depth - 1 - p->filled >= p->depth / 2)
		pthread_cond_broadcast(&p->cv);
	if (p->filled < step && p->busy != step) {
		/* the thread has not started on it: gather it here, now */
		p->filled = step;
		p->stolen++;
		pthread_mutex_unlock(&p->mu);
		gather(p, step, 1);
		*x = p->x[slot];
		*y = p->y[slot];
		return;
	}
	while (p->filled < step) {   /* the thread is on it right now */
		p->waiting = 1;
		pthread_cond_wait(&p->cv, &p->mu);
	}
	p->waiting = 0;
	pthread_mutex_unlock(&p->mu);
	*x = p->x[slot];
	*y = p->y[slot];
}

void dlt_prefetch_stop(struct dlt_prefetch *p)
{
	if (p->started) {
		pthread_mutex_lock(&p->mu);
		p->quit = 1;
		pthread_cond_broadcast(&p->cv);
		pthread_mutex_unlock(&p->mu);
		pthread_join(p->th, NULL);
		pthread_mutex_destroy(&p->mu);
		pthread_cond_destroy(&p->cv);
	}
	free(p->perm[0]);
	free(p->perm[1]);
	for (int i = 0; i < DLT_PREFETCH_MAX_DEPTH; i++) {
		free(p->x[i]);
		free(p->y[i]);
	}
	memset(p, 0, sizeof *p);
}
