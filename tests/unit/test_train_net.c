/* test_train_net.c - unit tests of the layer stack, optimizers, schedules and checkpoint v2 (no MPI) */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/train/ckpt.h"
#include "engine/train/csv.h"
#include "engine/train/files.h"
#include "engine/train/net.h"
#include "engine/train/optim.h"
#include "engine/train/prefetch.h"
#include "engine/train/opts.h"
#include "engine/train/rng.h"
#include "tests/unit/batch.h"
#include "tests/unit/check.h"
#include "tests/unit/ref_mlp.h"

#define TMP_TEMPLATE "/tmp/dlh-test-train-net-XXXXXX"

static char tmpdir[sizeof TMP_TEMPLATE];   /* this run's scratch directory */

/* A small CNN: 2x6x6 -> conv3(k3) -> relu -> pool2 -> conv4(k5) -> relu ->
 * pool2 (3x3 floors to 1x1) -> dense 5 -> relu -> [dropout] -> dense 3. */
static void small_cnn(struct dlt_net_spec *s, float dropout)
{
	memset(s, 0, sizeof *s);
	s->in = (struct dlt_shape){ 2, 6, 6 };
	s->classes = 3;
	s->nconv = 2;
	s->filters[0] = 3;
	s->kernel[0] = 3;
	s->filters[1] = 4;
	s->kernel[1] = 5;
	s->pool = 2;
	s->ndense = 1;
	s->dense[0] = 5;
	s->dropout = dropout;
}

TEST(net_mlp_matches_mlp_bit_for_bit)
{
	enum { IN = 30, C = 4, N = 9 };
	const int hidden[2] = { 17, 8 };
	char err[DLT_ERR_MAX];
	struct dlt_mlp m;
	struct dlt_net n;
	struct dlt_net_spec s;
	float x[N * IN], *p1, *p2, *g1, *g2;
	uint8_t y[N];
	double l1 = 0, l2 = 0;
	long h1 = 0, h2 = 0;

	mlp_spec(&s, IN, hidden, 2, C);
	CHECK(dlt_mlp_create(&m, IN, hidden, 2, C, N, err, sizeof err) == 0);
	CHECK_MSG(dlt_net_create(&n, &s, N, 1, 0, err, sizeof err) == 0, "%s", err);
	CHECK(n.nparams == m.nparams);
	p1 = malloc(m.nparams * sizeof *p1);
	p2 = malloc(m.nparams * sizeof *p2);
	g1 = malloc(m.nparams * sizeof *g1);
	g2 = malloc(m.nparams * sizeof *g2);
	dlt_mlp_init_params(&m, p1, 77);
	dlt_net_init_params(&n, p2, 77);
	CHECK(memcmp(p1, p2, m.nparams * sizeof *p1) == 0);
	fill_batch(x, y, N, IN, C, 5);
	dlt_mlp_train_batch(&m, p1, x, y, N, 0.5f, g1, &l1, &h1);
	dlt_net_train_batch(&n, p2, x, y, N, 0.5f, 1, g2, &l2, &h2);
	CHECK(l1 == l2 && h1 == h2);
	CHECK(memcmp(g1, g2, m.nparams * sizeof *g1) == 0);
	free(p1);
	free(p2);
	free(g1);
	free(g2);
	dlt_mlp_destroy(&m);
	dlt_net_destroy(&n);
}

