/* optim.c - SGD with momentum and weight decay, PyTorch semantics */
#include "engine/train/optim.h"

void dlt_sgd_step(const struct dlt_sgd *o, float *restrict w, float *restrict v,
		  float *restrict g, size_t n)
{
	const float lr = o->lr, mu = o->momentum, wd = o->weight_decay;

	for (size_t i = 0; i < n; i++) {
		float gi = g[i] + wd * w[i];

		g[i] = gi;
		v[i] = mu * v[i] + gi;
		w[i] -= lr * v[i];
	}
}
