/* test_planner.c - configurations of synthetic pools, checked against brute force */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine/plan/planner.h"
#include "tests/unit/check.h"

/* 4 nodes x 8 GPUs of two types, some of them busy. */
static void gpu_pool(struct dlh_pool_free *p)
{
	memset(p, 0, sizeof *p);
	p->ntypes = 2;
	p->type[0] = (struct dlh_devtype){ .name = "A100", .flops = 19.5e12, .mem_bytes = 40e9,
					   .watts_idle = 50, .watts_busy = 400 };
	p->type[1] = (struct dlh_devtype){ .name = "H100", .flops = 60e12, .mem_bytes = 80e9,
					   .watts_idle = 70, .watts_busy = 700 };
	p->nnodes = 4;
	p->free[0][0] = 8;   /* two A100 nodes, one partly busy */
	p->free[1][0] = 5;
	p->free[2][1] = 3;   /* two H100 nodes, one partly busy */
	p->free[3][1] = 8;
}

/* A run's model: total FLOPs over steps; per step a ring allreduce of the
 * gradient, over NVLink within a node and a slower network across nodes;
 * memory: the model plus activations of the per-device batch. */
struct model {
	double flops, steps, grad_bytes, model_bytes, act_bytes;
};

/* The cost of n[t] devices of each type t on k nodes: batches in
 * proportion to the devices' FLOP/s, so a step computes at their sum; a
 * device's activations are its share of the batch. */
static void cost_of(const struct dlh_pool_free *p, const struct model *m, const int *n, int k,
		    struct dlh_config_cost *out)
{
	double bw = k == 1 ? 300e9 : 25e9, lat = k == 1 ? 5e-6 : 20e-6;
	double flops = 0.0, watts = 0.0;
	int all = 0;

	for (int t = 0; t < p->ntypes; t++) {
		all += n[t];
		flops += n[t] * p->type[t].flops;
		watts += n[t] * p->type[t].watts_busy;
	}
	double comm = all > 1 ? 2.0 * (all - 1) / all * m->grad_bytes / bw + 2.0 * (all - 1) * lat : 0.0;
	double step = m->flops / m->steps / flops + comm;

	out->total_s = 30.0 + m->steps * step;   /* plus start-up */
	out->joules = out->total_s * watts;
	out->mem_bytes = 0.0;
	out->fits = 1;
	for (int t = 0; t < p->ntypes; t++) {
		double need = m->model_bytes + m->act_bytes * p->type[t].flops / flops;

		if (!n[t])
			continue;
		out->mem_bytes = fmax(out->mem_bytes, need);
		out->fits &= need <= p->type[t].mem_bytes;
	}
}

static int synthetic(void *ctx, const struct dlh_pool_free *p, const struct dlh_config *c,
		     struct dlh_config_cost *out)
{
	int sum = 0, n[DLH_PLANNER_TYPES] = { 0 }, used[DLH_PLANNER_NODES] = { 0 }, k = 0;

	for (int q = 0; q < c->nparts; q++) {   /* the planner's placement is sane */
		const struct dlh_part *a = &c->part[q];
		int part = 0;

		if (q && a->type == c->part[0].type)
			return -EINVAL;
		for (int i = 0; i < a->nodes; i++) {
			if (a->per_node[i] < 1 || a->per_node[i] > p->free[a->node[i]][a->type])
				return -EINVAL;
			part += a->per_node[i];
			k += !used[a->node[i]]++;
		}
		if (part != a->count)
			return -EINVAL;
		n[a->type] += a->count;
		sum += part;
	}
	if (sum != c->count || k != c->nodes)
		return -EINVAL;
	cost_of(p, ctx, n, k, out);
	return 0;
}

/* The best over every way of taking devices from the nodes (each node,
 * each type 0..free: one type or several), by energy under the deadline or
 * by time without. Returns 0 when something qualifies. */
static int brute(const struct dlh_pool_free *p, const struct model *m, double deadline,
		 struct dlh_config_cost *best)
{
	enum { NODES = 4, TYPES = 2 };
	int a[NODES * TYPES] = { 0 }, found = 0;

	for (;;) {
		int n[DLH_PLANNER_TYPES] = { 0 }, k = 0, all = 0, i;
		struct dlh_config_cost c;

		for (int nd = 0; nd < NODES; nd++) {
			int here = 0;

			for (int t = 0; t < TYPES; t++) {
				n[t] += a[nd * TYPES + t];
				here += a[nd * TYPES + t];
			}
			k += here > 0;
			all += here;
		}
		if (all > 0) {
			cost_of(p, m, n, k, &c);
			if (c.fits && (deadline <= 0 || c.total_s <= deadline) &&
			    (!found || (deadline > 0 ? c.joules < best->joules ||
					(c.joules == best->joules && c.total_s < best->total_s) :
					c.total_s < best->total_s ||
					(c.total_s == best->total_s && c.joules < best->joules)))) {
				*best = c;
				found = 1;
			}
		}
		for (i = 0; i < NODES * TYPES && ++a[i] > p->free[i / TYPES][i % TYPES]; i++)
			a[i] = 0;
		if (i == NODES * TYPES)
			break;
	}
	return found ? 0 : -1;
}

