/* calib.cu - what one GPU measures for the estimator (gpu.h's dlt_gpu_calibrate,
 * run by dlh-calib --phase gpu), with the backend's own calls: cuBLAS sgemm
 * in the forms gpu.cu's gemm() makes, its launch of small kernels on one
 * stream, cudaStreamSynchronize, pageable host-to-device copies of a batch,
 * and the device memory the context, cuBLAS and NCCL take
 *
 * Times are host wall clock around work the host waits for (as a step
 * waits), each the best of a few batches: on a shared machine other load
 * only ever adds. Compiled by nvcc into dlh-train-cuda.so, and as plain C++
 * over tests/unit/gpu_emu.h into the emulated dlh-calib (make), so the same
 * code runs on every build. */
#ifndef DLT_GPU_EMULATE
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#define LAUNCH(k, blocks, threads, stream, ...) k<<<(blocks), (threads), 0, (stream)>>>(__VA_ARGS__)
#define LAUNCH_SYNC LAUNCH
#endif

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define restrict __restrict__   /* the C headers use C99's restrict */
#include "engine/train/cuda/check.h"
#include "engine/train/gpu.h"
#undef restrict

#define CAL_THREADS 256          /* threads per block, as GPU_THREADS */
#define CAL_MAX_BLOCKS 65535     /* grid cap, as GPU_MAX_BLOCKS */
#define CAL_BATCHES 3            /* timed batches; the best is kept */
#define CAL_BATCH_S 0.002        /* seconds of calls per timed batch, at least */
#define CAL_LAUNCHES 1000        /* kernels per launch-cost batch */
#define CAL_SYNCS 200            /* kernel + synchronise rounds per batch */
#define CAL_GRAPH_CALLS 16       /* calls captured in a timing graph */
#define CAL_GRAPH_REPLAYS 4      /* its replays queued back to back per wait */
#define CAL_H2D_BIG (16L << 20)  /* bytes of the large host-to-device copy */
#define CAL_AR_SIZES 5           /* allreduce sizes timed: 4 KiB to 64 MiB */
/* the direct conv timed (direct_s): a CNN's first, 32 filters of 1 x 5x5 on
 * 28 x 28 images, at a batch of CAL_DIRECT_N */
#define CAL_DIRECT_F 32
#define CAL_DIRECT_K 5
#define CAL_DIRECT_HW 28
#ifdef DLT_GPU_EMULATE
/* the emulation's GEMMs run on one core: the grid's large shapes would take
 * minutes, and the emulated figures are for the tests, not for planning */
#define CAL_MAX_MNK (1L << 21)
#define CAL_MAX_OPERAND (1L << 22)   /* floats of an operand, at most (the large copy's) */
#define CAL_MAX_DIM 2048             /* nor a side past the CPU's grid (its neighbours') */
#define CAL_BW_MAX (4L << 20)    /* and its elementwise passes stop at 4 MiB */
#define CAL_DIRECT_N 1           /* and its direct conv is one image's */
#else
/* larger shapes are not timed (they run at peak): the grid's every shape
 * (2048^3; an H200 record with 2^30 here rated a 512 x 4096 x 4096 GEMM by
 * its smaller neighbours, and a large MLP's step 28% slow) */
#define CAL_MAX_MNK (1L << 33)
/* nor shapes with an operand past 64M floats (the three buffers: 768 MiB),
 * whose rate their neighbours give: a conv's im2col product of 800 x 25088
 * has 20M */
#define CAL_MAX_OPERAND (1L << 26)
#define CAL_MAX_DIM (1L << 30)
#define CAL_BW_MAX (1L << 40)
#define CAL_DIRECT_N 128
#endif