TEST(cnn_backward_matches_finite_differences)
{
	enum { N = 3, DIM = 2 * 6 * 6 };
	char err[DLT_ERR_MAX];
	struct dlt_net n;
	struct dlt_net_spec s;
	struct dlt_rng r;
	float x[N * DIM], *p, *g;
	uint8_t y[N];
	int checked = 0, bad = 0;

	small_cnn(&s, 0.0f);
	CHECK_MSG(dlt_net_create(&n, &s, N, 1, 0, err, sizeof err) == 0, "%s", err);
	/* conv 2*9*3+3, conv 3*25*4+4, dense 4*5+5, dense 5*3+3 */
	CHECK_MSG(n.nparams == 57 + 304 + 25 + 18, "%zu params", n.nparams);
	p = malloc(n.nparams * sizeof *p);
	g = malloc(n.nparams * sizeof *g);
	dlt_net_init_params(&n, p, 3);
	dlt_rng_seed(&r, 5, 0, 0);
	for (size_t i = 0; i < n.nparams; i++)   /* nonzero biases too */
		p[i] += (float)(0.05 * dlt_rng_normal(&r));
	fill_batch(x, y, N, DIM, 3, 8);

	double loss = 0;
	long hits = 0;

	dlt_net_train_batch(&n, p, x, y, N, 1.0f, 1, g, &loss, &hits);
	for (size_t i = 0; i < n.nparams; i++) {
		const float eps = 1e-3f;   /* small: many ReLU and max kinks */
		float keep = p[i];
		double lp = 0, lm = 0;
		long h = 0;

		p[i] = keep + eps;
		dlt_net_eval_batch(&n, p, x, y, N, &lp, &h);
		p[i] = keep - eps;
		dlt_net_eval_batch(&n, p, x, y, N, &lm, &h);
		p[i] = keep;
		double num = (lp - lm) / (2.0 * eps) / N, ana = g[i];
		double big = fmax(fabs(num), fabs(ana));

		if (big < 5e-3)
			continue;   /* too small for float central differences */
		checked++;
		if (fabs(num - ana) / big > 2e-2) {   /* a ReLU or max kink inside +-eps */
			bad++;
			if (getenv("DLT_TEST_VERBOSE"))
				printf("param %zu: analytic %g numeric %g\n", i, ana, num);
		}
	}
	CHECK_MSG(checked > 100, "only %d entries large enough to check", checked);
	CHECK_MSG(bad * 50 <= checked, "%d of %d gradients off", bad, checked);
	free(p);
	free(g);
	dlt_net_destroy(&n);
}

TEST(dropout_masks_are_counter_hashed)
{
	enum { N = 4000 };
	long kept = 0, same = 0;

	for (uint64_t i = 0; i < N; i++) {
		int k = dlt_dropout_keep(9, 100, 1, 7, i, 0.25f);

		kept += k;
		CHECK(k == dlt_dropout_keep(9, 100, 1, 7, i, 0.25f));
		same += k == dlt_dropout_keep(9, 101, 1, 7, i, 0.25f);
	}
	CHECK_MSG(labs(kept - 3000) < 150, "kept %ld of %d at p 0.25", kept, N);
	CHECK_MSG(same < 3 * N / 4 + 200, "steps 100 and 101 agree on %ld", same);
}

TEST(dropout_layer_scales_kept_and_is_identity_in_eval)
{
	enum { N = 2, IN = 40 };
	const int hidden[1] = { 64 };
	char err[DLT_ERR_MAX];
	struct dlt_net n;
	struct dlt_net_spec s;
	float x[N * IN], *p;
	uint8_t y[N];
	int zeros = 0;

	mlp_spec(&s, IN, hidden, 1, 3);
	s.dropout = 0.5f;
	CHECK(dlt_net_create(&n, &s, N, 4, 0, err, sizeof err) == 0);
	CHECK(n.nlayers == 4 && n.layer[2].kind == DLT_LAYER_DROPOUT);
	p = malloc(n.nparams * sizeof *p);
	dlt_net_init_params(&n, p, 1);
	fill_batch(x, y, N, IN, 3, 2);
	dlt_net_forward(&n, p, x, N, 1, 12);
	for (int i = 0; i < N * 64; i++) {
		float a = n.act[1][i], d = n.act[2][i];

		CHECK(d == 0.0f || d == a * 2.0f);
		zeros += d == 0.0f && a != 0.0f;
	}
	CHECK(zeros > 10);
	dlt_net_forward(&n, p, x, N, 0, 12);
	CHECK(memcmp(n.act[1], n.act[2], N * 64 * sizeof(float)) == 0);
	free(p);
	dlt_net_destroy(&n);
}

