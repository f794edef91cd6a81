/* ref_mlp.h - the tests' oracle: a plain multilayer perceptron (layout, He init, forward, backward)
 *
 * Not part of dlh-train: the trainer runs the layer stack of
 * engine/train/net.h. This second, straight-line MLP is kept only so the
 * unit tests (test_train_net, test_train_layers) can check that stack
 * against it bit for bit; it is linked into those tests alone. */
#ifndef DLH_TEST_REF_MLP_H
#define DLH_TEST_REF_MLP_H

#include <stddef.h>
#include <stdint.h>

#define DLT_MLP_MAX_HIDDEN 16       /* most hidden layers */
#define DLT_MLP_MAX_WIDTH 65536     /* widest layer, inputs included */
#define DLT_MLP_MAX_CLASSES 256     /* labels are bytes */

/* Dense layers with ReLU between them and softmax cross-entropy at the
 * end. Layer l (1..nlayers) maps width[l-1] inputs to width[l] outputs with
 * weights W_l, row-major [width[l] x width[l-1]], followed by biases b_l;
 * all of them live in ONE float array (params), layer after layer, W then
 * b, and gradients use the same layout. The workspace is allocated once
 * for max_batch rows, so no call below allocates. */
struct dlt_mlp {
	int nlayers;                              /* dense layers: hidden + 1 */
	int width[DLT_MLP_MAX_HIDDEN + 2];        /* width[0] inputs .. width[nlayers] classes */
	size_t w_off[DLT_MLP_MAX_HIDDEN + 2];     /* index of W_l in params (l >= 1) */
	size_t b_off[DLT_MLP_MAX_HIDDEN + 2];     /* index of b_l in params (l >= 1) */
	size_t nparams;                           /* floats in params and in grads */
	int max_batch;                            /* most rows one call may take */
	float *act[DLT_MLP_MAX_HIDDEN + 2];       /* act[l]: outputs of layer l, max_batch x width[l] */
	float *delta[2];                          /* backprop ping-pong, max_batch x widest */
};

/* Lays out a model of inputs -> hidden[0..nhidden) -> classes and
 * allocates its workspace for batches of up to max_batch rows.
 * Returns 0, or -EINVAL (a size out of range) or -ENOMEM with a message in
 * err; m then holds nothing. */
int dlt_mlp_create(struct dlt_mlp *m, int inputs, const int *hidden,
		   int nhidden, int classes, int max_batch,
		   char *err, size_t errlen);

/* Frees the workspace of m and zeroes it. */
void dlt_mlp_destroy(struct dlt_mlp *m);

/* He-normal initialisation from seed: W_l ~ N(0, 2 / width[l-1]), biases 0.
 * The same seed gives the same params bit for bit. Cannot fail. */
void dlt_mlp_init_params(const struct dlt_mlp *m, float *params, uint64_t seed);

/* Forward pass of n <= max_batch rows x (n x width[0]); leaves the
 * logits in m->act[m->nlayers]. Cannot fail. */
void dlt_mlp_forward(struct dlt_mlp *m, const float *params, const float *x, int n);

/* Forward and backward pass of n <= max_batch rows with labels y (each
 * < classes). Writes into grads (nparams floats, overwritten) weight times
 * the gradient of the MEAN cross-entropy over the n rows; the trainer
 * passes weight = n / global_batch, so summing grads over ranks gives the
 * mean gradient of the global batch (i.e. grads is the gradient of the
 * local loss SUM divided by global_batch). Adds the SUM of the n losses to
 * *loss_sum and the rows whose argmax is the label to *correct. Cannot fail. */
void dlt_mlp_train_batch(struct dlt_mlp *m, const float *params,
			 const float *x, const uint8_t *y, int n, float weight,
			 float *grads, double *loss_sum, long *correct);

/* Forward pass only: adds the n losses to *loss_sum and the correct rows
 * to *correct. Cannot fail. */
void dlt_mlp_eval_batch(struct dlt_mlp *m, const float *params,
			const float *x, const uint8_t *y, int n,
			double *loss_sum, long *correct);

#endif