/* ~10 H100-hours; a model that needs at least 2 A100s but fits 1 H100 */
static const struct model big = { .flops = 2.1e18, .steps = 1e5, .grad_bytes = 1e9,
				   .model_bytes = 24e9, .act_bytes = 40e9 };

TEST(deadline_picks_the_fewest_joules_as_brute_force)
{
	/* 1 H100 takes 9.7 h; 2 on a node 5.0 h; 6 on a node 1.8 h; 8 1.4 h */
	const double deadlines[] = { 3600 * 48, 3600 * 9, 3600 * 5, 3600 * 2, 3600 * 1.5, 0 };
	struct dlh_pool_free p;
	struct dlh_candidate best, alt[4];
	struct dlh_config_cost want;
	char err[512];
	int nalt;

	gpu_pool(&p);
	for (size_t i = 0; i < sizeof deadlines / sizeof deadlines[0]; i++) {
		int rc = dlh_planner_choose(&p, deadlines[i], 0, synthetic, (void *)&big, &best,
					    alt, 4, &nalt, err, sizeof err);

		CHECK_MSG(brute(&p, &big, deadlines[i], &want) == 0, "deadline %g: brute force "
			  "found nothing", deadlines[i]);
		CHECK_MSG(rc == 0, "deadline %g: %s", deadlines[i], err);
		CHECK_MSG(best.cost.joules == want.joules && best.cost.total_s == want.total_s,
			  "deadline %g: planner %g J %g s, brute force %g J %g s", deadlines[i],
			  best.cost.joules, best.cost.total_s, want.joules, want.total_s);
		for (int a = 0; a < nalt; a++) {   /* alternatives: worse, in order, in time */
			const struct dlh_config_cost *prev = a ? &alt[a - 1].cost : &best.cost;

			if (deadlines[i] > 0)
				CHECK(alt[a].cost.joules >= prev->joules &&
				      alt[a].cost.total_s <= deadlines[i]);
			else
				CHECK(alt[a].cost.total_s >= prev->total_s);
		}
		CHECK_MSG(nalt == 4 || (deadlines[i] > 0 && deadlines[i] < 3600 * 9),
			  "deadline %g: %d alternatives", deadlines[i], nalt);
	}
}

TEST(loose_deadline_takes_one_node_of_the_efficient_type)
{
	struct dlh_pool_free p;
	struct dlh_candidate best, alt[2];
	char err[512], what[256];
	int nalt;

	gpu_pool(&p);
	CHECK(dlh_planner_choose(&p, 3600 * 48, 0, synthetic, (void *)&big, &best, alt, 2, &nalt,
				 err, sizeof err) == 0);
	dlh_config_describe(&p, &best.c, what, sizeof what);
	/* H100s do more per joule; 1 fits (24 + 40 GB < 80 GB) and is cheapest */
	CHECK_MSG(strcmp(what, "1 x H100 on 1 node") == 0, "%s", what);
	/* without a deadline: the fastest, every H100, across both nodes */
	CHECK(dlh_planner_choose(&p, 0, 0, synthetic, (void *)&big, &best, alt, 2, &nalt,
				 err, sizeof err) == 0);
	dlh_config_describe(&p, &best.c, what, sizeof what);
	CHECK_MSG(strcmp(what, "8 x H100 on 1 node") == 0, "%s", what);
	/* a cap on the count */
	CHECK(dlh_planner_choose(&p, 0, 2, synthetic, (void *)&big, &best, alt, 2, &nalt,
				 err, sizeof err) == 0);
	CHECK(best.c.count <= 2);
}

TEST(impossible_deadline_is_refused_with_the_best_time)
{
	struct dlh_pool_free p;
	struct dlh_candidate best, alt[2];
	struct dlh_config_cost fastest;
	char err[512], when[32];
	int nalt;

	gpu_pool(&p);
	CHECK(brute(&p, &big, 0, &fastest) == 0);
	CHECK(dlh_planner_choose(&p, 600, 0, synthetic, (void *)&big, &best, alt, 2, &nalt,
				 err, sizeof err) == -ETIME);
	dlh_duration_text(fastest.total_s, when, sizeof when);
	CHECK_MSG(strstr(err, "deadline 10m00s") && strstr(err, when) && strstr(err, "H100"),
		  "%s (fastest %s)", err, when);
	CHECK(best.cost.total_s == fastest.total_s);
}

