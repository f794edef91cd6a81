/* test_train_gpu.c - the CUDA backend against the CPU layers: layers, loss, optimizers, NCCL step
 *
 * Every case that needs a GPU skips with the backend's reason ("no NVIDIA
 * GPU: ...") where there is none or the build has no CUDA. Parameters are
 * initialised once on the host (dlt_net_init_params) and uploaded, so both
 * sides start from the same numbers; results must agree to float
 * tolerance (cuBLAS and OpenBLAS sum in different orders, expf/logf differ
 * by an ulp): relative L2 error below TOL_GRAD for gradients and logits,
 * TOL_STEP for the parameter updates of a few optimizer steps.
 *
 * The tensor-core precisions (dlt_gpu_set_precision) round the GEMMs'
 * inputs, so they are held to looser bounds, each about 3x to 10x what the
 * emulation measured (the figures are printed as "measured: ..."): tf32
 * rounds to 11 significant bits (unit roundoff 2^-11, 4.9e-4), bf16 to 8
 * (2^-8, 3.9e-3), both sum in FP32; an error of a few unit roundoffs after
 * a few layers is what rounding gives, a wrong operand or a stale weight
 * copy gives errors of order 1. See struct tol. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/train/files.h"
#include "engine/train/gpu.h"
#include "engine/train/net.h"
#include "engine/train/optim.h"
#include "engine/train/rng.h"
#include "tests/unit/batch.h"
#include "tests/unit/check.h"

#define TOL_GRAD 1e-4    /* relative L2 error of gradients and logits */
#define TOL_STEP 1e-3    /* relative L2 error of parameter updates after a few steps */
#define TOL_LOSS 1e-5    /* relative error of a batch's loss sum */

/* How far a precision may take the GPU from the CPU trainer. */
struct tol {
	enum dlt_precision prec;   /* the GPU side's */
	const char *name;          /* for messages */
	double grad;               /* relative L2 of logits and gradients of one batch */
	double loss;               /* relative error of a batch's loss sum */
	long hits;                 /* correct rows that may differ, of a batch (near ties) */
	double train;              /* relative error of the loss at every step of train_both */
};

static const struct tol tol_fp32 = { DLT_PRECISION_FP32, "fp32", TOL_GRAD, TOL_LOSS, 0, 1e-4 };
/* The emulation measured (the MLP and the CNN of the batch test, 25 steps
 * of train_both): tf32 gradients 3.2e-3 and 5.1e-3, loss sums 1e-4, step
 * losses 5.6e-3 apart at most; bf16 gradients 4.6e-2 and 1.5e-2 (the
 * deltas of the lower layers go through more rounded products, and a
 * gradient of random data is a sum that mostly cancels), loss sums 1.1e-3,
 * step losses 1.3e-2 apart. No hits differed. A real GPU may round TF32
 * by truncation (twice the error) and sums in other orders. */
static const struct tol tol_tf32 = { DLT_PRECISION_TF32, "tf32", 2e-2, 1e-3, 1, 2e-2 };
static const struct tol tol_bf16 = { DLT_PRECISION_BF16, "bf16", 1.5e-1, 1e-2, 2, 5e-2 };

/* What compare_batch measured. */
struct seen {
	double logits, grads, loss;   /* relative L2, relative L2, relative error */
	long hits;                    /* |GPU's hits - CPU's| */
};

static char why[DLT_ERR_MAX];   /* the backend's reason when there is no GPU */
static int have_gpu;            /* 1 when dlt_gpu_count found a device */

/* Returns ||a - b|| / max(||b||, 1e-30) over n floats. */
static double rel_l2(const float *a, const float *b, size_t n)
{
	double d = 0.0, s = 0.0;

	for (size_t i = 0; i < n; i++) {
		double e = (double)a[i] - (double)b[i];

		d += e * e;
		s += (double)b[i] * (double)b[i];
	}
	return sqrt(d) / (s > 1e-60 ? sqrt(s) : 1e-30);
}

/* 1 when g is the host emulation, whose graph holds a node per call: on
 * a GPU cuBLAS may run a product as more than one kernel (the H200 ran
 * some of the MLP's as two), so a step's node count is printed there, and
 * checked here. */
static int emulated(struct dlt_gpu *g)
{
	char name[DLT_ERR_MAX];

	dlt_gpu_describe(g, name, sizeof name);
	return strstr(name, "host emulation") != NULL;
}

/* A CNN spec: c x h x w -> conv blocks -> dense -> [dropout] -> classes. */
static void cnn_spec(struct dlt_net_spec *s, struct dlt_shape in, int nconv, const int *filters,
		     const int *kernel, int pool, int dense, float dropout, int classes)
{
	memset(s, 0, sizeof *s);
	s->in = in;
	s->classes = classes;
	s->nconv = nconv;
	memcpy(s->filters, filters, (size_t)nconv * sizeof *filters);
	memcpy(s->kernel, kernel, (size_t)nconv * sizeof *kernel);
	s->pool = pool;
	s->ndense = 1;
	s->dense[0] = dense;
	s->dropout = dropout;
}

/* Both sides of one comparison: the CPU stack and the GPU backend over the
 * same initial parameters, plus a batch. */
struct pair {
	struct dlt_net net;      /* CPU */
	struct dlt_gpu *gpu;     /* GPU */
	float *params;           /* host parameters (the CPU side's) */
	float *state;            /* host optimizer state */
	float *x;                /* batch */
	uint8_t *y;              /* labels */
	int rows;                /* batch rows */
	int nstate;              /* optimizer arrays */
	char err[DLT_ERR_MAX];   /* the last failure */
};

/* Builds both sides of spec for rows rows with nstate optimizer arrays.
 * Returns 0, or -1 with p->err set. */
static int pair_open_prec(struct pair *p, const struct dlt_net_spec *spec, int rows, int nstate,
			  uint64_t seed, enum dlt_precision prec)
{
	size_t dim = dlt_shape_size(spec->in);

	memset(p, 0, sizeof *p);
	p->rows = rows;
	p->nstate = nstate;
	if (dlt_net_create(&p->net, spec, rows, seed, 0, p->err, sizeof p->err) < 0)
		return -1;
	p->params = malloc(p->net.nparams * sizeof(float));
	p->state = calloc((size_t)nstate * p->net.nparams, sizeof(float));
	p->x = malloc((size_t)rows * dim * sizeof(float));
	p->y = malloc((size_t)rows);
	if (!p->params || !p->state || !p->x || !p->y) {
		snprintf(p->err, sizeof p->err, "out of memory");
		return -1;
	}
	dlt_net_init_params(&p->net, p->params, seed);
	fill_batch(p->x, p->y, rows, (int)dim, spec->classes, seed + 1);
	if (dlt_gpu_create(&p->gpu, &p->net, nstate, 0, seed, 0, p->err, sizeof p->err) < 0 ||
	    dlt_gpu_set_precision(p->gpu, prec, p->err, sizeof p->err) < 0 ||
	    dlt_gpu_upload(p->gpu, p->params, p->state, p->err, sizeof p->err) < 0)
		return -1;
	return 0;
}

/* pair_open_prec in FP32. */
static int pair_open(struct pair *p, const struct dlt_net_spec *spec, int rows, int nstate,
		     uint64_t seed)
{
	return pair_open_prec(p, spec, rows, nstate, seed, DLT_PRECISION_FP32);
}

static void pair_close(struct pair *p)
{
	dlt_gpu_destroy(p->gpu);
	dlt_net_destroy(&p->net);
	free(p->params);
	free(p->state);
	free(p->x);
	free(p->y);
}

/* Compares one training batch (forward with dropout masks of step,
 * loss, backward) of both sides: logits, loss sum, hits and gradients,
 * within t (what was measured into *m when m is not NULL). Returns NULL,
 * or what differs (in msg). */
static const char *compare_batch_tol(struct pair *p, uint64_t step, const struct tol *t,
				     struct seen *m, char *msg, size_t len)
{
	struct seen dummy;
	const size_t np = p->net.nparams;
	const size_t nz = (size_t)p->rows * (size_t)p->net.classes;
	float *gc = malloc(np * sizeof(float)), *gg = malloc(np * sizeof(float));
	float *zg = malloc(nz * sizeof(float));
	double lc = 0.0, lg = 0.0, e;
	long hc = 0, hg = 0;
	const char *bad = NULL;

	if (!gc || !gg || !zg) {
		snprintf(msg, len, "out of memory");
		bad = msg;
		goto out;
	}
	const float *zc = dlt_net_forward(&p->net, p->params, p->x, p->rows, 1, step);

	if (dlt_gpu_forward(p->gpu, p->x, p->rows, 1, step, zg, p->err, sizeof p->err) < 0) {
		snprintf(msg, len, "%s", p->err);
		bad = msg;
		goto out;
	}
	if (!m)
		m = &dummy;
	e = m->logits = rel_l2(zg, zc, nz);
	if (!(e < t->grad)) {
		snprintf(msg, len, "%s: logits differ: relative L2 %g", t->name, e);
		bad = msg;
		goto out;
	}
	dlt_net_train_batch(&p->net, p->params, p->x, p->y, p->rows, 0.5f, step, gc, &lc, &hc);
	if (dlt_gpu_train_batch(p->gpu, p->x, p->y, p->rows, 0.5f, step, gg, &lg, &hg,
				p->err, sizeof p->err) < 0) {
		snprintf(msg, len, "%s", p->err);
		bad = msg;
		goto out;
	}
	m->loss = fabs(lg - lc) / fabs(lc);
	m->hits = labs(hg - hc);
	if (!(fabs(lg - lc) <= t->loss * fabs(lc)) || m->hits > t->hits) {
		snprintf(msg, len, "%s: loss sum %.9g vs cpu %.9g, hits %ld vs %ld", t->name, lg, lc,
			 hg, hc);
		bad = msg;
		goto out;
	}
	e = m->grads = rel_l2(gg, gc, np);
	if (!(e < t->grad)) {
		snprintf(msg, len, "%s: gradients differ: relative L2 %g", t->name, e);
		bad = msg;
	}
out:
	free(gc);
	free(gg);
	free(zg);
	return bad;
}

/* compare_batch_tol in FP32. */
static const char *compare_batch(struct pair *p, uint64_t step, char *msg, size_t len)
{
	return compare_batch_tol(p, step, &tol_fp32, NULL, msg, len);
}

/* compare_batch on a pair opened for spec (rows per batch, one optimizer
 * state array, seed) and closed again. Returns NULL, or what differs or
 * why the pair did not open (in msg). */
static const char *pair_batch(const struct dlt_net_spec *spec, int rows, uint64_t seed,
			      uint64_t step, char *msg, size_t len)
{
	struct pair p;
	const char *bad;

	if (pair_open(&p, spec, rows, 1, seed) < 0) {
		snprintf(msg, len, "cannot open the pair: %s", p.err);
		return msg;
	}
	bad = compare_batch(&p, step, msg, len);
	pair_close(&p);
	return bad;
}

/* Gives p's GPU side one gradient bucket per layer with parameters, last
 * layer first (the first one also holds the 2 loss floats), as main.c's
 * make_buckets does for a tiny --bucket-mb. Returns 0, or -1 with p->err. */
static int add_layer_buckets(struct pair *p)
{
	size_t hi = p->net.nparams + 2;

	for (int i = p->net.nlayers - 1; i >= 0; i--) {
		const struct dlt_layer *l = &p->net.layer[i];

		if (!l->nparams)
			continue;
		if (dlt_gpu_add_bucket(p->gpu, l->off, hi, i, p->err, sizeof p->err) < 0)
			return -1;
		hi = l->off;
	}
	return 0;
}

/* Runs steps optimizer steps of o on both sides (the CPU: train_batch and
 * dlt_optim_step; the GPU: train_batch and dlt_gpu_optim_step, or with
 * nccl, one dlt_gpu_step on a 1-rank communicator, with one gradient
 * bucket per layer when nccl is 2) and compares the parameter updates.
 * Returns NULL, or what differs. */
static const char *compare_steps(struct pair *p, const struct dlt_optim *o, int steps, int nccl,
				 char *msg, size_t len)
{
	const size_t np = p->net.nparams;
	float *g = malloc((np + 2) * sizeof(float)), *w0 = malloc(np * sizeof(float));
	float *wg = malloc(np * sizeof(float));
	const char *bad = NULL;
	unsigned char id[DLT_GPU_ID_BYTES];

	if (!g || !w0 || !wg) {
		snprintf(msg, len, "out of memory");
		bad = msg;
		goto out;
	}
	memcpy(w0, p->params, np * sizeof(float));
	if (nccl && (dlt_gpu_nccl_id(id, p->err, sizeof p->err) < 0 ||
		     dlt_gpu_nccl_init(p->gpu, id, 0, 1, p->err, sizeof p->err) < 0 ||
		     (nccl == 2 && add_layer_buckets(p) < 0))) {
		snprintf(msg, len, "%s", p->err);
		bad = msg;
		goto out;
	}
	for (int s = 1; s <= steps; s++) {
		double l = 0.0;
		long h = 0;
		float lr = 0.01f, sums[2];
		int rc;

		dlt_net_train_batch(&p->net, p->params, p->x, p->y, p->rows, 1.0f, (uint64_t)s,
				    g, &l, &h);
		dlt_optim_step(o, lr, (unsigned long)s, p->params, p->state, g, np);
		if (nccl) {
			rc = dlt_gpu_step(p->gpu, p->x, p->y, p->rows, 1.0f, (uint64_t)s, o, lr,
					  (unsigned long)s, sums, p->err, sizeof p->err);
			if (rc == 0 && !(fabs(sums[0] - l) <= TOL_LOSS * fabs(l) + 1e-6)) {
				snprintf(msg, len, "step %d: allreduced loss sum %g vs cpu %g", s,
					 (double)sums[0], l);
				bad = msg;
				goto out;
			}
		} else {
			rc = dlt_gpu_train_batch(p->gpu, p->x, p->y, p->rows, 1.0f, (uint64_t)s,
						 NULL, NULL, NULL, p->err, sizeof p->err);
			if (rc == 0)
				rc = dlt_gpu_optim_step(p->gpu, o, lr, (unsigned long)s,
							p->err, sizeof p->err);
		}
		if (rc < 0) {
			snprintf(msg, len, "step %d: %s", s, p->err);
			bad = msg;
			goto out;
		}
	}
	if (dlt_gpu_download(p->gpu, wg, NULL, p->err, sizeof p->err) < 0) {
		snprintf(msg, len, "%s", p->err);
		bad = msg;
		goto out;
	}
	/* compare the updates w - w0, not w: the updates are what can go wrong */
	for (size_t i = 0; i < np; i++) {
		wg[i] -= w0[i];
		g[i] = p->params[i] - w0[i];
	}
	double e = rel_l2(wg, g, np);

	if (!(e < TOL_STEP)) {
		snprintf(msg, len, "%s: parameter updates after %d steps differ: relative L2 %g",
			 dlt_optim_name(o->kind), steps, e);
		bad = msg;
	}
out:
	free(g);
	free(w0);
	free(wg);
	return bad;
}

TEST(gpu_count_or_a_reason)
{
	char err[DLT_ERR_MAX] = "";
	int n = dlt_gpu_count(err, sizeof err);

	if (n >= 1) {
		have_gpu = 1;
		return;
	}
	CHECK(n == -ENODEV || n == -ENOSYS);
	CHECK(strncmp(err, "no NVIDIA GPU: ", 15) == 0);
	CHECK(n == -ENOSYS ? !dlt_gpu_built() : dlt_gpu_built());
	snprintf(why, sizeof why, "%s", err);
}

TEST(gpu_mlp_batch_matches_cpu)
{
	const int hidden[3] = { 256, 128, 100 };
	struct dlt_net_spec s;
	char msg[DLT_ERR_MAX];
	const char *bad;

	if (!have_gpu)
		SKIP(why);
	mlp_spec(&s, 784, hidden, 3, 10);
	bad = pair_batch(&s, 64, 7, 1, msg, sizeof msg);
	CHECK_MSG(!bad, "%s", bad);
}

