/* test_planner.c - configurations of synthetic pools, checked against brute force */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine/planner.h"
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

static void cost_of(const struct dlh_pool_free *p, const struct model *m, int t, int n, int k,
		    struct dlh_config_cost *out)
{
	const struct dlh_devtype *d = &p->type[t];
	double bw = k == 1 ? 300e9 : 25e9, lat = k == 1 ? 5e-6 : 20e-6;
	double comm = n > 1 ? 2.0 * (n - 1) / n * m->grad_bytes / bw + 2.0 * (n - 1) * lat : 0.0;
	double step = m->flops / m->steps / (n * d->flops) + comm;

	out->total_s = 30.0 + m->steps * step;   /* plus start-up */
	out->joules = out->total_s * n * d->watts_busy;
	out->mem_bytes = m->model_bytes + m->act_bytes / n;
	out->fits = out->mem_bytes <= d->mem_bytes;
}

static int synthetic(void *ctx, const struct dlh_pool_free *p, const struct dlh_config *c,
		     struct dlh_config_cost *out)
{
	int sum = 0;

	for (int i = 0; i < c->nodes; i++)   /* the planner's placement is sane */
		if (c->per_node[i] < 1 || c->per_node[i] > p->free[c->node[i]][c->type])
			return -EINVAL;
		else
			sum += c->per_node[i];
	if (sum != c->count)
		return -EINVAL;
	cost_of(p, ctx, c->type, c->count, c->nodes, out);
	return 0;
}

/* The best over every way of taking devices of one type from the nodes
 * (each node 0..free), by energy under the deadline or by time without.
 * Returns 0 when something qualifies. */
static int brute(const struct dlh_pool_free *p, const struct model *m, double deadline,
		 struct dlh_config_cost *best)
{
	int found = 0;

	for (int t = 0; t < p->ntypes; t++) {
		int a[4] = { 0 };

		for (;;) {
			int n = 0, k = 0, i;
			struct dlh_config_cost c;

			for (i = 0; i < 4; i++)
				n += a[i], k += a[i] > 0;
			if (n > 0) {
				cost_of(p, m, t, n, k, &c);
				if (c.fits && (deadline <= 0 || c.total_s <= deadline) &&
				    (!found || (deadline > 0 ? c.joules < best->joules ||
						(c.joules == best->joules && c.total_s < best->total_s) :
						c.total_s < best->total_s ||
						(c.total_s == best->total_s && c.joules < best->joules)))) {
					*best = c;
					found = 1;
				}
			}
			for (i = 0; i < 4 && ++a[i] > p->free[i][t]; i++)
				a[i] = 0;
			if (i == 4)
				break;
		}
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
	RUN(durations_read_like_clocks);
	return CHECK_EXIT();
}
