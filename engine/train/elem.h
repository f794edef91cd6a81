/* elem.h - per-element arithmetic that the CPU layers (layers.c, optim.c) and the
 * CUDA kernels (cuda/gpu.cu) share, one definition each, so both compute the same
 * numbers: the dropout masks' counter hash, the max-pool window, Adam's update */
#ifndef DLT_ELEM_H
#define DLT_ELEM_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define DLT_HD __host__ __device__
#else
#define DLT_HD
#endif

#define DLT_DROPOUT_BITS 24   /* random bits per keep decision */

/* The splitmix64 finalizer: a bijective 64-bit mix. */
static inline DLT_HD uint64_t dlt_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* The key of a (seed, step, rank, layer) mask. */
static inline DLT_HD uint64_t dlt_mask_key(uint64_t seed, uint64_t step, int rank, int layer)
{
	uint64_t k = dlt_mix64(seed + 0x9e3779b97f4a7c15ULL);

	k = dlt_mix64(k ^ step);
	return dlt_mix64(k ^ ((uint64_t)(uint32_t)rank << 32 | (uint32_t)layer));
}

/* Drop threshold of probability p: an element is dropped when its
 * DLT_DROPOUT_BITS random bits are below it. */
static inline DLT_HD uint64_t dlt_drop_threshold(float p)
{
	return (uint64_t)((double)p * (double)(1u << DLT_DROPOUT_BITS));
}

/* 1 when element i of the mask keyed by key is kept (threshold thr). */
static inline DLT_HD int dlt_keep_bit(uint64_t key, uint64_t i, uint64_t thr)
{
	return (dlt_mix64(key + i * 0x9e3779b97f4a7c15ULL) >> (64 - DLT_DROPOUT_BITS)) >= thr;
}

/* The first maximum of the k x k window of output (oy, ox) in a plane W
 * wide; *best gets its index in the plane. */
static inline DLT_HD float dlt_pool_window(const float *in, int W, int k, int oy, int ox,
					   int *best)
{
	int b = oy * k * W + ox * k;
	float mx = in[b];

	for (int dy = 0; dy < k; dy++)
		for (int dx = 0; dx < k; dx++) {
			int j = (oy * k + dy) * W + ox * k + dx;

			if (in[j] > mx) {
				mx = in[j];
				b = j;
			}
		}
	*best = b;
	return mx;
}

/* Adam on one parameter w with moments m, v and gradient g, in PyTorch's
 * order; step = lr / (1 - b1^t), ib = 1 / sqrt(1 - b2^t). */
static inline DLT_HD void dlt_adam_elem(float *w, float *m, float *v, float g, float b1,
					float b2, float eps, float wd, float step, float ib)
{
	float gi = g + wd * *w;
	float mi = b1 * *m + (1.0f - b1) * gi;
	float vi = b2 * *v + (1.0f - b2) * gi * gi;

	*m = mi;
	*v = vi;
	*w -= step * mi / (sqrtf(vi) * ib + eps);
}

#endif
