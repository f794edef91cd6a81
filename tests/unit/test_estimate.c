/* test_estimate.c - the estimator's properties on synthetic calibrations,
 * a case computed by hand, the estimate file, actuals read from a
 * fabricated job dir, and the history's least-squares refit */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/plan/cost.h"
#include "engine/plan/estimate.h"
#include "tests/unit/check.h"

#define HUGE_BW 1e30   /* bandwidth that makes every memory term vanish */

static struct dlh_spec spec;
static struct dlh_estimate_in in;

/* A calibration of flat speeds: GEMM at flops on every shape, every copy
 * at bw, the other terms as given by the machine-wide numbers. */
static void flat_calib(struct dlh_calib *c, double flops, double bw)
{
	memset(c, 0, sizeof *c);
	c->when = 1;
	c->ndev = 2;
	for (int d = 0; d < 2; d++) {
		struct dlh_calib_dev *v = &c->dev[d];
		snprintf(v->type, sizeof v->type, "%s", d ? "slow" : "cpu");
		v->gemm_flops = d ? flops / 2 : flops;
		v->mem_bw = v->mem_bw_all = bw;
		v->gemm_all = 1.0;
		v->grid = 1;
		for (int i = 0; i < DLH_CALIB_BW_N; i++)
			v->bw[i] = bw;
		for (int i = 0; i < DLH_CALIB_GEMM_N; i++)
			for (int j = 0; j < DLH_CALIB_GEMM_N; j++)
				for (int l = 0; l < DLH_CALIB_GEMM_N; l++)
					v->gemm[i][j][l] = (float)v->gemm_flops;
	}
	c->write_bw = HUGE_BW;
}

/* A realistic calibration (this machine's figures, rounded). */
static void real_calib(struct dlh_calib *c)
{
	flat_calib(c, 1.2e11, 2e10);
	c->ar_alpha = 2e-6;
	c->ar_beta = 2e-10;
	c->sync_s = 5e-7;
	c->launch_s = 0.1;
	c->finalize_s = 0.05;
	c->decode_bw = 1.6e8;
	c->init_rate = 6e7;
	c->write_s = 1e-3;
	c->write_bw = 1.2e9;
	c->base_rss = 1.6e7;
	c->dev[0].mem_bw = 1e10;
	c->dev[0].mem_bw_all = 9e9;
	c->dev[0].gemm_all = 0.9;
}

/* An MLP of one hidden layer of width on ranks ranks of device dev,
 * global batch split equally. */
static void mlp(const struct dlh_calib *c, int width, int batch, int ranks, const char *dev)
{
	dlh_spec_defaults(&spec);
	snprintf(spec.model_type, sizeof spec.model_type, "mlp");
	spec.layers[0] = width;
	spec.nlayers = 1;
	spec.epochs = 2;
	spec.batch_size = batch;
	spec.lr = 0.01;
	spec.checkpoint_every = 0;
	memset(&in, 0, sizeof in);
	in.spec = &spec;
	in.train_n = 1000;
	in.test_n = 200;
	in.c = 1;
	in.h = in.w = 28;
	in.classes = 10;
	in.ranks = ranks;
	in.nodes = 1;
	for (int r = 0; r < ranks; r++) {
		in.batch[r] = batch / ranks + (r < batch % ranks);
		in.dev[r] = dlh_calib_dev(c, dev);
		in.watts_busy[r] = 10;
		in.watts_idle[r] = 2;
	}
}

/* The spec mlp() set, made a CNN: one conv of filters k x k, a pool of 2,
 * a dense layer of 64. */
static void as_cnn(int filters, int k)
{
	snprintf(spec.model_type, sizeof spec.model_type, "cnn");
	spec.conv_filters[0] = filters;
	spec.conv_kernel[0] = k;
	spec.nconv = 1;
	spec.pool = 2;
	spec.dense[0] = 64;
	spec.ndense = 1;
}

/* dlh_estimate that must succeed. */
static int est(const struct dlh_calib *c, const struct dlh_correction *k, struct dlh_estimate *e)
{
	char err[256];
	int rc = dlh_estimate(&in, c, k, e, err, sizeof err);
	if (rc)
		printf("    %s\n", err);
	return rc;
}

TEST(hand_computed_case_on_flat_speeds)
{
	struct dlh_calib c;
	struct dlh_estimate e;
	struct dlh_model_cost mc;
	char err[256];

	flat_calib(&c, 1e10, HUGE_BW);   /* no memory, launch, decode, write terms */
	mlp(&c, 16, 50, 1, "cpu");
	CHECK(est(&c, NULL, &e) == 0);
	CHECK(dlh_model_cost(&spec, 1, 28, 28, 10, &mc, err, sizeof err) == 0);
	/* 1000 images / 50 = 20 steps an epoch, 2 epochs; a step is the
	 * forward and backward FLOPs of 50 images; the evaluation one forward
	 * pass over the 200 test images (one batch of 200 <= 512 rows) */
	double step = mc.train_flops * 50 / 1e10;
	double eval = 2.0 * mc.macs * 200 / 1e10;
	CHECK(e.steps == 40);
	CHECK_MSG(fabs(e.step_s - step) < 1e-12, "step %g, by hand %g", e.step_s, step);
	CHECK(fabs(e.compute_s - step) < 1e-12 && e.comm_s == 0);
	CHECK_MSG(fabs(e.total_s - 2 * (20 * step + eval)) < 1e-12, "total %g, by hand %g",
		  e.total_s, 2 * (20 * step + eval));
	CHECK(fabs(e.epoch_s - (20 * step + eval)) < 1e-12);
	/* busy the whole run: 10 W */
	CHECK(fabs(e.joules - 10 * e.total_s) < 1e-9);
}

TEST(a_transposed_grid_sets_the_speed_of_its_gemms)
{
	struct dlh_calib c;
	struct dlh_estimate flat, slow_tn;

	flat_calib(&c, 1e10, HUGE_BW);
	mlp(&c, 16, 50, 1, "cpu");
	CHECK(est(&c, NULL, &flat) == 0);
	/* the tn grid at half the speed: a dense layer's dW = dY^T X is the
	 * step's only tn GEMM (o x k x batch); the nt forward keeps its speed */
	c.dev[0].grid_tr[1] = 1;
	for (int i = 0; i < DLH_CALIB_GEMM_N; i++)
		for (int j = 0; j < DLH_CALIB_GEMM_N; j++)
			for (int l = 0; l < DLH_CALIB_GEMM_N; l++)
				c.dev[0].gemm_tr[1][i][j][l] = 0.5e10f;
	CHECK(est(&c, NULL, &slow_tn) == 0);
	double dw = 2.0 * (16.0 * 784 * 50 + 10.0 * 16 * 50);
	CHECK_MSG(fabs(slow_tn.step_s - flat.step_s - dw / 1e10) < 1e-12, "step %g -> %g, dW %g s",
		  flat.step_s, slow_tn.step_s, dw / 1e10);
}

