/* prefetch.h - a helper thread that gathers the next training batch while the current one computes */
#ifndef DLT_PREFETCH_H
#define DLT_PREFETCH_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/train/idx.h"

/* Double-buffered batches of one rank's shard. Step s (1-based, global)
 * uses local batch k = (s - 1) % steps_per_epoch of the permutation of
 * epoch e = (s - 1) / steps_per_epoch, drawn from the stream (seed, e,
 * rank): the same batches in the same order as without the thread, after
 * a resume too. Only the thread touches the permutation; a batch's buffer
 * is rewritten only after the caller asked for the step after the next. */
struct dlt_prefetch {
	const struct dlt_dataset *d;  /* the shard */
	int batch;                    /* rows per batch */
	long steps_per_epoch;         /* of the plan */
	uint64_t seed;                /* --seed */
	int rank;                     /* MPI rank */
	uint32_t *perm;               /* permutation of perm_epoch, d->n entries */
	long perm_epoch;              /* epoch of perm, -1 = none */
	float *x[2];                  /* batch pixels, slot s % 2 holds step s */
	uint8_t *y[2];                /* batch labels */
	pthread_t th;                 /* the gathering thread */
	pthread_mutex_t mu;           /* guards req, done, quit */
	pthread_cond_t cv;            /* signals a change of them */
	long req;                     /* step asked for, 0 = none */
	long done;                    /* last step gathered, 0 = none */
	int quit;                     /* 1 = the thread must exit */
	int started;                  /* 1 while the thread runs */
};

/* Allocates the buffers of p for batches of `batch` rows of d and starts
 * the thread. Returns 0, or -errno with a message in err; p then holds
 * nothing. */
int dlt_prefetch_start(struct dlt_prefetch *p, const struct dlt_dataset *d, int batch,
		       long steps_per_epoch, uint64_t seed, int rank,
		       char *err, size_t errlen);

/* Asks for step's batch in the background (no wait). Cannot fail. */
void dlt_prefetch_request(struct dlt_prefetch *p, long step);

/* Waits until step's batch is ready (asking for it first when it was not
 * the last request) and points *x and *y at it; they stay valid until the
 * request of step + 2. Cannot fail. */
void dlt_prefetch_get(struct dlt_prefetch *p, long step, const float **x,
		      const uint8_t **y);

/* Stops the thread and frees what p holds. Safe on a zeroed p. */
void dlt_prefetch_stop(struct dlt_prefetch *p);

#endif
