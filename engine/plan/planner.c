/* planner.c - choosing where a job runs */
#include "engine/plan/planner.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
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
	const struct dlh_part *a = &c->part[0];
	size_t n;

	if (c->nparts > 1) {
		snprintf(out, len, "%d x %s + %d x %s on %d node%s", a->count, pool->type[a->type].name,
			 c->part[1].count, pool->type[c->part[1].type].name, c->nodes,
			 c->nodes == 1 ? "" : "s");
		return;
	}
	n = (size_t)snprintf(out, len, "%d x %s on %d node%s", c->count,
			     pool->type[a->type].name, c->nodes, c->nodes == 1 ? "" : "s");
	for (int i = 0; c->nodes > 1 && i < c->nodes && n < len; i++)
		n += (size_t)snprintf(out + n, len - n, "%s%d%s", i ? "+" : " (",
				      a->per_node[i], i == c->nodes - 1 ? ")" : "");
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
		 struct dlh_part *c)
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

/* The fewest of the first nodes of order (k of them) that hold count
 * devices of type t; k + 1 when they cannot. */
static int fewest_nodes(const struct dlh_pool_free *pool, int t, const int *order, int k,
			int count)
{
	int held = 0, i = 0;

	while (i < k && held < count)
		held += pool->free[order[i++]][t];
	return held >= count ? i : k + 1;
}

/* The next count after n on the ladder to top: every count when all is
 * set, else steps of at most an eighth of n; top always comes. */
static int next_count(int n, int top, int all)
{
	int step = all || n < 8 ? 1 : n / 8;

	return n < top && n + step > top ? top : n + step;
}

