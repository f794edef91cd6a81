/* gpu.cu - the trainer's CUDA backend (gpu.h): cuBLAS GEMMs, layer kernels, optimizer, NCCL
 *
 * Every kernel is the GPU form of a loop of layers.c / optim.c, written so
 * that each output element is computed by one thread in the CPU's order of
 * operations (no atomics, so results do not depend on scheduling). Only
 * the GEMMs (cuBLAS, FP32 math mode: no TF32) and the transcendental
 * functions (expf, logf) may differ from the CPU by rounding. The file is
 * compiled with --fmad=false so that a * b + c rounds twice, as on the CPU.
 *
 * dlt_gpu_set_precision trades that for the tensor cores, in the GEMMs
 * only (dense layers and the im2col products of the convolutions): tf32
 * sets cuBLAS's TF32 math mode; bf16 casts each GEMM operand to BF16 (the
 * weights once after each update, from the FP32 master copy; activations
 * and deltas as a GEMM reads them) and calls cublasGemmEx with FP32
 * accumulation and FP32 output, so every other kernel, the gradients,
 * the allreduce and the optimizer stay FP32.
 *
 * All work of one rank goes to one stream, except the gradient allreduce
 * when buckets are set (dlt_gpu_add_bucket): then each bucket's
 * ncclAllReduce is queued on a second stream as soon as backward has
 * written its gradients (an event orders the two), so communication
 * overlaps the rest of backward, and the optimizer waits for the last
 * one. The host waits only where a result must come back (loss sums,
 * downloads).
 *
 * What changes from step to step and is not a buffer's contents (the step
 * number that keys the dropout masks, the learning rate, Adam's bias
 * corrections) is not a kernel argument: the host writes it into a small
 * block in device memory (struct gpu_step_vals, one copy per call) and the
 * kernels read it there. So one training step of dlt_gpu_step (forward,
 * loss, backward, the allreduces, the optimizer) can be captured into a
 * CUDA graph and replayed with one cudaGraphLaunch (dlt_gpu_set_graph):
 * the batch is copied into g->x and g->y and the block into g->vals before
 * each launch, the loss sums copied back after it, outside the graph. A
 * graph is made for one shape (rows, weight, optimizer, precision): the
 * first step of a shape runs launch by launch (the warm-up), the next of
 * the same shape captures it, and a step of another shape (the last
 * partial batch) runs launch by launch without dropping the graph. The
 * allreduces are captured with the rest (NCCL supports capture; the
 * bucketed ones on comm_stream become a branch of the graph, so they still
 * overlap backward): one launch per step, as every rank replays the same
 * collectives in the same order, captured or not. */
#ifndef DLT_GPU_EMULATE
#include <cuda.h>   /* the driver's types only (graph_node_name finds its calls) */
#include <cxxabi.h>
#include <cublas_v2.h>
#include <cublasLt.h>
#include <library_types.h>
#include <cuda_runtime.h>
#include <nccl.h>

/* kernel<<<blocks, threads, 0, stream>>>(args); LAUNCH_SYNC for kernels
 * that use __syncthreads (tests/unit/gpu_emu.h runs those one thread per
 * block) */
#define LAUNCH(k, blocks, threads, stream, ...) k<<<(blocks), (threads), 0, (stream)>>>(__VA_ARGS__)
#define LAUNCH_SYNC LAUNCH
#endif

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define restrict __restrict__   /* the C headers use C99's restrict */
#include "engine/train/cuda/check.h"
#include "engine/train/cuda/dnn.h"
#include "engine/train/gpu.h"
#include "engine/train/elem.h"
#undef restrict

#define GPU_THREADS 256          /* threads per block of the elementwise kernels */
#define GPU_MAX_BLOCKS 65535     /* grid cap; kernels loop grid-stride beyond it */
#define GPU_MAX_BUCKETS DLT_NET_MAX_LAYERS   /* gradient buckets (one per layer at most) */
#define GPU_QUEUE DLT_GPU_QUEUE   /* steps queued at once at most (dlt_gpu_queue) */
/* A profiled step's marks: its start, after the gather, after each
 * layer's forward, after the loss, after each layer's backward (the last
 * layer first), after the allreduce's wait, after the update. */
#define GPU_PROF_MARKS (2 * DLT_NET_MAX_LAYERS + 5)
#define PROF_START 0
#define PROF_GATHER 1
#define PROF_FWD(i) (2 + (i))
#define PROF_LOSS(nl) (2 + (nl))
#define PROF_BWD(nl, i) (3 + (nl) + ((nl) - 1 - (i)))
#define PROF_SUM(nl) (3 + 2 * (nl))
#define PROF_UPDATE(nl) (4 + 2 * (nl))

/* The per-step values the kernels read from device memory (g->vals), so a
 * captured step replays with each step's own. */
struct gpu_step_vals {
	uint64_t step;      /* global step: keys the dropout masks */
	float lr;           /* SGD, Nesterov: the learning rate */
	float adam_step;    /* Adam: lr / (1 - beta1^t) */
	float adam_ib;      /* Adam: 1 / sqrt(1 - beta2^t) */
	float pad;          /* (to 8 bytes) */
};

/* What a captured step bakes in besides the buffers' addresses: a step
 * with another key cannot replay the graph. */
struct gpu_graph_key {
	int rows;                   /* batch rows */
	int gather;                 /* 1: the batch is gathered from the device's rows */
	float weight;               /* the loss weight (rows / global batch) */
	struct dlt_optim optim;     /* the update and its constants */
};

/* The host side of a queued step: what its copies read and write, and
 * its events. A slot is taken again only after its step was waited for,
 * so its copies have run by then. */
struct gpu_slot {
	cudaEvent_t ev[5];        /* the step's phase boundaries (graphed: 0 and 4) */
	cudaEvent_t done;         /* its sums have landed in gsum */
	unsigned char *block;     /* pinned: its values and row numbers, for its one copy */
	float *gsum;              /* pinned: the global batch's loss sum and correct count */
	float *bx;                /* pinned, made by its first copied batch: its pixels
				     (max_batch x input floats) and then its labels */
	int replay;               /* 1: it ran as one graph launch */
};

/* Per-layer GPU buffers. */
struct gpu_layer {
	float *act;      /* max_batch x out: the layer's output */
	float *col;      /* conv: the R x N im2col matrix (layers.c's l->saved); in bf16
			    the input gradient's product only (im2col writes col16) */
	uint16_t *col16; /* conv, bf16: the im2col matrix as BF16, written by im2col
			    itself (the products read it as it is: no cast) */
	int32_t *arg;    /* pool: argmax of each output (index in the input plane) */
	uint8_t *mask;   /* dense, dlt_gpu_dgrad_fused: the ReLU's bit mask, written by the
			    forward GEMM's epilogue, read by the input-gradient GEMM of
			    the dense layer two after (cuBLASLt's layout: lt_gemm) */
	int conv_dnn;    /* conv: 1 when this pass's forward ran through cuDNN (dnn_on), so
			    its product is NCHW and its backward goes there too */
	int lt_plain;    /* dense, lt_dgrad: 1 when this pass's mask or its use fell back
			    to the plain path (cuBLASLt had no algorithm at its rows):
			    the layer's backward masks and sums its bias gradient itself */
};

struct dlt_gpu {
	int device;                              /* CUDA ordinal */
	cudaStream_t stream;                     /* all of this rank's work */
	cublasHandle_t blas;                     /* bound to stream */
	ncclComm_t comm;                         /* NULL until dlt_gpu_nccl_init */
	int nccl_ranks;                          /* ranks in comm */
	struct dlt_net net;                      /* the layout (host copy; its buffers unused) */
	struct gpu_layer layer[DLT_NET_MAX_LAYERS];   /* device buffers per layer */
	size_t nparams;                          /* floats in params and grads */
	int nstate;                              /* optimizer state arrays */
	int max_batch;                           /* rows per call at most */
	uint64_t seed;                           /* dropout masks */
	int rank;                                /* dropout masks */
	float *params;                           /* nparams */
	float *grads;                            /* nparams + 2 (loss sum, correct) */
	float *state;                            /* nstate x nparams */
	float *x;                                /* max_batch x input */
	uint8_t *y;                              /* max_batch labels */
	float *delta[2];                         /* backprop ping-pong, widest activation */
	float *ws;                               /* conv scratch (layers.c's c->ws) */
	float *part;                             /* a split GEMM's parts (gemm_split) */
	size_t part_n;                           /* floats part holds */
	int splitk;                              /* 1: long-k GEMMs split (dlt_gpu_gemm_splits) */
	cublasLtHandle_t lt;                     /* the dense layers' epilogues (lt_gemm) */
	int lt_want;                             /* 0: DLT_GPU_LT=0 at dlt_gpu_create */
	int lt_on;                               /* 1: the dense layers run them now (lt_setup) */
	char lt_off[256];                        /* why not, where cuBLASLt refused (describe) */
	char lt_why[96];                         /* cublasLtCreate's failure, if it failed */
	void *lt_ws;                             /* cuBLASLt's workspace, LT_WS_BYTES */
	int lt_one;                              /* 1: DLT_GPU_LT_ONE=1, one kernel a product */
	struct lt_plan *lt_plan;                 /* LT_PLANS: the products asked for (lt_gemm) */
	int lt_next;                             /* the plan a new product takes next */
	struct dnn *dnn;                         /* the convolutions through cuDNN (dnn.h), or NULL */
	int dnn_want;                            /* 1: DLT_GPU_CONV=cudnn at dlt_gpu_create */
	int direct;                              /* 1: convs of few taps computed directly
						    (dlt_gpu_conv_direct); 0: DLT_GPU_CONV=gemm */
	int dnn_on;                              /* 1: the convs go there now (dnn_setup) */
	char dnn_off[256];                       /* what the device line says of it */
	float *dnn_dw;                           /* the largest conv's weights and 256 bytes:
						    where a plan's Find writes a weight
						    gradient (conv_dnn_plan) */
	int precision;                           /* enum dlt_precision of the GEMMs */
	uint16_t *params16;                      /* bf16: the parameters as BF16 bits */
	uint16_t *op16[2];                       /* bf16: a GEMM's A and B operands as BF16 */
	size_t op16_n;                           /* bf16: elements each op16 holds */
	double *dsum;                            /* 2 doubles: loss sum, hits of a batch */
	double *host_sum;                        /* pinned copy of dsum */
	struct gpu_slot slot[GPU_QUEUE];         /* the queued steps' host sides */
	int qfirst, qlen;                        /* the oldest queued step's slot; steps queued */
	cudaStream_t comm_stream;                /* the bucketed allreduces */
	int nbuckets;                            /* 0: one allreduce after backward */
	struct {
		size_t lo, hi;                   /* float range of grads */
		int trigger;                     /* layer whose backward completes it */
		cudaEvent_t ready;               /* recorded after that layer's backward */
	} bucket[GPU_MAX_BUCKETS];               /* in launch order (last layers first) */
	cudaEvent_t comm_done;                   /* the last bucket's allreduce ended */
	double t[4];                             /* forward, backward, allreduce, optimizer seconds */
	char name[160];                          /* dlt_gpu_describe */
	struct gpu_step_vals *vals;              /* device: this step's values, then up to
						    max_batch row numbers (dlt_gpu_step_rows) */
	struct gpu_step_vals hvals;              /* host: what was last copied there */
	unsigned char *hblock;                   /* host: hvals, staged (the calls but steps) */
	float *data_x;                           /* dlt_gpu_set_data: its rows' pixels */
	uint8_t *data_y;                         /* and labels */
	long data_rows;                          /* rows there (0: none) */
	int graph_on;                            /* dlt_gpu_set_graph: 1 = capture steps */
	size_t idx32_below;                      /* LAUNCH_IDX: 32-bit indices below this */
	cudaEvent_t *prof_ev;                    /* dlt_gpu_set_profile: GPU_PROF_MARKS events,
						    else NULL */
	int prof_rec;                            /* 1 while a profiled step is captured */
	struct dlt_gpu_profile prof;             /* dlt_gpu_profile */
	cudaGraphExec_t graph;                   /* the captured step, or NULL */
	struct gpu_graph_key graph_key;          /* its shape */
	struct gpu_graph_key last_key;           /* the previous step's shape */
	int have_last;                           /* 1 once last_key is set */
	struct dlt_gpu_graph_stats gstats;       /* dlt_gpu_graph_stats */
};

/* ---- errors ---- */

/* Checks the launch of the kernel just started (bad configuration, no
 * device code for this GPU, an earlier asynchronous fault). */
#define KERNEL_CHECK(what) do { cudaError_t e_ = cudaGetLastError(); if (e_ != cudaSuccess) \
	return fail(cuda_rc(e_), err, errlen, "cuda: kernel %s: %s (%s)", what, \
		    cudaGetErrorString(e_), cudaGetErrorName(e_)); } while (0)

/* Returns cuBLAS's name of status s. */
static const char *blas_text(cublasStatus_t s)
{
	switch (s) {
	case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
	case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
	case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
	case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
	case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
	case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
	case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
	case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
	case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
	case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
	default: return "unknown cuBLAS status";
	}
}

#define BLAS_CHECK(call) do { cublasStatus_t s_ = (call); if (s_ != CUBLAS_STATUS_SUCCESS) \
	return fail(s_ == CUBLAS_STATUS_ALLOC_FAILED ? -ENOMEM : -EIO, err, errlen, \
		    "cublas: %s: %s", #call, blas_text(s_)); } while (0)

#define NCCL_CHECK(call) do { ncclResult_t r_ = (call); if (r_ != ncclSuccess) \
	return fail(-EIO, err, errlen, "nccl: %s: %s", #call, ncclGetErrorString(r_)); } while (0)

/* Blocks for n elements with GPU_THREADS threads, capped (grid-stride). */
static unsigned blocks_for(size_t n)
{
	size_t b = (n + GPU_THREADS - 1) / GPU_THREADS;

	return (unsigned)(b < 1 ? 1 : b > GPU_MAX_BLOCKS ? GPU_MAX_BLOCKS : b);
}

#define GRID_STRIDE(i, n) for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; \
	i < (n); i += (size_t)gridDim.x * blockDim.x)

/* The same loop in index type I. The kernels that divide each element's
 * index into its coordinates (the layouts of im2col, pooling, the bias's
 * column) are templates on I: a GPU divides 64-bit integers in software,
 * several times the instructions of a 32-bit division, which bound those
 * kernels where their bytes would not. LAUNCH_IDX runs the 32-bit
 * instance when every index of the launch is below span (< 2^31: i plus
 * the grid's stride, at most 2^24, stays below 2^32), else the 64-bit;
 * with DLT_GPU_INDEX64=1 in the environment at dlt_gpu_create, always the
 * 64-bit (a test's way to run the instances a batch of 2^31 elements
 * would, on small ones). */
#define GRID_STRIDE_I(I, i, n) for (I i = (I)(blockIdx.x * blockDim.x + threadIdx.x); \
	i < (I)(n); i += (I)(gridDim.x * blockDim.x))
#define LAUNCH_IDX(k, span, blocks, threads, stream, ...) \
	((size_t)(span) < g->idx32_below ? \
	 LAUNCH(k<uint32_t>, blocks, threads, stream, __VA_ARGS__) : \
	 LAUNCH(k<size_t>, blocks, threads, stream, __VA_ARGS__))
#define LAUNCH_SYNC_IDX(k, span, blocks, threads, stream, ...) \
	((size_t)(span) < g->idx32_below ? \
	 LAUNCH_SYNC(k<uint32_t>, blocks, threads, stream, __VA_ARGS__) : \
	 LAUNCH_SYNC(k<size_t>, blocks, threads, stream, __VA_ARGS__))

/* ---- kernels: BF16 ---- */

/* The BF16 bits of x, rounded to nearest even (a NaN stays a quiet NaN):
 * the upper 16 bits of the FP32 word after the rounding carry. */
__host__ __device__ static inline uint16_t bf16_bits(float x)
{
	uint32_t u;

	memcpy(&u, &x, sizeof u);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x0040u);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

/* out[i] = x[i] rounded to BF16. */
__global__ void k_to_bf16(uint16_t *out, const float *x, size_t n)
{
	GRID_STRIDE(i, n)
		out[i] = bf16_bits(x[i]);
}

/* ---- kernels: dense, ReLU ---- */

/* out[i][j] = y[i][j] + b[j] for rows x o, and with relu the ReLU of that
 * (k_relu_fwd's, fused: a dense layer followed by a ReLU writes the
 * ReLU's output at once); out may be y. */
template <typename I>
__global__ void k_add_bias_rows(float *out, const float *y, const float *b, int o, size_t m,
				int relu)
{
	GRID_STRIDE_I(I, i, m) {
		float v = y[i] + b[i % (I)o];

		out[i] = relu && !(v > 0.0f) ? 0.0f : v;
	}
}

/* gb[j] = sum over rows i of dy[i][j]: the dense bias gradient. With y
 * (the output of the ReLU after the layer), dy is first masked in place by
 * it as k_relu_bwd does (fused: the ReLU's backward). Block b takes the
 * COL_SUMS_W columns from b COL_SUMS_W: item (c, q) of its COL_SUMS_W x
 * COL_SUMS_G sums column c's rows q, q + COL_SUMS_G, ... in order (a warp
 * reads a row's columns side by side), then each column adds its groups in
 * order: a sum of rows / COL_SUMS_G loads a thread, over o / COL_SUMS_W
 * blocks (where a thread per column walking every row left a layer of 256
 * outputs on one SM). The same sums for any blockDim (LAUNCH_SYNC). */