/* One data-parallel step done two ways from the same weights: (a) two
 * shards of 3 and 5 rows, weighted 3/8 and 5/8, gradients summed as the
 * allreduce would, one optimizer update; (b) the 8 rows in one call, one
 * update. Returns the largest difference of the resulting weights, or
 * -1 when something could not be set up. Two steps are taken so the
 * optimizer state is exercised. */
static double shard_vs_global(const struct dlt_net_spec *s, int dim, enum dlt_optim_kind kind)
{
	enum { N = 8, NA = 3 };
	char err[DLT_ERR_MAX];
	struct dlt_net n;
	const struct dlt_optim o = { .kind = kind, .momentum = 0.9f, .weight_decay = 0.01f,
				     .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f };
	double worst = 0;

	if (dlt_net_create(&n, s, N, 1, 0, err, sizeof err) < 0)
		return -1;

	size_t np = n.nparams, ns = (size_t)dlt_optim_nstate(kind);
	float *wa = malloc(np * sizeof(float)), *wb = malloc(np * sizeof(float));
	float *sa = calloc(ns * np, sizeof(float)), *sb = calloc(ns * np, sizeof(float));
	float *g = malloc(np * sizeof(float)), *g2 = malloc(np * sizeof(float));
	float *x = malloc((size_t)N * (size_t)dim * sizeof(float));
	uint8_t y[N];
	double loss = 0;
	long hits = 0;

	dlt_net_init_params(&n, wa, 11);
	memcpy(wb, wa, np * sizeof(float));
	for (unsigned long t = 1; t <= 2; t++) {
		fill_batch(x, y, N, dim, s->classes, 20 + t);
		dlt_net_train_batch(&n, wa, x, y, NA, (float)NA / N, t, g, &loss, &hits);
		dlt_net_train_batch(&n, wa, x + (size_t)NA * (size_t)dim, y + NA, N - NA,
				    (float)(N - NA) / N, t, g2, &loss, &hits);
		for (size_t i = 0; i < np; i++)
			g[i] += g2[i];
		dlt_optim_step(&o, 0.01f, t, wa, sa, g, np);
		dlt_net_train_batch(&n, wb, x, y, N, 1.0f, t, g, &loss, &hits);
		dlt_optim_step(&o, 0.01f, t, wb, sb, g, np);
	}
	for (size_t i = 0; i < np; i++) {
		double d = fabs((double)wa[i] - wb[i]) / (1.0 + fabs((double)wb[i]));

		if (d > worst)
			worst = d;
	}
	free(wa);
	free(wb);
	free(sa);
	free(sb);
	free(g);
	free(g2);
	free(x);
	dlt_net_destroy(&n);
	return worst;
}

TEST(shard_step_equals_global_step_all_optimizers)
{
	const int hidden[2] = { 16, 12 };
	const enum dlt_optim_kind kinds[3] = { DLT_OPTIM_SGD, DLT_OPTIM_NESTEROV, DLT_OPTIM_ADAM };
	struct dlt_net_spec mlp, cnn;

	mlp_spec(&mlp, 24, hidden, 2, 5);
	small_cnn(&cnn, 0.0f);
	for (int k = 0; k < 3; k++) {
		double dm = shard_vs_global(&mlp, 24, kinds[k]);
		double dc = shard_vs_global(&cnn, 2 * 6 * 6, kinds[k]);

		/* Adam divides by sqrt(v): a gradient near 0 magnifies float noise */
		double tol = kinds[k] == DLT_OPTIM_ADAM ? 1e-4 : 1e-6;

		CHECK_MSG(dm >= 0 && dm < tol, "mlp %s: weights differ by %g",
			  dlt_optim_name(kinds[k]), dm);
		CHECK_MSG(dc >= 0 && dc < tol, "cnn %s: weights differ by %g",
			  dlt_optim_name(kinds[k]), dc);
	}
}

