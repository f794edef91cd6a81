/* gpu.h - the trainer's CUDA backend: the layer stack of net.h on one GPU, NCCL between ranks
 *
 * The backend keeps its own copy of a dlt_net's parameters, gradients and
 * optimizer state in GPU memory, in exactly the host layout (net.h:
 * layer by layer, weights then biases; the optimizer's state arrays one
 * after the other), so the host arrays of main.c, the checkpoints and the
 * CPU layers all read the same numbers. Weights are initialised on the host
 * (dlt_net_init_params) and uploaded; GEMMs run in cuBLAS (FP32, no TF32,
 * unless dlt_gpu_set_precision says otherwise), the other layers in small
 * kernels that follow layers.c operation for operation; gradients are
 * summed over ranks with ncclAllReduce.
 *
 * Built by `make GPU=1` (engine/train/cuda/gpu.cu); without CUDA every call
 * fails with a message saying so (engine/train/cuda/stub.c). Every function
 * that can fail returns 0, or a negative errno with a one-line message in
 * err: -ENODEV (no usable GPU or driver), -ENOSYS (built without CUDA),
 * -ENOMEM (GPU memory), -EIO (any other CUDA, cuBLAS or NCCL error; the
 * message names the call and the library's error string). */
#ifndef DLT_GPU_H
#define DLT_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "engine/train/net.h"
#include "engine/train/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DLT_GPU_ID_BYTES 128   /* an NCCL unique id (NCCL_UNIQUE_ID_BYTES) */

struct dlt_gpu;   /* opaque: one rank's device, buffers, cuBLAS and NCCL handles */

/* The arithmetic of the backend's GEMMs (dense layers and the im2col
 * products of the convolutions); everything else is FP32 in every mode,
 * the direct products of convs of few taps (dlt_gpu_conv_direct) too. */
enum dlt_precision {
	DLT_PRECISION_FP32 = 0,   /* cublasSgemm, no TF32: the CPU trainer to float tolerance */
	DLT_PRECISION_TF32 = 1,   /* cublasSgemm on tensor cores: inputs rounded to TF32
				     (10-bit mantissa), FP32 sums */
	DLT_PRECISION_BF16 = 2,   /* cublasGemmEx on BF16 copies of weights and activations
				     (7-bit mantissa), FP32 sums and outputs; the FP32
				     parameters stay the master copy (the optimizer, the
				     allreduce, upload, download and checkpoints use them) and
				     are cast again after each update. BF16 has FP32's
				     exponent range, so gradients need no loss scaling */
};

/* 1 when this dlh-train was built with CUDA, else 0. */
int dlt_gpu_built(void);

/* Returns the number of CUDA devices this process can use (>= 1), or
 * -ENODEV / -ENOSYS with the reason in err ("no NVIDIA GPU: ..."). */
int dlt_gpu_count(char *err, size_t errlen);

/* Opens device `device` for the stack n (its layers and max_batch; n is
 * read here and not kept) and allocates every buffer: parameters,
 * gradients (+ 2 floats: loss sum and correct count, as main.c's),
 * nstate optimizer arrays, activations and workspace. Dropout masks are
 * keyed by seed and rank exactly as on the CPU. DLT_GPU_CONV=cudnn in the
 * environment runs the convolutions' products through cuDNN
 * (engine/train/cuda/dnn.h; in fp32 and tf32, where it opens and has an
 * algorithm: dlt_gpu_describe says which), else im2col and cuBLAS, a
 * conv of few taps directly (dlt_gpu_conv_direct; DLT_GPU_CONV=gemm: not
 * even those): the default, which the estimator prices. Returns 0 with
 * *out set. */
int dlt_gpu_create(struct dlt_gpu **out, const struct dlt_net *n, int nstate,
		   int device, uint64_t seed, int rank, char *err, size_t errlen);

/* Sets the arithmetic of g's GEMMs (FP32 after dlt_gpu_create); bf16
 * allocates the BF16 copies. May be called at any time between steps.
 * Returns 0, or -EINVAL for an unknown precision, or a CUDA error. */
int dlt_gpu_set_precision(struct dlt_gpu *g, enum dlt_precision p, char *err, size_t errlen);