TEST(relu_backward_and_dropout_cost_their_calibrated_time_per_element)
{
	struct dlh_calib c;
	struct dlh_estimate plain, slow;

	flat_calib(&c, 1e10, HUGE_BW);   /* no memory terms: per element is all */
	mlp(&c, 16, 50, 1, "cpu");
	spec.dropout = 0.5;
	CHECK(est(&c, NULL, &plain) == 0);
	c.dev[0].relu_bwd_s = 4e-9;
	c.dev[0].dropout_s = 5e-9;
	CHECK(est(&c, NULL, &slow) == 0);
	/* a step: ReLU backward, dropout forward and backward over 50 x 16;
	 * evaluation's dropout is a copy (memory, free here) */
	double per_step = 50.0 * 16 * (4e-9 + 2 * 5e-9);
	CHECK_MSG(fabs(slow.step_s - plain.step_s - per_step) < 1e-15, "step %g -> %g, by hand +%g",
		  plain.step_s, slow.step_s, per_step);
	CHECK(fabs(slow.epoch_s - plain.epoch_s - 20 * per_step) < 1e-12);
}

/* The 784-256-10 MLP, global batch 128, on 1 and on 2 ranks of this
 * machine's calibration c. Returns 0, or -1 when an estimate failed. */
static int one_and_two(struct dlh_calib *c, struct dlh_estimate *one, struct dlh_estimate *two)
{
	real_calib(c);
	mlp(c, 256, 128, 1, "cpu");
	if (est(c, NULL, one))
		return -1;
	mlp(c, 256, 128, 2, "cpu");
	return est(c, NULL, two) ? -1 : 0;
}

TEST(the_metrics_line_is_paid_once_a_step_on_any_number_of_ranks)
{
	struct dlh_calib c;
	struct dlh_estimate one, two, one_m, two_m;

	if (one_and_two(&c, &one, &two))
		return;
	c.metrics_s = 5e-6;
	mlp(&c, 256, 128, 1, "cpu");
	CHECK(est(&c, NULL, &one_m) == 0);
	mlp(&c, 256, 128, 2, "cpu");
	CHECK(est(&c, NULL, &two_m) == 0);
	CHECK(fabs(one_m.step_s - one.step_s - 5e-6) < 1e-15);
	CHECK(fabs(two_m.step_s - two.step_s - 5e-6) < 1e-15);
	CHECK(one_m.compute_s == one.compute_s);   /* not forward + backward */
}

TEST(more_ranks_mean_less_compute_per_step)
{
	struct dlh_calib c;
	struct dlh_estimate one, two;

	CHECK(one_and_two(&c, &one, &two) == 0);
	CHECK(two.compute_s < one.compute_s);
	CHECK(two.step_s < one.step_s);
	CHECK(two.steps == one.steps);
}

TEST(comm_is_zero_on_one_rank_only)
{
	struct dlh_calib c;
	struct dlh_estimate one, two;

	CHECK(one_and_two(&c, &one, &two) == 0);
	CHECK(one.comm_s == 0 && one.comm_bytes == 0);
	CHECK(two.comm_s > 0 && two.comm_bytes > 0);
	/* across nodes: a ring allreduce, costlier than two barriers */
	in.nodes = 2;
	struct dlh_estimate ring;
	CHECK(est(&c, NULL, &ring) == 0);
	CHECK(ring.comm_s > two.comm_s);
}

TEST(the_slowest_rank_sets_the_step)
{
	struct dlh_calib c;
	struct dlh_estimate even, uneven, slow, fast;

	real_calib(&c);
	mlp(&c, 256, 128, 2, "cpu");
	CHECK(est(&c, NULL, &even) == 0);
	in.batch[0] = 96;
	in.batch[1] = 32;
	CHECK(est(&c, NULL, &uneven) == 0);
	CHECK(uneven.step_s > even.step_s && uneven.compute_s > even.compute_s);
	/* rank 1 on a device at half the speed: slower than both on fast ones */
	mlp(&c, 256, 128, 2, "cpu");
	in.dev[1] = dlh_calib_dev(&c, "slow");
	CHECK(est(&c, NULL, &slow) == 0);
	CHECK(slow.step_s > even.step_s);
	/* and the planned split (3:1 towards the fast one) wins it back */
	in.batch[0] = 86;
	in.batch[1] = 42;
	CHECK(est(&c, NULL, &fast) == 0);
	CHECK(fast.step_s < slow.step_s);
}

TEST(memory_grows_with_the_batch)
{
	struct dlh_calib c;
	struct dlh_estimate small, big;

	real_calib(&c);
	mlp(&c, 1024, 32, 1, "cpu");
	in.train_n = 10000;
	CHECK(est(&c, NULL, &small) == 0);
	mlp(&c, 1024, 4096, 1, "cpu");
	in.train_n = 10000;
	CHECK(est(&c, NULL, &big) == 0);
	CHECK(big.mem_bytes > small.mem_bytes);
	/* at least the weights, gradients, momentum and the decoded shard */
	CHECK(small.mem_bytes > c.base_rss + 3.0 * 4 * 784 * 1024 + 10000.0 * 784 * 4);
}

/* Unequal CPU batches re-split during the run: every rank holds the whole
 * training set and an epoch is the global batch's rows of it. */
TEST(rebalanced_ranks_hold_the_whole_set)
{
	struct dlh_calib c;
	struct dlh_estimate fixed, rebal;

	real_calib(&c);
	mlp(&c, 256, 128, 2, "cpu");
	in.train_n = 10000;
	in.batch[0] = 96;
	in.batch[1] = 32;
	spec.rebalance = 0;   /* shards of 7500 and 2500: 78 steps an epoch */
	CHECK(est(&c, NULL, &fixed) == 0);
	spec.rebalance = 1;   /* 10000 / 128 = 78 too; the shard is the whole set */
	CHECK(est(&c, NULL, &rebal) == 0);
	CHECK_MSG(fixed.steps == 2 * 78 && rebal.steps == 2 * 78, "%ld, %ld", fixed.steps, rebal.steps);
	/* rank 1's 2500 images become 10000: the peak is rank 0's 7500 -> 10000 and more */
	CHECK_MSG(rebal.mem_bytes - fixed.mem_bytes > 2500.0 * 784 * 4,
		  "%.0f vs %.0f", rebal.mem_bytes, fixed.mem_bytes);
	in.train_n = 127;   /* not one global batch of 128 */
	CHECK(dlh_estimate(&in, &c, NULL, &rebal, (char[256]){ 0 }, 256) == -EINVAL);
}

