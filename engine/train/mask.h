/* mask.h - the dropout masks' counter hash: one definition for the CPU layers
 * (layers.c) and the CUDA kernels (cuda/gpu.cu), so both drop the same elements */
#ifndef DLT_MASK_H
#define DLT_MASK_H

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

#endif