/* The layers after a layer of kind `kind` that the backend runs inside
 * its kernels, given the kinds of the next two (enum dlt_layer_kind, -1
 * past the last layer): a ReLU after a dense or conv layer (the layer's
 * bias kernel writes the ReLU's output, its backward masks the gradient
 * in the kernel that reads it first): 1; a conv, ReLU and max-pool (the
 * pool reads the product with its bias and ReLU, and backward writes the
 * product's gradient from the pool's, masked): 2; else 0. The estimator
 * counts the same (engine/plan/estimate.c). */
static inline int dlt_gpu_fused(int kind, int next, int next2)
{
	if ((kind != DLT_LAYER_DENSE && kind != DLT_LAYER_CONV) || next != DLT_LAYER_RELU)
		return 0;
	return kind == DLT_LAYER_CONV && next2 == DLT_LAYER_POOL ? 2 : 1;
}

/* A small model's step is a chain of small kernels, each costing a graph
 * node's latency more than its work (the MLP at batch 64: 22 nodes, the
 * H200 ~4 us each). The backend runs a dense layer's bias, and a ReLU
 * fused after it, in its GEMM's epilogue (cuBLASLt: one node where a GEMM
 * and a bias kernel were two) in the precisions dlt_gpu_dense_epilogue
 * says (FP32 and TF32; BF16 keeps cuBLAS's GEMM and the bias kernel), and
 * where a dense layer, its ReLU and another dense layer follow each other
 * (dlt_gpu_dgrad_fused), the third's input-gradient product masks the
 * gradient by the ReLU (a bit mask the first's epilogue wrote) and sums
 * the first's bias gradient in its epilogue (DRELU_BGRAD): the first's
 * bias-gradient kernel goes. DLT_GPU_LT=0 in the environment at
 * dlt_gpu_create turns both off (to compare), as does a cuBLASLt with no
 * algorithm for one of the net's products (dlt_gpu_describe says so). The
 * estimator counts the same (engine/plan/estimate.c). */
#define DLT_GPU_LT_WS_BYTES ((size_t)4 << 20)   /* cuBLASLt's workspace (held whenever wanted) */
/* Bits a row of the ReLU bit mask of a dense layer of o outputs: o up to
 * a multiple of 128 (cuBLASLt's aux leading dimension). */
static inline long dlt_gpu_lt_mask_ld(int o)
{
	return ((long)o + 127) / 128 * 128;
}
/* Bytes of that mask for rows rows. */
static inline double dlt_gpu_lt_mask_bytes(double rows, int o)
{
	return rows * (double)dlt_gpu_lt_mask_ld(o) / 8.0;
}
static inline int dlt_gpu_dense_epilogue(int precision)
{
	return precision == DLT_PRECISION_FP32 || precision == DLT_PRECISION_TF32;
}
static inline int dlt_gpu_dgrad_fused(int kind, int next, int next2)
{
	return kind == DLT_LAYER_DENSE && next == DLT_LAYER_RELU && next2 == DLT_LAYER_DENSE;
}
/* 1 when a dense layer whose biases start at float off of the parameters
 * has them 16-byte aligned on the device (its buffers are 256-byte
 * aligned), as an epilogue reads them; else that layer's bias (forward
 * and gradient, and the mask of dlt_gpu_dgrad_fused) runs in the plain
 * path's kernels (gpu.cu finds the same from the pointer). */
static inline int dlt_gpu_bias_aligned(double off)
{
	return off == 4.0 * (double)(long long)(off / 4.0);
}

/* 1 when the loss kernel sums the last layer's bias gradient (the column
 * sums of the logits' gradient it writes): the last layer is dense (as a
 * classifier's is). That layer's backward runs no kernel of its own for it. */
static inline int dlt_gpu_loss_bgrad(int last_kind)
{
	return last_kind == DLT_LAYER_DENSE;
}

/* A conv with few taps (C k^2: the first layer of a net on grey or RGB
 * images, 25 for 1 x 5x5) makes its product F x N with a reduction of
 * k = C k^2 for a GEMM: too short to fill a tile of cuBLAS's kernels (the
 * H200's calibration interpolates the CNN's first forward product, 32 x
 * 100352 x 25, at 149 us of a 576 us step), after an im2col matrix
 * written and read for it, and its output read again by the bias, ReLU
 * and pool kernels after it. The backend computes such a product directly
 * instead, with what dlt_gpu_fused runs after it (engine/train/cuda/conv.cuh:
 * a thread an output of the pool, its taps read from the input): one
 * kernel reading the input (a few hundred KB, cached) and writing the
 * pool's output. Its backward keeps the weight gradient's long-k product
 * over the im2col matrix, which a training pass still writes (an
 * evaluation does not), but where dlt_gpu_conv_dw_direct says. Returns 1
 * for a conv of taps taps that runs so: at most DLT_GPU_DIRECT_TAPS; the
 * estimator prices the same, at the kernel's calibrated speed
 * (dlt_gpu_cal's direct_s). DLT_GPU_CONV=gemm in the
 * environment at dlt_gpu_create keeps every conv on im2col and cuBLAS
 * (to compare); DLT_GPU_CONV=cudnn takes every conv to cuDNN. */
