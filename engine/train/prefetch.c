/* prefetch.c - a helper thread that gathers the next training batch while the current one computes */
#include "engine/train/prefetch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/train/rng.h"

/* Gathers step's batch into its slot (thread side, no lock held). */
static void gather(struct dlt_prefetch *p, long step)
{
	long e = (step - 1) / p->steps_per_epoch, k = (step - 1) % p->steps_per_epoch;

	if (e != p->perm_epoch) {
		struct dlt_rng rng;

		dlt_rng_seed(&rng, p->seed, (uint64_t)e, (uint64_t)p->rank);
		dlt_rng_permutation(&rng, p->perm, (size_t)p->d->n);
		p->perm_epoch = e;
	}
	dlt_dataset_gather(p->d, p->perm + (size_t)k * (size_t)p->batch, p->batch,
			   p->x[step % 2], p->y[step % 2]);
}

/* The thread: gathers each requested step until told to quit. */
static void *loop(void *arg)
{
	struct dlt_prefetch *p = arg;

	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->quit && p->req == p->done)
			pthread_cond_wait(&p->cv, &p->mu);
		if (p->quit)
			break;
		long step = p->req;

		pthread_mutex_unlock(&p->mu);
		gather(p, step);
		pthread_mutex_lock(&p->mu);
		p->done = step;
		pthread_cond_broadcast(&p->cv);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int dlt_prefetch_start(struct dlt_prefetch *p, const struct dlt_dataset *d, int batch,
		       long steps_per_epoch, uint64_t seed, int rank,
		       char *err, size_t errlen)
{
	int rc;

	memset(p, 0, sizeof *p);
	p->d = d;
	p->batch = batch;
	p->steps_per_epoch = steps_per_epoch > 0 ? steps_per_epoch : 1;
	p->seed = seed;
	p->rank = rank;
	p->perm_epoch = -1;
	p->perm = malloc((size_t)d->n * sizeof *p->perm + 1);
	for (int i = 0; i < 2; i++) {
		p->x[i] = malloc((size_t)batch * (size_t)d->dim * sizeof(float) + 1);
		p->y[i] = malloc((size_t)batch + 1);
	}
	if (!p->perm || !p->x[0] || !p->x[1] || !p->y[0] || !p->y[1]) {
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
	p->started = 1;
	return 0;
}

void dlt_prefetch_request(struct dlt_prefetch *p, long step)
{
	pthread_mutex_lock(&p->mu);
	while (p->req != p->done)   /* one request at a time */
		pthread_cond_wait(&p->cv, &p->mu);
	if (p->done != step) {
		p->req = step;
		pthread_cond_broadcast(&p->cv);
	}
	pthread_mutex_unlock(&p->mu);
}

void dlt_prefetch_get(struct dlt_prefetch *p, long step, const float **x,
		      const uint8_t **y)
{
	pthread_mutex_lock(&p->mu);
	if (p->req != step) {
		while (p->req != p->done)
			pthread_cond_wait(&p->cv, &p->mu);
		if (p->done != step) {
			p->req = step;
			pthread_cond_broadcast(&p->cv);
		}
	}
	while (p->done != step)
		pthread_cond_wait(&p->cv, &p->mu);
	pthread_mutex_unlock(&p->mu);
	*x = p->x[step % 2];
	*y = p->y[step % 2];
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
	free(p->perm);
	for (int i = 0; i < 2; i++) {
		free(p->x[i]);
		free(p->y[i]);
	}
	memset(p, 0, sizeof *p);
}
