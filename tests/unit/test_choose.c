/* test_choose.c - the decision before a run: batch splits, the planner
 * over a pool with the estimator behind it, lr scaling, the fallbacks */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/plan/choose.h"
#include "tests/unit/check.h"

TEST(split_is_proportional_to_speed_and_sums_to_the_global_batch)
{
	int b[4];
	const double two[2] = { 2.0, 1.0 }, eq[3] = { 1, 1, 1 }, none[3] = { 0, 0, 0 };
	const double skew[3] = { 1000.0, 1.0, 1.0 };

	CHECK(dlh_split_batch(300, two, 2, b) == 0);
	CHECK(b[0] == 200 && b[1] == 100);
	/* equal speeds: dlh-train's own split, the remainder to the first ranks */
	CHECK(dlh_split_batch(65, eq, 3, b) == 0);
	CHECK(b[0] == 22 && b[1] == 22 && b[2] == 21);
	CHECK(dlh_split_batch(65, none, 3, b) == 0);
	CHECK(b[0] == 22 && b[1] == 22 && b[2] == 21);
	/* every rank gets a sample, however slow */
	CHECK(dlh_split_batch(10, skew, 3, b) == 0);
	CHECK(b[0] + b[1] + b[2] == 10 && b[1] >= 1 && b[2] >= 1);
	CHECK(dlh_split_batch(2, eq, 3, b) == -EINVAL);
}

/* The local machine as the pool, with a calibration made up for the test. */
struct world {
	struct dlh_spec spec;
	struct dlh_pool pool;
	struct dlh_calib cal;
	struct dlh_choose_in in;
};

static void world(struct world *w, int cpus)
{
	memset(w, 0, sizeof *w);
	dlh_spec_defaults(&w->spec);
	w->spec.train_limit = 6000;
	w->spec.test_limit = 1000;
	w->spec.epochs = 3;
	dlh_pool_detect(&w->pool, cpus);
	w->cal.when = 1.0;
	w->cal.ndev = 1;
	w->cal.dev[0] = (struct dlh_calib_dev){ .type = "cpu", .gemm_flops = 50e9, .mem_bw = 10e9,
						.mem_bw_all = 8e9, .gemm_all = 0.9 };
	w->cal.ar_alpha = 5e-6;
	w->cal.ar_beta = 1e-9;
	w->cal.sync_s = 2e-6;
	w->cal.launch_s = 0.15;
	w->cal.decode_bw = 2e8;
	w->cal.init_rate = 5e7;
	w->in = (struct dlh_choose_in){ .spec = &w->spec, .pool = &w->pool, .cal = &w->cal };
}

/* Of c's configurations (all of them when there are at most
 * DLH_CHOOSE_ALTS + 1), the count of the one with the fewest joules that
 * finishes within deadline s (ties: the faster); 0 when none does. */
static int brute_force(const struct dlh_choice *c, double s)
{
	const struct dlh_candidate *all[DLH_CHOOSE_ALTS + 1], *best = NULL;
	int n = 0;

	all[n++] = &c->best;
	for (int i = 0; i < c->nalt; i++)
		all[n++] = &c->alt[i];
	for (int i = 0; i < n; i++)
		if (all[i]->cost.total_s <= s &&
		    (!best || all[i]->cost.joules < best->cost.joules ||
		     (all[i]->cost.joules == best->cost.joules &&
		      all[i]->cost.total_s < best->cost.total_s)))
			best = all[i];
	return best ? best->c.count : 0;
}