#define DLT_GPU_DIRECT_TAPS 32
static inline int dlt_gpu_conv_direct(double taps)
{
	return taps <= DLT_GPU_DIRECT_TAPS;
}

/* Such a conv that is a net's first layer (layer index li 0: its backward
 * is its weight and bias gradients only) with a ReLU and a pool fused
 * after it (dlt_gpu_fused's 2) has those gradients computed directly too
 * (conv.cuh's k_conv_pool_dw): from the pool's output gradient, argmax and
 * output and the conv's input, the pooled outputs the ReLU passed (the
 * product's gradient is 0 but at their argmax) each adding dy times its
 * taps' inputs, in dlt_gpu_dw_parts parts summed in order by a kernel
 * more. Its pass then writes no im2col matrix (none is allocated), nor
 * the product's gradient: the weight gradient's long-k product, split,
 * read the matrix and that gradient, three quarters zeros. Returns 1 for
 * a conv of taps taps at layer index li with fused fused after it that
 * runs so (with dlt_gpu_conv_direct's switches); the estimator prices the
 * same at dlt_gpu_cal's direct_dw_s. */
static inline int dlt_gpu_conv_dw_direct(double taps, int li, int fused)
{
	return dlt_gpu_conv_direct(taps) && li == 0 && fused == 2;
}
/* The parts of k_conv_pool_dw for rows rows and f filters: chunks of
 * images, f times them blocks, up to DLT_GPU_DW_BLOCKS, at least one
 * image a chunk. (nvcc gives the kernel 156-160 registers a thread, no
 * spills: one block of 256 threads an SM, so 512 blocks are about four
 * waves on an H100 or H200; the calibration times it so.) */
#define DLT_GPU_DW_BLOCKS 512
static inline int dlt_gpu_dw_parts(double rows, double f)
{
	const double s = f < DLT_GPU_DW_BLOCKS ? (double)(long)(DLT_GPU_DW_BLOCKS / f) : 1.0;

	return (int)(rows < s ? rows : s);
}
/* Floats of those parts for any batch of 1 to rows rows, a conv of f
 * filters over r taps (the parts grow with the rows). */
static inline double dlt_gpu_dw_part_floats(double rows, double f, double r)
{
	return dlt_gpu_dw_parts(rows, f) * f * (r + 1);
}

/* A GEMM whose reduction is long and whose output is small (a
 * convolution's weight gradient: F x C k k outputs summed over the batch's
 * rows x pixels, 100352 for the CNN's first at batch 128) leaves most of a
 * GPU idle when one kernel walks all of k for each output tile: the H200's
 * calibration measured such a product's time growing with k at a few
 * tiles. The backend splits its k into parts of at least
 * DLT_GPU_SPLIT_MIN_K, one batched GEMM (the parts side by side into a
 * scratch buffer) and a kernel that sums the parts in order, so that
 * output tiles x parts reach DLT_GPU_SPLIT_TILES (tiles of 64 x 64).
 * Returns the parts for an m x n x k product: 1 (not split) unless k is at
 * least DLT_GPU_SPLIT_LEAST_K and 8 times m and n; else a power of two.
 * The estimator prices the same split (engine/plan/estimate.c), and
 * DLT_GPU_SPLITK=0 in the environment at dlt_gpu_create turns it off (to
 * compare). */
#define DLT_GPU_SPLIT_MIN_K 512
#define DLT_GPU_SPLIT_LEAST_K 4096
#define DLT_GPU_SPLIT_TILES 256
static inline int dlt_gpu_gemm_splits(double m, double n, double k)
{
	const double tiles = ((double)(long)((m + 63) / 64)) * ((double)(long)((n + 63) / 64));
	int s = 1;

	if (k < DLT_GPU_SPLIT_LEAST_K || k < 8 * m || k < 8 * n)
		return 1;
	while (tiles * s * 2 <= DLT_GPU_SPLIT_TILES && k / (s * 2) >= DLT_GPU_SPLIT_MIN_K)
		s *= 2;
	return s;
}

