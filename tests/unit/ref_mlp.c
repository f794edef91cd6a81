/* ref_mlp.c - the tests' oracle: a plain multilayer perceptron (see ref_mlp.h) */
#include "tests/unit/ref_mlp.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/train/layers.h"
#include "engine/train/rng.h"

int dlt_mlp_create(struct dlt_mlp *m, int inputs, const int *hidden,
		   int nhidden, int classes, int max_batch,
		   char *err, size_t errlen)
{
	size_t off = 0;
	int widest = 0;

	memset(m, 0, sizeof *m);
	if (nhidden < 0 || nhidden > DLT_MLP_MAX_HIDDEN) {
		snprintf(err, errlen, "%d hidden layers (at most %d)", nhidden, DLT_MLP_MAX_HIDDEN);
		return -EINVAL;
	}
	if (classes < 2 || classes > DLT_MLP_MAX_CLASSES) {
		snprintf(err, errlen, "%d classes (must be 2..%d)", classes, DLT_MLP_MAX_CLASSES);
		return -EINVAL;
	}
	if (max_batch < 1) {
		snprintf(err, errlen, "batch of %d rows (must be >= 1)", max_batch);
		return -EINVAL;
	}
	m->nlayers = nhidden + 1;
	m->width[0] = inputs;
	for (int l = 1; l <= nhidden; l++)
		m->width[l] = hidden[l - 1];
	m->width[m->nlayers] = classes;
	for (int l = 0; l <= m->nlayers; l++) {
		if (m->width[l] < 1 || m->width[l] > DLT_MLP_MAX_WIDTH) {
			snprintf(err, errlen, "layer width %d (must be 1..%d)",
				 m->width[l], DLT_MLP_MAX_WIDTH);
			return -EINVAL;
		}
		if (m->width[l] > widest)
			widest = m->width[l];
	}
	for (int l = 1; l <= m->nlayers; l++) {
		m->w_off[l] = off;
		off += (size_t)m->width[l] * (size_t)m->width[l - 1];
		m->b_off[l] = off;
		off += (size_t)m->width[l];
	}
	m->nparams = off;
	m->max_batch = max_batch;
	for (int l = 1; l <= m->nlayers; l++) {
		m->act[l] = malloc((size_t)max_batch * (size_t)m->width[l] * sizeof(float));
		if (!m->act[l])
			goto nomem;
	}
	for (int i = 0; i < 2; i++) {
		m->delta[i] = malloc((size_t)max_batch * (size_t)widest * sizeof(float));
		if (!m->delta[i])
			goto nomem;
	}
	return 0;
nomem:
	dlt_mlp_destroy(m);
	snprintf(err, errlen, "cannot allocate the workspace for a batch of %d", max_batch);
	return -ENOMEM;
}

void dlt_mlp_destroy(struct dlt_mlp *m)
{
	for (int l = 0; l < DLT_MLP_MAX_HIDDEN + 2; l++)
		free(m->act[l]);
	free(m->delta[0]);
	free(m->delta[1]);
	memset(m, 0, sizeof *m);
}

void dlt_mlp_init_params(const struct dlt_mlp *m, float *params, uint64_t seed)
{
	struct dlt_rng r;

	dlt_rng_seed(&r, seed, DLT_RNG_STREAM_INIT, 0);
	for (int l = 1; l <= m->nlayers; l++) {
		size_t nw = (size_t)m->width[l] * (size_t)m->width[l - 1];
		double sd = sqrt(2.0 / m->width[l - 1]);
		float *w = params + m->w_off[l];

		for (size_t i = 0; i < nw; i++)
			w[i] = (float)(sd * dlt_rng_normal(&r));
		memset(params + m->b_off[l], 0, (size_t)m->width[l] * sizeof(float));
	}
}

/* Elementwise loops run their first n - n % DLT_MLP_BLOCK iterations in a
 * loop GCC -O2 vectorizes (no scalar epilogue needed), then the rest. */
#define DLT_MLP_BLOCK 8   /* a power of two */

/* row[j] = max(row[j] + b[j], 0) for j < w. */
static void bias_relu_row(float *restrict row, const float *restrict b, int w)
{
	int wb = w & ~(DLT_MLP_BLOCK - 1), j;

	for (j = 0; j < wb; j++) {
		float v = row[j] + b[j];

		row[j] = v > 0.0f ? v : 0.0f;
	}
	for (; j < w; j++) {
		float v = row[j] + b[j];

		row[j] = v > 0.0f ? v : 0.0f;
	}
}

