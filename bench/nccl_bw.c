/* nccl_bw.c - ncclAllReduce bandwidth over MPI ranks, one GPU each, 1 MB .. 256 MB
 *
 *   mpirun -np N build/bench-nccl-bw [--iters N] [--link-peak GBPS] [--max-mb MB]
 *
 * The NCCL communicator is bootstrapped as dlh-train does it: rank 0 makes
 * the unique id, MPI_Bcast hands it to the others. For each size (float
 * sum) it times ncclAllReduce in place (what the trainer runs) and out of
 * place with CUDA events over --iters calls after warm-up; the slowest
 * rank's time counts. Bandwidths follow nccl-tests (PERFORMANCE.md):
 * algbw = bytes / time, busbw = algbw * 2 (n - 1) / n, which is what one
 * link carries. Peaks: the GPU memory's (memory clock x bus width, from
 * the CUDA attributes) and a device-to-device cudaMemcpy of the same size;
 * with several ranks busbw is bounded by the link between GPUs, given with
 * --link-peak (H100 SXM NVLink 4: 450 GB/s per direction). With one rank
 * the out-of-place allreduce is a copy, so its algbw is compared with the
 * cudaMemcpy and half the memory peak (each byte read once, written once).
 * Exits 77 with "no NVIDIA GPU: ..." when there is none. */
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BW_MB (1024.0 * 1024.0)   /* bytes per MB in the size column */
#define BW_EXIT_SKIP 77           /* no GPU: the test runners' skip status */
#define BW_WARMUP 5               /* untimed calls per size */

static int g_rank;   /* for die() */

/* Prints the message with the rank and aborts every rank. */
static void die(const char *what, const char *why)
{
	fprintf(stderr, "bench-nccl-bw: rank %d: %s: %s\n", g_rank, what, why);
	MPI_Abort(MPI_COMM_WORLD, 1);
	exit(1);
}