TEST(gpu_odd_sizes_mlp_batch_matches_cpu)
{
	const int hidden[2] = { 17, 3 };
	struct dlt_net_spec s;
	char msg[DLT_ERR_MAX];
	const char *bad;

	if (!have_gpu)
		SKIP(why);
	mlp_spec(&s, 29, hidden, 2, 5);
	bad = pair_batch(&s, 3, 11, 1, msg, sizeof msg);
	CHECK_MSG(!bad, "%s", bad);
}

TEST(gpu_cnn_with_dropout_batch_matches_cpu)
{
	/* the example's CNN at a smaller width: 1x28x28, conv 8:5 and 16:5,
	 * pool 2, dense 64 with dropout, 10 classes */
	const int f[2] = { 8, 16 }, k[2] = { 5, 5 };
	struct dlt_net_spec s;
	char msg[DLT_ERR_MAX];
	const char *bad;

	if (!have_gpu)
		SKIP(why);
	cnn_spec(&s, (struct dlt_shape){ 1, 28, 28 }, 2, f, k, 2, 64, 0.4f, 10);
	bad = pair_batch(&s, 16, 3, 5, msg, sizeof msg);
	CHECK_MSG(!bad, "%s", bad);
}

TEST(gpu_cnn_odd_shapes_batch_matches_cpu)
{
	/* 2x7x9 input, kernels 3 and 1, pool 3 (floors 7x9 to 2x3), no dropout */
	const int f[2] = { 3, 4 }, k[2] = { 3, 1 };
	struct dlt_net_spec s;
	char msg[DLT_ERR_MAX];
	const char *bad;

	if (!have_gpu)
		SKIP(why);
	cnn_spec(&s, (struct dlt_shape){ 2, 7, 9 }, 2, f, k, 3, 5, 0.0f, 3);
	s.pool = 1;   /* first without pooling ... */
	bad = pair_batch(&s, 5, 9, 1, msg, sizeof msg);
	CHECK_MSG(!bad, "no pool: %s", bad);
	s.nconv = 1;  /* ... then one conv and a 3x3 pool that floors */
	s.pool = 3;
	bad = pair_batch(&s, 5, 9, 1, msg, sizeof msg);
	CHECK_MSG(!bad, "pool 3: %s", bad);
}

TEST(gpu_eval_batch_matches_cpu)
{
	const int f[1] = { 6 }, k[1] = { 3 };
	struct dlt_net_spec s;
	struct pair p;
	double lc = 0.0, lg = 0.0;
	long hc = 0, hg = 0;
	int rc;

	if (!have_gpu)
		SKIP(why);
	cnn_spec(&s, (struct dlt_shape){ 1, 12, 12 }, 1, f, k, 2, 32, 0.5f, 10);
	CHECK_MSG(pair_open(&p, &s, 40, 1, 5) == 0, "%s", p.err);
	dlt_net_eval_batch(&p.net, p.params, p.x, p.y, p.rows, &lc, &hc);
	rc = dlt_gpu_eval_batch(p.gpu, p.x, p.y, p.rows, &lg, &hg, p.err, sizeof p.err);
	pair_close(&p);
	CHECK_MSG(rc == 0, "%s", p.err);
	CHECK_MSG(fabs(lg - lc) <= TOL_LOSS * fabs(lc) && hg == hc,
		  "eval loss %.9g vs cpu %.9g, hits %ld vs %ld", lg, lc, hg, hc);
}

TEST(gpu_optimizer_steps_match_cpu)
{
	const int hidden[2] = { 64, 32 };
	const struct dlt_optim opts[3] = {
		{ .kind = DLT_OPTIM_SGD, .momentum = 0.9f, .weight_decay = 1e-4f },
		{ .kind = DLT_OPTIM_NESTEROV, .momentum = 0.9f, .weight_decay = 0.0f },
		{ .kind = DLT_OPTIM_ADAM, .weight_decay = 1e-4f, .beta1 = 0.9f, .beta2 = 0.999f,
		  .eps = 1e-8f },
	};
	struct dlt_net_spec s;
	char msg[DLT_ERR_MAX];

	if (!have_gpu)
		SKIP(why);
	mlp_spec(&s, 100, hidden, 2, 10);
	for (int i = 0; i < 3; i++) {
		struct pair p;
		const char *bad;

		CHECK_MSG(pair_open(&p, &s, 32, dlt_optim_nstate(opts[i].kind), 21) == 0, "%s", p.err);
		bad = compare_steps(&p, &opts[i], 4, 0, msg, sizeof msg);
		pair_close(&p);
		CHECK_MSG(!bad, "%s", bad);
	}
}

TEST(gpu_nccl_step_on_one_rank_matches_cpu)
{
	const int f[1] = { 4 }, k[1] = { 5 };
	const struct dlt_optim o = { .kind = DLT_OPTIM_ADAM, .beta1 = 0.9f, .beta2 = 0.999f,
				     .eps = 1e-8f };
	struct dlt_net_spec s;
	struct pair p;
	char msg[DLT_ERR_MAX];
	const char *bad;

	if (!have_gpu)
		SKIP(why);
	cnn_spec(&s, (struct dlt_shape){ 1, 14, 14 }, 1, f, k, 2, 16, 0.25f, 10);
	CHECK_MSG(pair_open(&p, &s, 24, 2, 13) == 0, "%s", p.err);
	bad = compare_steps(&p, &o, 3, 1, msg, sizeof msg);
	pair_close(&p);
	CHECK_MSG(!bad, "%s", bad);
}

TEST(gpu_bucketed_nccl_step_matches_cpu)
{
	const int f[1] = { 6 }, k[1] = { 3 };
	const struct dlt_optim o = { .kind = DLT_OPTIM_NESTEROV, .momentum = 0.9f };
	struct dlt_net_spec s;
	struct pair p;
	char msg[DLT_ERR_MAX];
	const char *bad;

	if (!have_gpu)
		SKIP(why);
	cnn_spec(&s, (struct dlt_shape){ 1, 12, 12 }, 1, f, k, 2, 20, 0.0f, 10);
	CHECK_MSG(pair_open(&p, &s, 16, 1, 17) == 0, "%s", p.err);
	bad = compare_steps(&p, &o, 3, 2, msg, sizeof msg);
	pair_close(&p);
	CHECK_MSG(!bad, "%s", bad);
}

TEST(gpu_refuses_buckets_that_do_not_tile_the_gradients)
{
	const int hidden[1] = { 4 };
	struct dlt_net_spec s;
	struct pair p;
	size_t np;
	int r1, r2, r3;

	if (!have_gpu)
		SKIP(why);
	mlp_spec(&s, 8, hidden, 1, 3);   /* dense 0 [0, 36), relu 1, dense 2 [36, 51) */
	CHECK_MSG(pair_open(&p, &s, 2, 1, 1) == 0, "%s", p.err);
	np = p.net.nparams;
	r1 = dlt_gpu_add_bucket(p.gpu, 36, np, 2, p.err, sizeof p.err);      /* loss floats left out */
	r2 = dlt_gpu_add_bucket(p.gpu, 36, np + 2, 2, p.err, sizeof p.err);
	r3 = dlt_gpu_add_bucket(p.gpu, 0, 30, 0, p.err, sizeof p.err);       /* a gap */
	pair_close(&p);
	CHECK(np == 51);
	CHECK(r1 == -EINVAL && r2 == 0 && r3 == -EINVAL);
}

TEST(gpu_rejects_a_batch_larger_than_max)
{
	const int hidden[1] = { 4 };
	struct dlt_net_spec s;
	struct pair p;
	int rc;

	if (!have_gpu)
		SKIP(why);
	mlp_spec(&s, 8, hidden, 1, 3);
	CHECK_MSG(pair_open(&p, &s, 2, 1, 1) == 0, "%s", p.err);
	rc = dlt_gpu_forward(p.gpu, p.x, 3, 0, 0, NULL, p.err, sizeof p.err);
	pair_close(&p);
	CHECK(rc == -EINVAL);
	CHECK_MSG(strstr(p.err, "batch of 3 rows") != NULL, "%s", p.err);
}

/* The MLP and the CNN (with dropout) of the batch tests, by index 0, 1. */
static void model_spec(struct dlt_net_spec *s, int which)
{
	const int hidden[3] = { 256, 128, 100 }, f[2] = { 8, 16 }, k[2] = { 5, 5 };

	if (which == 0)
		mlp_spec(s, 784, hidden, 3, 10);
	else
		cnn_spec(s, (struct dlt_shape){ 1, 28, 28 }, 2, f, k, 2, 64, 0.4f, 10);
}

TEST(gpu_each_precision_batch_matches_cpu_within_its_tolerance)
{
	const struct tol *tols[3] = { &tol_fp32, &tol_tf32, &tol_bf16 };
	const char *names[2] = { "mlp", "cnn" };
	const int rows[2] = { 64, 16 };

	if (!have_gpu)
		SKIP(why);
	for (int mdl = 0; mdl < 2; mdl++) {
		struct dlt_net_spec s;
		struct seen m[3];

		model_spec(&s, mdl);
		for (int i = 0; i < 3; i++) {
			struct pair p;
			char msg[DLT_ERR_MAX];
			const char *bad;

			CHECK_MSG(pair_open_prec(&p, &s, rows[mdl], 1, 7, tols[i]->prec) == 0, "%s", p.err);
			bad = compare_batch_tol(&p, 5, tols[i], &m[i], msg, sizeof msg);
			pair_close(&p);
			printf("measured: %s %s: logits %.2g, gradients %.2g (relative L2), loss sum "
			       "%.2g, hits %ld apart\n", names[mdl], tols[i]->name, m[i].logits,
			       m[i].grads, m[i].loss, m[i].hits);
			CHECK_MSG(!bad, "%s: %s", names[mdl], bad);
		}
		/* the rounding is there: coarser inputs, larger errors */
		CHECK_MSG(m[1].logits > m[0].logits && m[2].logits > m[1].logits &&
			  m[2].grads > m[1].grads && m[1].grads > m[0].grads,
			  "%s: errors do not grow fp32 < tf32 < bf16", names[mdl]);
	}
}

/* Trains steps steps of o on p's batch on both sides (the CPU trainer; the
 * GPU at p's precision) and puts the largest relative difference of the
 * step losses into *worst, of the final parameters (relative L2) into
 * *params. Returns NULL, or what failed. */
static const char *train_both(struct pair *p, const struct dlt_optim *o, int steps, float lr,
			      double *worst, double *params, char *msg, size_t len)
{
	const size_t np = p->net.nparams;
	float *g = malloc((np + 2) * sizeof(float)), *wg = malloc(np * sizeof(float));
	const char *bad = NULL;

	*worst = 0.0;
	if (!g || !wg) {
		snprintf(msg, len, "out of memory");
		bad = msg;
		goto out;
	}
	for (int s = 1; s <= steps; s++) {
		double lc = 0.0, lg = 0.0;
		long hc = 0, hg = 0;

		dlt_net_train_batch(&p->net, p->params, p->x, p->y, p->rows, 1.0f, (uint64_t)s,
				    g, &lc, &hc);
		dlt_optim_step(o, lr, (unsigned long)s, p->params, p->state, g, np);
		if (dlt_gpu_train_batch(p->gpu, p->x, p->y, p->rows, 1.0f, (uint64_t)s, NULL, &lg,
					&hg, p->err, sizeof p->err) < 0 ||
		    dlt_gpu_optim_step(p->gpu, o, lr, (unsigned long)s, p->err, sizeof p->err) < 0) {
			snprintf(msg, len, "step %d: %s", s, p->err);
			bad = msg;
			goto out;
		}
		if (fabs(lg - lc) / fabs(lc) > *worst)
			*worst = fabs(lg - lc) / fabs(lc);
	}
	if (dlt_gpu_download(p->gpu, wg, NULL, p->err, sizeof p->err) < 0) {
		snprintf(msg, len, "%s", p->err);
		bad = msg;
		goto out;
	}
	*params = rel_l2(wg, p->params, np);
out:
	free(g);
	free(wg);
	return bad;
}

TEST(gpu_each_precision_trains_like_cpu_within_its_tolerance)
{
	/* 25 steps on one batch: the loss falls by about half and the
	 * precisions' rounding has time to compound */
	const int f[1] = { 6 }, k[1] = { 5 };
	const struct tol *tols[3] = { &tol_fp32, &tol_tf32, &tol_bf16 };
	const struct dlt_optim opts[2] = {
		{ .kind = DLT_OPTIM_NESTEROV, .momentum = 0.9f, .weight_decay = 1e-4f },
		{ .kind = DLT_OPTIM_ADAM, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f },
	};
	const float lrs[2] = { 0.02f, 0.002f };
	const char *names[2] = { "mlp/nesterov", "cnn/adam" };
	const int hidden[2] = { 64, 32 };

	if (!have_gpu)
		SKIP(why);
	for (int mdl = 0; mdl < 2; mdl++) {
		struct dlt_net_spec s;

		if (mdl == 0)
			mlp_spec(&s, 100, hidden, 2, 10);
		else
			cnn_spec(&s, (struct dlt_shape){ 1, 14, 14 }, 1, f, k, 2, 32, 0.25f, 10);
		for (int i = 0; i < 3; i++) {
			struct pair p;
			char msg[DLT_ERR_MAX];
			const char *bad;
			double worst = 0.0, params = 0.0;

			CHECK_MSG(pair_open_prec(&p, &s, 32, dlt_optim_nstate(opts[mdl].kind), 19,
						 tols[i]->prec) == 0, "%s", p.err);
			bad = train_both(&p, &opts[mdl], 25, lrs[mdl], &worst, &params, msg, sizeof msg);
			pair_close(&p);
			CHECK_MSG(!bad, "%s %s: %s", names[mdl], tols[i]->name, bad);
			printf("measured: %s %s: 25 steps, step losses at most %.2g apart (relative), "
			       "final parameters %.2g (relative L2)\n", names[mdl], tols[i]->name,
			       worst, params);
			CHECK_MSG(worst < tols[i]->train, "%s %s: step losses %.3g apart (tolerance %g)",
				  names[mdl], tols[i]->name, worst, tols[i]->train);
		}
	}
}

/* 1 when x is a BF16 number (its low 16 bits are 0). */
static int is_bf16(float x)
{
	uint32_t u;

	memcpy(&u, &x, sizeof u);
	return (u & 0xffffu) == 0;
}

