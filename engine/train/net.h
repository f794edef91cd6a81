/* net.h - a layer stack (MLP or CNN) over one parameter array: build, init, forward, backward */
#ifndef DLT_NET_H
#define DLT_NET_H

#include <stddef.h>
#include <stdint.h>

#include "engine/train/layers.h"

#define DLT_NET_MAX_LAYERS 64       /* most layers in a stack */
#define DLT_NET_MAX_CONV 8          /* most conv blocks */
#define DLT_NET_MAX_DENSE 16        /* most hidden dense layers */
#define DLT_NET_MAX_CLASSES 256     /* labels are bytes */
#define DLT_NET_MAX_WIDTH 65536     /* widest dense layer */

/* The architecture: [conv(filters[i], kernel[i]) -> ReLU -> maxpool(pool)]
 * per conv block (no pool layer when pool is 1), then per hidden width
 * dense -> ReLU -> dropout (no dropout layer when dropout is 0), then a
 * dense layer of classes outputs and softmax cross-entropy. With no conv
 * block this is a plain MLP, parameter for parameter the same as the
 * tests' oracle (tests/unit/ref_mlp.h). */
struct dlt_net_spec {
	struct dlt_shape in;                /* one input image */
	int classes;                        /* 2..DLT_NET_MAX_CLASSES */
	int nconv;                          /* conv blocks */
	int filters[DLT_NET_MAX_CONV];      /* filters of each conv */
	int kernel[DLT_NET_MAX_CONV];       /* odd kernel side of each conv */
	int pool;                           /* pool size after each conv, 1 = none */
	int ndense;                         /* hidden dense layers */
	int dense[DLT_NET_MAX_DENSE];       /* their widths */
	float dropout;                      /* after each hidden dense layer */
	int unfused;                        /* 1: conv, ReLU, pool run as separate
					     * layers (tests; 0 fuses them) */
};

/* Called by dlt_net_backward after layer l's parameter gradients are
 * final (layers go last to first). */
typedef void (*dlt_net_hook)(void *ctx, int l);

/* A built stack with its workspace for max_batch rows. Parameters of
 * layer l are params[layer[l].off .. + layer[l].nparams), in layer order,
 * each layer weights then biases; gradients use the same layout. */
struct dlt_net {
	int nlayers;                                /* layers in the stack */
	struct dlt_layer layer[DLT_NET_MAX_LAYERS]; /* the stack, input first */
	struct dlt_shape in;                        /* input image shape */
	int classes;                                /* outputs of the last layer */
	size_t nparams;                             /* floats in params and grads */
	int max_batch;                              /* most rows one call may take */
	float *act[DLT_NET_MAX_LAYERS];             /* act[l]: output of layer l (NULL
						     * inside a fused group but its last) */
	float *delta[2];                            /* backprop ping-pong, widest activation */
	float *ws;                                  /* shared layer scratch */
	struct dlt_layer_ctx ctx;                   /* seed/rank/step of dropout, ws */
	double t_fwd, t_bwd;                        /* seconds spent in forward/backward so far */
	double t_layer_fwd[DLT_NET_MAX_LAYERS];     /* of which in each layer's forward
						     * (a fused group's in its first) */
	double t_layer_bwd[DLT_NET_MAX_LAYERS];     /* and backward */
};

/* Builds the stack of spec with workspace for max_batch rows; dropout
 * masks are keyed by seed and rank. Returns 0, or -EINVAL (a size out of
 * range) or -ENOMEM with a message in err; n then holds nothing. */
int dlt_net_create(struct dlt_net *n, const struct dlt_net_spec *spec,
		   int max_batch, uint64_t seed, int rank, char *err, size_t errlen);

/* Frees the workspace of n and zeroes it. */
void dlt_net_destroy(struct dlt_net *n);

/* He-normal initialisation from seed, layer by layer in order from one
 * generator (weights ~ N(0, 2 / fan_in), biases 0): a stack without conv
 * blocks gets exactly the numbers of the tests' reference MLP
 * (dlt_mlp_init_params, tests/unit/ref_mlp.h). Cannot fail. */
void dlt_net_init_params(const struct dlt_net *n, float *params, uint64_t seed);

/* Forward pass of rows <= max_batch images (rows x in floats); train
 * enables dropout with the masks of global step step. Returns the logits
 * (rows x classes, inside n). Cannot fail. */
const float *dlt_net_forward(struct dlt_net *n, const float *params,
			     const float *x, int rows, int train, uint64_t step);

/* Training forward pass and loss: adds the SUM of the rows' losses to
 * *loss_sum and the rows whose argmax is the label to *correct, and leaves
 * weight / rows * (softmax - onehot) as the logits' gradient for
 * dlt_net_backward (weight = rows / global_batch makes summed shards the
 * global mean). Cannot fail. */
void dlt_net_forward_loss(struct dlt_net *n, const float *params,
			  const float *x, const uint8_t *y, int rows, float weight,
			  uint64_t step, double *loss_sum, long *correct);

/* Backward pass after dlt_net_forward_loss on the same x and rows:
 * overwrites grads (nparams floats) and calls hook(ctx, l) after each
 * layer l that has parameters, last to first (hook may be NULL). Cannot
 * fail. */
void dlt_net_backward(struct dlt_net *n, const float *params, const float *x,
		      int rows, float *grads, dlt_net_hook hook, void *ctx);

/* dlt_net_forward_loss then dlt_net_backward without a hook. */
void dlt_net_train_batch(struct dlt_net *n, const float *params,
			 const float *x, const uint8_t *y, int rows, float weight,
			 uint64_t step, float *grads, double *loss_sum, long *correct);

/* Inference only: adds the rows' losses to *loss_sum and the correct rows
 * to *correct. Cannot fail. */
void dlt_net_eval_batch(struct dlt_net *n, const float *params,
			const float *x, const uint8_t *y, int rows,
			double *loss_sum, long *correct);

/* Writes a one-line description ("conv5x5x32-relu-pool2-...") into out. */
void dlt_net_describe(const struct dlt_net *n, char *out, size_t len);

#endif