TEST(without_a_deadline_the_fastest_with_one_the_fewest_joules_that_meet_it)
{
	static struct world w;
	static struct dlh_choice c, d;
	char err[512];

	world(&w, 4);
	w.spec.train_limit = 0;   /* minutes: the configurations differ by seconds */
	CHECK_MSG(dlh_choose(&w.in, &c, err, sizeof err) == 0, "%s", err);
	CHECK(c.estimated == 1 && c.nalt == 3);   /* 1..4 ranks: all of them listed */
	for (int i = 0; i < c.nalt; i++)   /* the fastest first */
		CHECK(c.best.cost.total_s <= c.alt[i].cost.total_s);
	CHECK(c.est.total_s == c.best.cost.total_s && c.ranks == c.best.c.count);
	/* each candidate's time as the deadline: brute force over the list agrees */
	for (int i = -1; i < c.nalt; i++) {
		double t = (i < 0 ? c.best : c.alt[i]).cost.total_s;

		w.spec.deadline = (long)ceil(t);
		CHECK_MSG(dlh_choose(&w.in, &d, err, sizeof err) == 0, "%s", err);
		CHECK_MSG(d.best.c.count == brute_force(&c, (double)w.spec.deadline),
			  "deadline %lds: chose %d ranks, brute force %d", w.spec.deadline,
			  d.best.c.count, brute_force(&c, (double)w.spec.deadline));
		CHECK(d.deadline_s == (double)w.spec.deadline);
	}
}

TEST(impossible_deadline_is_refused_with_the_best_time)
{
	static struct world w;
	static struct dlh_choice c;
	char err[512];

	world(&w, 2);
	w.spec.train_limit = 0;   /* all 60000 images, 3 epochs: far more than a second */
	w.spec.deadline = 1;
	CHECK(dlh_choose(&w.in, &c, err, sizeof err) == -ETIME);
	CHECK_MSG(strstr(err, "meets the deadline 1.0s") && strstr(err, "is estimated at"), "%s", err);
}

TEST(scale_batch_multiplies_the_global_batch_and_lr_and_adds_warmup)
{
	static struct world w;
	static struct dlh_choice c;
	char err[512];

	world(&w, 2);
	w.spec.ranks = 2;
	w.spec.batch_size = 32;
	w.spec.lr = 0.05;
	w.spec.scale_batch = 1;
	CHECK_MSG(dlh_choose(&w.in, &c, err, sizeof err) == 0, "%s", err);
	CHECK(c.ranks == 2 && c.batch[0] == 32 && c.batch[1] == 32);
	CHECK(fabs(c.lr - 0.1) < 1e-12);
	/* 3 epochs of 6000 at 64: 94 x 3 steps; 5/90 of them, rounded up */
	CHECK_MSG(c.warmup_steps == (int)ceil(c.est.steps * 5.0 / 90.0), "warmup %d of %ld steps",
		  c.warmup_steps, c.est.steps);
	CHECK(strstr(c.changes, "linear scaling rule") && strstr(c.changes, "warmup_steps 0 -> "));
	/* lr = auto: the range test runs at the global batch, nothing to scale */
	w.spec.lr = 0.0;
	CHECK(dlh_choose(&w.in, &c, err, sizeof err) == 0);
	CHECK(c.lr == 0.0 && c.warmup_steps == 0 && strstr(c.changes, "lr auto"));
	/* without scale_batch the spec's batch is the global one */
	w.spec.scale_batch = 0;
	w.spec.lr = 0.05;
	CHECK(dlh_choose(&w.in, &c, err, sizeof err) == 0);
	CHECK(c.batch[0] + c.batch[1] == 32 && c.lr == 0.05 && !c.changes[0]);
}