TEST(gpu_bf16_keeps_fp32_master_weights_that_move_between_cpu_and_gpu)
{
	/* what a checkpoint holds is dlt_gpu_download's: FP32 parameters, on
	 * a CPU as on a GPU */
	const int hidden[2] = { 48, 24 };
	const struct dlt_optim o = { .kind = DLT_OPTIM_SGD, .momentum = 0.9f };
	struct dlt_net_spec s;
	struct pair p;
	size_t np, fine = 0;
	float *w = NULL;
	double lc = 0.0, lg = 0.0;
	long hc = 0, hg = 0;

	if (!have_gpu)
		SKIP(why);
	mlp_spec(&s, 60, hidden, 2, 10);
	CHECK_MSG(pair_open_prec(&p, &s, 32, 1, 23, DLT_PRECISION_BF16) == 0, "%s", p.err);
	np = p.net.nparams;
	w = malloc(np * sizeof(float));
	CHECK(w != NULL);
	/* upload, download: the very floats (not their BF16 copies) */
	CHECK_MSG(dlt_gpu_download(p.gpu, w, NULL, p.err, sizeof p.err) == 0, "%s", p.err);
	CHECK(memcmp(w, p.params, np * sizeof(float)) == 0);
	for (int t = 1; t <= 3; t++)
		CHECK_MSG(dlt_gpu_train_batch(p.gpu, p.x, p.y, p.rows, 1.0f, (uint64_t)t, NULL, NULL,
					      NULL, p.err, sizeof p.err) == 0 &&
			  dlt_gpu_optim_step(p.gpu, &o, 0.05f, (unsigned long)t, p.err,
					     sizeof p.err) == 0, "%s", p.err);
	CHECK_MSG(dlt_gpu_download(p.gpu, w, NULL, p.err, sizeof p.err) == 0, "%s", p.err);
	for (size_t i = 0; i < np; i++)
		fine += !is_bf16(w[i]);
	printf("measured: after 3 bf16 steps %zu of %zu parameters are not BF16 numbers\n", fine, np);
	CHECK_MSG(fine > np / 2, "%zu of %zu parameters finer than BF16: master weights rounded?",
		  fine, np);
	/* the GPU's weights on the CPU: the same model, to bf16's tolerance */
	dlt_net_eval_batch(&p.net, w, p.x, p.y, p.rows, &lc, &hc);
	CHECK_MSG(dlt_gpu_eval_batch(p.gpu, p.x, p.y, p.rows, &lg, &hg, p.err, sizeof p.err) == 0,
		  "%s", p.err);
	CHECK_MSG(fabs(lg - lc) <= tol_bf16.loss * fabs(lc) && labs(hg - hc) <= tol_bf16.hits,
		  "gpu weights: cpu loss %.9g, gpu bf16 %.9g; hits %ld vs %ld", lc, lg, hc, hg);
	/* and the CPU's weights on the GPU */
	for (size_t i = 0; i < np; i++)
		w[i] = p.params[i] * 0.5f + 1e-3f;
	CHECK_MSG(dlt_gpu_upload(p.gpu, w, NULL, p.err, sizeof p.err) == 0, "%s", p.err);
	lc = lg = 0.0;
	hc = hg = 0;
	dlt_net_eval_batch(&p.net, w, p.x, p.y, p.rows, &lc, &hc);
	CHECK_MSG(dlt_gpu_eval_batch(p.gpu, p.x, p.y, p.rows, &lg, &hg, p.err, sizeof p.err) == 0,
		  "%s", p.err);
	CHECK_MSG(fabs(lg - lc) <= tol_bf16.loss * fabs(lc) && labs(hg - hc) <= tol_bf16.hits,
		  "cpu weights: cpu loss %.9g, gpu bf16 %.9g; hits %ld vs %ld", lc, lg, hc, hg);
	free(w);
	pair_close(&p);
}

TEST(gpu_refuses_an_unknown_precision)
{
	const int hidden[1] = { 4 };
	struct dlt_net_spec s;
	struct pair p;
	int rc;

	if (!have_gpu)
		SKIP(why);
	mlp_spec(&s, 8, hidden, 1, 3);
	CHECK_MSG(pair_open(&p, &s, 2, 1, 1) == 0, "%s", p.err);
	rc = dlt_gpu_set_precision(p.gpu, (enum dlt_precision)7, p.err, sizeof p.err);
	pair_close(&p);
	CHECK(rc == -EINVAL);
	CHECK_MSG(strstr(p.err, "unknown precision 7") != NULL, "%s", p.err);
}

/* ---- CUDA graphs: dlt_gpu_step captured and replayed (dlt_gpu_set_graph) ---- */

#define GRAPH_STEPS 17   /* steps of graph_vs_eager */
#define GRAPH_ROWS 24    /* a full batch's rows */
#define GRAPH_DATA 100   /* rows a GPU holds in graph_vs_eager's rows mode */

/* Rows of step s (1-based) of graph_vs_eager: full batches, a one-off
 * short one (step 6), a last partial batch of an epoch (step 12), a new
 * size kept three steps (13-15), full again (16, 17). Graphs on, that is:
 * steps 1, 6, 12, 13, 16 launch by launch (a warm-up or a one-off shape),
 * 2, 14, 17 capture a graph, and 2-5, 7-11, 14, 15, 17 replay one. */
static int graph_rows(int s)
{
	return s == 6 ? 10 : s == 12 ? 7 : s >= 13 && s <= 15 ? 16 : GRAPH_ROWS;
}

#define GRAPH_EAGER 5
#define GRAPH_CAPTURES 3
#define GRAPH_LAUNCHES 12

/* One gradient bucket per layer with parameters on gpu (as add_layer_buckets). */
static int layer_buckets(struct dlt_gpu *gpu, const struct dlt_net *net, char *err, size_t len)
{
	size_t hi = net->nparams + 2;

	for (int i = net->nlayers - 1; i >= 0; i--) {
		const struct dlt_layer *l = &net->layer[i];

		if (!l->nparams)
			continue;
		if (dlt_gpu_add_bucket(gpu, l->off, hi, i, err, len) < 0)
			return -1;
		hi = l->off;
	}
	return 0;
}

/* A 1-rank NCCL communicator for gpu, and its buckets when buckets. */
static int graph_side(struct dlt_gpu *gpu, const struct dlt_net *net, int buckets, char *err,
		      size_t len)
{
	unsigned char id[DLT_GPU_ID_BYTES];

	if (dlt_gpu_nccl_id(id, err, len) < 0 || dlt_gpu_nccl_init(gpu, id, 0, 1, err, len) < 0)
		return -1;
	return buckets ? layer_buckets(gpu, net, err, len) : 0;
}

/* Trains GRAPH_STEPS dlt_gpu_steps of o on two GPU backends from the same
 * parameters, one with graphs (the default) and one with
 * dlt_gpu_set_graph off, each step on its own batch (graph_rows rows,
 * weight rows / GRAPH_ROWS), at its own learning rate, with the dropout
 * masks and Adam's bias corrections of its own step; then requires the
 * same loss sums at every step and the same parameters and optimizer
 * state after, bit for bit, and the graph counters of graph_rows. A value
 * of a step baked into the graph at its capture (a batch pointer, the
 * step, the rate) would replay the captured step's and fail this. With
 * GV_ROWS, the graphed side holds GRAPH_DATA rows (dlt_gpu_set_data) and
 * is given each step's row numbers (dlt_gpu_step_rows), the other the same
 * rows gathered on the host: a row number baked into the graph fails too.
 * With GV_AHEAD the graphed side queues each step before it waits for the
 * one before it (dlt_gpu_queue, dlt_gpu_wait, as --step-ahead): a step
 * whose values, rows or sums the next one overwrote before they were used
 * fails. The eager side runs first, alone, so its waits run none of the
 * graphed side's queued work (the emulation has one stream). Returns NULL,
 * or what differs (in msg). */
#define GV_ROWS 1    /* the graphed side's batches are rows it holds */
#define GV_AHEAD 2   /* the graphed side queues a step ahead */

/* Step s's batch of graph_vs_eager into p->x and p->y: random, or with
 * data_x rows of the data (another choice each step) whose numbers go to idx. */
static int graph_batch(struct pair *p, const struct dlt_net_spec *spec, int s,
		       const float *data_x, const uint8_t *data_y, uint32_t *idx)
{
	const int rows = graph_rows(s), dim = (int)dlt_shape_size(spec->in);

	if (!data_x) {
		fill_batch(p->x, p->y, rows, dim, spec->classes, 100 + (uint64_t)s);
		return rows;
	}
	for (int i = 0; i < rows; i++) {
		idx[i] = (uint32_t)((s * 37 + i * 11) % GRAPH_DATA);
		memcpy(p->x + (size_t)i * dim, data_x + (size_t)idx[i] * dim,
		       (size_t)dim * sizeof(float));
		p->y[i] = data_y[idx[i]];
	}
	return rows;
}

static const char *graph_vs_eager(const struct dlt_net_spec *spec, const struct dlt_optim *o,
				  enum dlt_precision prec, int buckets, int mode, char *msg,
				  size_t len)
{
	const int rows_mode = mode & GV_ROWS, ahead = mode & GV_AHEAD;
	const int dim = (int)dlt_shape_size(spec->in);
	float *data_x = NULL;
	uint8_t *data_y = NULL;
	uint32_t idx[GRAPH_ROWS];
	const int nstate = dlt_optim_nstate(o->kind);
	struct pair p;
	struct dlt_gpu *e = NULL;
	struct dlt_gpu_graph_stats gs, es, before;
	float *wg = NULL, *we = NULL, se[GRAPH_STEPS + 1][2];
	size_t np, n;
	const char *bad = NULL;

	if (pair_open_prec(&p, spec, GRAPH_ROWS, nstate, 29, prec) < 0) {
		snprintf(msg, len, "cannot open the pair: %s", p.err);
		pair_close(&p);
		return msg;
	}
	np = p.net.nparams;
	n = np * (size_t)(1 + nstate);
	wg = malloc(n * sizeof(float));
	we = malloc(n * sizeof(float));
	if (rows_mode) {
		data_x = malloc((size_t)GRAPH_DATA * (size_t)dim * sizeof(float));
		data_y = malloc(GRAPH_DATA);
		if (data_x && data_y)
			fill_batch(data_x, data_y, GRAPH_DATA, dim, spec->classes, 77);
	}
	if (!wg || !we || (rows_mode && (!data_x || !data_y)) ||
	    (rows_mode && dlt_gpu_set_data(p.gpu, data_x, data_y, GRAPH_DATA, p.err,
					   sizeof p.err) < 0) ||
	    dlt_gpu_create(&e, &p.net, nstate, 0, 29, 0, p.err, sizeof p.err) < 0 ||
	    dlt_gpu_set_precision(e, prec, p.err, sizeof p.err) < 0 ||
	    dlt_gpu_set_graph(e, 0, p.err, sizeof p.err) < 0 ||
	    dlt_gpu_upload(e, p.params, p.state, p.err, sizeof p.err) < 0 ||
	    graph_side(p.gpu, &p.net, buckets, p.err, sizeof p.err) < 0 ||
	    graph_side(e, &p.net, buckets, p.err, sizeof p.err) < 0) {
		snprintf(msg, len, "setup: %s", wg && we ? p.err : "out of memory");
		bad = msg;
		goto out;
	}
	dlt_gpu_graph_stats(p.gpu, &before);
	/* the eager side, each step waited for */
	for (int s = 1; s <= GRAPH_STEPS && !bad; s++) {
		const int rows = graph_batch(&p, spec, s, rows_mode ? data_x : NULL, data_y, idx);
		const float lr = 0.01f * (1.0f + 0.125f * (float)s), w = (float)rows / GRAPH_ROWS;

		if (dlt_gpu_step(e, p.x, p.y, rows, w, (uint64_t)s, o, lr, (unsigned long)s, se[s],
				 p.err, sizeof p.err) < 0) {
			snprintf(msg, len, "step %d without the graph: %s", s, p.err);
			bad = msg;
		}
	}
	/* the graphed side; with ahead, step s is waited for after s + 1 is queued */
	for (int s = 1; s <= GRAPH_STEPS + (ahead ? 1 : 0) && !bad; s++) {
		const int done = ahead ? s - 1 : s;   /* the step whose sums come now */
		float sg[2];
		int rc = 0;

		if (s <= GRAPH_STEPS) {
			const int rows = graph_batch(&p, spec, s, rows_mode ? data_x : NULL, data_y, idx);
			const float lr = 0.01f * (1.0f + 0.125f * (float)s);
			const float w = (float)rows / GRAPH_ROWS;

			if (ahead)
				rc = rows_mode ?
				     dlt_gpu_queue_rows(p.gpu, idx, rows, w, (uint64_t)s, o, lr,
							(unsigned long)s, p.err, sizeof p.err) :
				     dlt_gpu_queue(p.gpu, p.x, p.y, rows, w, (uint64_t)s, o, lr,
						   (unsigned long)s, p.err, sizeof p.err);
			else
				rc = rows_mode ?
				     dlt_gpu_step_rows(p.gpu, idx, rows, w, (uint64_t)s, o, lr,
						       (unsigned long)s, sg, p.err, sizeof p.err) :
				     dlt_gpu_step(p.gpu, p.x, p.y, rows, w, (uint64_t)s, o, lr,
						  (unsigned long)s, sg, p.err, sizeof p.err);
		}
		if (rc == 0 && ahead && done >= 1)
			rc = dlt_gpu_wait(p.gpu, sg, p.err, sizeof p.err);
		if (rc < 0) {
			snprintf(msg, len, "step %d: %s", s, p.err);
			bad = msg;
		} else if (done >= 1 && memcmp(sg, se[done], sizeof sg)) {
			snprintf(msg, len, "step %d (%d rows): loss sum %.9g, hits %g with the graph; "
				 "%.9g, %g without", done, graph_rows(done), (double)sg[0],
				 (double)sg[1], (double)se[done][0], (double)se[done][1]);
			bad = msg;
		}
	}
	if (bad)
		goto out;
	if (dlt_gpu_download(p.gpu, wg, wg + np, p.err, sizeof p.err) < 0 ||
	    dlt_gpu_download(e, we, we + np, p.err, sizeof p.err) < 0) {
		snprintf(msg, len, "%s", p.err);
		bad = msg;
		goto out;
	}
	for (size_t i = 0; i < n && !bad; i++)
		if (memcmp(&wg[i], &we[i], sizeof wg[i])) {
			snprintf(msg, len, "%s %zu: %.9g with the graph, %.9g without",
				 i < np ? "parameter" : "optimizer state", i % np, (double)wg[i],
				 (double)we[i]);
			bad = msg;
		}
	if (bad)
		goto out;
	dlt_gpu_graph_stats(p.gpu, &gs);
	dlt_gpu_graph_stats(e, &es);
	printf("measured: graph of %ld nodes; %ld steps replayed, %ld captures, %ld launch by "
	       "launch\n", gs.nodes, gs.launches, gs.captures, gs.eager);
	if (gs.eager != GRAPH_EAGER || gs.captures != GRAPH_CAPTURES ||
	    gs.launches != GRAPH_LAUNCHES || gs.nodes < 5) {
		snprintf(msg, len, "graph counters: %ld launch by launch, %ld captures, %ld launches, "
			 "%ld nodes (want %d, %d, %d, > 4)", gs.eager, gs.captures, gs.launches,
			 gs.nodes, GRAPH_EAGER, GRAPH_CAPTURES, GRAPH_LAUNCHES);
		bad = msg;
	} else if (es.eager != GRAPH_STEPS || es.captures || es.launches) {
		snprintf(msg, len, "graphs off: %ld launch by launch, %ld captures, %ld launches",
			 es.eager, es.captures, es.launches);
		bad = msg;
	}
	/* the emulated runtime ran the graph's nodes at each launch (graphs
	 * of other rows may differ: a GEMM's k split or not); on a GPU it
	 * does not count them */
	if (!bad && emulated(p.gpu) &&
	    gs.replayed - before.replayed != gs.launched - before.launched) {
		snprintf(msg, len, "the emulation replayed %ld nodes, the %ld launches %ld",
			 gs.replayed - before.replayed, gs.launches, gs.launched - before.launched);
		bad = msg;
	}
out:
	dlt_gpu_destroy(e);
	pair_close(&p);
	free(wg);
	free(we);
	free(data_x);
	free(data_y);
	return bad;
}

TEST(gpu_graph_mlp_sgd_momentum_steps_equal_the_ungraphed_bit_for_bit)
{
	const int hidden[2] = { 48, 32 };
	const struct dlt_optim o = { .kind = DLT_OPTIM_SGD, .momentum = 0.9f,
				     .weight_decay = 1e-4f };
	struct dlt_net_spec s;
	char msg[DLT_ERR_MAX];
	const char *bad;

	if (!have_gpu)
		SKIP(why);
	mlp_spec(&s, 60, hidden, 2, 10);
	bad = graph_vs_eager(&s, &o, DLT_PRECISION_FP32, 0, 0, msg, sizeof msg);
	CHECK_MSG(!bad, "%s", bad);
}

