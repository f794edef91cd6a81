/* optim.c - SGD with momentum and weight decay, PyTorch semantics */
#include "engine/train/optim.h"

#define DLT_SGD_BLOCK 8   /* power of two; the main loop runs a multiple of it, so -O2 vectorizes it */

void dlt_sgd_step(const struct dlt_sgd *o, float *restrict w, float *restrict v,
		  const float *restrict g, size_t n)
{
	const float lr = o->lr, mu = o->momentum, wd = o->weight_decay;
	size_t nb = n & ~(size_t)(DLT_SGD_BLOCK - 1), i;

	for (i = 0; i < nb; i++) {
		float vi = mu * v[i] + (g[i] + wd * w[i]);

		v[i] = vi;
		w[i] -= lr * vi;
	}
	for (; i < n; i++) {
		float vi = mu * v[i] + (g[i] + wd * w[i]);

		v[i] = vi;
		w[i] -= lr * vi;
	}
}
