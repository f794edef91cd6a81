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

/* The split in effect at step (whose rows are not gathered yet); called
 * with the lock held. */
static void split_at(const struct dlt_prefetch *p, long step, int *off, int *batch)
{
	int i = p->nsplit - 1;

	while (i > 0 && p->split[i].from > step)
		i--;
	*off = p->split[i].off;
	*batch = p->split[i].batch;
}

/* The row numbers of step's rows [off, off + batch) of its stride, in
 * permutation copy who (0 = the thread, 1 = the caller), drawn for the
 * step's epoch when it holds another; no lock held. */
static const uint32_t *step_rows(struct dlt_prefetch *p, long step, int who, int off)
{
	long e = (step - 1) / p->steps_per_epoch, k = (step - 1) % p->steps_per_epoch;
	size_t stride = (size_t)(p->feed.global ? p->feed.stride : p->feed.batch);

	if (e != p->perm_epoch[who]) {
		struct dlt_rng rng;

		dlt_rng_seed(&rng, p->seed, (uint64_t)e,
			     p->feed.global ? DLT_FEED_GLOBAL : (uint64_t)p->rank);
		dlt_rng_permutation(&rng, p->perm[who], (size_t)p->d->n);
		p->perm_epoch[who] = e;
	}
	return p->perm[who] + (size_t)k * stride + (size_t)off;
}

/* Gathers step's rows [off, off + batch) of its stride into its slot with
 * permutation copy who, no lock held. */
static void gather(struct dlt_prefetch *p, long step, int who, int off, int batch)
{
	int slot = (int)(step % p->depth);

	dlt_dataset_gather(p->d, step_rows(p, step, who, off), batch, p->x[slot], p->y[slot]);
	p->rows[slot] = batch;
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
		int off, batch;

		split_at(p, step, &off, &batch);
		p->busy = step;
		pthread_mutex_unlock(&p->mu);
		gather(p, step, 0, off, batch);
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

int dlt_prefetch_start(struct dlt_prefetch *p, const struct dlt_dataset *d,
		       const struct dlt_feed *f, long steps_per_epoch, uint64_t seed, int rank,
		       long first, long last, char *err, size_t errlen)
{
	int rc, ok = 1;
	long spe = steps_per_epoch > 0 ? steps_per_epoch : 1;
	long stride = f->global ? f->stride : f->batch;

	memset(p, 0, sizeof *p);
	if (f->batch < 1 || f->cap < f->batch ||
	    (f->global && (f->off < 0 || f->off + f->batch > f->stride))) {
		snprintf(err, errlen, "a batch of %d rows (room for %d, from row %d of the %ld "
			 "a step takes) does not fit", f->batch, f->cap, f->global ? f->off : 0, stride);
		return -EINVAL;
	}
	if (stride * spe > d->n) {
		snprintf(err, errlen, "%ld steps of %ld rows do not fit in %ld rows", spe, stride, d->n);
		return -EINVAL;
	}
	p->d = d;
	p->feed = *f;
	p->split[0].from = first;
	p->split[0].off = f->global ? f->off : 0;
	p->split[0].batch = f->batch;
	p->nsplit = 1;
	p->steps_per_epoch = spe;
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
	p->depth = f->rows_only ? 0 : dlt_prefetch_depth(f->cap, d->dim);
	for (int i = 0; i < p->depth; i++) {
		size_t bytes = (size_t)f->cap * (size_t)d->dim * sizeof(float) + 1;

		p->x[i] = malloc(bytes);
		p->y[i] = malloc((size_t)f->cap + 1);
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
	if (f->rows_only) {   /* nothing to gather: the caller asks the numbers */
		p->inited = 1;
		return 0;
	}
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

int dlt_prefetch_resplit(struct dlt_prefetch *p, long from, int off, int batch,
			 char *err, size_t errlen)
{
	int rc = 0;

	pthread_mutex_lock(&p->mu);
	/* splits no step from the one asked last on can still use go */
	while (p->nsplit > 1 && p->split[1].from <= p->released + 1) {
		memmove(p->split, p->split + 1, (size_t)(p->nsplit - 1) * sizeof p->split[0]);
		p->nsplit--;
	}
	if (!p->feed.global || batch < 1 || batch > p->feed.cap || off < 0 ||
	    off + batch > p->feed.stride) {
		snprintf(err, errlen, "re-split: rows %d..%d of %d a step (at most %d rows)%s",
			 off, off + batch, p->feed.stride, p->feed.cap,
			 p->feed.global ? "" : ": not a whole-set feed");
		rc = -EINVAL;
	} else if (from < p->released + 1 + DLT_PREFETCH_MAX_DEPTH ||
		   from <= p->split[p->nsplit - 1].from) {
		snprintf(err, errlen, "re-split from step %ld: steps up to %ld may be gathered",
			 from, p->released + DLT_PREFETCH_MAX_DEPTH);
		rc = -EINVAL;
	} else if (p->nsplit == DLT_PREFETCH_SPLITS) {
		snprintf(err, errlen, "re-split from step %ld: %d re-splits pending", from,
			 p->nsplit - 1);
		rc = -EINVAL;
	} else {
		p->split[p->nsplit].from = from;
		p->split[p->nsplit].off = off;
		p->split[p->nsplit].batch = batch;
		p->nsplit++;
	}
	pthread_mutex_unlock(&p->mu);
	return rc;
}

int dlt_prefetch_get(struct dlt_prefetch *p, long step, const float **x,
		     const uint8_t **y)
{
	int slot = (int)(step % p->depth);

	pthread_mutex_lock(&p->mu);
	p->released = step - 1;   /* the previous step's buffer is free again */
	if (p->idle && p->released + p->depth - 1 - p->filled >= p->depth / 2)
		pthread_cond_broadcast(&p->cv);
	if (p->filled < step && p->busy != step) {
		/* the thread has not started on it: gather it here, now */
		int off, batch;

		split_at(p, step, &off, &batch);
		p->filled = step;
		p->stolen++;
		pthread_mutex_unlock(&p->mu);
		gather(p, step, 1, off, batch);
		*x = p->x[slot];
		*y = p->y[slot];
		return p->rows[slot];
	}
	while (p->filled < step) {   /* the thread is on it right now */
		p->waiting = 1;
		pthread_cond_wait(&p->cv, &p->mu);
	}
	p->waiting = 0;
	pthread_mutex_unlock(&p->mu);
	*x = p->x[slot];
	*y = p->y[slot];
	return p->rows[slot];
}

int dlt_prefetch_rows(struct dlt_prefetch *p, long step, const uint32_t **idx)
{
	int off, batch;

	pthread_mutex_lock(&p->mu);   /* the splits (dlt_prefetch_resplit) */
	p->released = step - 1;
	split_at(p, step, &off, &batch);
	pthread_mutex_unlock(&p->mu);
	*idx = step_rows(p, step, 1, off);
	return batch;
}

void dlt_prefetch_stop(struct dlt_prefetch *p)
{
	if (p->started) {
		pthread_mutex_lock(&p->mu);
		p->quit = 1;
		pthread_cond_broadcast(&p->cv);
		pthread_mutex_unlock(&p->mu);
		pthread_join(p->th, NULL);
	}
	if (p->started || p->inited) {
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