TEST(gpu_graph_mlp_adam_dropout_bucketed_steps_equal_the_ungraphed_bit_for_bit)
{
	const int hidden[2] = { 48, 32 };
	const struct dlt_optim o = { .kind = DLT_OPTIM_ADAM, .beta1 = 0.9f, .beta2 = 0.999f,
				     .eps = 1e-8f };
	struct dlt_net_spec s;
	char msg[DLT_ERR_MAX];
	const char *bad;

	if (!have_gpu)
		SKIP(why);
	mlp_spec(&s, 60, hidden, 2, 10);
	s.dropout = 0.3f;
	bad = graph_vs_eager(&s, &o, DLT_PRECISION_FP32, 1, 0, msg, sizeof msg);
	CHECK_MSG(!bad, "%s", bad);
	/* the graphed side on rows it holds, given their numbers (--device-data) */
	bad = graph_vs_eager(&s, &o, DLT_PRECISION_FP32, 0, GV_ROWS, msg, sizeof msg);
	CHECK_MSG(!bad, "rows on the device: %s", bad);
	/* and each step queued before the one before it is waited for (--step-ahead) */
	bad = graph_vs_eager(&s, &o, DLT_PRECISION_FP32, 1, GV_ROWS | GV_AHEAD, msg, sizeof msg);
	CHECK_MSG(!bad, "rows on the device, a step queued ahead: %s", bad);
	bad = graph_vs_eager(&s, &o, DLT_PRECISION_FP32, 0, GV_AHEAD, msg, sizeof msg);
	CHECK_MSG(!bad, "batches copied, a step queued ahead: %s", bad);
}

TEST(gpu_graph_cnn_nesterov_dropout_steps_equal_the_ungraphed_bit_for_bit)
{
	const int f[1] = { 4 }, k[1] = { 5 };
	const struct dlt_optim o = { .kind = DLT_OPTIM_NESTEROV, .momentum = 0.9f };
	struct dlt_net_spec s;
	char msg[DLT_ERR_MAX];
	const char *bad;

	if (!have_gpu)
		SKIP(why);
	cnn_spec(&s, (struct dlt_shape){ 1, 14, 14 }, 1, f, k, 2, 16, 0.25f, 10);
	bad = graph_vs_eager(&s, &o, DLT_PRECISION_FP32, 0, 0, msg, sizeof msg);
	CHECK_MSG(!bad, "%s", bad);
	bad = graph_vs_eager(&s, &o, DLT_PRECISION_FP32, 1, GV_ROWS, msg, sizeof msg);
	CHECK_MSG(!bad, "rows on the device, buckets: %s", bad);
	bad = graph_vs_eager(&s, &o, DLT_PRECISION_FP32, 1, GV_ROWS | GV_AHEAD, msg, sizeof msg);
	CHECK_MSG(!bad, "rows on the device, buckets, a step queued ahead: %s", bad);
}

TEST(gpu_graph_cnn_adam_dropout_bf16_bucketed_steps_equal_the_ungraphed_bit_for_bit)
{
	const int f[2] = { 4, 6 }, k[2] = { 3, 3 };
	const struct dlt_optim o = { .kind = DLT_OPTIM_ADAM, .beta1 = 0.9f, .beta2 = 0.99f,
				     .eps = 1e-7f, .weight_decay = 1e-4f };
	struct dlt_net_spec s;
	char msg[DLT_ERR_MAX];
	const char *bad;

	if (!have_gpu)
		SKIP(why);
	cnn_spec(&s, (struct dlt_shape){ 1, 12, 12 }, 2, f, k, 2, 16, 0.25f, 10);
	bad = graph_vs_eager(&s, &o, DLT_PRECISION_BF16, 1, 0, msg, sizeof msg);
	CHECK_MSG(!bad, "%s", bad);
	bad = graph_vs_eager(&s, &o, DLT_PRECISION_BF16, 1, GV_AHEAD, msg, sizeof msg);
	CHECK_MSG(!bad, "a step queued ahead: %s", bad);
}

/* steps on rows the GPU holds (graph_vs_eager's rows mode, in the MLP and
 * CNN cases above) are refused before dlt_gpu_set_data, and for a row
 * number past the rows it holds */
TEST(gpu_steps_on_rows_the_gpu_holds_are_refused_outside_them)
{
	const int hidden[2] = { 48, 32 };
	const struct dlt_optim sgd = { .kind = DLT_OPTIM_SGD, .momentum = 0.9f };
	struct dlt_net_spec s;
	struct pair p;
	uint32_t idx[2] = { 0, 5 };
	float sums[2];

	if (!have_gpu)
		SKIP(why);
	mlp_spec(&s, 60, hidden, 2, 10);
	CHECK(pair_open(&p, &s, 8, 1, 3) == 0);
	CHECK(graph_side(p.gpu, &p.net, 0, p.err, sizeof p.err) == 0);
	CHECK(dlt_gpu_step_rows(p.gpu, idx, 2, 1.0f, 1, &sgd, 0.01f, 1, sums, p.err,
				sizeof p.err) == -EINVAL && strstr(p.err, "before dlt_gpu_set_data"));
	CHECK(dlt_gpu_set_data(p.gpu, p.x, p.y, 4, p.err, sizeof p.err) == 0);
	CHECK_MSG(dlt_gpu_step_rows(p.gpu, idx, 2, 1.0f, 1, &sgd, 0.01f, 1, sums, p.err,
				    sizeof p.err) == -EINVAL && strstr(p.err, "row 5 of a batch"),
		  "%s", p.err);
	pair_close(&p);
}

/* pair_open_prec of a CNN with two conv blocks (4 x 5x5, 6 x 3x3) on 1 x
 * 14 x 14, a batch of 12 rows, seed 5. */
static int two_conv_pair(struct pair *p, enum dlt_precision prec)
{
	const int f[2] = { 4, 6 }, k[2] = { 5, 3 };
	struct dlt_net_spec s;

	cnn_spec(&s, (struct dlt_shape){ 1, 14, 14 }, 2, f, k, 2, 16, 0.0f, 10);
	return pair_open_prec(p, &s, 12, 1, 5, prec);
}

/* A second backend of p's net with p's parameters and state (dropout
 * masks of seed), made with the environment variable env set to val
 * (NULL: none), in precision prec; NULL with p->err set on a failure. */
static struct dlt_gpu *other_backend(struct pair *p, uint64_t seed, const char *env,
				     const char *val, enum dlt_precision prec)
{
	struct dlt_gpu *g = NULL;

	if (env)
		setenv(env, val, 1);
	int rc = dlt_gpu_create(&g, &p->net, 1, 0, seed, 0, p->err, sizeof p->err);

	if (env)
		unsetenv(env);
	if (rc < 0 || dlt_gpu_set_precision(g, prec, p->err, sizeof p->err) < 0 ||
	    dlt_gpu_upload(g, p->params, p->state, p->err, sizeof p->err) < 0) {
		dlt_gpu_destroy(g);
		return NULL;
	}
	return g;
}

/* One training batch of p's on backends a and b: the same loss, hits and
 * gradients bit for bit with tol 0, else gradients within relative L2 tol
 * (how far into *rel when rel is not NULL). Returns NULL, or what differs
 * (in msg). */
static const char *two_backends(struct pair *p, struct dlt_gpu *a, struct dlt_gpu *b, double tol,
				double *rel, char *msg, size_t len)
{
	const size_t np = p->net.nparams;
	float *ga = malloc(np * sizeof(float)), *gb = malloc(np * sizeof(float));
	double la = 0, lb = 0;
	long ca = 0, cb = 0;
	const char *bad = NULL;

	if (!ga || !gb) {
		snprintf(msg, len, "out of memory");
		bad = msg;
	} else if (dlt_gpu_train_batch(a, p->x, p->y, p->rows, 1.0f, 1, ga, &la, &ca, p->err,
				       sizeof p->err) < 0 ||
		   dlt_gpu_train_batch(b, p->x, p->y, p->rows, 1.0f, 1, gb, &lb, &cb, p->err,
				       sizeof p->err) < 0) {
		snprintf(msg, len, "%s", p->err);
		bad = msg;
	} else if (tol > 0) {
		double e = rel_l2(ga, gb, np);

		if (rel)
			*rel = e;
		if (!(e < tol)) {
			snprintf(msg, len, "gradients %g apart (relative L2)", e);
			bad = msg;
		}
	} else if (la != lb || ca != cb) {
		snprintf(msg, len, "loss %.9g, hits %ld; %.9g, %ld", la, ca, lb, cb);
		bad = msg;
	} else {
		for (size_t i = 0; i < np && !bad; i++)
			if (memcmp(&ga[i], &gb[i], sizeof ga[i])) {
				snprintf(msg, len, "gradient %zu: %.9g, %.9g", i, (double)ga[i],
					 (double)gb[i]);
				bad = msg;
			}
	}
	free(ga);
	free(gb);
	return bad;
}

/* the 64-bit instances of the index kernels (a batch past 2^31 elements
 * runs them; DLT_GPU_INDEX64=1 makes every launch take them) give the
 * 32-bit ones' gradients and loss, bit for bit: a CNN with every layout
 * kernel (im2col, col2im, the conv's scatter and gather, pooling both
 * ways, the dense bias) */
TEST(gpu_index_kernels_32_and_64_bit_give_the_same_gradients)
{
	struct pair p;
	struct dlt_gpu *wide;
	char msg[DLT_ERR_MAX];
	const char *bad;

	if (!have_gpu)
		SKIP(why);
	CHECK_MSG(two_conv_pair(&p, DLT_PRECISION_FP32) == 0, "%s", p.err);
	wide = other_backend(&p, 5, "DLT_GPU_INDEX64", "1", DLT_PRECISION_FP32);
	CHECK_MSG(wide, "%s", p.err);
	bad = two_backends(&p, p.gpu, wide, 0, NULL, msg, sizeof msg);
	CHECK_MSG(!bad, "32-bit, then 64-bit: %s", bad);
	dlt_gpu_destroy(wide);
	pair_close(&p);
}

/* Graph nodes of g's step of o on p's batch: three steps of one shape
 * (a warm-up, the capture, a replay), -1 with p->err set on a failure. */
static long step_nodes(struct pair *p, struct dlt_gpu *g, const struct dlt_optim *o)
{
	struct dlt_gpu_graph_stats gs;
	float sums[2];
	unsigned char id[DLT_GPU_ID_BYTES];

	if (dlt_gpu_nccl_id(id, p->err, sizeof p->err) < 0 ||
	    dlt_gpu_nccl_init(g, id, 0, 1, p->err, sizeof p->err) < 0)
		return -1;
	for (int t = 1; t <= 3; t++)
		if (dlt_gpu_step(g, p->x, p->y, p->rows, 1.0f, (uint64_t)t, o, 0.01f,
				 (unsigned long)t, sums, p->err, sizeof p->err) < 0)
			return -1;
	dlt_gpu_graph_stats(g, &gs);
	if (gs.captures != 1 || gs.launches != 2) {
		snprintf(p->err, sizeof p->err, "%ld captures, %ld launches (want 1, 2)", gs.captures,
			 gs.launches);
		return -1;
	}
	return gs.nodes;
}

/* A step whose capture fails (DLT_EMU_CAPTURE=fail: a runtime that takes
 * none; on a GPU the variable does nothing and the test is skipped) costs
 * the graphs, not the run: that step and the ones after it run launch by
 * launch, the sums and the parameters after those of a backend with
 * graphs off bit for bit (the allreduces bucketed: a branch of the failed
 * capture), and the graph counters say why (dlh-train's closing GPU line
 * prints it); dlt_gpu_set_graph on tries the capture again. */
TEST(gpu_a_step_that_cannot_be_captured_runs_launch_by_launch)
{
	const struct dlt_optim o = { .kind = DLT_OPTIM_SGD, .momentum = 0.9f };
	const size_t np_max = 1 << 20;
	struct dlt_gpu_graph_stats gs;
	struct dlt_net_spec s;
	struct dlt_gpu *plain;
	struct pair p;
	float sa[2], sb[2];

	if (!have_gpu)
		SKIP(why);
	model_spec(&s, 0);
	CHECK_MSG(pair_open(&p, &s, 16, 1, 7) == 0, "%s", p.err);
	if (!emulated(p.gpu)) {
		pair_close(&p);
		SKIP("DLT_EMU_CAPTURE is the emulation's");
	}
	plain = other_backend(&p, 7, NULL, NULL, DLT_PRECISION_FP32);
	CHECK_MSG(plain && dlt_gpu_set_graph(plain, 0, p.err, sizeof p.err) == 0 &&
		  graph_side(p.gpu, &p.net, 1, p.err, sizeof p.err) == 0 &&
		  graph_side(plain, &p.net, 1, p.err, sizeof p.err) == 0, "%s", p.err);
	for (int t = 1; t <= 4; t++) {
		setenv("DLT_EMU_CAPTURE", "fail", 1);
		int ra = dlt_gpu_step(p.gpu, p.x, p.y, p.rows, 1.0f, (uint64_t)t, &o, 0.01f,
				      (unsigned long)t, sa, p.err, sizeof p.err);

		unsetenv("DLT_EMU_CAPTURE");   /* (before a check may end the test) */
		CHECK_MSG(ra == 0, "step %d, its capture failing: %s", t, p.err);
		CHECK_MSG(dlt_gpu_step(plain, p.x, p.y, p.rows, 1.0f, (uint64_t)t, &o, 0.01f,
				       (unsigned long)t, sb, p.err, sizeof p.err) == 0, "%s", p.err);
		CHECK_MSG(!memcmp(sa, sb, sizeof sa), "step %d: sums %.9g %g, graphs off %.9g %g", t,
			  (double)sa[0], (double)sa[1], (double)sb[0], (double)sb[1]);
	}
	dlt_gpu_graph_stats(p.gpu, &gs);
	printf("measured: %ld launch by launch, %ld captures, %ld launches; off: %s\n", gs.eager,
	       gs.captures, gs.launches, gs.off);
	CHECK_MSG(gs.eager == 4 && gs.captures == 0 && gs.launches == 0 &&
		  strstr(gs.off, "the step's capture failed: cuda: cudaStreamEndCapture: ") &&
		  strstr(gs.off, "cudaErrorStreamCaptureInvalidated"),
		  "%ld launch by launch, %ld captures, %ld launches; off: %s", gs.eager, gs.captures,
		  gs.launches, gs.off);
	{
		const size_t np = p.net.nparams;
		float *wa = malloc(np * sizeof(float)), *wb = malloc(np * sizeof(float));

		CHECK_MSG(np < np_max && wa && wb &&
			  dlt_gpu_download(p.gpu, wa, NULL, p.err, sizeof p.err) == 0 &&
			  dlt_gpu_download(plain, wb, NULL, p.err, sizeof p.err) == 0, "%s", p.err);
		CHECK_MSG(!memcmp(wa, wb, np * sizeof(float)), "the parameters after 4 steps differ");
		free(wa);
		free(wb);
	}
	/* on again: the capture tried again (a shape's second step) */
	CHECK_MSG(dlt_gpu_set_graph(p.gpu, 1, p.err, sizeof p.err) == 0, "%s", p.err);
	for (int t = 5; t <= 7; t++)
		CHECK_MSG(dlt_gpu_step(p.gpu, p.x, p.y, p.rows, 1.0f, (uint64_t)t, &o, 0.01f,
				       (unsigned long)t, sa, p.err, sizeof p.err) == 0, "%s", p.err);
	dlt_gpu_graph_stats(p.gpu, &gs);
	CHECK_MSG(gs.captures == 1 && gs.launches >= 1 && !gs.off[0],
		  "graphs on again: %ld captures, %ld launches; off: %s", gs.captures, gs.launches,
		  gs.off);
	dlt_gpu_destroy(plain);
	pair_close(&p);
}

/* A GEMM with a long k and a small output (a convolution's weight
 * gradient, summed over the batch's pixels) runs split in parts
 * (dlt_gpu_gemm_splits), the conv's bias gradient a column more of it
 * (the im2col matrix's row of ones): in each precision its sum gives the
 * CPU trainer's gradients within that precision's tolerance, and the
 * gradients of a backend that does not split (DLT_GPU_SPLITK=0) within it
 * too; a k that the parts do not divide leaves a rest, a product of its
 * own; and the split costs the step's graph one node (the parts' sum and
 * the rest, where the bias gradient's kernel was). */