/* The k of each of the s parts of a split GEMM of k: k / s rounded down
 * to a multiple of 8 (each part's operands start 32-byte aligned, as
 * cuBLAS's fastest kernels want, in FP32 and BF16); the rest of k, k - s
 * kc, is a product of its own. */
static inline long dlt_gpu_split_kc(long k, int s)
{
	return k / s / 8 * 8;
}

/* Floats of the parts of an m x n x k GEMM split so: its parts and one
 * more for the rest of k; 0 when it is not split. */
static inline double dlt_gpu_split_floats(double m, double n, double k)
{
	const int s = dlt_gpu_gemm_splits(m, n, k);

	return s > 1 ? (s + 1) * m * n : 0.0;
}

/* The most floats the split GEMMs of a layer need for any batch of 1 to
 * rows rows (dlt_gpu_gemm_splits is not monotone in m: a GEMM may split
 * at fewer rows and not at more): a dense layer of k inputs and o outputs
 * (its forward, weight and input gradients), or with hw > 0 a conv of f
 * filters over r = C k k taps and hw pixels (its forward, weight
 * gradients with and without the bias column, input gradient). */
static inline double dlt_gpu_part_floats(double rows, double k, double o, double f, double r,
					 double hw)
{
	double most = 0.0, x[4];

	for (double n = 1; n <= rows; n++) {
		if (hw > 0) {
			x[0] = dlt_gpu_split_floats(f, n * hw, r);
			x[1] = dlt_gpu_split_floats(f, r, n * hw);
			x[2] = dlt_gpu_split_floats(f, r + 1, n * hw);
			x[3] = dlt_gpu_split_floats(r, n * hw, f);
		} else {
			x[0] = dlt_gpu_split_floats(n, o, k);
			x[1] = dlt_gpu_split_floats(o, k, n);
			x[2] = dlt_gpu_split_floats(n, k, o);
			x[3] = 0.0;
		}
		for (int i = 0; i < 4; i++)
			most = x[i] > most ? x[i] : most;
	}
	return most;
}

/* Frees everything of g (NULL is fine), the NCCL communicator included. */
void dlt_gpu_destroy(struct dlt_gpu *g);

/* A one-line name of g's device ("NVIDIA H100 80GB HBM3, 132 SMs, 79 GiB"). */
void dlt_gpu_describe(const struct dlt_gpu *g, char *out, size_t len);

/* Rank 0: makes a new NCCL unique id into id (DLT_GPU_ID_BYTES bytes), to
 * be broadcast to the other ranks (main.c uses MPI_Bcast). */
int dlt_gpu_nccl_id(unsigned char *id, char *err, size_t errlen);

/* Joins the NCCL communicator of ranks ranks named by id as rank; blocks
 * until every rank has joined. */
int dlt_gpu_nccl_init(struct dlt_gpu *g, const unsigned char *id, int rank, int ranks,
		      char *err, size_t errlen);

/* Adds a gradient bucket for dlt_gpu_step: floats [lo, hi) of the
 * gradients (+ the 2 loss floats at nparams), allreduced as soon as
 * backward has finished layer trigger. Buckets are added in launch order
 * (triggers from the last layer down) and must cover the gradients with
 * the loss floats exactly, as main.c's make_buckets makes them. Without
 * buckets one allreduce follows backward. */
int dlt_gpu_add_bucket(struct dlt_gpu *g, size_t lo, size_t hi, int trigger,
		       char *err, size_t errlen);

/* Copies the host parameters (nparams floats) and, when state is not
 * NULL, the optimizer state (nstate x nparams) to the GPU. */
int dlt_gpu_upload(struct dlt_gpu *g, const float *params, const float *state,
		   char *err, size_t errlen);

/* Copies the GPU's parameters and, when state is not NULL, its optimizer
 * state back into the host arrays (for checkpoints and the result). */
int dlt_gpu_download(struct dlt_gpu *g, float *params, float *state,
		     char *err, size_t errlen);

/* Forward pass of rows <= max_batch host images x (rows x input floats);
 * train enables dropout with the masks of global step step. When logits
 * is not NULL, the rows x classes outputs are copied there. */
