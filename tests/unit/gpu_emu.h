/* gpu_emu.h - runs engine/train/cuda/gpu.cu on the CPU, for machines without a GPU
 *
 * Force-included (g++ -include) when gpu.cu is compiled as plain C++ with
 * -DDLT_GPU_EMULATE: the CUDA runtime, cuBLAS and NCCL calls the backend
 * makes become host calls (malloc, memcpy, cblas_sgemm in column-major
 * order with the very arguments given to cublasSgemm, ncclAllReduce by
 * MPI_Allreduce over MPI_COMM_WORLD, or a copy when MPI is not running),
 * and a kernel launch runs every (block, thread) of its grid in turn. The
 * kernels that use __syncthreads are launched through LAUNCH_SYNC, which
 * runs them with one thread per block (they are written for any
 * power-of-two block size), or with DLT_EMU_THREADS=1 each block's
 * threads at once as host threads, __syncthreads a barrier (their sums in
 * a GPU's order; emu_launch_threads). So test_train_gpu checks the backend's
 * indexing, GEMM operand mapping, loss and optimizer arithmetic here, and
 * under `make asan` every out-of-bounds access of a kernel is reported.
 * The tensor-core precisions are emulated by their rounding: in TF32 math
 * mode cublasSgemm rounds its inputs to TF32 (10-bit mantissa, to nearest
 * even) before the FP32 GEMM; cublasGemmEx takes BF16 inputs (the upper 16
 * bits of an FP32 word) and sums in FP32, as the tensor cores do (a product
 * of two BF16 numbers is exact in FP32; only the order of the sums differs).
 * What it cannot check: races between kernels, launch limits, real
 * CUDA/NCCL errors.
 *
 * The stream is asynchronous, as a GPU's: outside a capture, the work a
 * call queues (kernels, cuBLAS calls, copies, memsets, allreduces, graph
 * launches) waits in emu_pending and runs, in order, when the host waits
 * for it: cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize,
 * a copy into pageable host memory (which CUDA makes synchronous), cudaFree,
 * cudaFreeHost and cudaGraphExecDestroy. A copy from pageable host memory
 * reads it at the call (CUDA stages it), one from pinned memory
 * (cudaMallocHost) when it runs, and one into pinned memory lands only
 * then. An event is a position in the stream (cudaEventSynchronize runs
 * the work up to it) stamped with the host's clock when it is reached, so
 * elapsed times are the CPU's time of the emulated work; before then
 * cudaEventElapsedTime fails with cudaErrorNotReady. So a host that reads a result before waiting for it,
 * or rewrites a pinned buffer a queued copy has yet to read, gets wrong
 * numbers here as on a GPU. A failure of queued work shows at the wait as
 * a launch failure. With two or more MPI ranks the work runs at the call
 * instead: an emulated allreduce is an MPI collective, which must meet the
 * other ranks' in the order the host calls them (a GPU's runs beside the
 * host's own MPI calls; here it would deadlock against them).
 *
 * CUDA graphs are emulated by recording: between cudaStreamBeginCapture and
 * cudaStreamEndCapture nothing runs; each kernel launch (its arguments
 * converted to the kernel's parameter types then, as CUDA copies them),
 * cuBLAS call (its scalars and math mode read then), copy, memset and
 * allreduce is appended to the graph as a node, and cudaGraphLaunch runs
 * the nodes in order. A node reads and writes memory when it is replayed,
 * not when it was captured, as on a GPU: a value that changes per step
 * reaches the graph only through memory, and one baked into a kernel's
 * arguments replays as it was at capture. Calls a GPU refuses during
 * capture (cudaStreamSynchronize, cudaMalloc) fail here too.
 * emu_graph_stats counts what was captured and replayed. DLT_EMU_CAPTURE=fail
 * plays a runtime that takes no capture: cudaStreamEndCapture returns
 * cudaErrorStreamCaptureInvalidated and no graph.
 *
 * Device memory is accounted as a GPU reports it (cudaMemGetInfo): the
 * bytes cudaMalloc holds, plus what the context, a cuBLAS handle and an
 * NCCL communicator would take (EMU_*_BYTES, of the order an H100 shows),
 * so the calibration's memory figures (engine/train/cuda/calib.cu) have
 * something to measure. */
#ifndef DLT_GPU_EMU_H
#define DLT_GPU_EMU_H

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <tuple>
#include <vector>

#include <cblas.h>
#include <limits.h>
#include <malloc.h>
#define OMPI_SKIP_MPICXX 1   /* the C API only */
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define __global__ static
#define __device__
#define __host__
#define __shared__ static

struct emu_dim3 {
	unsigned x, y, z;   /* as CUDA's uint3/dim3 */
};

/* of the running "thread" (a host thread's own: emu_launch_threads) */
static thread_local struct emu_dim3 blockIdx, threadIdx, blockDim, gridDim;

/* The threads of a block run at once (emu_launch_threads) meet here. */
struct emu_barrier {
	std::mutex m;
	std::condition_variable cv;
	unsigned n;                /* the block's threads */
	unsigned waiting;          /* arrived at this round */
	unsigned long round;       /* rounds completed */
};
static thread_local struct emu_barrier *emu_block_barrier;   /* the running block's, or NULL */

/* Nothing where a block is one thread at a time (every launch but
 * emu_launch_threads's); there, every thread of the block waits for the
 * others to arrive, as on a GPU. */
static inline void __syncthreads(void)
{
	struct emu_barrier *b = emu_block_barrier;

	if (!b)
		return;
	std::unique_lock<std::mutex> lock(b->m);
	const unsigned long round = b->round;

	if (++b->waiting == b->n) {
		b->waiting = 0;
		b->round++;
		b->cv.notify_all();
		return;
	}
	b->cv.wait(lock, [&] { return b->round != round; });
}

/* ---- graph capture: the work queued while a capture is open ---- */

struct emu_graph {
	std::vector<std::function<int()>> nodes;   /* in stream order; each returns 0 or -1 */
	std::vector<const char *> names;           /* each node's (emu_graph_node_name) */
};

/* The emulated device's state is the process's, as a GPU's is: C++17
 * inline variables, one copy for every translation unit that includes this
 * header (gpu.cu and dnn.cu queue on the same stream, in one order). */

/* What the emulated runtime did with graphs. */
struct emu_graph_counts {
	long captured;   /* nodes recorded by captures */
	long launches;   /* cudaGraphLaunch calls */
	long replayed;   /* nodes run by those launches */
};
inline struct emu_graph_counts emu_graph_stats;

inline struct emu_graph *emu_capture;   /* the open capture, else NULL */

/* ---- the stream: work queued outside a capture, run when the host waits ---- */

inline std::deque<std::function<int()>> emu_pending;   /* queued, in stream order */
inline long emu_queued, emu_ran;   /* nodes queued and run so far: the stream's positions */
inline int emu_pending_bad;        /* a node run since the last wait failed */

/* The ranks of the MPI job this process is in (1 without MPI). */
static inline int emu_world(void)
{
	int up = 0, down = 0, size = 1;

	MPI_Initialized(&up);
	MPI_Finalized(&down);
	if (up && !down)
		MPI_Comm_size(MPI_COMM_WORLD, &size);
	return size;
}

/* Runs the queued work in order up to stream position mark (all of it
 * with LONG_MAX). Returns 0, or -1 when a node run since the last call
 * failed. */
static inline int emu_run_until(long mark)
{
	while (emu_ran < mark && !emu_pending.empty()) {
		std::function<int()> node = std::move(emu_pending.front());

		emu_pending.pop_front();
		emu_ran++;
		emu_pending_bad |= node() < 0;
	}
	int bad = emu_pending_bad;

	emu_pending_bad = 0;
	return bad ? -1 : 0;
}

/* Appends node (named name in a capture) to the open capture; else queues
 * it on the stream, or with 2+ MPI ranks runs it now. Returns node's
 * result when it ran (0 when recorded or queued: a queued failure shows at
 * the wait). */
static inline int emu_queue(std::function<int()> node, const char *name = "node")
{
	if (emu_capture) {
		emu_capture->nodes.push_back(std::move(node));
		emu_capture->names.push_back(name);
		emu_graph_stats.captured++;
		return 0;
	}
	if (emu_world() > 1) {   /* what was queued before MPI came up runs first */
		if (emu_run_until(LONG_MAX) < 0)
			return -1;
		return node();
	}
	emu_pending.push_back(std::move(node));
	emu_queued++;
	return 0;
}

/* Runs body once per (block, thread) of a blocks x threads grid, in order. */
template <typename F>
static void emu_launch(unsigned blocks, unsigned threads, F body)
{
	gridDim = { blocks, 1, 1 };
	blockDim = { threads, 1, 1 };
	for (unsigned b = 0; b < blocks; b++)
		for (unsigned t = 0; t < threads; t++) {
			blockIdx = { b, 0, 0 };
			threadIdx = { t, 0, 0 };
			body();
		}
}

/* A count the emulation keeps (var) and the C function a test reads it by
 * (reader): both weak, so every object including this header shares one
 * (tests declare the reader weak: NULL on a GPU). */
#define EMU_COUNTER(var, reader) \
	extern "C" { \
	__attribute__((weak)) long var = 0; \
	__attribute__((weak)) long reader(void) { return var; } \
	}

/* Blocks run with their threads at once (emu_launch_threads). */
EMU_COUNTER(emu_threaded_blocks, dlt_emu_threaded_blocks)

/* The same grid with the threads of each block run at once, a host thread
 * each, __syncthreads a barrier among them (emu_block_barrier); the
 * blocks one after another. */
template <typename F>
static void emu_launch_threads(unsigned blocks, unsigned threads, F body)
{
	for (unsigned b = 0; b < blocks; b++) {
		struct emu_barrier bar;
		std::vector<std::thread> run;

		bar.n = threads;
		bar.waiting = 0;
		bar.round = 0;
		run.reserve(threads);
		for (unsigned t = 0; t < threads; t++)
			run.emplace_back([&, b, t]() {
				gridDim = { blocks, 1, 1 };
				blockDim = { threads, 1, 1 };
				blockIdx = { b, 0, 0 };
				threadIdx = { t, 0, 0 };
				emu_block_barrier = &bar;
				body();
				emu_block_barrier = NULL;
			});
		for (std::thread &t : run)
			t.join();
		emu_threaded_blocks++;
	}
}