TEST(gpu_long_k_gemms_split_and_sum_like_one)
{
	/* conv 3 x 7x7 on 1 x 27 x 27 (49 taps: an im2col product, not
	 * computed directly): weight and bias gradients of 3 x 50 over 12 x
	 * 729 = 8748 pixels, in 16 parts of 544 (546 down to a multiple of 8)
	 * and a rest of 44 */
	const int f[1] = { 3 }, k[1] = { 7 }, rows = 12;
	const int S = dlt_gpu_gemm_splits(3, 50, rows * 729.0);
	const struct tol *tols[3] = { &tol_fp32, &tol_tf32, &tol_bf16 };
	const struct dlt_optim o = { .kind = DLT_OPTIM_SGD, .momentum = 0.9f };
	struct dlt_net_spec s;
	char msg[DLT_ERR_MAX];

	if (!have_gpu)
		SKIP(why);
	CHECK_MSG(S == 16 && dlt_gpu_split_kc(rows * 729, S) == 544, "%d parts", S);
	CHECK_MSG(dlt_gpu_gemm_splits(3, 25, 4095) == 1 && dlt_gpu_gemm_splits(64, 800, 25088) == 16 &&
		  dlt_gpu_gemm_splits(32, 25, 100352) == 128 &&
		  dlt_gpu_gemm_splits(64, 25088, 800) == 1, "the split of the CNN's products");
	cnn_spec(&s, (struct dlt_shape){ 1, 27, 27 }, 1, f, k, 3, 8, 0.0f, 10);
	for (int i = 0; i < 3; i++) {
		struct pair p;
		struct dlt_gpu *plain;
		const char *bad;
		double e = 0;

		CHECK_MSG(pair_open_prec(&p, &s, rows, 1, 11, tols[i]->prec) == 0, "%s", p.err);
		bad = compare_batch_tol(&p, 3, tols[i], NULL, msg, sizeof msg);
		CHECK_MSG(!bad, "split, against the CPU: %s", bad);
		plain = other_backend(&p, 11, "DLT_GPU_SPLITK", "0", tols[i]->prec);
		CHECK_MSG(plain, "%s", p.err);
		bad = two_backends(&p, p.gpu, plain, tols[i]->grad, &e, msg, sizeof msg);
		printf("measured: %s: split gradients %.2g from the unsplit (relative L2)\n",
		       tols[i]->name, e);
		CHECK_MSG(!bad, "%s: split, then unsplit: %s", tols[i]->name, bad);
		long ns = step_nodes(&p, p.gpu, &o), np = step_nodes(&p, plain, &o);
		CHECK_MSG(ns > 0 && np > 0, "%s", p.err);
		printf("measured: %s: a step of %ld graph nodes split, %ld not\n", tols[i]->name, ns, np);
		CHECK_MSG(!emulated(p.gpu) || ns == np + 1, "%s: a step of %ld nodes split, %ld not",
			  tols[i]->name, ns, np);
		dlt_gpu_destroy(plain);
		pair_close(&p);
	}
}

/* A conv of few taps (dlt_gpu_conv_direct: C k^2 at most 32) has its
 * product computed directly, not as an im2col product (DLT_GPU_CONV=gemm
 * keeps that): in each precision a training batch's loss and gradients
 * within its tolerance of the CPU trainer's, in fp32 of the im2col
 * product's too, an evaluation's logits within it of the im2col
 * product's (the evaluation writes no im2col matrix for that conv),
 * the device line naming the convs so computed, and a training step of a
 * graph node fewer for each (the product, bias, ReLU and pool one kernel),
 * and for a first conv with a pool after it two more (its weight and bias
 * gradients computed directly too, dlt_gpu_conv_dw_direct: no im2col, no
 * product's gradient). Two nets:
 * 1 x 14 x 14 images, convs 4 x 5x5 (25 taps: direct) and 6 x 3x3 on 4
 * channels (36: im2col), each pooled; 3 x 9 x 9 images, convs 2 x 3x3 (27)
 * and 3 x 3x3 on 2 channels (18: direct, and with an input gradient), no
 * pool (conv and ReLU). */
TEST(gpu_convs_of_few_taps_are_computed_directly_as_their_im2col_products)
{
	const struct tol *tols[3] = { &tol_fp32, &tol_tf32, &tol_bf16 };
	const struct dlt_optim o = { .kind = DLT_OPTIM_SGD, .momentum = 0.9f };
	const int f[2][2] = { { 4, 6 }, { 2, 3 } }, k[2] = { 5, 3 }, k2[2] = { 3, 3 };
	const char *lines[2] = { "; conv products direct: layer 1 (25 taps)",
				 "; conv products direct: layer 1 (27 taps), 3 (18 taps)" };
	char msg[DLT_ERR_MAX], name[DLT_ERR_MAX];

	if (!have_gpu)
		SKIP(why);
	CHECK(dlt_gpu_conv_direct(25) && dlt_gpu_conv_direct(32) && !dlt_gpu_conv_direct(36));
	for (int net = 0; net < 2; net++)
		for (int i = 0; i < 3; i++) {
			struct dlt_net_spec s;
			struct pair p;
			struct dlt_gpu *gemm;
			const char *bad;
			const int rows = 6;
			float *za = malloc((size_t)rows * 10 * sizeof(float));
			float *zb = malloc((size_t)rows * 10 * sizeof(float));

			CHECK(za && zb);
			if (net == 0)
				cnn_spec(&s, (struct dlt_shape){ 1, 14, 14 }, 2, f[0], k, 2, 16, 0.0f, 10);
			else
				cnn_spec(&s, (struct dlt_shape){ 3, 9, 9 }, 2, f[1], k2, 1, 8, 0.0f, 10);
			CHECK_MSG(pair_open_prec(&p, &s, rows, 1, 17, tols[i]->prec) == 0, "%s", p.err);
			dlt_gpu_describe(p.gpu, name, sizeof name);
			CHECK_MSG(strstr(name, lines[net]), "net %d: %s", net, name);
			struct seen m;

			bad = compare_batch_tol(&p, 3, tols[i], &m, msg, sizeof msg);
			CHECK_MSG(!bad, "net %d, %s: direct, against the CPU: %s", net, tols[i]->name, bad);
			gemm = other_backend(&p, 17, "DLT_GPU_CONV", "gemm", tols[i]->prec);
			CHECK_MSG(gemm, "%s", p.err);
			dlt_gpu_describe(gemm, name, sizeof name);
			CHECK_MSG(strstr(name, "; every conv an im2col product (DLT_GPU_CONV=gemm)") &&
				  !strstr(name, "direct"), "net %d: %s", net, name);
			double e = 0;

			/* in fp32 the two differ by the order of their sums; the tensor
			 * cores round the im2col product's operands, which a near tie
			 * of a pool or ReLU may turn into another gradient (net 0 in
			 * tf32: the im2col product's 0.043 from the CPU's, the direct
			 * one's 7e-4) */
			bad = two_backends(&p, p.gpu, gemm, i ? 1.0 : tols[i]->grad, &e, msg, sizeof msg);
			printf("measured: net %d, %s: direct: gradients %.2g from the CPU's, %.2g from the "
			       "im2col product's (relative L2)\n", net, tols[i]->name, m.grads, e);
			CHECK_MSG(!bad, "net %d, %s: direct, then im2col: %s", net, tols[i]->name, bad);
			CHECK_MSG(dlt_gpu_forward(p.gpu, p.x, rows, 0, 0, za, p.err, sizeof p.err) == 0 &&
				  dlt_gpu_forward(gemm, p.x, rows, 0, 0, zb, p.err, sizeof p.err) == 0,
				  "%s", p.err);
			e = rel_l2(za, zb, (size_t)rows * 10);
			CHECK_MSG(e < tols[i]->grad, "net %d, %s: evaluation logits %g apart", net,
				  tols[i]->name, e);
			long nd = step_nodes(&p, p.gpu, &o), ng = step_nodes(&p, gemm, &o);
			CHECK_MSG(nd > 0 && ng > 0, "%s", p.err);
			/* (net 0 in bf16: the product's gradient is not cast either) */
			const long fewer = net ? 2 : tols[i]->prec == DLT_PRECISION_BF16 ? 4 : 3;

			CHECK_MSG(!emulated(p.gpu) || nd == ng - fewer, "net %d, %s: a step of %ld nodes "
				  "direct, %ld not (want %ld fewer)", net, tols[i]->name, nd, ng, fewer);
			free(za);
			free(zb);
			dlt_gpu_destroy(gemm);
			pair_close(&p);
		}
}

extern long dlt_emu_threaded_blocks(void) __attribute__((weak));

/* One training batch and one evaluation batch of p on its backend: the
 * gradients into g, the losses and hits; with threads, DLT_EMU_THREADS=1
 * around them. Returns 0, or -1 with p->err set. */
static int threaded_batches(struct pair *p, int threads, float *g, double *loss, long *hits,
			    double *el, long *eh)
{
	int rc;

	if (threads)
		setenv("DLT_EMU_THREADS", "1", 1);
	rc = dlt_gpu_train_batch(p->gpu, p->x, p->y, p->rows, 1.0f, 1, g, loss, hits, p->err,
				 sizeof p->err);
	if (rc == 0)
		rc = dlt_gpu_eval_batch(p->gpu, p->x, p->y, p->rows, el, eh, p->err, sizeof p->err);
	unsetenv("DLT_EMU_THREADS");
	return rc < 0 ? -1 : 0;
}

/* The kernels that sum in a tree across a block's threads (LAUNCH_SYNC:
 * the first conv's direct weight gradient, a conv's bias gradient's row
 * sums, the dense layers' bias gradients' column sums, the loss's sums),
 * run as a GPU runs them: each block's 256 threads at once, __syncthreads
 * a barrier (the emulation's DLT_EMU_THREADS=1; on a GPU they always run
 * so, and the test is skipped). Twice threaded, then one thread a block:
 * a training batch and an evaluation batch give the same loss, hits and
 * gradients within float rounding (the same sums in the tree's order),
 * the two threaded runs bit for bit (the tree's order does not depend on
 * which thread runs first). Net 0: convs 4 x 5x5 and 6 x 3x3 on 1 x 14 x
 * 14 (12 rows), its dense biases not 16-byte aligned (no epilogue sums
 * them: the column sums do). Net 1: 4 filters of 3 x 3x3 on 3 x 36 x 36
 * (2 rows): the weight gradient's 8 blocks each sum an image's 324 pooled
 * outputs over its 256 threads (every thread holds a sum when the tree
 * starts), on a tap table of a shape no test before makes (the emulation's shared
 * memory is static: a table left by an earlier launch of the same shape
 * would hide a missing barrier after its setup). */
TEST(gpu_block_sums_with_their_threads_at_once_give_the_same_numbers)
{
	if (!have_gpu)
		SKIP(why);
	for (int net = 0; net < 2; net++) {
		const int f0[2] = { 4, 6 }, k0[2] = { 5, 3 }, f1[1] = { 4 }, k1[1] = { 3 };
		const int rows = net ? 2 : 12;
		struct dlt_net_spec s;
		struct pair p;
		float *g[3] = { NULL, NULL, NULL };
		double loss[3] = { 0, 0, 0 }, el[3] = { 0, 0, 0 };
		long hits[3] = { 0, 0, 0 }, eh[3] = { 0, 0, 0 };
		char name[DLT_ERR_MAX];

		if (net == 0)
			cnn_spec(&s, (struct dlt_shape){ 1, 14, 14 }, 2, f0, k0, 2, 16, 0.0f, 10);
		else
			cnn_spec(&s, (struct dlt_shape){ 3, 36, 36 }, 1, f1, k1, 2, 16, 0.0f, 10);
		CHECK_MSG(pair_open_prec(&p, &s, rows, 1, 23, DLT_PRECISION_FP32) == 0, "%s", p.err);
		if (!emulated(p.gpu) || !dlt_emu_threaded_blocks) {
			pair_close(&p);
			SKIP("DLT_EMU_THREADS is the emulation's");
		}
		dlt_gpu_describe(p.gpu, name, sizeof name);
		CHECK_MSG(net || strstr(name, "(not layer 7, 9: biases not 16-byte aligned)"), "%s",
			  name);
		const size_t np = p.net.nparams;
		const long before = dlt_emu_threaded_blocks();

		for (int r = 0; r < 3; r++) {
			CHECK(g[r] = malloc(np * sizeof(float)));
			CHECK_MSG(threaded_batches(&p, r < 2, g[r], &loss[r], &hits[r], &el[r],
						   &eh[r]) == 0, "%s", p.err);
		}
		const long blocks = dlt_emu_threaded_blocks() - before;
		const int parts = dlt_gpu_dw_parts(rows, 4);

		printf("measured: net %d: %ld blocks run with their threads at once; gradients %.2g "
		       "from one thread a block's (relative L2), loss %.9g and %.9g\n", net, blocks,
		       rel_l2(g[0], g[2], np), loss[0], loss[2]);
		CHECK_MSG(blocks >= 2L * parts * 4 && parts == rows, "%ld blocks threaded, %d parts",
			  blocks, parts);
		CHECK_MSG(rel_l2(g[0], g[2], np) < 1e-6 && fabs(loss[0] - loss[2]) <= 1e-6 * fabs(loss[2]) &&
			  hits[0] == hits[2], "net %d threads at once: gradients %g apart, loss %.9g, %.9g, "
			  "hits %ld, %ld", net, rel_l2(g[0], g[2], np), loss[0], loss[2], hits[0], hits[2]);
		CHECK_MSG(fabs(el[0] - el[2]) <= 1e-6 * fabs(el[2]) && eh[0] == eh[2],
			  "net %d, an evaluation: loss %.9g, %.9g, hits %ld, %ld", net, el[0], el[2], eh[0],
			  eh[2]);
		CHECK_MSG(!memcmp(g[0], g[1], np * sizeof(float)) && loss[0] == loss[1] &&
			  hits[0] == hits[1] && el[0] == el[1], "net %d: two runs with threads at once "
			  "differ", net);
		for (int r = 0; r < 3; r++)
			free(g[r]);
		pair_close(&p);
	}
}

/* Every form of product splits alike (gemm_split's k offsets of a
 * transposed and an untransposed operand): a dense layer's forward (A x
 * B^T, k its 4612 inputs, a rest of k), input gradient (A x B, k its 4608
 * outputs) and weight gradient (A^T x B, k a batch of 4100 rows), each
 * within each precision's tolerance of the CPU and of a backend that does
 * not split */
TEST(gpu_each_form_of_split_product_matches_the_unsplit)
{
	const int wide[2] = { 16, 4608 }, narrow[1] = { 8 };
	const struct tol *tols[3] = { &tol_fp32, &tol_tf32, &tol_bf16 };
	char msg[DLT_ERR_MAX];

	if (!have_gpu)
		SKIP(why);
	/* with the dense epilogues (fp32, tf32) a dense forward and an input
	 * gradient masked by a ReLU are cuBLASLt's products, not split: off
	 * here, so that gemm splits each form in each precision */
	setenv("DLT_GPU_LT", "0", 1);
	/* the split the test is about: forward 12 x 16 x 4612 (NT), input
	 * gradient 12 x 16 x 4608 (NN), weight gradient 8 x 16 x 4100 (TN) */
	CHECK(dlt_gpu_gemm_splits(12, 16, 4612) == 8 && 4612 - 8 * dlt_gpu_split_kc(4612, 8) == 4 &&
	      dlt_gpu_gemm_splits(12, 16, 4608) == 8 && dlt_gpu_gemm_splits(8, 16, 4100) == 8);
	for (int net = 0; net < 2; net++)
		for (int i = 0; i < 3; i++) {
			struct dlt_net_spec s;
			struct pair p;
			struct dlt_gpu *plain;
			const char *bad;

			if (net == 0)
				mlp_spec(&s, 4612, wide, 2, 10);
			else
				mlp_spec(&s, 16, narrow, 1, 10);
			CHECK_MSG(pair_open_prec(&p, &s, net == 0 ? 12 : 4100, 1, 13, tols[i]->prec) == 0,
				  "%s", p.err);
			/* a batch of 4100 rows: near ties, 12 of them a BF16 rounding
			 * away, may flip where a batch of 12 had 2 */
			struct tol t = *tols[i];

			t.hits = net == 1 ? 12 : t.hits;
			bad = compare_batch_tol(&p, 2, &t, NULL, msg, sizeof msg);
			CHECK_MSG(!bad, "net %d split, against the CPU: %s", net, bad);
			plain = other_backend(&p, 13, "DLT_GPU_SPLITK", "0", tols[i]->prec);
			CHECK_MSG(plain, "%s", p.err);
			bad = two_backends(&p, p.gpu, plain, tols[i]->grad, NULL, msg, sizeof msg);
			CHECK_MSG(!bad, "net %d, %s: split, then unsplit: %s", net, tols[i]->name, bad);
			dlt_gpu_destroy(plain);
			pair_close(&p);
		}
	unsetenv("DLT_GPU_LT");
}