TEST(nesterov_and_adam_match_pytorch_formulas)
{
	const struct dlt_optim nes = { .kind = DLT_OPTIM_NESTEROV, .momentum = 0.9f,
				       .weight_decay = 0.01f };
	const struct dlt_optim adam = { .kind = DLT_OPTIM_ADAM, .weight_decay = 0.01f,
					.beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f };
	float w[1] = { 1.0f }, st[2] = { 0.5f, 0.0f }, g[1] = { 0.1f };

	/* g' = 0.11; v = 0.45 + 0.11 = 0.56; w = 1 - 0.1 (0.11 + 0.504) */
	dlt_optim_step(&nes, 0.1f, 1, w, st, g, 1);
	CHECK(fabsf(st[0] - 0.56f) < 1e-6f && fabsf(w[0] - 0.9386f) < 1e-6f);

	/* step 1 from zero state: m = 0.011, v = 0.000121; m^ = 0.11, v^ = 0.0121:
	 * w = 1 - 0.1 * 0.11 / (0.11 + 1e-8) = 0.9 */
	w[0] = 1.0f;
	st[0] = st[1] = 0.0f;
	dlt_optim_step(&adam, 0.1f, 1, w, st, g, 1);
	CHECK(fabsf(st[0] - 0.011f) < 1e-7f && fabsf(st[1] - 0.0000121f) < 1e-9f);
	CHECK_MSG(fabsf(w[0] - 0.9f) < 1e-6f, "w %.9g", w[0]);
	/* step 2, g' = 0.1 + 0.009 = 0.109 */
	double m = 0.9 * 0.011 + 0.1 * 0.109, v = 0.999 * 0.0000121 + 0.001 * 0.109 * 0.109;
	double want = 0.9 - 0.1 / (1 - 0.81) * m / (sqrt(v) / sqrt(1 - 0.999 * 0.999) + 1e-8);

	dlt_optim_step(&adam, 0.1f, 2, w, st, g, 1);
	CHECK_MSG(fabs(w[0] - want) < 1e-6, "w %.9g want %.9g", w[0], want);
}

TEST(lr_schedules_and_warmup)
{
	struct dlt_sched sc = { .kind = DLT_SCHED_STEP, .lr = 0.1, .gamma = 0.5,
				.step_epochs = 2, .warmup_steps = 4,
				.steps_per_epoch = 10, .total_steps = 100 };

	CHECK(fabs(dlt_sched_lr(&sc, 0) - 0.025) < 1e-12);
	CHECK(fabs(dlt_sched_lr(&sc, 3) - 0.1) < 1e-12);
	CHECK(fabs(dlt_sched_lr(&sc, 19) - 0.1) < 1e-12);
	CHECK(fabs(dlt_sched_lr(&sc, 20) - 0.05) < 1e-12);
	CHECK(fabs(dlt_sched_lr(&sc, 45) - 0.025) < 1e-12);
	sc.kind = DLT_SCHED_COSINE;
	sc.warmup_steps = 0;
	CHECK(fabs(dlt_sched_lr(&sc, 0) - 0.1) < 1e-12);
	CHECK(fabs(dlt_sched_lr(&sc, 50) - 0.05) < 1e-12);
	CHECK(dlt_sched_lr(&sc, 99) > 0 && dlt_sched_lr(&sc, 99) < 1e-4);
	sc.kind = DLT_SCHED_CONSTANT;
	CHECK(dlt_sched_lr(&sc, 77) == 0.1);
}