/* k<<<blocks, threads>>>(args): the arguments converted to k's parameter
 * types now (a kernel's arguments are copied at launch, or at capture),
 * the grid run now or at replay; with threaded, each block's threads at
 * once (emu_launch_threads). */
template <typename... P, typename... A>
static void emu_kernel(const char *name, void (*k)(P...), unsigned blocks, unsigned threads,
		       int threaded, A... args)
{
	std::tuple<P...> params(args...);

	emu_queue([=]() {
		if (threaded)
			emu_launch_threads(blocks, threads, [&]() { std::apply(k, params); });
		else
			emu_launch(blocks, threads, [&]() { std::apply(k, params); });
		return 0;
	}, name);
}

/* 1 when DLT_EMU_THREADS=1 is in the environment now: the kernels that
 * use __syncthreads (LAUNCH_SYNC) then run with the block size asked for,
 * its threads at once (emu_launch_threads), as on a GPU: their tree sums
 * in the GPU's order, a missing barrier a race; else one thread a block
 * (the sums of one thread's loop: quick, and what ASan checks). Read at
 * each launch or capture. */
static inline int emu_threads(void)
{
	const char *v = getenv("DLT_EMU_THREADS");

	return v && !strcmp(v, "1");
}

/* (a graph's kernel node is named as the kernel is written at its launch) */
#define LAUNCH(k, blocks, threads, stream, ...) \
	((void)(stream), emu_kernel(#k, k, (blocks), (threads), 0, __VA_ARGS__))
#define LAUNCH_SYNC(k, blocks, threads, stream, ...) \
	((void)(stream), emu_threads() ? emu_kernel(#k, k, (blocks), (threads), 1, __VA_ARGS__) : \
	 emu_kernel(#k, k, (blocks), 1, 0, __VA_ARGS__))


/* ---- the CUDA runtime ---- */

typedef enum {
	cudaSuccess = 0, cudaErrorMemoryAllocation = 2, cudaErrorInvalidValue = 1,
	cudaErrorLaunchFailure = 719, cudaErrorStreamCaptureUnsupported = 900,
	cudaErrorStreamCaptureInvalidated = 901, cudaErrorIllegalState = 401,
	cudaErrorNotReady = 600
} cudaError_t;
typedef enum {
	cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice
} cudaMemcpyKind;
typedef int *cudaStream_t;
struct emu_event {
	long mark;   /* the stream position cudaEventRecord put it at */
	double t;    /* when the work before it had run (host seconds) */
};
typedef struct emu_event *cudaEvent_t;
#define cudaStreamNonBlocking 1

struct cudaDeviceProp {
	char name[256];
	int major, minor, multiProcessorCount;
	size_t totalGlobalMem;
};

inline int emu_handle;   /* what the fake streams, events and handles point at */

#define EMU_TOTAL_BYTES (80ULL << 30)   /* the emulated device's memory */
#define EMU_CTX_BYTES (384ULL << 20)    /* a CUDA context's share of it */
#define EMU_BLAS_BYTES (96ULL << 20)    /* a cuBLAS handle's (workspace, kernels) */
#define EMU_NCCL_BYTES (160ULL << 20)   /* an NCCL communicator's */
inline size_t emu_used;                 /* device bytes in use, the context's included */
inline int emu_ctx;                     /* 1: the context was made */

/* The context, made by the first call that needs it. */
static inline void emu_context(void)
{
	if (!emu_ctx) {
		emu_ctx = 1;
		emu_used += EMU_CTX_BYTES;
	}
}

static inline const char *cudaGetErrorString(cudaError_t e)
{
	switch (e) {
	case cudaSuccess: return "no error";
	case cudaErrorMemoryAllocation: return "out of memory";
	case cudaErrorInvalidValue: return "invalid argument";
	case cudaErrorLaunchFailure: return "unspecified launch failure";
	case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
	case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
	case cudaErrorIllegalState: return "the operation cannot be performed in the present state";
	case cudaErrorNotReady: return "device not ready";
	}
	return "unknown error";
}
static inline const char *cudaGetErrorName(cudaError_t e)
{
	switch (e) {
	case cudaSuccess: return "cudaSuccess";
	case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
	case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
	case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
	case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
	case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
	case cudaErrorIllegalState: return "cudaErrorIllegalState";
	case cudaErrorNotReady: return "cudaErrorNotReady";
	}
	return "cudaErrorUnknown";
}
static inline cudaError_t cudaGetLastError(void) { return cudaSuccess; }
#define EMU_DEVICES 8   /* devices the emulation reports: one per rank of a small mpirun */
static inline cudaError_t cudaGetDeviceCount(int *n) { *n = EMU_DEVICES; return cudaSuccess; }
static inline cudaError_t cudaSetDevice(int d) { (void)d; emu_context(); return cudaSuccess; }
static inline cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total)
{
	emu_context();
	*total = EMU_TOTAL_BYTES;
	*free_b = EMU_TOTAL_BYTES - emu_used;
	return cudaSuccess;
}
/* The queued work run: its failure, as a GPU reports a kernel's, at the wait. */
static inline cudaError_t emu_wait(void)
{
	if (emu_capture)
		return cudaErrorStreamCaptureUnsupported;
	return emu_run_until(LONG_MAX) < 0 ? cudaErrorLaunchFailure : cudaSuccess;
}
static inline cudaError_t cudaDeviceSynchronize(void) { return emu_wait(); }
static inline cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d)
{
	memset(p, 0, sizeof *p);
	strcpy(p->name, "host emulation of the CUDA backend");
	p->major = 9;
	p->multiProcessorCount = 1;
	(void)d;
	return cudaSuccess;
}
static inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned f)
{
	(void)f;
	*s = &emu_handle;
	return cudaSuccess;
}
static inline cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	(void)s;
	return emu_wait();
}
static inline cudaError_t cudaStreamDestroy(cudaStream_t s) { (void)s; return cudaSuccess; }
/* An event is a position in the stream: it completes when the work queued
 * before its record has run, and is stamped with the host's clock then,
 * so elapsed times are what the emulated kernels took on the CPU. One
 * recorded inside a capture orders the graph's streams, which are one
 * here: it marks nothing; with cudaEventRecordExternal it is a node of the
 * graph, stamped at each replay. */
static inline double emu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static inline cudaError_t cudaEventCreate(cudaEvent_t *e)
{
	*e = new (std::nothrow) emu_event{ 0, 0.0 };
	return *e ? cudaSuccess : cudaErrorMemoryAllocation;
}
#define cudaEventDisableTiming 2
static inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned f)
{
	(void)f;
	return cudaEventCreate(e);
}
static inline cudaError_t cudaEventDestroy(cudaEvent_t e) { delete e; return cudaSuccess; }
#define cudaEventRecordDefault 0
#define cudaEventRecordExternal 1
static inline cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t s, unsigned flags)
{
	(void)s;
	if (emu_capture) {
		if (flags & cudaEventRecordExternal)
			emu_queue([e]() { e->t = emu_now(); e->mark = emu_ran; return 0; },
				  "event record");
		return cudaSuccess;
	}
	emu_queue([e]() { e->t = emu_now(); return 0; }, "event record");
	e->mark = emu_queued;
	return cudaSuccess;
}
static inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
	return cudaEventRecordWithFlags(e, s, cudaEventRecordDefault);
}
static inline cudaError_t cudaEventQuery(cudaEvent_t e)
{
	return emu_ran >= e->mark ? cudaSuccess : cudaErrorNotReady;
}
/* The host time between the two stamps, once both events completed. */
static inline cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
	if (emu_ran < a->mark || emu_ran < b->mark)
		return cudaErrorNotReady;
	*ms = (float)(1e3 * (b->t - a->t));
	return cudaSuccess;
}
static inline cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
	if (emu_capture)
		return cudaErrorStreamCaptureUnsupported;
	return emu_run_until(e->mark) < 0 ? cudaErrorLaunchFailure : cudaSuccess;
}
static inline cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned f)
{
	(void)s;
	(void)e;
	(void)f;
	return cudaSuccess;
}
static inline cudaError_t cudaMalloc(void **p, size_t n)
{
	if (emu_capture)
		return cudaErrorStreamCaptureUnsupported;   /* not in ThreadLocal capture mode */
	emu_context();
	/* 256-byte aligned, as CUDA's allocations are (its Programming Guide:
	 * "always aligned to at least 256 bytes") */
	if (posix_memalign(p, 256, n ? n : 1))
		*p = NULL;
	if (*p)
		emu_used += malloc_usable_size(*p);
	return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline std::map<const char *, size_t> emu_pinned_blocks;   /* cudaMallocHost's: start, bytes */

/* 1 when [p, p + n) lies in one block of cudaMallocHost. */
static inline int emu_pinned(const void *p, size_t n)
{
	const char *c = (const char *)p;
	auto it = emu_pinned_blocks.upper_bound(c);

	if (it == emu_pinned_blocks.begin())
		return 0;
	--it;
	return c >= it->first && c + n <= it->first + it->second;
}
static inline cudaError_t cudaMallocHost(void **p, size_t n)
{
	*p = malloc(n ? n : 1);
	if (!*p)
		return cudaErrorMemoryAllocation;
	emu_pinned_blocks[(const char *)*p] = n;
	return cudaSuccess;
}
/* cudaFree(0), as CUDA's, makes the context; a free waits for the device. */
static inline cudaError_t cudaFree(void *p)
{
	emu_context();
	cudaError_t e = emu_capture ? cudaSuccess : emu_wait();

	if (p)
		emu_used -= malloc_usable_size(p);
	free(p);
	return e;
}
static inline cudaError_t cudaFreeHost(void *p)
{
	cudaError_t e = emu_capture ? cudaSuccess : emu_wait();

	emu_pinned_blocks.erase((const char *)p);
	free(p);
	return e;
}
/* A copy node reads its source when it runs (at replay, in a graph), but
 * outside a capture a copy from pageable host memory reads it now (CUDA
 * stages it before returning) and one into pageable host memory waits for
 * the stream and is done when the call returns. */
static inline cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind k,
					  cudaStream_t st)
{
	(void)st;
	if (!emu_capture && k == cudaMemcpyHostToDevice && !emu_pinned(s, n)) {
		auto staged = std::make_shared<std::vector<char>>((const char *)s, (const char *)s + n);

		emu_queue([=]() { memcpy(d, staged->data(), n); return 0; }, "memcpy");
		return cudaSuccess;
	}
	emu_queue([=]() { memmove(d, s, n); return 0; }, "memcpy");
	if (!emu_capture && k == cudaMemcpyDeviceToHost && !emu_pinned(d, n))
		return emu_wait();
	return cudaSuccess;
}
static inline cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t st)
{
	(void)st;
	emu_queue([=]() { memset(d, v, n); return 0; }, "memset");
	return cudaSuccess;
}

