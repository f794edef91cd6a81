/* layers.c - the per-layer interface and the CPU layers: dense, ReLU, conv2d, max-pool, dropout */
#include "engine/train/layers.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Elementwise loops run their first n - n % DLT_LAYER_BLOCK iterations in
 * a loop GCC -O2 vectorizes (no scalar epilogue needed), then the rest. */
#define DLT_LAYER_BLOCK 8            /* a power of two */
#define DLT_DROPOUT_BITS 24          /* random bits per keep decision */

/* ---- shared helpers ---- */

/* sum[j] += row[j] for j < w. */
static void add_row(float *restrict sum, const float *restrict row, int w)
{
	int wb = w & ~(DLT_LAYER_BLOCK - 1), j;

	for (j = 0; j < wb; j++)
		sum[j] += row[j];
	for (; j < w; j++)
		sum[j] += row[j];
}

/* Returns the sum of row[0..w). */
static float row_sum(const float *row, size_t w)
{
	float s = 0.0f;

	for (size_t j = 0; j < w; j++)
		s += row[j];
	return s;
}

/* He-normal: n weights ~ N(0, 2 / fan_in) from r. */
static void he_fill(float *w, size_t n, int fan_in, struct dlt_rng *r)
{
	double sd = sqrt(2.0 / fan_in);

	for (size_t i = 0; i < n; i++)
		w[i] = (float)(sd * dlt_rng_normal(r));
}

/* ops->workspace / ops->saved_bytes of a layer that needs none: 0. */
static size_t none_size(const struct dlt_layer *l, int max_batch)
{
	(void)l;
	(void)max_batch;
	return 0;
}

/* ops->param_count of a layer without parameters: 0. */
static size_t no_params(const struct dlt_layer *l)
{
	(void)l;
	return 0;
}

/* ops->init of a layer without parameters: nothing. */
static void no_init(const struct dlt_layer *l, float *p, struct dlt_rng *r)
{
	(void)l;
	(void)p;
	(void)r;
}

/* ---- dense: W [out x in] row-major, then b [out] ---- */

static size_t dense_params(const struct dlt_layer *l)
{
	size_t k = dlt_shape_size(l->in), o = (size_t)l->out.c;

	return o * k + o;
}

/* Dense: He-normal weights (fan-in = inputs), zero biases. */
static void dense_init(const struct dlt_layer *l, float *p, struct dlt_rng *r)
{
	size_t k = dlt_shape_size(l->in), o = (size_t)l->out.c;

	he_fill(p, o * k, (int)k, r);
	memset(p + o * k, 0, o * sizeof *p);
}

/* Dense: y = x W^T + b, one GEMM for the n rows. */
static void dense_forward(struct dlt_layer *l, const struct dlt_layer_ctx *c,
			  const float *p, const float *x, float *y, int n)
{
	int k = (int)dlt_shape_size(l->in), o = l->out.c;
	const float *b = p + (size_t)o * (size_t)k;

	(void)c;
	/* y = x (n x k) . W^T (k x o) */
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, o, k,
		    1.0f, x, k, p, k, 0.0f, y, o);
	for (int i = 0; i < n; i++)
		add_row(y + (size_t)i * (size_t)o, b, o);
}

/* Dense: dW = dY^T X, db = column sums of dY, dX = dY W (when dx). */
static void dense_backward(struct dlt_layer *l, const struct dlt_layer_ctx *c,
			   const float *p, const float *x, const float *y,
			   const float *dy, float *dx, float *g, int n)
{
	int k = (int)dlt_shape_size(l->in), o = l->out.c;
	float *gb = g + (size_t)o * (size_t)k;

	(void)c;
	(void)y;
	/* dW = dY^T (o x n) . X (n x k) */
	cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, o, k, n,
		    1.0f, dy, o, x, k, 0.0f, g, k);
	memset(gb, 0, (size_t)o * sizeof *gb);
	for (int i = 0; i < n; i++)
		add_row(gb, dy + (size_t)i * (size_t)o, o);
	/* dX = dY (n x o) . W (o x k) */
	if (dx)
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, k, o,
			    1.0f, dy, o, p, k, 0.0f, dx, k);
}

static const struct dlt_layer_ops dense_ops = {
	.name = "dense", .param_count = dense_params, .workspace = none_size,
	.saved_bytes = none_size, .init = dense_init, .forward = dense_forward,
	.backward = dense_backward,
};

/* ---- ReLU ---- */

