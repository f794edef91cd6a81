/* test_train_layers.c - unit tests of the conv layer (plain, fused ReLU, fused ReLU + max-pool) against a direct convolution, and of big dense layers */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/train/layers.h"
#include "engine/train/net.h"
#include "engine/train/rng.h"
#include "tests/unit/check.h"
#include "tests/unit/ref_mlp.h"

/* One conv case: n images C x H x W, F filters k x k, then (fused) pool. */
struct conv_case {
	int n, C, H, W, F, k;
	int fuse;   /* 0 plain, 1 ReLU, 2 ReLU + max-pool */
	int pool;   /* pool size when fuse is 2 */
	int ties;   /* 1: inputs from {-1, 0, 1, 2}, weights 1, biases 0 (k 1):
		     * windows with equal maxima */
};

/* v[0..m) ~ N(0, sd) from r. */
static void fill(float *v, size_t m, double sd, struct dlt_rng *r)
{
	for (size_t i = 0; i < m; i++)
		v[i] = (float)(sd * dlt_rng_normal(r));
}

/* Input pixel (c, y, x) of image xi, 0 outside the plane. */
static double px(const float *xi, int H, int W, int c, int y, int x)
{
	if (y < 0 || y >= H || x < 0 || x >= W)
		return 0.0;
	return xi[((size_t)c * (size_t)H + (size_t)y) * (size_t)W + (size_t)x];
}

/* The direct 'same' convolution of case s in double: pre-activation z
 * (n x F x H x W) from x, weights w and biases b. */
static void direct_forward(const struct conv_case *s, const float *x, const float *w,
			   const float *b, double *z)
{
	const int p = s->k / 2;
	const size_t xs = (size_t)s->C * (size_t)s->H * (size_t)s->W;

	for (int i = 0; i < s->n; i++)
		for (int f = 0; f < s->F; f++)
			for (int y = 0; y < s->H; y++)
				for (int xx = 0; xx < s->W; xx++) {
					double acc = b[f];

					for (int c = 0; c < s->C; c++)
						for (int ky = 0; ky < s->k; ky++)
							for (int kx = 0; kx < s->k; kx++)
								acc += (double)w[((f * s->C + c) * s->k + ky) * s->k + kx] *
								       px(x + (size_t)i * xs, s->H, s->W, c,
									  y + ky - p, xx + kx - p);
					z[(((size_t)i * (size_t)s->F + (size_t)f) * (size_t)s->H + (size_t)y) *
					  (size_t)s->W + (size_t)xx] = acc;
				}
}

/* The direct backward of case s from dz (n x F x H x W, the gradient at
 * the pre-activation): dW, db into g (weights then biases), dx. */
static void direct_backward(const struct conv_case *s, const float *x, const float *w,
			    const double *dz, double *g, double *dx)
{
	const int p = s->k / 2, R = s->C * s->k * s->k;
	const size_t xs = (size_t)s->C * (size_t)s->H * (size_t)s->W;

	memset(g, 0, ((size_t)s->F * (size_t)R + (size_t)s->F) * sizeof *g);
	memset(dx, 0, (size_t)s->n * xs * sizeof *dx);
	for (int i = 0; i < s->n; i++)
		for (int f = 0; f < s->F; f++)
			for (int y = 0; y < s->H; y++)
				for (int xx = 0; xx < s->W; xx++) {
					double d = dz[(((size_t)i * (size_t)s->F + (size_t)f) * (size_t)s->H +
						       (size_t)y) * (size_t)s->W + (size_t)xx];

					g[(size_t)s->F * (size_t)R + (size_t)f] += d;
					for (int c = 0; c < s->C; c++)
						for (int ky = 0; ky < s->k; ky++)
							for (int kx = 0; kx < s->k; kx++) {
								int sy = y + ky - p, sx = xx + kx - p;
								int wi = ((f * s->C + c) * s->k + ky) * s->k + kx;

								if (sy < 0 || sy >= s->H || sx < 0 || sx >= s->W)
									continue;
								g[wi] += d * px(x + (size_t)i * xs, s->H, s->W, c, sy, sx);
								dx[(size_t)i * xs + ((size_t)c * (size_t)s->H + (size_t)sy) *
								   (size_t)s->W + (size_t)sx] += d * w[wi];
							}
				}
}

/* Largest |a - b| / (1 + |b|) over m entries. */
static double worst_diff(const float *a, const double *b, size_t m)
{
	double worst = 0.0;

	for (size_t i = 0; i < m; i++) {
		double d = fabs((double)a[i] - b[i]) / (1.0 + fabs(b[i]));

		if (d > worst)
			worst = d;
	}
	return worst;
}