/* ---- CUDA graphs (stream capture) ---- */

typedef struct emu_graph *cudaGraph_t;
typedef struct emu_graph *cudaGraphExec_t;   /* an instantiated copy of a graph */
typedef struct emu_graph_node *cudaGraphNode_t;   /* never made: only counted */
typedef enum {
	cudaStreamCaptureModeGlobal = 0, cudaStreamCaptureModeThreadLocal = 1,
	cudaStreamCaptureModeRelaxed = 2
} cudaStreamCaptureMode;

/* One capture at a time (gpu.cu captures only its own stream). */
static inline cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode m)
{
	(void)s;
	(void)m;
	if (emu_capture)
		return cudaErrorIllegalState;
	emu_capture = new (std::nothrow) emu_graph;
	return emu_capture ? cudaSuccess : cudaErrorMemoryAllocation;
}
static inline cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g)
{
	(void)s;
	if (!emu_capture)
		return cudaErrorIllegalState;
	*g = emu_capture;
	emu_capture = NULL;
	const char *cap = getenv("DLT_EMU_CAPTURE");

	if (cap && !strcmp(cap, "fail")) {
		delete *g;
		*g = NULL;
		return cudaErrorStreamCaptureInvalidated;
	}
	return cudaSuccess;
}
typedef enum {
	cudaStreamCaptureStatusNone = 0, cudaStreamCaptureStatusActive = 1
} cudaStreamCaptureStatus;
static inline cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus *st)
{
	(void)s;
	*st = emu_capture ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
	return cudaSuccess;
}
static inline cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t *nodes, size_t *n)
{
	if (nodes)
		return cudaErrorInvalidValue;   /* only the count is emulated */
	*n = g->nodes.size();
	return cudaSuccess;
}
/* The name of node i of a captured graph (what the emulation calls it:
 * the kernel as written at its launch, "cublasSgemm", "memcpy", ...),
 * NULL past the last: gpu.cu's graph census, where a GPU has the driver
 * name its kernels. */
static inline const char *emu_graph_node_name(cudaGraph_t g, size_t i)
{
	return i < g->names.size() ? g->names[i] : NULL;
}
static inline cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g,
					       unsigned long long flags)
{
	(void)flags;
	if (emu_capture)
		return cudaErrorStreamCaptureUnsupported;
	*e = new (std::nothrow) emu_graph(*g);
	return *e ? cudaSuccess : cudaErrorMemoryAllocation;
}
/* Runs the nodes in order; a node that failed (a GEMM out of memory)
 * shows as a launch failure. */
static inline cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t s)
{
	(void)s;
	if (emu_capture)
		return cudaErrorStreamCaptureUnsupported;   /* no graphs inside graphs here */
	emu_graph_stats.launches++;
	return emu_queue([e]() {
		int bad = 0;

		for (auto &node : e->nodes) {
			bad |= node() < 0;
			emu_graph_stats.replayed++;
		}
		return bad ? -1 : 0;
	}) < 0 ? cudaErrorLaunchFailure : cudaSuccess;
}
/* A launched graph is freed once it has run (here: the stream waited for). */
static inline cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e)
{
	cudaError_t r = emu_capture ? cudaSuccess : emu_wait();

	delete e;
	return r;
}
static inline cudaError_t cudaGraphDestroy(cudaGraph_t g) { delete g; return cudaSuccess; }

/* ---- cuBLAS ---- */

typedef enum {
	CUBLAS_STATUS_SUCCESS, CUBLAS_STATUS_NOT_INITIALIZED, CUBLAS_STATUS_ALLOC_FAILED,
	CUBLAS_STATUS_INVALID_VALUE, CUBLAS_STATUS_ARCH_MISMATCH, CUBLAS_STATUS_MAPPING_ERROR,
	CUBLAS_STATUS_EXECUTION_FAILED, CUBLAS_STATUS_INTERNAL_ERROR, CUBLAS_STATUS_NOT_SUPPORTED,
	CUBLAS_STATUS_LICENSE_ERROR
} cublasStatus_t;
typedef enum { CUBLAS_OP_N, CUBLAS_OP_T } cublasOperation_t;
typedef enum { CUBLAS_DEFAULT_MATH = 0, CUBLAS_TF32_TENSOR_OP_MATH = 3 } cublasMath_t;
typedef enum { CUDA_R_32F = 0, CUDA_R_16BF = 14 } cudaDataType;
typedef enum { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_FAST_TF32 = 77 } cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;

struct emu_blas {
	cublasMath_t math;   /* cublasSetMathMode's */
};
typedef struct emu_blas *cublasHandle_t;

static inline cublasStatus_t cublasCreate(cublasHandle_t *h)
{
	emu_context();
	*h = (struct emu_blas *)calloc(1, sizeof **h);
	if (!*h)
		return CUBLAS_STATUS_ALLOC_FAILED;
	emu_used += EMU_BLAS_BYTES;
	return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasDestroy(cublasHandle_t h)
{
	free(h);
	emu_used -= EMU_BLAS_BYTES;
	return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s)
{
	(void)h;
	(void)s;
	return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m)
{
	if (m != CUBLAS_DEFAULT_MATH && m != CUBLAS_TF32_TENSOR_OP_MATH)
		return CUBLAS_STATUS_INVALID_VALUE;
	h->math = m;
	return CUBLAS_STATUS_SUCCESS;
}

/* 1 when the column-major GEMM arguments pass cuBLAS's own checks. */
static inline int emu_gemm_args(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
				int lda, int ldb, int ldc)
{
	return !(m < 0 || n < 0 || k < 0 ||
		 lda < (ta == CUBLAS_OP_N ? (m > 1 ? m : 1) : (k > 1 ? k : 1)) ||
		 ldb < (tb == CUBLAS_OP_N ? (k > 1 ? k : 1) : (n > 1 ? n : 1)) || ldc < (m > 1 ? m : 1));
}

/* Elements a column-major operand of rows x cols with leading dimension ld
 * spans (0 when empty). */
static inline size_t emu_span(int rows, int cols, int ld)
{
	return rows > 0 && cols > 0 ? (size_t)(cols - 1) * (size_t)ld + (size_t)rows : 0;
}

/* x rounded to TF32: 10 mantissa bits, to nearest even (Inf and NaN kept). */
static inline float emu_tf32(float x)
{
	uint32_t u;

	memcpy(&u, &x, sizeof u);
	if ((u & 0x7f800000u) != 0x7f800000u) {
		u += 0xfffu + ((u >> 13) & 1u);
		u &= ~0x1fffu;
	}
	memcpy(&x, &u, sizeof x);
	return x;
}

/* A malloc'd copy of n floats of x, each through round (NULL: as they are;
 * NULL returned when out of memory; a 1-float buffer for n = 0). */
static inline float *emu_copy(const float *x, size_t n, float (*round)(float))
{
	float *c = (float *)malloc((n ? n : 1) * sizeof(float));

	for (size_t i = 0; c && i < n; i++)
		c[i] = round ? round(x[i]) : x[i];
	return c;
}

/* cublasSgemm's column-major contract, by the column-major CBLAS call; in
 * TF32 math mode on copies of A and B rounded to TF32. Returns 0, or -1
 * when out of memory. */
static inline int emu_sgemm(cublasMath_t math, cublasOperation_t ta, cublasOperation_t tb,
			    int m, int n, int k, float alpha, const float *A, int lda,
			    const float *B, int ldb, float beta, float *C, int ldc)
{
	float *a = NULL, *b = NULL;

	if (math == CUBLAS_TF32_TENSOR_OP_MATH) {
		a = emu_copy(A, ta == CUBLAS_OP_N ? emu_span(m, k, lda) : emu_span(k, m, lda), emu_tf32);
		b = emu_copy(B, tb == CUBLAS_OP_N ? emu_span(k, n, ldb) : emu_span(n, k, ldb), emu_tf32);
		if (!a || !b) {
			free(a);
			free(b);
			return -1;
		}
		A = a;
		B = b;
	}
	cblas_sgemm(CblasColMajor, ta == CUBLAS_OP_T ? CblasTrans : CblasNoTrans,
		    tb == CUBLAS_OP_T ? CblasTrans : CblasNoTrans, m, n, k, alpha, A, lda,
		    B, ldb, beta, C, ldc);
	free(a);
	free(b);
	return 0;
}

/* cublasSgemm: the arguments checked, the scalars (host pointer mode) and
 * the handle's math mode read now, the product computed now or at replay. */
static inline cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta,
					 cublasOperation_t tb, int m, int n, int k,
					 const float *alpha, const float *A, int lda,
					 const float *B, int ldb, const float *beta, float *C, int ldc)
{
	const cublasMath_t math = h->math;
	const float al = *alpha, be = *beta;

	if (!emu_gemm_args(ta, tb, m, n, k, lda, ldb, ldc))
		return CUBLAS_STATUS_INVALID_VALUE;   /* cuBLAS's own argument checks */
	return emu_queue([=]() {
		return emu_sgemm(math, ta, tb, m, n, k, al, A, lda, B, ldb, be, C, ldc);
	}, "cublasSgemm") < 0 ? CUBLAS_STATUS_ALLOC_FAILED : CUBLAS_STATUS_SUCCESS;
}

