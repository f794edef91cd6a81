/* sched.c - the queue's order and conservative backfill, as pure functions */
#include "engine/sched/sched.h"

#include <math.h>
#include <stdlib.h>

/* A stretch of time during which some slots are taken. */
struct interval {
	double start, end;     /* [start, end); end may be INFINITY */
	int cpus;              /* slots taken */
};

static int cmp_wait(const void *pa, const void *pb)
{
	const struct dlh_sched_wait *a = pa, *b = pb;
	if (a->priority != b->priority)
		return a->priority > b->priority ? -1 : 1;
	if (a->submitted != b->submitted)
		return a->submitted < b->submitted ? -1 : 1;
	return (a->id > b->id) - (a->id < b->id);
}

void dlh_sched_order(struct dlh_sched_wait *w, size_t n)
{
	if (n > 1)
		qsort(w, n, sizeof *w, cmp_wait);
}

/* Slots taken at time t. */
static int used_at(const struct interval *iv, size_t n, double t)
{
	int used = 0;
	for (size_t i = 0; i < n; i++)
		if (iv[i].start <= t && t < iv[i].end)
			used += iv[i].cpus;
	return used;
}

/* 1 when need slots stay free over [from, to): usage only rises where an
 * interval starts, so checking from and every start inside is enough. */
static int fits(const struct interval *iv, size_t n, int total, int need, double from, double to)
{
	if (used_at(iv, n, from) + need > total)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (iv[i].start > from && iv[i].start < to && used_at(iv, n, iv[i].start) + need > total)
			return 0;
	return 1;
}

void dlh_sched_plan(int total, double now, const struct dlh_sched_run *run, size_t nrun,
		    struct dlh_sched_wait *w, size_t nw)
{
	size_t cap = nrun + (nw < DLH_SCHED_DEPTH ? nw : DLH_SCHED_DEPTH);
	struct interval *iv = malloc((cap ? cap : 1) * sizeof *iv);
	size_t n = 0;
	for (size_t i = 0; i < nw; i++)
		w[i].start = INFINITY;
	if (!iv)
		return;
	for (size_t i = 0; i < nrun; i++) {
		/* a run past its estimate ends any moment now */
		double end = run[i].end > now ? run[i].end : now + 1.0;
		iv[n++] = (struct interval){ now, end, run[i].cpus };
	}
	int unknown_ahead = 0;  /* an earlier job waits with no estimated start */
	for (size_t k = 0; k < nw && k < DLH_SCHED_DEPTH; k++) {
		struct dlh_sched_wait *j = &w[k];
		if (j->cpus > total || j->cpus <= 0)
			continue;
		double dur = j->duration > 0 ? j->duration : INFINITY;
		double best = INFINITY;
		/* the earliest start is now or when some interval ends; a job of
		 * unknown length never passes one whose start is unknown too */
		if (unknown_ahead && isinf(dur)) {
			j->start = INFINITY;
			continue;
		}
		if (fits(iv, n, total, j->cpus, now, now + dur))
			best = now;
		for (size_t i = 0; i < n; i++) {
			double t = iv[i].end;
			if (t <= now || t >= best || isinf(t))
				continue;
			if (fits(iv, n, total, j->cpus, t, t + dur))
				best = t;
		}
		j->start = best;
		if (!isinf(best))
			iv[n++] = (struct interval){ best, best + dur, j->cpus };
		else
			unknown_ahead = 1;
	}
	free(iv);
}
