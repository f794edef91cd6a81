/* cost.c - what one sample costs the built-in trainer's model */
#include "engine/plan/cost.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* A C x H x W activation. */
struct shape {
	long c, h, w;
};

static size_t floats(struct shape s)
{
	return (size_t)s.c * (size_t)s.h * (size_t)s.w;
}

/* Appends a layer; returns 0 or -EINVAL when the stack is full. */
static int push(struct dlh_model_cost *mc, const char *kind, size_t params, double macs,
		struct shape out, char *err, size_t errlen)
{
	if (mc->nlayers == DLH_COST_LAYERS) {
		snprintf(err, errlen, "more than %d layers", DLH_COST_LAYERS);
		return -EINVAL;
	}
	mc->layer[mc->nlayers++] = (struct dlh_layer_cost){
		.kind = kind, .params = params, .macs = macs, .out = floats(out),
	};
	mc->params += params;
	mc->macs += macs;
	mc->act += floats(out);
	return 0;
}

/* A dense layer of units outputs on *s (flattened), then ReLU and dropout
 * unless it is the output layer. */
static int dense(struct dlh_model_cost *mc, struct shape *s, long units, int hidden,
		 double dropout, char *err, size_t errlen)
{
	size_t in = floats(*s);

	*s = (struct shape){ units, 1, 1 };
	if (push(mc, "dense", in * (size_t)units + (size_t)units, (double)in * (double)units,
		 *s, err, errlen) < 0)
		return -EINVAL;
	if (!hidden)
		return 0;
	if (push(mc, "relu", 0, 0.0, *s, err, errlen) < 0)
		return -EINVAL;
	return dropout > 0.0 ? push(mc, "dropout", 0, 0.0, *s, err, errlen) : 0;
}

int dlh_model_cost(const struct dlh_spec *spec, int c, int h, int w, int classes,
		   struct dlh_model_cost *mc, char *err, size_t errlen)
{
	struct shape s = { c, h, w };
	int cnn = strcmp(spec->model_type, "cnn") == 0;

	memset(mc, 0, sizeof *mc);
	if (c < 1 || h < 1 || w < 1 || classes < 2) {
		snprintf(err, errlen, "input %dx%dx%d with %d classes", c, h, w, classes);
		return -EINVAL;
	}
	mc->in = floats(s);
	for (int i = 0; cnn && i < spec->nconv; i++) {
		long f = spec->conv_filters[i], k = spec->conv_kernel[i];
		size_t taps = (size_t)s.c * (size_t)k * (size_t)k;

		/* stride 1, 'same' padding: every output pixel reads c k k inputs */
		s.c = f;
		if (push(mc, "conv", taps * (size_t)f + (size_t)f,
			 (double)taps * (double)floats(s), s, err, errlen) < 0 ||
		    push(mc, "relu", 0, 0.0, s, err, errlen) < 0)
			return -EINVAL;
		if (spec->pool == 1)
			continue;
		if (spec->pool > s.h || spec->pool > s.w) {
			snprintf(err, errlen, "pool %d is larger than the %ldx%ld input of conv %d's "
				 "output", spec->pool, s.h, s.w, i + 1);
			return -EINVAL;
		}
		s.h /= spec->pool;
		s.w /= spec->pool;
		if (push(mc, "pool", 0, 0.0, s, err, errlen) < 0)
			return -EINVAL;
	}
	const int *hid = cnn ? spec->dense : spec->layers;
	int nh = cnn ? spec->ndense : spec->nlayers;

	for (int i = 0; i < nh; i++)
		if (dense(mc, &s, hid[i], 1, spec->dropout, err, errlen) < 0)
			return -EINVAL;
	if (dense(mc, &s, classes, 0, 0.0, err, errlen) < 0)
		return -EINVAL;
	/* 2 FLOPs per multiply-add; backward is two products the size of the
	 * forward one (weight and input gradients) except that the first
	 * layer with parameters computes no input gradient */
	double first = 0.0;

	for (int i = 0; i < mc->nlayers; i++)
		if (mc->layer[i].params) {
			first = mc->layer[i].macs;
			break;
		}
	mc->train_flops = 2.0 * (3.0 * mc->macs - first);
	return 0;
}
