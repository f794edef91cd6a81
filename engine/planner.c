/* planner.c - choosing where a job runs */
#include "engine/planner.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

void dlh_duration_text(double s, char *out, size_t len)
{
	long t = (long)(s + 0.5);

	if (s < 60.0)
		snprintf(out, len, "%.1fs", s);
	else if (t < 3600)
		snprintf(out, len, "%ldm%02lds", t / 60, t % 60);
	else
		snprintf(out, len, "%ldh%02ldm%02lds", t / 3600, t / 60 % 60, t % 60);
}

void dlh_config_describe(const struct dlh_pool_free *pool, const struct dlh_config *c,
			 char *out, size_t len)
{
	size_t n = (size_t)snprintf(out, len, "%d x %s on %d node%s", c->count,
				    pool->type[c->type].name, c->nodes, c->nodes == 1 ? "" : "s");

	for (int i = 0; c->nodes > 1 && i < c->nodes && n < len; i++)
		n += (size_t)snprintf(out + n, len - n, "%s%d%s", i ? "+" : " (",
				      c->per_node[i], i == c->nodes - 1 ? ")" : "");
}

/* The nodes with free devices of type t, most free first (ties: lower
 * index); returns how many. */
static int rank_nodes(const struct dlh_pool_free *pool, int t, int *order)
{
	int k = 0;

	for (int i = 0; i < pool->nnodes; i++) {
		int j;

		if (pool->free[i][t] <= 0)
			continue;
		for (j = k++; j > 0 && pool->free[order[j - 1]][t] < pool->free[i][t]; j--)
			order[j] = order[j - 1];
		order[j] = i;
	}
	return k;
}

/* Places count devices of type t on the first k nodes of order as evenly
 * as their free devices allow. Returns 0, or -1 when they cannot hold
 * count with at least one device each. */
static int place(const struct dlh_pool_free *pool, int t, const int *order, int k, int count,
		 struct dlh_config *c)
{
	memset(c, 0, sizeof *c);
	c->type = t;
	c->count = count;
	c->nodes = k;
	if (count < k)
		return -1;
	for (int i = 0; i < k; i++)
		c->node[i] = order[i];
	for (int r = 0; r < count; r++) {   /* one more to the least-filled node with room */
		int pick = -1;

		for (int i = 0; i < k; i++)
			if (c->per_node[i] < pool->free[order[i]][t] &&
			    (pick < 0 || c->per_node[i] < c->per_node[pick]))
				pick = i;
		if (pick < 0)
			return -1;
		c->per_node[pick]++;
	}
	return 0;
}

/* 1 when a is a better choice than b: under a deadline fewer joules (then
 * faster), else faster (then fewer joules). */
static int better(const struct dlh_config_cost *a, const struct dlh_config_cost *b, int by_energy)
{
	if (by_energy)
		return a->joules < b->joules || (a->joules == b->joules && a->total_s < b->total_s);
	return a->total_s < b->total_s || (a->total_s == b->total_s && a->joules < b->joules);
}

/* Inserts cand into top, sorted best first (n entries, room for cap):
 * when full, cand takes the last place only if it beats it. */
static void keep(struct dlh_candidate *top, int *n, int cap, const struct dlh_candidate *cand,
		 int by_energy)
{
	int j = *n;

	if (j == cap) {
		if (!better(&cand->cost, &top[cap - 1].cost, by_energy))
			return;
		j = cap - 1;
	} else {
		(*n)++;
	}
	for (; j > 0 && better(&cand->cost, &top[j - 1].cost, by_energy); j--)
		top[j] = top[j - 1];
	top[j] = *cand;
}

int dlh_planner_choose(const struct dlh_pool_free *pool, double deadline_s, int max_count,
		       dlh_estimate_fn est, void *ctx, struct dlh_candidate *best,
		       struct dlh_candidate *alts, int nalts, int *nalt, char *err, size_t errlen)
{
	enum { TOP = 16 };
	struct dlh_candidate top[TOP], fastest, cand;
	int order[DLH_PLANNER_NODES], ntop = 0, any_fit = 0, any = 0;
	const int by_energy = deadline_s > 0.0;
	double need = 0.0;
	int cap = nalts + 1 < TOP ? nalts + 1 : TOP;

	*nalt = 0;
	for (int t = 0; t < pool->ntypes; t++) {
		int k = rank_nodes(pool, t, order), total = 0;

		for (int i = 0; i < k; i++)
			total += pool->free[order[i]][t];
		if (max_count > 0 && total > max_count)
			total = max_count;
		for (int n = 1; n <= total; n++)
			for (int nodes = 1; nodes <= k && nodes <= n; nodes++) {
				if (place(pool, t, order, nodes, n, &cand.c) < 0)
					continue;   /* too few nodes to hold n */
				if (est(ctx, pool, &cand.c, &cand.cost) < 0)
					continue;
				if (!cand.cost.fits) {
					if (!any_fit && (need == 0.0 || cand.cost.mem_bytes < need))
						need = cand.cost.mem_bytes;
					continue;
				}
				if (!any_fit || better(&cand.cost, &fastest.cost, 0))
					fastest = cand;
				any_fit = 1;
				if (by_energy && cand.cost.total_s > deadline_s)
					continue;
				any = 1;
				keep(top, &ntop, cap, &cand, by_energy);
			}
	}
	if (!any_fit) {
		snprintf(err, errlen, "no configuration of the free pool fits in memory: the "
			 "smallest need is %.1f GiB per device", need / 1073741824.0);
		return -ENOSPC;
	}
	if (!any) {
		char when[32], lim[32], what[256];

		dlh_duration_text(fastest.cost.total_s, when, sizeof when);
		dlh_duration_text(deadline_s, lim, sizeof lim);
		dlh_config_describe(pool, &fastest.c, what, sizeof what);
		snprintf(err, errlen, "no configuration of the free pool meets the deadline %s: "
			 "the fastest, %s, is estimated at %s", lim, what, when);
		*best = fastest;
		return -ETIME;
	}
	*best = top[0];
	for (int i = 1; i < ntop && *nalt < nalts; i++)
		alts[(*nalt)++] = top[i];
	return 0;
}