#define CUDA(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) \
	die(#call, cudaGetErrorString(e_)); } while (0)
#define NCCL(call) do { ncclResult_t r_ = (call); if (r_ != ncclSuccess) \
	die(#call, ncclGetErrorString(r_)); } while (0)

/* Returns the slowest rank's mean seconds per call of iters allreduces
 * of n floats (in place when dst == src), after BW_WARMUP untimed ones. */
static double time_allreduce(ncclComm_t comm, cudaStream_t s, float *src, float *dst, size_t n,
			     int iters, cudaEvent_t a, cudaEvent_t b)
{
	float ms;
	double t;

	for (int i = 0; i < BW_WARMUP; i++)
		NCCL(ncclAllReduce(src, dst, n, ncclFloat, ncclSum, comm, s));
	CUDA(cudaStreamSynchronize(s));
	MPI_Barrier(MPI_COMM_WORLD);
	CUDA(cudaEventRecord(a, s));
	for (int i = 0; i < iters; i++)
		NCCL(ncclAllReduce(src, dst, n, ncclFloat, ncclSum, comm, s));
	CUDA(cudaEventRecord(b, s));
	CUDA(cudaEventSynchronize(b));
	CUDA(cudaEventElapsedTime(&ms, a, b));
	t = 1e-3 * ms / iters;
	MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	return t;
}

/* Returns the mean seconds of a device-to-device copy of bytes. */
static double time_copy(cudaStream_t s, void *dst, const void *src, size_t bytes, int iters,
			cudaEvent_t a, cudaEvent_t b)
{
	float ms;

	for (int i = 0; i < BW_WARMUP; i++)
		CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
	CUDA(cudaEventRecord(a, s));
	for (int i = 0; i < iters; i++)
		CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
	CUDA(cudaEventRecord(b, s));
	CUDA(cudaEventSynchronize(b));
	CUDA(cudaEventElapsedTime(&ms, a, b));
	return 1e-3 * ms / iters;
}

int main(int argc, char **argv)
{
	int ranks, local, ndev = 0, iters = 20, max_mb = 256, clock_khz = 0, bus_bits = 0;
	double link_peak = 0.0, hbm_peak;
	ncclUniqueId id;
	ncclComm_t comm;
	cudaStream_t s;
	cudaEvent_t a, b;
	struct cudaDeviceProp prop;
	float *src, *dst;
	MPI_Comm node;
	cudaError_t e;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
	MPI_Comm_size(MPI_COMM_WORLD, &ranks);
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--iters"))
			iters = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--link-peak"))
			link_peak = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "--max-mb"))
			max_mb = atoi(argv[i + 1]);
	}
	if (iters < 1 || max_mb < 1)
		die("arguments", "--iters and --max-mb must be positive");
	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_rank, MPI_INFO_NULL, &node);
	MPI_Comm_rank(node, &local);
	MPI_Comm_free(&node);
	e = cudaGetDeviceCount(&ndev);
	if (e != cudaSuccess || ndev < 1) {
		if (g_rank == 0)
			printf("no NVIDIA GPU: %s\n", e != cudaSuccess ? cudaGetErrorString(e) :
			       "the CUDA driver sees no device");
		MPI_Finalize();
		return BW_EXIT_SKIP;
	}
	if (local >= ndev)
		die("placement", "more ranks on this node than GPUs (NCCL needs one GPU per rank)");
	CUDA(cudaSetDevice(local));
	CUDA(cudaGetDeviceProperties(&prop, local));
	CUDA(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, local));
	CUDA(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, local));
	hbm_peak = 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;   /* GB/s, double data rate */
	if (g_rank == 0)
		NCCL(ncclGetUniqueId(&id));
	MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
	NCCL(ncclCommInitRank(&comm, ranks, id, g_rank));
	CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CUDA(cudaEventCreate(&a));
	CUDA(cudaEventCreate(&b));
	size_t maxn = (size_t)max_mb * (size_t)BW_MB / sizeof(float);

	CUDA(cudaMalloc((void **)&src, maxn * sizeof(float)));
	CUDA(cudaMalloc((void **)&dst, maxn * sizeof(float)));
	CUDA(cudaMemset(src, 0, maxn * sizeof(float)));
	CUDA(cudaMemset(dst, 0, maxn * sizeof(float)));

	if (g_rank == 0) {
		int version = 0;

		ncclGetVersion(&version);
		printf("ncclAllReduce, float sum, %d rank%s, NCCL %d, %s (%d SMs)\n", ranks,
		       ranks == 1 ? "" : "s", version, prop.name, prop.multiProcessorCount);
		printf("GPU memory peak %.0f GB/s (%d MHz x %d bit x 2); link peak %s\n",
		       hbm_peak, clock_khz / 1000, bus_bits,
		       link_peak > 0 ? "given by --link-peak" : "not given (--link-peak GBPS)");
		if (link_peak > 0)
			printf("link peak %.0f GB/s\n", link_peak);
		printf("%8s %11s %11s %11s %11s %11s %12s %9s\n", "MB", "in-place us", "algbw GB/s",
		       "busbw GB/s", "oop us", "oop busbw", "memcpy GB/s", "% peak");
	}
	for (int mb = 1; mb <= max_mb; mb *= 2) {
		size_t n = (size_t)mb * (size_t)BW_MB / sizeof(float), bytes = n * sizeof(float);
		int it = mb >= 64 ? (iters > 10 ? 10 : iters) : iters;
		double tin = time_allreduce(comm, s, src, src, n, it, a, b);
		double toop = time_allreduce(comm, s, src, dst, n, it, a, b);
		double tcp = time_copy(s, dst, src, bytes, it, a, b);
		double factor = ranks > 1 ? 2.0 * (ranks - 1) / ranks : 0.0;
		double alg = bytes / tin / 1e9, bus = alg * factor;
		double oop_bus = bytes / toop / 1e9 * factor, copy = bytes / tcp / 1e9;
		/* several ranks: in-place busbw against the link; one rank: the
		 * out-of-place copy against half the memory peak */
		double pct = ranks > 1 ? (link_peak > 0 ? 100.0 * bus / link_peak : 0.0) :
			100.0 * (bytes / toop / 1e9) / (hbm_peak / 2.0);

		if (g_rank == 0)
			printf("%8d %11.1f %11.1f %11.1f %11.1f %11.1f %12.1f %8.1f%%\n", mb,
			       tin * 1e6, alg, bus, toop * 1e6, oop_bus, copy, pct);
	}
	if (g_rank == 0 && ranks == 1)
		printf("one rank: busbw is 0 by definition (no link crossed); %% peak is the "
		       "out-of-place copy's bytes/s against half the memory peak\n");
	fflush(stdout);
	CUDA(cudaFree(src));
	CUDA(cudaFree(dst));
	NCCL(ncclCommDestroy(comm));
	CUDA(cudaStreamDestroy(s));
	MPI_Finalize();
	return 0;
}
