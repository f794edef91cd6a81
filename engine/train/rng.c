/* rng.c - xoshiro256** with splitmix64 seeding, Box-Muller normals, Fisher-Yates */
#include "engine/train/rng.h"

#include <math.h>

#define DLT_GOLDEN 0x9e3779b97f4a7c15ULL   /* splitmix64 increment, 2^64 / phi */
#define DLT_MIX_B  0xd1b54a32d192ed03ULL   /* odd constant that separates stream id b */

uint64_t dlt_splitmix64(uint64_t *x)
{
	uint64_t z = (*x += DLT_GOLDEN);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

void dlt_rng_seed(struct dlt_rng *r, uint64_t seed, uint64_t a, uint64_t b)
{
	uint64_t x = seed;

	x = dlt_splitmix64(&x) ^ (a * DLT_GOLDEN);
	x = dlt_splitmix64(&x) ^ (b * DLT_MIX_B);
	for (int i = 0; i < 4; i++)
		r->s[i] = dlt_splitmix64(&x);
	if (!(r->s[0] | r->s[1] | r->s[2] | r->s[3]))
		r->s[0] = DLT_GOLDEN;
	r->spare = 0.0;
	r->has_spare = 0;
}

/* Returns x rotated left by k bits, 0 < k < 64. */
static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t dlt_rng_next(struct dlt_rng *r)
{
	uint64_t *s = r->s;
	uint64_t out = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return out;
}

double dlt_rng_uniform(struct dlt_rng *r)
{
	return (double)(dlt_rng_next(r) >> 11) * 0x1.0p-53;
}

uint64_t dlt_rng_below(struct dlt_rng *r, uint64_t n)
{
	uint64_t floor = (0 - n) % n;   /* 2^64 mod n: values below it are biased */
	uint64_t x;

	do
		x = dlt_rng_next(r);
	while (x < floor);
	return x % n;
}

double dlt_rng_normal(struct dlt_rng *r)
{
	if (r->has_spare) {
		r->has_spare = 0;
		return r->spare;
	}
	double u1 = 1.0 - dlt_rng_uniform(r);   /* (0, 1]: log is finite */
	double u2 = dlt_rng_uniform(r);
	double rad = sqrt(-2.0 * log(u1));
	double th = 2.0 * M_PI * u2;

	r->spare = rad * sin(th);
	r->has_spare = 1;
	return rad * cos(th);
}

void dlt_rng_permutation(struct dlt_rng *r, uint32_t *perm, size_t n)
{
	for (size_t i = 0; i < n; i++)
		perm[i] = (uint32_t)i;
	for (size_t i = n; i > 1; i--) {
		size_t j = (size_t)dlt_rng_below(r, i);
		uint32_t t = perm[i - 1];

		perm[i - 1] = perm[j];
		perm[j] = t;
	}
}