static void relu_forward(struct dlt_layer *l, const struct dlt_layer_ctx *c,
			 const float *p, const float *restrict x, float *restrict y, int n)
{
	size_t m = (size_t)n * dlt_shape_size(l->in);
	size_t mb = m & ~(size_t)(DLT_LAYER_BLOCK - 1), i;

	(void)c;
	(void)p;
	for (i = 0; i < mb; i++)
		y[i] = x[i] > 0.0f ? x[i] : 0.0f;
	for (; i < m; i++)
		y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

/* ReLU: dx = dy where y > 0, else 0. */
static void relu_backward(struct dlt_layer *l, const struct dlt_layer_ctx *c,
			  const float *p, const float *x, const float *restrict y,
			  const float *restrict dy, float *restrict dx, float *g, int n)
{
	size_t m = (size_t)n * dlt_shape_size(l->in);
	size_t mb = m & ~(size_t)(DLT_LAYER_BLOCK - 1), i;

	(void)c;
	(void)p;
	(void)x;
	(void)g;
	if (!dx)
		return;
	for (i = 0; i < mb; i++)
		dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
	for (; i < m; i++)
		dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

static const struct dlt_layer_ops relu_ops = {
	.name = "relu", .param_count = no_params, .workspace = none_size,
	.saved_bytes = none_size, .init = no_init, .forward = relu_forward,
	.backward = relu_backward,
};

/* ---- conv2d: W [F x C x k x k], then b [F]; im2col + one GEMM per batch ----
 *
 * col is R x N row-major with R = C k k (one row per input channel and
 * kernel tap) and N = n H W (one column per output pixel of the batch). The
 * forward GEMM W (F x R) . col gives F x N, scattered into NCHW. col is
 * kept in l->saved for dW and then reused as dcol for the input gradient. */

static size_t conv_params(const struct dlt_layer *l)
{
	size_t r = (size_t)l->in.c * (size_t)l->k * (size_t)l->k;

	return (size_t)l->out.c * r + (size_t)l->out.c;
}

/* Conv: the F x N GEMM output (forward) / dY in F x N order (backward). */
static size_t conv_workspace(const struct dlt_layer *l, int max_batch)
{
	return (size_t)l->out.c * (size_t)max_batch * (size_t)l->in.h * (size_t)l->in.w;
}

/* Conv: the R x N im2col matrix of the batch. */
static size_t conv_saved(const struct dlt_layer *l, int max_batch)
{
	size_t r = (size_t)l->in.c * (size_t)l->k * (size_t)l->k;

	return r * (size_t)max_batch * (size_t)l->in.h * (size_t)l->in.w * sizeof(float);
}

/* Conv: He-normal weights (fan-in = C k k), zero biases. */
static void conv_init(const struct dlt_layer *l, float *p, struct dlt_rng *r)
{
	size_t fan = (size_t)l->in.c * (size_t)l->k * (size_t)l->k;

	he_fill(p, (size_t)l->out.c * fan, (int)fan, r);
	memset(p + (size_t)l->out.c * fan, 0, (size_t)l->out.c * sizeof *p);
}

/* Column range [*x0, *x1) of an output row whose tap kx reads inside the
 * image (width w, padding pad). */
static void tap_range(int kx, int pad, int w, int *x0, int *x1)
{
	*x0 = pad - kx > 0 ? pad - kx : 0;
	*x1 = w + pad - kx < w ? w + pad - kx : w;
}

/* Fills col (R x N, see above) from the n images x with 'same' zero padding. */
static void im2col(const struct dlt_layer *l, const float *x, float *col, int n)
{
	const int C = l->in.c, H = l->in.h, W = l->in.w, k = l->k, pad = k / 2;
	const size_t hw = (size_t)H * (size_t)W, N = (size_t)n * hw;

	for (int c = 0; c < C; c++)
		for (int ky = 0; ky < k; ky++)
			for (int kx = 0; kx < k; kx++) {
				float *row = col + ((size_t)(c * k + ky) * (size_t)k + (size_t)kx) * N;
				int x0, x1;

				tap_range(kx, pad, W, &x0, &x1);
				for (int i = 0; i < n; i++) {
					const float *img = x + ((size_t)i * (size_t)C + (size_t)c) * hw;

					for (int y = 0; y < H; y++) {
						float *d = row + (size_t)i * hw + (size_t)y * (size_t)W;
						int sy = y + ky - pad;

						if (sy < 0 || sy >= H || x1 <= x0) {
							memset(d, 0, (size_t)W * sizeof *d);
							continue;
						}
						memset(d, 0, (size_t)x0 * sizeof *d);
						memcpy(d + x0, img + (size_t)sy * (size_t)W + (size_t)(x0 + kx - pad),
						       (size_t)(x1 - x0) * sizeof *d);
						memset(d + x1, 0, (size_t)(W - x1) * sizeof *d);
					}
				}
			}
}

/* dx (n x C x H x W) = the sum of every col entry into the pixel it came from. */
static void col2im(const struct dlt_layer *l, const float *col, float *dx, int n)
{
	const int C = l->in.c, H = l->in.h, W = l->in.w, k = l->k, pad = k / 2;
	const size_t hw = (size_t)H * (size_t)W, N = (size_t)n * hw;

	memset(dx, 0, (size_t)n * (size_t)C * hw * sizeof *dx);
	for (int c = 0; c < C; c++)
		for (int ky = 0; ky < k; ky++)
			for (int kx = 0; kx < k; kx++) {
				const float *row = col + ((size_t)(c * k + ky) * (size_t)k + (size_t)kx) * N;
				int x0, x1;

				tap_range(kx, pad, W, &x0, &x1);
				for (int i = 0; i < n; i++) {
					float *img = dx + ((size_t)i * (size_t)C + (size_t)c) * hw;

					for (int y = 0; y < H; y++) {
						int sy = y + ky - pad;

						if (sy < 0 || sy >= H || x1 <= x0)
							continue;
						const float *s = row + (size_t)i * hw + (size_t)y * (size_t)W;
						float *d = img + (size_t)sy * (size_t)W + (size_t)(kx - pad);

						for (int xx = x0; xx < x1; xx++)
							d[xx] += s[xx];
					}
				}
			}
}

/* Conv: im2col, one GEMM W . col for the batch, scatter to NCHW plus bias. */
static void conv_forward(struct dlt_layer *l, const struct dlt_layer_ctx *c,
			 const float *p, const float *x, float *y, int n)
{
	const int F = l->out.c, R = l->in.c * l->k * l->k;
	const size_t hw = (size_t)l->in.h * (size_t)l->in.w, N = (size_t)n * hw;
	const float *b = p + (size_t)F * (size_t)R;
	float *col = l->saved, *t = c->ws;

	im2col(l, x, col, n);
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, F, (int)N, R,
		    1.0f, p, R, col, (int)N, 0.0f, t, (int)N);
	for (int i = 0; i < n; i++)
		for (int f = 0; f < F; f++) {
			const float *s = t + (size_t)f * N + (size_t)i * hw;
			float *d = y + ((size_t)i * (size_t)F + (size_t)f) * hw, bf = b[f];

			for (size_t j = 0; j < hw; j++)
				d[j] = s[j] + bf;
		}
}

/* Conv: dY to F x N, dW = dT col^T, db = row sums, dcol = W^T dT, col2im. */
static void conv_backward(struct dlt_layer *l, const struct dlt_layer_ctx *c,
			  const float *p, const float *x, const float *y,
			  const float *dy, float *dx, float *g, int n)
{
	const int F = l->out.c, R = l->in.c * l->k * l->k;
	const size_t hw = (size_t)l->in.h * (size_t)l->in.w, N = (size_t)n * hw;
	float *col = l->saved, *t = c->ws, *gb = g + (size_t)F * (size_t)R;

	(void)x;
	(void)y;
	for (int i = 0; i < n; i++)   /* NCHW dY -> F x N */
		for (int f = 0; f < F; f++)
			memcpy(t + (size_t)f * N + (size_t)i * hw,
			       dy + ((size_t)i * (size_t)F + (size_t)f) * hw, hw * sizeof *t);
	/* dW = dT (F x N) . col^T (N x R) */
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, F, R, (int)N,
		    1.0f, t, (int)N, col, (int)N, 0.0f, g, R);
	for (int f = 0; f < F; f++)
		gb[f] = row_sum(t + (size_t)f * N, N);
	if (!dx)
		return;
	/* dcol = W^T (R x F) . dT (F x N), into col (no longer needed) */
	cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, R, (int)N, F,
		    1.0f, p, R, t, (int)N, 0.0f, col, (int)N);
	col2im(l, col, dx, n);
}

