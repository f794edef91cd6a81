/* batch.h - random training batches and small MLPs for the trainer's unit tests */
#ifndef DLT_TEST_BATCH_H
#define DLT_TEST_BATCH_H

#include <stdint.h>
#include <string.h>

#include "engine/train/net.h"
#include "engine/train/rng.h"

/* Fills n rows of dim floats x ~ N(0, 1) and n labels below classes, from seed. */
static inline void fill_batch(float *x, uint8_t *y, int n, int dim, int classes, uint64_t seed)
{
	struct dlt_rng r;

	dlt_rng_seed(&r, seed, 1, 2);
	for (int i = 0; i < n * dim; i++)
		x[i] = (float)dlt_rng_normal(&r);
	for (int i = 0; i < n; i++)
		y[i] = (uint8_t)dlt_rng_below(&r, (uint64_t)classes);
}

/* An MLP spec: in -> hidden (nh widths) -> classes, no dropout. */
static inline void mlp_spec(struct dlt_net_spec *s, int in, const int *hidden, int nh,
			    int classes)
{
	memset(s, 0, sizeof *s);
	s->in = (struct dlt_shape){ 1, 1, in };
	s->classes = classes;
	s->pool = 1;
	s->ndense = nh;
	memcpy(s->dense, hidden, (size_t)nh * sizeof *hidden);
}

#endif