/* sum[j] += row[j] for j < w. */
static void add_row(float *restrict sum, const float *restrict row, int w)
{
	int wb = w & ~(DLT_MLP_BLOCK - 1), j;

	for (j = 0; j < wb; j++)
		sum[j] += row[j];
	for (; j < w; j++)
		sum[j] += row[j];
}

/* d[i] = 0 where a[i] <= 0 (ReLU'), for i < n. */
static void relu_mask(float *restrict d, const float *restrict a, size_t n)
{
	size_t nb = n & ~(size_t)(DLT_MLP_BLOCK - 1), i;

	for (i = 0; i < nb; i++)
		d[i] = a[i] > 0.0f ? d[i] : 0.0f;
	for (; i < n; i++)
		d[i] = a[i] > 0.0f ? d[i] : 0.0f;
}

/* Adds bias b to every row of z (n x w), then ReLU when relu is set. */
static void bias_act(float *z, const float *b, int n, int w, int relu)
{
	for (int i = 0; i < n; i++) {
		float *row = z + (size_t)i * w;

		if (relu)
			bias_relu_row(row, b, w);
		else
			add_row(row, b, w);
	}
}

void dlt_mlp_forward(struct dlt_mlp *m, const float *params, const float *x, int n)
{
	const float *in = x;

	for (int l = 1; l <= m->nlayers; l++) {
		int k = m->width[l - 1], o = m->width[l];

		/* act[l] = in (n x k) . W_l^T (k x o) */
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, o, k,
			    1.0f, in, k, params + m->w_off[l], k, 0.0f, m->act[l], o);
		bias_act(m->act[l], params + m->b_off[l], n, o, l < m->nlayers);
		in = m->act[l];
	}
}

void dlt_mlp_eval_batch(struct dlt_mlp *m, const float *params,
			const float *x, const uint8_t *y, int n,
			double *loss_sum, long *correct)
{
	int c = m->width[m->nlayers];
	const float *z = m->act[m->nlayers];
	double loss = 0.0;
	long hits = 0;

	dlt_mlp_forward(m, params, x, n);
	for (int i = 0; i < n; i++) {
		int hit;

		loss += dlt_softmax_xent(z + (size_t)i * c, c, y[i], 0.0f, NULL, &hit);
		hits += hit;
	}
	*loss_sum += loss;
	*correct += hits;
}

void dlt_mlp_train_batch(struct dlt_mlp *m, const float *params,
			 const float *x, const uint8_t *y, int n, float weight,
			 float *grads, double *loss_sum, long *correct)
{
	int L = m->nlayers, c = m->width[L];
	const float *z = m->act[L];
	float scale = weight / (float)n;   /* d(weight * mean loss) / d(loss_i) */
	float *d = m->delta[0];
	double loss = 0.0;
	long hits = 0;
	int cur = 0;

	dlt_mlp_forward(m, params, x, n);
	for (int i = 0; i < n; i++) {
		int hit;

		loss += dlt_softmax_xent(z + (size_t)i * c, c, y[i], scale,
				     d + (size_t)i * c, &hit);
		hits += hit;
	}
	*loss_sum += loss;
	*correct += hits;

	for (int l = L; l >= 1; l--) {
		int k = m->width[l - 1], o = m->width[l];
		const float *in = l > 1 ? m->act[l - 1] : x;
		const float *dz = m->delta[cur];
		float *gb = grads + m->b_off[l];

		/* dW_l = dZ^T (o x n) . in (n x k) */
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, o, k, n,
			    1.0f, dz, o, in, k, 0.0f, grads + m->w_off[l], k);
		/* db_l = column sums of dZ */
		memset(gb, 0, (size_t)o * sizeof *gb);
		for (int i = 0; i < n; i++)
			add_row(gb, dz + (size_t)i * o, o);
		if (l == 1)
			break;
		/* dA_{l-1} = dZ (n x o) . W_l (o x k), masked by ReLU' */
		float *da = m->delta[!cur];

		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, k, o,
			    1.0f, dz, o, params + m->w_off[l], k, 0.0f, da, k);
		relu_mask(da, m->act[l - 1], (size_t)n * (size_t)k);
		cur = !cur;
	}
}