static const struct dlt_layer_ops conv_ops = {
	.name = "conv", .param_count = conv_params, .workspace = conv_workspace,
	.saved_bytes = conv_saved, .init = conv_init, .forward = conv_forward,
	.backward = conv_backward,
};

/* ---- max-pool k x k stride k; saved: int32 argmax (index in the input plane) ---- */

static size_t pool_saved(const struct dlt_layer *l, int max_batch)
{
	return (size_t)max_batch * dlt_shape_size(l->out) * sizeof(int32_t);
}

/* Pool: max of each k x k window (first maximum wins), argmax kept. */
static void pool_forward(struct dlt_layer *l, const struct dlt_layer_ctx *c,
			 const float *p, const float *x, float *y, int n)
{
	const int k = l->k, H = l->in.h, W = l->in.w, oh = l->out.h, ow = l->out.w;
	const size_t planes = (size_t)n * (size_t)l->in.c;
	int32_t *arg = l->saved;

	(void)c;
	(void)p;
	for (size_t q = 0; q < planes; q++) {
		const float *in = x + q * (size_t)H * (size_t)W;
		float *out = y + q * (size_t)oh * (size_t)ow;
		int32_t *a = arg + q * (size_t)oh * (size_t)ow;

		for (int oy = 0; oy < oh; oy++)
			for (int ox = 0; ox < ow; ox++) {
				int best = oy * k * W + ox * k;
				float mx = in[best];

				for (int dy = 0; dy < k; dy++)
					for (int dx = 0; dx < k; dx++) {
						int j = (oy * k + dy) * W + ox * k + dx;

						if (in[j] > mx) {
							mx = in[j];
							best = j;
						}
					}
				out[oy * ow + ox] = mx;
				a[oy * ow + ox] = best;
			}
	}
}