TEST(correction_factors_scale_their_terms)
{
	struct dlh_calib c;
	struct dlh_estimate plain, scaled;
	struct dlh_correction k = { .compute = 2.0, .comm = 1.0, .startup = 3.0, .runs = 10 };

	real_calib(&c);
	mlp(&c, 256, 128, 2, "cpu");
	CHECK(est(&c, NULL, &plain) == 0);
	CHECK(est(&c, &k, &scaled) == 0);
	CHECK(fabs(scaled.compute_s - 2 * plain.compute_s) < 1e-12);
	CHECK(fabs(scaled.comm_s - plain.comm_s) < 1e-15);
	CHECK(fabs(scaled.startup_s - 3 * plain.startup_s) < 1e-12);
	/* the raw terms stay uncorrected: the history fits on them */
	CHECK(scaled.raw_compute == plain.raw_compute && scaled.raw_startup == plain.raw_startup);
	CHECK(scaled.raw_step == plain.raw_step && fabs(plain.raw_step - plain.step_s) < 1e-15);
	CHECK(fabs(plain.raw_compute + plain.raw_comm + plain.raw_startup - plain.total_s) <
	      1e-9 * plain.total_s);
}

TEST(a_cnn_costs_more_than_its_dense_part)
{
	struct dlh_calib c;
	struct dlh_estimate m, n;

	real_calib(&c);
	mlp(&c, 64, 64, 1, "cpu");
	CHECK(est(&c, NULL, &m) == 0);
	as_cnn(8, 3);
	CHECK(est(&c, NULL, &n) == 0);
	CHECK(n.compute_s > m.compute_s);
}

TEST(errors_name_the_problem)
{
	struct dlh_calib c;
	struct dlh_estimate e;
	char err[256];

	real_calib(&c);
	mlp(&c, 64, 64, 2, "cpu");
	in.dev[1] = dlh_calib_dev(&c, "tpu");
	CHECK(dlh_estimate(&in, &c, NULL, &e, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "rank 1") && strstr(err, "no calibration"), "%s", err);
	mlp(&c, 64, 64, 2, "cpu");
	in.train_n = 10;
	CHECK(dlh_estimate(&in, &c, NULL, &e, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "cannot fill one batch"), "%s", err);
	mlp(&c, 64, 64, 1, "cpu");
	c.when = 0;
	CHECK(dlh_estimate(&in, &c, NULL, &e, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "no calibration"), "%s", err);
}

TEST(format_has_one_key_per_line_and_errors_after_a_run)
{
	struct dlh_estimate p = { .step_s = 0.01, .total_s = 100, .steps = 5, .mem_bytes = 1 << 20 };
	struct dlh_estimate a;
	struct dlh_buf b = { 0 };

	/* what a run measures: step, total and steps; the rest unknown */
	a = (struct dlh_estimate){ .step_s = 0.01, .compute_s = -1, .comm_s = -1, .epoch_s = -1,
				   .startup_s = -1, .total_s = 80, .joules = -1, .mem_bytes = -1,
				   .comm_bytes = -1, .steps = 5 };
	CHECK(dlh_estimate_format(&p, NULL, &b) == 0);
	CHECK(strstr(b.data, "step_s=0.01\n") && strstr(b.data, "total_s=100\n"));
	CHECK(!strstr(b.data, "actual_"));
	for (char *l = b.data; *l; l = strchr(l, '\n') + 1)
		CHECK(strchr(l, '=') && strchr(l, '=') < strchr(l, '\n'));
	dlh_buf_free(&b);
	CHECK(dlh_estimate_format(&p, &a, &b) == 0);
	CHECK(strstr(b.data, "actual_total_s=80\nerror_total_s=-25.0\n"));
	CHECK(strstr(b.data, "error_step_s=0.0\n"));
	CHECK(!strstr(b.data, "actual_joules"));   /* not measured */
	dlh_buf_free(&b);
}

TEST(parse_reads_back_what_format_wrote)
{
	struct dlh_calib c;
	struct dlh_estimate e, back, act = { .step_s = 1, .compute_s = -1, .comm_s = -1,
					     .epoch_s = -1, .startup_s = -1, .total_s = 9,
					     .joules = -1, .mem_bytes = -1, .comm_bytes = -1 };
	struct dlh_buf b = { 0 };

	real_calib(&c);
	mlp(&c, 256, 128, 2, "cpu");
	CHECK(est(&c, NULL, &e) == 0);
	CHECK(dlh_estimate_format(&e, &act, &b) == 0);
	int rc = dlh_estimate_parse(b.data, &back);
	dlh_buf_free(&b);
	CHECK(rc == 0);
	CHECK(back.steps == e.steps);
	CHECK(fabs(back.total_s - e.total_s) <= 1e-5 * e.total_s);   /* not actual_total_s */
	CHECK(fabs(back.raw_compute - e.raw_compute) <= 1e-5 * e.raw_compute);
	CHECK(fabs(back.raw_startup - e.raw_startup) <= 1e-5 * e.raw_startup);
	CHECK(fabs(back.raw_step - e.raw_step) <= 1e-5 * e.raw_step);
	CHECK(dlh_estimate_parse("step_s=1\n", &back) == -EINVAL);
}

/* Writes text to DIR/name. */
static int put(const char *dir, const char *name, const char *text)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	fputs(text, f);
	return fclose(f);
}

/* Removes the fabricated job dir. */
static void rm_job(const char *dir)
{
	const char *names[] = { "metrics.csv", "rank_times", "result" };
	char path[512];
	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		unlink(path);
	}
	rmdir(dir);
}

TEST(actual_reads_metrics_rank_times_and_result)
{
	char dir[] = "/tmp/dlh-test-est.XXXXXX";
	struct dlh_estimate a;

	CHECK(mkdtemp(dir));
	/* 2 epochs of 3 steps, 0.1 s a step, evaluations of 0.5 s */
	put(dir, "metrics.csv", "kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s\n"
	    "train,1,1,1.000,2.3,0.1,0.01,100\n"
	    "train,2,1,1.100,2.2,0.1,0.01,100\n"
	    "train,3,1,1.200,2.1,0.1,0.01,100\n"
	    "eval,3,1,1.700,2.0,0.2\n"
	    "train,4,2,1.800,1.9,0.3,0.01,100\n"
	    "train,5,2,1.900,1.8,0.3,0.01,100\n"
	    "train,6,2,2.000,1.7,0.3,0.01,100\n"
	    "eval,6,2,2.500,1.6,0.4\n");
	put(dir, "rank_times", "rank,batch,steps,compute_s,wait_s,peak_rss_bytes\n"
	    "0,32,6,0.48,0.06,50000000\n1,32,6,0.42,0.12,60000000\n");
	put(dir, "result", "test_accuracy=0.4\nsteps=6\ntrain_time_s=2.5\n");
	int rc = dlh_estimate_actual(dir, 4.0, &a);
	rm_job(dir);
	CHECK(rc == 0);
	CHECK(a.steps == 6);
	CHECK_MSG(fabs(a.step_s - 0.1) < 1e-9, "step %g", a.step_s);
	CHECK_MSG(fabs(a.epoch_s - 0.8) < 1e-9, "epoch %g", a.epoch_s);
	CHECK(fabs(a.compute_s - 0.08) < 1e-9);   /* the slowest rank */
	CHECK(fabs(a.comm_s - 0.01) < 1e-9);      /* the least wait */
	CHECK(a.mem_bytes == 60000000);
	CHECK(a.total_s == 4.0);
	/* outside the loop: 4 s of wall, the loop from 1.0 - 0.1 to 2.5 */
	CHECK_MSG(fabs(a.startup_s - 2.4) < 1e-9, "startup %g", a.startup_s);
	CHECK(a.joules < 0 && a.comm_bytes < 0);
}

