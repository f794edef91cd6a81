/* plan.c - the data-parallel plan: shards, per-rank batches, steps */
#include "engine/train/plan.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

void dlt_plan_shard(long n, int p, int r, long *lo, long *hi)
{
	*lo = (long)((long long)r * n / p);
	*hi = (long)((long long)(r + 1) * n / p);
}

void dlt_plan_range(const struct dlt_plan *p, long n, int r, long *lo, long *hi)
{
	long long before = 0;

	if (!p->weighted) {
		dlt_plan_shard(n, p->ranks, r, lo, hi);
		return;
	}
	for (int i = 0; i < r; i++)
		before += p->batch[i];
	*lo = (long)(before * n / p->global_batch);
	*hi = (long)((before + p->batch[r]) * n / p->global_batch);
}

int dlt_plan_make(struct dlt_plan *p, long train_n, long test_n, int ranks,
		  int global_batch, int epochs, const int *rank_batch, char *err, size_t errlen)
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
	p->weighted = rank_batch != NULL;
	for (int r = 0; r < ranks; r++)
		p->batch[r] = rank_batch ? rank_batch[r] : global_batch / ranks + (r < global_batch % ranks);
	if (rank_batch) {
		long sum = 0;

		for (int r = 0; r < ranks; r++) {
			if (rank_batch[r] < 1) {
				snprintf(err, errlen, "rank %d's batch is %d (must be >= 1)", r,
					 rank_batch[r]);
				return -EINVAL;
			}
			sum += rank_batch[r];
		}
		if (sum != global_batch) {
			snprintf(err, errlen, "the ranks' batches sum to %ld, the global batch is %d",
				 sum, global_batch);
			return -EINVAL;
		}
	}
	for (int r = 0; r < ranks; r++) {
		long lo, hi, steps;

		dlt_plan_range(p, train_n, r, &lo, &hi);
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

int dlt_plan_pool(struct dlt_plan *p, char *err, size_t errlen)
{
	p->steps_per_epoch = p->train_n / p->global_batch;
	if (p->steps_per_epoch < 1) {
		snprintf(err, errlen, "%ld training images cannot fill one global batch of %d",
			 p->train_n, p->global_batch);
		return -EINVAL;
	}
	p->total_steps = p->steps_per_epoch * p->epochs;
	return 0;
}

int dlt_plan_cap(const struct dlt_plan *p, int r)
{
	long cap = 2L * p->batch[r], most = (long)p->global_batch - (p->ranks - 1);

	return (int)(cap < most ? cap : most);
}

int dlt_plan_split(const double *speed, const int *cap, int n, int global, int *out)
{
	double share[DLT_MAX_RANKS];
	int fixed[DLT_MAX_RANKS];
	long room = 0, left = global, given = 0;

	if (n < 1 || n > DLT_MAX_RANKS || global < n)
		return -EINVAL;
	for (int r = 0; r < n; r++) {
		if (!(speed[r] > 0.0) || !isfinite(speed[r]) || cap[r] < 1)
			return -EINVAL;
		room += cap[r];
		fixed[r] = 0;
	}
	if (room < global)
		return -EINVAL;
	/* shares in proportion; ranks over their cap are held at it and the
	 * rest shared again among the others, until none is over */
	for (int again = 1; again;) {
		double sum = 0.0;

		again = 0;
		for (int r = 0; r < n; r++)
			if (!fixed[r])
				sum += speed[r];
		for (int r = 0; r < n; r++) {
			if (fixed[r])
				continue;
			share[r] = (double)left * speed[r] / sum;
			if (share[r] > cap[r]) {
				share[r] = cap[r];
				fixed[r] = 1;
				left -= cap[r];
				again = 1;
			}
		}
	}
	for (int r = 0; r < n; r++) {
		out[r] = (int)floor(share[r]);
		given += out[r];
	}
	for (; given < global; given++) {   /* largest remainder, room left */
		int m = -1;

		for (int r = 0; r < n; r++)
			if (out[r] < cap[r] && (m < 0 || share[r] - out[r] > share[m] - out[m]))
				m = r;
		out[m]++;
		share[m] = out[m];   /* its remainder is spent */
	}
	for (int r = 0; r < n; r++)   /* at least a row each, from the largest */
		while (out[r] < 1) {
			int m = 0;

			for (int i = 1; i < n; i++)
				if (out[i] > out[m])
					m = i;
			out[m]--;
			out[r]++;
		}
	return 0;
}
