/* rng.h - the trainer's random numbers: xoshiro256** seeded through splitmix64 */
#ifndef DLT_RNG_H
#define DLT_RNG_H

#include <stddef.h>
#include <stdint.h>

#define DLT_RNG_STREAM_INIT UINT64_MAX  /* stream id `a` of the weight initialisation */

struct dlt_rng {
	uint64_t s[4];      /* xoshiro256** state, never all zero */
	double spare;       /* the second normal of the last Box-Muller pair */
	int has_spare;      /* 1 while spare is unused */
};

/* Advances *x by one splitmix64 step. Returns the next output (a
 * bijective 64-bit mix of the new state). Cannot fail. */
uint64_t dlt_splitmix64(uint64_t *x);

/* Seeds r with the stream named by (seed, a, b): the trainer uses
 * (seed, DLT_RNG_STREAM_INIT, 0) for the weights and (seed, epoch, rank)
 * for the shuffles, so distinct triples give unrelated sequences and equal
 * triples the same one on every machine. Cannot fail. */
void dlt_rng_seed(struct dlt_rng *r, uint64_t seed, uint64_t a, uint64_t b);

/* Returns the next 64 random bits of r. */
uint64_t dlt_rng_next(struct dlt_rng *r);

/* Returns a uniform double in [0, 1) with 53 random bits. */
double dlt_rng_uniform(struct dlt_rng *r);

/* Returns an unbiased uniform integer in [0, n); n must be >= 1. */
uint64_t dlt_rng_below(struct dlt_rng *r, uint64_t n);

/* Returns a standard normal deviate (Box-Muller, the pair's second value
 * is kept for the next call). */
double dlt_rng_normal(struct dlt_rng *r);

/* Fills perm[0..n) with a uniformly random permutation of 0..n-1
 * (Fisher-Yates). Cannot fail. */
void dlt_rng_permutation(struct dlt_rng *r, uint32_t *perm, size_t n);

#endif