TEST(ckpt_v2_keeps_adam_state_and_refuses_mismatch)
{
	enum { N = 50 };
	char path[DLT_PATH_MAX], err[DLT_ERR_MAX];
	struct dlt_ckpt_meta m, r;
	float p[N], st[2 * N], p2[N], st2[2 * N];
	unsigned char ver[4] = { 1, 0, 0, 0 };
	int fd;

	snprintf(path, sizeof path, "%s/adam.ckpt", tmpdir);
	memset(&m, 0, sizeof m);
	m.nparams = N;
	m.step = 9;
	m.optimizer = DLT_OPTIM_ADAM;
	m.nstate = 2;
	for (int i = 0; i < N; i++) {
		p[i] = (float)i;
		st[i] = -(float)i;
		st[N + i] = (float)i * 0.25f;
	}
	CHECK_MSG(dlt_ckpt_write(path, &m, p, st, err, sizeof err) == 0, "%s", err);
	CHECK_MSG(dlt_ckpt_read(path, &r, N, 2, p2, st2, err, sizeof err) == 0, "%s", err);
	CHECK(r.optimizer == DLT_OPTIM_ADAM && r.nstate == 2 && r.step == 9);
	CHECK(memcmp(p, p2, sizeof p) == 0 && memcmp(st, st2, sizeof st) == 0);
	CHECK(dlt_ckpt_read(path, &r, N, 1, p2, st2, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "optimizer"), "%s", err);
	fd = open(path, O_RDWR);   /* a version 1 file is refused by number */
	CHECK(fd >= 0);
	CHECK(pwrite(fd, ver, 4, 8) == 4);
	close(fd);
	CHECK(dlt_ckpt_read(path, &r, N, 2, p2, st2, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "version 1"), "%s", err);
}

TEST(ckpt_same_payload_ignores_header)
{
	enum { N = 40 };
	char a[DLT_PATH_MAX], b[DLT_PATH_MAX], err[DLT_ERR_MAX];
	struct dlt_ckpt_meta m;
	float p[N], st[N];

	snprintf(a, sizeof a, "%s/a.ckpt", tmpdir);
	snprintf(b, sizeof b, "%s/b.ckpt", tmpdir);
	memset(&m, 0, sizeof m);
	m.nparams = N;
	m.nstate = 1;
	for (int i = 0; i < N; i++)
		p[i] = st[i] = (float)i;
	CHECK(dlt_ckpt_write(a, &m, p, st, err, sizeof err) == 0);
	m.elapsed_s = 99.0;   /* header only */
	CHECK(dlt_ckpt_write(b, &m, p, st, err, sizeof err) == 0);
	CHECK_MSG(dlt_ckpt_same_payload(a, b, err, sizeof err) == 1, "%s", err);
	p[7] = 7.5f;
	CHECK(dlt_ckpt_write(b, &m, p, st, err, sizeof err) == 0);
	CHECK(dlt_ckpt_same_payload(a, b, err, sizeof err) == 0);
	CHECK_MSG(strstr(err, "differ at payload float 7"), "%s", err);
	unlink(a);
	unlink(b);
}

TEST(prefetch_ring_is_as_deep_as_its_byte_budget_allows)
{
	size_t slot = 2048u * 784u * sizeof(float);   /* 6.4 MB */

	CHECK(dlt_prefetch_depth(64, 784) == DLT_PREFETCH_MAX_DEPTH);
	CHECK(dlt_prefetch_depth(1024, 784) == (int)(DLT_PREFETCH_RING_BYTES / (slot / 2)));
	CHECK(dlt_prefetch_depth(4096, 784) == DLT_PREFETCH_MIN_DEPTH);
	CHECK(dlt_prefetch_depth(1 << 20, 784) == DLT_PREFETCH_MIN_DEPTH);
	for (int b = 1; b <= 8192; b *= 2) {
		int dp = dlt_prefetch_depth(b, 784);

		CHECK_MSG(dp >= DLT_PREFETCH_MIN_DEPTH && dp <= DLT_PREFETCH_MAX_DEPTH &&
			  (dp == DLT_PREFETCH_MIN_DEPTH || (size_t)dp * b * 784 * sizeof(float) <= DLT_PREFETCH_RING_BYTES),
			  "batch %d: depth %d", b, dp);
	}
}