TEST(actual_without_metrics_is_enoent)
{
	struct dlh_estimate a;
	char dir[] = "/tmp/dlh-test-est.XXXXXX";

	CHECK(dlh_estimate_actual("/nonexistent-dlh-job", 1.0, &a) == -ENOENT);
	CHECK(mkdtemp(dir));
	put(dir, "metrics.csv", "kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s\n");
	int rc = dlh_estimate_actual(dir, 1.0, &a);
	rm_job(dir);
	CHECK(rc == -ENOENT);
}

/* Removes STATE/history and STATE. */
static void rm_state(const char *dir)
{
	char path[512];
	snprintf(path, sizeof path, "%s/history", dir);
	unlink(path);
	rmdir(dir);
}

TEST(history_fit_recovers_known_factors)
{
	char dir[] = "/tmp/dlh-test-hist.XXXXXX";
	struct dlh_correction k;
	unsigned s = 7;

	CHECK(mkdtemp(dir));
	CHECK(dlh_history_fit(dir, &k) == 0);   /* no history yet: identity */
	CHECK(k.compute == 1 && k.comm == 1 && k.startup == 1 && k.runs == 0);
	for (int i = 0; i < 20; i++) {
		struct dlh_estimate p = { .steps = 1 }, a = { .steps = 1 };
		s = s * 1103515245u + 12345u;
		p.raw_compute = 1 + (s >> 16) % 100;
		s = s * 1103515245u + 12345u;
		p.raw_comm = (s >> 16) % 30;
		s = s * 1103515245u + 12345u;
		p.raw_startup = 0.2 + (s >> 16) % 7 * 0.1;
		p.total_s = p.raw_compute + p.raw_comm + p.raw_startup;
		a.total_s = 1.3 * p.raw_compute + 0.7 * p.raw_comm + 1.1 * p.raw_startup;
		CHECK(dlh_history_add(dir, &p, &a) == 0);
		if (i == 3) {   /* too few runs: still identity */
			CHECK(dlh_history_fit(dir, &k) == 4);
			CHECK(k.compute == 1 && k.runs == 0);
		}
	}
	int runs = dlh_history_fit(dir, &k);
	rm_state(dir);
	CHECK(runs == 20 && k.runs == 20);
	CHECK_MSG(fabs(k.compute - 1.3) < 1e-4 && fabs(k.comm - 0.7) < 1e-4 &&
		  fabs(k.startup - 1.1) < 1e-4, "fit %g %g %g", k.compute, k.comm, k.startup);
}

TEST(history_fit_keeps_factor_one_for_a_term_never_seen)
{
	char dir[] = "/tmp/dlh-test-hist.XXXXXX";
	struct dlh_correction k;

	CHECK(mkdtemp(dir));
	for (int i = 0; i < 10; i++) {   /* one rank: no comm term in any run */
		struct dlh_estimate p = { .raw_compute = 10.0 + i, .raw_comm = 0,
					  .raw_startup = 0.5 + 0.3 * (i % 3) }, a = { 0 };
		p.total_s = p.raw_compute + p.raw_startup;
		a.total_s = 0.9 * p.raw_compute + 2.0 * p.raw_startup;
		CHECK(dlh_history_add(dir, &p, &a) == 0);
	}
	int runs = dlh_history_fit(dir, &k);
	rm_state(dir);
	CHECK(runs == 10);
	CHECK_MSG(fabs(k.compute - 0.9) < 1e-4 && k.comm == 1.0 && fabs(k.startup - 2.0) < 1e-4,
		  "fit %g %g %g", k.compute, k.comm, k.startup);
}

/* The refit learns a correction per device key besides the one of all
 * runs: an estimate on a key with runs enough of its own takes that key's
 * factors (and says so), any other the pooled ones; the key goes through the
 * estimate file to the history line; lines from before keys count in the
 * pooled fit only. */
TEST(history_fit_learns_a_correction_per_device)
{
	char dir[] = "/tmp/dlh-test-hist.XXXXXX";
	struct dlh_correction k;
	struct dlh_calib c;
	struct dlh_estimate plain, e;
	CHECK(mkdtemp(dir));
	for (int i = 0; i < 24; i++) {   /* cpu runs 1.25x slow, H100 runs 2x, old lines 1x */
		struct dlh_estimate p = { .raw_compute = 10.0 + i, .raw_comm = 1.0 + i % 4,
					  .raw_startup = 0.5 + 0.1 * (i % 5) }, a = { 0 };
		double f = i % 3 == 0 ? 1.25 : i % 3 == 1 ? 2.0 : 1.0;
		snprintf(p.device, sizeof p.device, "%s", i % 3 == 0 ? "cpu" : i % 3 == 1 ? "H100" : "");
		p.total_s = p.raw_compute + p.raw_comm + p.raw_startup;
		a.total_s = f * p.total_s;
		CHECK(dlh_history_add(dir, &p, &a) == 0);
	}
	int runs = dlh_history_fit(dir, &k);
	rm_state(dir);
	CHECK(runs == 24 && k.runs == 24 && k.ndevices == 2);
	CHECK_MSG(k.compute != 1.0 && fabs(k.compute - 1.25) > 1e-3 && fabs(k.compute - 2.0) > 1e-3,
		  "pooled %g", k.compute);   /* all runs, of every device, in one fit */
	for (int i = 0; i < 2; i++) {
		const struct dlh_correction_device *d = &k.device[i];
		double want = !strcmp(d->device, "cpu") ? 1.25 : 2.0;
		CHECK_MSG((!strcmp(d->device, "cpu") || !strcmp(d->device, "H100")) && d->runs == 8 &&
			  fabs(d->compute - want) < 1e-6 && fabs(d->comm - want) < 1e-6 &&
			  fabs(d->startup - want) < 1e-6, "%s: %d runs, %g %g %g", d->device, d->runs,
			  d->compute, d->comm, d->startup);
	}
	/* an estimate on cpu takes cpu's factors */
	real_calib(&c);
	mlp(&c, 256, 128, 2, "cpu");
	CHECK(est(&c, NULL, &plain) == 0 && !strcmp(plain.device, "cpu") && !plain.corrected[0]);
	CHECK(est(&c, &k, &e) == 0);
	CHECK_MSG(fabs(e.compute_s - 1.25 * plain.compute_s) < 1e-9 * plain.compute_s &&
		  !strcmp(e.corrected, "runs on its devices"), "%g against %g (%s)", e.compute_s,
		  plain.compute_s, e.corrected);
	/* the device key reaches the estimate file and comes back */
	struct dlh_buf text = { 0 };
	struct dlh_estimate back;
	CHECK(dlh_estimate_format(&e, NULL, &text) == 0 && strstr(text.data, "\ndevice=cpu\n") &&
	      strstr(text.data, "\ncorrected_by=the history of runs on its devices\n"));
	CHECK(dlh_estimate_parse(text.data, &back) == 0 && !strcmp(back.device, "cpu"));
	free(text.data);
	/* a key without runs of its own: the pooled factors */
	k.device[0].device[0] = k.device[1].device[0] = 'x';
	CHECK(est(&c, &k, &e) == 0);
	CHECK(fabs(e.compute_s - k.compute * plain.compute_s) < 1e-9 * plain.compute_s &&
	      !strcmp(e.corrected, "all runs"));
}