/* Runs case s through the conv layer and the direct reference; returns
 * the worst relative difference of output, weight/bias gradients and
 * input gradient, or -1 when the layer cannot be made. */
static double conv_case_diff(const struct conv_case *s, uint64_t seed)
{
	char err[128];
	struct dlt_layer l;
	struct dlt_rng r;
	const int R = s->C * s->k * s->k, pool = s->fuse == 2 ? s->pool : 1;
	const int oh = s->H / pool, ow = s->W / pool;
	const size_t xs = (size_t)s->C * (size_t)s->H * (size_t)s->W;
	const size_t zs = (size_t)s->F * (size_t)s->H * (size_t)s->W;
	const size_t os = (size_t)s->F * (size_t)oh * (size_t)ow;
	const size_t np = (size_t)s->F * (size_t)R + (size_t)s->F;
	double worst = 0.0;

	if (dlt_layer_make(&l, DLT_LAYER_CONV, (struct dlt_shape){ s->C, s->H, s->W }, s->F,
			   s->k, 0.0f, err, sizeof err) < 0)
		return -1.0;
	if (s->fuse)
		dlt_layer_fuse(&l, pool);

	size_t nx = (size_t)s->n * xs, nz = (size_t)s->n * zs, no = (size_t)s->n * os;
	float *x = malloc(nx * sizeof *x), *p = malloc(np * sizeof *p);
	float *y = malloc(no * sizeof *y), *dy = malloc(no * sizeof *dy);
	float *dx = malloc(nx * sizeof *dx), *g = malloc(np * sizeof *g);
	float *ws = malloc((l.ops->workspace(&l, s->n) + 1) * sizeof *ws);
	double *z = malloc(nz * sizeof *z), *dz = calloc(nz, sizeof *dz);
	double *want = malloc(no * sizeof *want), *rg = malloc(np * sizeof *rg);
	double *rdx = malloc(nx * sizeof *rdx);
	struct dlt_layer_ctx ctx = { .train = 1, .ws = ws };

	l.saved = malloc(l.ops->saved_bytes(&l, s->n) + 1);
	dlt_rng_seed(&r, seed, 3, 4);
	fill(x, nx, 1.0, &r);
	fill(p, np, 0.3, &r);
	fill(dy, no, 1.0, &r);
	if (s->ties) {
		for (size_t i = 0; i < nx; i++)
			x[i] = (float)dlt_rng_below(&r, 4) - 1.0f;
		for (size_t i = 0; i < np; i++)
			p[i] = i < np - (size_t)s->F ? 1.0f : 0.0f;
	}
	l.ops->forward(&l, &ctx, p, x, y, s->n);
	l.ops->backward(&l, &ctx, p, x, y, dy, dx, g, s->n);

	/* reference: z, then ReLU and pool (first maximum wins), dz back through them */
	direct_forward(s, x, p, p + (size_t)s->F * (size_t)R, z);
	for (int i = 0; i < s->n; i++)
		for (int f = 0; f < s->F; f++) {
			const double *zp = z + ((size_t)i * (size_t)s->F + (size_t)f) * (size_t)s->H * (size_t)s->W;
			double *dp = dz + (zp - z);

			for (int oy = 0; oy < oh; oy++)
				for (int ox = 0; ox < ow; ox++) {
					size_t o = ((size_t)i * (size_t)s->F + (size_t)f) * (size_t)oh * (size_t)ow +
						   (size_t)oy * (size_t)ow + (size_t)ox;
					int best = oy * pool * s->W + ox * pool;
					double mx = zp[best];

					for (int a = 0; a < pool; a++)
						for (int c = 0; c < pool; c++) {
							int j = (oy * pool + a) * s->W + ox * pool + c;

							if (zp[j] > mx) {
								mx = zp[j];
								best = j;
							}
						}
					if (s->fuse == 0) {
						want[o] = mx;
						dp[best] = dy[o];
					} else {
						want[o] = mx > 0.0 ? mx : 0.0;
						if (mx > 0.0)
							dp[best] = dy[o];
					}
				}
		}
	direct_backward(s, x, p, dz, rg, rdx);
	double d[4] = { worst_diff(y, want, no), worst_diff(g, rg, np), worst_diff(dx, rdx, nx), 0 };

	for (int i = 0; i < 3; i++)
		if (d[i] > worst)
			worst = d[i];
	if (worst > 1e-4 && getenv("DLT_TEST_VERBOSE"))
		printf("n %d C %d %dx%d F %d k %d fuse %d pool %d: y %g g %g dx %g\n", s->n, s->C,
		       s->H, s->W, s->F, s->k, s->fuse, pool, d[0], d[1], d[2]);
	free(x);
	free(p);
	free(y);
	free(dy);
	free(dx);
	free(g);
	free(ws);
	free(z);
	free(dz);
	free(want);
	free(rg);
	free(rdx);
	free(l.saved);
	return worst;
}