TEST(prefetch_gives_the_seeded_batches_in_order)
{
	enum { N = 23, DIM = 3, B = 4, SPE = 5 };
	static float x[N * DIM];
	static uint8_t y[N];
	struct dlt_dataset d = { .x = x, .y = y, .n = N, .dim = DIM };
	struct dlt_prefetch pf;
	char err[DLT_ERR_MAX];
	uint32_t perm[N];
	float want[B * DIM];
	uint8_t wy[B];

	for (int i = 0; i < N * DIM; i++)
		x[i] = (float)i;
	for (int i = 0; i < N; i++)
		y[i] = (uint8_t)i;
	const struct dlt_feed f = { .batch = B, .cap = B };

	CHECK(dlt_prefetch_start(&pf, &d, &f, SPE, 42, 1, 3, 30, err, sizeof err) == 0);
	/* from step 3 (as after a resume) across epoch boundaries, ring wraps */
	for (long s = 3; s <= 30; s++) {
		const float *bx;
		const uint8_t *by;
		struct dlt_rng r;

		dlt_prefetch_get(&pf, s, &bx, &by);
		dlt_rng_seed(&r, 42, (uint64_t)((s - 1) / SPE), 1);
		dlt_rng_permutation(&r, perm, N);
		dlt_dataset_gather(&d, perm + ((s - 1) % SPE) * B, B, want, wy);
		CHECK_MSG(memcmp(bx, want, sizeof want) == 0 && memcmp(by, wy, sizeof wy) == 0,
			  "step %ld", s);
	}
	dlt_prefetch_stop(&pf);
}

/* Two ranks' whole-set feeds: at every step their rows together are the
 * step's rows of the one permutation of the epoch, before and after a
 * re-split moves rows from one to the other. */