/* flat_calib() with its second type "slow" renamed H100 and measured on
 * the GPU: every GEMM at flops, every kernel's pass at bw, the launch,
 * sync and copy figures as given; 1 GiB of context, cuBLAS and NCCL. */
static void gpu_calib(struct dlh_calib *c, double flops, double bw, double launch, double sync,
		      double h2d)
{
	flat_calib(c, flops, bw);
	struct dlh_calib_dev *g = &c->dev[1];
	snprintf(g->type, sizeof g->type, "H100");
	g->gemm_flops = flops;
	for (int i = 0; i < DLH_CALIB_GEMM_N; i++)
		for (int j = 0; j < DLH_CALIB_GEMM_N; j++)
			for (int l = 0; l < DLH_CALIB_GEMM_N; l++)
				g->gemm[i][j][l] = (float)flops;
	g->gpu = 1;
	g->kernel_s = launch;
	g->sync_s = sync;
	g->h2d_s = h2d;
	g->h2d_bw = HUGE_BW;
	g->ctx_bytes = 512.0 * 1048576;
	g->blas_bytes = 256.0 * 1048576;
	g->nccl_bytes = 256.0 * 1048576;
}

TEST(a_small_gpu_step_is_one_graph_launch_its_nodes_copies_and_one_sync)
{
	struct dlh_calib c;
	struct dlh_estimate e;

	/* GEMMs and passes free: only the calls' floors count */
	gpu_calib(&c, 1e30, HUGE_BW, 2e-6, 2e-5, 1e-5);
	mlp(&c, 16, 50, 1, "H100");   /* dense, relu, dense; fp32 */
	CHECK(est(&c, NULL, &e) == 0);
	/* gpu.cu: the batch gathered from the rows the GPU holds 1, forward
	 * 2 products with their biases (and the first its ReLU) in cuBLASLt's
	 * epilogues, the loss with its sums and the last layer's bias
	 * gradient 1, backward 3 products (the second layer's input gradient
	 * masked by the ReLU and summed into the first layer's bias gradient
	 * in its epilogue; the first layer has no input gradient) and the
	 * update (one rank: no allreduce): 8 nodes of one CUDA graph; the
	 * step's values and its rows' numbers in (1 copy), the sums out. A
	 * cache without node_s (before graphs were timed): the assumed floor.
	 * The host launches the graph and queues the two copies (3 launches)
	 * and waits for the step before: 26 us, behind the device's 32
	 * (--step-ahead) */
	double step = 8 * DLH_EST_GRAPH_NODE_S + 2 * 1e-5;
	CHECK_MSG(fabs(e.step_s - step) < 1e-12, "step %g, by hand %g", e.step_s, step);
	CHECK(strstr(e.source, "H100 measured on it (GPU)"));
	/* the node's cost as measured */
	c.dev[1].node_s = 3e-6;
	CHECK(est(&c, NULL, &e) == 0);
	step = 8 * 3e-6 + 2 * 1e-5;
	CHECK_MSG(fabs(e.step_s - step) < 1e-12, "step %g, by hand %g (node_s 3 us)", e.step_s, step);
	/* no gather on the host: its rate does not count */
	c.dev[0].gather_bw = 1e9;
	CHECK(est(&c, NULL, &e) == 0);
	CHECK_MSG(fabs(e.step_s - step) < 1e-12, "step %g, by hand %g (a host gather)", e.step_s, step);
	/* a host slower than the device: its work sets the pace, the metrics
	 * row with it */
	c.dev[1].sync_s = 1e-4;
	c.metrics_s = 2e-6;
	CHECK(est(&c, NULL, &e) == 0);
	step = 3 * 2e-6 + 1e-4 + 2e-6;
	CHECK_MSG(fabs(e.step_s - step) < 1e-12, "step %g, by hand %g (host-bound)", e.step_s, step);
}

TEST(a_gpu_steps_host_work_hides_behind_its_device_work_but_evaluation_pays_each_launch)
{
	struct dlh_calib c;
	struct dlh_estimate base, e;

	gpu_calib(&c, 1e30, HUGE_BW, 2e-6, 2e-5, 1e-5);
	mlp(&c, 16, 50, 1, "H100");
	CHECK(est(&c, NULL, &base) == 0);
	c.dev[1].kernel_s += 1e-6;
	CHECK(est(&c, NULL, &e) == 0);
	/* the step: the host's launches hide behind the device's work;
	 * evaluation (not captured, the epoch's part besides its steps): each
	 * of its 3 calls a batch (forward 2, each layer's bias and the ReLU in
	 * its product's epilogue; the loss 1), 200 test images in one batch */
	CHECK_MSG(fabs(e.step_s - base.step_s) < 1e-12, "step %g, was %g", e.step_s, base.step_s);
	double spe = (double)e.steps / spec.epochs;
	double eval = (e.epoch_s - spe * e.step_s) - (base.epoch_s - spe * base.step_s);
	CHECK_MSG(fabs(eval - 3e-6) < 1e-12, "evaluation grew %g", eval);
	/* a host-bound step pays its three launches */
	c.dev[1].sync_s = 1e-4;
	CHECK(est(&c, NULL, &base) == 0);
	c.dev[1].kernel_s += 1e-6;
	CHECK(est(&c, NULL, &e) == 0);
	CHECK_MSG(fabs(e.step_s - base.step_s - 3e-6) < 1e-12, "step %g, was %g (host-bound)",
		  e.step_s, base.step_s);
}