/* --gpu-profile: with events between the parts of the step's graph, a
 * profiled backend takes the same steps as one without, bit for bit; its
 * profile counts every graphed step, each part's time is >= 0 and the
 * parts add up to the graphs' time (they lie inside it: on the emulation
 * the CPU's time of the emulated kernels); one step is queued at a time */
TEST(gpu_profile_parts_add_up_to_the_graphed_steps_and_change_nothing)
{
	const int f[1] = { 4 }, k[1] = { 3 };
	const struct dlt_optim o = { .kind = DLT_OPTIM_SGD, .momentum = 0.9f };
	struct dlt_net_spec s;
	struct pair p;
	struct dlt_gpu *plain = NULL;
	struct dlt_gpu_profile pr;
	struct dlt_gpu_graph_stats gs;
	unsigned char id[DLT_GPU_ID_BYTES];
	float a[2], b[2];

	if (!have_gpu)
		SKIP(why);
	cnn_spec(&s, (struct dlt_shape){ 1, 12, 12 }, 1, f, k, 2, 16, 0.0f, 10);
	CHECK_MSG(pair_open(&p, &s, 16, 1, 9) == 0, "%s", p.err);
	CHECK_MSG(dlt_gpu_create(&plain, &p.net, 1, 0, 9, 0, p.err, sizeof p.err) == 0 &&
		  dlt_gpu_upload(plain, p.params, p.state, p.err, sizeof p.err) == 0 &&
		  dlt_gpu_nccl_id(id, p.err, sizeof p.err) == 0 &&
		  dlt_gpu_nccl_init(p.gpu, id, 0, 1, p.err, sizeof p.err) == 0 &&
		  dlt_gpu_nccl_init(plain, id, 0, 1, p.err, sizeof p.err) == 0 &&
		  dlt_gpu_set_profile(p.gpu, 1, p.err, sizeof p.err) == 0, "%s", p.err);
	for (int t = 1; t <= 8; t++) {
		fill_batch(p.x, p.y, 16, 144, 10, 300 + (uint64_t)t);
		CHECK_MSG(dlt_gpu_step(p.gpu, p.x, p.y, 16, 1.0f, (uint64_t)t, &o, 0.01f,
				       (unsigned long)t, a, p.err, sizeof p.err) == 0 &&
			  dlt_gpu_step(plain, p.x, p.y, 16, 1.0f, (uint64_t)t, &o, 0.01f,
				       (unsigned long)t, b, p.err, sizeof p.err) == 0, "%s", p.err);
		CHECK_MSG(!memcmp(a, b, sizeof a), "step %d: loss sum %.9g profiled, %.9g not", t,
			  (double)a[0], (double)b[0]);
	}
	dlt_gpu_profile(p.gpu, &pr);
	dlt_gpu_graph_stats(p.gpu, &gs);
	double sum = pr.gather_s + pr.loss_s + pr.sum_s + pr.update_s;
	int neg = pr.gather_s < 0 || pr.loss_s < 0 || pr.sum_s < 0 || pr.update_s < 0;
	for (int i = 0; i < p.net.nlayers; i++) {
		sum += pr.fwd_s[i] + pr.bwd_s[i];
		neg |= pr.fwd_s[i] < 0 || pr.bwd_s[i] < 0;
	}
	printf("measured: %ld graphed steps profiled, parts %.6f s of the graphs' %.6f s; "
	       "conv forward %.6f s\n", pr.steps, sum, gs.graph_s, pr.fwd_s[0]);
	CHECK_MSG(pr.steps == gs.launches && pr.steps == 7, "%ld steps profiled, %ld launched",
		  pr.steps, gs.launches);
	CHECK(!neg);
	CHECK_MSG(sum <= gs.graph_s * 1.0001 && sum >= 0.8 * gs.graph_s,
		  "parts %g s, graphs %g s", sum, gs.graph_s);
	CHECK(pr.fwd_s[0] > 0 && pr.bwd_s[0] > 0);   /* the conv's work is timed */
	/* the census names every node of the graph: its counts add up to them,
	 * and the conv block's fused kernels are there */
	long listed = 0, c;
	int used;

	for (const char *q = pr.nodes; sscanf(q, "%ld x %*[^,]%n", &c, &used) == 1;) {
		listed += c;
		q += used;
		q += strspn(q, ", ");
	}
	printf("measured: the profiled graph: %s\n", pr.nodes);
	CHECK_MSG(listed == gs.nodes, "%ld nodes listed of %ld: %s", listed, gs.nodes, pr.nodes);
	CHECK_MSG(strstr(pr.nodes, "1 x k_conv_direct") && strstr(pr.nodes, "1 x k_conv_pool_dw") &&
		  strstr(pr.nodes, "x event record") && !strstr(pr.nodes, "k_relu"), "%s", pr.nodes);
	/* one step in flight at a time */
	CHECK(dlt_gpu_queue(p.gpu, p.x, p.y, 16, 1.0f, 9, &o, 0.01f, 9, p.err, sizeof p.err) == 0);
	CHECK(dlt_gpu_queue(p.gpu, p.x, p.y, 16, 1.0f, 10, &o, 0.01f, 10, p.err, sizeof p.err) ==
	      -EBUSY && strstr(p.err, "profiling"));
	CHECK(dlt_gpu_wait(p.gpu, a, p.err, sizeof p.err) == 0);
	/* off: nothing more is added */
	CHECK(dlt_gpu_set_profile(p.gpu, 0, p.err, sizeof p.err) == 0);
	for (int t = 10; t <= 12; t++)
		CHECK(dlt_gpu_step(p.gpu, p.x, p.y, 16, 1.0f, (uint64_t)t, &o, 0.01f,
				   (unsigned long)t, a, p.err, sizeof p.err) == 0);
	struct dlt_gpu_profile after;

	dlt_gpu_profile(p.gpu, &after);
	CHECK_MSG(after.steps == pr.steps + 1, "%ld steps after off, %ld before", after.steps,
		  pr.steps);
	dlt_gpu_destroy(plain);
	pair_close(&p);
}

/* A small MLP (20-16-4) pair for 8 rows, its GPU side on a 1-rank
 * communicator. Returns 0, or -1 with p->err set. */
static int small_pair(struct pair *p)
{
	const int hidden[1] = { 16 };
	struct dlt_net_spec s;

	mlp_spec(&s, 20, hidden, 1, 4);
	if (pair_open(p, &s, 8, 1, 3) < 0)
		return -1;
	return graph_side(p->gpu, &p->net, 0, p->err, sizeof p->err);
}

/* at most DLT_GPU_QUEUE steps queued; a wait with none queued and a
 * dlt_gpu_step (whose wait would be a queued step's) are refused */
TEST(gpu_queue_holds_two_steps_and_refuses_what_would_mix_them_up)
{
	const struct dlt_optim sgd = { .kind = DLT_OPTIM_SGD, .momentum = 0.9f };
	struct pair p;
	float sums[2];

	if (!have_gpu)
		SKIP(why);
	CHECK_MSG(small_pair(&p) == 0, "%s", p.err);
	CHECK(dlt_gpu_wait(p.gpu, sums, p.err, sizeof p.err) == -EINVAL &&
	      strstr(p.err, "no step queued"));
	for (int t = 1; t <= DLT_GPU_QUEUE; t++)
		CHECK_MSG(dlt_gpu_queue(p.gpu, p.x, p.y, 8, 1.0f, (uint64_t)t, &sgd, 0.01f,
					(unsigned long)t, p.err, sizeof p.err) == 0, "%s", p.err);
	CHECK_MSG(dlt_gpu_queue(p.gpu, p.x, p.y, 8, 1.0f, 9, &sgd, 0.01f, 9, p.err,
				sizeof p.err) == -EBUSY && strstr(p.err, "queued already"), "%s", p.err);
	CHECK_MSG(dlt_gpu_step(p.gpu, p.x, p.y, 8, 1.0f, 9, &sgd, 0.01f, 9, sums, p.err,
			       sizeof p.err) == -EBUSY && strstr(p.err, "with a step queued"),
		  "%s", p.err);
	for (int t = 1; t <= DLT_GPU_QUEUE; t++)
		CHECK_MSG(dlt_gpu_wait(p.gpu, sums, p.err, sizeof p.err) == 0, "%s", p.err);
	CHECK(dlt_gpu_wait(p.gpu, sums, p.err, sizeof p.err) == -EINVAL);
	CHECK_MSG(dlt_gpu_step(p.gpu, p.x, p.y, 8, 1.0f, 3, &sgd, 0.01f, 3, sums, p.err,
			       sizeof p.err) == 0, "%s", p.err);
	pair_close(&p);
}

TEST(gpu_graph_is_dropped_when_the_precision_changes)
{
	/* a graph bakes the GEMMs' math mode and the BF16 operand buffers:
	 * after dlt_gpu_set_precision the next steps warm up and capture again */
	const struct dlt_optim o = { .kind = DLT_OPTIM_SGD, .momentum = 0.5f };
	struct dlt_gpu_graph_stats gs;
	struct pair p;
	float sums[2];

	if (!have_gpu)
		SKIP(why);
	CHECK_MSG(small_pair(&p) == 0, "%s", p.err);
	for (int t = 1; t <= 6; t++) {
		if (t == 4)
			CHECK_MSG(dlt_gpu_set_precision(p.gpu, DLT_PRECISION_TF32, p.err,
							sizeof p.err) == 0, "%s", p.err);
		CHECK_MSG(dlt_gpu_step(p.gpu, p.x, p.y, 8, 1.0f, (uint64_t)t, &o, 0.01f,
				       (unsigned long)t, sums, p.err, sizeof p.err) == 0, "%s", p.err);
	}
	dlt_gpu_graph_stats(p.gpu, &gs);
	pair_close(&p);
	/* 1 warm-up, 2 capture, 3 replay; 4 warm-up, 5 capture, 6 replay */
	CHECK_MSG(gs.eager == 2 && gs.captures == 2 && gs.launches == 4,
		  "%ld launch by launch, %ld captures, %ld launches", gs.eager, gs.captures,
		  gs.launches);
}

/* A conv's im2col matrix is written in BF16 in bf16 (the products read it
 * as it is): a backend set back to fp32 after bf16 writes and reads the
 * FP32 one again, and its gradients are a backend's that never was in
 * bf16, bit for bit */
TEST(gpu_a_conv_back_in_fp32_after_bf16_computes_as_one_never_in_bf16)
{
	struct pair p;
	struct dlt_gpu *fresh;
	char msg[DLT_ERR_MAX];
	const char *bad;

	if (!have_gpu)
		SKIP(why);
	CHECK_MSG(two_conv_pair(&p, DLT_PRECISION_BF16) == 0, "%s", p.err);
	/* other images in bf16 first: a stale FP32 im2col would be theirs */
	for (size_t i = 0; i < (size_t)12 * 196; i++)
		p.x[i] = 1.0f - p.x[i];
	CHECK_MSG(dlt_gpu_train_batch(p.gpu, p.x, p.y, 12, 1.0f, 1, NULL, NULL, NULL, p.err,
				      sizeof p.err) == 0 &&
		  dlt_gpu_set_precision(p.gpu, DLT_PRECISION_FP32, p.err, sizeof p.err) == 0, "%s",
		  p.err);
	for (size_t i = 0; i < (size_t)12 * 196; i++)
		p.x[i] = 1.0f - p.x[i];
	fresh = other_backend(&p, 5, NULL, NULL, DLT_PRECISION_FP32);
	CHECK_MSG(fresh, "%s", p.err);
	bad = two_backends(&p, p.gpu, fresh, 0, NULL, msg, sizeof msg);
	CHECK_MSG(!bad, "after bf16, then fresh: %s", bad);
	dlt_gpu_destroy(fresh);
	pair_close(&p);
}

/* The emulation's count of cuBLASLt heuristic queries (tests/unit/gpu_emu.h);
 * NULL on a GPU. */
extern long dlt_emu_lt_heuristics(void) __attribute__((weak));

/* The dense layers' epilogues (dlt_gpu_dense_epilogue, dlt_gpu_dgrad_fused):
 * in fp32 and tf32 a dense layer's bias and ReLU ride on its product
 * (cublasLtMatmul), and the input gradient of a dense layer two after a
 * dense layer's ReLU is masked by that ReLU, and the first's bias gradient
 * summed, in its product's epilogue. The CPU trainer's logits, loss and
 * gradients within each precision's tolerance, a backend without them
 * (DLT_GPU_LT=0) within it too; the MLP's step (4 dense layers, 3 of them
 * before a ReLU and a dense layer) 7 graph nodes fewer, the CNN's (two
 * dense layers, the first's ReLU before a dropout: the bias in the
 * epilogue, its gradient a kernel) 2 fewer; in bf16 none, dlt_gpu_describe
 * saying which.
 * A bf16 backend set to tf32 takes them up: as a fresh tf32 one, bit for
 * bit. Asked for one kernel a product (DLT_GPU_LT_ONE=1: no split k summed
 * apart), the same sums within the tolerance. Each product is planned once
 * (on the emulation: no heuristic asked again for batches of rows seen). */
