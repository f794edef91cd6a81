/* dnn.cu - a conv layer's three products through cuDNN (dnn.h), opened at run time */
#ifndef DLT_GPU_EMULATE
#include <cuda_runtime.h>
#include <cudnn.h>
#include <dlfcn.h>
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/train/cuda/check.h"
#include "engine/train/cuda/dnn.h"

#define DNN_LIB "libcudnn.so.9"   /* the major version these headers are */
#define DNN_ALGOS 16              /* Find's results asked for: each product has 8
				     algorithms or fewer, listed once a math mode */

/* The cuDNN calls made, by name: looked up in DNN_LIB (or, over the
 * emulation, its functions). */
#define DNN_API(X) \
	X(cudnnGetVersion) X(cudnnGetErrorString) X(cudnnCreate) X(cudnnDestroy) \
	X(cudnnSetStream) X(cudnnCreateTensorDescriptor) X(cudnnDestroyTensorDescriptor) \
	X(cudnnSetTensor4dDescriptor) X(cudnnCreateFilterDescriptor) \
	X(cudnnDestroyFilterDescriptor) X(cudnnSetFilter4dDescriptor) \
	X(cudnnCreateConvolutionDescriptor) X(cudnnDestroyConvolutionDescriptor) \
	X(cudnnSetConvolution2dDescriptor) X(cudnnSetConvolutionMathType) \
	X(cudnnFindConvolutionForwardAlgorithmEx) X(cudnnFindConvolutionBackwardDataAlgorithmEx) \
	X(cudnnFindConvolutionBackwardFilterAlgorithmEx) X(cudnnConvolutionForward) \
	X(cudnnConvolutionBackwardData) X(cudnnConvolutionBackwardFilter)

struct dnn_api {
#define DNN_FN(f) decltype(&::f) f;
	DNN_API(DNN_FN)
#undef DNN_FN
};

enum dnn_product { DNN_FORWARD, DNN_DATA, DNN_FILTER };
#define DNN_PRODUCTS 3   /* the enum's values */

/* One (layer, rows): its descriptors and the algorithm of each product,
 * or why cuDNN has none. */
struct dnn_plan {
	int layer, rows;                           /* the key (rows 0: an empty slot) */
	long age;                                  /* when it was made (the oldest goes) */
	cudnnTensorDescriptor_t xd, yd;            /* NCHW input and product */
	cudnnFilterDescriptor_t wd;                /* F x C x k x k */
	cudnnConvolutionDescriptor_t cd[DNN_PRODUCTS];   /* same padding, stride 1; each
						    product's with the math its algorithm
						    was found with (Find's mathType) */
	int ok[DNN_PRODUCTS];                      /* 1: planned; 0: not yet */
	int algo[DNN_PRODUCTS];                    /* each product's algorithm (its cuDNN
						      enum's value) */
	float ms[DNN_PRODUCTS];                    /* and its time in Find */
	char why[160];                             /* a refusal ("": none) */
};

struct dnn {
	void *lib;                        /* dlopen's handle (NULL over the emulation; never
					     closed: dnn_destroy) */
	struct dnn_api api;               /* the calls */
	cudnnHandle_t h;                  /* bound to the stream */
	cudaStream_t stream;              /* gpu.cu's */
	void *ws;                         /* DNN_WS_BYTES of device memory */
	int tf32;                         /* dnn_set_tf32 */
	struct dnn_plan plan[DNN_PLANS];  /* the shapes asked for */
	long made;                        /* plans made so far (their ages) */
};

#ifdef DLT_GPU_EMULATE
/* The emulation's functions in place of the library's: DLT_EMU_CUDNN_NONE=lib
 * plays a machine without it. */