int dlt_gpu_forward(struct dlt_gpu *g, const float *x, int rows, int train, uint64_t step,
		    float *logits, char *err, size_t errlen);

/* dlt_net_train_batch on the GPU: forward, softmax cross-entropy with
 * weight (see dlt_net_forward_loss), backward into the GPU's gradients.
 * When grads is not NULL they are copied there (nparams floats); the
 * rows' loss sum and correct count are added to *loss_sum and *correct
 * when those are not NULL (which waits for the GPU). */
int dlt_gpu_train_batch(struct dlt_gpu *g, const float *x, const uint8_t *y, int rows,
			float weight, uint64_t step, float *grads, double *loss_sum,
			long *correct, char *err, size_t errlen);

/* dlt_optim_step on the GPU's parameters, state and gradients (t is the
 * 1-based step, for Adam). */
int dlt_gpu_optim_step(struct dlt_gpu *g, const struct dlt_optim *o, float lr,
		       unsigned long t, char *err, size_t errlen);

/* One data-parallel step (dlt_gpu_queue, then dlt_gpu_wait; -EBUSY with a
 * step queued), main.c's step_once on the GPU: train_batch
 * (weight rows / global batch), ncclAllReduce (sum) of gradients + loss
 * sum + correct count over the communicator (per bucket during backward
 * when buckets are set), the optimizer. Sets sums[0]
 * and sums[1] to the global batch's loss sum and correct count. Needs
 * dlt_gpu_nccl_init. */
int dlt_gpu_step(struct dlt_gpu *g, const float *x, const uint8_t *y, int rows,
		 float weight, uint64_t step, const struct dlt_optim *o, float lr,
		 unsigned long t, float sums[2], char *err, size_t errlen);

/* Copies rows training rows (their pixels and labels) to the GPU once, for
 * dlt_gpu_step_rows; again replaces them. -ENOMEM (the device's) where
 * they do not fit: the caller then sends batches (dlt_gpu_step). */
int dlt_gpu_set_data(struct dlt_gpu *g, const float *x, const uint8_t *y, long rows,
		     char *err, size_t errlen);

/* dlt_gpu_step on rows idx[0..rows) of dlt_gpu_set_data's rows: the host
 * sends their numbers with the step's values (one small copy), and the
 * step's first kernel gathers the batch on the device. The same results as
 * dlt_gpu_step on those rows, bit for bit. -EINVAL for a number past the
 * rows held, or before dlt_gpu_set_data. */
int dlt_gpu_step_rows(struct dlt_gpu *g, const uint32_t *idx, int rows, float weight,
		      uint64_t step, const struct dlt_optim *o, float lr, unsigned long t,
		      float sums[2], char *err, size_t errlen);

/* ---- steps queued ahead: the host prepares step k+1 while the GPU runs step k ---- */

#define DLT_GPU_QUEUE 2   /* steps queued at once at most */

/* dlt_gpu_step without waiting for it: the step's copies and work are
 * queued on the stream behind whatever was queued before (another step
 * included) and the call returns; x, y and idx may be reused at once (a
 * batch's pixels go through a pinned buffer of the queued step's own,
 * made by its first copied batch).
 * dlt_gpu_wait then gives the step's sums. So a host that queues step k+1
 * before it waits for step k keeps the GPU busy while it reads k's loss,
 * writes rows and heartbeats and gathers the next batch, and a step costs
 * the more of the GPU's time and the host's, not their sum. Each queued
 * step has its own pinned copy of its values and row numbers and of its
 * sums, so nothing of one is overwritten by the next. At most
 * DLT_GPU_QUEUE steps are queued (-EBUSY past that). The other calls may
 * come between a queue and its wait: they run after the steps queued. */
int dlt_gpu_queue(struct dlt_gpu *g, const float *x, const uint8_t *y, int rows, float weight,
		  uint64_t step, const struct dlt_optim *o, float lr, unsigned long t,
		  char *err, size_t errlen);

/* dlt_gpu_queue on rows idx[0..rows) of dlt_gpu_set_data's rows, as
 * dlt_gpu_step_rows. */
int dlt_gpu_queue_rows(struct dlt_gpu *g, const uint32_t *idx, int rows, float weight,
		       uint64_t step, const struct dlt_optim *o, float lr, unsigned long t,
		       char *err, size_t errlen);