TEST(no_estimate_without_calibration_or_for_a_user_command)
{
	static struct world w;
	static struct dlh_choice c;
	char err[512];

	world(&w, 2);
	w.spec.ranks = 2;
	w.cal.when = 0;
	CHECK(dlh_choose(&w.in, &c, err, sizeof err) == 0);
	CHECK(!c.estimated && strstr(c.why, "not calibrated") && c.ranks == 2);
	CHECK(c.batch[0] + c.batch[1] == w.spec.batch_size);
	w.cal.when = 1;
	snprintf(w.spec.command, sizeof w.spec.command, "/bin/true");
	w.spec.batch_size = 0;   /* as parsed beside a command that does not give them */
	w.spec.lr = 0.0;
	CHECK(dlh_choose(&w.in, &c, err, sizeof err) == 0);
	CHECK(!c.estimated && strstr(c.why, "to be measured before its run") && c.ranks == 2);
	CHECK(c.profile_runs == 1 && c.profile_counts[0] == 2);
	/* a program's batch and lr are its own: the choice has none */
	CHECK(c.batch[0] == 0 && c.batch[1] == 0 && c.lr == 0.0 && c.warmup_steps == 0);
	/* given them with scale_batch: one device's, times the ranks, and said so */
	w.spec.batch_size = 16;
	w.spec.lr = 0.05;
	w.spec.scale_batch = 1;
	CHECK(dlh_choose(&w.in, &c, err, sizeof err) == 0);
	CHECK(c.batch[0] == 16 && c.batch[1] == 16 && c.lr == 0.1 && c.warmup_steps == 0);
	CHECK_MSG(strstr(c.changes, "global_batch 32 = 2 ranks x 16 (scale_batch") &&
		  strstr(c.changes, "lr 0.05 -> 0.1 (DLH_LR): linear scaling rule"), "%s", c.changes);
	struct dlh_buf text = { 0 };
	CHECK(dlh_choice_format(&c, &text) == 0 && strstr(text.data, "planner none: ") &&
	      strstr(text.data, "global_batch 32 = 2 ranks x 16"));
	free(text.data);
	w.spec.batch_size = 64;
	w.spec.lr = 0.01;
	w.spec.scale_batch = 0;
	/* GPUs asked of a pool without: the plan's own refusal says it */
	w.spec.command[0] = '\0';
	w.spec.device = DLH_DEVICE_GPU;
	w.pool.node.gpus = 0;
	CHECK(dlh_choose(&w.in, &c, err, sizeof err) == 0);
	CHECK(!c.estimated);
}

TEST(nothing_free_plans_on_the_whole_pool)
{
	static struct world w;
	static struct dlh_choice c;
	char err[512];

	world(&w, 2);
	int used[DLH_POOL_NODES] = { 0 };
	used[w.pool.local] = w.pool.nodes[w.pool.local].cpus;   /* every slot held */
	w.in.cpus_used = used;
	CHECK_MSG(dlh_choose(&w.in, &c, err, sizeof err) == 0, "%s", err);
	CHECK(c.estimated && c.ranks >= 1 && c.ranks <= 2);
}

TEST(an_uncalibrated_gpu_type_is_estimated_from_its_pool_figures)
{
	static struct world w;
	static struct dlh_choice c;
	char err[512];
	int t;

	world(&w, 2);
	t = w.pool.ntypes++;
	w.pool.type[t] = (struct dlh_pool_type){ .name = "H100", .flops = 60e12, .mem_bytes = 80LL << 30,
						 .bandwidth = 3e12, .watts_idle = 70, .watts_busy = 700,
						 .gpu = 1 };
	w.pool.nodes[w.pool.local].devices[t] = 2;
	w.pool.node.gpus = 2;
	w.spec.device = DLH_DEVICE_GPU;
	CHECK_MSG(dlh_choose(&w.in, &c, err, sizeof err) == 0, "%s", err);
	CHECK_MSG(c.estimated && !strcmp(c.type, "H100"), "%s", c.why);
	CHECK(strstr(c.changes, "H100 is not calibrated"));
	/* far faster than one calibrated core at 50 GFLOP/s would be */
	w.spec.device = DLH_DEVICE_CPU;
	static struct dlh_choice cpu;
	CHECK(dlh_choose(&w.in, &cpu, err, sizeof err) == 0 && cpu.estimated);
	CHECK(c.est.compute_s < cpu.est.compute_s);
	/* without figures it cannot be estimated: the spec runs as written */
	w.pool.type[t].flops = 0;
	w.spec.device = DLH_DEVICE_GPU;
	CHECK(dlh_choose(&w.in, &c, err, sizeof err) == 0);
	CHECK_MSG(!c.estimated && strstr(c.why, "neither calibrated"), "%s", c.why);
}