TEST(each_gpu_figure_moves_the_estimate)
{
	struct dlh_calib c;
	struct dlh_estimate base, e;
	struct dlh_calib_dev *g = &c.dev[1];

	gpu_calib(&c, 2e13, 2e12, 4e-6, 1e-5, 8e-6);
	mlp(&c, 256, 64, 1, "H100");
	CHECK(est(&c, NULL, &base) == 0);
	g->sync_s *= 10;    /* the host's wait, past the device's step: the pace */
	CHECK(est(&c, NULL, &e) == 0 &&
	      fabs(e.step_s - (3 * 4e-6 + 1e-4)) < 1e-12 && e.step_s > base.step_s);
	g->kernel_s *= 2;   /* the graph's launch and the copies' queueing */
	CHECK(est(&c, NULL, &e) == 0 && fabs(e.step_s - (3 * 8e-6 + 1e-4)) < 1e-12);
	g->kernel_s /= 2;
	g->sync_s /= 10;
	g->h2d_bw = 1e9;    /* the step's copy in: its 64 rows' numbers at 1 GB/s */
	CHECK(est(&c, NULL, &e) == 0 && fabs(e.step_s - base.step_s - 64 * 4 / 1e9) < 1e-12);
	/* start-up: the rows the GPU holds (1000 of 784 floats and a label) */
	CHECK(e.startup_s - base.startup_s > 1000 * (784 * 4 + 1) / 1e9);
	g->h2d_bw = HUGE_BW;
	g->ctx_bytes += 1e8;   /* memory: the context, as measured */
	CHECK(est(&c, NULL, &e) == 0 && fabs(e.mem_bytes - base.mem_bytes - 1e8) < 1);
	g->ctx_bytes -= 1e8;
	in.train_n = 2000;     /* and the training rows it holds */
	CHECK(est(&c, NULL, &e) == 0 &&
	      fabs(e.mem_bytes - base.mem_bytes - 1000 * (784 * 4 + 1)) < 1);
	in.train_n = 1000;
	g->ctx_s = 0.5;        /* start-up: each rank's context */
	CHECK(est(&c, NULL, &e) == 0 && fabs(e.startup_s - base.startup_s - 0.5) < 1e-9);
	g->ctx_s = 0;
	mlp(&c, 4096, 1024, 1, "H100");   /* a large model: its GEMMs' time */
	in.train_n = 10240;
	CHECK(est(&c, NULL, &base) == 0);
	for (int i = 0; i < DLH_CALIB_GEMM_N; i++)
		for (int j = 0; j < DLH_CALIB_GEMM_N; j++)
			for (int l = 0; l < DLH_CALIB_GEMM_N; l++)
				g->gemm[i][j][l] /= 4;
	CHECK(est(&c, NULL, &e) == 0 && e.step_s > base.step_s * 2);
}

/* A GPU's GEMMs bound by their latency: every shape of the grid (all its
 * forms) takes t seconds, its rate 2 m n k / t. */
static void latency_grid(struct dlh_calib_dev *g, double t)
{
	static const int d[DLH_CALIB_GEMM_N] = DLH_CALIB_GEMM_DIMS;

	g->grid = g->grid_tr[0] = g->grid_tr[1] = 1;
	for (int i = 0; i < DLH_CALIB_GEMM_N; i++)
		for (int j = 0; j < DLH_CALIB_GEMM_N; j++)
			for (int l = 0; l < DLH_CALIB_GEMM_N; l++) {
				float r = (float)(2.0 * d[i] * d[j] * d[l] / t);

				g->gemm[i][j][l] = g->gemm_tr[0][i][j][l] = g->gemm_tr[1][i][j][l] = r;
			}
}

/* between the points of a GPU's grid, a GEMM whose time is its latency
 * (the rate grows as m n k) takes that latency: the rates are interpolated
 * geometrically (linearly, the MLP's 784 x 50 x 16 products would be rated
 * up to twice too fast) */
TEST(a_gpu_gemm_between_the_grids_points_follows_its_rates_power_law)
{
	struct dlh_calib c;
	struct dlh_estimate e;

	gpu_calib(&c, 1e30, HUGE_BW, 1e-7, 1e-7, 1e-5);
	c.dev[1].node_s = 1e-7;
	latency_grid(&c.dev[1], 5e-6);
	mlp(&c, 50, 16, 1, "H100");
	CHECK(est(&c, NULL, &e) == 0);
	/* 5 GEMMs at 5 us (none on a grid point: 784, 50, 16; two with
	 * their epilogues: the last layer's biases, at float 39750, are not
	 * 16-byte aligned, so its bias is a kernel, dlt_gpu_bias_aligned), 4
	 * other kernels at node_s, the two copies */
	double step = 5 * 5e-6 + 4 * 1e-7 + 2 * 1e-5;
	CHECK_MSG(fabs(e.step_s - step) < 1e-9 * step, "step %.9g, by hand %.9g", e.step_s, step);
	/* and a GEMM takes at least its operands' traffic at the memory's
	 * rate: the first layer's two (16 x 784 x 50, its input, weights and
	 * output: 210176 bytes) at 10 GB/s, the other three their latency */
	c.dev[1].mem_bw = 1e10;
	CHECK(est(&c, NULL, &e) == 0);
	step = 2 * 210176 / 1e10 + 3 * 5e-6 + 4 * 1e-7 + 2 * 1e-5;
	CHECK_MSG(fabs(e.step_s - step) < 1e-9 * step, "step %.9g, by hand %.9g (memory-bound)",
		  e.step_s, step);
}

/* a GPU's grid goes on to the convolutions' products (N = rows x pixels,
 * 100352 for a 28 x 28 conv at batch 128): a conv's GEMMs are rated there,
 * where a 5-dim grid (a CPU's, or a GPU cache from before) holds the rate
 * of its 2048 edge */
TEST(a_gpu_conv_is_rated_on_the_grids_large_dims)
{
	static const int d[DLH_CALIB_GEMM_N] = DLH_CALIB_GEMM_DIMS;
	struct dlh_calib c;
	struct dlh_estimate five, eight;
	struct dlh_calib_dev *g = &c.dev[1];

	gpu_calib(&c, 1e13, 2e12, 1e-7, 1e-7, 1e-5);
	/* 1e12 FLOP/s up to 2048 a side, 1e13 past it */
	for (int i = 0; i < DLH_CALIB_GEMM_N; i++)
		for (int j = 0; j < DLH_CALIB_GEMM_N; j++)
			for (int l = 0; l < DLH_CALIB_GEMM_N; l++) {
				float r = d[i] > 2048 || d[j] > 2048 || d[l] > 2048 ? 1e13f : 1e12f;

				g->gemm[i][j][l] = g->gemm_tr[0][i][j][l] = g->gemm_tr[1][i][j][l] = r;
			}
	g->grid_tr[0] = g->grid_tr[1] = 1;
	mlp(&c, 64, 128, 1, "H100");
	as_cnn(32, 7);   /* 49 taps: im2col products (not dlt_gpu_conv_direct) */
	g->grid_n = DLH_CALIB_CPU_GEMM_N;
	CHECK(est(&c, NULL, &five) == 0);
	g->grid_n = DLH_CALIB_GEMM_N;
	CHECK(est(&c, NULL, &eight) == 0);
	/* the conv's two products (32 x 100352 x 49 and its weight gradient's
	 * 32 x 50 x 100352: a first layer has no input gradient) and the dense
	 * layer's three (128 x 64 x 6272), 0.94 GFLOP a step, at 1e13 instead of
	 * 1e12: 0.85 ms less */
	CHECK_MSG(five.step_s - eight.step_s > 6e-4, "step %g with 5 dims, %g with 8",
		  five.step_s, eight.step_s);
}

