/* layers.h - the per-layer interface and the CPU layers: dense, ReLU, conv2d, max-pool, dropout */
#ifndef DLT_LAYERS_H
#define DLT_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#include "engine/train/rng.h"

#define DLT_LAYER_MAX_KERNEL 31     /* largest conv kernel / pool size */
#define DLT_LAYER_MAX_CHANNELS 4096 /* most conv filters */

enum dlt_layer_kind {
	DLT_LAYER_DENSE,     /* y = x W^T + b over the flattened input */
	DLT_LAYER_RELU,      /* y = max(x, 0) */
	DLT_LAYER_CONV,      /* 2-D convolution, stride 1, 'same' zero padding */
	DLT_LAYER_POOL,      /* max-pool k x k, stride k (floor) */
	DLT_LAYER_DROPOUT,   /* inverted dropout, counter-hashed mask */
};

/* A C x H x W activation (NCHW per image); a dense output is C x 1 x 1. */
struct dlt_shape {
	int c, h, w;   /* channels, rows, columns */
};

/* What a forward or backward call needs besides the tensors. */
struct dlt_layer_ctx {
	int train;          /* 1 = training (dropout active), 0 = inference */
	uint64_t seed;      /* --seed, keys the dropout masks */
	uint64_t step;      /* global step, keys the dropout masks */
	int rank;           /* MPI rank, keys the dropout masks */
	float *ws;          /* shared scratch of the largest workspace floats */
};

struct dlt_layer;

/* One layer kind's implementation; a GPU backend provides another table.
 * No function allocates or fails. */
struct dlt_layer_ops {
	const char *name;                                   /* "dense", "conv", ... */
	/* parameter floats (weights then biases) */
	size_t (*param_count)(const struct dlt_layer *l);
	/* floats of shared scratch a call on max_batch rows needs */
	size_t (*workspace)(const struct dlt_layer *l, int max_batch);
	/* bytes the layer keeps from forward to backward (l->saved) */
	size_t (*saved_bytes)(const struct dlt_layer *l, int max_batch);
	/* He-normal weights from r, zero biases, into p (the layer's slice) */
	void (*init)(const struct dlt_layer *l, float *p, struct dlt_rng *r);
	/* y = f(x) for n rows; p is the layer's parameter slice */
	void (*forward)(struct dlt_layer *l, const struct dlt_layer_ctx *c,
			const float *p, const float *x, float *y, int n);
	/* from dy: parameter gradients into g (overwritten, the layer's
	 * slice) and, when dx is not NULL, the input gradient into dx */
	void (*backward)(struct dlt_layer *l, const struct dlt_layer_ctx *c,
			 const float *p, const float *x, const float *y,
			 const float *dy, float *dx, float *g, int n);
};

/* One layer of a stack. */
struct dlt_layer {
	enum dlt_layer_kind kind;          /* which layer */
	const struct dlt_layer_ops *ops;   /* its implementation */
	int index;                         /* position in the stack (keys dropout) */
	struct dlt_shape in, out;          /* per-image input and output shapes */
	int k;                             /* conv kernel side, pool size */
	float p;                           /* dropout probability */
	int fused;                         /* conv: layers after it that it computes too:
					    * 0, 1 (the ReLU) or 2 (ReLU and max-pool) */
	int pool;                          /* conv: the fused max-pool size, 1 = none */
	size_t off;                        /* first parameter in the stack's array */
	size_t nparams;                    /* ops->param_count */
	void *saved;                       /* ops->saved_bytes, owned by the stack */
};

/* Floats of one image of shape s. */
static inline size_t dlt_shape_size(struct dlt_shape s)
{
	return (size_t)s.c * (size_t)s.h * (size_t)s.w;
}

/* Fills l for a layer of kind taking input shape in: units are the dense
 * outputs or conv filters, k the conv kernel or pool size, p the dropout
 * probability (others ignore what they do not use). Sets ops, out and
 * nparams; leaves off, index and saved to the caller. Returns 0, or
 * -EINVAL with a message in err (an even or too large kernel, a pool larger
 * than the input, a size out of range). */
int dlt_layer_make(struct dlt_layer *l, enum dlt_layer_kind kind,
		   struct dlt_shape in, int units, int k, float p,
		   char *err, size_t errlen);

/* Lets conv layer l also compute the ReLU layer after it and, when pool
 * is above 1, the max-pool of size pool after that (fused: one pass per
 * image while its output is in cache, no full-size pre-activation kept).
 * Its forward then writes the last fused layer's output, and its backward
 * takes that layer's output and gradient. Call before sizing the
 * workspace and saved bytes. */
void dlt_layer_fuse(struct dlt_layer *l, int pool);

/* The dropout keep decision of element i of a batch under (seed, step,
 * rank, layer): 1 = kept. Pure function of its arguments. */
int dlt_dropout_keep(uint64_t seed, uint64_t step, int rank, int layer,
		     uint64_t i, float p);

/* Softmax cross-entropy of row z (c logits) against label y: returns the
 * loss, sets *hit when the argmax is y, and when d is not NULL writes
 * scale * (softmax - onehot) into d. Shared by the layer stack and the
 * reference MLP the tests compare it with. */
float dlt_softmax_xent(const float *restrict z, int c, int y, float scale,
		       float *restrict d, int *hit);

#endif