TEST(conv_matches_direct_convolution)
{
	/* pool 1 in the reference is the identity: plain conv (fuse 0) and
	 * conv + ReLU (fuse 1) compare pre-pool outputs */
	static const struct conv_case cases[] = {
		{ 1, 1, 5, 5, 2, 1, 0, 1, 0 },    /* k 1: no im2col */
		{ 3, 1, 7, 6, 3, 3, 0, 1, 0 },
		{ 2, 2, 6, 6, 4, 5, 0, 1, 0 },    /* kernel almost the image */
		{ 5, 3, 5, 9, 2, 7, 0, 1, 0 },    /* kernel wider than the image */
		{ 3, 2, 8, 8, 5, 3, 1, 1, 0 },
		{ 4, 3, 7, 7, 3, 5, 1, 1, 0 },    /* odd batch, odd planes */
		{ 2, 2, 3, 4, 3, 9, 0, 1, 0 },    /* kernel radius beyond the image */
		{ 3, 3, 2, 2, 2, 7, 1, 1, 0 },
	};

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		double d = conv_case_diff(&cases[i], 10 + i);

		CHECK_MSG(d >= 0 && d < 1e-4, "case %zu: worst relative difference %g", i, d);
	}
}

TEST(conv_fused_relu_pool_matches_direct)
{
	static const struct conv_case cases[] = {
		{ 3, 2, 8, 8, 4, 3, 2, 2, 0 },
		{ 5, 1, 28, 28, 6, 5, 2, 2, 0 },  /* the first layer's shape, odd batch */
		{ 2, 3, 14, 14, 5, 5, 2, 2, 0 },  /* the second layer's shape */
		{ 3, 2, 7, 9, 3, 3, 2, 2, 0 },    /* floor: the last row/column dropped */
		{ 2, 2, 9, 9, 3, 5, 2, 3, 0 },    /* pool 3 (the generic path) */
		{ 1, 1, 6, 7, 2, 7, 2, 3, 0 },
		{ 3, 2, 5, 5, 3, 1, 2, 2, 0 },    /* k 1 */
	};

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		double d = conv_case_diff(&cases[i], 40 + i);

		CHECK_MSG(d >= 0 && d < 1e-4, "case %zu: worst relative difference %g", i, d);
	}
}

/* A CNN spec on C x S x S inputs: two convs of kernels k0 and k1, pool. */
static void cnn_spec(struct dlt_net_spec *s, int C, int S, int k0, int k1, int pool, int unfused)
{
	memset(s, 0, sizeof *s);
	s->in = (struct dlt_shape){ C, S, S };
	s->classes = 4;
	s->nconv = 2;
	s->filters[0] = 5;
	s->kernel[0] = k0;
	s->filters[1] = 6;
	s->kernel[1] = k1;
	s->pool = pool;
	s->ndense = 1;
	s->dense[0] = 7;
	s->dropout = 0.25f;
	s->unfused = unfused;
}

TEST(net_fused_and_unfused_conv_agree_bit_for_bit)
{
	static const int shapes[][5] = {   /* C, S, k0, k1, pool */
		{ 1, 12, 5, 5, 2 }, { 2, 11, 3, 7, 2 }, { 3, 9, 3, 3, 3 }, { 2, 6, 5, 3, 1 },
	};
	enum { N = 5 };

	for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
		const int *sh = shapes[c];
		struct dlt_net_spec sf, su;
		struct dlt_net nf, nu;
		char err[128];
		struct dlt_rng r;

		cnn_spec(&sf, sh[0], sh[1], sh[2], sh[3], sh[4], 0);
		cnn_spec(&su, sh[0], sh[1], sh[2], sh[3], sh[4], 1);
		CHECK_MSG(dlt_net_create(&nf, &sf, N, 1, 0, err, sizeof err) == 0, "%s", err);
		CHECK_MSG(dlt_net_create(&nu, &su, N, 1, 0, err, sizeof err) == 0, "%s", err);
		CHECK(nf.nparams == nu.nparams && nf.nlayers == nu.nlayers);
		CHECK(nf.layer[0].fused == (sh[4] > 1 ? 2 : 1) && nu.layer[0].fused == 0);

		size_t dim = (size_t)sh[0] * (size_t)sh[1] * (size_t)sh[1];
		float *p = malloc(nf.nparams * sizeof *p), *x = malloc(N * dim * sizeof *x);
		float *gf = malloc(nf.nparams * sizeof *gf), *gu = malloc(nf.nparams * sizeof *gu);
		uint8_t y[N];
		double lf = 0, lu = 0;
		long hf = 0, hu = 0;

		dlt_net_init_params(&nf, p, 5);
		dlt_rng_seed(&r, 6, 0, (uint64_t)c);
		for (size_t i = 0; i < nf.nparams; i++)   /* nonzero biases too */
			p[i] += (float)(0.05 * dlt_rng_normal(&r));
		fill(x, N * dim, 1.0, &r);
		for (int i = 0; i < N; i++)
			y[i] = (uint8_t)dlt_rng_below(&r, 4);
		dlt_net_train_batch(&nf, p, x, y, N, 1.0f, 3, gf, &lf, &hf);
		dlt_net_train_batch(&nu, p, x, y, N, 1.0f, 3, gu, &lu, &hu);
		CHECK_MSG(lf == lu && hf == hu, "shape %zu: loss %.9g vs %.9g", c, lf, lu);
		CHECK_MSG(memcmp(gf, gu, nf.nparams * sizeof *gf) == 0, "shape %zu: gradients differ", c);
		free(p);
		free(x);
		free(gf);
		free(gu);
		dlt_net_destroy(&nf);
		dlt_net_destroy(&nu);
	}
}