/* a conv of few taps (dlt_gpu_conv_direct) is priced as gpu.cu runs it:
 * its forward product one kernel at the calibrated seconds per output and
 * tap (direct_s), without it at two FLOPs each at the GEMMs' best rate,
 * at least its bytes; as the first layer with a pool after it, its weight
 * gradient too (dlt_gpu_conv_dw_direct: direct_dw_s per pooled output and
 * tap or bias); a conv of more taps is im2col products, whatever either
 * says; the figures change no node count */
TEST(a_gpu_conv_of_few_taps_is_priced_as_its_direct_product)
{
	struct dlh_calib c;
	struct dlh_estimate_parts p0, p1;
	char err[256];

	gpu_calib(&c, 1e12, 1e12, 1e-7, 1e-7, 1e-5);
	c.dev[1].node_s = 1e-6;
	mlp(&c, 64, 128, 1, "H100");
	for (int k = 5; k <= 7; k += 2) {
		as_cnn(32, k);   /* 25 taps: direct; 49: im2col */
		c.dev[1].direct_s = c.dev[1].direct_dw_s = 0;
		CHECK_MSG(dlh_estimate_parts(&in, &c, 0, &p0, err, sizeof err) == 0, "%s", err);
		c.dev[1].direct_s = c.dev[1].direct_dw_s = 1e-12;
		CHECK_MSG(dlh_estimate_parts(&in, &c, 0, &p1, err, sizeof err) == 0, "%s", err);
		/* 32 x 128 x 784 outputs of 25 taps: 80.3 us at 1 ps each, 160.6 us
		 * at 1e12 FLOP/s; its 4.8 MB at 1 TB/s take less; the gradient's
		 * 32 x 128 x 196 pooled outputs of 26: 20.9 us, 41.7 us (10 MB) */
		double want = k == 5 ? 32.0 * 128 * 784 * 25 * (1e-12 - 2.0 / 1e12) : 0.0;
		double want_dw = k == 5 ? 32.0 * 128 * 196 * 26 * (1e-12 - 2.0 / 1e12) : 0.0;
		CHECK_MSG(fabs(p1.fwd_s[0] - p0.fwd_s[0] - want) < 1e-12,
			  "%dx%d: forward %.9g with direct_s, %.9g without: %.9g apart, by hand %.9g",
			  k, k, p1.fwd_s[0], p0.fwd_s[0], p1.fwd_s[0] - p0.fwd_s[0], want);
		CHECK_MSG(fabs(p1.bwd_s[0] - p0.bwd_s[0] - want_dw) < 1e-12,
			  "%dx%d: backward %.9g with direct_dw_s, %.9g without: %.9g apart, by hand %.9g",
			  k, k, p1.bwd_s[0], p0.bwd_s[0], p1.bwd_s[0] - p0.bwd_s[0], want_dw);
		CHECK(p1.nodes == p0.nodes);
	}
}

/* dlh_estimate_parts: a GPU step priced part by part, as dlh-train
 * --gpu-profile measures it: the parts and the sums' copy back are the
 * estimate's step (and its nodes the estimate's graph), a layer that runs
 * in an earlier one's kernels (the conv's ReLU and pool, the dense layer's
 * ReLU) costs nothing of its own, the first layer's backward is its
 * weight gradient only; a CPU rank has no graphed step to price */
TEST(a_gpu_steps_parts_add_up_to_the_estimates_step)
{
	struct dlh_calib c;
	struct dlh_estimate e;
	struct dlh_estimate_parts p;
	char err[256];

	gpu_calib(&c, 1e12, 1e12, 1e-7, 1e-7, 1e-5);
	c.dev[1].node_s = 1e-6;
	mlp(&c, 64, 128, 1, "H100");
	as_cnn(32, 5);   /* conv relu pool dense relu dense */
	CHECK(est(&c, NULL, &e) == 0);
	CHECK_MSG(dlh_estimate_parts(&in, &c, 0, &p, err, sizeof err) == 0, "%s", err);
	double sum = p.input_s + p.loss_s + p.update_s;
	for (int i = 0; i < p.nlayers; i++)
		sum += p.fwd_s[i] + p.bwd_s[i];
	CHECK_MSG(p.nlayers == 6 && !strcmp(p.kind[0], "conv") && !strcmp(p.kind[3], "dense"),
		  "%d layers, %s ... %s", p.nlayers, p.kind[0], p.kind[3]);
	CHECK_MSG(fabs(p.step_s - (sum + c.dev[1].h2d_s)) < 1e-12, "step %g, its parts %g",
		  p.step_s, sum + c.dev[1].h2d_s);
	CHECK_MSG(fabs(p.step_s - e.step_s) < 1e-9 * e.step_s, "parts' step %g, the estimate's %g",
		  p.step_s, e.step_s);
	CHECK_MSG(p.nodes == e.step_nodes, "%ld nodes priced, the estimate's %ld", p.nodes,
		  e.step_nodes);
	CHECK(p.fwd_s[0] > 0 && p.bwd_s[0] > 0 && p.fwd_s[3] > 0 && p.bwd_s[3] > 0);
	CHECK(p.fwd_s[1] == 0 && p.bwd_s[1] == 0 && p.fwd_s[2] == 0 && p.bwd_s[2] == 0 &&
	      p.fwd_s[4] == 0 && p.bwd_s[4] == 0);
	CHECK(p.input_s > 0 && p.loss_s > 0 && p.update_s > 0);
	/* a CPU rank */
	in.dev[0] = dlh_calib_dev(&c, "cpu");
	CHECK(dlh_estimate_parts(&in, &c, 0, &p, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "rank 0 is not a GPU's"), "%s", err);
}

/* an elementwise kernel smaller than the smallest pass timed costs what
 * that one did (a GPU's small kernel is bound by its latency) */
TEST(a_gpu_kernel_below_the_smallest_pass_timed_costs_that_pass)
{
	struct dlh_calib c;
	struct dlh_estimate base, e;
	static const long sizes[DLH_CALIB_BW_N] = DLH_CALIB_BW_SIZES;

	gpu_calib(&c, 1e30, HUGE_BW, 1e-7, 1e-7, 1e-5);   /* a quick host: the device's pace */
	c.dev[1].node_s = 1e-7;
	mlp(&c, 16, 50, 1, "H100");
	CHECK(est(&c, NULL, &base) == 0);
	/* the 64 KiB pass took 1 us: each of the step's 3 elementwise
	 * kernels (its 8 nodes less 5 GEMMs: the gather, the loss, the
	 * update) at 1 us, not node_s */
	c.dev[1].bw[0] = (double)sizes[0] / 1e-6;
	CHECK(est(&c, NULL, &e) == 0);
	CHECK_MSG(fabs(e.step_s - base.step_s - 3 * (1e-6 - 1e-7)) < 1e-12,
		  "step %g, was %g", e.step_s, base.step_s);
}