TEST(gpu_dense_epilogues_match_the_plain_path_in_fewer_nodes)
{
	const struct tol *tols[3] = { &tol_fp32, &tol_tf32, &tol_bf16 };
	const struct dlt_optim o = { .kind = DLT_OPTIM_SGD, .momentum = 0.9f };
	const int rows[2] = { 64, 16 };
	char msg[DLT_ERR_MAX], name[DLT_ERR_MAX];

	if (!have_gpu)
		SKIP(why);
	for (int net = 0; net < 2; net++)
		for (int i = 0; i < 3; i++) {
			const int on = tols[i]->prec != DLT_PRECISION_BF16;
			const long fewer = !on ? 0 : net == 0 ? 7 : 2;
			struct dlt_net_spec s;
			struct pair p;
			struct dlt_gpu *plain;
			const char *bad;
			double e = 0;

			model_spec(&s, net);
			CHECK_MSG(pair_open_prec(&p, &s, rows[net], 1, 7, tols[i]->prec) == 0, "%s", p.err);
			dlt_gpu_describe(p.gpu, name, sizeof name);
			CHECK_MSG(strstr(name, on ? "; dense bias and ReLU in cuBLASLt epilogues" :
					 "; dense epilogues off in bf16"), "%s: %s", tols[i]->name, name);
			bad = compare_batch_tol(&p, 5, tols[i], NULL, msg, sizeof msg);
			CHECK_MSG(!bad, "net %d with the epilogues, against the CPU: %s", net, bad);
			plain = other_backend(&p, 7, "DLT_GPU_LT", "0", tols[i]->prec);
			CHECK_MSG(plain, "%s", p.err);
			dlt_gpu_describe(plain, name, sizeof name);
			CHECK_MSG(strstr(name, "; dense epilogues off (DLT_GPU_LT=0)"), "%s", name);
			/* bf16: the same path, bit for bit */
			bad = two_backends(&p, p.gpu, plain, on ? tols[i]->grad : 0, &e, msg, sizeof msg);
			printf("measured: net %d, %s: gradients %.2g from the plain path's (relative L2)\n",
			       net, tols[i]->name, e);
			CHECK_MSG(!bad, "net %d, %s: with the epilogues, then without: %s", net,
				  tols[i]->name, bad);
			if (dlt_emu_lt_heuristics) {   /* evaluations of a row less, twice */
				long asked[3];
				double l = 0;
				long h = 0;

				asked[0] = dlt_emu_lt_heuristics();
				CHECK_MSG(dlt_gpu_eval_batch(p.gpu, p.x, p.y, p.rows - 1, &l, &h, p.err,
							     sizeof p.err) == 0, "%s", p.err);
				asked[1] = dlt_emu_lt_heuristics();
				CHECK_MSG(dlt_gpu_eval_batch(p.gpu, p.x, p.y, p.rows - 1, &l, &h, p.err,
							     sizeof p.err) == 0, "%s", p.err);
				asked[2] = dlt_emu_lt_heuristics();
				CHECK_MSG(asked[1] - asked[0] == (!on ? 0 : net == 0 ? 4 : 2) &&
					  asked[2] == asked[1], "net %d, %s: heuristics asked %ld times for "
					  "an evaluation of new rows, %ld for the same again", net,
					  tols[i]->name, asked[1] - asked[0], asked[2] - asked[1]);
			}
			if (on) {   /* one kernel a product (DLT_GPU_LT_ONE=1): the same sums */
				struct dlt_gpu *one = other_backend(&p, 7, "DLT_GPU_LT_ONE", "1",
								    tols[i]->prec);

				CHECK_MSG(one, "%s", p.err);
				dlt_gpu_describe(one, name, sizeof name);
				CHECK_MSG(strstr(name, "epilogues (one kernel each: DLT_GPU_LT_ONE=1)"), "%s",
					  name);
				bad = two_backends(&p, p.gpu, one, tols[i]->grad, NULL, msg, sizeof msg);
				CHECK_MSG(!bad, "net %d, %s: cuBLASLt's choice, then one kernel each: %s",
					  net, tols[i]->name, bad);
				dlt_gpu_destroy(one);
			}
			long nw = step_nodes(&p, p.gpu, &o), nn = step_nodes(&p, plain, &o);
			CHECK_MSG(nw > 0 && nn > 0, "%s", p.err);
			printf("measured: net %d, %s: a step of %ld graph nodes with the epilogues, %ld "
			       "without\n", net, tols[i]->name, nw, nn);
			CHECK_MSG(!emulated(p.gpu) || nw == nn - fewer, "net %d, %s: a step of %ld nodes "
				  "with the epilogues, %ld without (want %ld fewer)", net, tols[i]->name, nw,
				  nn, fewer);
			dlt_gpu_destroy(plain);
			if (!on) {
				struct dlt_gpu *fresh;

				CHECK_MSG(dlt_gpu_set_precision(p.gpu, DLT_PRECISION_TF32, p.err,
								sizeof p.err) == 0 &&
					  dlt_gpu_upload(p.gpu, p.params, p.state, p.err,
							 sizeof p.err) == 0, "%s", p.err);
				dlt_gpu_describe(p.gpu, name, sizeof name);
				CHECK_MSG(strstr(name, "; dense bias and ReLU in cuBLASLt epilogues"),
					  "bf16, then tf32: %s", name);
				fresh = other_backend(&p, 7, NULL, NULL, DLT_PRECISION_TF32);
				CHECK_MSG(fresh, "%s", p.err);
				bad = two_backends(&p, p.gpu, fresh, 0, NULL, msg, sizeof msg);
				CHECK_MSG(!bad, "net %d: bf16 then tf32, and tf32: %s", net, bad);
				dlt_gpu_destroy(fresh);
			}
			pair_close(&p);
		}
}

/* The emulation's count of cublasLtMatmul calls on a pointer less aligned
 * than their algorithm assumes (tests/unit/gpu_emu.h: a misaligned address
 * on a GPU); NULL on a GPU. */
extern long dlt_emu_lt_bad_calls(void) __attribute__((weak));

/* A layer's weights and biases lie where the layers before end, in one
 * buffer: in an MLP 29 -> 17 -> 6 -> 5, layer 1's biases 4 bytes past a
 * 16-byte line (float 493), layer 5's weights 8 bytes past one (float
 * 618). cuBLASLt is asked for algorithms for the operands as aligned as
 * they lie, and layer 1, whose biases an epilogue would read 16 bytes at a
 * time, keeps its own kernels, the device line naming it: in fp32 and tf32
 * a batch within the tolerance of the CPU's, a step's graph and evaluations
 * of new rows too, and (the emulation) no call on a pointer less aligned
 * than its algorithm assumes. */
TEST(gpu_dense_epilogues_take_weights_and_biases_as_aligned_as_they_lie)
{
	const struct tol *tols[2] = { &tol_fp32, &tol_tf32 };
	const struct dlt_optim o = { .kind = DLT_OPTIM_SGD, .momentum = 0.9f };
	const int hidden[2] = { 17, 6 };
	char msg[DLT_ERR_MAX], name[DLT_ERR_MAX];
	struct dlt_net_spec s;

	if (!have_gpu)
		SKIP(why);
	mlp_spec(&s, 29, hidden, 2, 5);
	for (int i = 0; i < 2; i++) {
		long bad_before = dlt_emu_lt_bad_calls ? dlt_emu_lt_bad_calls() : 0;
		struct pair p;
		const char *bad;
		double l = 0;
		long h = 0;

		CHECK_MSG(pair_open_prec(&p, &s, 12, 1, 23, tols[i]->prec) == 0, "%s", p.err);
		CHECK_MSG(p.net.layer[0].off + 29 * 17 == 493 && p.net.layer[4].off == 618,
			  "layer 1's biases at float %zu, layer 5's weights at %zu",
			  p.net.layer[0].off + 29 * 17, p.net.layer[4].off);
		dlt_gpu_describe(p.gpu, name, sizeof name);
		CHECK_MSG(strstr(name, "; dense bias and ReLU in cuBLASLt epilogues (not layer 1: "
				 "biases not 16-byte aligned)"), "%s: %s", tols[i]->name, name);
		bad = compare_batch_tol(&p, 3, tols[i], NULL, msg, sizeof msg);
		CHECK_MSG(!bad, "%s: against the CPU: %s", tols[i]->name, bad);
		CHECK_MSG(step_nodes(&p, p.gpu, &o) > 0 &&
			  dlt_gpu_eval_batch(p.gpu, p.x, p.y, p.rows - 5, &l, &h, p.err,
					     sizeof p.err) == 0, "%s: %s", tols[i]->name, p.err);
		if (dlt_emu_lt_bad_calls)
			CHECK_MSG(dlt_emu_lt_bad_calls() == bad_before, "%s: %ld cublasLtMatmul calls "
				  "on a pointer less aligned than their algorithm assumes",
				  tols[i]->name, dlt_emu_lt_bad_calls() - bad_before);
		pair_close(&p);
	}
}

/* Opens p for s (9 rows, seed 19, precision prec) with the emulation's
 * DLT_EMU_LT_NONE=env while it opens, and a backend of DLT_GPU_LT=0 into
 * *plain; then p's device line must say want, and a training batch give
 * *plain's gradients bit for bit. Returns NULL, or what failed (in msg);
 * "skip" on a GPU (the variable is the emulation's). */
static const char *refused_open(struct pair *p, const struct dlt_net_spec *s, const char *env,
				enum dlt_precision prec, const char *want, struct dlt_gpu **plain,
				char *msg, size_t len)
{
	char name[DLT_ERR_MAX];
	const char *bad;

	*plain = NULL;
	setenv("DLT_EMU_LT_NONE", env, 1);
	int rc = pair_open_prec(p, s, 9, 1, 19, prec);

	unsetenv("DLT_EMU_LT_NONE");
	if (rc < 0) {
		snprintf(msg, len, "%s", p->err);
		return msg;
	}
	if (!emulated(p->gpu))
		return "skip";
	dlt_gpu_describe(p->gpu, name, sizeof name);
	if (!strstr(name, want)) {
		snprintf(msg, len, "the device line: %s", name);
		return msg;
	}
	*plain = other_backend(p, 19, "DLT_GPU_LT", "0", prec);
	if (!*plain) {
		snprintf(msg, len, "%s", p->err);
		return msg;
	}
	bad = two_backends(p, p->gpu, *plain, 0, NULL, msg, len);
	return bad;
}

/* A cuBLASLt with no algorithm for one of the net's products with its
 * epilogue (the emulation's heuristic with DLT_EMU_LT_NONE; on a GPU the
 * variable does nothing and the test is skipped): at the largest batch,
 * asked when the backend opens, it leaves the dense layers on the plain
 * path (dlt_gpu_describe names the layer and the product, and a planning
 * call that fails is taken as a refusal, its status said; the gradients
 * and the step's nodes those of DLT_GPU_LT=0, bit for bit); at a batch of
 * other rows, met in a pass, that pass's products fall back to it one by
 * one: every product refused, DLT_GPU_LT=0's gradients bit for bit; only
 * the input gradients' DRELU_BGRAD refused (the forward's masks written),
 * the layers before mask and sum their bias gradients themselves, or only
 * the forward's RELU_AUX_BIAS (no mask written), the input gradients'
 * products are plain too: within FP32's tolerance of DLT_GPU_LT=0's */
TEST(gpu_a_cublaslt_without_an_algorithm_leaves_the_plain_path)
{
	const int hidden[2] = { 24, 16 };
	const struct dlt_optim o = { .kind = DLT_OPTIM_SGD, .momentum = 0.9f };
	char msg[DLT_ERR_MAX], name[DLT_ERR_MAX];
	struct dlt_net_spec s;
	struct dlt_gpu *plain;
	struct pair p;
	const char *bad;

	if (!have_gpu)
		SKIP(why);
	mlp_spec(&s, 29, hidden, 2, 10);
	bad = refused_open(&p, &s, "1", DLT_PRECISION_TF32, "; dense epilogues off: layer 1: "
			   "cuBLASLt has no algorithm for a 9 x 24 x 29 product with epilogue "
			   "RELU_BIAS", &plain, msg, sizeof msg);
	if (bad && !strcmp(bad, "skip")) {
		pair_close(&p);
		SKIP("a GPU's cuBLASLt: DLT_EMU_LT_NONE is the emulation's");
	}
	CHECK_MSG(!bad, "refused, then off: %s", bad);
	long nr = step_nodes(&p, p.gpu, &o), nn = step_nodes(&p, plain, &o);
	CHECK_MSG(nr > 0 && nr == nn, "a step of %ld nodes refused, %ld off (%s)", nr, nn, p.err);
	dlt_gpu_destroy(plain);
	pair_close(&p);

	/* a planning call failing (the heuristic's CUBLAS_STATUS_INVALID_VALUE)
	 * is a refusal too, with its status: no failed open */
	bad = refused_open(&p, &s, "invalid", DLT_PRECISION_FP32, "; dense epilogues off: layer 1: "
			   "cuBLASLt cannot plan a 9 x 24 x 29 product with epilogue RELU_BIAS "
			   "(cublasLtMatmulAlgoGetHeuristic: ", &plain, msg, sizeof msg);
	CHECK_MSG(!bad, "failed planning, then off: %s", bad);
	dlt_gpu_destroy(plain);
	pair_close(&p);

	/* at fewer rows than a backend opened for 9 (a product's plan is
	 * kept, its refusal too: each case at rows of its own) */
	CHECK_MSG(pair_open(&p, &s, 9, 1, 19) == 0, "%s", p.err);
	dlt_gpu_describe(p.gpu, name, sizeof name);
	CHECK_MSG(strstr(name, "; dense bias and ReLU in cuBLASLt epilogues"), "%s", name);
	plain = other_backend(&p, 19, "DLT_GPU_LT", "0", DLT_PRECISION_FP32);
	CHECK_MSG(plain, "%s", p.err);
	p.rows = 7;
	setenv("DLT_EMU_LT_NONE", "rows=7", 1);
	bad = two_backends(&p, p.gpu, plain, 0, NULL, msg, sizeof msg);
	CHECK_MSG(!bad, "every product refused at 7 rows, then off: %s", bad);
	double e = 1;

	p.rows = 6;
	setenv("DLT_EMU_LT_NONE", "rows=6,drelu", 1);
	bad = two_backends(&p, p.gpu, plain, tol_fp32.grad, &e, msg, sizeof msg);
	unsetenv("DLT_EMU_LT_NONE");
	printf("measured: DRELU_BGRAD refused at 6 rows: gradients %.2g from the plain path's\n", e);
	CHECK_MSG(!bad, "DRELU_BGRAD refused at 6 rows, then off: %s", bad);
	/* only the forward's RELU_AUX_BIAS refused: the input gradients'
	 * products do not use its mask (a pass over other images wrote masks
	 * of theirs before) */
	for (size_t i = 0; i < (size_t)9 * 29; i++)
		p.x[i] = 1.0f - p.x[i];
	CHECK_MSG(dlt_gpu_train_batch(p.gpu, p.x, p.y, 9, 1.0f, 1, NULL, NULL, NULL, p.err,
				      sizeof p.err) == 0, "%s", p.err);
	for (size_t i = 0; i < (size_t)9 * 29; i++)
		p.x[i] = 1.0f - p.x[i];
	p.rows = 5;
	setenv("DLT_EMU_LT_NONE", "rows=5,aux", 1);
	bad = two_backends(&p, p.gpu, plain, tol_fp32.grad, &e, msg, sizeof msg);
	unsetenv("DLT_EMU_LT_NONE");
	CHECK_MSG(!bad, "RELU_AUX_BIAS refused at 5 rows, then off: %s", bad);
	/* and at 9 rows again, the epilogues all there */
	p.rows = 9;
	bad = two_backends(&p, p.gpu, plain, tol_fp32.grad, &e, msg, sizeof msg);
	CHECK_MSG(!bad, "9 rows, then off: %s", bad);
	dlt_gpu_destroy(plain);
	pair_close(&p);
}

/* A backend of p's net opened with DLT_GPU_CONV=cudnn (and the emulation's
 * DLT_EMU_CUDNN_NONE=none when not NULL), as other_backend. */
static struct dlt_gpu *cudnn_backend(struct pair *p, uint64_t seed, const char *none,
				     enum dlt_precision prec)
{
	struct dlt_gpu *g;

	if (none)
		setenv("DLT_EMU_CUDNN_NONE", none, 1);
	g = other_backend(p, seed, "DLT_GPU_CONV", "cudnn", prec);
	unsetenv("DLT_EMU_CUDNN_NONE");
	return g;
}

extern long dlt_emu_cudnn_bad_calls(void) __attribute__((weak));
extern long dlt_emu_cudnn_finds(void) __attribute__((weak));

/* DLT_GPU_CONV=cudnn: each conv's forward, input and weight gradients are
 * cuDNN calls on NCHW tensors (dnn.cu) where the own path is an im2col
 * matrix and products over it. In fp32 (cuDNN's FMA math) and tf32 (its
 * default math) a batch gives the CPU trainer's logits, loss and gradients
 * within the precision's tolerance, and the own path's gradients within
 * it too, also at rows it plans when it meets them; bf16 keeps the own
 * path (the device line says so; bit for bit). A graphed step is the
 * ungraphed one bit for bit (the algorithms are deterministic and planned
 * before a capture), and has as many nodes as the own path's for two
 * convs (emulation: the second's im2col and product become one call, and
 * its input gradient's product and col2im one call too; the first's
 * direct product with its ReLU and pool, and its direct weight gradient
 * and the parts' sum, dlt_gpu_conv_dw_direct, are two nodes fewer than
 * its cuDNN calls with the pool's kernels and the bias gradient's). No call runs an algorithm Find listed
 * to be passed over (one summing with atomics, one whose workspace is too
 * big: the emulation lists them first, as the fastest), and a profiled
 * step names each conv's algorithms and Find's times. A net without convs
 * opens no cuDNN. */
