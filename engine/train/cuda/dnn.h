/* dnn.h - a conv layer's three products through cuDNN, for gpu.cu
 *
 * The forward convolution, its input gradient and its weight gradient of a
 * k x k, stride-1, same-padded conv over NCHW FP32 tensors, each one
 * cuDNN call (implicit GEMM and its kin) where gpu.cu's own path is an
 * im2col matrix and cuBLAS products over it (a conv of C x H x W inputs
 * reads and writes C k^2 x H W floats an image through it, 800 x 196 for
 * the example's second conv, each way). The weights are gpu.cu's layout as
 * they are (F x C x k x k: cuDNN's KCRS), the outputs NCHW.
 *
 * libcudnn.so.9 is opened at dnn_create (dlopen), not linked: a machine
 * without it, or a cuDNN that has no algorithm for a layer, costs the
 * optimisation, never the run (gpu.cu keeps its own path and says why).
 * Each (layer, rows) is planned once, the first time it is asked for
 * outside a stream capture: cuDNN's Find runs each algorithm on the
 * call's own buffers, and the fastest deterministic one that fits
 * DNN_WS_BYTES is kept (an algorithm that sums with atomics would make a
 * graphed step differ from an ungraphed one). Over tests/unit/gpu_emu.h
 * the same code runs on the CPU. */
#ifndef DLT_CUDA_DNN_H
#define DLT_CUDA_DNN_H

#include <stddef.h>

#define DNN_WS_BYTES (64u << 20)   /* cuDNN's workspace: algorithms that need more are passed over */
#define DNN_PLANS 32                /* (layer, rows) shapes kept; the oldest goes first */

struct dnn;   /* a cuDNN handle bound to one stream, its workspace and plans */

/* One conv layer: C x H x W in, F x H x W out. */
struct dnn_conv {
	int layer;     /* its index in the net: the plans' key with the rows */
	int c, h, w;   /* input planes and their size */
	int f, k;      /* filters, k x k taps (odd, as the net makes them: padding k / 2) */
};

/* The buffers of a conv's three products at one batch of rows (device
 * memory, NCHW; w F x C x k x k). dnn_plan's Find writes y, dx and dw. */
struct dnn_bufs {
	const float *x;   /* rows x C x H x W: the input */
	const float *w;   /* the weights */
	float *y;         /* rows x F x H x W: the product (no bias) */
	const float *dy;  /* rows x F x H x W: the product's gradient */
	float *dx;        /* rows x C x H x W: the input gradient (NULL: never asked) */
	float *dw;        /* F x C x k x k: the weight gradient (NULL in dnn_plan: not
			     asked now, an evaluation's rows) */
};

/* Opens libcudnn.so.9, makes a handle on stream and a workspace. Returns
 * 0; -ENOTSUP when cuDNN is not there or will not start (why in err: the
 * optimisation is off, the run goes on); another -errno when the device
 * fails. */
int dnn_create(struct dnn **out, cudaStream_t stream, char *err, size_t errlen);

/* Frees d and everything it holds (NULL: nothing). */
void dnn_destroy(struct dnn *d);

/* cuDNN's version as "9.19.0" into out. */
void dnn_version(const struct dnn *d, char *out, size_t len);

/* tf32 1: the products on tensor cores (TF32), 0: FP32 FMA only, as the
 * CPU computes (the default). Drops the plans when that changes (an
 * algorithm is chosen per math mode). */
void dnn_set_tf32(struct dnn *d, int tf32);

/* Plans c at rows (Find for each product b asks for), unless planned.
 * Returns 0; -ENOTSUP when cuDNN has no algorithm for one of them, or
 * when the stream is capturing (Find synchronises; a capture uses what
 * was planned before it); another -errno when cuDNN fails. */
int dnn_plan(struct dnn *d, const struct dnn_conv *c, int rows, const struct dnn_bufs *b,
	     char *err, size_t errlen);

/* What c at rows runs, as planned, into out: "forward ALGO 0.021 ms,
 * input gradient ALGO 0.030 ms, weight gradient ALGO 0.040 ms" (each
 * algorithm as cuDNN names it, and the time its Find measured), or why
 * it is not planned. */
void dnn_describe(const struct dnn *d, const struct dnn_conv *c, int rows, char *out, size_t len);

/* The three products at rows, as planned (dnn_plan first: -ENOTSUP when
 * it was not). Each returns 0 or -errno. */
int dnn_forward(struct dnn *d, const struct dnn_conv *c, int rows, const struct dnn_bufs *b,
		char *err, size_t errlen);
int dnn_backward_data(struct dnn *d, const struct dnn_conv *c, int rows, const struct dnn_bufs *b,
		      char *err, size_t errlen);
int dnn_backward_filter(struct dnn *d, const struct dnn_conv *c, int rows,
			const struct dnn_bufs *b, char *err, size_t errlen);

#endif