TEST(prefetch_whole_set_feeds_cover_the_global_batch_across_a_resplit)
{
	enum { N = 23, DIM = 2, G = 6, SPE = 3, LAST = 16, FROM = 10 };
	static float x[N * DIM];
	static uint8_t y[N];
	struct dlt_dataset d = { .x = x, .y = y, .n = N, .dim = DIM };
	struct dlt_prefetch a, b;
	char err[DLT_ERR_MAX];
	uint32_t perm[N];

	for (int i = 0; i < N * DIM; i++)
		x[i] = (float)i;
	for (int i = 0; i < N; i++)
		y[i] = (uint8_t)i;
	const struct dlt_feed fa = { .batch = 4, .cap = 5, .global = 1, .off = 0, .stride = G };
	const struct dlt_feed fb = { .batch = 2, .cap = 5, .global = 1, .off = 4, .stride = G };
	CHECK(dlt_prefetch_start(&a, &d, &fa, SPE, 42, 0, 1, LAST, err, sizeof err) == 0);
	CHECK(dlt_prefetch_start(&b, &d, &fb, SPE, 42, 1, 1, LAST, err, sizeof err) == 0);
	/* refused: too early for what the ring may hold, over the cap, outside the stride */
	CHECK(dlt_prefetch_resplit(&a, DLT_PREFETCH_MAX_DEPTH, 0, 1, err, sizeof err) == -EINVAL);
	CHECK(dlt_prefetch_resplit(&a, FROM, 0, 6, err, sizeof err) == -EINVAL);
	CHECK(dlt_prefetch_resplit(&b, FROM, 3, 4, err, sizeof err) == -EINVAL);
	CHECK(dlt_prefetch_resplit(&a, FROM, 0, 1, err, sizeof err) == 0);
	CHECK(dlt_prefetch_resplit(&b, FROM, 1, 5, err, sizeof err) == 0);
	CHECK(dlt_prefetch_resplit(&b, FROM, 1, 5, err, sizeof err) == -EINVAL);   /* not after */
	for (long s = 1; s <= LAST; s++) {
		const float *ax, *bx;
		const uint8_t *ay, *by;
		int na = dlt_prefetch_get(&a, s, &ax, &ay), nb = dlt_prefetch_get(&b, s, &bx, &by);
		struct dlt_rng r;
		float want[G * DIM];
		uint8_t wy[G];

		CHECK_MSG(na == (s < FROM ? 4 : 1) && nb == G - na, "step %ld: %d + %d rows", s, na, nb);
		dlt_rng_seed(&r, 42, (uint64_t)((s - 1) / SPE), DLT_FEED_GLOBAL);
		dlt_rng_permutation(&r, perm, N);
		dlt_dataset_gather(&d, perm + ((s - 1) % SPE) * G, G, want, wy);
		CHECK_MSG(memcmp(ax, want, (size_t)na * DIM * sizeof(float)) == 0 &&
			  memcmp(bx, want + na * DIM, (size_t)nb * DIM * sizeof(float)) == 0 &&
			  memcmp(ay, wy, (size_t)na) == 0 && memcmp(by, wy + na, (size_t)nb) == 0,
			  "step %ld", s);
	}
	dlt_prefetch_stop(&a);
	dlt_prefetch_stop(&b);
	/* an own-shard feed cannot be re-split; a feed larger than an epoch is refused */
	const struct dlt_feed own = { .batch = 2, .cap = 2 }, big = { .batch = 8, .cap = 8 };
	CHECK(dlt_prefetch_start(&a, &d, &own, SPE, 42, 0, 1, LAST, err, sizeof err) == 0);
	CHECK(dlt_prefetch_resplit(&a, FROM, 0, 1, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "not a whole-set feed"), "%s", err);
	dlt_prefetch_stop(&a);
	CHECK(dlt_prefetch_start(&a, &d, &big, SPE, 42, 0, 1, LAST, err, sizeof err) == -EINVAL);
}

TEST(opts_parse_cnn_optimizer_schedule_flags)
{
	char *argv[] = { "dlh-train", "--job-dir", "/j", "--train-images", "a",
		"--test-images", "c", "--format", "csv", "--model", "cnn",
		"--conv", "16:3,32:5", "--pool", "1", "--dense", "512,128", "--dropout", "0.4",
		"--optimizer", "adam", "--beta2", "0.99", "--schedule", "cosine",
		"--warmup-steps", "50", "--bucket-mb", "0.05", "--epochs", "2", "--batch", "64",
		"--lr", "0.001" };
	int argc = (int)(sizeof argv / sizeof argv[0]);
	char err[DLT_ERR_MAX];
	struct dlt_opts o;

	CHECK_MSG(dlt_opts_parse(argc, argv, &o, err, sizeof err) == 0, "%s", err);
	CHECK(o.model == DLT_MODEL_CNN && o.nconv == 2 && o.conv_filters[1] == 32 &&
	      o.conv_kernel[1] == 5 && o.pool == 1 && o.ndense == 2 && o.dense[1] == 128);
	CHECK(o.dropout == 0.4 && o.optimizer == DLT_OPTIM_ADAM && o.beta1 == 0.9 &&
	      o.beta2 == 0.99 && o.eps == 1e-8 && o.schedule == DLT_SCHED_COSINE);
	CHECK(o.warmup_steps == 50 && o.bucket_mb == 0.05 && o.format == DLT_FORMAT_CSV &&
	      o.image_size == 28 && o.gamma == 0.1 && o.step_epochs == 1);
	argv[12] = "16:4";   /* even kernel */
	CHECK(dlt_opts_parse(argc, argv, &o, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "--conv \"16:4\""), "%s", err);
	argv[12] = "16:3";
	argv[20] = "adamw";
	CHECK(dlt_opts_parse(argc, argv, &o, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "--optimizer \"adamw\": unknown value"), "%s", err);
	argv[20] = "adam";
	argv[8] = "idx";   /* idx needs the label files */
	CHECK(dlt_opts_parse(argc, argv, &o, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "--train-labels"), "%s", err);
	argv[8] = "csv";
	argv[10] = "mlp";   /* mlp needs --layers */
	CHECK(dlt_opts_parse(argc, argv, &o, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "--layers"), "%s", err);
}

