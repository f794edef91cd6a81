/* cost.h - what one sample costs the built-in trainer's model: multiply-adds,
 * parameters, activations, per layer (the white-box half of the estimator,
 * after Paleo: the counts here, the device's measured speeds elsewhere) */
#ifndef DLH_COST_H
#define DLH_COST_H

#include <stddef.h>

#include "schema/spec.h"

#define DLH_COST_LAYERS 64   /* most layers in a stack (as the trainer's) */

/* One layer of the trainer's stack (engine/train/net.c builds the same). */
struct dlh_layer_cost {
	const char *kind;     /* "dense", "relu", "conv", "pool", "dropout" */
	size_t params;        /* parameters: weights then biases */
	double macs;          /* multiply-adds of its forward pass, one sample */
	size_t out;           /* floats of its output, one sample */
};

/* The whole stack for one sample. */
struct dlh_model_cost {
	int nlayers;                                /* layers, input first */
	struct dlh_layer_cost layer[DLH_COST_LAYERS];
	size_t in;                                  /* input floats (c h w) */
	size_t params;                              /* sum over layers */
	double macs;                                /* forward multiply-adds, sum over layers */
	double train_flops;                         /* forward + backward FLOPs (see cost.c) */
	size_t act;                                 /* output floats, sum over layers */
};

/* Fills mc for the model of spec (mlp or cnn) on c x h x w inputs with
 * classes outputs, layer for layer as dlh-train builds it. Returns 0, or
 * -EINVAL with err naming the problem (a pool larger than its input, a
 * size out of range, too many layers). */
int dlh_model_cost(const struct dlh_spec *spec, int c, int h, int w, int classes,
		   struct dlh_model_cost *mc, char *err, size_t errlen);

#endif
