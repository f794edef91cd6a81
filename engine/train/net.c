/* net.c - a layer stack (MLP or CNN) over one parameter array: build, init, forward, backward */
#include "engine/train/net.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/train/rng.h"

/* Returns the monotonic clock in seconds. */
static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Returns the first layer of the fused group whose last layer is last
 * (last itself when it is not fused into an earlier one). */
static int group_head(const struct dlt_net *n, int last)
{
	for (int h = last - 1; h >= 0 && h >= last - 2; h--)
		if (h + n->layer[h].fused == last)
			return h;
	return last;
}

/* Appends a layer of kind to n. Returns 0, or -EINVAL with a message. */
static int push(struct dlt_net *n, enum dlt_layer_kind kind, int units, int k,
		float p, char *err, size_t errlen)
{
	struct dlt_shape in = n->nlayers ? n->layer[n->nlayers - 1].out : n->in;
	struct dlt_layer *l;
	int rc;

	if (n->nlayers == DLT_NET_MAX_LAYERS) {
		snprintf(err, errlen, "more than %d layers", DLT_NET_MAX_LAYERS);
		return -EINVAL;
	}
	l = &n->layer[n->nlayers];
	rc = dlt_layer_make(l, kind, in, units, k, p, err, errlen);
	if (rc < 0)
		return rc;
	l->index = n->nlayers++;
	l->off = n->nparams;
	n->nparams += l->nparams;
	return 0;
}

/* Lays out the layers of spec into n. Returns 0, or -EINVAL with a message. */
static int build(struct dlt_net *n, const struct dlt_net_spec *s, char *err, size_t errlen)
{
	if (s->in.c < 1 || s->in.h < 1 || s->in.w < 1 ||
	    dlt_shape_size(s->in) > (size_t)DLT_NET_MAX_WIDTH * 16) {
		snprintf(err, errlen, "input shape %dx%dx%d out of range", s->in.c, s->in.h, s->in.w);
		return -EINVAL;
	}
	if (s->classes < 2 || s->classes > DLT_NET_MAX_CLASSES) {
		snprintf(err, errlen, "%d classes (must be 2..%d)", s->classes, DLT_NET_MAX_CLASSES);
		return -EINVAL;
	}
	if (s->nconv < 0 || s->nconv > DLT_NET_MAX_CONV || s->ndense < 0 ||
	    s->ndense > DLT_NET_MAX_DENSE) {
		snprintf(err, errlen, "%d conv and %d dense layers (at most %d and %d)",
			 s->nconv, s->ndense, DLT_NET_MAX_CONV, DLT_NET_MAX_DENSE);
		return -EINVAL;
	}
	n->in = s->in;
	n->classes = s->classes;
	for (int i = 0; i < s->nconv; i++) {
		int conv = n->nlayers;

		if (push(n, DLT_LAYER_CONV, s->filters[i], s->kernel[i], 0, err, errlen) < 0 ||
		    push(n, DLT_LAYER_RELU, 0, 0, 0, err, errlen) < 0)
			return -EINVAL;
		if (s->pool != 1 && push(n, DLT_LAYER_POOL, 0, s->pool, 0, err, errlen) < 0)
			return -EINVAL;
		if (!s->unfused)
			dlt_layer_fuse(&n->layer[conv], s->pool);
	}
	for (int i = 0; i < s->ndense; i++) {
		if (s->dense[i] < 1 || s->dense[i] > DLT_NET_MAX_WIDTH) {
			snprintf(err, errlen, "layer width %d (must be 1..%d)", s->dense[i],
				 DLT_NET_MAX_WIDTH);
			return -EINVAL;
		}
		if (push(n, DLT_LAYER_DENSE, s->dense[i], 0, 0, err, errlen) < 0 ||
		    push(n, DLT_LAYER_RELU, 0, 0, 0, err, errlen) < 0)
			return -EINVAL;
		if (s->dropout != 0.0f &&
		    push(n, DLT_LAYER_DROPOUT, 0, 0, s->dropout, err, errlen) < 0)
			return -EINVAL;
	}
	return push(n, DLT_LAYER_DENSE, s->classes, 0, 0, err, errlen);
}

int dlt_net_create(struct dlt_net *n, const struct dlt_net_spec *spec,
		   int max_batch, uint64_t seed, int rank, char *err, size_t errlen)
{
	size_t widest = dlt_shape_size(spec->in), ws = 0;

	memset(n, 0, sizeof *n);
	if (max_batch < 1) {
		snprintf(err, errlen, "batch of %d rows (must be >= 1)", max_batch);
		return -EINVAL;
	}
	if (build(n, spec, err, errlen) < 0) {
		memset(n, 0, sizeof *n);
		return -EINVAL;
	}
	n->max_batch = max_batch;
	for (int i = 0; i < n->nlayers; i++) {
		struct dlt_layer *l = &n->layer[i];
		size_t w = l->ops->workspace(l, max_batch);
		size_t sb = l->ops->saved_bytes(l, max_batch);
		int last = i + l->fused;
		size_t out = dlt_shape_size(n->layer[last].out);

		if (out > widest)
			widest = out;
		if (w > ws)
			ws = w;
		n->act[last] = malloc((size_t)max_batch * out * sizeof(float));
		if (!n->act[last])
			goto nomem;
		if (sb) {
			l->saved = malloc(sb);
			if (!l->saved)
				goto nomem;
		}
		i = last;
	}
	for (int i = 0; i < 2; i++) {
		n->delta[i] = malloc((size_t)max_batch * widest * sizeof(float));
		if (!n->delta[i])
			goto nomem;
	}
	n->ws = malloc((ws ? ws : 1) * sizeof(float));
	if (!n->ws)
		goto nomem;
	n->ctx = (struct dlt_layer_ctx){ .seed = seed, .rank = rank, .ws = n->ws };
	return 0;
nomem:
	dlt_net_destroy(n);
	snprintf(err, errlen, "cannot allocate the workspace for a batch of %d", max_batch);
	return -ENOMEM;
}