TEST(conv_pool_ties_go_to_the_first_maximum)
{
	static const struct conv_case cases[] = {
		{ 3, 1, 8, 8, 1, 1, 2, 2, 1 }, { 2, 1, 9, 9, 1, 1, 2, 3, 1 },
		{ 2, 1, 6, 6, 1, 1, 0, 1, 1 },
	};

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		double d = conv_case_diff(&cases[i], 70 + i);

		CHECK_MSG(d >= 0 && d < 1e-5, "case %zu: worst relative difference %g", i, d);
	}
}

/* A dense layer of over DLT_DENSE_BIG weights (1100 -> 1000, not the
 * first, so it computes dX) takes the blocked dW and, at 32 rows or fewer,
 * the transposed dX: its gradients match the reference MLP's. */
TEST(big_dense_layer_matches_reference_mlp)
{
	enum { IN = 40, C = 5, MAXN = 40 };
	const int hidden[2] = { 1100, 1000 }, rows[2] = { 20, 40 };
	char err[128];
	struct dlt_mlp m;
	struct dlt_net n;
	struct dlt_net_spec s;
	struct dlt_rng r;

	memset(&s, 0, sizeof s);
	s.in = (struct dlt_shape){ 1, 1, IN };
	s.classes = C;
	s.pool = 1;
	s.ndense = 2;
	memcpy(s.dense, hidden, sizeof hidden);
	CHECK(dlt_mlp_create(&m, IN, hidden, 2, C, MAXN, err, sizeof err) == 0);
	CHECK_MSG(dlt_net_create(&n, &s, MAXN, 1, 0, err, sizeof err) == 0, "%s", err);

	float *p = malloc(n.nparams * sizeof *p), *g1 = malloc(n.nparams * sizeof *g1);
	float *g2 = malloc(n.nparams * sizeof *g2), x[MAXN * IN];
	uint8_t y[MAXN];

	dlt_mlp_init_params(&m, p, 9);
	dlt_rng_seed(&r, 12, 0, 0);
	fill(x, MAXN * IN, 1.0, &r);
	for (int i = 0; i < MAXN; i++)
		y[i] = (uint8_t)dlt_rng_below(&r, C);
	for (int t = 0; t < 2; t++) {
		double l1 = 0, l2 = 0, worst = 0;
		long h1 = 0, h2 = 0;

		dlt_mlp_train_batch(&m, p, x, y, rows[t], 1.0f, g1, &l1, &h1);
		dlt_net_train_batch(&n, p, x, y, rows[t], 1.0f, 1, g2, &l2, &h2);
		for (size_t i = 0; i < n.nparams; i++) {
			double d = fabs((double)g1[i] - g2[i]) / (1e-3 + fabs((double)g1[i]));

			if (d > worst)
				worst = d;
		}
		CHECK_MSG(fabs(l1 - l2) < 1e-4 * fabs(l1) && h1 == h2, "%d rows: loss %g vs %g",
			  rows[t], l1, l2);
		CHECK_MSG(worst < 1e-3, "%d rows: gradients differ by %g", rows[t], worst);
	}
	free(p);
	free(g1);
	free(g2);
	dlt_mlp_destroy(&m);
	dlt_net_destroy(&n);
}

int main(void)
{
	RUN(conv_matches_direct_convolution);
	RUN(conv_fused_relu_pool_matches_direct);
	RUN(conv_pool_ties_go_to_the_first_maximum);
	RUN(net_fused_and_unfused_conv_agree_bit_for_bit);
	RUN(big_dense_layer_matches_reference_mlp);
	return CHECK_EXIT();
}