/* Sets c's totals (ranks, distinct nodes) from its parts. */
static void config_totals(struct dlh_config *c)
{
	c->count = 0;
	c->nodes = 0;
	for (int p = 0; p < c->nparts; p++) {
		const struct dlh_part *a = &c->part[p];

		c->count += a->count;
		for (int i = 0; i < a->nodes; i++) {
			int seen = 0;

			for (int q = 0; q < p && !seen; q++)
				for (int j = 0; j < c->part[q].nodes; j++)
					seen |= c->part[q].node[j] == a->node[i];
			c->nodes += !seen;
		}
	}
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

/* What dlh_planner_choose keeps while it goes through the candidates. */
struct pick {
	dlh_estimate_fn est;
	void *ctx;
	int by_energy;                        /* a deadline: fewest joules first */
	double deadline_s;
	struct dlh_candidate top[16];         /* the best so far, best first */
	int ntop, cap;                        /* entries of top, and how many to keep */
	struct dlh_candidate fastest;         /* the fastest that fits */
	int any_fit, any;                     /* something fits; something qualifies */
	double need;                          /* the smallest memory need while none fits */
	struct dlh_candidate cand;            /* the one being tried */
	int order[DLH_PLANNER_NODES], order2[DLH_PLANNER_NODES];
};

/* Estimates k->cand and keeps it where it belongs. */
static void consider(struct pick *k, const struct dlh_pool_free *pool)
{
	struct dlh_candidate *cand = &k->cand;

	config_totals(&cand->c);
	if (k->est(k->ctx, pool, &cand->c, &cand->cost) < 0)
		return;
	if (!cand->cost.fits) {
		if (!k->any_fit && (k->need == 0.0 || cand->cost.mem_bytes < k->need))
			k->need = cand->cost.mem_bytes;
		return;
	}
	if (!k->any_fit || better(&cand->cost, &k->fastest.cost, 0))
		k->fastest = *cand;
	k->any_fit = 1;
	if (k->by_energy && cand->cost.total_s > k->deadline_s)
		return;
	k->any = 1;
	keep(k->top, &k->ntop, k->cap, cand, k->by_energy);
}

/* Free devices of type t (at most max_count when > 0); the nodes that hold
 * them, most free first, into order, and their number into *nn. */
static int free_of(const struct dlh_pool_free *pool, int t, int max_count, int *order, int *nn)
{
	int total = 0;

	*nn = rank_nodes(pool, t, order);
	for (int i = 0; i < *nn; i++)
		total += pool->free[order[i]][t];
	return max_count > 0 && total > max_count ? max_count : total;
}

/* Every configuration of devices of type t: each count, each node spread. */
static void one_type(struct pick *k, const struct dlh_pool_free *pool, int t, int max_count)
{
	int nn, total = free_of(pool, t, max_count, k->order, &nn);

	for (int n = 1; n <= total; n++)
		for (int nodes = 1; nodes <= nn && nodes <= n; nodes++) {
			memset(&k->cand.c, 0, sizeof k->cand.c);
			k->cand.c.nparts = 1;
			if (place(pool, t, k->order, nodes, n, &k->cand.c.part[0]) < 0)
				continue;   /* too few nodes to hold n */
			consider(k, pool);
		}
}

/* Every configuration of devices of types t and u together: each pair of
 * counts (on a ladder when there are too many), each part on its fewest
 * nodes. */
static void two_types(struct pick *k, const struct dlh_pool_free *pool, int t, int u,
		      int max_count)
{
	int nt, nu, tmax = free_of(pool, t, max_count, k->order, &nt);
	int umax = free_of(pool, u, max_count, k->order2, &nu);
	int all = (long)tmax * umax <= DLH_PLANNER_MIXED;

	for (int a = 1; a <= tmax; a = next_count(a, tmax, all))
		for (int b = 1; b <= umax && (max_count <= 0 || a + b <= max_count);
		     b = next_count(b, umax, all)) {
			memset(&k->cand.c, 0, sizeof k->cand.c);
			k->cand.c.nparts = 2;
			if (place(pool, t, k->order, fewest_nodes(pool, t, k->order, nt, a), a,
				  &k->cand.c.part[0]) < 0 ||
			    place(pool, u, k->order2, fewest_nodes(pool, u, k->order2, nu, b), b,
				  &k->cand.c.part[1]) < 0)
				continue;
			consider(k, pool);
		}
}

/* The best of k into *best and the next best into alts, or why none. */
static int result(const struct pick *k, const struct dlh_pool_free *pool,
		  struct dlh_candidate *best, struct dlh_candidate *alts, int nalts, int *nalt,
		  char *err, size_t errlen)
{
	if (!k->any_fit) {
		snprintf(err, errlen, "no configuration of the free pool fits in memory: the "
			 "smallest need is %.1f GiB per device", k->need / 1073741824.0);
		return -ENOSPC;
	}
	if (!k->any) {
		char when[32], lim[32], what[256];

		dlh_duration_text(k->fastest.cost.total_s, when, sizeof when);
		dlh_duration_text(k->deadline_s, lim, sizeof lim);
		dlh_config_describe(pool, &k->fastest.c, what, sizeof what);
		snprintf(err, errlen, "no configuration of the free pool meets the deadline %s: "
			 "the fastest, %s, is estimated at %s", lim, what, when);
		*best = k->fastest;
		return -ETIME;
	}
	*best = k->top[0];
	for (int i = 1; i < k->ntop && *nalt < nalts; i++)
		alts[(*nalt)++] = k->top[i];
	return 0;
}

int dlh_planner_choose(const struct dlh_pool_free *pool, double deadline_s, int max_count,
		       dlh_estimate_fn est, void *ctx, struct dlh_candidate *best,
		       struct dlh_candidate *alts, int nalts, int *nalt, char *err, size_t errlen)
{
	struct pick *k = calloc(1, sizeof *k);   /* large: off the stack */
	int rc;

	*nalt = 0;
	if (!k) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	k->est = est;
	k->ctx = ctx;
	k->by_energy = deadline_s > 0.0;
	k->deadline_s = deadline_s;
	k->cap = nalts + 1 < 16 ? nalts + 1 : 16;
	for (int t = 0; t < pool->ntypes; t++)
		one_type(k, pool, t, max_count);
	for (int t = 0; t < pool->ntypes; t++)
		for (int u = t + 1; u < pool->ntypes; u++)
			two_types(k, pool, t, u, max_count);
	rc = result(k, pool, best, alts, nalts, nalt, err, errlen);
	free(k);
	return rc;
}