#define COL_SUMS_W 32
#define COL_SUMS_G 8
__global__ void k_col_sums(float *gb, float *dy, const float *y, int rows, int o)
{
	__shared__ float s[COL_SUMS_W * COL_SUMS_G];

	for (int w = threadIdx.x; w < COL_SUMS_W * COL_SUMS_G; w += blockDim.x) {
		const int c = w % COL_SUMS_W, q = w / COL_SUMS_W;
		const int j = (int)blockIdx.x * COL_SUMS_W + c;
		float a = 0.0f;

		for (int i = q; j < o && i < rows; i += COL_SUMS_G) {
			const size_t e = (size_t)i * (size_t)o + (size_t)j;

			if (y && !(y[e] > 0.0f))
				dy[e] = 0.0f;
			a += dy[e];
		}
		s[w] = a;
	}
	__syncthreads();
	for (int c = threadIdx.x; c < COL_SUMS_W; c += blockDim.x) {
		const int j = (int)blockIdx.x * COL_SUMS_W + c;
		float a = s[c];

		for (int q = 1; q < COL_SUMS_G; q++)
			a += s[q * COL_SUMS_W + c];
		if (j < o)
			gb[j] = a;
	}
}

__global__ void k_relu_fwd(float *y, const float *x, size_t m)
{
	GRID_STRIDE(i, m)
		y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

__global__ void k_relu_bwd(float *dx, const float *y, const float *dy, size_t m)
{
	GRID_STRIDE(i, m)
		dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

/* ---- kernels: conv (the im2col layout of layers.c) ---- */

/* Element e of the im2col matrix col[r][i*hw + y*W + x], r = (c*k + ky)*k
 * + kx: the input pixel (c, y + ky - pad, x + kx - pad) of image i, 0
 * outside the image; its row C k k (the last) is ones (conv_grads). */
template <typename I>
__device__ static inline float im2col_at(I e, const float *x, int C, int H, int W, int k, I hw,
					 I N)
{
	const int pad = k / 2;
	I r = e / N, q = e - r * N;

	if (r == (I)C * (I)(k * k))
		return 1.0f;
	I i = q / hw, p = q - i * hw;
	int yy = (int)p / W, xx = (int)p - yy * W;
	int kk = (int)(r % (I)(k * k)), c = (int)(r / (I)(k * k));
	int ky = kk / k, kx = kk - ky * k;
	int sy = yy + ky - pad, sx = xx + kx - pad;

	return sy >= 0 && sy < H && sx >= 0 && sx < W ?
	       x[(i * (I)C + (I)c) * hw + (I)sy * (I)W + (I)sx] : 0.0f;
}

/* The im2col matrix of n images x (C x H x W) for a k x k conv, and its
 * row of ones. */
template <typename I>
__global__ void k_im2col(float *col, const float *x, int C, int H, int W, int k, int n)
{
	const I hw = (I)H * (I)W, N = (I)n * hw;
	const size_t total = ((size_t)C * (size_t)k * (size_t)k + 1) * (size_t)N;

	GRID_STRIDE_I(I, e, total)
		col[e] = im2col_at<I>(e, x, C, H, W, k, hw, N);
}

/* k_im2col in BF16 (bf16_bits of each element: what k_to_bf16 would make
 * of k_im2col's), for the bf16 products, which read it as it is. */
template <typename I>
__global__ void k_im2col16(uint16_t *col, const float *x, int C, int H, int W, int k, int n)
{
	const I hw = (I)H * (I)W, N = (I)n * hw;
	const size_t total = ((size_t)C * (size_t)k * (size_t)k + 1) * (size_t)N;

	GRID_STRIDE_I(I, e, total)
		col[e] = bf16_bits(im2col_at<I>(e, x, C, H, W, k, hw, N));
}

/* dx[i][c][sy][sx] = the sum of the col entries that read that pixel, taps
 * in the order (ky, kx) of layers.c's col2im (a gather: no atomics). */
template <typename I>
__global__ void k_col2im(float *dx, const float *col, int C, int H, int W, int k, int n)
{
	const int pad = k / 2;
	const I hw = (I)H * (I)W, N = (I)n * hw;
	const size_t total = (size_t)n * (size_t)C * (size_t)hw;

	GRID_STRIDE_I(I, e, total) {
		I ic = e / hw, p = e - ic * hw;
		I i = ic / (I)C, c = ic - i * (I)C;
		int sy = (int)p / W, sx = (int)p - sy * W;
		float s = 0.0f;

		for (int ky = 0; ky < k; ky++) {
			int yy = sy - ky + pad;

			if (yy < 0 || yy >= H)
				continue;
			for (int kx = 0; kx < k; kx++) {
				int xx = sx - kx + pad;

				if (xx < 0 || xx >= W)
					continue;
				I r = (c * (I)k + (I)ky) * (I)k + (I)kx;

				s += col[r * N + i * hw + (I)yy * (I)W + (I)xx];
			}
		}
		dx[e] = s;
	}
}

/* A conv of few taps: its product directly, with what is fused after it
 * (conv.cuh: the kernel calib.cu times). */
#include "engine/train/cuda/conv.cuh"

/* A conv's product t holds image i's plane f at t + f fs + i is: the
 * F x N GEMM output (fs = N = n hw, is = hw) or NCHW (cuDNN's: fs = hw,
 * is = F hw). */

/* y[i][f][j] = t's (i, f) plane at j + b[f]: the product to NCHW plus
 * bias, and with relu the ReLU of that (fused, as k_add_bias_rows). */
template <typename I>
__global__ void k_conv_scatter(float *y, const float *t, const float *b, int F, size_t hw_, int n,
			       size_t fs_, size_t is_, int relu)
{
	const I hw = (I)hw_, fs = (I)fs_, is = (I)is_;
	const size_t total = (size_t)F * (size_t)n * (size_t)hw;

	GRID_STRIDE_I(I, e, total) {
		I q = e / hw, j = e - q * hw;
		I i = q / (I)F, f = q - i * (I)F;
		float v = t[f * fs + i * is + j] + b[f];

		y[e] = relu && !(v > 0.0f) ? 0.0f : v;
	}
}

/* t's (i, f) plane at j = dy[i][f][j]: NCHW dY to the product's layout;
 * with y (the output of the ReLU after the conv), masked by it as
 * k_relu_bwd does (fused). */
template <typename I>
__global__ void k_conv_gather(float *t, const float *dy, const float *y, int F, size_t hw_, int n,
			      size_t fs_, size_t is_)
{
	const I hw = (I)hw_, fs = (I)fs_, is = (I)is_;
	const size_t total = (size_t)F * (size_t)n * (size_t)hw;

	GRID_STRIDE_I(I, e, total) {
		I q = e / hw, j = e - q * hw;
		I i = q / (I)F, f = q - i * (I)F;

		t[f * fs + i * is + j] = y && !(y[e] > 0.0f) ? 0.0f : dy[e];
	}
}

/* The sum of each thread's a over the block, a tree in shared memory
 * (blockDim.x <= GPU_THREADS, a power of two); once a kernel. */
__device__ float block_sum(float a)
{
	__shared__ float s[GPU_THREADS];

	s[threadIdx.x] = a;
	__syncthreads();
	for (unsigned w = blockDim.x / 2; w > 0; w >>= 1) {
		if (threadIdx.x < w)
			s[threadIdx.x] += s[threadIdx.x + w];
		__syncthreads();
	}
	return s[0];
}

/* gb[f] = sum of row f of t (F x N): one block per row. */
__global__ void k_row_sums(float *gb, const float *t, size_t N)
{
	const float *row = t + (size_t)blockIdx.x * N;
	float a = 0.0f;

	for (size_t j = threadIdx.x; j < N; j += blockDim.x)
		a += row[j];
	a = block_sum(a);
	if (threadIdx.x == 0)
		gb[blockIdx.x] = a;
}

/* gb[f] = the sum of plane f of the n images of NCHW t (F planes of hw
 * each): a conv's bias gradient from its product's gradient in cuDNN's
 * layout (k_row_sums's tree, one block per plane). */
__global__ void k_plane_sums(float *gb, const float *t, int F, size_t hw, int n)
{
	const size_t N = (size_t)n * hw, f = blockIdx.x;
	float a = 0.0f;

	for (size_t j = threadIdx.x; j < N; j += blockDim.x) {
		const size_t i = j / hw;

		a += t[(i * (size_t)F + f) * hw + (j - i * hw)];
	}
	a = block_sum(a);
	if (threadIdx.x == 0)
		gb[f] = a;
}

/* C[i][j] (ldc) = the sum over s = 0..parts-1, in order, of part s's
 * element (i, j) (each part rows x cols, packed): a split GEMM's parts;
 * with last, its column cols - 1 goes to last[i] instead (a conv's bias
 * gradient, conv_grads). */
__global__ void k_sum_parts(float *C, int ldc, const float *part, int parts, int rows, int cols,
			    float *last)
{
	const size_t mn = (size_t)rows * (size_t)cols;

	GRID_STRIDE(e, mn) {
		const size_t i = e / (size_t)cols, j = e % (size_t)cols;
		float a = part[e];

		for (int s = 1; s < parts; s++)
			a += part[(size_t)s * mn + e];
		if (last && j == (size_t)cols - 1)
			last[i] = a;
		else
			C[i * (size_t)ldc + j] = a;
	}
}

/* ---- kernels: max-pool k x k stride k ---- */

/* One thread per output: the window's first maximum and its index. */
template <typename I>
__global__ void k_pool_fwd(float *y, int32_t *arg, const float *x, int k, int H, int W,
			   int oh, int ow, size_t planes)
{
	const I op = (I)oh * (I)ow;
	const size_t total = planes * (size_t)op;

	GRID_STRIDE_I(I, e, total) {
		I q = e / op;
		int o = (int)(e - q * op), oy = o / ow, ox = o - oy * ow;
		int best;

		y[e] = dlt_pool_window(x + q * (I)H * (I)W, W, k, oy, ox, &best);
		arg[e] = best;
	}
}

/* dx (zeroed before) at each window's argmax = dy; windows do not overlap. */
template <typename I>
__global__ void k_pool_bwd(float *dx, const int32_t *arg, const float *dy, size_t ip, size_t op,
			   size_t planes)
{
	const size_t total = planes * op;

	GRID_STRIDE_I(I, e, total)
		dx[e / (I)op * (I)ip + (I)arg[e]] = dy[e];
}

/* ---- kernels: conv, ReLU and max-pool fused (dlt_gpu_fused 2) ---- */

/* The pool of a conv's ReLU output, read from the conv's product t (in
 * its layout fs, is; plus bias b[f], then the ReLU, as k_conv_scatter
 * computes each value) rather than from the ReLU's output in NCHW: y and
 * arg as k_pool_fwd's (dlt_pool_window's first maximum, its index in the
 * plane), so the ReLU's output is never written. One thread per pooled
 * output (n x F planes of oh x ow). */
template <typename I>
__global__ void k_conv_pool_fwd(float *y, int32_t *arg, const float *t, const float *b, int F,
				int W, int n, size_t fs_, size_t is_, int k, int oh, int ow)
{
	const I fs = (I)fs_, is = (I)is_, op = (I)oh * (I)ow;
	const size_t total = (size_t)n * (size_t)F * (size_t)op;

	GRID_STRIDE_I(I, e, total) {
		I q = e / op, i = q / (I)F, f = q - i * (I)F;
		int o = (int)(e - q * op), oy = o / ow, ox = o - oy * ow;
		const float *in = t + f * fs + i * is;
		const float bf = b[f];
		int best = oy * k * W + ox * k;
		float mx = in[best] + bf;

		mx = !(mx > 0.0f) ? 0.0f : mx;
		for (int dy = 0; dy < k; dy++)
			for (int dx = 0; dx < k; dx++) {
				int j = (oy * k + dy) * W + ox * k + dx;
				float v = in[j] + bf;

				v = !(v > 0.0f) ? 0.0f : v;
				if (v > mx) {
					mx = v;
					best = j;
				}
			}
		y[e] = mx;
		arg[e] = best;
	}
}

/* t's (i, f) plane at p (layout fs, is) = the gradient of the conv's
 * product at pixel p of image i's plane f, from the pool's output gradient
 * dy: dy of the pooled output whose window's maximum p is (arg), where
 * that maximum (the pooled value yp) is above 0 (the ReLU's mask), else 0 -
 * what k_pool_bwd (after a memset) and k_conv_gather with the ReLU's
 * output as the mask write, in one pass and without the NCHW gradient
 * between them (pixels past the last whole window get 0). One thread per
 * element of t, in NCHW order. */
template <typename I>
__global__ void k_pool_conv_gather(float *t, const float *dy, const int32_t *arg, const float *yp,
				   int F, int H, int W, int n, size_t fs_, size_t is_, int k, int oh,
				   int ow)
{
	const I hw = (I)H * (I)W, fs = (I)fs_, is = (I)is_;
	const size_t total = (size_t)F * (size_t)n * (size_t)hw;

	GRID_STRIDE_I(I, e, total) {
		I q = e / hw, i = q / (I)F, f = q - i * (I)F;
		int p = (int)(e - q * hw), py = p / W, px = p - py * W;
		int oy = py / k, ox = px / k;
		float v = 0.0f;

		if (oy < oh && ox < ow) {
			I o = ((i * (I)F + f) * (I)oh + (I)oy) * (I)ow + (I)ox;

			if (arg[o] == p && yp[o] > 0.0f)
				v = dy[o];
		}
		t[f * fs + i * is + (I)p] = v;
	}
}

/* ---- kernels: dropout (the counter-hashed masks of layers.c) ---- */

/* y = x * scale where element i of the mask of (seed, vals->step, rank,
 * layer) is kept, else 0 (also the backward pass). */
__global__ void k_dropout(float *y, const float *x, const struct gpu_step_vals *vals,
			  uint64_t seed, int rank, int layer, uint64_t thr, float scale, size_t m)
{
	const uint64_t key = dlt_mask_key(seed, vals->step, rank, layer);

	GRID_STRIDE(i, m) {
		y[i] = dlt_keep_bit(key, (uint64_t)i, thr) ? x[i] * scale : 0.0f;
	}
}

/* ---- kernels: softmax cross-entropy, optimizer ---- */

/* dlt_softmax_xent (layers.c) of each row, and the batch's sums: out[0] =
 * the sum of the rows' losses, out[1] = of their hits, in doubles (also as
 * floats into fout[0..1] when fout is not NULL); with d (training), the
 * logits' gradient scaled by scale. One block of GPU_THREADS threads
 * (LAUNCH_SYNC), thread t taking rows t, t + blockDim.x, ... in order and
 * then the tree of its partial sums: one kernel where a row's kernel and
 * a sum's were two (a graph node fewer a step). With gb (training, the
 * last layer dense: dlt_gpu_loss_bgrad), also that layer's bias gradient,
 * the column sums of d (thread j of the block sums column j over the rows
 * in order): its backward's own kernel for it goes (a node fewer again). */
__global__ void k_softmax_xent_sums(const float *z, const uint8_t *y, int rows, int c,
				    float scale, float *d, double *out, float *fout, float *gb)
{
	__shared__ double s[GPU_THREADS], h[GPU_THREADS];
	double a = 0.0, b = 0.0;

	for (int i = threadIdx.x; i < rows; i += blockDim.x) {
		const float *r = z + (size_t)i * (size_t)c;
		float mx = r[0], sum = 0.0f;
		int arg = 0, lab = y[i];

		for (int j = 1; j < c; j++)
			if (r[j] > mx) {
				mx = r[j];
				arg = j;
			}
		for (int j = 0; j < c; j++)
			sum += expf(r[j] - mx);
		if (d) {
			float inv = scale / sum, *o = d + (size_t)i * (size_t)c;

			for (int j = 0; j < c; j++)
				o[j] = expf(r[j] - mx) * inv;
			o[lab] -= scale;
		}
		a += logf(sum) - (r[lab] - mx);
		b += arg == lab ? 1.0f : 0.0f;
	}
	s[threadIdx.x] = a;
	h[threadIdx.x] = b;
	__syncthreads();
	for (unsigned w = blockDim.x / 2; w > 0; w >>= 1) {
		if (threadIdx.x < w) {
			s[threadIdx.x] += s[threadIdx.x + w];
			h[threadIdx.x] += h[threadIdx.x + w];
		}
		__syncthreads();
	}
	/* every row's gradient is written (the barriers above) */
	for (int j = threadIdx.x; gb && d && j < c; j += blockDim.x) {
		float a = 0.0f;

		for (int i = 0; i < rows; i++)
			a += d[(size_t)i * (size_t)c + (size_t)j];
		gb[j] = a;
	}
	if (threadIdx.x == 0) {
		out[0] = s[0];
		out[1] = h[0];
		if (fout) {
			fout[0] = (float)s[0];
			fout[1] = (float)h[0];
		}
	}
}

/* The batch of rows idx[0..rows) of the device's training rows (dim
 * floats and a label each) into x and y: a step's first node, so that the
 * host sends row numbers, not pixels (dlt_gpu_step_rows). */
__global__ void k_gather_rows(float *x, uint8_t *y, const float *data_x, const uint8_t *data_y,
			      const struct gpu_step_vals *vals, int rows, size_t dim)
{
	const uint32_t *idx = (const uint32_t *)(vals + 1);
	const size_t n = (size_t)rows * dim;

	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		const size_t r = i / dim, c = i % dim;

		x[i] = data_x[(size_t)idx[r] * dim + c];
		if (c == 0)
			y[r] = data_y[idx[r]];
	}
}

/* optim.c's sgd (nesterov = 0) and nesterov updates at rate vals->lr. */
__global__ void k_sgd(float *w, float *v, const float *g, const struct gpu_step_vals *vals,
		      float mu, float wd, int nesterov, size_t n)
{
	const float lr = vals->lr;

	GRID_STRIDE(i, n) {
		float gi = g[i] + wd * w[i], vi = mu * v[i] + gi;

		v[i] = vi;
		w[i] -= nesterov ? lr * (gi + mu * vi) : lr * vi;
	}
}

/* optim.c's adam update; vals: step = lr / (1 - b1^t), ib = 1 / sqrt(1 - b2^t). */
__global__ void k_adam(float *w, float *m, float *v, const float *g, float b1, float b2,
		       float eps, float wd, const struct gpu_step_vals *vals, size_t n)
{
	const float step = vals->adam_step, ib = vals->adam_ib;

	GRID_STRIDE(i, n)
		dlt_adam_elem(w + i, m + i, v + i, g[i], b1, b2, eps, wd, step, ib);
}

/* ---- host side ---- */

/* The BF16 form of GEMM operand x, a row-major rows x ld matrix: the
 * parameters' copy when x lies in g->params (cast after each update), a
 * conv's col16 when x is its im2col matrix (written in BF16 by im2col),
 * else x cast now into op16[slot]. NULL with err set when the operand is
 * larger than op16 (a bug in bf16_alloc's sizing). */
static const uint16_t *bf16_operand(struct dlt_gpu *g, const float *x, size_t rows, int ld,
				    int slot, char *err, size_t errlen)
{
	const size_t n = rows * (size_t)ld;
	const uintptr_t at = (uintptr_t)x, lo = (uintptr_t)g->params;

	if (at >= lo && at < lo + g->nparams * sizeof(float))   /* a layer's weights */
		return g->params16 + (at - lo) / sizeof(float);
	for (int i = 0; i < g->net.nlayers; i++)
		if (g->layer[i].col && x == g->layer[i].col)   /* its col16 (bf16_alloc) */
			return g->layer[i].col16;
	if (n > g->op16_n) {
		fail(-EINVAL, err, errlen, "gpu: a GEMM operand of %zu elements, BF16 room for %zu",
		     n, g->op16_n);
		return NULL;
	}
	LAUNCH(k_to_bf16, blocks_for(n), GPU_THREADS, g->stream, g->op16[slot], x, n);
	return g->op16[slot];
}

/* The BF16 forms of a GEMM's operands A and B (bf16_operand's, same
 * layout) into *a16 and *b16; -EINVAL with err set where one is too large. */
static int bf16_pair(struct dlt_gpu *g, int ta, int tb, int M, int N, int K, const float *A,
		     int lda, const float *B, int ldb, const uint16_t **a16, const uint16_t **b16,
		     char *err, size_t errlen)
{
	*a16 = bf16_operand(g, A, (size_t)(ta ? K : M), lda, 0, err, errlen);
	*b16 = *a16 ? bf16_operand(g, B, (size_t)(tb ? N : K), ldb, 1, err, errlen) : NULL;
	if (!*a16 || !*b16)
		return -EINVAL;
	KERNEL_CHECK("to_bf16");
	return 0;
}

/* gemm's bf16 form: the operands as BF16, FP32 accumulation into FP32 C. */
static int gemm_bf16(struct dlt_gpu *g, int ta, int tb, int M, int N, int K, const float *A,
		     int lda, const float *B, int ldb, float *C, int ldc, char *err, size_t errlen)
{
	const float one = 1.0f, zero = 0.0f;
	const uint16_t *a16, *b16;

	TRY(bf16_pair(g, ta, tb, M, N, K, A, lda, B, ldb, &a16, &b16, err, errlen));
	BLAS_CHECK(cublasGemmEx(g->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
				ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &one, b16, CUDA_R_16BF, ldb,
				a16, CUDA_R_16BF, lda, &zero, C, CUDA_R_32F, ldc,
				CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
	return 0;
}

/* gemm with its k split in S = dlt_gpu_gemm_splits parts of kc =
 * dlt_gpu_split_kc (K / S, down to a multiple of 8):
 * one strided batched GEMM computes part s from A's and B's k range
 * [s kc, (s + 1) kc) into g->part + s M N (row-major M x N), a GEMM more
 * the rest of k (K - S kc, when not 0) into part S, and k_sum_parts adds
 * the parts in order into C (with last: C's columns but the last, which
 * goes to last). In the precision of gemm (TF32 by the handle's math mode;
 * BF16 on the operands' BF16 copies). */
static int gemm_split(struct dlt_gpu *g, int ta, int tb, int M, int N, int K, const float *A,
		      int lda, const float *B, int ldb, float *C, int ldc, float *last, char *err,
		      size_t errlen)
{
	const float one = 1.0f, zero = 0.0f;
	const int S = dlt_gpu_gemm_splits(M, N, K), kc = (int)dlt_gpu_split_kc(K, S);
	const int rest = K - S * kc;
	const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
	/* the k offset of a part: along a row of a row-major operand stored
	 * m x k (A untransposed, B transposed), down its rows if stored k x m */
	const long long sa = ta ? (long long)kc * lda : kc, sb = tb ? kc : (long long)kc * ldb;
	const long long mn = (long long)M * N;

	if ((size_t)(S + (rest > 0)) * (size_t)mn > g->part_n)
		return fail(-EINVAL, err, errlen, "gpu: a split GEMM of %d x %d x %d needs %lld floats of "
			    "parts, room for %zu", M, N, K, (S + (rest > 0)) * mn, g->part_n);
	if (g->precision == DLT_PRECISION_BF16) {
		const uint16_t *a16, *b16;

		TRY(bf16_pair(g, ta, tb, M, N, K, A, lda, B, ldb, &a16, &b16, err, errlen));
		BLAS_CHECK(cublasGemmStridedBatchedEx(g->blas, opb, opa, N, M, kc, &one, b16,
						      CUDA_R_16BF, ldb, sb, a16, CUDA_R_16BF, lda, sa,
						      &zero, g->part, CUDA_R_32F, N, mn, S,
						      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
		if (rest)
			BLAS_CHECK(cublasGemmEx(g->blas, opb, opa, N, M, rest, &one, b16 + S * sb,
						CUDA_R_16BF, ldb, a16 + S * sa, CUDA_R_16BF, lda, &zero,
						g->part + S * mn, CUDA_R_32F, N, CUBLAS_COMPUTE_32F,
						CUBLAS_GEMM_DEFAULT));
	} else {
		BLAS_CHECK(cublasSgemmStridedBatched(g->blas, opb, opa, N, M, kc, &one, B, ldb, sb,
						     A, lda, sa, &zero, g->part, N, mn, S));
		if (rest)
			BLAS_CHECK(cublasSgemm(g->blas, opb, opa, N, M, rest, &one, B + S * sb, ldb,
					       A + S * sa, lda, &zero, g->part + S * mn, N));
	}
	LAUNCH(k_sum_parts, blocks_for((size_t)mn), GPU_THREADS, g->stream, C, ldc, g->part,
	       S + (rest > 0), M, N, last);
	KERNEL_CHECK("sum_parts");
	return 0;
}

/* C = op(A) op(B) for row-major matrices, as cblas_sgemm(CblasRowMajor,
 * ...) with alpha 1, beta 0: cuBLAS is column-major, so it computes
 * C^T = op(B)^T op(A)^T with the operands swapped (same flags, same
 * leading dimensions). FP32 and TF32 (the handle's math mode) by
 * cublasSgemm; BF16 by gemm_bf16. */
static int gemm(struct dlt_gpu *g, int ta, int tb, int M, int N, int K, const float *A,
		int lda, const float *B, int ldb, float *C, int ldc, char *err, size_t errlen)
{
	const float one = 1.0f, zero = 0.0f;

	if (g->splitk && dlt_gpu_gemm_splits(M, N, K) > 1)
		return gemm_split(g, ta, tb, M, N, K, A, lda, B, ldb, C, ldc, NULL, err, errlen);
	if (g->precision == DLT_PRECISION_BF16)
		return gemm_bf16(g, ta, tb, M, N, K, A, lda, B, ldb, C, ldc, err, errlen);
	BLAS_CHECK(cublasSgemm(g->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
			       ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &one, B, ldb,
			       A, lda, &zero, C, ldc));
	return 0;
}

/* ---- cuBLASLt: a dense layer's bias, ReLU and bias gradient in its
 * GEMMs' epilogues (dlt_gpu_dense_epilogue, dlt_gpu_dgrad_fused) ---- */

#define LT_WS_BYTES DLT_GPU_LT_WS_BYTES
#define LT_PLANS 64   /* cuBLASLt products kept planned (lt_gemm): a net's, at a few batches */

/* The epilogues lt_gemm runs. */
enum lt_epi { LT_BIAS, LT_RELU_BIAS, LT_RELU_AUX_BIAS, LT_DRELU_BGRAD };

/* A cuBLASLt product as asked for: its descriptors and the algorithm the
 * heuristic chose (or none), kept in g->lt_plan so that a call asks once
 * (a heuristic costs the host tens of microseconds; an evaluation pass,
 * not captured, calls each layer's product every batch). */
struct lt_key {
	int epi, ta, tb, M, N, K, lda, ldb, ldc, precision;
	const void *bias, *aux;
	int64_t aux_ld;
	uint32_t align[3];   /* cuBLASLt's A, B and C (= D): lt_align of each */
};
struct lt_plan {
	struct lt_key key;
	int used;                          /* 1: holds a plan */
	int none;                          /* 1: no algorithm to run it (why says why) */
	char why[112];                     /* none: "" (the heuristic had none), or the
					      cuBLASLt call that failed and its status */
	cublasLtMatmulDesc_t d;
	cublasLtMatrixLayout_t la, lb, lc;
	cublasLtMatmulAlgo_t algo;
};

/* The alignment of p that cuBLASLt may count on: the largest power of two
 * up to 256 (its MIN_ALIGNMENT preferences' default, which an algorithm
 * found without them assumes) dividing its address. A layer's weights and
 * biases lie at the sums of the layer sizes before them in one buffer:
 * often 4 bytes, as PyTorch's slices (its gemm_and_bias tells cuBLASLt the
 * same). */
static uint32_t lt_align(const void *p)
{
	uint32_t a = 256;

	while (a > 4 && (uintptr_t)p % a)
		a /= 2;
	return a;
}

/* Frees plan p's descriptors. */
static void lt_plan_free(struct lt_plan *p)
{
	if (p->lc)
		cublasLtMatrixLayoutDestroy(p->lc);
	if (p->lb)
		cublasLtMatrixLayoutDestroy(p->lb);
	if (p->la)
		cublasLtMatrixLayoutDestroy(p->la);
	if (p->d)
		cublasLtMatmulDescDestroy(p->d);
	p->lc = p->lb = p->la = NULL;
	p->d = NULL;
}

/* Frees plan p's descriptors and empties it. */
static void lt_plan_drop(struct lt_plan *p)
{
	lt_plan_free(p);
	memset(p, 0, sizeof *p);
}

/* Makes plan p for key k: the descriptors of the product and the
 * heuristic's first algorithm; where it has none, or a call of the
 * planning fails (an attribute this cuBLASLt does not take, ...), p->none
 * with the reason in p->why (an epilogue is a speed-up: the plain path
 * runs instead). */
static void lt_plan_make(struct dlt_gpu *g, struct lt_plan *p, const struct lt_key *k)
{
	static const cublasLtEpilogue_t epis[] = {
		CUBLASLT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_RELU_BIAS, CUBLASLT_EPILOGUE_RELU_AUX_BIAS,
		CUBLASLT_EPILOGUE_DRELU_BGRAD
	};
	/* cuBLASLt's A is our B and its B our A (C^T = op(B)^T op(A)^T) */
	const cublasOperation_t opa = k->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
	const cublasOperation_t opb = k->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
	const cublasComputeType_t comp = k->precision == DLT_PRECISION_TF32 ?
		CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
	const uint32_t e = (uint32_t)epis[k->epi], inplace = CUBLASLT_REDUCTION_SCHEME_INPLACE;
	const uint64_t ws = LT_WS_BYTES;
	cublasLtMatmulPreference_t pref = NULL;
	cublasLtMatmulHeuristicResult_t res;
	int found = 0;
	const char *what = "cublasLtMatmulDescCreate";

	memset(p, 0, sizeof *p);
	p->key = *k;
	p->used = 1;
	cublasStatus_t st = cublasLtMatmulDescCreate(&p->d, comp, CUDA_R_32F);

#define LT_STEP(call) do { if (st == CUBLAS_STATUS_SUCCESS) { what = #call; st = (call); } } while (0)
	LT_STEP(cublasLtMatmulDescSetAttribute(p->d, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
	LT_STEP(cublasLtMatmulDescSetAttribute(p->d, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
	LT_STEP(cublasLtMatmulDescSetAttribute(p->d, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e));
	LT_STEP(cublasLtMatmulDescSetAttribute(p->d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &k->bias,
					       sizeof k->bias));
	if (k->epi == LT_RELU_AUX_BIAS || k->epi == LT_DRELU_BGRAD) {
		LT_STEP(cublasLtMatmulDescSetAttribute(p->d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
						       &k->aux, sizeof k->aux));
		LT_STEP(cublasLtMatmulDescSetAttribute(p->d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
						       &k->aux_ld, sizeof k->aux_ld));
	}
	LT_STEP(cublasLtMatrixLayoutCreate(&p->la, CUDA_R_32F, k->tb ? k->K : k->N,
					   k->tb ? k->N : k->K, k->ldb));
	LT_STEP(cublasLtMatrixLayoutCreate(&p->lb, CUDA_R_32F, k->ta ? k->M : k->K,
					   k->ta ? k->K : k->M, k->lda));
	LT_STEP(cublasLtMatrixLayoutCreate(&p->lc, CUDA_R_32F, k->N, k->M, k->ldc));
	LT_STEP(cublasLtMatmulPreferenceCreate(&pref));
	LT_STEP(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
						     &ws, sizeof ws));
	/* an algorithm for the operands as aligned as they are */
	LT_STEP(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
						     &k->align[0], sizeof k->align[0]));
	LT_STEP(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
						     &k->align[1], sizeof k->align[1]));
	LT_STEP(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
						     &k->align[2], sizeof k->align[2]));
	LT_STEP(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
						     &k->align[2], sizeof k->align[2]));
	/* no split k summed by a kernel of its own: one graph node a product */
	if (g->lt_one)
		LT_STEP(cublasLtMatmulPreferenceSetAttribute(pref,
							     CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
							     &inplace, sizeof inplace));
	if (st == CUBLAS_STATUS_SUCCESS) {
		what = "cublasLtMatmulAlgoGetHeuristic";
		st = cublasLtMatmulAlgoGetHeuristic(g->lt, p->d, p->la, p->lb, p->lc, p->lc, pref, 1,
						    &res, &found);
		if (st == CUBLAS_STATUS_NOT_SUPPORTED || (st == CUBLAS_STATUS_SUCCESS && found < 1)) {
			p->none = 1;   /* why: "" */
			st = CUBLAS_STATUS_SUCCESS;
		} else if (st == CUBLAS_STATUS_SUCCESS) {
			p->algo = res.algo;
		}
	}
#undef LT_STEP
	if (pref)
		cublasLtMatmulPreferenceDestroy(pref);
	if (st != CUBLAS_STATUS_SUCCESS) {
		p->none = 1;
		snprintf(p->why, sizeof p->why, "%.*s: %s", (int)strcspn(what, "("), what,
			 blas_text(st));
	}
	if (p->none)
		lt_plan_free(p);   /* the refusal is kept, not its descriptors */
}

/* Empties g's plans (a new precision: the compute type is theirs). */
static void lt_plans_drop(struct dlt_gpu *g)
{
	for (int i = 0; i < LT_PLANS; i++)
		if (g->lt_plan[i].used)
			lt_plan_drop(&g->lt_plan[i]);
	g->lt_next = 0;
}

/* C = op(A) op(B) for row-major matrices, as gemm, by cublasLtMatmul
 * with epilogue epi over C's rows (to cuBLASLt, column-major, C is N x M,
 * so its vectors run along a row of C): LT_BIAS adds bias (N floats) to
 * each row; LT_RELU_BIAS then takes the ReLU; LT_RELU_AUX_BIAS also sets
 * aux (a bit mask, aux_ld bits a row) where the sum was above 0; and
 * LT_DRELU_BGRAD zeroes C where aux's bit is clear and writes the column
 * sums of that into bias. FP32 operands, FP32 or TF32 (g's precision)
 * compute; the plan of each product kept (lt_plan), for A, B and C as
 * aligned as they are (lt_align). With probe nothing runs: the call only
 * asks cuBLASLt for an algorithm. Returns 0, or -ENOTSUP when cuBLASLt
 * has none for the product or cannot plan it, or (a call that runs) its
 * bias or aux is not 16-byte aligned (err says which), -EIO when
 * cublasLtMatmul fails. */
static int lt_gemm(struct dlt_gpu *g, enum lt_epi epi, int ta, int tb, int M, int N, int K,
		   const float *A, int lda, const float *B, int ldb, float *C, int ldc,
		   float *bias, uint8_t *aux, int64_t aux_ld, int probe, char *err, size_t errlen)
{
	static const char *const names[] = { "BIAS", "RELU_BIAS", "RELU_AUX_BIAS", "DRELU_BGRAD" };
	const float one = 1.0f, zero = 0.0f;
	struct lt_key k;
	struct lt_plan *p = NULL;

	memset(&k, 0, sizeof k);   /* compared whole, padding included */
	k.epi = epi;
	k.ta = ta;
	k.tb = tb;
	k.M = M;
	k.N = N;
	k.K = K;
	k.lda = lda;
	k.ldb = ldb;
	k.ldc = ldc;
	k.precision = g->precision;
	k.bias = bias;
	k.aux = epi == LT_RELU_AUX_BIAS || epi == LT_DRELU_BGRAD ? aux : NULL;
	k.aux_ld = k.aux ? aux_ld : 0;
	k.align[0] = lt_align(B);   /* cuBLASLt's A is our B */
	k.align[1] = lt_align(A);
	k.align[2] = lt_align(C);
	/* the alignment preferences do not cover the epilogue's vectors, which
	 * its kernels read 16 bytes at a time (PyTorch's addmm falls back
	 * likewise): an unaligned one is its layer's own kernels (open probes
	 * the algorithms only: lt_setup says which layers) */
	if (!probe && (lt_align(bias) < 16 || (k.aux && lt_align(k.aux) < 16)))
		return fail(-ENOTSUP, err, errlen, "the %s of a %d x %d x %d product with epilogue %s "
			    "is not 16-byte aligned", lt_align(bias) < 16 ? "bias" : "aux", M, N, K,
			    names[epi]);
	for (int i = 0; i < LT_PLANS && !p; i++)
		if (g->lt_plan[i].used && !memcmp(&g->lt_plan[i].key, &k, sizeof k))
			p = &g->lt_plan[i];
	if (!p) {   /* a new one, over the oldest when all are taken */
		p = &g->lt_plan[g->lt_next];
		g->lt_next = (g->lt_next + 1) % LT_PLANS;
		lt_plan_free(p);   /* (lt_plan_make empties the rest) */
		lt_plan_make(g, p, &k);
	}
	if (p->none && !p->why[0])
		return fail(-ENOTSUP, err, errlen, "cuBLASLt has no algorithm for a %d x %d x %d "
			    "product with epilogue %s", M, N, K, names[epi]);
	if (p->none)
		return fail(-ENOTSUP, err, errlen, "cuBLASLt cannot plan a %d x %d x %d product with "
			    "epilogue %s (%s)", M, N, K, names[epi], p->why);
	if (!probe) {
		cublasStatus_t st = cublasLtMatmul(g->lt, p->d, &one, B, p->la, A, p->lb, &zero, C,
						   p->lc, C, p->lc, &p->algo, g->lt_ws, LT_WS_BYTES,
						   g->stream);

		if (st != CUBLAS_STATUS_SUCCESS)
			return fail(-EIO, err, errlen, "cublasLt: cublasLtMatmul: %s", blas_text(st));
	}
	return 0;
}

/* The enum dlt_layer_kind of layer i of n, -1 past the last (the rules of
 * gpu.h take the kinds of a layer and the next two). */
static int kind_at(const struct dlt_net *n, int i)
{
	return i < n->nlayers ? (int)n->layer[i].kind : -1;
}

/* 1 when layer li of n is a dense layer whose ReLU mask and bias gradient
 * the input-gradient product of layer li + 2 can make (dlt_gpu_dgrad_fused). */
static int dgrad_kinds(const struct dlt_net *n, int li)
{
	return dlt_gpu_dgrad_fused(kind_at(n, li), kind_at(n, li + 1), kind_at(n, li + 2));
}

/* 1 when it does: those kinds, with the epilogues on. */
static int lt_dgrad(const struct dlt_gpu *g, int li)
{
	return g->lt_on && dgrad_kinds(&g->net, li);
}

/* The offset of dense layer l's biases in the parameters and gradients
 * (its o x k weights first). */
static size_t dense_bias(const struct dlt_layer *l)
{
	return l->off + (size_t)l->out.c * dlt_shape_size(l->in);
}

/* Dense layer li's forward product on rows rows from x into out (its
 * next layer's output with a ReLU fused) with epilogue epi: LT_BIAS,
 * LT_RELU_BIAS, or LT_RELU_AUX_BIAS writing its mask; lt_gemm's probe
 * and returns. */
static int lt_dense_fwd(struct dlt_gpu *g, int li, int rows, const float *x, float *out,
			enum lt_epi epi, int probe, char *err, size_t errlen)
{
	const struct dlt_layer *l = &g->net.layer[li];
	const int k = (int)dlt_shape_size(l->in), o = l->out.c;
	float *p = g->params + l->off;

	return lt_gemm(g, epi, 0, 1, rows, o, k, x, k, p, k, out, o, g->params + dense_bias(l),
		       epi == LT_RELU_AUX_BIAS ? g->layer[li].mask : NULL, dlt_gpu_lt_mask_ld(o),
		       probe, err, errlen);
}

/* Dense layer li's input-gradient product (rows rows, dy to dx) masked by
 * the ReLU of dense layer li - 2 and summing that layer's bias gradient
 * (LT_DRELU_BGRAD, lt_dgrad(li - 2)); lt_gemm's probe and returns. */
static int lt_dense_dgrad(struct dlt_gpu *g, int li, int rows, const float *dy, float *dx,
			  int probe, char *err, size_t errlen)
{
	const struct dlt_layer *l = &g->net.layer[li], *pl = &g->net.layer[li - 2];
	const int k = (int)dlt_shape_size(l->in), o = l->out.c;

	return lt_gemm(g, LT_DRELU_BGRAD, 0, 0, rows, k, o, dy, o, g->params + l->off, k, dx, k,
		       g->grads + dense_bias(pl), g->layer[li - 2].mask, dlt_gpu_lt_mask_ld(k),
		       probe, err, errlen);
}

static int lt_setup(struct dlt_gpu *g, char *err, size_t errlen);
static int dnn_setup(struct dlt_gpu *g, char *err, size_t errlen);
static int fused_after(const struct dlt_gpu *g, int li);

/* 1 when conv layer li of g's net has its weight and bias gradients
 * computed directly (dlt_gpu_conv_dw_direct, on the own path): its pass
 * writes no im2col matrix, and none is allocated. */
static int conv_dw_direct(const struct dlt_gpu *g, int li)
{
	const struct dlt_layer *l = &g->net.layer[li];

	return g->direct && l->kind == DLT_LAYER_CONV &&
	       dlt_gpu_conv_dw_direct((double)l->in.c * l->k * l->k, li, fused_after(g, li));
}

/* A conv's weight gradient gr (F x R) and bias gradient (F, after it)
 * from t (F x N: its product's gradient) and its im2col matrix col, whose
 * row R (the last) is ones: split (dlt_gpu_gemm_splits of F x (R + 1) x
 * N), one product of F x (R + 1) whose last column is the bias gradient,
 * the parts' sum spreading it; else the weights' product and k_row_sums. */
static int conv_grads(struct dlt_gpu *g, int F, int R, int N, const float *t, const float *col,
		      float *gr, char *err, size_t errlen)
{
	if (g->splitk && dlt_gpu_gemm_splits(F, R + 1, N) > 1)
		return gemm_split(g, 0, 1, F, R + 1, N, t, N, col, N, gr, R, gr + (size_t)F * R,
				  err, errlen);
	TRY(gemm(g, 0, 1, F, R, N, t, N, col, N, gr, R, err, errlen));
	LAUNCH_SYNC(k_row_sums, F, GPU_THREADS, g->stream, gr + (size_t)F * (size_t)R, t, (size_t)N);
	KERNEL_CHECK("row_sums");
	return 0;
}

/* cudaMalloc of n bytes into *p, named what in the message. */
static int dalloc(void **p, size_t n, const char *what, char *err, size_t errlen)
{
	cudaError_t e = cudaMalloc(p, n ? n : 1);

	if (e != cudaSuccess) {
		*p = NULL;
		return fail(cuda_rc(e), err, errlen, "cuda: cudaMalloc(%s, %zu bytes): %s",
			    what, n, cudaGetErrorString(e));
	}
	return 0;
}

extern "C" int dlt_gpu_built(void)
{
	return 1;
}

extern "C" int dlt_gpu_count(char *err, size_t errlen)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);

	if (e != cudaSuccess) {
		cudaGetLastError();   /* leave no error behind for later calls */
		return fail(-ENODEV, err, errlen, "no NVIDIA GPU: %scudaGetDeviceCount: %s (%s)",
			    access("/dev/nvidiactl", F_OK) ? "no NVIDIA driver (/dev/nvidiactl); " : "",
			    cudaGetErrorString(e), cudaGetErrorName(e));
	}
	if (n < 1)
		return fail(-ENODEV, err, errlen, "no NVIDIA GPU: the CUDA driver sees no device");
	return n;
}

extern "C" void dlt_gpu_destroy(struct dlt_gpu *g)
{
	if (!g)
		return;
	cudaSetDevice(g->device);
	if (g->stream)
		cudaStreamSynchronize(g->stream);
	if (g->comm_stream)
		cudaStreamSynchronize(g->comm_stream);
	if (g->graph)
		cudaGraphExecDestroy(g->graph);
	if (g->comm)
		ncclCommDestroy(g->comm);
	if (g->blas)
		cublasDestroy(g->blas);
	if (g->lt_plan)
		lt_plans_drop(g);
	free(g->lt_plan);
	if (g->lt)
		cublasLtDestroy(g->lt);
	dnn_destroy(g->dnn);
	cudaFree(g->dnn_dw);
	cudaFree(g->lt_ws);
	for (int i = 0; i < DLT_NET_MAX_LAYERS; i++) {
		cudaFree(g->layer[i].act);
		cudaFree(g->layer[i].col);
		cudaFree(g->layer[i].col16);
		cudaFree(g->layer[i].arg);
		cudaFree(g->layer[i].mask);
	}
	cudaFree(g->params);
	cudaFree(g->grads);
	cudaFree(g->state);
	cudaFree(g->x);
	cudaFree(g->y);
	cudaFree(g->delta[0]);
	cudaFree(g->delta[1]);
	cudaFree(g->ws);
	cudaFree(g->part);
	cudaFree(g->params16);
	cudaFree(g->op16[0]);
	cudaFree(g->op16[1]);
	cudaFree(g->dsum);
	cudaFree(g->vals);
	cudaFree(g->data_x);
	cudaFree(g->data_y);
	free(g->hblock);
	cudaFreeHost(g->host_sum);
	for (int q = 0; q < GPU_QUEUE; q++) {
		struct gpu_slot *sl = &g->slot[q];

		cudaFreeHost(sl->block);
		cudaFreeHost(sl->gsum);
		cudaFreeHost(sl->bx);
		for (int i = 0; i < 5; i++)
			if (sl->ev[i])
				cudaEventDestroy(sl->ev[i]);
		if (sl->done)
			cudaEventDestroy(sl->done);
	}
	for (int i = 0; i < g->nbuckets; i++)
		cudaEventDestroy(g->bucket[i].ready);
	for (int i = 0; g->prof_ev && i < GPU_PROF_MARKS; i++)
		if (g->prof_ev[i])
			cudaEventDestroy(g->prof_ev[i]);
	free(g->prof_ev);
	if (g->comm_done)
		cudaEventDestroy(g->comm_done);
	if (g->comm_stream)
		cudaStreamDestroy(g->comm_stream);
	if (g->stream)
		cudaStreamDestroy(g->stream);
	free(g);
}

/* The most floats the split GEMMs of layer l (gemm_split) need for any
 * batch up to rows rows (dlt_gpu_part_floats, as the estimator counts). */
static size_t layer_part_floats(const struct dlt_layer *l, double rows)
{
	if (l->kind == DLT_LAYER_DENSE)
		return (size_t)dlt_gpu_part_floats(rows, (double)dlt_shape_size(l->in), l->out.c, 0,
						   0, 0);
	if (l->kind == DLT_LAYER_CONV)
		return (size_t)dlt_gpu_part_floats(rows, 0, 0, l->out.c,
						   (double)l->in.c * l->k * l->k,
						   (double)l->in.h * l->in.w);
	return 0;
}

/* Allocates the buffers of g for its net; returns 0 or -errno. */
static int alloc_all(struct dlt_gpu *g, char *err, size_t errlen)
{
	const struct dlt_net *n = &g->net;
	const size_t mb = (size_t)g->max_batch, np = g->nparams;
	size_t widest = dlt_shape_size(n->in), ws = 1, wmax = 0;

	for (int i = 0; i < n->nlayers; i++) {
		const struct dlt_layer *l = &n->layer[i];
		size_t out = dlt_shape_size(l->out);

		if (out > widest)
			widest = out;
		TRY(dalloc((void **)&g->layer[i].act, mb * out * sizeof(float), "activations",
			   err, errlen));
		if (l->kind == DLT_LAYER_CONV) {
			size_t r = (size_t)l->in.c * (size_t)l->k * (size_t)l->k;
			size_t N = mb * (size_t)l->in.h * (size_t)l->in.w;

			if (!conv_dw_direct(g, i))
				TRY(dalloc((void **)&g->layer[i].col, (r + 1) * N * sizeof(float),
					   "im2col", err, errlen));
			if ((size_t)l->out.c * N > ws)
				ws = (size_t)l->out.c * N;
			if ((size_t)l->out.c * r > wmax)
				wmax = (size_t)l->out.c * r;
		}
		if (l->kind == DLT_LAYER_POOL)
			TRY(dalloc((void **)&g->layer[i].arg, mb * out * sizeof(int32_t),
				   "pool argmax", err, errlen));
		/* the ReLU's bit mask, for any precision set later */
		if (g->lt_want && dgrad_kinds(n, i))
			TRY(dalloc((void **)&g->layer[i].mask,
				   (size_t)dlt_gpu_lt_mask_bytes((double)mb, l->out.c), "ReLU masks", err,
				   errlen));
	}
	if (g->lt_want)
		TRY(dalloc(&g->lt_ws, LT_WS_BYTES, "cuBLASLt workspace", err, errlen));
	if (g->dnn)
		TRY(dalloc((void **)&g->dnn_dw, wmax * sizeof(float) + 256, "cuDNN's weight scratch",
			   err, errlen));
	TRY(dalloc((void **)&g->params, np * sizeof(float), "params", err, errlen));
	TRY(dalloc((void **)&g->grads, (np + 2) * sizeof(float), "grads", err, errlen));
	TRY(dalloc((void **)&g->state, (size_t)g->nstate * np * sizeof(float), "optimizer state",
		   err, errlen));
	TRY(dalloc((void **)&g->x, mb * dlt_shape_size(n->in) * sizeof(float), "input batch",
		   err, errlen));
	TRY(dalloc((void **)&g->y, mb, "labels", err, errlen));
	TRY(dalloc((void **)&g->delta[0], mb * widest * sizeof(float), "deltas", err, errlen));
	TRY(dalloc((void **)&g->delta[1], mb * widest * sizeof(float), "deltas", err, errlen));
	TRY(dalloc((void **)&g->ws, ws * sizeof(float), "conv workspace", err, errlen));
	for (int i = 0; i < n->nlayers; i++) {
		const struct dlt_layer *l = &n->layer[i];
		size_t f = g->splitk ? layer_part_floats(l, (double)mb) : 0;

		if (conv_dw_direct(g, i))   /* k_conv_pool_dw's parts */
			f = (size_t)dlt_gpu_dw_part_floats((double)mb, l->out.c,
							   (double)l->in.c * l->k * l->k);
		g->part_n = f > g->part_n ? f : g->part_n;
	}
	if (g->part_n)
		TRY(dalloc((void **)&g->part, g->part_n * sizeof(float), "split GEMM parts", err,
			   errlen));
	TRY(dalloc((void **)&g->dsum, 2 * sizeof(double), "batch sums", err, errlen));
	const size_t block = sizeof *g->vals + mb * sizeof(uint32_t);
	TRY(dalloc((void **)&g->vals, block, "step values", err, errlen));
	CUDA_CHECK(cudaMemsetAsync(g->vals, 0, block, g->stream));
	if (!(g->hblock = (unsigned char *)calloc(1, block)))
		return fail(-ENOMEM, err, errlen, "gpu: cannot allocate %zu host bytes", block);
	CUDA_CHECK(cudaMallocHost((void **)&g->host_sum, 2 * sizeof(double)));
	for (int q = 0; q < GPU_QUEUE; q++) {
		CUDA_CHECK(cudaMallocHost((void **)&g->slot[q].block, block));
		CUDA_CHECK(cudaMallocHost((void **)&g->slot[q].gsum, 2 * sizeof(float)));
	}
	CUDA_CHECK(cudaMemsetAsync(g->state, 0, (size_t)g->nstate * np * sizeof(float), g->stream));
	CUDA_CHECK(cudaMemsetAsync(g->grads, 0, (np + 2) * sizeof(float), g->stream));
	return 0;
}

/* Selects g->device and creates the stream, events and cuBLAS handle. */
static int open_device(struct dlt_gpu *g, char *err, size_t errlen)
{
	struct cudaDeviceProp prop;

	CUDA_CHECK(cudaSetDevice(g->device));
	CUDA_CHECK(cudaGetDeviceProperties(&prop, g->device));
	snprintf(g->name, sizeof g->name, "%s (device %d, sm_%d%d, %d SMs, %.0f GiB)",
		 prop.name, g->device, prop.major, prop.minor, prop.multiProcessorCount,
		 (double)prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
	CUDA_CHECK(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
	for (int q = 0; q < GPU_QUEUE; q++) {
		for (int i = 0; i < 5; i++)
			CUDA_CHECK(cudaEventCreate(&g->slot[q].ev[i]));
		CUDA_CHECK(cudaEventCreateWithFlags(&g->slot[q].done, cudaEventDisableTiming));
	}
	CUDA_CHECK(cudaStreamCreateWithFlags(&g->comm_stream, cudaStreamNonBlocking));
	CUDA_CHECK(cudaEventCreateWithFlags(&g->comm_done, cudaEventDisableTiming));
	BLAS_CHECK(cublasCreate(&g->blas));
	BLAS_CHECK(cublasSetStream(g->blas, g->stream));
	/* plain FP32 GEMMs, as on the CPU: the default math mode uses no TF32 */
	BLAS_CHECK(cublasSetMathMode(g->blas, CUBLAS_DEFAULT_MATH));
	if (g->lt_want) {   /* the dense epilogues: off, saying why, without it */
		cublasStatus_t st = cublasLtCreate(&g->lt);

		if (st != CUBLAS_STATUS_SUCCESS) {
			g->lt = NULL;
			g->lt_want = 0;
			snprintf(g->lt_why, sizeof g->lt_why, "cublasLtCreate: %s", blas_text(st));
			return 0;
		}
		g->lt_plan = (struct lt_plan *)calloc(LT_PLANS, sizeof *g->lt_plan);
		if (!g->lt_plan)
			return fail(-ENOMEM, err, errlen, "gpu: cannot allocate cuBLASLt's plans");
	}
	if (g->dnn_want) {   /* the convs through cuDNN: off, saying why, without it */
		char why[200];
		int rc = dnn_create(&g->dnn, g->stream, why, sizeof why);

		if (rc == -ENOTSUP) {
			g->dnn_want = 0;
			snprintf(g->dnn_off, sizeof g->dnn_off, "; convolutions through cuDNN off: %s",
				 why);
		} else if (rc < 0) {
			return fail(rc, err, errlen, "gpu: %s", why);
		}
	}
	return 0;
}

/* 1 when net n has a layer of kind. */
static int has_layer(const struct dlt_net *n, int kind)
{
	for (int i = 0; i < n->nlayers; i++)
		if (n->layer[i].kind == kind)
			return 1;
	return 0;
}

extern "C" int dlt_gpu_create(struct dlt_gpu **out, const struct dlt_net *n, int nstate,
			      int device, uint64_t seed, int rank, char *err, size_t errlen)
{
	struct dlt_gpu *g;
	int rc, count;

	*out = NULL;
	count = dlt_gpu_count(err, errlen);
	if (count < 0)
		return count;
	if (device < 0 || device >= count)
		return fail(-ENODEV, err, errlen, "no CUDA device %d (this process sees %d)",
			    device, count);
	g = (struct dlt_gpu *)calloc(1, sizeof *g);
	if (!g)
		return fail(-ENOMEM, err, errlen, "cannot allocate the GPU backend's state");
	g->device = device;
	g->net = *n;   /* the layout only: its host pointers are never used here */
	for (int i = 0; i < DLT_NET_MAX_LAYERS; i++)
		g->net.layer[i].saved = NULL;
	memset(g->net.act, 0, sizeof g->net.act);
	g->net.delta[0] = g->net.delta[1] = g->net.ws = NULL;
	g->nparams = n->nparams;
	g->nstate = nstate;
	g->max_batch = n->max_batch;
	g->seed = seed;
	g->rank = rank;
	g->graph_on = 1;
	{
		const char *i64 = getenv("DLT_GPU_INDEX64");

		g->idx32_below = i64 && !strcmp(i64, "1") ? 0 : (size_t)1 << 31;
	}
	{
		const char *sk = getenv("DLT_GPU_SPLITK"), *lt = getenv("DLT_GPU_LT");
		const char *one = getenv("DLT_GPU_LT_ONE"), *conv = getenv("DLT_GPU_CONV");

		g->splitk = !(sk && !strcmp(sk, "0"));
		g->lt_want = !(lt && !strcmp(lt, "0"));
		g->lt_one = one && !strcmp(one, "1");
		/* a net without convs opens no cuDNN handle */
		g->dnn_want = conv && !strcmp(conv, "cudnn") && has_layer(n, DLT_LAYER_CONV);
		g->direct = !(conv && !strcmp(conv, "gemm"));
	}

	rc = open_device(g, err, errlen);
	if (rc == 0)
		rc = alloc_all(g, err, errlen);
	if (rc == 0)
		rc = lt_setup(g, err, errlen);
	if (rc == 0)
		rc = dnn_setup(g, err, errlen);
	if (rc < 0) {
		dlt_gpu_destroy(g);
		return rc;
	}
	*out = g;
	return 0;
}

/* What the device line says of g's convs on its own path (not through
 * cuDNN): which are computed directly (dlt_gpu_conv_direct), into out
 * ("" for none), or that DLT_GPU_CONV=gemm keeps them all on im2col. */
static void direct_note(const struct dlt_gpu *g, char *out, size_t len)
{
	size_t o = 0;

	out[0] = '\0';
	for (int i = 0; i < g->net.nlayers && !g->dnn_on && o < len; i++) {
		const struct dlt_layer *l = &g->net.layer[i];
		const int R = l->in.c * l->k * l->k;
		int w;

		if (l->kind != DLT_LAYER_CONV || !dlt_gpu_conv_direct(R))
			continue;
		if (!g->direct) {
			snprintf(out, len, "; every conv an im2col product (DLT_GPU_CONV=gemm)");
			return;
		}
		w = snprintf(out + o, len - o, "%s%d (%d taps)", o ? ", " : "; conv products direct: layer ",
			     i + 1, R);
		o += w > 0 ? (size_t)w : 0;
	}
}

extern "C" void dlt_gpu_describe(const struct dlt_gpu *g, char *out, size_t len)
{
	char direct[160];

	direct_note(g, direct, sizeof direct);
	snprintf(out, len, "%s%s%s%s", g->name, g->lt_off, g->dnn_off, direct);
}

extern "C" int dlt_gpu_nccl_id(unsigned char *id, char *err, size_t errlen)
{
	ncclUniqueId u;

	static_assert(sizeof u.internal == DLT_GPU_ID_BYTES, "NCCL_UNIQUE_ID_BYTES changed");
	NCCL_CHECK(ncclGetUniqueId(&u));
	memcpy(id, u.internal, DLT_GPU_ID_BYTES);
	return 0;
}

extern "C" int dlt_gpu_nccl_init(struct dlt_gpu *g, const unsigned char *id, int rank, int ranks,
				 char *err, size_t errlen)
{
	ncclUniqueId u;
	ncclComm_t comm;

	if (g->comm)
		return fail(-EINVAL, err, errlen, "gpu: the NCCL communicator is already set up");
	memcpy(u.internal, id, DLT_GPU_ID_BYTES);
	CUDA_CHECK(cudaSetDevice(g->device));
	NCCL_CHECK(ncclCommInitRank(&comm, ranks, u, rank));
	g->comm = comm;   /* only a communicator that exists: destroy frees it */
	g->nccl_ranks = ranks;
	return 0;
}

/* Frees g's graph (a new precision or new buckets: what it baked in changed). */
static void drop_graph(struct dlt_gpu *g)
{
	if (g->graph)
		cudaGraphExecDestroy(g->graph);
	g->graph = NULL;
	g->have_last = 0;
}

/* bf16: queues the cast of the FP32 master parameters into params16 (after
 * an upload or an update); nothing in the other precisions. */
static int cast_weights(struct dlt_gpu *g, char *err, size_t errlen)
{
	if (g->precision != DLT_PRECISION_BF16)
		return 0;
	LAUNCH(k_to_bf16, blocks_for(g->nparams), GPU_THREADS, g->stream, g->params16, g->params,
	       g->nparams);
	KERNEL_CHECK("to_bf16");
	return 0;
}

/* bf16: allocates params16, each conv's col16 and the two operand
 * buffers, each as large as the largest GEMM operand that is neither a
 * weight matrix nor an im2col matrix (a batch of a dense layer's input or
 * output, a conv's F x N delta). */
static int bf16_alloc(struct dlt_gpu *g, char *err, size_t errlen)
{
	const size_t mb = (size_t)g->max_batch;
	size_t most = 1;

	if (g->params16)
		return 0;
	for (int i = 0; i < g->net.nlayers; i++) {
		const struct dlt_layer *l = &g->net.layer[i];
		size_t a = 0, b = 0;

		if (l->kind == DLT_LAYER_DENSE) {
			a = mb * dlt_shape_size(l->in);
			b = mb * dlt_shape_size(l->out);
		} else if (l->kind == DLT_LAYER_CONV) {
			const size_t N = mb * (size_t)l->in.h * (size_t)l->in.w;
			const size_t R = (size_t)l->in.c * (size_t)l->k * (size_t)l->k;

			if (!g->layer[i].col16 && !conv_dw_direct(g, i))   /* (or made by a call
									     that failed later) */
				TRY(dalloc((void **)&g->layer[i].col16, (R + 1) * N * sizeof(uint16_t),
					   "bf16 im2col", err, errlen));
			b = (size_t)l->out.c * N;
		}
		most = a > most ? a : most;
		most = b > most ? b : most;
	}
	TRY(dalloc((void **)&g->params16, g->nparams * sizeof(uint16_t), "bf16 parameters",
		   err, errlen));
	TRY(dalloc((void **)&g->op16[0], most * sizeof(uint16_t), "bf16 operands", err, errlen));
	TRY(dalloc((void **)&g->op16[1], most * sizeof(uint16_t), "bf16 operands", err, errlen));
	g->op16_n = most;
	return 0;
}

extern "C" int dlt_gpu_set_precision(struct dlt_gpu *g, enum dlt_precision p, char *err,
				     size_t errlen)
{
	CUDA_CHECK(cudaSetDevice(g->device));
	switch (p) {
	case DLT_PRECISION_FP32:
	case DLT_PRECISION_BF16:   /* cublasGemmEx's compute type says it */
		BLAS_CHECK(cublasSetMathMode(g->blas, CUBLAS_DEFAULT_MATH));
		break;
	case DLT_PRECISION_TF32:
		BLAS_CHECK(cublasSetMathMode(g->blas, CUBLAS_TF32_TENSOR_OP_MATH));
		break;
	default:
		return fail(-EINVAL, err, errlen, "gpu: unknown precision %d", (int)p);
	}
	if (p == DLT_PRECISION_BF16)
		TRY(bf16_alloc(g, err, errlen));
	drop_graph(g);   /* its GEMMs were captured in the old precision */
	g->precision = p;
	TRY(lt_setup(g, err, errlen));
	TRY(dnn_setup(g, err, errlen));
	TRY(cast_weights(g, err, errlen));
	CUDA_CHECK(cudaStreamSynchronize(g->stream));
	return 0;
}

extern "C" int dlt_gpu_upload(struct dlt_gpu *g, const float *params, const float *state,
			      char *err, size_t errlen)
{
	const size_t np = g->nparams;

	CUDA_CHECK(cudaSetDevice(g->device));
	CUDA_CHECK(cudaMemcpyAsync(g->params, params, np * sizeof(float),
				   cudaMemcpyHostToDevice, g->stream));
	if (state)
		CUDA_CHECK(cudaMemcpyAsync(g->state, state, (size_t)g->nstate * np * sizeof(float),
					   cudaMemcpyHostToDevice, g->stream));
	TRY(cast_weights(g, err, errlen));
	CUDA_CHECK(cudaStreamSynchronize(g->stream));
	return 0;
}

extern "C" int dlt_gpu_download(struct dlt_gpu *g, float *params, float *state,
				char *err, size_t errlen)
{
	const size_t np = g->nparams;

	CUDA_CHECK(cudaSetDevice(g->device));
	CUDA_CHECK(cudaMemcpyAsync(params, g->params, np * sizeof(float),
				   cudaMemcpyDeviceToHost, g->stream));
	if (state)
		CUDA_CHECK(cudaMemcpyAsync(state, g->state, (size_t)g->nstate * np * sizeof(float),
					   cudaMemcpyDeviceToHost, g->stream));
	CUDA_CHECK(cudaStreamSynchronize(g->stream));
	return 0;
}

/* The layers after layer li that its kernels run too (dlt_gpu_fused): 1,
 * a ReLU (two graph nodes fewer, and a pass less over the activations
 * each way); 2, a ReLU and a max-pool after a conv (the conv's bias,
 * ReLU and output pass, the pool's memset and gradient pass: three nodes
 * and four passes fewer); else 0. */
static int fused_after(const struct dlt_gpu *g, int li)
{
	const struct dlt_net *n = &g->net;

	return dlt_gpu_fused(kind_at(n, li), kind_at(n, li + 1), kind_at(n, li + 2));
}

/* The layer whose kernels run layer li (fused_after), or li itself. */
static int fused_into(const struct dlt_gpu *g, int li)
{
	for (int h = li - 1; h >= 0 && h >= li - 2; h--)
		if (h + fused_after(g, h) >= li)
			return h;
	return li;
}

/* Whether the dense layers run their epilogues now (lt_on: lt_gemm): when
 * wanted (DLT_GPU_LT), in a precision that has them, and when cuBLASLt has
 * an algorithm for each product they would run, at the largest batch;
 * else the plain products and kernels, lt_off saying why. Returns 0, or a
 * cuBLASLt error other than "no algorithm". */
static int lt_setup(struct dlt_gpu *g, char *err, size_t errlen)
{
	const struct dlt_net *n = &g->net;
	const int mb = g->max_batch;
	char why[160] = "";

	g->lt_on = 0;
	if (g->lt_plan)
		lt_plans_drop(g);   /* a precision's compute type is theirs */
	if (!g->lt_want) {
		if (g->lt_why[0])
			snprintf(g->lt_off, sizeof g->lt_off, "; dense epilogues off: %s", g->lt_why);
		else
			snprintf(g->lt_off, sizeof g->lt_off, "; dense epilogues off (DLT_GPU_LT=0)");
		return 0;
	}
	if (!dlt_gpu_dense_epilogue(g->precision)) {
		snprintf(g->lt_off, sizeof g->lt_off, "; dense epilogues off in bf16");
		return 0;
	}
	g->lt_on = 1;   /* lt_dgrad reads it */
	for (int i = 0; i < n->nlayers; i++) {
		float *act = g->layer[i].act;
		int rc;

		if (n->layer[i].kind != DLT_LAYER_DENSE)
			continue;
		rc = lt_dense_fwd(g, i, mb, g->x, act, fused_after(g, i) >= 1 ? LT_RELU_BIAS : LT_BIAS,
				  1, why, sizeof why);
		if (!rc && lt_dgrad(g, i))
			rc = lt_dense_fwd(g, i, mb, g->x, act, LT_RELU_AUX_BIAS, 1, why, sizeof why);
		if (!rc && i >= 2 && lt_dgrad(g, i - 2))
			rc = lt_dense_dgrad(g, i, mb, g->delta[0], g->delta[1], 1, why, sizeof why);
		if (rc < 0) {
			g->lt_on = 0;
			snprintf(g->lt_off, sizeof g->lt_off, "; dense epilogues off: layer %d: %s",
				 i + 1, why);
			if (rc != -ENOTSUP)
				return fail(rc, err, errlen, "gpu: %s", why);
			return 0;
		}
	}
	/* layers whose biases lie off 16 bytes keep their own kernels (lt_gemm) */
	char own[96] = "";
	size_t at = 0;

	for (int i = 0; i < n->nlayers && at < sizeof own; i++)
		if (n->layer[i].kind == DLT_LAYER_DENSE &&
		    lt_align(g->params + dense_bias(&n->layer[i])) < 16)
			at += (size_t)snprintf(own + at, sizeof own - at, "%s%d", at ? ", " : "", i + 1);
	snprintf(g->lt_off, sizeof g->lt_off, "; dense bias and ReLU in cuBLASLt epilogues%s%s%s%s",
		 g->lt_one ? " (one kernel each: DLT_GPU_LT_ONE=1)" : "",
		 own[0] ? " (not layer " : "", own, own[0] ? ": biases not 16-byte aligned)" : "");
	return 0;
}

/* Conv layer li as dnn.h sees it. */
static struct dnn_conv conv_shape(const struct dlt_gpu *g, int li)
{
	const struct dlt_layer *l = &g->net.layer[li];
	const struct dnn_conv c = { li, l->in.c, l->in.h, l->in.w, l->out.c, l->k };

	return c;
}

/* Conv layer li (c) at n rows of x planned (dnn_plan) on buffers that
 * hold nothing a later call reads: Find writes g->ws, a delta buffer and
 * g->dnn_dw, at the offset from 256 bytes where the layer's weight
 * gradient lies (an algorithm timed on an aligned buffer may need it:
 * cuDNN picks its vector loads by the pointers it is given); the
 * gradients' products only for train (an evaluation's rows plan the
 * forward: a training pass at them plans the rest). Into *b, with which
 * the forward runs. Returns 0, -ENOTSUP (no plan: the own path runs), or
 * -errno. */
static int conv_dnn_plan(struct dlt_gpu *g, int li, const struct dnn_conv *c, const float *x,
			 int n, int train, struct dnn_bufs *b, char *err, size_t errlen)
{
	const size_t off = g->net.layer[li].off;
	float *dw = g->dnn_dw + (uintptr_t)(g->grads + off) % 256 / sizeof(float);

	*b = (struct dnn_bufs){ x, g->params + off, g->ws, g->ws,
				train && li > 0 ? g->delta[0] : NULL, train ? dw : NULL };
	return dnn_plan(g->dnn, c, n, b, err, errlen);
}

/* Conv layer li's product on n rows of x through cuDNN into g->ws (NCHW),
 * planned first (the gradients' products too for train). Returns 0,
 * -ENOTSUP when cuDNN has no plan for it (the caller's own path runs), or
 * -errno. */
static int conv_dnn_forward(struct dlt_gpu *g, int li, const float *x, int n, int train,
			    char *err, size_t errlen)
{
	const struct dnn_conv c = conv_shape(g, li);
	struct dnn_bufs b;

	TRY(conv_dnn_plan(g, li, &c, x, n, train, &b, err, errlen));
	return dnn_forward(g->dnn, &c, n, &b, err, errlen);
}

/* Conv layer li's gradients through cuDNN from t (the product's gradient,
 * NCHW) and its input x on n rows: the weights' and the bias's (the planes'
 * sums) into g->grads, and dx when not NULL. Returns 0 or -errno. */
static int conv_dnn_backward(struct dlt_gpu *g, int li, const float *x, const float *t, float *dx,
			     int n, char *err, size_t errlen)
{
	const struct dlt_layer *l = &g->net.layer[li];
	const struct dnn_conv c = conv_shape(g, li);
	float *gr = g->grads + l->off;
	const struct dnn_bufs b = { x, g->params + l->off, NULL, t, dx, gr };

	TRY(dnn_backward_filter(g->dnn, &c, n, &b, err, errlen));
	LAUNCH_SYNC(k_plane_sums, c.f, GPU_THREADS, g->stream, gr + (size_t)c.f * c.c * c.k * c.k,
		    t, c.f, (size_t)c.h * (size_t)c.w, n);
	KERNEL_CHECK("plane_sums");
	if (dx)
		TRY(dnn_backward_data(g->dnn, &c, n, &b, err, errlen));
	return 0;
}

/* Whether the convs go through cuDNN now (dnn_on): when wanted
 * (DLT_GPU_CONV=cudnn) and opened, in fp32 or tf32 (bf16 keeps its own
 * products), and when cuDNN has an algorithm for each product of each conv
 * at the largest batch; else gpu.cu's own path, dnn_off saying why.
 * Returns 0, or -errno when cuDNN fails otherwise. */
static int dnn_setup(struct dlt_gpu *g, char *err, size_t errlen)
{
	const struct dlt_net *n = &g->net;
	char why[200] = "", ver[32];

	g->dnn_on = 0;
	if (!g->dnn)   /* not asked for, or dnn_create said why */
		return 0;
	if (g->precision == DLT_PRECISION_BF16) {
		snprintf(g->dnn_off, sizeof g->dnn_off, "; convolutions through cuDNN off in bf16");
		return 0;
	}
	dnn_set_tf32(g->dnn, g->precision == DLT_PRECISION_TF32);
	for (int i = 0; i < n->nlayers; i++) {
		const struct dnn_conv c = conv_shape(g, i);
		struct dnn_bufs b;
		int rc;

		if (n->layer[i].kind != DLT_LAYER_CONV)
			continue;
		rc = conv_dnn_plan(g, i, &c, i > 0 ? g->layer[i - 1].act : g->x, g->max_batch, 1,
				   &b, why, sizeof why);
		if (rc < 0) {
			snprintf(g->dnn_off, sizeof g->dnn_off,
				 "; convolutions through cuDNN off: layer %d: %s", i + 1, why);
			if (rc != -ENOTSUP)
				return fail(rc, err, errlen, "gpu: %s", why);
			return 0;
		}
	}
	g->dnn_on = 1;
	dnn_version(g->dnn, ver, sizeof ver);
	snprintf(g->dnn_off, sizeof g->dnn_off, "; convolutions through cuDNN %s", ver);
	return 0;
}

/* Layer li's forward pass on n rows from x into its activation, or with
 * fused_after into the output of the last layer it runs (dropout with the
 * masks of the step in g->vals when train). */
static int layer_forward(struct dlt_gpu *g, int li, const float *x, int n, int train,
			 char *err, size_t errlen)
{
	const struct dlt_layer *l = &g->net.layer[li];
	const float *p = g->params + l->off;
	float *y = g->layer[li].act;
	const int fused = fused_after(g, li), relu = fused >= 1;
	float *out = relu ? g->layer[li + 1].act : y;
	const size_t m = (size_t)n * dlt_shape_size(l->in);
	cudaStream_t s = g->stream;

	switch (l->kind) {
	case DLT_LAYER_DENSE: {
		int k = (int)dlt_shape_size(l->in), o = l->out.c;

		if (g->lt_on) {   /* the bias (and ReLU) in the product's epilogue */
			const int aux = train && lt_dgrad(g, li);   /* the mask backward reads */
			int rc = lt_dense_fwd(g, li, n, x, out, !relu ? LT_BIAS : aux ? LT_RELU_AUX_BIAS :
					      LT_RELU_BIAS, 0, err, errlen);

			g->layer[li].lt_plain = rc == -ENOTSUP;   /* none at these rows: the plain path */
			if (rc != -ENOTSUP) {
				TRY(rc);
				break;
			}
		}
		TRY(gemm(g, 0, 1, n, o, k, x, k, p, k, y, o, err, errlen));
		LAUNCH_IDX(k_add_bias_rows, (size_t)n * o, blocks_for((size_t)n * o), GPU_THREADS, s,
			   out, y, g->params + dense_bias(l), o, (size_t)n * (size_t)o, relu);
		KERNEL_CHECK("add_bias_rows");
		break;
	}
	case DLT_LAYER_RELU:
		LAUNCH(k_relu_fwd, blocks_for(m), GPU_THREADS, s, y, x, m);
		KERNEL_CHECK("relu_fwd");
		break;
	case DLT_LAYER_CONV: {
		const int F = l->out.c, R = l->in.c * l->k * l->k;
		const size_t hw = (size_t)l->in.h * (size_t)l->in.w, N = (size_t)n * hw;
		float *col = g->layer[li].col;
		size_t fs = N, is = hw;   /* the product's layout: F x N */

		g->layer[li].conv_dnn = 0;
		if (g->dnn_on) {   /* through cuDNN: the product NCHW, into g->ws */
			int rc = conv_dnn_forward(g, li, x, n, train, err, errlen);

			if (rc != -ENOTSUP) {
				TRY(rc);
				g->layer[li].conv_dnn = 1;
				fs = hw;
				is = (size_t)F * hw;
			}
		}
		if (!g->layer[li].conv_dnn) {
			const int direct = g->direct && dlt_gpu_conv_direct(R);

			/* (R + 1) x N: the row of ones under the taps' (conv_grads);
			 * a direct product reads x, the weight gradient's product the
			 * matrix, but where that is direct too */
			if (!direct || (train && !conv_dw_direct(g, li))) {
				if (g->precision == DLT_PRECISION_BF16)   /* bf16_operand reads col16 */
					LAUNCH_IDX(k_im2col16, (R + 1) * N, blocks_for((R + 1) * N),
						   GPU_THREADS, s, g->layer[li].col16, x, l->in.c, l->in.h,
						   l->in.w, l->k, n);
				else
					LAUNCH_IDX(k_im2col, (R + 1) * N, blocks_for((R + 1) * N),
						   GPU_THREADS, s, col, x, l->in.c, l->in.h, l->in.w, l->k,
						   n);
				KERNEL_CHECK("im2col");
			}
			if (direct) {   /* with its bias, and the ReLU and pool fused after it */
				const struct dlt_layer *pl = fused == 2 ? &g->net.layer[li + 2] : NULL;
				const int oh = pl ? pl->out.h : l->out.h, ow = pl ? pl->out.w : l->out.w;
				const size_t outs = (size_t)n * (size_t)F * (size_t)oh * (size_t)ow;

				/* its largest index: y's or x's */
				LAUNCH_IDX(k_conv_direct, outs > m ? outs : m, blocks_for(outs), GPU_THREADS, s,
					   pl ? g->layer[li + 2].act : out, pl ? g->layer[li + 2].arg : NULL,
					   x, p, p + (size_t)F * (size_t)R, l->in.c, l->in.h, l->in.w, l->k, F,
					   n, relu, pl ? pl->k : 1, oh, ow);
				KERNEL_CHECK("conv_direct");
				break;
			}
			TRY(gemm(g, 0, 0, F, (int)N, R, p, R, col, (int)N, g->ws, (int)N, err, errlen));
		}
		if (fused == 2) {   /* the ReLU and the pool after it */
			const struct dlt_layer *pl = &g->net.layer[li + 2];
			const size_t outs = (size_t)n * dlt_shape_size(pl->out);

			LAUNCH_IDX(k_conv_pool_fwd, (size_t)F * N, blocks_for(outs), GPU_THREADS, s,
				   g->layer[li + 2].act, g->layer[li + 2].arg, g->ws,
				   p + (size_t)F * (size_t)R, F, l->out.w, n, fs, is, pl->k,
				   pl->out.h, pl->out.w);
			KERNEL_CHECK("conv_pool_fwd");
			break;
		}
		LAUNCH_IDX(k_conv_scatter, (size_t)F * N, blocks_for((size_t)F * N), GPU_THREADS, s,
			   out, g->ws, p + (size_t)F * (size_t)R, F, hw, n, fs, is, relu);
		KERNEL_CHECK("conv_scatter");
		break;
	}
	case DLT_LAYER_POOL: {
		const size_t planes = (size_t)n * (size_t)l->in.c;

		LAUNCH_IDX(k_pool_fwd, planes * l->in.h * l->in.w, blocks_for(planes * l->out.h * l->out.w),
			   GPU_THREADS, s, y, g->layer[li].arg, x, l->k, l->in.h, l->in.w, l->out.h,
			   l->out.w, planes);
		KERNEL_CHECK("pool_fwd");
		break;
	}
	case DLT_LAYER_DROPOUT:
		if (!train || l->p <= 0.0f) {
			CUDA_CHECK(cudaMemcpyAsync(y, x, m * sizeof(float), cudaMemcpyDeviceToDevice, s));
			break;
		}
		LAUNCH(k_dropout, blocks_for(m), GPU_THREADS, s,
			y, x, g->vals, g->seed, g->rank, l->index, dlt_drop_threshold(l->p),
			1.0f / (1.0f - l->p), m);
		KERNEL_CHECK("dropout");
		break;
	}
	return 0;
}

/* Layer li's backward pass from dy (n rows): parameter gradients into
 * g->grads + l->off and, when dx is not NULL, the input gradient; x is the
 * layer's input. With fused_after, dy is the gradient of the last layer it
 * runs: the ReLU's output, masked here (in place, for a dense layer), or
 * the pool's. */
static int layer_backward(struct dlt_gpu *g, int li, const float *x, float *dy, float *dx,
			  int n, int train, char *err, size_t errlen)
{
	const struct dlt_layer *l = &g->net.layer[li];
	const float *p = g->params + l->off, *y = g->layer[li].act;
	const int fused = fused_after(g, li);
	const float *mask = fused >= 1 ? g->layer[li + 1].act : NULL;
	float *gr = g->grads + l->off;
	const size_t m = (size_t)n * dlt_shape_size(l->in);
	cudaStream_t s = g->stream;

	switch (l->kind) {
	case DLT_LAYER_DENSE: {
		int k = (int)dlt_shape_size(l->in), o = l->out.c;
		const int last = li == g->net.nlayers - 1;

		/* the bias gradient first: with a ReLU after, it masks dy; the
		 * loss kernel summed the last layer's (dlt_gpu_loss_bgrad), and
		 * the input-gradient product of the dense layer two after did
		 * both (lt_dgrad) */
		if (!(last && dlt_gpu_loss_bgrad(l->kind)) &&
		    !(lt_dgrad(g, li) && !g->layer[li].lt_plain)) {
			LAUNCH_SYNC(k_col_sums, (o + COL_SUMS_W - 1) / COL_SUMS_W,
				    COL_SUMS_W * COL_SUMS_G, s, g->grads + dense_bias(l), dy, mask, n, o);
			KERNEL_CHECK("col_sums");
		}
		TRY(gemm(g, 1, 0, o, k, n, dy, o, x, k, gr, k, err, errlen));
		if (dx && li >= 2 && lt_dgrad(g, li - 2) && !g->layer[li - 2].lt_plain) {
			/* dx masked by layer li - 2's ReLU, and that layer's bias
			 * gradient */
			int rc = lt_dense_dgrad(g, li, n, dy, dx, 0, err, errlen);

			if (rc != -ENOTSUP)
				TRY(rc);
			else   /* none at these rows: layer li - 2's backward does both */
				g->layer[li - 2].lt_plain = 1;
			if (rc == 0)
				break;
		}
		if (dx)
			TRY(gemm(g, 0, 0, n, k, o, dy, o, p, k, dx, k, err, errlen));
		break;
	}
	case DLT_LAYER_RELU:
		if (dx) {
			LAUNCH(k_relu_bwd, blocks_for(m), GPU_THREADS, s, dx, y, dy, m);
			KERNEL_CHECK("relu_bwd");
		}
		break;
	case DLT_LAYER_CONV: {
		const int F = l->out.c, R = l->in.c * l->k * l->k;
		const size_t hw = (size_t)l->in.h * (size_t)l->in.w, N = (size_t)n * hw;
		float *col = g->layer[li].col, *t = g->ws;
		const int dnn = g->layer[li].conv_dnn;   /* as the forward went */
		const size_t fs = dnn ? hw : N, is = dnn ? (size_t)F * hw : hw;

		if (!dnn && conv_dw_direct(g, li)) {   /* from the pool's gradient: parts, their sum */
			const struct dlt_layer *pl = &g->net.layer[li + 2];
			const int S = dlt_gpu_dw_parts(n, F);
			const size_t outs = (size_t)n * dlt_shape_size(pl->out);

			LAUNCH_SYNC_IDX(k_conv_pool_dw, outs > m ? outs : m, (unsigned)(S * F),
					DLT_CONV_DW_THREADS, s, g->part, dy, g->layer[li + 2].arg,
					g->layer[li + 2].act, x, l->in.c, l->in.h, l->in.w, l->k, F, n, S,
					pl->out.h, pl->out.w);
			KERNEL_CHECK("conv_pool_dw");
			LAUNCH(k_sum_parts, blocks_for((size_t)F * (size_t)(R + 1)), GPU_THREADS, s, gr, R,
			       g->part, S, F, R + 1, gr + (size_t)F * (size_t)R);
			KERNEL_CHECK("sum_parts");
			break;
		}
		if (fused == 2) {   /* from the pool's gradient */
			const struct dlt_layer *pl = &g->net.layer[li + 2];

			LAUNCH_IDX(k_pool_conv_gather, (size_t)F * N, blocks_for((size_t)F * N),
				   GPU_THREADS, s, t, dy, g->layer[li + 2].arg, g->layer[li + 2].act, F,
				   l->out.h, l->out.w, n, fs, is, pl->k, pl->out.h, pl->out.w);
			KERNEL_CHECK("pool_conv_gather");
		} else {
			LAUNCH_IDX(k_conv_gather, (size_t)F * N, blocks_for((size_t)F * N),
				   GPU_THREADS, s, t, dy, mask, F, hw, n, fs, is);
			KERNEL_CHECK("conv_gather");
		}
		if (dnn) {
			TRY(conv_dnn_backward(g, li, x, t, dx, n, err, errlen));
			break;
		}
		TRY(conv_grads(g, F, R, (int)N, t, col, gr, err, errlen));
		if (!dx)
			break;
		TRY(gemm(g, 1, 0, R, (int)N, F, p, R, t, (int)N, col, (int)N, err, errlen));
		/* its largest index is col's (R x N), not dx's */
		LAUNCH_IDX(k_col2im, (size_t)R * N, blocks_for(m), GPU_THREADS, s,
			   dx, col, l->in.c, l->in.h, l->in.w, l->k, n);
		KERNEL_CHECK("col2im");
		break;
	}
	case DLT_LAYER_POOL: {
		const size_t ip = (size_t)l->in.h * (size_t)l->in.w;
		const size_t op = (size_t)l->out.h * (size_t)l->out.w;
		const size_t planes = (size_t)n * (size_t)l->in.c;

		if (!dx)
			break;
		CUDA_CHECK(cudaMemsetAsync(dx, 0, planes * ip * sizeof(float), s));
		LAUNCH_IDX(k_pool_bwd, planes * ip, blocks_for(planes * op), GPU_THREADS, s,
			   dx, g->layer[li].arg, dy, ip, op, planes);
		KERNEL_CHECK("pool_bwd");
		break;
	}
	case DLT_LAYER_DROPOUT:
		if (!dx)
			break;
		if (!train || l->p <= 0.0f) {
			CUDA_CHECK(cudaMemcpyAsync(dx, dy, m * sizeof(float), cudaMemcpyDeviceToDevice, s));
			break;
		}
		LAUNCH(k_dropout, blocks_for(m), GPU_THREADS, s,
			dx, dy, g->vals, g->seed, g->rank, l->index, dlt_drop_threshold(l->p),
			1.0f / (1.0f - l->p), m);
		KERNEL_CHECK("dropout");
		break;
	}
	return 0;
}

/* Checks that a batch of rows fits g's buffers and selects g's device. */
static int batch_rows(struct dlt_gpu *g, int rows, char *err, size_t errlen)
{
	if (rows < 1 || rows > g->max_batch)
		return fail(-EINVAL, err, errlen, "gpu: batch of %d rows (1..%d)", rows, g->max_batch);
	CUDA_CHECK(cudaSetDevice(g->device));
	return 0;
}

/* Checks rows and copies the host batch x (and labels y, when not NULL),
 * from pageable memory (staged before the call returns, but CUDA may
 * stage it only once the stream reaches the copy) or, with sl, through
 * that queued step's pinned buffer (the call returns at once: a step is
 * queued while the one before runs). */
static int put_batch_via(struct dlt_gpu *g, struct gpu_slot *sl, const float *x,
			 const uint8_t *y, int rows, char *err, size_t errlen)
{
	const size_t nx = (size_t)rows * dlt_shape_size(g->net.in) * sizeof(float);

	TRY(batch_rows(g, rows, err, errlen));
	if (sl && !sl->bx)
		CUDA_CHECK(cudaMallocHost((void **)&sl->bx, (size_t)g->max_batch *
					  (dlt_shape_size(g->net.in) * sizeof(float) + 1)));
	if (sl) {
		memcpy(sl->bx, x, nx);
		x = sl->bx;
		if (y) {
			memcpy((unsigned char *)sl->bx + nx, y, (size_t)rows);
			y = (const uint8_t *)sl->bx + nx;
		}
	}
	CUDA_CHECK(cudaMemcpyAsync(g->x, x, nx, cudaMemcpyHostToDevice, g->stream));
	if (y)
		CUDA_CHECK(cudaMemcpyAsync(g->y, y, (size_t)rows, cudaMemcpyHostToDevice, g->stream));
	return 0;
}

/* put_batch_via from pageable memory (the calls but queued steps). */
static int put_batch(struct dlt_gpu *g, const float *x, const uint8_t *y, int rows,
		     char *err, size_t errlen)
{
	return put_batch_via(g, NULL, x, y, rows, err, errlen);
}

/* While a profiled step is captured, records mark k as a node of the
 * graph (an external event record: the event's time is the node's). */
static int prof_mark(struct dlt_gpu *g, int k, char *err, size_t errlen)
{
	if (g->prof_rec)
		CUDA_CHECK(cudaEventRecordWithFlags(g->prof_ev[k], g->stream, cudaEventRecordExternal));
	return 0;
}

/* The forward pass on the batch already in g->x (the step's values in g->vals). */
static int forward(struct dlt_gpu *g, int rows, int train, char *err, size_t errlen)
{
	const float *in = g->x;

	for (int i = 0; i < g->net.nlayers; i++) {
		const int last = i + fused_after(g, i);   /* the layers i's kernels run */

		TRY(layer_forward(g, i, in, rows, train, err, errlen));
		TRY(prof_mark(g, PROF_FWD(i), err, errlen));
		while (i < last) {
			i++;   /* its output written by layer i's kernels */
			TRY(prof_mark(g, PROF_FWD(i), err, errlen));
		}
		in = g->layer[i].act;
	}
	return 0;
}

/* Softmax cross-entropy of the last activation against g->y; the logits'
 * gradient (scale = weight / rows) into delta[0] when train; the batch's
 * loss sum and hits into g->dsum (doubles) and, when fout is not NULL,
 * into fout (floats, e.g. grads + nparams). */
static int loss(struct dlt_gpu *g, int rows, int train, float weight, float *fout,
		char *err, size_t errlen)
{
	const struct dlt_layer *l = &g->net.layer[g->net.nlayers - 1];
	const float *z = g->layer[g->net.nlayers - 1].act;
	float *gb = train && dlt_gpu_loss_bgrad(l->kind) ? g->grads + dense_bias(l) : NULL;

	LAUNCH_SYNC(k_softmax_xent_sums, 1, GPU_THREADS, g->stream,
		    z, g->y, rows, g->net.classes, train ? weight / (float)rows : 0.0f,
		    train ? g->delta[0] : NULL, g->dsum, fout, gb);
	KERNEL_CHECK("softmax_xent_sums");
	return 0;
}

/* The backward pass from delta[0] (after loss with train) down to the
 * first layer, gradients into g->grads. */
static int backward(struct dlt_gpu *g, int rows, int allreduce, char *err, size_t errlen)
{
	int cur = 0, next = 0;

	for (int i = g->net.nlayers - 1; i >= 0; i--) {
		const float *in = i > 0 ? g->layer[i - 1].act : g->x;
		float *dx = i > 0 ? g->delta[!cur] : NULL;

		/* a layer another's kernels run (fused_after): that layer's
		 * backward takes its gradient; its own is nothing */
		if (fused_into(g, i) == i) {
			TRY(layer_backward(g, i, in, g->delta[cur], dx, rows, 1, err, errlen));
			cur = !cur;
		}
		TRY(prof_mark(g, PROF_BWD(g->net.nlayers, i), err, errlen));
		/* start the allreduce of every bucket this layer completes */
		while (allreduce && next < g->nbuckets && g->bucket[next].trigger == i) {
			size_t lo = g->bucket[next].lo, n = g->bucket[next].hi - lo;

			CUDA_CHECK(cudaEventRecord(g->bucket[next].ready, g->stream));
			CUDA_CHECK(cudaStreamWaitEvent(g->comm_stream, g->bucket[next].ready, 0));
			NCCL_CHECK(ncclAllReduce(g->grads + lo, g->grads + lo, n, ncclFloat, ncclSum,
						 g->comm, g->comm_stream));
			next++;
		}
	}
	if (allreduce && next != g->nbuckets)
		return fail(-EINVAL, err, errlen, "gpu: %d of %d gradient buckets started",
			    next, g->nbuckets);
	return 0;
}

extern "C" int dlt_gpu_add_bucket(struct dlt_gpu *g, size_t lo, size_t hi, int trigger,
				  char *err, size_t errlen)
{
	/* contiguous from the top: the first ends at the loss floats, each
	 * next one where the one before began */
	size_t top = g->nbuckets ? g->bucket[g->nbuckets - 1].lo : g->nparams + 2;

	if (g->nbuckets == GPU_MAX_BUCKETS || lo >= hi || hi != top ||
	    trigger < 0 || trigger >= g->net.nlayers ||
	    (g->nbuckets && trigger > g->bucket[g->nbuckets - 1].trigger))
		return fail(-EINVAL, err, errlen, "gpu: bad gradient bucket [%zu, %zu) after layer %d",
			    lo, hi, trigger);
	CUDA_CHECK(cudaSetDevice(g->device));
	CUDA_CHECK(cudaEventCreateWithFlags(&g->bucket[g->nbuckets].ready, cudaEventDisableTiming));
	g->bucket[g->nbuckets].lo = lo;
	g->bucket[g->nbuckets].hi = hi;
	g->bucket[g->nbuckets].trigger = trigger;
	g->nbuckets++;
	drop_graph(g);   /* a graph captured without this bucket's allreduce */
	return 0;
}

/* Waits for the stream and adds the batch sums of g->dsum to the counters. */
static int take_sums(struct dlt_gpu *g, double *loss_sum, long *correct, char *err, size_t errlen)
{
	CUDA_CHECK(cudaMemcpyAsync(g->host_sum, g->dsum, 2 * sizeof(double),
				   cudaMemcpyDeviceToHost, g->stream));
	CUDA_CHECK(cudaStreamSynchronize(g->stream));
	if (loss_sum)
		*loss_sum += g->host_sum[0];
	if (correct)
		*correct += (long)(g->host_sum[1] + 0.5);
	return 0;
}

/* Queues the copy of the step's values into g->vals (the kernels after it
 * read them) from host block: the global step and, when o is not NULL, the
 * learning rate lr and Adam's constants of 1-based step t, computed as
 * optim.c does; with idx, the step's row numbers idx[0..rows) after them
 * in the same copy (dlt_gpu_queue_rows). block is g->hblock (pageable:
 * staged before the call returns, so it may change again at once) or a
 * queued step's pinned one (read when the copy runs: the caller keeps it
 * until the step was waited for). */
static int put_vals_rows(struct dlt_gpu *g, unsigned char *block, uint64_t step,
			 const struct dlt_optim *o, float lr, unsigned long t, const uint32_t *idx,
			 int rows, char *err, size_t errlen)
{
	g->hvals.step = step;
	if (o) {
		g->hvals.lr = lr;
		if (o->kind == DLT_OPTIM_ADAM) {
			const unsigned long tt = t ? t : 1;
			const float bc1 = 1.0f - (float)pow(o->beta1, (double)tt);
			const float bc2s = (float)sqrt(1.0 - pow(o->beta2, (double)tt));

			g->hvals.adam_step = lr / bc1;
			g->hvals.adam_ib = 1.0f / bc2s;
		}
	}
	memcpy(block, &g->hvals, sizeof g->hvals);
	if (idx)
		memcpy(block + sizeof g->hvals, idx, (size_t)rows * sizeof *idx);
	CUDA_CHECK(cudaMemcpyAsync(g->vals, block,
				   sizeof g->hvals + (idx ? (size_t)rows * sizeof *idx : 0),
				   cudaMemcpyHostToDevice, g->stream));
	return 0;
}

/* put_vals_rows from g->hblock without row numbers (the calls but steps). */
static int put_vals(struct dlt_gpu *g, uint64_t step, const struct dlt_optim *o, float lr,
		    unsigned long t, char *err, size_t errlen)
{
	return put_vals_rows(g, g->hblock, step, o, lr, t, NULL, 0, err, errlen);
}

extern "C" int dlt_gpu_forward(struct dlt_gpu *g, const float *x, int rows, int train,
			       uint64_t step, float *logits, char *err, size_t errlen)
{
	TRY(put_batch(g, x, NULL, rows, err, errlen));
	TRY(put_vals(g, step, NULL, 0.0f, 0, err, errlen));
	TRY(forward(g, rows, train, err, errlen));
	if (logits) {
		CUDA_CHECK(cudaMemcpyAsync(logits, g->layer[g->net.nlayers - 1].act,
					   (size_t)rows * (size_t)g->net.classes * sizeof(float),
					   cudaMemcpyDeviceToHost, g->stream));
		CUDA_CHECK(cudaStreamSynchronize(g->stream));
	}
	return 0;
}

extern "C" int dlt_gpu_train_batch(struct dlt_gpu *g, const float *x, const uint8_t *y, int rows,
				   float weight, uint64_t step, float *grads, double *loss_sum,
				   long *correct, char *err, size_t errlen)
{
	TRY(put_batch(g, x, y, rows, err, errlen));
	TRY(put_vals(g, step, NULL, 0.0f, 0, err, errlen));
	TRY(forward(g, rows, 1, err, errlen));
	TRY(loss(g, rows, 1, weight, g->grads + g->nparams, err, errlen));
	TRY(backward(g, rows, 0, err, errlen));
	if (grads)
		CUDA_CHECK(cudaMemcpyAsync(grads, g->grads, g->nparams * sizeof(float),
					   cudaMemcpyDeviceToHost, g->stream));
	if (grads || loss_sum || correct)
		TRY(take_sums(g, loss_sum, correct, err, errlen));
	return 0;
}

/* Launches the optimizer update on the stream (no wait), at the rate and
 * with the constants in g->vals. */
static int optim(struct dlt_gpu *g, const struct dlt_optim *o, char *err, size_t errlen)
{
	const size_t n = g->nparams;

	switch (o->kind) {
	case DLT_OPTIM_SGD:
	case DLT_OPTIM_NESTEROV:
		LAUNCH(k_sgd, blocks_for(n), GPU_THREADS, g->stream,
			g->params, g->state, g->grads, g->vals, o->momentum, o->weight_decay,
			o->kind == DLT_OPTIM_NESTEROV, n);
		KERNEL_CHECK("sgd");
		return cast_weights(g, err, errlen);
	case DLT_OPTIM_ADAM:
		if (g->nstate < 2)
			return fail(-EINVAL, err, errlen, "gpu: adam needs 2 state arrays, have %d",
				    g->nstate);
		LAUNCH(k_adam, blocks_for(n), GPU_THREADS, g->stream,
			g->params, g->state, g->state + n, g->grads, o->beta1, o->beta2, o->eps,
			o->weight_decay, g->vals, n);
		KERNEL_CHECK("adam");
		return cast_weights(g, err, errlen);
	}
	return fail(-EINVAL, err, errlen, "gpu: unknown optimizer %d", (int)o->kind);
}

extern "C" int dlt_gpu_optim_step(struct dlt_gpu *g, const struct dlt_optim *o, float lr,
				  unsigned long t, char *err, size_t errlen)
{
	CUDA_CHECK(cudaSetDevice(g->device));
	TRY(put_vals(g, g->hvals.step, o, lr, t, err, errlen));
	TRY(optim(g, o, err, errlen));
	CUDA_CHECK(cudaStreamSynchronize(g->stream));
	return 0;
}

/* The device work of one dlt_gpu_step once its batch and values are in
 * place: forward, loss, backward with the allreduces, the optimizer, its
 * phases marked by events ev[0..4]. What a graph captures (ev NULL: no
 * timing events inside a capture). */
static int step_work(struct dlt_gpu *g, int rows, float weight, const struct dlt_optim *o,
		     int gather, cudaEvent_t *ev, char *err, size_t errlen)
{
	const int timed = ev != NULL;
	cudaStream_t s = g->stream;
	const size_t dim = dlt_shape_size(g->net.in);

	if (timed)
		CUDA_CHECK(cudaEventRecord(ev[0], s));
	TRY(prof_mark(g, PROF_START, err, errlen));
	if (gather) {   /* the batch from the device's rows (the numbers in g->vals) */
		LAUNCH(k_gather_rows, blocks_for((size_t)rows * dim), GPU_THREADS, s, g->x, g->y,
		       g->data_x, g->data_y, g->vals, rows, dim);
		KERNEL_CHECK("gather_rows");
	}
	TRY(prof_mark(g, PROF_GATHER, err, errlen));
	TRY(forward(g, rows, 1, err, errlen));
	TRY(loss(g, rows, 1, weight, g->grads + g->nparams, err, errlen));
	TRY(prof_mark(g, PROF_LOSS(g->net.nlayers), err, errlen));
	if (timed)
		CUDA_CHECK(cudaEventRecord(ev[1], s));
	/* the weighted gradients of every rank sum to the global batch's mean:
	 * bucket by bucket on comm_stream during backward, or in one call; the
	 * sum over one rank is its own gradients (no call: for a small model
	 * a step's NCCL kernels are a large share of its graph) */
	const int sum = g->nccl_ranks > 1;
	TRY(backward(g, rows, sum && g->nbuckets > 0, err, errlen));
	if (timed)
		CUDA_CHECK(cudaEventRecord(ev[2], s));
	if (sum && g->nbuckets) {
		CUDA_CHECK(cudaEventRecord(g->comm_done, g->comm_stream));
		CUDA_CHECK(cudaStreamWaitEvent(s, g->comm_done, 0));
	} else if (sum)
		NCCL_CHECK(ncclAllReduce(g->grads, g->grads, g->nparams + 2, ncclFloat, ncclSum,
					 g->comm, s));
	if (timed)
		CUDA_CHECK(cudaEventRecord(ev[3], s));
	TRY(prof_mark(g, PROF_SUM(g->net.nlayers), err, errlen));
	TRY(optim(g, o, err, errlen));
	TRY(prof_mark(g, PROF_UPDATE(g->net.nlayers), err, errlen));
	if (timed)
		CUDA_CHECK(cudaEventRecord(ev[4], s));
	return 0;
}

/* 1 when a step of key a can replay a graph captured for key b. */
static int same_key(const struct gpu_graph_key *a, const struct gpu_graph_key *b)
{
	const struct dlt_optim *p = &a->optim, *q = &b->optim;

	return a->rows == b->rows && a->gather == b->gather && a->weight == b->weight &&
	       p->kind == q->kind &&
	       p->momentum == q->momentum && p->weight_decay == q->weight_decay &&
	       p->beta1 == q->beta1 && p->beta2 == q->beta2 && p->eps == q->eps;
}

/* ---- the graph's census (--gpu-profile) ---- */

#ifdef DLT_GPU_EMULATE
/* What node i of graph runs, into buf; NULL when not known. */
static const char *graph_node_name(cudaGraph_t graph, const cudaGraphNode_t *nodes, size_t i,
				   char *buf, size_t len)
{
	(void)nodes;
	snprintf(buf, len, "%s", emu_graph_node_name(graph, i));
	return buf;
}
#else
/* What node i of graph (nodes: its nodes) runs, into buf: a kernel's name
 * (demangled, without its arguments or template's), or the node's type;
 * NULL when not known. Kernel names come from the driver (cuFuncGetName,
 * cuKernelGetName, through cudaGetDriverEntryPointByVersion: no link to
 * libcuda), so cuBLAS's kernels are named as this file's are. */
static const char *graph_node_name(cudaGraph_t graph, const cudaGraphNode_t *nodes, size_t i,
				   char *buf, size_t len)
{
	typedef CUresult (*params_fn)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS *);
	typedef CUresult (*func_name_fn)(const char **, CUfunction);
	typedef CUresult (*kern_name_fn)(const char **, CUkernel);
	static params_fn params;
	static func_name_fn func_name;
	static kern_name_fn kern_name;
	static int looked;
	cudaGraphNodeType type;
	CUDA_KERNEL_NODE_PARAMS kp;
	const char *name = NULL;

	(void)graph;
	if (cudaGraphNodeGetType(nodes[i], &type) != cudaSuccess)
		return NULL;
	switch (type) {
	case cudaGraphNodeTypeKernel: break;
	case cudaGraphNodeTypeMemcpy: return "memcpy";
	case cudaGraphNodeTypeMemset: return "memset";
	case cudaGraphNodeTypeEventRecord: return "event record";
	case cudaGraphNodeTypeWaitEvent: return "event wait";
	case cudaGraphNodeTypeHost: return "host function";
	case cudaGraphNodeTypeGraph: return "child graph";
	case cudaGraphNodeTypeEmpty: return "empty";
	default:
		snprintf(buf, len, "node type %d", (int)type);
		return buf;
	}
	if (!looked) {
		cudaDriverEntryPointQueryResult q;

		looked = 1;
		if (cudaGetDriverEntryPointByVersion("cuGraphKernelNodeGetParams", (void **)&params,
						     12000, cudaEnableDefault, &q) != cudaSuccess ||
		    q != cudaDriverEntryPointSuccess)
			params = NULL;
		if (cudaGetDriverEntryPointByVersion("cuFuncGetName", (void **)&func_name, 12030,
						     cudaEnableDefault, &q) != cudaSuccess ||
		    q != cudaDriverEntryPointSuccess)
			func_name = NULL;
		if (cudaGetDriverEntryPointByVersion("cuKernelGetName", (void **)&kern_name, 12030,
						     cudaEnableDefault, &q) != cudaSuccess ||
		    q != cudaDriverEntryPointSuccess)
			kern_name = NULL;
		cudaGetLastError();   /* leave no error behind */
	}
	memset(&kp, 0, sizeof kp);
	if (params && params((CUgraphNode)nodes[i], &kp) == CUDA_SUCCESS) {
		if (kp.func && func_name && func_name(&name, kp.func) != CUDA_SUCCESS)
			name = NULL;
		if (!name && kp.kern && kern_name && kern_name(&name, kp.kern) != CUDA_SUCCESS)
			name = NULL;
	}
	if (!name)
		return "kernel";
	int st = 0;
	char *d = abi::__cxa_demangle(name, NULL, NULL, &st);

	snprintf(buf, len, "%s", d && st == 0 ? d : name);
	free(d);
	return buf;
}
#endif

/* Fills g->prof.nodes from graph (n nodes): "N x NAME" in the order each
 * name first appears in the graph's list of its nodes, a name cut at its arguments or template's and at
 * 60 characters ("void k_im2col<unsigned int>(...)" is k_im2col). */
static void graph_census(struct dlt_gpu *g, cudaGraph_t graph, size_t n)
{
	enum { MOST = 48, NAME = 64 };
	char names[MOST][NAME], buf[512];
	long count[MOST];
	int kinds = 0;
	cudaGraphNode_t *nodes = NULL;
	size_t have = n, o = 0;

#ifndef DLT_GPU_EMULATE
	nodes = (cudaGraphNode_t *)calloc(n ? n : 1, sizeof *nodes);
	if (!nodes || cudaGraphGetNodes(graph, nodes, &have) != cudaSuccess) {
		cudaGetLastError();
		free(nodes);
		snprintf(g->prof.nodes, sizeof g->prof.nodes, "%zu nodes (not listed)", n);
		return;
	}
#endif
	for (size_t i = 0; i < have && i < n; i++) {
		const char *nm = graph_node_name(graph, nodes, i, buf, sizeof buf);
		char cut[NAME];
		int k;

		nm = nm ? nm : "?";
		if (!strncmp(nm, "void ", 5))
			nm += 5;
		snprintf(cut, sizeof cut, "%.*s", (int)strcspn(nm, "(<"), nm);
		for (k = 0; k < kinds && strcmp(names[k], cut); k++)
			;
		if (k == kinds && kinds == MOST)
			continue;
		if (k == kinds) {
			memcpy(names[k], cut, sizeof cut);
			count[k] = 0;
			kinds++;
		}
		count[k]++;
	}
	free(nodes);
	cudaGetLastError();   /* a query that failed fails nothing after it */
	g->prof.nodes[0] = '\0';
	for (int k = 0; k < kinds && o < sizeof g->prof.nodes; k++) {
		int w = snprintf(g->prof.nodes + o, sizeof g->prof.nodes - o, "%s%ld x %s",
				 k ? ", " : "", count[k], names[k]);

		o += w > 0 ? (size_t)w : 0;
	}
}

/* Fills g->prof.convs: the cuDNN algorithms of each conv the step's pass
 * at rows ran through cuDNN (none: ""). */
static void conv_census(struct dlt_gpu *g, int rows)
{
	size_t o = 0;

	g->prof.convs[0] = '\0';
	for (int i = 0; i < g->net.nlayers && o < sizeof g->prof.convs; i++) {
		struct dnn_conv c;
		char what[256];
		int w;

		if (g->net.layer[i].kind != DLT_LAYER_CONV || !g->layer[i].conv_dnn)
			continue;
		c = conv_shape(g, i);
		dnn_describe(g->dnn, &c, rows, what, sizeof what);
		w = snprintf(g->prof.convs + o, sizeof g->prof.convs - o, "%slayer %d: %s",
			     o ? "; " : "", i + 1, what);
		o += w > 0 ? (size_t)w : 0;
	}
}

/* Captures step_work for key k into g->graph, replacing the graph there. */
static int capture(struct dlt_gpu *g, const struct gpu_graph_key *k, char *err, size_t errlen)
{
	cudaGraph_t graph = NULL;
	cudaGraphExec_t exec = NULL;
	size_t nodes = 0;
	cudaError_t e;
	int rc;

	drop_graph(g);
	CUDA_CHECK(cudaStreamBeginCapture(g->stream, cudaStreamCaptureModeThreadLocal));
	g->prof_rec = g->prof_ev != NULL;   /* the profile's marks, as nodes */
	rc = step_work(g, k->rows, k->weight, &k->optim, k->gather, NULL, err, errlen);
	g->prof_rec = 0;
	if (rc < 0) {
		/* a failure after the allreduces' branch forked (their stream in
		 * the capture) and before it joined: joined now, so that ending
		 * the capture ends it on that stream too */
		cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;

		if (cudaStreamIsCapturing(g->comm_stream, &cs) == cudaSuccess &&
		    cs == cudaStreamCaptureStatusActive &&
		    cudaEventRecord(g->comm_done, g->comm_stream) == cudaSuccess)
			cudaStreamWaitEvent(g->stream, g->comm_done, 0);
	}
	e = cudaStreamEndCapture(g->stream, &graph);   /* ended whatever step_work did */
	if (rc < 0 || e != cudaSuccess) {
		if (graph)
			cudaGraphDestroy(graph);
		if (rc == 0)
			rc = fail(cuda_rc(e), err, errlen, "cuda: cudaStreamEndCapture: %s (%s)",
				  cudaGetErrorString(e), cudaGetErrorName(e));
		if (!g->dnn_on)
			return rc;
		/* a cuDNN whose calls will not be captured costs the convs' cuDNN
		 * path, not the run: the capture again on the own path */
		g->dnn_on = 0;
		snprintf(g->dnn_off, sizeof g->dnn_off,
			 "; convolutions through cuDNN off: the step's capture failed: %s", err);
		cudaGetLastError();   /* a capture's error is not the next call's */
		return capture(g, k, err, errlen);
	}
	e = cudaGraphGetNodes(graph, NULL, &nodes);
	if (e == cudaSuccess && g->prof_ev) {
		graph_census(g, graph, nodes);
		conv_census(g, k->rows);
	}
	if (e == cudaSuccess)
		e = cudaGraphInstantiate(&exec, graph, 0);
	cudaGraphDestroy(graph);
	if (e != cudaSuccess)
		return fail(cuda_rc(e), err, errlen, "cuda: the step's graph: %s (%s)",
			    cudaGetErrorString(e), cudaGetErrorName(e));
	g->graph = exec;
	g->graph_key = *k;
	g->gstats.captures++;
	g->gstats.nodes = (long)nodes;
	return 0;
}

/* dlt_gpu_queue with the batch given as pixels (x, y) or as row numbers of
 * the device's rows (idx; x and y NULL). */
static int queue_step(struct dlt_gpu *g, const float *x, const uint8_t *y, const uint32_t *idx,
		      int rows, float weight, uint64_t step, const struct dlt_optim *o, float lr,
		      unsigned long t, char *err, size_t errlen)
{
	cudaStream_t s = g->stream;
	struct gpu_graph_key k;
	struct gpu_slot *sl;
	int replay, ready;

	if (!g->comm)
		return fail(-EINVAL, err, errlen, "gpu: dlt_gpu_queue before dlt_gpu_nccl_init");
	if (g->nbuckets && g->bucket[g->nbuckets - 1].lo != 0)
		return fail(-EINVAL, err, errlen, "gpu: the gradient buckets end at float %zu, not 0",
			    g->bucket[g->nbuckets - 1].lo);
	if (g->qlen == GPU_QUEUE)
		return fail(-EBUSY, err, errlen, "gpu: %d steps queued already: dlt_gpu_wait first",
			    GPU_QUEUE);
	if (g->qlen && g->prof_ev)
		return fail(-EBUSY, err, errlen, "gpu: profiling: one step queued at a time");
	sl = &g->slot[(g->qfirst + g->qlen) % GPU_QUEUE];
	if (idx) {   /* (put_batch_via checks rows for a batch) */
		TRY(batch_rows(g, rows, err, errlen));
		if (!g->data_rows)
			return fail(-EINVAL, err, errlen, "gpu: dlt_gpu_queue_rows before dlt_gpu_set_data");
		for (int i = 0; i < rows; i++)
			if (idx[i] >= (uint64_t)g->data_rows)
				return fail(-EINVAL, err, errlen, "gpu: row %u of a batch: the device holds %ld",
					    idx[i], g->data_rows);
	} else
		TRY(put_batch_via(g, sl, x, y, rows, err, errlen));
	TRY(put_vals_rows(g, sl->block, step, o, lr, t, idx, idx ? rows : 0, err, errlen));
	memset(&k, 0, sizeof k);
	k.gather = idx != NULL;
	k.rows = rows;
	k.weight = weight;
	k.optim = *o;
	/* a graph for a shape seen twice in a row (the first step of a shape
	 * is the warm-up); a step of another shape runs launch by launch and
	 * leaves the graph for the steps after it */
	ready = g->graph && same_key(&k, &g->graph_key);
	replay = g->graph_on && (ready || (g->have_last && same_key(&k, &g->last_key)));
	g->last_key = k;
	g->have_last = 1;
	if (replay && !ready && capture(g, &k, err, errlen) < 0) {
		/* a step that cannot be captured costs the graphs, not the run:
		 * this step and the ones after it launch by launch (a failure of
		 * the step's own work fails there) */
		snprintf(g->gstats.off, sizeof g->gstats.off, "the step's capture failed: %s", err);
		cudaGetLastError();   /* a capture's error is not the next call's */
		g->graph_on = 0;
		replay = 0;
	}
	if (replay) {
		CUDA_CHECK(cudaEventRecord(sl->ev[0], s));
		CUDA_CHECK(cudaGraphLaunch(g->graph, s));
		CUDA_CHECK(cudaEventRecord(sl->ev[4], s));
		g->gstats.launched += g->gstats.nodes;   /* (the graph last captured) */
	} else
		TRY(step_work(g, rows, weight, o, k.gather, sl->ev, err, errlen));
	/* the global loss sum and correct count: the step's one readback */
	CUDA_CHECK(cudaMemcpyAsync(sl->gsum, g->grads + g->nparams, 2 * sizeof(float),
				   cudaMemcpyDeviceToHost, s));
	CUDA_CHECK(cudaEventRecord(sl->done, s));
	sl->replay = replay;
	g->qlen++;
	return 0;
}

extern "C" int dlt_gpu_queue(struct dlt_gpu *g, const float *x, const uint8_t *y, int rows,
			     float weight, uint64_t step, const struct dlt_optim *o, float lr,
			     unsigned long t, char *err, size_t errlen)
{
	return queue_step(g, x, y, NULL, rows, weight, step, o, lr, t, err, errlen);
}

extern "C" int dlt_gpu_queue_rows(struct dlt_gpu *g, const uint32_t *idx, int rows, float weight,
				  uint64_t step, const struct dlt_optim *o, float lr,
				  unsigned long t, char *err, size_t errlen)
{
	return queue_step(g, NULL, NULL, idx, rows, weight, step, o, lr, t, err, errlen);
}

/* Adds the graphed step just waited for to the profile: the time between
 * each of its marks and the next. */
static int prof_take(struct dlt_gpu *g, char *err, size_t errlen)
{
	const int nl = g->net.nlayers;
	struct dlt_gpu_profile *p = &g->prof;
	float ms;

#define PROF_SPAN(a, b, into) do { \
		CUDA_CHECK(cudaEventElapsedTime(&ms, g->prof_ev[a], g->prof_ev[b])); \
		(into) += 1e-3 * ms; \
	} while (0)
	PROF_SPAN(PROF_START, PROF_GATHER, p->gather_s);
	for (int i = 0; i < nl; i++)
		PROF_SPAN(i ? PROF_FWD(i - 1) : PROF_GATHER, PROF_FWD(i), p->fwd_s[i]);
	PROF_SPAN(PROF_FWD(nl - 1), PROF_LOSS(nl), p->loss_s);
	for (int i = nl - 1; i >= 0; i--)
		PROF_SPAN(i == nl - 1 ? PROF_LOSS(nl) : PROF_BWD(nl, i + 1), PROF_BWD(nl, i),
			  p->bwd_s[i]);
	PROF_SPAN(PROF_BWD(nl, 0), PROF_SUM(nl), p->sum_s);
	PROF_SPAN(PROF_SUM(nl), PROF_UPDATE(nl), p->update_s);
#undef PROF_SPAN
	p->steps++;
	return 0;
}

extern "C" int dlt_gpu_set_profile(struct dlt_gpu *g, int on, char *err, size_t errlen)
{
	CUDA_CHECK(cudaSetDevice(g->device));
	if (g->qlen)
		return fail(-EBUSY, err, errlen, "gpu: dlt_gpu_set_profile with a step queued");
	drop_graph(g);   /* captured again, with the marks or without */
	if (!on && g->prof_ev) {
		CUDA_CHECK(cudaStreamSynchronize(g->stream));
		for (int i = 0; i < GPU_PROF_MARKS; i++)
			cudaEventDestroy(g->prof_ev[i]);
		free(g->prof_ev);
		g->prof_ev = NULL;
	}
	if (on && !g->prof_ev) {
		cudaEvent_t *ev = (cudaEvent_t *)calloc(GPU_PROF_MARKS, sizeof *ev);
		cudaError_t e = cudaSuccess;

		if (!ev)
			return fail(-ENOMEM, err, errlen, "gpu: cannot allocate the profile's events");
		for (int i = 0; i < GPU_PROF_MARKS && e == cudaSuccess; i++)
			e = cudaEventCreate(&ev[i]);
		if (e != cudaSuccess) {   /* none kept: a capture records into all of them */
			for (int i = 0; i < GPU_PROF_MARKS; i++)
				if (ev[i])
					cudaEventDestroy(ev[i]);
			free(ev);
			return fail(cuda_rc(e), err, errlen, "cuda: the profile's events: %s (%s)",
				    cudaGetErrorString(e), cudaGetErrorName(e));
		}
		g->prof_ev = ev;
		memset(&g->prof, 0, sizeof g->prof);
		for (int i = 1; i < g->net.nlayers; i++)
			g->prof.fused[i] = fused_into(g, i) != i ? fused_into(g, i) + 1 : 0;
	}
	return 0;
}

extern "C" void dlt_gpu_profile(const struct dlt_gpu *g, struct dlt_gpu_profile *out)
{
	*out = g->prof;
}

extern "C" int dlt_gpu_wait(struct dlt_gpu *g, float sums[2], char *err, size_t errlen)
{
	struct gpu_slot *sl = &g->slot[g->qfirst];
	float ms;

	if (!g->qlen)
		return fail(-EINVAL, err, errlen, "gpu: dlt_gpu_wait with no step queued");
	CUDA_CHECK(cudaSetDevice(g->device));
	/* the slot is free again whatever the wait says: a failed step's
	 * error is the run's end */
	g->qfirst = (g->qfirst + 1) % GPU_QUEUE;
	g->qlen--;
	CUDA_CHECK(cudaEventSynchronize(sl->done));
	if (sl->replay) {
		CUDA_CHECK(cudaEventElapsedTime(&ms, sl->ev[0], sl->ev[4]));
		g->gstats.graph_s += 1e-3 * ms;
		g->gstats.launches++;
		if (g->prof_ev)
			TRY(prof_take(g, err, errlen));
	} else {
		for (int i = 0; i < 4; i++) {
			CUDA_CHECK(cudaEventElapsedTime(&ms, sl->ev[i], sl->ev[i + 1]));
			g->t[i] += 1e-3 * ms;
		}
		g->gstats.eager++;
	}
	sums[0] = sl->gsum[0];
	sums[1] = sl->gsum[1];
	return 0;
}

extern "C" int dlt_gpu_step(struct dlt_gpu *g, const float *x, const uint8_t *y, int rows,
			    float weight, uint64_t step, const struct dlt_optim *o, float lr,
			    unsigned long t, float sums[2], char *err, size_t errlen)
{
	if (g->qlen)   /* its wait would be the queued step's */
		return fail(-EBUSY, err, errlen, "gpu: dlt_gpu_step with a step queued");
	TRY(dlt_gpu_queue(g, x, y, rows, weight, step, o, lr, t, err, errlen));
	return dlt_gpu_wait(g, sums, err, errlen);
}

extern "C" int dlt_gpu_step_rows(struct dlt_gpu *g, const uint32_t *idx, int rows, float weight,
				 uint64_t step, const struct dlt_optim *o, float lr,
				 unsigned long t, float sums[2], char *err, size_t errlen)
{
	if (g->qlen)
		return fail(-EBUSY, err, errlen, "gpu: dlt_gpu_step_rows with a step queued");
	TRY(dlt_gpu_queue_rows(g, idx, rows, weight, step, o, lr, t, err, errlen));
	return dlt_gpu_wait(g, sums, err, errlen);
}

extern "C" int dlt_gpu_set_data(struct dlt_gpu *g, const float *x, const uint8_t *y, long rows,
				char *err, size_t errlen)
{
	const size_t dim = dlt_shape_size(g->net.in);

	if (rows < 1 || (uint64_t)rows > UINT32_MAX)
		return fail(-EINVAL, err, errlen, "gpu: %ld training rows", rows);
	CUDA_CHECK(cudaSetDevice(g->device));
	cudaFree(g->data_x);
	cudaFree(g->data_y);
	g->data_x = NULL;
	g->data_y = NULL;
	g->data_rows = 0;
	drop_graph(g);   /* a graph reads the rows' addresses */
	TRY(dalloc((void **)&g->data_x, (size_t)rows * dim * sizeof(float), "training rows",
		   err, errlen));
	TRY(dalloc((void **)&g->data_y, (size_t)rows, "training labels", err, errlen));
	CUDA_CHECK(cudaMemcpyAsync(g->data_x, x, (size_t)rows * dim * sizeof(float),
				   cudaMemcpyHostToDevice, g->stream));
	CUDA_CHECK(cudaMemcpyAsync(g->data_y, y, (size_t)rows, cudaMemcpyHostToDevice, g->stream));
	CUDA_CHECK(cudaStreamSynchronize(g->stream));
	g->data_rows = rows;
	return 0;
}

extern "C" int dlt_gpu_set_graph(struct dlt_gpu *g, int on, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	if (!on)
		drop_graph(g);
	else
		g->gstats.off[0] = '\0';   /* tried again */
	g->graph_on = on != 0;
	return 0;
}

extern "C" void dlt_gpu_graph_stats(const struct dlt_gpu *g, struct dlt_gpu_graph_stats *out)
{
	*out = g->gstats;
#ifdef DLT_GPU_EMULATE
	out->replayed = emu_graph_stats.replayed;
#endif
}

extern "C" int dlt_gpu_eval_batch(struct dlt_gpu *g, const float *x, const uint8_t *y, int rows,
				  double *loss_sum, long *correct, char *err, size_t errlen)
{
	TRY(put_batch(g, x, y, rows, err, errlen));
	TRY(forward(g, rows, 0, err, errlen));
	TRY(loss(g, rows, 0, 0.0f, NULL, err, errlen));
	return take_sums(g, loss_sum, correct, err, errlen);
}

extern "C" double dlt_gpu_mem_used(struct dlt_gpu *g)
{
	size_t free_b = 0, total = 0;

	if (cudaSetDevice(g->device) != cudaSuccess || cudaMemGetInfo(&free_b, &total) != cudaSuccess)
		return -1.0;
	return (double)(total - free_b);
}

extern "C" void dlt_gpu_times(const struct dlt_gpu *g, double t[4])
{
	memcpy(t, g->t, sizeof g->t);
}