TEST(nothing_fits_is_refused_with_the_need)
{
	struct dlh_pool_free p;
	struct dlh_candidate best, alt[2];
	struct model huge = big;
	char err[512];
	int nalt;

	gpu_pool(&p);
	huge.model_bytes = 90e9;   /* more than any device, however the batch is split */
	CHECK(dlh_planner_choose(&p, 0, 0, synthetic, &huge, &best, alt, 2, &nalt,
				 err, sizeof err) == -ENOSPC);
	CHECK_MSG(strstr(err, "fits in memory") && strstr(err, "GiB"), "%s", err);
}

/* One node with 4 A100 and 2 H100: neither type alone finishes in 4 hours
 * (2 H100 4.9 h, 4 A100 7.6 h); 2 H100 with 2 A100 do (3.8 h), with the
 * fewest joules of what does; the planner finds it as brute force does. */
TEST(two_types_together_meet_a_deadline_neither_meets_alone)
{
	struct dlh_pool_free p;
	struct dlh_candidate best, alt[4];
	struct dlh_config_cost want;
	char err[512], what[256];
	int nalt;

	gpu_pool(&p);
	memset(p.free, 0, sizeof p.free);
	p.free[0][0] = 4;
	p.free[0][1] = 2;
	CHECK(dlh_planner_choose(&p, 3600 * 4, 0, synthetic, (void *)&big, &best, alt, 4, &nalt,
				 err, sizeof err) == 0);
	CHECK(brute(&p, &big, 3600 * 4, &want) == 0);
	CHECK_MSG(best.cost.joules == want.joules && best.cost.total_s == want.total_s,
		  "planner %g J %g s, brute force %g J %g s", best.cost.joules, best.cost.total_s,
		  want.joules, want.total_s);
	dlh_config_describe(&p, &best.c, what, sizeof what);
	CHECK_MSG(strcmp(what, "2 x A100 + 2 x H100 on 1 node") == 0, "%s", what);
	CHECK(best.c.nparts == 2 && best.c.count == 4 && best.c.nodes == 1);
	/* no deadline: the fastest is every device of the node */
	CHECK(dlh_planner_choose(&p, 0, 0, synthetic, (void *)&big, &best, alt, 4, &nalt,
				 err, sizeof err) == 0);
	dlh_config_describe(&p, &best.c, what, sizeof what);
	CHECK_MSG(strcmp(what, "4 x A100 + 2 x H100 on 1 node") == 0, "%s", what);
}

/* Counts the configurations it is asked to estimate. */
static int counting(void *ctx, const struct dlh_pool_free *p, const struct dlh_config *c,
		    struct dlh_config_cost *out)
{
	(*(long *)ctx)++;
	out->total_s = 1000.0 / c->count;
	out->joules = 10.0 * c->count;
	out->mem_bytes = 1;
	out->fits = 1;
	(void)p;
	return 0;
}

/* 2 x 64 nodes of 8 GPUs: 512 x 512 pairs of counts would be 262144
 * estimates; the ladder keeps two types' pairs near DLH_PLANNER_MIXED and
 * still tries every device of both. */
TEST(many_devices_of_two_types_are_tried_on_a_ladder)
{
	static struct dlh_pool_free p;
	struct dlh_candidate best, alt[2];
	char err[512], what[256];
	long calls = 0;
	int nalt;

	gpu_pool(&p);
	p.nnodes = 128;
	for (int i = 0; i < 128; i++) {
		p.free[i][0] = i < 64 ? 8 : 0;
		p.free[i][1] = i < 64 ? 0 : 8;
	}
	CHECK(dlh_planner_choose(&p, 0, 0, counting, &calls, &best, alt, 2, &nalt, err,
				 sizeof err) == 0);
	dlh_config_describe(&p, &best.c, what, sizeof what);
	CHECK_MSG(strcmp(what, "512 x A100 + 512 x H100 on 128 nodes") == 0, "%s", what);
	/* one type: 512 counts x their spreads (at most 64 each) twice, below 2 x 512 x 64 */
	CHECK_MSG(calls < 2L * 512 * 64 + 2 * DLH_PLANNER_MIXED, "%ld estimates", calls);
}

TEST(durations_read_like_clocks)
{
	char s[32];

	dlh_duration_text(12.34, s, sizeof s);
	CHECK(strcmp(s, "12.3s") == 0);
	dlh_duration_text(245, s, sizeof s);
	CHECK(strcmp(s, "4m05s") == 0);
	dlh_duration_text(3723, s, sizeof s);
	CHECK(strcmp(s, "1h02m03s") == 0);
}

int main(void)
{
	RUN(deadline_picks_the_fewest_joules_as_brute_force);
	RUN(loose_deadline_takes_one_node_of_the_efficient_type);
	RUN(impossible_deadline_is_refused_with_the_best_time);
	RUN(nothing_fits_is_refused_with_the_need);
	RUN(two_types_together_meet_a_deadline_neither_meets_alone);
	RUN(many_devices_of_two_types_are_tried_on_a_ladder);
	RUN(durations_read_like_clocks);
	return CHECK_EXIT();
}