/* Pool: dx = dy at each window's argmax, 0 elsewhere. */
static void pool_backward(struct dlt_layer *l, const struct dlt_layer_ctx *c,
			  const float *p, const float *x, const float *y,
			  const float *dy, float *dx, float *g, int n)
{
	const size_t ip = (size_t)l->in.h * (size_t)l->in.w;
	const size_t op = (size_t)l->out.h * (size_t)l->out.w;
	const size_t planes = (size_t)n * (size_t)l->in.c;
	const int32_t *arg = l->saved;

	(void)c;
	(void)p;
	(void)x;
	(void)y;
	(void)g;
	if (!dx)
		return;
	memset(dx, 0, planes * ip * sizeof *dx);
	for (size_t q = 0; q < planes; q++)
		for (size_t j = 0; j < op; j++)
			dx[q * ip + (size_t)arg[q * op + j]] = dy[q * op + j];
}

static const struct dlt_layer_ops pool_ops = {
	.name = "maxpool", .param_count = no_params, .workspace = none_size,
	.saved_bytes = pool_saved, .init = no_init, .forward = pool_forward,
	.backward = pool_backward,
};

/* ---- dropout: keep with probability 1 - p, kept values scaled by 1 / (1 - p) ---- */

/* The splitmix64 finalizer: a bijective 64-bit mix. */
static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* The key of a (seed, step, rank, layer) mask. */
static uint64_t mask_key(uint64_t seed, uint64_t step, int rank, int layer)
{
	uint64_t k = mix64(seed + 0x9e3779b97f4a7c15ULL);

	k = mix64(k ^ step);
	k = mix64(k ^ ((uint64_t)(uint32_t)rank << 32 | (uint32_t)layer));
	return k;
}

/* Drop threshold: an element is dropped when its DLT_DROPOUT_BITS random
 * bits are below it. */
static uint64_t drop_threshold(float p)
{
	return (uint64_t)((double)p * (double)(1u << DLT_DROPOUT_BITS));
}

/* 1 when element i of the mask keyed by key is kept (threshold thr). */
static int keep_bit(uint64_t key, uint64_t i, uint64_t thr)
{
	return (mix64(key + i * 0x9e3779b97f4a7c15ULL) >> (64 - DLT_DROPOUT_BITS)) >= thr;
}

int dlt_dropout_keep(uint64_t seed, uint64_t step, int rank, int layer,
		     uint64_t i, float p)
{
	return keep_bit(mask_key(seed, step, rank, layer), i, drop_threshold(p));
}

/* Dropout: y = x / (1 - p) where kept, else 0; identity in inference. */
static void dropout_forward(struct dlt_layer *l, const struct dlt_layer_ctx *c,
			    const float *p, const float *x, float *y, int n)
{
	size_t m = (size_t)n * dlt_shape_size(l->in);
	uint64_t key, thr = drop_threshold(l->p);
	float scale = 1.0f / (1.0f - l->p);

	(void)p;
	if (!c->train || l->p <= 0.0f) {
		memcpy(y, x, m * sizeof *y);
		return;
	}
	key = mask_key(c->seed, c->step, c->rank, l->index);
	for (size_t i = 0; i < m; i++)
		y[i] = keep_bit(key, i, thr) ? x[i] * scale : 0.0f;
}