/* cublasSgemmStridedBatched: batch products of cublasSgemm's contract,
 * operand i at A + i strideA, B + i strideB, C + i strideC, one after the
 * other (one node of a graph). */
static inline cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta,
						       cublasOperation_t tb, int m, int n, int k,
						       const float *alpha, const float *A, int lda,
						       long long sa, const float *B, int ldb,
						       long long sb, const float *beta, float *C,
						       int ldc, long long sc, int batch)
{
	const cublasMath_t math = h->math;
	const float al = *alpha, be = *beta;

	if (!emu_gemm_args(ta, tb, m, n, k, lda, ldb, ldc) || batch < 0)
		return CUBLAS_STATUS_INVALID_VALUE;
	return emu_queue([=]() {
		for (int i = 0; i < batch; i++)
			if (emu_sgemm(math, ta, tb, m, n, k, al, A + i * sa, lda, B + i * sb, ldb, be,
				      C + i * sc, ldc) < 0)
				return -1;
		return 0;
	}, "cublasSgemmStridedBatched") < 0 ? CUBLAS_STATUS_ALLOC_FAILED : CUBLAS_STATUS_SUCCESS;
}

/* n BF16 words of x as FP32 (the words are the upper halves); NULL when
 * out of memory. */
static inline float *emu_from_bf16(const void *x, size_t n)
{
	const uint16_t *w = (const uint16_t *)x;
	float *c = (float *)malloc((n ? n : 1) * sizeof(float));

	for (size_t i = 0; c && i < n; i++) {
		uint32_t u = (uint32_t)w[i] << 16;

		memcpy(&c[i], &u, sizeof c[i]);
	}
	return c;
}

/* cublasGemmEx's product for the one form gpu.cu calls (BF16 A and B,
 * FP32 C, FP32 scalars), computed now; -1 when out of memory. */
static inline int emu_gemm_bf16(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
				float al, const void *A, int lda, const void *B, int ldb, float be,
				float *C, int ldc)
{
	float *a = emu_from_bf16(A, ta == CUBLAS_OP_N ? emu_span(m, k, lda) : emu_span(k, m, lda));
	float *b = emu_from_bf16(B, tb == CUBLAS_OP_N ? emu_span(k, n, ldb) : emu_span(n, k, ldb));
	int ok = a && b;

	if (ok)
		cblas_sgemm(CblasColMajor, ta == CUBLAS_OP_T ? CblasTrans : CblasNoTrans,
			    tb == CUBLAS_OP_T ? CblasTrans : CblasNoTrans, m, n, k,
			    al, a, lda, b, ldb, be, C, ldc);
	free(a);
	free(b);
	return ok ? 0 : -1;
}

/* 1 when an Ex call's types are the one form gpu.cu calls. */
static inline int emu_bf16_form(cudaDataType at, cudaDataType bt, cudaDataType ct,
				cublasComputeType_t comp)
{
	return at == CUDA_R_16BF && bt == CUDA_R_16BF && ct == CUDA_R_32F && comp == CUBLAS_COMPUTE_32F;
}

/* cublasGemmEx for the one form gpu.cu calls: BF16 A and B, FP32 C, FP32
 * compute and scalars; any other is CUBLAS_STATUS_NOT_SUPPORTED. Checked
 * now, computed now or at replay. */
static inline cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta,
					  cublasOperation_t tb, int m, int n, int k,
					  const void *alpha, const void *A, cudaDataType at, int lda,
					  const void *B, cudaDataType bt, int ldb, const void *beta,
					  void *C, cudaDataType ct, int ldc, cublasComputeType_t comp,
					  cublasGemmAlgo_t algo)
{
	(void)h;
	(void)algo;
	if (!emu_bf16_form(at, bt, ct, comp))
		return CUBLAS_STATUS_NOT_SUPPORTED;
	if (!emu_gemm_args(ta, tb, m, n, k, lda, ldb, ldc))
		return CUBLAS_STATUS_INVALID_VALUE;
	const float al = *(const float *)alpha, be = *(const float *)beta;

	return emu_queue([=]() {
		return emu_gemm_bf16(ta, tb, m, n, k, al, A, lda, B, ldb, be, (float *)C, ldc);
	}, "cublasGemmEx") < 0 ? CUBLAS_STATUS_ALLOC_FAILED : CUBLAS_STATUS_SUCCESS;
}

/* cublasGemmStridedBatchedEx in cublasGemmEx's one form: batch products,
 * operand i at A + i strideA, B + i strideB, C + i strideC (elements of
 * their types), one after the other. */
static inline cublasStatus_t cublasGemmStridedBatchedEx(
	cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
	const void *alpha, const void *A, cudaDataType at, int lda, long long sa, const void *B,
	cudaDataType bt, int ldb, long long sb, const void *beta, void *C, cudaDataType ct, int ldc,
	long long sc, int batch, cublasComputeType_t comp, cublasGemmAlgo_t algo)
{
	(void)h;
	(void)algo;
	if (!emu_bf16_form(at, bt, ct, comp))
		return CUBLAS_STATUS_NOT_SUPPORTED;
	if (!emu_gemm_args(ta, tb, m, n, k, lda, ldb, ldc) || batch < 0)
		return CUBLAS_STATUS_INVALID_VALUE;
	const float al = *(const float *)alpha, be = *(const float *)beta;

	return emu_queue([=]() {
		for (int i = 0; i < batch; i++)
			if (emu_gemm_bf16(ta, tb, m, n, k, al, (const uint16_t *)A + i * sa, lda,
					  (const uint16_t *)B + i * sb, ldb, be, (float *)C + i * sc,
					  ldc) < 0)
				return -1;
		return 0;
	}, "cublasGemmStridedBatchedEx") < 0 ? CUBLAS_STATUS_ALLOC_FAILED : CUBLAS_STATUS_SUCCESS;
}

/* ---- cuBLASLt: the matmul gpu.cu calls (FP32 operands, FP32 or TF32
 * compute) with the epilogues it asks for ----
 *
 * The contract is cuBLASLt's: D (m x n, column-major) = op(A) op(B) with
 * alpha 1 and beta 0, D written over C (the one form called); the bias
 * is a vector over D's rows; a ReLU's aux is a bit mask of D, aux_ld bits
 * (a multiple of 128, at least m) a column of D: the emulation sets bit
 * i + j aux_ld for element (i, j) (cuBLASLt's own layout is its own: only
 * its epilogues read it, as here). DRELU_BGRAD zeroes D where the mask's
 * bit is clear and writes D's row sums (over its columns, in order) to the
 * bias pointer. The heuristic finds an algorithm for every such product,
 * but where DLT_EMU_LT_NONE in the environment refuses it (a cuBLASLt
 * without one: gpu.cu's fallbacks): "1", every product; "rows=N", those
 * whose n (D's columns: the backend's batch rows) is N; "rows=N,drelu"
 * and "rows=N,aux", of those only the DRELU_BGRAD products, or only the
 * RELU_AUX_BIAS ones; "invalid", every product, the heuristic failing with
 * CUBLAS_STATUS_INVALID_VALUE (as a cuBLASLt that does not take a
 * descriptor's attribute).
 * Alignment, as a GPU's kernels need it: the heuristic's algorithm assumes
 * each of A, B, C and D aligned to the preference's MIN_ALIGNMENT (256
 * bytes unless told; its vector loads need 16 of them at most) and the
 * bias and aux pointers to 16 bytes (cuBLASLt's preferences do not cover
 * them); a cublasLtMatmul on a pointer less aligned than its algorithm
 * assumes is a misaligned address on a GPU: here it fails with
 * CUBLAS_STATUS_EXECUTION_FAILED, counted (dlt_emu_lt_bad_calls). */
typedef enum {
	CUBLASLT_EPILOGUE_DEFAULT = 1, CUBLASLT_EPILOGUE_RELU = 2, CUBLASLT_EPILOGUE_BIAS = 4,
	CUBLASLT_EPILOGUE_RELU_BIAS = 6, CUBLASLT_EPILOGUE_RELU_AUX_BIAS = 134,
	CUBLASLT_EPILOGUE_DRELU_BGRAD = 152
} cublasLtEpilogue_t;
typedef enum {
	CUBLASLT_MATMUL_DESC_TRANSA = 3, CUBLASLT_MATMUL_DESC_TRANSB = 4,
	CUBLASLT_MATMUL_DESC_EPILOGUE = 7, CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
	CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER = 11, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD = 12
} cublasLtMatmulDescAttributes_t;
typedef enum {
	CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK = 3,
	CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
	CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8
} cublasLtMatmulPreferenceAttributes_t;
typedef enum { CUBLASLT_REDUCTION_SCHEME_NONE = 0, CUBLASLT_REDUCTION_SCHEME_INPLACE = 1 }
	cublasLtReductionScheme_t;
struct emu_lt {
	int unused;
};
struct emu_lt_desc {
	cublasComputeType_t comp;
	cublasOperation_t ta, tb;
	cublasLtEpilogue_t epi;
	void *bias, *aux;
	int64_t aux_ld;
};
struct emu_lt_layout {
	cudaDataType type;
	uint64_t rows, cols;
	int64_t ld;
};
struct emu_lt_pref {
	uint64_t ws;
	uint32_t reduction;   /* a mask of cublasLtReductionScheme_t (one kernel: any) */
	uint32_t align[4];    /* MIN_ALIGNMENT of A, B, C, D: 256 unless told */
};
typedef struct emu_lt *cublasLtHandle_t;
typedef struct emu_lt_desc *cublasLtMatmulDesc_t;
typedef struct emu_lt_layout *cublasLtMatrixLayout_t;
typedef struct emu_lt_pref *cublasLtMatmulPreference_t;
typedef struct {
	uint64_t data[8];
} cublasLtMatmulAlgo_t;
typedef struct {
	cublasLtMatmulAlgo_t algo;
	size_t workspaceSize;
	cublasStatus_t state;
	float wavesCount;
	int reserved[4];
} cublasLtMatmulHeuristicResult_t;

static inline cublasStatus_t cublasLtCreate(cublasLtHandle_t *h)
{
	emu_context();
	*h = (struct emu_lt *)calloc(1, sizeof **h);
	return *h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}