TEST(tf32_and_bf16_take_the_tensor_cores_grid_and_bf16_its_casts)
{
	struct dlh_calib c;
	struct dlh_estimate fp32, e;
	struct dlh_calib_dev *g = &c.dev[1];

	gpu_calib(&c, 2e13, 2e12, 4e-6, 1e-5, 8e-6);
	mlp(&c, 4096, 1024, 1, "H100");   /* its GEMMs dominate */
	in.train_n = 10240;
	CHECK(est(&c, NULL, &fp32) == 0);
	/* tf32 without a TF32 grid (a cache from before it): FP32's rates */
	spec.precision = DLH_PRECISION_TF32;
	CHECK(est(&c, NULL, &e) == 0 && fabs(e.step_s - fp32.step_s) < 1e-12);
	/* a TF32 grid 4 times FP32's: the GEMMs' part of the step a quarter */
	g->grid_tf32 = 1;
	for (int i = 0; i < DLH_CALIB_GEMM_N; i++)
		for (int j = 0; j < DLH_CALIB_GEMM_N; j++)
			for (int l = 0; l < DLH_CALIB_GEMM_N; l++)
				g->gemm_tf32[i][j][l] = 4 * g->gemm[i][j][l];
	CHECK(est(&c, NULL, &e) == 0);
	CHECK_MSG(e.step_s < 0.5 * fp32.step_s && e.step_s > 0.25 * fp32.step_s, "tf32 %g, fp32 %g",
		  e.step_s, fp32.step_s);
	/* fp32 ignores the TF32 grid */
	spec.precision = DLH_PRECISION_FP32;
	CHECK(est(&c, NULL, &e) == 0 && fabs(e.step_s - fp32.step_s) < 1e-12);
	/* bf16: the tensor cores' rate, and each GEMM's operand cast and the
	 * weights' cast as passes of their own: slower than tf32 */
	struct dlh_estimate tf;
	spec.precision = DLH_PRECISION_TF32;
	CHECK(est(&c, NULL, &tf) == 0);
	spec.precision = DLH_PRECISION_BF16;
	CHECK(est(&c, NULL, &e) == 0 && e.step_s > tf.step_s && e.step_s < fp32.step_s);
	spec.precision = DLH_PRECISION_FP32;
}

TEST(gpu_memory_is_the_context_cublas_nccl_and_the_backends_buffers)
{
	struct dlh_calib c;
	struct dlh_estimate e, big;

	gpu_calib(&c, 2e13, 2e12, 4e-6, 1e-5, 8e-6);
	mlp(&c, 256, 64, 1, "H100");
	CHECK(est(&c, NULL, &e) == 0);
	double fixed = 1024.0 * 1048576;
	/* 784 x 256 + 256 x 10 weights and biases: parameters, gradients and
	 * momentum; at most 512 rows of activations (evaluation's chunks) */
	double np = 784.0 * 256 + 256 + 256 * 10 + 10;
	CHECK_MSG(e.mem_bytes > fixed + 3 * np * 4 && e.mem_bytes < fixed + 16e6, "mem %g",
		  e.mem_bytes);
	mlp(&c, 256, 2048, 1, "H100");
	in.train_n = 10240;
	CHECK(est(&c, NULL, &big) == 0 && big.mem_bytes > e.mem_bytes + 2048.0 * 784 * 4);
}

TEST(the_source_says_a_type_stands_in_by_its_peak_figures)
{
	struct dlh_calib c;
	struct dlh_estimate e;
	struct dlh_buf b = { 0 };

	gpu_calib(&c, 2e13, 2e12, 4e-6, 1e-5, 8e-6);
	c.dev[1].gpu = 0;     /* as choose.c's peak_of() makes one */
	c.dev[1].peak = 1;
	c.dev[1].grid = 0;
	mlp(&c, 256, 64, 1, "H100");
	CHECK(est(&c, NULL, &e) == 0);
	CHECK_MSG(!strcmp(e.source, "H100 pool peak figures (not calibrated)"), "%s", e.source);
	CHECK(dlh_estimate_format(&e, NULL, &b) == 0);
	CHECK(strstr(b.data, "\nsource=H100 pool peak figures (not calibrated)\n"));
	dlh_buf_free(&b);
	mlp(&c, 256, 64, 1, "cpu");
	CHECK(est(&c, NULL, &e) == 0 && !strcmp(e.source, "cpu measured"));
}

int main(void)
{
	RUN(hand_computed_case_on_flat_speeds);
	RUN(a_transposed_grid_sets_the_speed_of_its_gemms);
	RUN(relu_backward_and_dropout_cost_their_calibrated_time_per_element);
	RUN(the_metrics_line_is_paid_once_a_step_on_any_number_of_ranks);
	RUN(more_ranks_mean_less_compute_per_step);
	RUN(comm_is_zero_on_one_rank_only);
	RUN(the_slowest_rank_sets_the_step);
	RUN(memory_grows_with_the_batch);
	RUN(rebalanced_ranks_hold_the_whole_set);
	RUN(correction_factors_scale_their_terms);
	RUN(a_cnn_costs_more_than_its_dense_part);
	RUN(errors_name_the_problem);
	RUN(format_has_one_key_per_line_and_errors_after_a_run);
	RUN(parse_reads_back_what_format_wrote);
	RUN(actual_reads_metrics_rank_times_and_result);
	RUN(actual_without_metrics_is_enoent);
	RUN(history_fit_recovers_known_factors);
	RUN(history_fit_keeps_factor_one_for_a_term_never_seen);
	RUN(history_fit_learns_a_correction_per_device);
	RUN(a_small_gpu_step_is_one_graph_launch_its_nodes_copies_and_one_sync);
	RUN(a_gpu_steps_host_work_hides_behind_its_device_work_but_evaluation_pays_each_launch);
	RUN(a_gpu_kernel_below_the_smallest_pass_timed_costs_that_pass);
	RUN(a_gpu_gemm_between_the_grids_points_follows_its_rates_power_law);
	RUN(a_gpu_conv_is_rated_on_the_grids_large_dims);
	RUN(a_gpu_conv_of_few_taps_is_priced_as_its_direct_product);
	RUN(a_gpu_steps_parts_add_up_to_the_estimates_step);
	RUN(each_gpu_figure_moves_the_estimate);
	RUN(tf32_and_bf16_take_the_tensor_cores_grid_and_bf16_its_casts);
	RUN(gpu_memory_is_the_context_cublas_nccl_and_the_backends_buffers);
	RUN(the_source_says_a_type_stands_in_by_its_peak_figures);
	return CHECK_EXIT();
}
