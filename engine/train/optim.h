/* optim.h - SGD with momentum and weight decay, PyTorch semantics */
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

#endif