/* Dropout: dx = dy / (1 - p) where kept (the same mask), else 0. */
static void dropout_backward(struct dlt_layer *l, const struct dlt_layer_ctx *c,
			     const float *p, const float *x, const float *y,
			     const float *dy, float *dx, float *g, int n)
{
	size_t m = (size_t)n * dlt_shape_size(l->in);
	uint64_t key, thr = drop_threshold(l->p);
	float scale = 1.0f / (1.0f - l->p);

	(void)p;
	(void)x;
	(void)y;
	(void)g;
	if (!dx)
		return;
	if (!c->train || l->p <= 0.0f) {
		memcpy(dx, dy, m * sizeof *dx);
		return;
	}
	key = mask_key(c->seed, c->step, c->rank, l->index);
	for (size_t i = 0; i < m; i++)
		dx[i] = keep_bit(key, i, thr) ? dy[i] * scale : 0.0f;
}

static const struct dlt_layer_ops dropout_ops = {
	.name = "dropout", .param_count = no_params, .workspace = none_size,
	.saved_bytes = none_size, .init = no_init, .forward = dropout_forward,
	.backward = dropout_backward,
};

/* ---- construction ---- */

int dlt_layer_make(struct dlt_layer *l, enum dlt_layer_kind kind,
		   struct dlt_shape in, int units, int k, float p,
		   char *err, size_t errlen)
{
	memset(l, 0, sizeof *l);
	l->kind = kind;
	l->in = in;
	l->out = in;
	switch (kind) {
	case DLT_LAYER_DENSE:
		l->ops = &dense_ops;
		l->out = (struct dlt_shape){ units, 1, 1 };
		if (units < 1) {
			snprintf(err, errlen, "dense layer of %d units", units);
			return -EINVAL;
		}
		break;
	case DLT_LAYER_RELU:
		l->ops = &relu_ops;
		break;
	case DLT_LAYER_CONV:
		l->ops = &conv_ops;
		l->k = k;
		l->out.c = units;
		if (k < 1 || k > DLT_LAYER_MAX_KERNEL || k % 2 == 0) {
			snprintf(err, errlen, "conv kernel %d (must be odd, 1..%d)", k,
				 DLT_LAYER_MAX_KERNEL);
			return -EINVAL;
		}
		if (units < 1 || units > DLT_LAYER_MAX_CHANNELS) {
			snprintf(err, errlen, "conv layer of %d filters (must be 1..%d)", units,
				 DLT_LAYER_MAX_CHANNELS);
			return -EINVAL;
		}
		break;
	case DLT_LAYER_POOL:
		l->ops = &pool_ops;
		l->k = k;
		if (k < 1 || k > in.h || k > in.w) {
			snprintf(err, errlen, "pool size %d on a %dx%d input", k, in.h, in.w);
			return -EINVAL;
		}
		l->out.h = in.h / k;
		l->out.w = in.w / k;
		break;
	case DLT_LAYER_DROPOUT:
		l->ops = &dropout_ops;
		l->p = p;
		if (!(p >= 0.0f && p < 1.0f)) {
			snprintf(err, errlen, "dropout probability %g (must be in [0, 1))", (double)p);
			return -EINVAL;
		}
		break;
	default:
		snprintf(err, errlen, "unknown layer kind %d", (int)kind);
		return -EINVAL;
	}
	l->nparams = l->ops->param_count(l);
	return 0;
}

/* Softmax cross-entropy of row z (c logits) against label y: returns the
 * loss, sets *hit when the argmax is y, and when d is not NULL writes
 * scale * (softmax - onehot) into d. */
float dlt_softmax_xent(const float *restrict z, int c, int y, float scale,
			  float *restrict d, int *hit)
{
	float mx = z[0], sum = 0.0f;
	int arg = 0;

	for (int j = 1; j < c; j++)
		if (z[j] > mx) {
			mx = z[j];
			arg = j;
		}
	for (int j = 0; j < c; j++)
		sum += expf(z[j] - mx);
	*hit = arg == y;
	if (d) {
		float inv = scale / sum;

		for (int j = 0; j < c; j++)
			d[j] = expf(z[j] - mx) * inv;
		d[y] -= scale;
	}
	return logf(sum) - (z[y] - mx);
}