#define BLAS_CHECK(call) do { cublasStatus_t s_ = (call); if (s_ != CUBLAS_STATUS_SUCCESS) \
	return fail(-EIO, err, errlen, "cublas: %s: status %d", #call, (int)s_); } while (0)
#define NCCL_CHECK(call) do { ncclResult_t r_ = (call); if (r_ != ncclSuccess) \
	return fail(-EIO, err, errlen, "nccl: %s: %s", #call, ncclGetErrorString(r_)); } while (0)

/* Monotonic seconds. */
static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- kernels ---- */

/* Nothing: the cost of a launch. */
__global__ void k_nop(int unused)
{
	(void)unused;
}

/* y = 2 x over n floats, grid-stride: an elementwise layer pass. */
__global__ void k_scale(float *y, const float *x, size_t n)
{
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		y[i] = 2.0f * x[i];
}

/* x = v over n floats. */
__global__ void k_fill(float *x, float v, size_t n)
{
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		x[i] = v;
}

static unsigned blocks_for(size_t n)
{
	size_t b = (n + CAL_THREADS - 1) / CAL_THREADS;

	return (unsigned)(b < 1 ? 1 : b > CAL_MAX_BLOCKS ? CAL_MAX_BLOCKS : b);
}

#include "engine/train/cuda/conv.cuh"

/* ---- what is measured ---- */

/* What the measurements share. */
struct cal {
	cudaStream_t s;
	cublasHandle_t blas;
	float *a, *b, *c;          /* GEMM operands: the grid's largest square, or fewer */
	size_t mat;                /* floats of each */
	char *err;
	size_t errlen;
};

/* Free device memory now, into *free_b. */
static int mem_free(double *free_b, double *total_b, char *err, size_t errlen)
{
	size_t f = 0, t = 0;

	CUDA_CHECK(cudaMemGetInfo(&f, &t));
	*free_b = (double)f;
	if (total_b)
		*total_b = (double)t;
	return 0;
}

/* Row-major C = op(A) op(B) of m x n x k in form (ta, tb), as gpu.cu's
 * gemm(): cuBLAS computes C^T with the operands swapped. */
static int gemm(struct cal *x, int ta, int tb, int m, int n, int k)
{
	const float one = 1.0f, zero = 0.0f;
	char *err = x->err;
	size_t errlen = x->errlen;

	BLAS_CHECK(cublasSgemm(x->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
			       n, m, k, &one, x->b, tb ? k : n, x->a, ta ? m : k, &zero, x->c, n));
	return 0;
}

/* Seconds per call of what enqueue() queues on x->s, as a node of a CUDA
 * graph, which is how a training step runs it (dlt_gpu_step replays the
 * step's graph): CAL_GRAPH_CALLS calls captured once, the graph replayed
 * CAL_GRAPH_REPLAYS times back to back per wait; the best of CAL_BATCHES
 * batches of at least CAL_BATCH_S. So the figure is the device's time of a
 * call with a graph node's overhead, not the host's pace of launching it
 * (which bounds a small GEMM launched alone: kernel_s and more). */
template <typename F>
static int graph_s(struct cal *x, F enqueue, double *out)
{
	char *err = x->err;
	size_t errlen = x->errlen;
	cudaGraph_t graph = NULL;
	cudaGraphExec_t exec = NULL;
	cudaError_t e;
	double best = INFINITY;
	int rc = 0;

	/* one call outside the capture first: a kernel's module loads lazily at
	 * its first launch (CUDA_MODULE_LOADING=LAZY, the default), which a
	 * capture takes only on drivers of CUDA 12.3 and later; and cuBLAS sets
	 * up a shape's kernel then (a step's graph is captured likewise, after
	 * a warm-up step) */
	TRY(enqueue());
	CUDA_CHECK(cudaStreamSynchronize(x->s));
	CUDA_CHECK(cudaStreamBeginCapture(x->s, cudaStreamCaptureModeThreadLocal));
	for (int i = 0; i < CAL_GRAPH_CALLS && !rc; i++)
		rc = enqueue();
	e = cudaStreamEndCapture(x->s, &graph);   /* ended whatever enqueue did */
	if (rc < 0 || e != cudaSuccess) {
		if (graph)
			cudaGraphDestroy(graph);
		return rc < 0 ? rc : fail(cuda_rc(e), err, errlen, "cuda: a timing graph's capture: %s",
					  cudaGetErrorString(e));
	}
	e = cudaGraphInstantiate(&exec, graph, 0);
	cudaGraphDestroy(graph);
	if (e != cudaSuccess)
		return fail(cuda_rc(e), err, errlen, "cuda: a timing graph: %s", cudaGetErrorString(e));
	for (int r = 0; r <= CAL_BATCHES && e == cudaSuccess; r++) {   /* the first batch warms */
		double t0 = now_s(), t = 0.0;
		long calls = 0;

		do {
			for (int j = 0; j < CAL_GRAPH_REPLAYS && e == cudaSuccess; j++) {
				e = cudaGraphLaunch(exec, x->s);
				calls += CAL_GRAPH_CALLS;
			}
			if (e == cudaSuccess)
				e = cudaStreamSynchronize(x->s);
			t = now_s() - t0;
		} while (e == cudaSuccess && t < CAL_BATCH_S);
		if (r && e == cudaSuccess && t / (double)calls < best)
			best = t / (double)calls;
	}
	cudaGraphExecDestroy(exec);
	if (e != cudaSuccess)
		return fail(cuda_rc(e), err, errlen, "cuda: a timing graph's replay: %s",
			    cudaGetErrorString(e));
	*out = best;
	return 0;
}

/* Seconds per call of the m x n x k sgemm of form (ta, tb) in a step's
 * graph (graph_s). */
static int gemm_s(struct cal *x, int ta, int tb, int m, int n, int k, double *out)
{
	return graph_s(x, [&] { return gemm(x, ta, tb, m, n, k); }, out);
}

/* The grid of in->dims in each form into out->gemm; shapes over CAL_MAX_MNK,
 * with an operand past x->mat floats or a side past CAL_MAX_DIM take the
 * best of their smaller neighbours (large shapes saturate). */
static int gemm_grid(struct cal *x, const struct dlt_gpu_cal_in *in, struct dlt_gpu_cal *out)
{
	static const int ta[DLT_GPU_CAL_FORMS] = { 0, 0, 1, 0 }, tb[DLT_GPU_CAL_FORMS] = { 0, 1, 0, 0 };
	const int *d = in->dims;
	char *err = x->err;
	size_t errlen = x->errlen;

	for (int f = 0; f < DLT_GPU_CAL_FORMS; f++) {
		/* the last form: the first's with the tensor cores' TF32 math */
		BLAS_CHECK(cublasSetMathMode(x->blas, f == DLT_GPU_CAL_FORMS - 1 ?
					     CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
		for (int i = 0; i < in->ndims; i++)
			for (int j = 0; j < in->ndims; j++)
				for (int l = 0; l < in->ndims; l++) {
					float (*g)[DLT_GPU_CAL_DIMS][DLT_GPU_CAL_DIMS] = out->gemm[f];
					double s = INFINITY;

					const double m = d[i], n = d[j], k = d[l];

					if (m * n * k <= (double)CAL_MAX_MNK && m * k <= (double)x->mat &&
					    k * n <= (double)x->mat && m * n <= (double)x->mat &&
					    fmax(m, fmax(n, k)) <= (double)CAL_MAX_DIM) {
						TRY(gemm_s(x, ta[f], tb[f], d[i], d[j], d[l], &s));
						g[i][j][l] = (float)(2.0 * d[i] * d[j] * d[l] / s);
					} else {   /* i, j, l ascend: the neighbours are done */
						float v = i ? g[i - 1][j][l] : 0.0f;

						v = j && g[i][j - 1][l] > v ? g[i][j - 1][l] : v;
						g[i][j][l] = l && g[i][j][l - 1] > v ? g[i][j][l - 1] : v;
					}
					if (f < DLT_GPU_CAL_FORMS - 1 && g[i][j][l] > out->gemm_flops)
						out->gemm_flops = g[i][j][l];   /* FP32's */
				}
	}
	BLAS_CHECK(cublasSetMathMode(x->blas, CUBLAS_DEFAULT_MATH));
	return 0;
}

/* The launch of an empty kernel (back to back), and a synchronisation of the
 * stream after one, the launch not counted. */
static int launch_sync(struct cal *x, struct dlt_gpu_cal *out)
{
	char *err = x->err;
	size_t errlen = x->errlen;
	double best_k = INFINITY, best_s = INFINITY;

	for (int r = 0; r <= CAL_BATCHES; r++) {
		double t0 = now_s();

		for (int i = 0; i < CAL_LAUNCHES; i++)
			LAUNCH(k_nop, 1, 1, x->s, i);
		double t1 = now_s();   /* the host's side: the queue is deep enough */
		CUDA_CHECK(cudaGetLastError());
		CUDA_CHECK(cudaStreamSynchronize(x->s));
		if (r)
			best_k = fmin(best_k, (t1 - t0) / CAL_LAUNCHES);
		t0 = now_s();
		for (int i = 0; i < CAL_SYNCS; i++) {
			LAUNCH(k_nop, 1, 1, x->s, i);
			CUDA_CHECK(cudaStreamSynchronize(x->s));
		}
		if (r)
			best_s = fmin(best_s, (now_s() - t0) / CAL_SYNCS);
	}
	/* a floor of a nanosecond: 0 is the cache's "not measured", and a sync
	 * that costs no more than the launch it waits for (as over the host
	 * emulation) is measured all the same */
	out->kernel_s = fmax(best_k, 1e-9);
	out->sync_s = fmax(best_s - best_k, 1e-9);
	/* and a node of a step's graph: the least any kernel of it costs */
	TRY(graph_s(x, [&] {
		LAUNCH(k_nop, 1, 1, x->s, 0);
		return 0;
	}, &out->node_s));
	out->node_s = fmax(out->node_s, 1e-9);
	return 0;
}

/* Bytes/s of k_scale over each working set of in->sizes (read + written),
 * each pass a node of a graph (graph_s), as in a training step. */
static int elementwise(struct cal *x, const struct dlt_gpu_cal_in *in, struct dlt_gpu_cal *out)
{
	char *err = x->err;
	size_t errlen = x->errlen;
	long most = 0;
	float *buf;

	for (int i = 0; i < in->nsizes; i++)
		most = in->sizes[i] > most ? in->sizes[i] : most;
	most = most < CAL_BW_MAX ? most : CAL_BW_MAX;
	CUDA_CHECK(cudaMalloc((void **)&buf, (size_t)most));
	LAUNCH(k_fill, blocks_for((size_t)most / 4), CAL_THREADS, x->s, buf, 1.0f, (size_t)most / 4);
	for (int i = 0; i < in->nsizes; i++) {
		long bytes = in->sizes[i] < CAL_BW_MAX ? in->sizes[i] : CAL_BW_MAX;
		size_t n = (size_t)bytes / 8;   /* read n, write n */
		double best = INFINITY;

		TRY(graph_s(x, [&] {
			LAUNCH(k_scale, blocks_for(n), CAL_THREADS, x->s, buf + n, buf, n);
			return 0;
		}, &best));
		out->bw[i] = (double)(8 * n) / best;
	}
	CUDA_CHECK(cudaGetLastError());
	CUDA_CHECK(cudaFree(buf));
	return 0;
}

/* Seconds per output and tap of gpu.cu's direct conv product (conv.cuh)
 * with its bias, ReLU and 2 x 2 pool, and per pooled output and tap (and
 * bias) of its direct weight gradient, each call a node of a graph
 * (graph_s), at a CNN's first conv: the images, then the weights and
 * biases in x->a; the pooled outputs (also their gradient) in x->c, their
 * argmax in x->b and the gradient's parts after it. The operands are
 * positive, so every output passes the ReLU: the gradient's most work. */
static int direct(struct cal *x, struct dlt_gpu_cal *out)
{
	const int F = CAL_DIRECT_F, k = CAL_DIRECT_K, hw = CAL_DIRECT_HW, n = CAL_DIRECT_N;
	const int R = k * k, S = dlt_gpu_dw_parts(n, F), oh = hw / 2;
	const size_t outs = (size_t)F * (size_t)n * (size_t)(hw * hw), pooled = outs / 4;
	const size_t in = (size_t)n * (size_t)(hw * hw);
	const float *img = x->a, *w = x->a + in;
	int32_t *arg = (int32_t *)x->b;
	float *part = x->b + pooled;
	char *err = x->err;
	size_t errlen = x->errlen;
	double best = INFINITY;

	if (pooled + (size_t)S * (size_t)F * (size_t)(R + 1) > x->mat ||
	    in + (size_t)F * (size_t)(R + 1) > x->mat)
		return fail(-EINVAL, err, errlen, "gpu calibration: the direct conv's %zu outputs and "
			    "parts, or its %zu inputs and weights, past the operands' %zu floats",
			    pooled + (size_t)S * (size_t)F * (size_t)(R + 1),
			    in + (size_t)F * (size_t)(R + 1), x->mat);
	TRY(graph_s(x, [&] {
		LAUNCH(k_conv_direct<uint32_t>, blocks_for(pooled), CAL_THREADS, x->s, x->c, arg, img, w,
		       w + (size_t)F * (size_t)R, 1, hw, hw, k, F, n, 1, 2, oh, oh);
		return 0;
	}, &best));
	CUDA_CHECK(cudaGetLastError());
	out->direct_s = best / ((double)outs * (double)R);
	TRY(graph_s(x, [&] {
		LAUNCH_SYNC(k_conv_pool_dw<uint32_t>, (unsigned)(S * F), DLT_CONV_DW_THREADS, x->s, part,
			    x->c, arg, x->c, img, 1, hw, hw, k, F, n, S, oh, oh);
		return 0;
	}, &best));
	CUDA_CHECK(cudaGetLastError());
	out->direct_dw_s = best / ((double)pooled * (double)(R + 1));
	return 0;
}

/* Host-to-device copies from pageable memory (the trainer's batches):
 * the latency of 4 bytes and the rate of CAL_H2D_BIG. */
static int h2d(struct cal *x, struct dlt_gpu_cal *out)
{
	char *err = x->err;
	size_t errlen = x->errlen;
	char *host = (char *)malloc(CAL_H2D_BIG);
	double best_small = INFINITY, best_big = INFINITY;

	if (!host)
		return fail(-ENOMEM, err, errlen, "cannot allocate %ld host bytes", CAL_H2D_BIG);
	memset(host, 1, CAL_H2D_BIG);
	for (int r = 0; r <= CAL_BATCHES; r++) {
		double t0 = now_s();

		for (int i = 0; i < 100; i++) {
			CUDA_CHECK(cudaMemcpyAsync(x->c, host, 4, cudaMemcpyHostToDevice, x->s));
			CUDA_CHECK(cudaStreamSynchronize(x->s));
		}
		double t1 = now_s();
		CUDA_CHECK(cudaMemcpyAsync(x->c, host, CAL_H2D_BIG, cudaMemcpyHostToDevice, x->s));
		CUDA_CHECK(cudaStreamSynchronize(x->s));
		double t2 = now_s();
		if (r) {
			best_small = fmin(best_small, (t1 - t0) / 100);
			best_big = fmin(best_big, t2 - t1);
		}
	}
	free(host);
	out->h2d_s = best_small;
	out->h2d_bw = (double)CAL_H2D_BIG / fmax(best_big - best_small, 1e-9);
	return 0;
}

/* The NCCL communicator a run makes (its time and memory on device 0) and,
 * over 2 or more devices, the allreduce's alpha-beta fit. */
static int nccl(const struct dlt_gpu_cal_in *in, struct dlt_gpu_cal *out, char *err, size_t errlen)
{
	enum { MAX_GPUS = 16 };
	int n = in->gpus < 2 ? 1 : in->gpus > MAX_GPUS ? MAX_GPUS : in->gpus;
	ncclComm_t comm[MAX_GPUS];
	cudaStream_t st[MAX_GPUS];
	float *buf[MAX_GPUS];
	double before, after, t0;
	const size_t most = (size_t)64 << 20;

	TRY(mem_free(&before, NULL, err, errlen));
	t0 = now_s();
	if (n == 1) {
		ncclUniqueId id;

		NCCL_CHECK(ncclGetUniqueId(&id));
		NCCL_CHECK(ncclCommInitRank(&comm[0], 1, id, 0));
	} else {
		NCCL_CHECK(ncclCommInitAll(comm, n, NULL));
	}
	out->nccl_s = now_s() - t0;
	CUDA_CHECK(cudaSetDevice(0));
	TRY(mem_free(&after, NULL, err, errlen));
	out->nccl_bytes = fmax(before - after, 0.0);
	if (n > 1) {
		double xs[CAL_AR_SIZES], ys[CAL_AR_SIZES];

		for (int d = 0; d < n; d++) {
			CUDA_CHECK(cudaSetDevice(d));
			CUDA_CHECK(cudaStreamCreateWithFlags(&st[d], cudaStreamNonBlocking));
			CUDA_CHECK(cudaMalloc((void **)&buf[d], most));
			CUDA_CHECK(cudaMemsetAsync(buf[d], 0, most, st[d]));
		}
		for (int k = 0; k < CAL_AR_SIZES; k++) {
			size_t bytes = (size_t)4096 << (3 * k) < most ? (size_t)4096 << (3 * k) : most;
			double best = INFINITY;

			for (int r = 0; r <= CAL_BATCHES; r++) {
				double t1 = now_s();
				const int reps = 5;

				for (int i = 0; i < reps; i++) {
					NCCL_CHECK(ncclGroupStart());
					for (int d = 0; d < n; d++)
						NCCL_CHECK(ncclAllReduce(buf[d], buf[d], bytes / 4, ncclFloat,
									 ncclSum, comm[d], st[d]));
					NCCL_CHECK(ncclGroupEnd());
				}
				for (int d = 0; d < n; d++) {
					CUDA_CHECK(cudaSetDevice(d));
					CUDA_CHECK(cudaStreamSynchronize(st[d]));
				}
				if (r)
					best = fmin(best, (now_s() - t1) / reps);
			}
			xs[k] = (double)bytes;
			ys[k] = best;
		}
		/* least squares t = alpha + beta bytes */
		double mx = 0, my = 0, sxx = 0, sxy = 0;
		for (int k = 0; k < CAL_AR_SIZES; k++) {
			mx += xs[k] / CAL_AR_SIZES;
			my += ys[k] / CAL_AR_SIZES;
		}
		for (int k = 0; k < CAL_AR_SIZES; k++) {
			sxx += (xs[k] - mx) * (xs[k] - mx);
			sxy += (xs[k] - mx) * (ys[k] - my);
		}
		out->ar_beta = sxx > 0 && sxy > 0 ? sxy / sxx : 0.0;
		out->ar_alpha = my - out->ar_beta * mx;
		if (out->ar_alpha < ys[0] / 2)   /* the fit's intercept is noise: the smallest call */
			out->ar_alpha = ys[0];
		for (int d = 0; d < n; d++) {
			CUDA_CHECK(cudaSetDevice(d));
			CUDA_CHECK(cudaFree(buf[d]));
			CUDA_CHECK(cudaStreamDestroy(st[d]));
		}
		CUDA_CHECK(cudaSetDevice(0));
	}
	for (int d = 0; d < n; d++)
		ncclCommDestroy(comm[d]);
	return 0;
}

extern "C" int dlt_gpu_calibrate(const struct dlt_gpu_cal_in *in, struct dlt_gpu_cal *out,
				 char *err, size_t errlen)
{
	struct cal x;
	struct cudaDeviceProp prop;
	double t0, before, after;
	int count = 0;

	memset(out, 0, sizeof *out);
	memset(&x, 0, sizeof x);
	if (in->ndims < 1 || in->ndims > DLT_GPU_CAL_DIMS || in->nsizes < 0 ||
	    in->nsizes > DLT_GPU_CAL_SIZES)
		return fail(-EINVAL, err, errlen, "gpu calibration: %d grid values, %d sizes",
			    in->ndims, in->nsizes);
	x.err = err;
	x.errlen = errlen;
	/* the context: what every rank pays before its first step */
	t0 = now_s();
	if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1)
		return fail(-ENODEV, err, errlen, "no NVIDIA GPU: the CUDA driver sees no device");
	if (in->gpus > count)
		return fail(-ENODEV, err, errlen, "gpu calibration: %d devices asked for, %d seen",
			    in->gpus, count);
	CUDA_CHECK(cudaSetDevice(0));
	CUDA_CHECK(cudaFree(0));
	out->ctx_s = now_s() - t0;
	TRY(mem_free(&before, &out->total_bytes, err, errlen));
	out->ctx_bytes = out->total_bytes - before;
	CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
	snprintf(out->name, sizeof out->name, "%s (sm_%d%d, %d SMs, %.0f GiB)", prop.name, prop.major,
		 prop.minor, prop.multiProcessorCount,
		 (double)prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
	CUDA_CHECK(cudaStreamCreateWithFlags(&x.s, cudaStreamNonBlocking));

	/* the operands first, so that cuBLAS's share is its own: each as large
	 * as the grid's largest square, or CAL_MAX_OPERAND floats */
	int big = in->dims[in->ndims - 1];
	x.mat = (size_t)big * (size_t)big;
	if (x.mat > (size_t)CAL_MAX_OPERAND)
		x.mat = (size_t)CAL_MAX_OPERAND;
	if (x.mat * sizeof(float) < (size_t)CAL_H2D_BIG)   /* a grid of small dims */
		x.mat = (size_t)CAL_H2D_BIG / sizeof(float);
	static_assert(CAL_H2D_BIG <= CAL_MAX_OPERAND * (long)sizeof(float),
		      "the large copy goes into an operand's buffer");
	CUDA_CHECK(cudaMalloc((void **)&x.a, x.mat * sizeof(float)));
	CUDA_CHECK(cudaMalloc((void **)&x.b, x.mat * sizeof(float)));
	CUDA_CHECK(cudaMalloc((void **)&x.c, x.mat * sizeof(float)));
	/* operands near 1/k: products stay normal numbers call after call */
	LAUNCH(k_fill, blocks_for(x.mat), CAL_THREADS, x.s, x.a, 1.0f / (float)big, x.mat);
	LAUNCH(k_fill, blocks_for(x.mat), CAL_THREADS, x.s, x.b, 0.5f, x.mat);
	CUDA_CHECK(cudaGetLastError());
	CUDA_CHECK(cudaStreamSynchronize(x.s));
	TRY(mem_free(&before, NULL, err, errlen));
	t0 = now_s();
	BLAS_CHECK(cublasCreate(&x.blas));
	BLAS_CHECK(cublasSetStream(x.blas, x.s));
	BLAS_CHECK(cublasSetMathMode(x.blas, CUBLAS_DEFAULT_MATH));   /* FP32, as gpu.cu */
	TRY(gemm(&x, 0, 1, 64, 64, 64));
	CUDA_CHECK(cudaStreamSynchronize(x.s));
	out->blas_s = now_s() - t0;
	TRY(mem_free(&after, NULL, err, errlen));
	out->blas_bytes = fmax(before - after, 0.0);

	int rc = launch_sync(&x, out);
	if (!rc)
		rc = h2d(&x, out);
	if (!rc)
		rc = elementwise(&x, in, out);
	if (!rc)
		rc = direct(&x, out);
	if (!rc)
		rc = gemm_grid(&x, in, out);
	cublasDestroy(x.blas);
	cudaFree(x.a);
	cudaFree(x.b);
	cudaFree(x.c);
	cudaStreamDestroy(x.s);
	if (!rc)
		rc = nccl(in, out, err, errlen);
	return rc;
}
