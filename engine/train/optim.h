/* optim.h - optimizers (SGD, Nesterov, Adam; PyTorch semantics) and learning-rate schedules */
#ifndef DLT_OPTIM_H
#define DLT_OPTIM_H

#include <stddef.h>

struct dlt_sgd {
	float lr;            /* learning rate, constant */
	float momentum;      /* mu, 0 = plain SGD */
	float weight_decay;  /* L2 coefficient, applied to every parameter */
};

/* One step over n parameters w with momentum buffers v and gradients g,
 * as torch.optim.SGD (dampening 0, no Nesterov): g' = g + wd * w;
 * v = mu * v + g'; w -= lr * v. v starts as zeros, which makes the first
 * step v = g' exactly like PyTorch. g is left as it is. Cannot fail. */
void dlt_sgd_step(const struct dlt_sgd *o, float *w, float *v, const float *g, size_t n);

enum dlt_optim_kind {
	DLT_OPTIM_SGD = 1,        /* torch.optim.SGD */
	DLT_OPTIM_NESTEROV = 2,   /* torch.optim.SGD(nesterov=True) */
	DLT_OPTIM_ADAM = 3,       /* torch.optim.Adam (L2 weight decay, bias correction) */
};

enum dlt_sched_kind {
	DLT_SCHED_CONSTANT = 0,   /* lr */
	DLT_SCHED_STEP = 1,       /* lr * gamma^floor(epoch / step_epochs) */
	DLT_SCHED_COSINE = 2,     /* lr * (1 + cos(pi * s / total_steps)) / 2 */
};

/* An optimizer's constants. */
struct dlt_optim {
	enum dlt_optim_kind kind;   /* which update */
	float momentum;             /* SGD/Nesterov mu */
	float weight_decay;         /* L2 added to the gradient, all kinds */
	float beta1, beta2, eps;    /* Adam */
};

/* State arrays of nparams floats an optimizer keeps: 1 (momentum, or
 * Adam's first moment) or 2 (Adam's m and v). */
int dlt_optim_nstate(enum dlt_optim_kind kind);

/* Returns the lowercase name of kind ("sgd", "nesterov", "adam"). */
const char *dlt_optim_name(enum dlt_optim_kind kind);

/* One update of n parameters w with gradients g at learning rate lr;
 * state holds dlt_optim_nstate(kind) arrays of n floats, contiguous (m,
 * then v), zero before the first step; t is the 1-based number of this
 * step (Adam's bias correction). g is left as it is. On x86 the update
 * runs with denormals flushed to zero (see optim.c). Cannot fail.
 *   sgd:      g' = g + wd w; v = mu v + g'; w -= lr v
 *   nesterov: g' = g + wd w; v = mu v + g'; w -= lr (g' + mu v)
 *   adam:     g' = g + wd w; m = b1 m + (1-b1) g'; v = b2 v + (1-b2) g'^2;
 *             w -= lr / (1-b1^t) * m / (sqrt(v) / sqrt(1-b2^t) + eps) */
void dlt_optim_step(const struct dlt_optim *o, float lr, unsigned long t,
		    float *w, float *state, const float *g, size_t n);

/* dlt_optim_step on a slice: w and g as there, but state array k starts
 * at state + k * stride (a slice of arrays of stride floats). */
void dlt_optim_step_strided(const struct dlt_optim *o, float lr, unsigned long t,
			    float *w, float *state, size_t stride, const float *g, size_t n);

/* A learning-rate schedule. */
struct dlt_sched {
	enum dlt_sched_kind kind;   /* shape after warm-up */
	double lr;                  /* base rate */
	double gamma;               /* step: factor per period */
	long step_epochs;           /* step: epochs per period, >= 1 */
	long warmup_steps;          /* linear warm-up: lr (s+1) / N for s < N */
	long steps_per_epoch;       /* of the plan */
	long total_steps;           /* of the plan */
};

/* Returns the learning rate of 0-based global step s. Cannot fail. */
double dlt_sched_lr(const struct dlt_sched *sc, long s);

#endif
