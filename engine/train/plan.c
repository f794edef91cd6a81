/* plan.c - the data-parallel plan: shards, per-rank batches, steps */
#include "engine/train/plan.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

void dlt_plan_shard(long n, int p, int r, long *lo, long *hi)
{
	*lo = (long)((long long)r * n / p);
	*hi = (long)((long long)(r + 1) * n / p);
}

int dlt_plan_make(struct dlt_plan *p, long train_n, long test_n, int ranks,
		  int global_batch, int epochs, char *err, size_t errlen)
{
	memset(p, 0, sizeof *p);
	if (ranks < 1 || ranks > DLT_MAX_RANKS) {
		snprintf(err, errlen, "%d ranks (must be 1..%d)", ranks, DLT_MAX_RANKS);
		return -EINVAL;
	}
	if (global_batch < ranks) {
		snprintf(err, errlen, "global batch %d is smaller than the %d ranks",
			 global_batch, ranks);
		return -EINVAL;
	}
	p->ranks = ranks;
	p->global_batch = global_batch;
	p->train_n = train_n;
	p->test_n = test_n;
	p->epochs = epochs;
	p->steps_per_epoch = -1;
	for (int r = 0; r < ranks; r++) {
		long lo, hi, steps;

		p->batch[r] = global_batch / ranks + (r < global_batch % ranks);
		dlt_plan_shard(train_n, ranks, r, &lo, &hi);
		steps = (hi - lo) / p->batch[r];
		if (p->steps_per_epoch < 0 || steps < p->steps_per_epoch)
			p->steps_per_epoch = steps;
	}
	if (p->steps_per_epoch < 1) {
		snprintf(err, errlen, "%ld training images over %d ranks cannot fill one "
			 "batch of %d per rank", train_n, ranks, p->batch[0]);
		return -EINVAL;
	}
	p->total_steps = p->steps_per_epoch * epochs;
	return 0;
}