static inline cublasStatus_t cublasLtDestroy(cublasLtHandle_t h)
{
	free(h);
	return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d,
						      cublasComputeType_t comp, cudaDataType scale)
{
	if ((comp != CUBLAS_COMPUTE_32F && comp != CUBLAS_COMPUTE_32F_FAST_TF32) || scale != CUDA_R_32F)
		return CUBLAS_STATUS_NOT_SUPPORTED;
	*d = (struct emu_lt_desc *)calloc(1, sizeof **d);
	if (!*d)
		return CUBLAS_STATUS_ALLOC_FAILED;
	(*d)->comp = comp;
	(*d)->epi = CUBLASLT_EPILOGUE_DEFAULT;
	return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d)
{
	free(d);
	return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d,
							    cublasLtMatmulDescAttributes_t a,
							    const void *buf, size_t size)
{
	switch (a) {
	case CUBLASLT_MATMUL_DESC_TRANSA:
	case CUBLASLT_MATMUL_DESC_TRANSB: {
		int32_t op;   /* cublasOperation_t: an int32_t attribute */

		if (size != sizeof op)
			return CUBLAS_STATUS_INVALID_VALUE;
		memcpy(&op, buf, sizeof op);
		if (op != CUBLAS_OP_N && op != CUBLAS_OP_T)
			return CUBLAS_STATUS_INVALID_VALUE;
		*(a == CUBLASLT_MATMUL_DESC_TRANSA ? &d->ta : &d->tb) = (cublasOperation_t)op;
		return CUBLAS_STATUS_SUCCESS;
	}
	case CUBLASLT_MATMUL_DESC_EPILOGUE: {
		uint32_t e;

		if (size != sizeof e)
			return CUBLAS_STATUS_INVALID_VALUE;
		memcpy(&e, buf, sizeof e);
		d->epi = (cublasLtEpilogue_t)e;
		return CUBLAS_STATUS_SUCCESS;
	}
	case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
	case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
		if (size != sizeof(void *))
			return CUBLAS_STATUS_INVALID_VALUE;
		memcpy(a == CUBLASLT_MATMUL_DESC_BIAS_POINTER ? &d->bias : &d->aux, buf, size);
		return CUBLAS_STATUS_SUCCESS;
	case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
		if (size != sizeof d->aux_ld)
			return CUBLAS_STATUS_INVALID_VALUE;
		memcpy(&d->aux_ld, buf, size);
		return CUBLAS_STATUS_SUCCESS;
	}
	return CUBLAS_STATUS_INVALID_VALUE;
}
static inline cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType t,
							uint64_t rows, uint64_t cols, int64_t ld)
{
	if (ld < (int64_t)(rows > 1 ? rows : 1))
		return CUBLAS_STATUS_INVALID_VALUE;
	*l = (struct emu_lt_layout *)calloc(1, sizeof **l);
	if (!*l)
		return CUBLAS_STATUS_ALLOC_FAILED;
	**l = { t, rows, cols, ld };
	return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l)
{
	free(l);
	return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p)
{
	*p = (struct emu_lt_pref *)calloc(1, sizeof **p);
	if (!*p)
		return CUBLAS_STATUS_ALLOC_FAILED;
	for (int i = 0; i < 4; i++)
		(*p)->align[i] = 256;
	return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p)
{
	free(p);
	return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatmulPreferenceSetAttribute(
	cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t a, const void *buf,
	size_t size)
{
	if (a == CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK && size == sizeof p->reduction) {
		memcpy(&p->reduction, buf, size);
		return CUBLAS_STATUS_SUCCESS;
	}
	if (a >= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES &&
	    a <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES) {
		uint32_t v;

		if (size != sizeof v)
			return CUBLAS_STATUS_INVALID_VALUE;
		memcpy(&v, buf, size);
		if (!v || (v & (v - 1)))   /* a power of two */
			return CUBLAS_STATUS_INVALID_VALUE;
		p->align[a - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES] = v;
		return CUBLAS_STATUS_SUCCESS;
	}
	if (a != CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES || size != sizeof p->ws)
		return CUBLAS_STATUS_INVALID_VALUE;
	memcpy(&p->ws, buf, size);
	return CUBLAS_STATUS_SUCCESS;
}

/* The product's m, n, k from its layouts when they agree with the
 * descriptor's (FP32 everywhere, C's layout D's, the epilogue one the
 * emulation knows with what it needs); else 0. */
static inline int emu_lt_shape(const struct emu_lt_desc *d, const struct emu_lt_layout *a,
			       const struct emu_lt_layout *b, const struct emu_lt_layout *c,
			       const struct emu_lt_layout *dd, int *m, int *n, int *k)
{
	const uint64_t am = d->ta == CUBLAS_OP_N ? a->rows : a->cols;
	const uint64_t ak = d->ta == CUBLAS_OP_N ? a->cols : a->rows;
	const uint64_t bk = d->tb == CUBLAS_OP_N ? b->rows : b->cols;
	const uint64_t bn = d->tb == CUBLAS_OP_N ? b->cols : b->rows;

	if (a->type != CUDA_R_32F || b->type != CUDA_R_32F || c->type != CUDA_R_32F ||
	    dd->type != CUDA_R_32F || ak != bk || c->rows != am || c->cols != bn ||
	    dd->rows != c->rows || dd->cols != c->cols || dd->ld != c->ld)
		return 0;
	switch (d->epi) {
	case CUBLASLT_EPILOGUE_DEFAULT:
	case CUBLASLT_EPILOGUE_RELU:
		break;
	case CUBLASLT_EPILOGUE_BIAS:
	case CUBLASLT_EPILOGUE_RELU_BIAS:
		if (!d->bias)
			return 0;
		break;
	case CUBLASLT_EPILOGUE_RELU_AUX_BIAS:
	case CUBLASLT_EPILOGUE_DRELU_BGRAD:
		if (!d->bias || !d->aux || d->aux_ld % 128 || d->aux_ld < (int64_t)am)
			return 0;
		break;
	default:
		return 0;
	}
	*m = (int)am;
	*n = (int)bn;
	*k = (int)ak;
	return 1;
}

/* Heuristic queries so far: a test sees that the backend asks once for
 * each product (its plans kept). */
EMU_COUNTER(emu_lt_heuristic_calls, dlt_emu_lt_heuristics)

/* 1 when DLT_EMU_LT_NONE refuses a product of n columns with epilogue e. */
static inline int emu_lt_refused(int n, cublasLtEpilogue_t e)
{
	const char *none = getenv("DLT_EMU_LT_NONE");
	int rows = 0, k = 0;
	char only[8] = "";

	if (!none)
		return 0;
	if (!strcmp(none, "1"))
		return 1;
	if (sscanf(none, "rows=%d%n,%7s", &rows, &k, only) < 1)
		return 0;
	return n == rows && (!only[0] || (!strcmp(only, "drelu") && e == CUBLASLT_EPILOGUE_DRELU_BGRAD) ||
			     (!strcmp(only, "aux") && e == CUBLASLT_EPILOGUE_RELU_AUX_BIAS));
}

static inline cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
	cublasLtHandle_t h, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
	cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t dd, cublasLtMatmulPreference_t p,
	int requested, cublasLtMatmulHeuristicResult_t *res, int *found)
{
	int m, n, k;

	(void)h;
	emu_lt_heuristic_calls++;
	*found = 0;
	if (requested < 1)
		return CUBLAS_STATUS_INVALID_VALUE;
	const char *none = getenv("DLT_EMU_LT_NONE");

	if (none && !strcmp(none, "invalid"))
		return CUBLAS_STATUS_INVALID_VALUE;
	if (!emu_lt_shape(d, a, b, c, dd, &m, &n, &k) || emu_lt_refused(n, d->epi))
		return CUBLAS_STATUS_NOT_SUPPORTED;
	memset(res, 0, sizeof *res);
	for (int i = 0; i < 4; i++)   /* the alignment its loads assume */
		res->algo.data[i] = p->align[i] < 16 ? p->align[i] : 16;
	res->state = CUBLAS_STATUS_SUCCESS;
	res->wavesCount = 1.0f;
	*found = 1;
	return CUBLAS_STATUS_SUCCESS;
}

/* The epilogue of desc d over D (m x n, ld), after the product. */
static inline void emu_lt_epilogue(const struct emu_lt_desc *d, float *D, int m, int n, int64_t ld)
{
	float *bias = (float *)d->bias;
	uint8_t *aux = (uint8_t *)d->aux;

	for (int j = 0; j < n; j++)
		for (int i = 0; i < m; i++) {
			float *v = &D[(size_t)j * (size_t)ld + (size_t)i];
			const size_t bit = (size_t)j * (size_t)d->aux_ld + (size_t)i;

			switch (d->epi) {
			case CUBLASLT_EPILOGUE_RELU:
				*v = *v > 0.0f ? *v : 0.0f;
				break;
			case CUBLASLT_EPILOGUE_BIAS:
				*v += bias[i];
				break;
			case CUBLASLT_EPILOGUE_RELU_BIAS:
			case CUBLASLT_EPILOGUE_RELU_AUX_BIAS:
				*v += bias[i];
				if (d->epi == CUBLASLT_EPILOGUE_RELU_AUX_BIAS) {
					if (*v > 0.0f)
						aux[bit / 8] |= (uint8_t)(1u << (bit % 8));
					else
						aux[bit / 8] &= (uint8_t)~(1u << (bit % 8));
				}
				*v = *v > 0.0f ? *v : 0.0f;
				break;
			case CUBLASLT_EPILOGUE_DRELU_BGRAD:
				if (!(aux[bit / 8] & (1u << (bit % 8))))
					*v = 0.0f;
				break;
			default:
				break;
			}
		}
	if (d->epi == CUBLASLT_EPILOGUE_DRELU_BGRAD)
		for (int i = 0; i < m; i++) {
			float s = 0.0f;

			for (int j = 0; j < n; j++)
				s += D[(size_t)j * (size_t)ld + (size_t)i];
			bias[i] = s;
		}
}

/* cublasLtMatmul calls that ran an algorithm on a pointer less aligned
 * than it assumes (a misaligned address on a GPU). */
