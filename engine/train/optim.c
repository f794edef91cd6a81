/* optim.c - optimizers (SGD, Nesterov, Adam; PyTorch semantics) and learning-rate schedules */
#include "engine/train/optim.h"

#include <math.h>
#ifdef __SSE2__
#include <immintrin.h>
#endif

#include "engine/train/elem.h"

#define DLT_MXCSR_FTZ 0x8000u   /* MXCSR flush-to-zero: denormal results become 0 */
#define DLT_MXCSR_DAZ 0x0040u   /* MXCSR denormals-are-zero: denormal inputs read as 0 */
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

int dlt_optim_nstate(enum dlt_optim_kind kind)
{
	return kind == DLT_OPTIM_ADAM ? 2 : 1;
}

const char *dlt_optim_name(enum dlt_optim_kind kind)
{
	switch (kind) {
	case DLT_OPTIM_SGD:
		return "sgd";
	case DLT_OPTIM_NESTEROV:
		return "nesterov";
	case DLT_OPTIM_ADAM:
		return "adam";
	}
	return "unknown";
}

/* Nesterov SGD over n parameters. */
static void nesterov_step(float lr, float mu, float wd, float *restrict w,
			  float *restrict v, const float *restrict g, size_t n)
{
	size_t nb = n & ~(size_t)(DLT_SGD_BLOCK - 1), i;

	for (i = 0; i < nb; i++) {
		float gi = g[i] + wd * w[i], vi = mu * v[i] + gi;

		v[i] = vi;
		w[i] -= lr * (gi + mu * vi);
	}
	for (; i < n; i++) {
		float gi = g[i] + wd * w[i], vi = mu * v[i] + gi;

		v[i] = vi;
		w[i] -= lr * (gi + mu * vi);
	}
}

/* Adam over n parameters, PyTorch's arithmetic order. GCC will not
 * vectorize sqrtf without -fno-math-errno, so on x86 the main loop uses
 * SSE (sqrtps and divps round exactly like sqrtf and '/', so the result
 * does not depend on the path). */
static void adam_step(const struct dlt_optim *o, float lr, unsigned long t,
		      float *restrict w, float *restrict m, float *restrict v,
		      const float *restrict g, size_t n)
{
	const float b1 = o->beta1, b2 = o->beta2, eps = o->eps, wd = o->weight_decay;
	const float bc1 = 1.0f - (float)pow(o->beta1, (double)t);
	const float bc2s = (float)sqrt(1.0 - pow(o->beta2, (double)t));
	const float step = lr / bc1, ib = 1.0f / bc2s;
	size_t i = 0;

#ifdef __SSE2__
	const __m128 vb1 = _mm_set1_ps(b1), vb2 = _mm_set1_ps(b2);
	const __m128 vc1 = _mm_set1_ps(1.0f - b1), vc2 = _mm_set1_ps(1.0f - b2);
	const __m128 vwd = _mm_set1_ps(wd), vstep = _mm_set1_ps(step);
	const __m128 vib = _mm_set1_ps(ib), veps = _mm_set1_ps(eps);

	for (; i + 4 <= n; i += 4) {
		__m128 wi = _mm_loadu_ps(w + i);
		__m128 gi = _mm_add_ps(_mm_loadu_ps(g + i), _mm_mul_ps(vwd, wi));
		__m128 mi = _mm_add_ps(_mm_mul_ps(vb1, _mm_loadu_ps(m + i)), _mm_mul_ps(vc1, gi));
		__m128 vi = _mm_add_ps(_mm_mul_ps(vb2, _mm_loadu_ps(v + i)),
				       _mm_mul_ps(_mm_mul_ps(vc2, gi), gi));
		__m128 den = _mm_add_ps(_mm_mul_ps(_mm_sqrt_ps(vi), vib), veps);

		_mm_storeu_ps(m + i, mi);
		_mm_storeu_ps(v + i, vi);
		_mm_storeu_ps(w + i, _mm_sub_ps(wi, _mm_div_ps(_mm_mul_ps(vstep, mi), den)));
	}
#endif
	for (; i < n; i++)
		dlt_adam_elem(w + i, m + i, v + i, g[i], b1, b2, eps, wd, step, ib);
}

void dlt_optim_step(const struct dlt_optim *o, float lr, unsigned long t,
		    float *w, float *state, const float *g, size_t n)
{
	dlt_optim_step_strided(o, lr, t, w, state, n, g, n);
}

void dlt_optim_step_strided(const struct dlt_optim *o, float lr, unsigned long t,
			    float *w, float *state, size_t stride, const float *g, size_t n)
{
#ifdef __SSE2__
	/* Parameters that get no gradient (dead ReLU units) see their
	 * momentum or first moment decay geometrically into denormals within
	 * a few hundred steps, and denormal arithmetic is ~100x slower: the
	 * optimizer took a fifth of a CNN step. Flush them to zero (FTZ, DAZ)
	 * for the update only; the lost values are below 1e-38. */
	const unsigned int csr = _mm_getcsr();

	_mm_setcsr(csr | DLT_MXCSR_FTZ | DLT_MXCSR_DAZ);
#endif
	switch (o->kind) {
	case DLT_OPTIM_SGD: {
		const struct dlt_sgd s = { .lr = lr, .momentum = o->momentum,
					   .weight_decay = o->weight_decay };

		dlt_sgd_step(&s, w, state, g, n);
		break;
	}
	case DLT_OPTIM_NESTEROV:
		nesterov_step(lr, o->momentum, o->weight_decay, w, state, g, n);
		break;
	case DLT_OPTIM_ADAM:
		adam_step(o, lr, t ? t : 1, w, state, state + stride, g, n);
		break;
	}
#ifdef __SSE2__
	_mm_setcsr(csr);
#endif
}

double dlt_sched_lr(const struct dlt_sched *sc, long s)
{
	double lr = sc->lr;

	if (s < sc->warmup_steps)
		return lr * (double)(s + 1) / (double)sc->warmup_steps;
	switch (sc->kind) {
	case DLT_SCHED_CONSTANT:
		break;
	case DLT_SCHED_STEP: {
		long spe = sc->steps_per_epoch > 0 ? sc->steps_per_epoch : 1;
		long per = sc->step_epochs > 0 ? sc->step_epochs : 1;

		lr *= pow(sc->gamma, (double)(s / spe / per));
		break;
	}
	case DLT_SCHED_COSINE:
		if (sc->total_steps > 0)
			lr *= 0.5 * (1.0 + cos(M_PI * (double)s / (double)sc->total_steps));
		break;
	}
	return lr;
}