void dlt_net_destroy(struct dlt_net *n)
{
	for (int i = 0; i < DLT_NET_MAX_LAYERS; i++) {
		free(n->act[i]);
		free(n->layer[i].saved);
	}
	free(n->delta[0]);
	free(n->delta[1]);
	free(n->ws);
	memset(n, 0, sizeof *n);
}

void dlt_net_init_params(const struct dlt_net *n, float *params, uint64_t seed)
{
	struct dlt_rng r;

	dlt_rng_seed(&r, seed, DLT_RNG_STREAM_INIT, 0);
	for (int i = 0; i < n->nlayers; i++)
		n->layer[i].ops->init(&n->layer[i], params + n->layer[i].off, &r);
}

const float *dlt_net_forward(struct dlt_net *n, const float *params,
			     const float *x, int rows, int train, uint64_t step)
{
	const float *in = x;
	double t0 = now();

	n->ctx.train = train;
	n->ctx.step = step;
	for (int i = 0; i < n->nlayers; i++) {
		struct dlt_layer *l = &n->layer[i];
		int last = i + l->fused;
		double t = now();

		l->ops->forward(l, &n->ctx, params + l->off, in, n->act[last], rows);
		n->t_layer_fwd[i] += now() - t;
		in = n->act[last];
		i = last;
	}
	n->t_fwd += now() - t0;
	return in;
}

void dlt_net_forward_loss(struct dlt_net *n, const float *params,
			  const float *x, const uint8_t *y, int rows, float weight,
			  uint64_t step, double *loss_sum, long *correct)
{
	const int c = n->classes;
	const float *z = dlt_net_forward(n, params, x, rows, 1, step);
	const float scale = weight / (float)rows;   /* d(weight * mean loss) / d(loss_i) */
	float *d = n->delta[0];
	double loss = 0.0;
	long hits = 0;

	for (int i = 0; i < rows; i++) {
		int hit;

		loss += dlt_softmax_xent(z + (size_t)i * c, c, y[i], scale, d + (size_t)i * c, &hit);
		hits += hit;
	}
	*loss_sum += loss;
	*correct += hits;
}

void dlt_net_backward(struct dlt_net *n, const float *params, const float *x,
		      int rows, float *grads, dlt_net_hook hook, void *ctx)
{
	int cur = 0;
	double t0 = now();

	for (int last = n->nlayers - 1; last >= 0; last--) {
		int i = group_head(n, last);
		struct dlt_layer *l = &n->layer[i];
		const float *in = i > 0 ? n->act[i - 1] : x;
		float *dx = i > 0 ? n->delta[!cur] : NULL;
		double t = now();

		l->ops->backward(l, &n->ctx, params + l->off, in, n->act[last], n->delta[cur],
				 dx, grads + l->off, rows);
		n->t_layer_bwd[i] += now() - t;
		if (hook && l->nparams)
			hook(ctx, i);
		cur = !cur;
		last = i;
	}
	n->t_bwd += now() - t0;
}

void dlt_net_train_batch(struct dlt_net *n, const float *params,
			 const float *x, const uint8_t *y, int rows, float weight,
			 uint64_t step, float *grads, double *loss_sum, long *correct)
{
	dlt_net_forward_loss(n, params, x, y, rows, weight, step, loss_sum, correct);
	dlt_net_backward(n, params, x, rows, grads, NULL, NULL);
}

void dlt_net_eval_batch(struct dlt_net *n, const float *params,
			const float *x, const uint8_t *y, int rows,
			double *loss_sum, long *correct)
{
	const int c = n->classes;
	const float *z = dlt_net_forward(n, params, x, rows, 0, 0);
	double loss = 0.0;
	long hits = 0;

	for (int i = 0; i < rows; i++) {
		int hit;

		loss += dlt_softmax_xent(z + (size_t)i * c, c, y[i], 0.0f, NULL, &hit);
		hits += hit;
	}
	*loss_sum += loss;
	*correct += hits;
}

void dlt_net_describe(const struct dlt_net *n, char *out, size_t len)
{
	size_t k = 0;

	out[0] = '\0';
	for (int i = 0; i < n->nlayers && k + 1 < len; i++) {
		const struct dlt_layer *l = &n->layer[i];
		const char *sep = i ? "-" : "";
		int w;

		switch (l->kind) {
		case DLT_LAYER_CONV:
			w = snprintf(out + k, len - k, "%sconv%dx%dx%d", sep, l->k, l->k, l->out.c);
			break;
		case DLT_LAYER_POOL:
			w = snprintf(out + k, len - k, "%spool%d", sep, l->k);
			break;
		case DLT_LAYER_DENSE:
			w = snprintf(out + k, len - k, "%sdense%d", sep, l->out.c);
			break;
		case DLT_LAYER_DROPOUT:
			w = snprintf(out + k, len - k, "%sdropout%g", sep, (double)l->p);
			break;
		default:
			w = snprintf(out + k, len - k, "%s%s", sep, l->ops->name);
			break;
		}
		if (w < 0)
			return;
		k += (size_t)w;
		if (k >= len)
			return;
	}
}