EMU_COUNTER(emu_lt_bad_calls, dlt_emu_lt_bad_calls)

/* 1 when p is aligned to at least want bytes. */
static inline int emu_aligned(const void *p, uint64_t want)
{
	return want <= 1 || (uintptr_t)p % want == 0;
}

/* cublasLtMatmul: checked now (as the heuristic, and the pointers'
 * alignment against the algorithm's), the product (TF32 by the compute
 * type) and its epilogue computed now or at replay. */
static inline cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d,
					    const void *alpha, const void *A,
					    cublasLtMatrixLayout_t a, const void *B,
					    cublasLtMatrixLayout_t b, const void *beta, const void *C,
					    cublasLtMatrixLayout_t c, void *D, cublasLtMatrixLayout_t dd,
					    const cublasLtMatmulAlgo_t *algo, void *ws, size_t wsn,
					    cudaStream_t s)
{
	int m, n, k;

	(void)h;
	(void)ws;
	(void)wsn;
	(void)s;
	if (!emu_lt_shape(d, a, b, c, dd, &m, &n, &k) || C != D)
		return CUBLAS_STATUS_NOT_SUPPORTED;
	if (!emu_aligned(A, algo->data[0]) || !emu_aligned(B, algo->data[1]) ||
	    !emu_aligned(C, algo->data[2]) || !emu_aligned(D, algo->data[3]) ||
	    !emu_aligned(d->bias, 16) || !emu_aligned(d->aux, 16)) {
		emu_lt_bad_calls++;
		return CUBLAS_STATUS_EXECUTION_FAILED;
	}
	const float al = *(const float *)alpha, be = *(const float *)beta;
	const struct emu_lt_desc desc = *d;   /* the call's, as cuBLASLt reads it now */
	const cublasMath_t math = d->comp == CUBLAS_COMPUTE_32F_FAST_TF32 ?
		CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH;
	const int lda = (int)a->ld, ldb = (int)b->ld;
	const int64_t ldd = dd->ld;

	return emu_queue([=]() {
		if (emu_sgemm(math, desc.ta, desc.tb, m, n, k, al, (const float *)A, lda,
			      (const float *)B, ldb, be, (float *)D, (int)ldd) < 0)
			return -1;
		emu_lt_epilogue(&desc, (float *)D, m, n, ldd);
		return 0;
	}, "cublasLtMatmul") < 0 ? CUBLAS_STATUS_ALLOC_FAILED : CUBLAS_STATUS_SUCCESS;
}

/* ---- cuDNN: the convolution calls of engine/train/cuda/dnn.cu ----
 *
 * NCHW FP32 tensors, KCRS filters, 2-D cross-correlation with symmetric
 * padding, stride and dilation 1 (what dnn.cu asks for; anything else is
 * CUDNN_STATUS_NOT_SUPPORTED). A product is an im2col matrix per image and
 * a CBLAS product over it, run now or at replay as a cuBLAS call is; with
 * the default or tensor-op math mode its inputs are rounded to TF32, as a
 * TF32 tensor core reads them, with CUDNN_FMA_MATH they are as given.
 * Find runs the queued work, computes the product once (as a real Find
 * writes its outputs) and lists algorithms fastest first: the first ones
 * listed are ones dnn.cu must pass over (one needing more workspace than
 * any caller has, or one that sums with atomics), and the emulation counts
 * any call that runs them, or runs the right one in the default math
 * where Find said it ran in tensor-op math (dlt_emu_cudnn_bad_calls). DLT_EMU_CUDNN_NONE:
 * "lib" (dnn.cu finds no library), "1" (no algorithm for any product),
 * "rows=N" (none at N rows), "filter" (none for a weight gradient),
 * "capture" (a product refused while the stream is captured),
 * "find=unsupported" (Find refuses the shape: CUDNN_STATUS_NOT_SUPPORTED),
 * "find=fault" (Find meets a device fault: CUDNN_STATUS_EXECUTION_FAILED). */

typedef enum {
	CUDNN_STATUS_SUCCESS = 0, CUDNN_STATUS_BAD_PARAM = 2000,
	CUDNN_STATUS_NOT_SUPPORTED = 3000, CUDNN_STATUS_EXECUTION_FAILED = 5000
} cudnnStatus_t;
typedef enum { CUDNN_DATA_FLOAT = 0 } cudnnDataType_t;
typedef enum { CUDNN_TENSOR_NCHW = 0 } cudnnTensorFormat_t;
typedef enum { CUDNN_CONVOLUTION = 0, CUDNN_CROSS_CORRELATION = 1 } cudnnConvolutionMode_t;
typedef enum {
	CUDNN_DEFAULT_MATH = 0, CUDNN_TENSOR_OP_MATH = 1, CUDNN_FMA_MATH = 3
} cudnnMathType_t;
typedef enum { CUDNN_NON_DETERMINISTIC = 0, CUDNN_DETERMINISTIC = 1 } cudnnDeterminism_t;
typedef enum {
	CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM = 0,
	CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM = 1, CUDNN_CONVOLUTION_FWD_ALGO_FFT = 4
} cudnnConvolutionFwdAlgo_t;
typedef enum {
	CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 = 0, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1 = 1
} cudnnConvolutionBwdDataAlgo_t;
typedef enum {
	CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 = 0, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1 = 1,
	CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3 = 3
} cudnnConvolutionBwdFilterAlgo_t;
#define EMU_PERF(name, algo_t) typedef struct { \
	algo_t algo; cudnnStatus_t status; float time; size_t memory; \
	cudnnDeterminism_t determinism; cudnnMathType_t mathType; int reserved[3]; } name;
EMU_PERF(cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t)
EMU_PERF(cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t)
EMU_PERF(cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t)
#undef EMU_PERF

struct emu_dnn_tensor {
	int n, c, h, w;   /* NCHW (filters: K, C, R, S) */
	int set;          /* 1 once set */
};
struct emu_dnn_conv {
	int pad_h, pad_w, u, v, dil_h, dil_w;
	cudnnConvolutionMode_t mode;
	cudnnMathType_t math;
	int set;
};
typedef int *cudnnHandle_t;
typedef struct emu_dnn_tensor *cudnnTensorDescriptor_t;
typedef struct emu_dnn_tensor *cudnnFilterDescriptor_t;
typedef struct emu_dnn_conv *cudnnConvolutionDescriptor_t;

#define EMU_DNN_BYTES (128ULL << 20)   /* a cuDNN handle's share of the device */
#define EMU_DNN_HUGE ((size_t)1 << 40) /* the workspace of an algorithm nobody can run */

/* Calls that ran an algorithm Find listed as one to pass over. */
EMU_COUNTER(emu_cudnn_bad, dlt_emu_cudnn_bad_calls)

static inline size_t cudnnGetVersion(void) { return 91900; }
static inline const char *cudnnGetErrorString(cudnnStatus_t s)
{
	switch (s) {
	case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
	case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
	case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
	case CUDNN_STATUS_EXECUTION_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED";
	}
	return "CUDNN_STATUS_UNKNOWN";
}
static inline cudnnStatus_t cudnnCreate(cudnnHandle_t *h)
{
	emu_context();
	emu_used += EMU_DNN_BYTES;
	*h = &emu_handle;
	return CUDNN_STATUS_SUCCESS;
}
static inline cudnnStatus_t cudnnDestroy(cudnnHandle_t h)
{
	(void)h;
	emu_used -= EMU_DNN_BYTES;
	return CUDNN_STATUS_SUCCESS;
}
static inline cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t s)
{
	(void)h;
	(void)s;
	return CUDNN_STATUS_SUCCESS;
}
static inline cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *d)
{
	*d = (struct emu_dnn_tensor *)calloc(1, sizeof **d);
	return *d ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_EXECUTION_FAILED;
}
static inline cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d)
{
	free(d);
	return CUDNN_STATUS_SUCCESS;
}
static inline cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d,
						       cudnnTensorFormat_t f, cudnnDataType_t t,
						       int n, int c, int h, int w)
{
	if (f != CUDNN_TENSOR_NCHW || t != CUDNN_DATA_FLOAT || n < 1 || c < 1 || h < 1 || w < 1)
		return CUDNN_STATUS_BAD_PARAM;
	*d = (struct emu_dnn_tensor){ n, c, h, w, 1 };
	return CUDNN_STATUS_SUCCESS;
}
static inline cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *d)
{
	return cudnnCreateTensorDescriptor(d);
}
static inline cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d)
{
	return cudnnDestroyTensorDescriptor(d);
}
static inline cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t t,
						       cudnnTensorFormat_t f, int k, int c, int h,
						       int w)
{
	return cudnnSetTensor4dDescriptor(d, f, t, k, c, h, w);
}
static inline cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *d)
{
	*d = (struct emu_dnn_conv *)calloc(1, sizeof **d);
	return *d ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_EXECUTION_FAILED;
}
static inline cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d)
{
	free(d);
	return CUDNN_STATUS_SUCCESS;
}
static inline cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int ph,
							    int pw, int u, int v, int dh, int dw,
							    cudnnConvolutionMode_t m,
							    cudnnDataType_t t)
{
	if (ph < 0 || pw < 0 || u < 1 || v < 1 || dh < 1 || dw < 1 || t != CUDNN_DATA_FLOAT)
		return CUDNN_STATUS_BAD_PARAM;
	*d = (struct emu_dnn_conv){ ph, pw, u, v, dh, dw, m, CUDNN_DEFAULT_MATH, 1 };
	return CUDNN_STATUS_SUCCESS;
}
static inline cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d,
							cudnnMathType_t m)
{
	if (m != CUDNN_DEFAULT_MATH && m != CUDNN_TENSOR_OP_MATH && m != CUDNN_FMA_MATH)
		return CUDNN_STATUS_BAD_PARAM;
	d->math = m;
	return CUDNN_STATUS_SUCCESS;
}

/* The shape of a convolution of x by w into y under c, when the emulation
 * does it (see above) and the tensors agree; else NOT_SUPPORTED or
 * BAD_PARAM. */
