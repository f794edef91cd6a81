/* prefetch.h - a helper thread that gathers the next training batches while the current one computes */
#ifndef DLT_PREFETCH_H
#define DLT_PREFETCH_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/train/idx.h"

#define DLT_PREFETCH_MAX_DEPTH 8             /* batch buffers in the ring, at most */
#define DLT_PREFETCH_MIN_DEPTH 3             /* and at least */
#define DLT_PREFETCH_RING_BYTES (16u << 20)  /* the ring's pixels, at most (above the least) */

#define DLT_PREFETCH_SPLITS 4   /* re-splits pending at once, at most (dlt_prefetch_resplit) */
#define DLT_FEED_GLOBAL UINT64_MAX   /* the rank of the stream of a whole-set permutation */

/* Which rows a rank's steps take. Own shard (global = 0): step k of an
 * epoch takes rows [k*batch, (k+1)*batch) of the epoch's permutation of
 * the rank's shard, drawn from the stream (seed, e, rank). Whole set
 * (global = 1, every rank holds all of it): step k takes rows [k*stride +
 * off, + batch) of the epoch's permutation of the whole set, drawn alike on
 * every rank from (seed, e, DLT_FEED_GLOBAL); stride is the global batch
 * and off the rows of the ranks before this one, so the ranks' batches
 * together are the same global batch however it is split, and the split
 * may change during the run (dlt_prefetch_resplit). */
struct dlt_feed {
	int batch;                    /* rows of a step, at the first step */
	int cap;                      /* most rows a step may take (>= batch): the slots' size */
	int global;                   /* 1 = the whole set, cut by off and stride */
	int off;                      /* global: the first row of the step's rows that is ours */
	int stride;                   /* global: rows of the permutation a step takes, all ranks */
	int rows_only;                /* 1: no pixels gathered, no thread: the caller asks
					 each step's row numbers (dlt_prefetch_rows; a GPU
					 holding the rows gathers them itself) */
};

/* A ring of batch buffers filled in step order by a thread. Step s
 * (1-based, global) uses local batch k = (s - 1) % steps_per_epoch of the
 * permutation of epoch e = (s - 1) / steps_per_epoch (struct dlt_feed):
 * the same batches in the same order as without the thread, after a
 * resume too. Only the thread touches the permutation. The
 * thread runs up to depth - 1 steps ahead and is woken only when half the
 * ring is free (or the caller waits), so a step of a small batch costs no
 * system call. The depth is what fits in DLT_PREFETCH_RING_BYTES (between
 * the least and the most): every slot is memory the rank keeps, and memory
 * first touched costs (a page fault and a zeroed page: on a VM ~1.5 ms a
 * MiB was seen), so the slots are touched once at the start rather than in
 * the first steps, which would otherwise run at up to half speed. */
struct dlt_prefetch {
	const struct dlt_dataset *d;  /* the shard, or the whole set */
	struct dlt_feed feed;         /* the rows of a step */
	struct {                      /* the splits: from step `from` on, rows [off, off + batch) */
		long from;
		int off, batch;
	} split[DLT_PREFETCH_SPLITS];
	int nsplit;                   /* entries of split, in step order, >= 1 */
	long steps_per_epoch;         /* of the plan */
	uint64_t seed;                /* --seed */
	int rank;                     /* MPI rank */
	long last;                    /* last step to gather */
	uint32_t *perm[2];            /* permutations of the thread [0] and the caller [1] */
	long perm_epoch[2];           /* their epochs, -1 = none */
	int depth;                    /* slots in the ring */
	float *x[DLT_PREFETCH_MAX_DEPTH];    /* batch pixels, slot s % depth holds step s */
	uint8_t *y[DLT_PREFETCH_MAX_DEPTH];  /* batch labels */
	int rows[DLT_PREFETCH_MAX_DEPTH];    /* rows of the batch in the slot */
	pthread_t th;                 /* the gathering thread */
	pthread_mutex_t mu;           /* guards the fields below */
	pthread_cond_t cv;            /* signals a change of them */
	long filled;                  /* steps <= filled are gathered (first - 1 before any) */
	long busy;                    /* step the thread is gathering now, 0 = none */
	long released;                /* steps <= released may be overwritten */
	int idle;                     /* 1 while the thread waits for room */
	int waiting;                  /* 1 while the caller waits for a step */
	long stolen;                  /* steps the caller gathered itself */
	int quit;                     /* 1 = the thread must exit */
	int started;                  /* 1 while the thread runs */
	int inited;                   /* 1: mu and cv exist without a thread (rows_only) */
};

/* The ring's depth for batches of `batch` rows of dim pixels. */
int dlt_prefetch_depth(int batch, int dim);

/* Allocates the buffers of p for the feed f of d (slots of f->cap rows)
 * and starts the thread on steps first..last. Returns 0, or -errno with a
 * message in err (-EINVAL for a feed whose rows do not fit in an epoch of
 * d); p then holds nothing. */
int dlt_prefetch_start(struct dlt_prefetch *p, const struct dlt_dataset *d,
		       const struct dlt_feed *f, long steps_per_epoch, uint64_t seed, int rank,
		       long first, long last, char *err, size_t errlen);

/* From step `from` on, this rank's rows of a step are [off, off + batch)
 * of the step's stride (a whole-set feed only). `from` must be after every
 * step the ring may have gathered: at least the step last asked of
 * dlt_prefetch_get + DLT_PREFETCH_MAX_DEPTH, and after the `from` of the
 * re-split before. Returns 0, or -EINVAL with a message in err (not a
 * whole-set feed, rows outside the stride or over the cap, a step too
 * early, DLT_PREFETCH_SPLITS pending). */
int dlt_prefetch_resplit(struct dlt_prefetch *p, long from, int off, int batch,
			 char *err, size_t errlen);

/* Waits until step's batch is ready and points *x and *y at it; they stay
 * valid until the call for step + 1. Steps must come in order, each once,
 * from first to at most last. Returns the batch's rows. Cannot fail. */
int dlt_prefetch_get(struct dlt_prefetch *p, long step, const float **x,
		     const uint8_t **y);

/* A rows_only feed's step: points *idx at the numbers of its rows in the
 * data set (valid until the next call) and returns how many. The same rows
 * in the same order as dlt_prefetch_get gathers for step. Steps must come
 * in order, each once, from first to at most last. Cannot fail. */
int dlt_prefetch_rows(struct dlt_prefetch *p, long step, const uint32_t **idx);

/* Stops the thread and frees what p holds. Safe on a zeroed p. */
void dlt_prefetch_stop(struct dlt_prefetch *p);

#endif
