/* plan.h - the data-parallel plan: shards, per-rank batches, steps */
#ifndef DLT_PLAN_H
#define DLT_PLAN_H

#include <stddef.h>

#define DLT_MAX_RANKS 1024     /* most MPI ranks */

struct dlt_plan {
	int ranks;                    /* MPI ranks, P */
	int global_batch;             /* sum of batch[] */
	int batch[DLT_MAX_RANKS];     /* per-rank batch: global/P, +1 on the first global%P ranks,
				       * or as given (devices of different speeds) */
	int weighted;                 /* 1 = batches were given: shards follow them */
	long train_n;                 /* training images used, all ranks */
	long test_n;                  /* test images used, all ranks */
	long steps_per_epoch;         /* min over ranks of floor(shard / batch) */
	long total_steps;             /* steps_per_epoch * epochs */
	int epochs;                   /* epochs to train */
};

/* Rank r of p takes items [r*n/p, (r+1)*n/p) of n. Cannot fail. */
void dlt_plan_shard(long n, int p, int r, long *lo, long *hi);

/* Fills p for train_n training and test_n test items over ranks ranks
 * with the given global batch and epochs. rank_batch, when not NULL, gives
 * each rank's batch (ranks of them, each >= 1, summing to global_batch);
 * the shards then follow the batches, so every rank's shard lasts the same
 * number of steps. Returns 0, or -EINVAL with a message in err (too many
 * ranks, a batch smaller than the ranks, batches that do not sum to the
 * global one, or a shard smaller than its batch). */
int dlt_plan_make(struct dlt_plan *p, long train_n, long test_n, int ranks,
		  int global_batch, int epochs, const int *rank_batch, char *err, size_t errlen);

/* Rank r's items of n under p: dlt_plan_shard, or with given batches the
 * range proportional to the ranks' batches. Cannot fail. */
void dlt_plan_range(const struct dlt_plan *p, long n, int r, long *lo, long *hi);

/* Every rank reads the whole training set (batches re-split during the
 * run, dlt_feed global): an epoch is floor(train_n / global batch) steps.
 * Returns 0, or -EINVAL with a message in err when that is no step. */
int dlt_plan_pool(struct dlt_plan *p, char *err, size_t errlen);

/* The most rows rank r may be given by a re-split: twice its planned
 * batch, within what the global batch leaves when every other rank has one
 * row. */
int dlt_plan_cap(const struct dlt_plan *p, int r);

/* Splits a global batch over n ranks in proportion to speed[] (samples a
 * second, > 0), each rank's share at least 1 and at most cap[r]; what a
 * capped rank cannot take goes to the others in proportion; rounding by
 * largest remainder (ties to the lower rank), so every rank that runs
 * this on the same numbers gets the same out[]. Returns 0, or -EINVAL
 * when a speed is not positive and finite or the caps cannot hold the
 * global batch (n ranks need n rows at least). */
int dlt_plan_split(const double *speed, const int *cap, int n, int global, int *out);

#endif