static inline cudnnStatus_t emu_dnn_shape(const struct emu_dnn_tensor *x,
					  const struct emu_dnn_tensor *w,
					  const struct emu_dnn_conv *c,
					  const struct emu_dnn_tensor *y)
{
	if (!x->set || !w->set || !c->set || !y->set)
		return CUDNN_STATUS_BAD_PARAM;
	if (c->mode != CUDNN_CROSS_CORRELATION || c->u != 1 || c->v != 1 || c->dil_h != 1 ||
	    c->dil_w != 1)
		return CUDNN_STATUS_NOT_SUPPORTED;
	if (w->c != x->c || y->n != x->n || y->c != w->n ||
	    y->h != x->h + 2 * c->pad_h - w->h + 1 || y->w != x->w + 2 * c->pad_w - w->w + 1)
		return CUDNN_STATUS_BAD_PARAM;
	return CUDNN_STATUS_SUCCESS;
}

/* One image x (C x H x W) against its im2col matrix col (C k_h k_w x
 * Ho Wo, row-major), tap by tap: with gather, col = the pixel each tap
 * reads (0 in the padding); else each tap's col value is added to the
 * pixel it read (col2im: x += the image of col). */
static inline void emu_dnn_taps(float *col, float *x, const struct emu_dnn_tensor *xd,
				const struct emu_dnn_tensor *wd, const struct emu_dnn_conv *c,
				int ho, int wo, int gather)
{
	size_t r = 0;

	for (int ch = 0; ch < xd->c; ch++)
		for (int ky = 0; ky < wd->h; ky++)
			for (int kx = 0; kx < wd->w; kx++, r++)
				for (int oy = 0; oy < ho; oy++)
					for (int ox = 0; ox < wo; ox++) {
						int sy = oy + ky - c->pad_h, sx = ox + kx - c->pad_w;
						float *t = &col[r * (size_t)(ho * wo) + (size_t)(oy * wo + ox)];
						float *px = sy >= 0 && sy < xd->h && sx >= 0 && sx < xd->w ?
							&x[((size_t)ch * xd->h + sy) * xd->w + sx] : NULL;

						if (gather)
							*t = px ? *px : 0.0f;
						else if (px)
							*px += *t;
					}
}

enum emu_dnn_op { EMU_DNN_FWD, EMU_DNN_DATA, EMU_DNN_FILTER };

/* One product: y = alpha conv(x, w) + beta y (FWD), dx = alpha conv^T(w,
 * dy) + beta dx (DATA), dw = alpha corr(x, dy) + beta dw (FILTER), reading
 * the tensors now (at the node's run). Returns 0, or -1 when out of memory. */
static inline int emu_dnn_run(enum emu_dnn_op op, struct emu_dnn_tensor xd,
			      struct emu_dnn_tensor wd, struct emu_dnn_conv c,
			      struct emu_dnn_tensor yd, float alpha,
			      float beta, const float *x_in, const float *w_in, const float *dy_in,
			      float *out)
{
	const int ho = yd.h, wo = yd.w, F = wd.n;
	const size_t R = (size_t)wd.c * wd.h * wd.w, P = (size_t)ho * wo;
	const size_t xs = (size_t)xd.c * xd.h * xd.w, ys = (size_t)yd.c * P;
	float (*round)(float) = c.math == CUDNN_FMA_MATH ? NULL : emu_tf32;
	const float *x = NULL, *w = NULL, *dy = NULL;
	float *xc = NULL, *wc = NULL, *dyc = NULL, *col = NULL, *acc = NULL;
	int rc = -1;

	/* the inputs each product reads, rounded as the math mode says */
	if (op != EMU_DNN_DATA && !(x = xc = emu_copy(x_in, (size_t)xd.n * xs, round)))
		goto out;
	if (op != EMU_DNN_FILTER && !(w = wc = emu_copy(w_in, (size_t)F * R, round)))
		goto out;
	if (op != EMU_DNN_FWD && !(dy = dyc = emu_copy(dy_in, (size_t)yd.n * ys, round)))
		goto out;
	if (!(col = (float *)malloc(R * P * sizeof(float))))
		goto out;
	if (op == EMU_DNN_FILTER && !(acc = (float *)calloc((size_t)F * R, sizeof(float))))
		goto out;
	if (op == EMU_DNN_DATA && !(acc = (float *)malloc(xs * sizeof(float))))
		goto out;
	for (int i = 0; i < xd.n; i++) {
		switch (op) {
		case EMU_DNN_FWD:
			emu_dnn_taps(col, (float *)x + i * xs, &xd, &wd, &c, ho, wo, 1);
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, F, (int)P, (int)R, alpha,
				    w, (int)R, col, (int)P, beta, out + i * ys, (int)P);
			break;
		case EMU_DNN_DATA:
			cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)R, (int)P, F, 1.0f, w,
				    (int)R, dy + i * ys, (int)P, 0.0f, col, (int)P);
			memset(acc, 0, xs * sizeof(float));
			emu_dnn_taps(col, acc, &xd, &wd, &c, ho, wo, 0);
			for (size_t e = 0; e < xs; e++)
				out[i * xs + e] = alpha * acc[e] + (beta != 0.0f ? beta * out[i * xs + e] : 0.0f);
			break;
		case EMU_DNN_FILTER:
			emu_dnn_taps(col, (float *)x + i * xs, &xd, &wd, &c, ho, wo, 1);
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, F, (int)R, (int)P, 1.0f,
				    dy + i * ys, (int)P, col, (int)P, 1.0f, acc, (int)R);
			break;
		}
	}
	if (op == EMU_DNN_FILTER)
		for (size_t e = 0; e < (size_t)F * R; e++)
			out[e] = alpha * acc[e] + (beta != 0.0f ? beta * out[e] : 0.0f);
	rc = 0;
out:
	free(xc);
	free(wc);
	free(dyc);
	free(col);
	free(acc);
	return rc;
}

/* 1 when DLT_EMU_CUDNN_NONE refuses op at n rows. */
static inline int emu_dnn_refused(enum emu_dnn_op op, int n)
{
	const char *none = getenv("DLT_EMU_CUDNN_NONE");
	int rows = 0;

	if (!none)
		return 0;
	if (!strcmp(none, "1"))
		return 1;
	if (!strcmp(none, "filter"))
		return op == EMU_DNN_FILTER;
	return sscanf(none, "rows=%d", &rows) == 1 && rows == n;
}

/* A product queued as a node named name, its descriptors copied now. */
static inline cudnnStatus_t emu_dnn_queue(enum emu_dnn_op op, const struct emu_dnn_tensor *xd,
					  const struct emu_dnn_tensor *wd,
					  const struct emu_dnn_conv *c,
					  const struct emu_dnn_tensor *yd, const void *alpha,
					  const void *beta, const void *x, const void *w,
					  const void *dy, void *out, size_t ws_bytes, int bad,
					  const char *name)
{
	cudnnStatus_t st = emu_dnn_shape(xd, wd, c, yd);

	if (st != CUDNN_STATUS_SUCCESS)
		return st;
	if (bad == 2 && ws_bytes < EMU_DNN_HUGE)
		return CUDNN_STATUS_BAD_PARAM;   /* its workspace is not there */
	const char *none = getenv("DLT_EMU_CUDNN_NONE");

	if (emu_capture && none && !strcmp(none, "capture"))
		return CUDNN_STATUS_NOT_SUPPORTED;   /* a call a capture cannot take */
	emu_cudnn_bad += bad != 0;
	const struct emu_dnn_tensor X = *xd, W = *wd, Y = *yd;
	const struct emu_dnn_conv C = *c;
	const float al = *(const float *)alpha, be = *(const float *)beta;

	return emu_queue([=]() {
		return emu_dnn_run(op, X, W, C, Y, al, be, (const float *)x, (const float *)w,
				   (const float *)dy, (float *)out);
	}, name) < 0 ? CUDNN_STATUS_EXECUTION_FAILED : CUDNN_STATUS_SUCCESS;
}

/* What Find lists for each product (enum emu_dnn_op): the algorithm to
 * use, one that sums with atomics, one whose workspace nobody has. */
static const int emu_dnn_algos[3][3] = {
	{ CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
	  CUDNN_CONVOLUTION_FWD_ALGO_FFT },
	{ CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, 5 },
	{ CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0,
	  CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3 },
};

/* 0 for op's algorithm to use, run with the math Find found it with
 * (cd's), 1 for the one that sums with atomics, 2 for the one with a
 * workspace nobody has, 3 for the right one in the default math. */
static inline int emu_dnn_bad(enum emu_dnn_op op, int algo, const struct emu_dnn_conv *cd)
{
	if (algo == emu_dnn_algos[op][0])
		return cd->math == CUDNN_DEFAULT_MATH ? 3 : 0;
	return algo == emu_dnn_algos[op][1] ? 1 : 2;
}

/* Find calls so far (a test sees which products a pass plans). */
EMU_COUNTER(emu_cudnn_finds, dlt_emu_cudnn_finds)