static int dnn_load(struct dnn *d, char *err, size_t errlen)
{
	const char *none = getenv("DLT_EMU_CUDNN_NONE");

	if (none && !strcmp(none, "lib"))
		return fail(-ENOTSUP, err, errlen, "cannot open %s: (emulated) no such file", DNN_LIB);
#define DNN_FN(f) d->api.f = &::f;
	DNN_API(DNN_FN)
#undef DNN_FN
	return 0;
}
#else
/* Opens DNN_LIB and finds each call. Returns 0 or -ENOTSUP (why in err). */
static int dnn_load(struct dnn *d, char *err, size_t errlen)
{
	d->lib = dlopen(DNN_LIB, RTLD_NOW | RTLD_LOCAL);
	if (!d->lib)
		return fail(-ENOTSUP, err, errlen, "cannot open %s: %s", DNN_LIB, dlerror());
#define DNN_FN(f) \
	if (!(d->api.f = (decltype(d->api.f))dlsym(d->lib, #f))) \
		return fail(-ENOTSUP, err, errlen, "%s has no %s", DNN_LIB, #f);
	DNN_API(DNN_FN)
#undef DNN_FN
	return 0;
}
#endif

/* Calls cuDNN's f with the arguments; returns from the calling function
 * with rc and err set when it fails (d, err and errlen in scope). */
#define DNN_CALL(rc, f, ...) do { cudnnStatus_t s_ = d->api.f(__VA_ARGS__); \
	if (s_ != CUDNN_STATUS_SUCCESS) \
		return fail((rc), err, errlen, "cudnn: %s: %s", #f, d->api.cudnnGetErrorString(s_)); \
	} while (0)

int dnn_create(struct dnn **out, cudaStream_t stream, char *err, size_t errlen)
{
	struct dnn *d = (struct dnn *)calloc(1, sizeof *d);
	cudaError_t e;
	int rc;

	*out = NULL;
	if (!d)
		return fail(-ENOMEM, err, errlen, "gpu: cannot allocate cuDNN's state");
	d->stream = stream;
	rc = dnn_load(d, err, errlen);
	if (rc == 0) {
		cudnnStatus_t s = d->api.cudnnCreate(&d->h);

		if (s != CUDNN_STATUS_SUCCESS) {
			d->h = NULL;
			rc = fail(-ENOTSUP, err, errlen, "cudnnCreate: %s", d->api.cudnnGetErrorString(s));
		} else if ((s = d->api.cudnnSetStream(d->h, stream)) != CUDNN_STATUS_SUCCESS) {
			rc = fail(-EIO, err, errlen, "cudnnSetStream: %s", d->api.cudnnGetErrorString(s));
		}
	}
	if (rc == 0 && (e = cudaMalloc(&d->ws, DNN_WS_BYTES)) != cudaSuccess) {
		d->ws = NULL;
		rc = fail(cuda_rc(e), err, errlen, "cuda: cudaMalloc(cuDNN workspace, %u bytes): %s",
			  DNN_WS_BYTES, cudaGetErrorString(e));
	}
	if (rc < 0) {
		dnn_destroy(d);
		return rc;
	}
	*out = d;
	return 0;
}

/* Find's failure f as an errno: a bad parameter or a shape cuDNN does not
 * take (cuDNN 9's categories 2xxx and 3xxx) is a refusal, -ENOTSUP (the
 * own path runs); an internal or execution failure (4xxx, 5xxx: a device
 * fault may leave the context unusable) is the run's error, -EIO. */
static int find_rc(cudnnStatus_t f)
{
	return (int)f / 1000 == 2 || (int)f / 1000 == 3 ? -ENOTSUP : -EIO;
}

/* Frees plan p's descriptors and empties it. */
static void plan_free(struct dnn *d, struct dnn_plan *p)
{
	if (p->xd)
		d->api.cudnnDestroyTensorDescriptor(p->xd);
	if (p->yd)
		d->api.cudnnDestroyTensorDescriptor(p->yd);
	if (p->wd)
		d->api.cudnnDestroyFilterDescriptor(p->wd);
	for (int i = 0; i < DNN_PRODUCTS; i++)
		if (p->cd[i])
			d->api.cudnnDestroyConvolutionDescriptor(p->cd[i]);
	memset(p, 0, sizeof *p);
}

void dnn_destroy(struct dnn *d)
{
	if (!d)
		return;
	for (int i = 0; i < DNN_PLANS; i++)
		plan_free(d, &d->plan[i]);
	cudaFree(d->ws);
	if (d->h)
		d->api.cudnnDestroy(d->h);
	/* the library stays loaded (no dlclose): its kernels are registered
	 * with the CUDA runtime, which unregisters them at the process's exit */
	free(d);
}

void dnn_version(const struct dnn *d, char *out, size_t len)
{
	const size_t v = d->api.cudnnGetVersion();   /* major * 10000 + minor * 100 + patch */

	snprintf(out, len, "%zu.%zu.%zu", v / 10000, v / 100 % 100, v % 100);
}

void dnn_set_tf32(struct dnn *d, int tf32)
{
	if (tf32 == d->tf32)   /* the plans are this math's */
		return;
	for (int i = 0; i < DNN_PLANS; i++)
		plan_free(d, &d->plan[i]);
	d->tf32 = tf32;
}

/* The plan of (layer, rows) made (planned or refused), or NULL. */
static struct dnn_plan *plan_of(const struct dnn *d, int layer, int rows)
{
	for (int i = 0; i < DNN_PLANS; i++)
		if (d->plan[i].rows == rows && d->plan[i].layer == layer)
			return (struct dnn_plan *)&d->plan[i];
	return NULL;
}

/* The plan of (c->layer, rows): the one made, else an empty slot or the
 * oldest, emptied, with *fresh 1. */
static struct dnn_plan *plan_slot(struct dnn *d, const struct dnn_conv *c, int rows, int *fresh)
{
	struct dnn_plan *old = plan_of(d, c->layer, rows);

	*fresh = !old;
	if (old)
		return old;
	old = &d->plan[0];
	for (int i = 1; i < DNN_PLANS; i++)
		if (old->rows && (!d->plan[i].rows || d->plan[i].age < old->age))
			old = &d->plan[i];
	plan_free(d, old);
	return old;
}

/* Plan p's descriptors for c at rows, in d's math mode. Returns 0 or
 * -ENOTSUP (cuDNN refuses the shape). */
static int plan_descs(struct dnn *d, struct dnn_plan *p, const struct dnn_conv *c, int rows,
		      char *err, size_t errlen)
{
	const int pad = c->k / 2;

	DNN_CALL(-ENOTSUP, cudnnCreateTensorDescriptor, &p->xd);
	DNN_CALL(-ENOTSUP, cudnnCreateTensorDescriptor, &p->yd);
	DNN_CALL(-ENOTSUP, cudnnCreateFilterDescriptor, &p->wd);
	DNN_CALL(-ENOTSUP, cudnnSetTensor4dDescriptor, p->xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
		 rows, c->c, c->h, c->w);
	DNN_CALL(-ENOTSUP, cudnnSetTensor4dDescriptor, p->yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
		 rows, c->f, c->h, c->w);
	DNN_CALL(-ENOTSUP, cudnnSetFilter4dDescriptor, p->wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
		 c->f, c->c, c->k, c->k);
	for (int i = 0; i < DNN_PRODUCTS; i++) {
		DNN_CALL(-ENOTSUP, cudnnCreateConvolutionDescriptor, &p->cd[i]);
		DNN_CALL(-ENOTSUP, cudnnSetConvolution2dDescriptor, p->cd[i], pad, pad, 1, 1, 1, 1,
			 CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
		/* FP32 as the CPU computes it, or tensor cores (TF32: cuDNN's
		 * default math on FP32 data, what PyTorch's allow_tf32 asks for) */
		DNN_CALL(-ENOTSUP, cudnnSetConvolutionMathType, p->cd[i],
			 d->tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH);
	}
	return 0;
}

/* The first of Find's n results (fastest first) that ran, is deterministic
 * and fits the workspace: its index, or -1. */
template <typename R>
static int first_usable(const R *res, int n)
{
	for (int i = 0; i < n; i++)
		if (res[i].status == CUDNN_STATUS_SUCCESS && res[i].determinism == CUDNN_DETERMINISTIC &&
		    res[i].memory <= DNN_WS_BYTES)
			return i;
	return -1;
}

/* Which of Find's n results for product what of p to use: its algorithm
 * and time into p, and the math it was found with into p's descriptor of
 * what (as PyTorch does: an algorithm runs as it was timed); what planned.
 * Returns 0, or -ENOTSUP with why. */
template <typename R>
static int pick(struct dnn *d, struct dnn_plan *p, enum dnn_product what, const R *res, int n,
		char *err, size_t errlen)
{
	static const char *const name[DNN_PRODUCTS] = { "forward", "input-gradient",
							"weight-gradient" };
	const int i = first_usable(res, n);

	if (i < 0)
		return fail(-ENOTSUP, err, errlen,
			    "cudnn: no deterministic %s algorithm within %u MiB of workspace (%d tried)",
			    name[what], DNN_WS_BYTES >> 20, n);
	DNN_CALL(-ENOTSUP, cudnnSetConvolutionMathType, p->cd[what], res[i].mathType);
	p->algo[what] = (int)res[i].algo;
	p->ms[what] = res[i].time;
	p->ok[what] = 1;
	return 0;
}

/* Finds the algorithms of p that b asks for and p lacks (DNN_CALL's s_
 * is each Find's status). Returns 0, -ENOTSUP or -EIO (find_rc). */
static int plan_find(struct dnn *d, struct dnn_plan *p, const struct dnn_bufs *b, char *err,
		     size_t errlen)
{
	int n = 0;

	if (!p->ok[DNN_FORWARD]) {
		cudnnConvolutionFwdAlgoPerf_t r[DNN_ALGOS];

		DNN_CALL(find_rc(s_), cudnnFindConvolutionForwardAlgorithmEx, d->h, p->xd, b->x, p->wd,
			 b->w, p->cd[DNN_FORWARD], p->yd, b->y, DNN_ALGOS, &n, r, d->ws, DNN_WS_BYTES);
		TRY(pick(d, p, DNN_FORWARD, r, n, err, errlen));
	}
	if (b->dx && !p->ok[DNN_DATA]) {
		cudnnConvolutionBwdDataAlgoPerf_t r[DNN_ALGOS];

		DNN_CALL(find_rc(s_), cudnnFindConvolutionBackwardDataAlgorithmEx, d->h, p->wd, b->w,
			 p->yd, b->dy, p->cd[DNN_DATA], p->xd, b->dx, DNN_ALGOS, &n, r, d->ws,
			 DNN_WS_BYTES);
		TRY(pick(d, p, DNN_DATA, r, n, err, errlen));
	}
	if (b->dw && !p->ok[DNN_FILTER]) {
		cudnnConvolutionBwdFilterAlgoPerf_t r[DNN_ALGOS];

		DNN_CALL(find_rc(s_), cudnnFindConvolutionBackwardFilterAlgorithmEx, d->h, p->xd, b->x,
			 p->yd, b->dy, p->cd[DNN_FILTER], p->wd, b->dw, DNN_ALGOS, &n, r, d->ws,
			 DNN_WS_BYTES);
		TRY(pick(d, p, DNN_FILTER, r, n, err, errlen));
	}
	return 0;
}

int dnn_plan(struct dnn *d, const struct dnn_conv *c, int rows, const struct dnn_bufs *b,
	     char *err, size_t errlen)
{
	cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
	struct dnn_plan *p;
	int fresh, rc;

	p = plan_slot(d, c, rows, &fresh);
	if (!fresh) {
		if (p->why[0])
			return fail(-ENOTSUP, err, errlen, "%s", p->why);
		if (p->ok[DNN_FORWARD] && (p->ok[DNN_FILTER] || !b->dw) && (p->ok[DNN_DATA] || !b->dx))
			return 0;
	}
	CUDA_CHECK(cudaStreamIsCapturing(d->stream, &cap));
	if (cap != cudaStreamCaptureStatusNone) {   /* Find would end the capture */
		if (fresh)
			plan_free(d, p);
		return fail(-ENOTSUP, err, errlen, "cudnn: layer %d at %d rows was not planned before "
			    "the capture", c->layer + 1, rows);
	}
	if (fresh) {
		p->layer = c->layer;
		p->rows = rows;
		p->age = ++d->made;
		rc = plan_descs(d, p, c, rows, err, errlen);
		if (rc < 0) {   /* the slot keeps the refusal, its descriptors go */
			plan_free(d, p);
			p->layer = c->layer;
			p->rows = rows;
			p->age = d->made;
			snprintf(p->why, sizeof p->why, "%s", err);
			return rc;
		}
	}
	rc = plan_find(d, p, b, err, errlen);
	if (rc == -ENOTSUP)
		snprintf(p->why, sizeof p->why, "%s", err);
	return rc;
}

/* The plan of (c->layer, rows) with product what planned (dnn_plan), or
 * NULL with -ENOTSUP in *rc and err. */
static struct dnn_plan *planned(struct dnn *d, const struct dnn_conv *c, int rows,
				enum dnn_product what, int *rc, char *err, size_t errlen)
{
	struct dnn_plan *p = plan_of(d, c->layer, rows);

	if (p && !p->why[0] && p->ok[what])
		return p;
	*rc = fail(-ENOTSUP, err, errlen, "cudnn: layer %d at %d rows is not planned", c->layer + 1,
		   rows);
	return NULL;
}

void dnn_describe(const struct dnn *d, const struct dnn_conv *c, int rows, char *out, size_t len)
{
	static const char *const fwd[] = { "IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM",
					   "DIRECT", "FFT", "FFT_TILING", "WINOGRAD",
					   "WINOGRAD_NONFUSED" };
	static const char *const data[] = { "ALGO_0", "ALGO_1", "FFT", "FFT_TILING", "WINOGRAD",
					    "WINOGRAD_NONFUSED" };
	static const char *const filter[] = { "ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD",
					      "WINOGRAD_NONFUSED", "FFT_TILING" };
	const struct dnn_plan *p = plan_of(d, c->layer, rows);

	if (!p || p->why[0] || !p->ok[DNN_FORWARD]) {
		snprintf(out, len, "%s", p && p->why[0] ? p->why : "not planned");
		return;
	}
#define DNN_NAME(t, a) ((unsigned)(a) < sizeof t / sizeof t[0] ? t[a] : "?")
	char dx[80] = "none (the first layer)", dw[80] = "not planned (evaluations only)";

	if (p->ok[DNN_DATA])
		snprintf(dx, sizeof dx, "%s %.3f ms", DNN_NAME(data, p->algo[DNN_DATA]),
			 p->ms[DNN_DATA]);
	if (p->ok[DNN_FILTER])
		snprintf(dw, sizeof dw, "%s %.3f ms", DNN_NAME(filter, p->algo[DNN_FILTER]),
			 p->ms[DNN_FILTER]);
	snprintf(out, len, "forward %s %.3f ms, input gradient %s, weight gradient %s",
		 DNN_NAME(fwd, p->algo[DNN_FORWARD]), p->ms[DNN_FORWARD], dx, dw);
#undef DNN_NAME
}

/* Product what of c at rows, as planned. Returns 0 or -errno. */
static int run(struct dnn *d, const struct dnn_conv *c, int rows, enum dnn_product what,
	       const struct dnn_bufs *b, char *err, size_t errlen)
{
	const float one = 1.0f, zero = 0.0f;
	int rc = 0;
	struct dnn_plan *p = planned(d, c, rows, what, &rc, err, errlen);

	if (!p)
		return rc;
	switch (what) {
	case DNN_FORWARD:
		DNN_CALL(-EIO, cudnnConvolutionForward, d->h, &one, p->xd, b->x, p->wd, b->w,
			 p->cd[DNN_FORWARD], (cudnnConvolutionFwdAlgo_t)p->algo[DNN_FORWARD], d->ws,
			 DNN_WS_BYTES, &zero, p->yd, b->y);
		break;
	case DNN_DATA:
		DNN_CALL(-EIO, cudnnConvolutionBackwardData, d->h, &one, p->wd, b->w, p->yd, b->dy,
			 p->cd[DNN_DATA], (cudnnConvolutionBwdDataAlgo_t)p->algo[DNN_DATA], d->ws,
			 DNN_WS_BYTES, &zero, p->xd, b->dx);
		break;
	case DNN_FILTER:
		DNN_CALL(-EIO, cudnnConvolutionBackwardFilter, d->h, &one, p->xd, b->x, p->yd, b->dy,
			 p->cd[DNN_FILTER], (cudnnConvolutionBwdFilterAlgo_t)p->algo[DNN_FILTER],
			 d->ws, DNN_WS_BYTES, &zero, p->wd, b->dw);
		break;
	}
	return 0;
}

int dnn_forward(struct dnn *d, const struct dnn_conv *c, int rows, const struct dnn_bufs *b,
		char *err, size_t errlen)
{
	return run(d, c, rows, DNN_FORWARD, b, err, errlen);
}

int dnn_backward_data(struct dnn *d, const struct dnn_conv *c, int rows, const struct dnn_bufs *b,
		      char *err, size_t errlen)
{
	return run(d, c, rows, DNN_DATA, b, err, errlen);
}

int dnn_backward_filter(struct dnn *d, const struct dnn_conv *c, int rows,
			const struct dnn_bufs *b, char *err, size_t errlen)
{
	return run(d, c, rows, DNN_FILTER, b, err, errlen);
}