/* Waits for the oldest queued step and sets sums[0] and sums[1] to its
 * global batch's loss sum and correct count, as dlt_gpu_step does.
 * -EINVAL when no step is queued. */
int dlt_gpu_wait(struct dlt_gpu *g, float sums[2], char *err, size_t errlen);

/* What dlt_gpu_step did with CUDA graphs (dlt_gpu_set_graph). */
struct dlt_gpu_graph_stats {
	long captures;    /* graphs captured: a shape's second step in a row */
	long launches;    /* steps run as one cudaGraphLaunch */
	long eager;       /* steps run launch by launch: the warm-up, a one-off shape (a
			     last partial batch), or all of them with graphs off */
	long nodes;       /* nodes of the last graph captured (kernels, the GEMMs'
			     kernels, copies, memsets, allreduces) */
	long launched;    /* the nodes of each graph launched, added up */
	long replayed;    /* the host emulation only: nodes its cudaGraphLaunch ran in all
			     (0 on a GPU) */
	double graph_s;   /* seconds of the launched graphs on the GPU (CUDA events; the
			     phases of dlt_gpu_times count the other steps only) */
	char off[224];    /* "", or why graphs went off: a step whose capture failed
			     (dlt_gpu_queue runs it, and the steps after it, launch by
			     launch) */
};

/* With on (the default after dlt_gpu_create), dlt_gpu_step captures a
 * step into a CUDA graph and replays it with one cudaGraphLaunch when the
 * step before it had the same rows, weight and optimizer (the first step
 * of a shape runs launch by launch: the warm-up). The per-step values
 * (step, learning rate, Adam's bias corrections) reach the graph through
 * a device block written before each launch, so graphed and ungraphed
 * steps compute the same numbers. 0 frees the graph and runs every step
 * launch by launch. Returns 0. */
int dlt_gpu_set_graph(struct dlt_gpu *g, int on, char *err, size_t errlen);

/* Copies g's graph counters into out. */
void dlt_gpu_graph_stats(const struct dlt_gpu *g, struct dlt_gpu_graph_stats *out);

/* dlt_net_eval_batch on the GPU: adds the rows' losses to *loss_sum and
 * the correct rows to *correct. */
int dlt_gpu_eval_batch(struct dlt_gpu *g, const float *x, const uint8_t *y, int rows,
		       double *loss_sum, long *correct, char *err, size_t errlen);

/* ---- where a graphed step's GPU time goes (dlh-train --gpu-profile) ---- */

/* The time of each part of the graphed training steps since profiling was
 * turned on, summed (seconds; CUDA events recorded as nodes of the step's
 * graph between its parts, so each part is what the GPU took for it,
 * launch gaps inside the graph included). */
struct dlt_gpu_profile {
	long steps;                        /* graphed steps profiled */
	double gather_s;                   /* the batch gathered from the device's rows
					      (0: batches copied) */
	double fwd_s[DLT_NET_MAX_LAYERS];  /* each layer's forward (a layer fused into one
					      before it: 0, its work counted there) */
	double loss_s;                     /* softmax cross-entropy and the batch's sums */
	double bwd_s[DLT_NET_MAX_LAYERS];  /* each layer's backward (idem) */
	double sum_s;                      /* the wait for the gradients' allreduce after
					      backward (0 with one rank) */
	double update_s;                   /* the optimizer (and bf16's cast) */
	int fused[DLT_NET_MAX_LAYERS];     /* 0, or the number (1-based) of the layer in
					      whose kernels this one runs (dlt_gpu_fused) */
	char convs[768];                   /* through cuDNN: each conv's algorithms at the
					      profiled rows ("layer 1: forward ... ms, ...;
					      ..."), else "" */
	char nodes[1024];                  /* the profiled graph's nodes by what they run,
					      in the order each first appears in the
					      graph's list of them: "3 x
					      k_im2col, 6 x cublasSgemm, 1 x memset" (a
					      GPU's driver names the kernels, cuBLAS's too;
					      "" before a capture) */
};

/* With on, the step's graph is captured again with an event between each
 * of its parts, and each graphed step's times are added up for
 * dlt_gpu_profile; off drops them. While profiling only one step may be
 * queued at a time (dlt_gpu_queue says -EBUSY): one graph's events cannot
 * tell two steps in flight apart. Returns 0 or -errno. */