TEST(csv_loads_shard_and_names_bad_line)
{
	char path[DLT_PATH_MAX], err[DLT_ERR_MAX], want[DLT_PATH_MAX + 64];
	struct dlt_dataset d;
	long n;
	int ymax;

	snprintf(path, sizeof path, "%s/t.csv", tmpdir);
	CHECK(dlt_write_atomic_str(path, "label,p1,p2,p3,p4\r\n"
				   "3,0,255,10,20\r\n7,1,2,3,4\n9,255,0,0,0", err, sizeof err) == 0);
	CHECK_MSG(dlt_csv_probe(path, &n, &ymax, err, sizeof err) == 0, "%s", err);
	CHECK(n == 3 && ymax == 9);
	CHECK_MSG(dlt_csv_load(&d, path, 4, 1, 3, err, sizeof err) == 0, "%s", err);
	CHECK(d.n == 2 && d.dim == 4 && d.y[0] == 7 && d.y[1] == 9);
	CHECK(d.x[0] == ((1.0f / 255.0f - DLT_IDX_MEAN) / DLT_IDX_STD));
	CHECK(d.x[4] == ((255.0f / 255.0f - DLT_IDX_MEAN) / DLT_IDX_STD));
	dlt_dataset_free(&d);
	/* line 3 (header counted) is one pixel short */
	CHECK(dlt_write_atomic_str(path, "label,a,b,c,d\n1,0,0,0,0\n2,0,0,0\n", err,
				   sizeof err) == 0);
	CHECK(dlt_csv_load(&d, path, 4, 0, 2, err, sizeof err) == -EINVAL);
	snprintf(want, sizeof want, "\"%s\":3: expected 5 values, got 4", path);
	CHECK_MSG(strcmp(err, want) == 0, "%s", err);
	/* a pixel out of range */
	CHECK(dlt_write_atomic_str(path, "1,0,0,256,0\n", err, sizeof err) == 0);
	CHECK(dlt_csv_load(&d, path, 4, 0, 1, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, ":1: value 4 is not an integer 0..255"), "%s", err);
	unlink(path);
}

int main(void)
{
	strcpy(tmpdir, TMP_TEMPLATE);
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	RUN(net_mlp_matches_mlp_bit_for_bit);
	RUN(cnn_backward_matches_finite_differences);
	RUN(dropout_masks_are_counter_hashed);
	RUN(dropout_layer_scales_kept_and_is_identity_in_eval);
	RUN(shard_step_equals_global_step_all_optimizers);
	RUN(nesterov_and_adam_match_pytorch_formulas);
	RUN(lr_schedules_and_warmup);
	RUN(ckpt_v2_keeps_adam_state_and_refuses_mismatch);
	RUN(ckpt_same_payload_ignores_header);
	RUN(prefetch_ring_is_as_deep_as_its_byte_budget_allows);
	RUN(prefetch_gives_the_seeded_batches_in_order);
	RUN(prefetch_whole_set_feeds_cover_the_global_batch_across_a_resplit);
	RUN(opts_parse_cnn_optimizer_schedule_flags);
	RUN(csv_loads_shard_and_names_bad_line);
	char path[DLT_PATH_MAX];

	snprintf(path, sizeof path, "%s/adam.ckpt", tmpdir);
	unlink(path);
	rmdir(tmpdir);
	return CHECK_EXIT();
}