/* Find: the product run once, now, and the algorithms listed (see above). */
template <typename R>
static inline cudnnStatus_t emu_dnn_find(enum emu_dnn_op op, const struct emu_dnn_tensor *xd,
					 const struct emu_dnn_tensor *wd,
					 const struct emu_dnn_conv *c,
					 const struct emu_dnn_tensor *yd, const void *x,
					 const void *w, const void *dy, void *out, int requested,
					 int *returned, R *res)
{
	const float one = 1.0f, zero = 0.0f;
	cudnnStatus_t st = emu_dnn_shape(xd, wd, c, yd);

	*returned = 0;
	emu_cudnn_finds++;
	if (st != CUDNN_STATUS_SUCCESS)
		return st;
	if (requested < 3)
		return CUDNN_STATUS_BAD_PARAM;
	const char *how = getenv("DLT_EMU_CUDNN_NONE");

	if (how && !strcmp(how, "find=unsupported"))
		return CUDNN_STATUS_NOT_SUPPORTED;
	if (how && !strcmp(how, "find=fault"))
		return CUDNN_STATUS_EXECUTION_FAILED;
	if (emu_capture || emu_wait() != cudaSuccess)
		return CUDNN_STATUS_EXECUTION_FAILED;
	if (emu_dnn_queue(op, xd, wd, c, yd, &one, &zero, x, w, dy, out, 0, 0, "cudnn find") !=
	    CUDNN_STATUS_SUCCESS || emu_wait() != cudaSuccess)
		return CUDNN_STATUS_EXECUTION_FAILED;
	const int refused = emu_dnn_refused(op, xd->n);
	const struct {
		int which;                 /* of emu_dnn_algos[op] */
		float time;                /* ms: the ones to pass over first */
		size_t memory;
		cudnnDeterminism_t det;
	} list[3] = { { 2, 0.01f, EMU_DNN_HUGE, CUDNN_DETERMINISTIC },
		      { 1, 0.02f, 0, CUDNN_NON_DETERMINISTIC },
		      { 0, 0.03f, 0, CUDNN_DETERMINISTIC } };
	for (int i = 0; i < 3; i++) {
		memset(&res[i], 0, sizeof res[i]);
		res[i].algo = (decltype(res[i].algo))emu_dnn_algos[op][list[i].which];
		res[i].status = list[i].which == 0 && refused ? CUDNN_STATUS_NOT_SUPPORTED :
				CUDNN_STATUS_SUCCESS;
		res[i].time = list[i].time;
		res[i].memory = list[i].memory;
		res[i].determinism = list[i].det;
		/* what a tensor-core algorithm says it ran in when the default
		 * math was asked (the caller runs it so: emu_dnn_bad) */
		res[i].mathType = c->math == CUDNN_DEFAULT_MATH ? CUDNN_TENSOR_OP_MATH : c->math;
	}
	*returned = 3;
	return CUDNN_STATUS_SUCCESS;
}

static inline cudnnStatus_t cudnnFindConvolutionForwardAlgorithmEx(
	cudnnHandle_t h, cudnnTensorDescriptor_t xd, const void *x, cudnnFilterDescriptor_t wd,
	const void *w, cudnnConvolutionDescriptor_t cd, cudnnTensorDescriptor_t yd, void *y,
	int requested, int *returned, cudnnConvolutionFwdAlgoPerf_t *res, void *ws, size_t wsn)
{
	(void)h;
	(void)ws;
	(void)wsn;
	return emu_dnn_find(EMU_DNN_FWD, xd, wd, cd, yd, x, w, NULL, y, requested, returned, res);
}
static inline cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithmEx(
	cudnnHandle_t h, cudnnFilterDescriptor_t wd, const void *w, cudnnTensorDescriptor_t dyd,
	const void *dy, cudnnConvolutionDescriptor_t cd, cudnnTensorDescriptor_t dxd, void *dx,
	int requested, int *returned, cudnnConvolutionBwdDataAlgoPerf_t *res, void *ws, size_t wsn)
{
	(void)h;
	(void)ws;
	(void)wsn;
	return emu_dnn_find(EMU_DNN_DATA, dxd, wd, cd, dyd, NULL, w, dy, dx, requested, returned, res);
}
static inline cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithmEx(
	cudnnHandle_t h, cudnnTensorDescriptor_t xd, const void *x, cudnnTensorDescriptor_t dyd,
	const void *dy, cudnnConvolutionDescriptor_t cd, cudnnFilterDescriptor_t dwd, void *dw,
	int requested, int *returned, cudnnConvolutionBwdFilterAlgoPerf_t *res, void *ws, size_t wsn)
{
	(void)h;
	(void)ws;
	(void)wsn;
	return emu_dnn_find(EMU_DNN_FILTER, xd, dwd, cd, dyd, x, NULL, dy, dw, requested, returned,
			    res);
}
static inline cudnnStatus_t cudnnConvolutionForward(
	cudnnHandle_t h, const void *alpha, cudnnTensorDescriptor_t xd, const void *x,
	cudnnFilterDescriptor_t wd, const void *w, cudnnConvolutionDescriptor_t cd,
	cudnnConvolutionFwdAlgo_t algo, void *ws, size_t wsn, const void *beta,
	cudnnTensorDescriptor_t yd, void *y)
{
	(void)h;
	(void)ws;
	return emu_dnn_queue(EMU_DNN_FWD, xd, wd, cd, yd, alpha, beta, x, w, NULL, y, wsn,
			     emu_dnn_bad(EMU_DNN_FWD, algo, cd), "cudnnConvolutionForward");
}
static inline cudnnStatus_t cudnnConvolutionBackwardData(
	cudnnHandle_t h, const void *alpha, cudnnFilterDescriptor_t wd, const void *w,
	cudnnTensorDescriptor_t dyd, const void *dy, cudnnConvolutionDescriptor_t cd,
	cudnnConvolutionBwdDataAlgo_t algo, void *ws, size_t wsn, const void *beta,
	cudnnTensorDescriptor_t dxd, void *dx)
{
	(void)h;
	(void)ws;
	return emu_dnn_queue(EMU_DNN_DATA, dxd, wd, cd, dyd, alpha, beta, NULL, w, dy, dx, wsn,
			     emu_dnn_bad(EMU_DNN_DATA, algo, cd), "cudnnConvolutionBackwardData");
}
static inline cudnnStatus_t cudnnConvolutionBackwardFilter(
	cudnnHandle_t h, const void *alpha, cudnnTensorDescriptor_t xd, const void *x,
	cudnnTensorDescriptor_t dyd, const void *dy, cudnnConvolutionDescriptor_t cd,
	cudnnConvolutionBwdFilterAlgo_t algo, void *ws, size_t wsn, const void *beta,
	cudnnFilterDescriptor_t dwd, void *dw)
{
	(void)h;
	(void)ws;
	return emu_dnn_queue(EMU_DNN_FILTER, xd, dwd, cd, dyd, alpha, beta, x, NULL, dy, dw, wsn,
			     emu_dnn_bad(EMU_DNN_FILTER, algo, cd), "cudnnConvolutionBackwardFilter");
}

/* ---- NCCL: one rank, or MPI_COMM_WORLD when MPI is running ---- */

typedef enum { ncclSuccess = 0, ncclInvalidArgument = 4 } ncclResult_t;
typedef enum { ncclFloat = 7 } ncclDataType_t;
typedef enum { ncclSum = 0 } ncclRedOp_t;
typedef int *ncclComm_t;
typedef struct {
	char internal[128];
} ncclUniqueId;

static inline const char *ncclGetErrorString(ncclResult_t r)
{
	return r == ncclSuccess ? "no error" : "invalid argument";
}
static inline ncclResult_t ncclGetUniqueId(ncclUniqueId *u)
{
	memset(u, 0x5a, sizeof *u);
	return ncclSuccess;
}

/* 1 when MPI is initialised: then the communicator is MPI_COMM_WORLD. */
static inline int emu_mpi(void)
{
	int up = 0;

	MPI_Initialized(&up);
	return up;
}

/* NCCL prints its version line to stdout at a communicator's first init
 * whenever NCCL_DEBUG is set (VERSION, WARN, INFO...): so does the emulation, so that a
 * program whose stdout carries data (dlh-calib's figures) meets it here too. */
static inline void emu_nccl_says_its_version(void)
{
	static int said;
	const char *d = getenv("NCCL_DEBUG");

	if (!said && d && *d) {
		said = 1;
		printf("NCCL version 2.28.3+host emulation\n");
		fflush(stdout);
	}
}

static inline ncclResult_t ncclCommInitRank(ncclComm_t *c, int n, ncclUniqueId u, int r)
{
	int size = 1, rank = 0;

	for (size_t i = 0; i < sizeof u.internal; i++)
		if (u.internal[i] != 0x5a)
			return ncclInvalidArgument;   /* not an id of ncclGetUniqueId */
	if (emu_mpi()) {
		MPI_Comm_size(MPI_COMM_WORLD, &size);
		MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	}
	if (n != size || r != rank)
		return ncclInvalidArgument;
	emu_nccl_says_its_version();
	emu_used += EMU_NCCL_BYTES;
	*c = &emu_handle;
	return ncclSuccess;
}
/* ndev communicators of one process, one a device (devlist NULL: 0..ndev-1);
 * the emulated memory is device 0's (every device's is the same). */
static inline ncclResult_t ncclCommInitAll(ncclComm_t *c, int ndev, const int *devlist)
{
	(void)devlist;
	if (ndev < 1)
		return ncclInvalidArgument;
	for (int i = 0; i < ndev; i++)
		c[i] = &emu_handle;
	emu_nccl_says_its_version();
	emu_used += EMU_NCCL_BYTES;
	return ncclSuccess;
}
static inline ncclResult_t ncclCommDestroy(ncclComm_t c) { (void)c; return ncclSuccess; }
static inline ncclResult_t ncclGroupStart(void) { return ncclSuccess; }
static inline ncclResult_t ncclGroupEnd(void) { return ncclSuccess; }
/* The sum over MPI_COMM_WORLD's ranks: now, or at replay (every rank must
 * replay its graph, as every rank must launch a captured NCCL call). */
static inline int emu_allreduce(const void *s, void *d, size_t n)
{
	int size = 1;

	if (emu_mpi() && MPI_Comm_size(MPI_COMM_WORLD, &size) == MPI_SUCCESS && size > 1)
		return MPI_Allreduce(s == d ? MPI_IN_PLACE : s, d, (int)n, MPI_FLOAT, MPI_SUM,
				     MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -1;
	/* one rank (or one process's devices, ncclCommInitAll): the sum is
	 * the data itself, read and written once as a real one moves it, so
	 * that its time grows with the bytes (calib.cu fits alpha-beta) */
	volatile float *v = (volatile float *)d;
	for (size_t i = 0; i < n; i++)
		v[i] = ((const float *)s)[i];
	return 0;
}
static inline ncclResult_t ncclAllReduce(const void *s, void *d, size_t n, ncclDataType_t t,
					 ncclRedOp_t op, ncclComm_t c, cudaStream_t st)
{
	(void)t;
	(void)op;
	(void)c;
	(void)st;
	return emu_queue([=]() { return emu_allreduce(s, d, n); }, "ncclAllReduce") < 0 ?
	       ncclInvalidArgument
								 : ncclSuccess;
}

#endif