TEST(gpu_convs_through_cudnn_match_the_cpu_and_the_own_path_in_fewer_nodes)
{
	const struct tol *tols[3] = { &tol_fp32, &tol_tf32, &tol_bf16 };
	const struct dlt_optim o = { .kind = DLT_OPTIM_NESTEROV, .momentum = 0.9f };
	char msg[DLT_ERR_MAX], name[DLT_ERR_MAX];
	struct dlt_net_spec s;
	const char *bad = NULL;
	int emu = 0;

	if (!have_gpu)
		SKIP(why);
	{   /* a net without convs opens no handle, and the device line is silent */
		struct pair p;

		model_spec(&s, 0);
		setenv("DLT_GPU_CONV", "cudnn", 1);
		int rc = pair_open(&p, &s, 8, 1, 7);

		unsetenv("DLT_GPU_CONV");
		CHECK_MSG(rc == 0, "%s", p.err);
		dlt_gpu_describe(p.gpu, name, sizeof name);
		pair_close(&p);
		CHECK_MSG(!strstr(name, "cuDNN"), "the MLP: %s", name);
	}
	model_spec(&s, 1);
	for (int i = 0; i < 3; i++) {
		const int on = tols[i]->prec != DLT_PRECISION_BF16;
		struct pair p;
		struct dlt_gpu *own;
		double e = 0;

		setenv("DLT_GPU_CONV", "cudnn", 1);
		int rc = pair_open_prec(&p, &s, 16, 1, 7, tols[i]->prec);

		unsetenv("DLT_GPU_CONV");
		CHECK_MSG(rc == 0, "%s", p.err);
		emu = emulated(p.gpu);
		dlt_gpu_describe(p.gpu, name, sizeof name);
		CHECK_MSG(strstr(name, on ? "; convolutions through cuDNN 9." :
				 "; convolutions through cuDNN off in bf16"), "%s: %s", tols[i]->name,
			  name);
		bad = compare_batch_tol(&p, 5, tols[i], NULL, msg, sizeof msg);
		CHECK_MSG(!bad, "%s: through cuDNN, against the CPU: %s", tols[i]->name, bad);
		own = other_backend(&p, 7, NULL, NULL, tols[i]->prec);
		CHECK_MSG(own, "%s", p.err);
		dlt_gpu_describe(own, name, sizeof name);
		CHECK_MSG(!strstr(name, "cuDNN"), "DLT_GPU_CONV unset: %s", name);
		bad = two_backends(&p, p.gpu, own, on ? tols[i]->grad : 0, &e, msg, sizeof msg);
		printf("measured: %s: gradients %.2g from the own path's (relative L2)\n",
		       tols[i]->name, e);
		CHECK_MSG(!bad, "%s: through cuDNN, then the own path: %s", tols[i]->name, bad);
		p.rows = 11;   /* rows it has not planned: an evaluation plans the forwards, */
		long finds[3] = { dlt_emu_cudnn_finds ? dlt_emu_cudnn_finds() : 0, 0, 0 };
		double l = 0;
		long h = 0;

		CHECK_MSG(dlt_gpu_eval_batch(p.gpu, p.x, p.y, p.rows, &l, &h, p.err,
					     sizeof p.err) == 0, "%s", p.err);
		finds[1] = dlt_emu_cudnn_finds ? dlt_emu_cudnn_finds() : 0;
		/* a training pass the gradients' (the first conv has no input gradient) */
		bad = two_backends(&p, p.gpu, own, on ? tols[i]->grad : 0, &e, msg, sizeof msg);
		CHECK_MSG(!bad, "%s: 11 rows through cuDNN, then the own path: %s", tols[i]->name, bad);
		finds[2] = dlt_emu_cudnn_finds ? dlt_emu_cudnn_finds() : 0;
		CHECK_MSG(!on || !dlt_emu_cudnn_finds ||
			  (finds[1] - finds[0] == 2 && finds[2] - finds[1] == 3),
			  "%s: Find ran %ld times for an evaluation of new rows, %ld for training "
			  "at them (want 2, 3)", tols[i]->name, finds[1] - finds[0],
			  finds[2] - finds[1]);
		p.rows = 16;
		long nd = step_nodes(&p, p.gpu, &o), no = step_nodes(&p, own, &o);
		CHECK_MSG(nd > 0 && no > 0, "%s", p.err);
		printf("measured: %s: a step of %ld graph nodes through cuDNN, %ld on the own path\n",
		       tols[i]->name, nd, no);
		CHECK_MSG(!emulated(p.gpu) || nd == no, "%s: a step of %ld nodes through cuDNN, %ld "
			  "on the own path (want as many)", tols[i]->name, nd, no);
		{   /* a profiled step names each conv's algorithms (the own path: none) */
			struct dlt_gpu_profile pr, po;
			float sums[2];

			CHECK_MSG(dlt_gpu_set_profile(p.gpu, 1, p.err, sizeof p.err) == 0 &&
				  dlt_gpu_set_profile(own, 1, p.err, sizeof p.err) == 0, "%s", p.err);
			for (int t = 4; t <= 6; t++)
				CHECK_MSG(dlt_gpu_step(p.gpu, p.x, p.y, p.rows, 1.0f, (uint64_t)t, &o, 0.01f,
						       (unsigned long)t, sums, p.err, sizeof p.err) == 0 &&
					  dlt_gpu_step(own, p.x, p.y, p.rows, 1.0f, (uint64_t)t, &o, 0.01f,
						       (unsigned long)t, sums, p.err, sizeof p.err) == 0,
					  "%s", p.err);
			dlt_gpu_profile(p.gpu, &pr);
			dlt_gpu_profile(own, &po);
			printf("measured: %s: cuDNN: %s\n", tols[i]->name, pr.convs);
			CHECK_MSG(!on || (strstr(pr.convs, "layer 1: forward ") &&
					  strstr(pr.convs, "input gradient none (the first layer)") &&
					  strstr(pr.convs, "; layer 4: forward ") &&
					  !strstr(strstr(pr.convs, "; layer 4"), "none")),
				  "%s: the profile's convolutions: %s", tols[i]->name, pr.convs);
			CHECK_MSG(on || !pr.convs[0], "bf16: %s", pr.convs);
			CHECK_MSG(!po.convs[0], "the own path: %s", po.convs);
			if (on && emulated(p.gpu))   /* the algorithms Find listed to be used */
				CHECK_MSG(strstr(pr.convs, "forward IMPLICIT_PRECOMP_GEMM 0.030 ms") &&
					  strstr(pr.convs, "weight gradient ALGO_1 0.030 ms"), "%s",
					  pr.convs);
		}
		dlt_gpu_destroy(own);
		pair_close(&p);
	}
	/* graphed and not are two backends, each with its own Find: on a GPU,
	 * its timings may give them other algorithms (each deterministic, but
	 * summing in other orders), the emulation's Find lists alike */
	if (!emu)
		printf("skipped on a GPU: graphed against ungraphed through cuDNN, bit for bit\n");
	setenv("DLT_GPU_CONV", "cudnn", 1);
	for (int i = 0; i < 2 && emu && !bad; i++) {
		const int f[2] = { 4, 6 }, k[2] = { 5, 3 };

		cnn_spec(&s, (struct dlt_shape){ 1, 14, 14 }, 2, f, k, 2, 16, 0.25f, 10);
		bad = graph_vs_eager(&s, &o, tols[i]->prec, 1, i ? GV_ROWS | GV_AHEAD : 0, msg,
				     sizeof msg);
	}
	unsetenv("DLT_GPU_CONV");
	CHECK_MSG(!bad, "through cuDNN, graphed and not: %s", bad);
	if (dlt_emu_cudnn_bad_calls)
		CHECK_MSG(dlt_emu_cudnn_bad_calls() == 0, "%ld calls ran an algorithm Find listed to "
			  "be passed over", dlt_emu_cudnn_bad_calls());
}

/* A cuDNN that cannot (the emulation's DLT_EMU_CUDNN_NONE; on a GPU the
 * variable does nothing and the test is skipped) costs the optimisation,
 * never the run: no library, no algorithm for a forward or for a weight
 * gradient at the largest batch (asked when the backend opens) leave
 * every conv on the own path, the device line saying why, the gradients the own path's bit for
 * bit; no algorithm at a batch of other rows, met in a pass, runs that
 * pass on the own path, and the next pass of planned rows through cuDNN
 * again; a cuDNN call that a step's capture cannot take turns cuDNN off
 * and the step is captured on the own path. */
TEST(gpu_a_cudnn_that_cannot_leaves_the_convs_on_their_own_path)
{
	const struct {
		const char *none;   /* DLT_EMU_CUDNN_NONE */
		const char *want;   /* in the device line */
	} cases[4] = {
		{ "lib", "; convolutions through cuDNN off: cannot open libcudnn.so.9" },
		{ "find=unsupported", "; convolutions through cuDNN off: layer 1: cudnn: "
				      "cudnnFindConvolutionForwardAlgorithmEx: CUDNN_STATUS_NOT_SUPPORTED" },
		{ "1", "; convolutions through cuDNN off: layer 1: cudnn: no deterministic forward "
		       "algorithm within 64 MiB of workspace (3 tried)" },
		{ "filter", "; convolutions through cuDNN off: layer 1: cudnn: no deterministic "
			    "weight-gradient algorithm" },
	};
	char msg[DLT_ERR_MAX], name[DLT_ERR_MAX];
	struct dlt_net_spec s;
	struct pair p;
	struct dlt_gpu *g;
	const char *bad;
	double e = 1;

	if (!have_gpu)
		SKIP(why);
	for (int c = 0; c < 4; c++) {
		const int f[2] = { 4, 6 }, k[2] = { 5, 3 };

		cnn_spec(&s, (struct dlt_shape){ 1, 14, 14 }, 2, f, k, 2, 16, 0.0f, 10);
		CHECK_MSG(pair_open_prec(&p, &s, 9, 1, 19, DLT_PRECISION_TF32) == 0, "%s", p.err);
		if (!emulated(p.gpu)) {
			pair_close(&p);
			SKIP("a GPU's cuDNN: DLT_EMU_CUDNN_NONE is the emulation's");
		}
		g = cudnn_backend(&p, 19, cases[c].none, DLT_PRECISION_TF32);
		CHECK_MSG(g, "%s: %s", cases[c].none, p.err);
		dlt_gpu_describe(g, name, sizeof name);
		CHECK_MSG(strstr(name, cases[c].want), "the device line: %s", name);
		bad = two_backends(&p, g, p.gpu, 0, NULL, msg, sizeof msg);
		CHECK_MSG(!bad, "%s: off, then the own path: %s", cases[c].want, bad);
		dlt_gpu_destroy(g);
		pair_close(&p);
	}
	/* a Find that meets a device fault is the run's error, not a refusal
	 * that would run on over a broken context */
	CHECK_MSG(two_conv_pair(&p, DLT_PRECISION_FP32) == 0, "%s", p.err);
	g = cudnn_backend(&p, 5, "find=fault", DLT_PRECISION_FP32);
	CHECK_MSG(!g && strstr(p.err, "cudnnFindConvolutionForwardAlgorithmEx: "
			       "CUDNN_STATUS_EXECUTION_FAILED"), "a device fault in Find: %s",
		  g ? "the backend opened" : p.err);
	pair_close(&p);
	/* at 7 rows of a backend opened for 9 */
	CHECK_MSG(two_conv_pair(&p, DLT_PRECISION_FP32) == 0, "%s", p.err);
	g = cudnn_backend(&p, 5, NULL, DLT_PRECISION_FP32);
	CHECK_MSG(g, "%s", p.err);
	p.rows = 7;
	setenv("DLT_EMU_CUDNN_NONE", "rows=7", 1);
	bad = two_backends(&p, g, p.gpu, 0, NULL, msg, sizeof msg);
	unsetenv("DLT_EMU_CUDNN_NONE");
	CHECK_MSG(!bad, "no algorithm at 7 rows, then the own path: %s", bad);
	p.rows = 12;
	long before = dlt_emu_cudnn_bad_calls ? dlt_emu_cudnn_bad_calls() : 0;
	bad = two_backends(&p, g, p.gpu, tol_fp32.grad, &e, msg, sizeof msg);
	CHECK_MSG(!bad, "12 rows through cuDNN again, then the own path: %s", bad);
	CHECK_MSG(e > 0, "12 rows: the own path's gradients bit for bit: not through cuDNN?");
	CHECK_MSG(!dlt_emu_cudnn_bad_calls || dlt_emu_cudnn_bad_calls() == before, "bad algorithms");
	/* a cuDNN call the step's capture cannot take: the capture again on
	 * the own path, the same nodes, and the device line says why */
	const struct dlt_optim o = { .kind = DLT_OPTIM_SGD, .momentum = 0.9f };
	long no = step_nodes(&p, p.gpu, &o), nc;

	setenv("DLT_EMU_CUDNN_NONE", "capture", 1);
	nc = step_nodes(&p, g, &o);
	unsetenv("DLT_EMU_CUDNN_NONE");
	CHECK_MSG(nc > 0 && no > 0, "%s", p.err);
	CHECK_MSG(nc == no, "a step of %ld nodes after the failed capture, %ld on the own path", nc,
		  no);
	dlt_gpu_describe(g, name, sizeof name);
	CHECK_MSG(strstr(name, "; convolutions through cuDNN off: the step's capture failed: cudnn: "
			 "cudnnConvolutionForward"), "%s", name);
	dlt_gpu_destroy(g);
	pair_close(&p);
}

int main(void)
{
	RUN(gpu_count_or_a_reason);
	RUN(gpu_mlp_batch_matches_cpu);
	RUN(gpu_odd_sizes_mlp_batch_matches_cpu);
	RUN(gpu_cnn_with_dropout_batch_matches_cpu);
	RUN(gpu_cnn_odd_shapes_batch_matches_cpu);
	RUN(gpu_eval_batch_matches_cpu);
	RUN(gpu_optimizer_steps_match_cpu);
	RUN(gpu_nccl_step_on_one_rank_matches_cpu);
	RUN(gpu_bucketed_nccl_step_matches_cpu);
	RUN(gpu_refuses_buckets_that_do_not_tile_the_gradients);
	RUN(gpu_rejects_a_batch_larger_than_max);
	RUN(gpu_each_precision_batch_matches_cpu_within_its_tolerance);
	RUN(gpu_each_precision_trains_like_cpu_within_its_tolerance);
	RUN(gpu_long_k_gemms_split_and_sum_like_one);
	RUN(gpu_convs_of_few_taps_are_computed_directly_as_their_im2col_products);
	RUN(gpu_block_sums_with_their_threads_at_once_give_the_same_numbers);
	RUN(gpu_each_form_of_split_product_matches_the_unsplit);
	RUN(gpu_dense_epilogues_match_the_plain_path_in_fewer_nodes);
	RUN(gpu_a_step_that_cannot_be_captured_runs_launch_by_launch);
	RUN(gpu_dense_epilogues_take_weights_and_biases_as_aligned_as_they_lie);
	RUN(gpu_a_cublaslt_without_an_algorithm_leaves_the_plain_path);
	RUN(gpu_convs_through_cudnn_match_the_cpu_and_the_own_path_in_fewer_nodes);
	RUN(gpu_a_cudnn_that_cannot_leaves_the_convs_on_their_own_path);
	RUN(gpu_a_conv_back_in_fp32_after_bf16_computes_as_one_never_in_bf16);
	RUN(gpu_bf16_keeps_fp32_master_weights_that_move_between_cpu_and_gpu);
	RUN(gpu_refuses_an_unknown_precision);
	RUN(gpu_graph_mlp_sgd_momentum_steps_equal_the_ungraphed_bit_for_bit);
	RUN(gpu_graph_mlp_adam_dropout_bucketed_steps_equal_the_ungraphed_bit_for_bit);
	RUN(gpu_graph_cnn_nesterov_dropout_steps_equal_the_ungraphed_bit_for_bit);
	RUN(gpu_graph_cnn_adam_dropout_bf16_bucketed_steps_equal_the_ungraphed_bit_for_bit);
	RUN(gpu_index_kernels_32_and_64_bit_give_the_same_gradients);
	RUN(gpu_profile_parts_add_up_to_the_graphed_steps_and_change_nothing);
	RUN(gpu_queue_holds_two_steps_and_refuses_what_would_mix_them_up);
	RUN(gpu_graph_is_dropped_when_the_precision_changes);
	RUN(gpu_steps_on_rows_the_gpu_holds_are_refused_outside_them);
	return CHECK_EXIT();
}