int dlt_gpu_set_profile(struct dlt_gpu *g, int on, char *err, size_t errlen);

/* Copies the profile's sums into out (zeros when never on). */
void dlt_gpu_profile(const struct dlt_gpu *g, struct dlt_gpu_profile *out);

/* The device memory in use on g's GPU now, in bytes: its total less what
 * is free (cudaMemGetInfo), so the CUDA context, cuBLAS and NCCL count
 * with the buffers, as nvidia-smi counts a process; a rank has its GPU to
 * itself (the planner gives each rank its own). -1 when it cannot say. */
double dlt_gpu_mem_used(struct dlt_gpu *g);

/* Seconds spent so far, measured on the host around the calls (the GPU
 * work they wait for included): forward+loss, backward, allreduce,
 * optimizer. */
void dlt_gpu_times(const struct dlt_gpu *g, double t[4]);

/* ---- calibration: what one GPU measures (engine/train/cuda/calib.cu,
 * run by dlh-calib --phase gpu) ---- */

#define DLT_GPU_CAL_DIMS 8      /* most GEMM grid values per side */
#define DLT_GPU_CAL_SIZES 8     /* most elementwise working sets */
#define DLT_GPU_CAL_FORMS 4     /* GEMM forms timed: nn, nt, tn (row-major, as
				   the backend's gemm() is called), and nn with
				   TF32 math (--precision tf32, bf16) */

/* What to time. */
struct dlt_gpu_cal_in {
	int ndims;                 /* values of dims */
	const int *dims;           /* the GEMM grid's m, n and k values, ascending */
	int nsizes;                /* values of sizes */
	const long *sizes;         /* bytes read + written of the elementwise passes */
	int gpus;                  /* devices 0..gpus-1 of this type the allreduce is
				      timed over (< 2: no allreduce, a 1-rank NCCL
				      communicator is made, as a 1-rank run does) */
};

/* What device 0 measured (seconds, bytes, bytes/s, FLOP/s). */
struct dlt_gpu_cal {
	char name[160];            /* the device, as dlt_gpu_describe says it */
	double total_bytes;        /* its memory */
	double ctx_s;              /* the first CUDA call: the context made */
	double ctx_bytes;          /* device memory in use after it (other processes'
				      included: calibrate an idle GPU) */
	double blas_s;             /* cublasCreate and the first sgemm */
	double blas_bytes;         /* device memory they took (handle, workspace, kernels) */
	double nccl_s;             /* making this process's NCCL communicator */
	double nccl_bytes;         /* device memory it took on device 0 */
	double kernel_s;           /* one kernel launch, back to back (host side) */
	double node_s;             /* an empty kernel's node in a CUDA graph, replayed */
	double direct_s;           /* seconds per output and tap of a conv's direct
				      product (dlt_gpu_conv_direct) with its bias, ReLU and
				      pool, a node of a graph, at the shape of a CNN's
				      first conv on 28 x 28 images */
	double direct_dw_s;        /* seconds per pooled output and tap (the bias one
				      more) of its direct weight gradient
				      (dlt_gpu_conv_dw_direct), every output passed by
				      the ReLU, the parts' sum not counted */
	double sync_s;             /* one cudaStreamSynchronize after a kernel, the
				      launch not counted */
	double h2d_s;              /* a host-to-device copy of 4 bytes (pageable) */
	double h2d_bw;             /* bytes/s of a large one */
	double bw[DLT_GPU_CAL_SIZES];   /* bytes/s of an elementwise kernel over sizes[i],
					   a node of a graph (graph node overhead included) */
	double gemm_flops;         /* the best sgemm rate of the grid */
	float gemm[DLT_GPU_CAL_FORMS][DLT_GPU_CAL_DIMS][DLT_GPU_CAL_DIMS][DLT_GPU_CAL_DIMS];
				   /* FLOP/s of [form][m][n][k], calls as nodes of a graph */
	double ar_alpha, ar_beta;  /* ncclAllReduce over gpus devices: seconds =
				      ar_alpha + ar_beta bytes (0: gpus < 2) */
};

/* Measures device 0 (and with in->gpus >= 2, the allreduce over devices
 * 0..gpus-1): seconds. Must be the process's first CUDA call (the context
 * is timed). Returns 0, or -errno with err as for the other calls. */
int dlt_gpu_calibrate(const struct dlt_gpu_cal_in *in, struct dlt_gpu_cal *out,
		      char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