/* A node with two GPU types: a dry run may plan both together, per-rank
 * batches following each type's speed; a run that launches takes one type
 * (dlh-train takes the local GPUs in index order, not by type). */
TEST(two_gpu_types_are_planned_together_with_batches_by_speed)
{
	static struct world w;
	static struct dlh_choice c;
	static struct dlh_buf out;
	char err[512];
	int a, h;

	world(&w, 2);
	a = w.pool.ntypes++;
	w.pool.type[a] = (struct dlh_pool_type){ .name = "A100", .flops = 20e12, .mem_bytes = 40LL << 30,
						 .bandwidth = 1.5e12, .watts_idle = 50, .watts_busy = 400,
						 .gpu = 1 };
	h = w.pool.ntypes++;
	w.pool.type[h] = (struct dlh_pool_type){ .name = "H100", .flops = 60e12, .mem_bytes = 80LL << 30,
						 .bandwidth = 3e12, .watts_idle = 70, .watts_busy = 700,
						 .gpu = 1 };
	w.pool.nodes[w.pool.local].devices[a] = 1;
	w.pool.nodes[w.pool.local].devices[h] = 1;
	w.pool.node.gpus = 2;
	w.spec.device = DLH_DEVICE_GPU;
	w.spec.batch_size = 256;
	w.spec.ranks = 2;   /* both GPUs, so the plan has to mix the types */
	w.spec.dry_run = 1;
	CHECK_MSG(dlh_choose(&w.in, &c, err, sizeof err) == 0, "%s", err);
	CHECK_MSG(c.estimated && c.ranks == 2 && !strcmp(c.type, "A100+H100"), "%s %s", c.type, c.why);
	/* 20 : 60 TFLOP/s: the A100 (rank 0) takes a quarter */
	CHECK_MSG(c.batch[0] == 64 && c.batch[1] == 192, "%d,%d", c.batch[0], c.batch[1]);
	CHECK(dlh_choice_format(&c, &out) == 0);
	CHECK_MSG(strstr(out.data, "chosen 1 x A100 + 1 x H100 on 1 node: ") &&
		  strstr(out.data, "batches by device speed: 1 x A100 take 64 each, 1 x H100 192 each"),
		  "%s", out.data);
	free(out.data);
	/* launched (not a dry run): GPUs of two types launch too, each rank on its type */
	w.spec.dry_run = 0;
	CHECK_MSG(dlh_choose(&w.in, &c, err, sizeof err) == 0, "%s", err);
	CHECK_MSG(c.estimated && !strcmp(c.type, "A100+H100"), "%s", c.type);
	w.spec.ranks = 0;   /* auto: one H100, the faster type */
	CHECK_MSG(dlh_choose(&w.in, &c, err, sizeof err) == 0, "%s", err);
	CHECK_MSG(c.estimated && !strcmp(c.type, "H100") && c.ranks == 1, "%s %d", c.type, c.ranks);
}

int main(void)
{
	RUN(split_is_proportional_to_speed_and_sums_to_the_global_batch);
	RUN(without_a_deadline_the_fastest_with_one_the_fewest_joules_that_meet_it);
	RUN(impossible_deadline_is_refused_with_the_best_time);
	RUN(scale_batch_multiplies_the_global_batch_and_lr_and_adds_warmup);
	RUN(no_estimate_without_calibration_or_for_a_user_command);
	RUN(nothing_free_plans_on_the_whole_pool);
	RUN(an_uncalibrated_gpu_type_is_estimated_from_its_pool_figures);
	RUN(two_gpu_types_are_planned_together_with_batches_by_speed);
	return CHECK_EXIT();
}
