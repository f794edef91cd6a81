/* main.c - dlh-calib: the microbenchmarks behind STATE/calibration (an MPI
 * program; engine/plan/calib.c runs it through the launch backend and reads
 * what it writes)
 *
 *   dlh-calib --phase single [--dir DIR] [--images P --labels P] [--out F]  (1 rank)
 *   dlh-calib --phase all [--out F]                                          (all ranks)
 *   dlh-calib --phase link [--out F]                  (2 ranks, each on its own node)
 *   dlh-calib --phase gpu --type NAME [--gpus N] [--out F]  (1 rank; the GPUs of type
 *                                                  NAME as CUDA devices 0..N-1)
 *
 * single times one core: sgemm over the CPU grid (the first
 * DLH_CALIB_CPU_GEMM_N of DLH_CALIB_GEMM_DIMS; untransposed, and with B or
 * A transposed, as the trainer calls them), copy
 * bandwidth over DLH_CALIB_BW_SIZES, the trainer's own ReLU backward and
 * dropout per element, its batch gather, its IDX loader, its weight
 * initialisation, atomic file writes and a checkpoint written by its own
 * code. all times what the ranks of one node
 * do together: barrier, allreduce (alpha-beta fit), copy bandwidth and
 * sgemm with every core busy. link times an allreduce between two nodes
 * (net_alpha, net_beta: the link's latency and seconds per byte). gpu times
 * one GPU through the trainer's CUDA backend (dlt_gpu_calibrate, gpu.h):
 * cuBLAS over the same grid, kernel launch and synchronisation, elementwise
 * bandwidth, host-to-device copies, the device memory of the CUDA context,
 * cuBLAS and NCCL, and with N >= 2 the allreduce among them; its figures
 * are the type NAME's (TYPE.gpu=1). All print key=value lines (the cache's
 * keys, see calib.h) and the wall-clock moments the parent needs to time
 * mpirun's launch and exit: to --out F when given (rank 0 writes it through
 * its own stream, fig: what mpirun and the libraries print to stdout, such
 * as NCCL's version line, stays out of the figures), else to stdout. */
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "engine/plan/calib.h"
#include "engine/train/ckpt.h"
#include "engine/train/gpu.h"
#include "engine/train/idx.h"
#include "engine/train/layers.h"
#include "engine/train/metrics.h"
#include "engine/train/rng.h"
#include "engine/train/net.h"
#include "engine/train/optim.h"
#include "engine/train/shm.h"
#include "engine/util/util.h"

#define GEMM_MAX_MNK (1L << 28)   /* larger shapes are not timed: they run at peak */
#define GEMM_BATCH_S 0.001        /* seconds of calls per timed batch */
#define GEMM_BATCHES 3            /* best batch of these */
#define GEMM_POOL (32L << 20)     /* floats the calls cycle through: operands in
				     the first half, products in the second (64
				     MiB each: past L2, and past 2 sets of the
				     largest shape timed) */
#define GEMM_OUT_POOL (2L << 20)  /* floats the products cycle through (8 MiB):
				     past L2, not past L3, as a layer's output
				     last written a step before */
#define GEMM_ALL_POOL (256L << 10)   /* floats of gemm_all's pool (1 MiB: in L2) */
#define BW_BATCH_BYTES (64L << 20) /* bytes copied per timed batch */
#define BW_BATCHES 5
#define BW_BLOCK 8                /* DLT_LAYER_BLOCK: elementwise loops' unit */
#define AR_SIZES 6                /* allreduce sizes timed, 8 B to 4 MiB */
#define BARRIERS 2000             /* barriers averaged */
#define DECODE_IMAGES 10000       /* images the loader decodes */
#define SYNTH_IMAGES 10000        /* images of a synthesized IDX pair */
#define WRITE_BIG (32L << 20)     /* bytes of the large atomic write: a checkpoint's
				     size (8 MiB still fitted the disk's cache and
				     wrote 4x faster than a 40 MB checkpoint) */
#define ELEM_N (1L << 16)         /* elements of the elementwise layer passes timed
				     (256 KiB a buffer: in L2, as a layer's) */
#define ELEM_REPS 40              /* passes, the best of them */
#define GATHER_IMAGES 20000       /* rows of the synthetic data set gathered from
				     (63 MB of floats: past L2, as a shard is) */
#define GATHER_BATCH 128          /* rows a gather takes */
#define GATHER_CALLS 200          /* gathers timed */
#define METRICS_LINES 2000        /* metrics.csv lines appended */

static const int gemm_dims[DLH_CALIB_GEMM_N] = DLH_CALIB_GEMM_DIMS;
#define CPU_N DLH_CALIB_CPU_GEMM_N   /* the CPU's grid: the first CPU_N of gemm_dims */
static const long bw_sizes[DLH_CALIB_BW_N] = DLH_CALIB_BW_SIZES;
static const long opt_sizes[DLH_CALIB_OPT_N] = DLH_CALIB_OPT_SIZES;

/* Prints a message and aborts every rank. */
/* The files this process made to measure with, removed however it ends
 * (a failure for lack of room left 2 MB in the state dir each mount). */
#define TEMPS_MAX 8
static char temps[TEMPS_MAX][4096];

/* Records path as a file of ours to remove at the end. */
static void temp_add(const char *path)
{
	for (int i = 0; i < TEMPS_MAX; i++)
		if (!temps[i][0]) {
			snprintf(temps[i], sizeof temps[i], "%s", path);
			return;
		}
}

/* Removes path and forgets it. */
static void temp_remove(const char *path)
{
	unlink(path);
	for (int i = 0; i < TEMPS_MAX; i++)
		if (!strcmp(temps[i], path))
			temps[i][0] = '\0';
}

/* where the figures go: stdout, or --out's file (main) */
static FILE *fig;

static _Noreturn void die(const char *msg, const char *what)
{
	fprintf(stderr, "dlh-calib: %s%s%s\n", msg, what ? ": " : "", what ? what : "");
	for (int i = 0; i < TEMPS_MAX; i++)
		if (temps[i][0])
			unlink(temps[i]);
	MPI_Abort(MPI_COMM_WORLD, 1);
	exit(1);
}

/* malloc that dies. */
static void *xmalloc(size_t n)
{
	void *p = malloc(n);

	if (!p)
		die("out of memory", NULL);
	return p;
}

/* Fills n floats with small values (no denormals, no NaN). */
static void fill(float *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (float)((i * 7919u) % 1000u) * 1e-3f - 0.5f;
}

/* Best FLOP/s of m x n x k sgemm (row-major, ta and tb) over a few
 * batches of calls (the best batch is the one least disturbed by other
 * work on a shared machine). Each call takes the next operands of a pool
 * of pool floats, so that they come from far caches as in a training
 * step, where a layer's weights and inputs were last touched before the
 * other layers' work went through the caches: with the same operands
 * every call, small shapes run 25-40% faster than they do in dlh-train.
 * The products go to the second half of the pool, never read as an
 * operand: products fed back as operands shrink call after call (sums of
 * a few products of numbers below 1) into subnormals, which run 10-100x
 * slower, and the grid measured the pool's history, not the shape. */
static double gemm_rate_t(int m, int n, int k, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb,
			  float *pool, size_t pool_floats)
{
	const size_t half = pool_floats / 2, per = (size_t)m * k + (size_t)k * n;
	const size_t sets = half / per > 0 ? half / per : 1;
	const size_t cfl = half < GEMM_OUT_POOL ? half : GEMM_OUT_POOL;
	const size_t csets = cfl / ((size_t)m * n) > 0 ? cfl / ((size_t)m * n) : 1;
	const int lda = ta == CblasNoTrans ? k : m, ldb = tb == CblasNoTrans ? n : k;
	double best = INFINITY;
	size_t i = 0;

	for (int r = 0; r < GEMM_BATCHES + 1; r++) {   /* the first batch warms */
		double t0 = dlh_mono(), t;
		long calls = 0;

		do {
			float *a = pool + per * (i % sets), *b = a + (size_t)m * k;
			float *c = pool + half + (size_t)m * n * (i++ % csets);

			cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n);
			calls++;
			t = dlh_mono() - t0;
		} while (t < GEMM_BATCH_S);
		if (r && t / (double)calls < best)
			best = t / (double)calls;
	}
	return 2.0 * m * n * k / best;
}

/* gemm_rate_t without transposes: the grid's case. */
static double gemm_rate(int m, int n, int k, float *pool, size_t pool_floats)
{
	return gemm_rate_t(m, n, k, CblasNoTrans, CblasNoTrans, pool, pool_floats);
}

/* The CPU grid (the first DLH_CALIB_CPU_GEMM_N of DLH_CALIB_GEMM_DIMS) in
 * form (ta, tb) into g; shapes over GEMM_MAX_MNK take the best of their
 * smaller neighbours (large shapes saturate). Returns the best rate seen. */
static double gemm_grid_form(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, float *pool,
			     double g[CPU_N][CPU_N][CPU_N])
{
	double peak = 0.0;

	for (int i = 0; i < CPU_N; i++)
		for (int j = 0; j < CPU_N; j++)
			for (int l = 0; l < CPU_N; l++) {
				long mnk = (long)gemm_dims[i] * gemm_dims[j] * gemm_dims[l];

				if (mnk <= GEMM_MAX_MNK) {
					g[i][j][l] = gemm_rate_t(gemm_dims[i], gemm_dims[j], gemm_dims[l],
								 ta, tb, pool, GEMM_POOL);
				} else {   /* i, j, l ascend: the neighbours are done */
					double v = i ? g[i - 1][j][l] : 0.0;

					v = j && g[i][j - 1][l] > v ? g[i][j - 1][l] : v;
					g[i][j][l] = l && g[i][j][l - 1] > v ? g[i][j][l - 1] : v;
				}
				if (g[i][j][l] > peak)
					peak = g[i][j][l];
			}
	return peak;
}

/* Prints grid g as TYPE.gemmFORM_MxN=K... lines (form "" untransposed). */
static void print_grid(const char *form,
		       double g[CPU_N][CPU_N][CPU_N])
{
	for (int i = 0; i < CPU_N; i++)
		for (int j = 0; j < CPU_N; j++) {
			fprintf(fig, "cpu.gemm%s_%dx%d=", form, gemm_dims[i], gemm_dims[j]);
			for (int l = 0; l < CPU_N; l++)
				fprintf(fig, "%s%.4g", l ? " " : "", g[i][j][l]);
			fprintf(fig, "\n");
		}
}

/* The mean over the inner 3 x 3 x 3 points of the grid of a / b. */
static double inner_ratio(double a[CPU_N][CPU_N][CPU_N], double b[CPU_N][CPU_N][CPU_N])
{
	double sum = 0.0;
	int n = 0;

	for (int i = 1; i < CPU_N - 1; i++)
		for (int j = 1; j < CPU_N - 1; j++)
			for (int l = 1; l < CPU_N - 1; l++, n++)
				sum += a[i][j][l] / b[i][j][l];
	return sum / n;
}

/* Times sgemm in the three forms dlh-train calls most over the whole
 * grid: untransposed, B transposed (nt) and A transposed (tn); prints
 * their grids, the mean speed of each transposed form over the
 * untransposed (TYPE.gemm_nt, _tn: for caches read without the grids)
 * and of both transposed (tt: only the dX of a big dense layer at a
 * small batch uses it, over the inner 3 x 3 x 3 points). Returns the best
 * rate seen. */
static double gemm_grids(void)
{
	static const char *names[DLH_CALIB_GEMM_TR] = DLH_CALIB_GEMM_TR_NAMES;
	static const CBLAS_TRANSPOSE ta[DLH_CALIB_GEMM_TR] = { CblasNoTrans, CblasTrans };
	static const CBLAS_TRANSPOSE tb[DLH_CALIB_GEMM_TR] = { CblasTrans, CblasNoTrans };
	static double g[CPU_N][CPU_N][CPU_N];
	static double gt[DLH_CALIB_GEMM_TR][CPU_N][CPU_N][CPU_N];
	float *pool = xmalloc(GEMM_POOL * sizeof *pool);
	double peak, tt = 0.0;
	int n = 0;

	fill(pool, GEMM_POOL);
	peak = gemm_grid_form(CblasNoTrans, CblasNoTrans, pool, g);
	print_grid("", g);
	for (int t = 0; t < DLH_CALIB_GEMM_TR; t++) {
		gemm_grid_form(ta[t], tb[t], pool, gt[t]);
		print_grid(names[t], gt[t]);
	}
	for (int i = 1; i < CPU_N - 1; i++)
		for (int j = 1; j < CPU_N - 1; j++)
			for (int l = 1; l < CPU_N - 1; l++, n++)
				tt += gemm_rate_t(gemm_dims[i], gemm_dims[j], gemm_dims[l], CblasTrans,
						  CblasTrans, pool, GEMM_POOL) / g[i][j][l];
	fprintf(fig, "cpu.gemm_nt=%.4g\ncpu.gemm_tn=%.4g\ncpu.gemm_tt=%.4g\n", inner_ratio(gt[0], g),
	       inner_ratio(gt[1], g), tt / n);
	free(pool);
	return peak;
}

/* Best seconds per element of layer kind's pass (backward when bwd) over
 * ELEM_N elements of random sign, through the trainer's own layer code:
 * ReLU backward branches on each element's sign and dropout hashes each
 * element's mask bit, so neither runs at memory speed. */
static double elem_pass_s(enum dlt_layer_kind kind, float p, int bwd)
{
	struct dlt_layer l;
	struct dlt_layer_ctx ctx = { .train = 1, .seed = 1, .step = 1 };
	char err[256];
	float *x = xmalloc(ELEM_N * sizeof *x), *y = xmalloc(ELEM_N * sizeof *y);
	float *dy = xmalloc(ELEM_N * sizeof *dy), *dx = xmalloc(ELEM_N * sizeof *dx);
	struct dlt_rng r;
	double best = INFINITY;

	if (dlt_layer_make(&l, kind, (struct dlt_shape){ (int)ELEM_N, 1, 1 }, 0, 0, p, err,
			   sizeof err) < 0)
		die(err, NULL);
	dlt_rng_seed(&r, 7, 0, 0);
	for (long i = 0; i < ELEM_N; i++) {
		x[i] = (float)dlt_rng_normal(&r);   /* half positive, in no order */
		y[i] = x[i] > 0.0f ? x[i] : 0.0f;
		dy[i] = (float)dlt_rng_normal(&r);
	}
	for (int rep = 0; rep <= ELEM_REPS; rep++) {
		double t0 = dlh_mono(), t;

		ctx.step = (uint64_t)rep + 1;   /* a new dropout mask each pass */
		if (bwd)
			l.ops->backward(&l, &ctx, NULL, x, y, dy, dx, NULL, 1);
		else
			l.ops->forward(&l, &ctx, NULL, x, dx, 1);
		t = dlh_mono() - t0;
		if (rep && t < best)   /* the first warms */
			best = t;
	}
	free(x);
	free(y);
	free(dy);
	free(dx);
	return best / (double)ELEM_N;
}

/* Bytes/s of the trainer's batch gather (dlt_dataset_gather): rows of a
 * data set past L2 taken in the order of the trainer's permutation, the
 * best of two rounds of GATHER_CALLS batches. Rows from random places
 * stream 2-3x slower than a copy of the same bytes. */
static double gather_bw(void)
{
	struct dlt_dataset d = { .n = GATHER_IMAGES, .dim = 784 };
	uint32_t *perm = xmalloc(GATHER_IMAGES * sizeof *perm);
	float *x = xmalloc((size_t)GATHER_BATCH * 784 * sizeof *x);
	uint8_t *y = xmalloc(GATHER_BATCH);
	struct dlt_rng r;
	double best = INFINITY;

	d.x = xmalloc((size_t)GATHER_IMAGES * 784 * sizeof *d.x);
	d.y = xmalloc(GATHER_IMAGES);
	fill(d.x, (size_t)GATHER_IMAGES * 784);
	memset(d.y, 1, GATHER_IMAGES);
	dlt_rng_seed(&r, 1, 0, 0);
	dlt_rng_permutation(&r, perm, GATHER_IMAGES);
	for (int round = 0; round < 2; round++) {
		double t0 = dlh_mono();

		for (int i = 0; i < GATHER_CALLS; i++)
			dlt_dataset_gather(&d, perm + (size_t)(i * GATHER_BATCH) % (GATHER_IMAGES -
					   GATHER_BATCH), GATHER_BATCH, x, y);
		if (dlh_mono() - t0 < best)
			best = dlh_mono() - t0;
	}
	free(perm);
	free(x);
	free(y);
	free(d.x);
	free(d.y);
	return 2.0 * GATHER_CALLS * GATHER_BATCH * 784 * sizeof(float) / best;
}

/* Best seconds of one update of n parameters by the trainer's optimizer. */
static double optim_s(enum dlt_optim_kind kind, long n)
{
	struct dlt_optim o = { .kind = kind, .momentum = 0.9f, .beta1 = 0.9f, .beta2 = 0.999f,
			       .eps = 1e-8f };
	int ns = dlt_optim_nstate(kind);
	float *w = xmalloc((size_t)n * sizeof *w), *g = xmalloc((size_t)n * sizeof *g);
	float *st = xmalloc((size_t)n * ns * sizeof *st);
	double best = INFINITY;

	fill(w, (size_t)n);
	fill(g, (size_t)n);
	memset(st, 0, (size_t)n * ns * sizeof *st);
	for (int r = 0; r < 6; r++) {
		double t0 = dlh_mono();

		dlt_optim_step(&o, 0.01f, (unsigned long)r + 1, w, st, g, (size_t)n);
		if (r && dlh_mono() - t0 < best)   /* the first pages in */
			best = dlh_mono() - t0;
	}
	free(w);
	free(g);
	free(st);
	return best;
}

/* y[i] = s x[i] for i < n, written as dlh-train writes its elementwise
 * loops (layers.c): the first n - n % BW_BLOCK iterations in a loop GCC
 * -O2 vectorizes, then the rest. A plain loop stays scalar at -O2 and
 * measured the speed of one multiply a cycle, not of the caches: 3x
 * slower than the trainer's passes over L1 and L2. */
static void scale_copy(float *restrict y, const float *restrict x, size_t n, float s)
{
	size_t nb = n & ~(size_t)(BW_BLOCK - 1), i;

	for (i = 0; i < nb; i++)
		y[i] = s * x[i];
	for (; i < n; i++)
		y[i] = s * x[i];
}

/* scale_copy, called as dlh-train calls its layers: through a pointer.
 * Inlined into copy_bw, GCC drops what restrict told it and the loop is
 * scalar again; volatile keeps the call a call. */
static void (*volatile scale_copy_fn)(float *restrict, const float *restrict, size_t,
				      float) = scale_copy;

/* Best bytes/s (read + write) of y = s x over two arrays of bytes/2 each. */
static double copy_bw(long bytes)
{
	size_t n = (size_t)bytes / 2 / sizeof(float);
	float *x = xmalloc(n * sizeof *x), *y = xmalloc(n * sizeof *y);
	long passes = BW_BATCH_BYTES / bytes > 0 ? BW_BATCH_BYTES / bytes : 1;
	double best = INFINITY;
	volatile float sink = 0.0f;

	fill(x, n);
	fill(y, n);
	for (int r = 0; r < BW_BATCHES + 1; r++) {   /* the first pass warms */
		double t0 = dlh_mono(), t;

		for (long p = 0; p < passes; p++) {
			scale_copy_fn(y, x, n, 1.0f + (float)p * 1e-7f);
			sink += y[p % (long)n];
		}
		t = dlh_mono() - t0;
		if (r && t < best)
			best = t;
	}
	(void)sink;
	free(x);
	free(y);
	return (double)passes * 2.0 * (double)(n * sizeof(float)) / best;
}

/* Writes a gzip IDX file: the header (magic, dims) and body. Dies on error. */
static void write_idx(const char *path, uint32_t magic, int ndims, const uint32_t *dims,
		      const uint8_t *body, size_t len)
{
	gzFile gz = gzopen(path, "wb6");
	uint8_t h[16];

	if (!gz)
		die("cannot create", path);
	for (int i = 0; i <= ndims; i++) {
		uint32_t v = i ? dims[i - 1] : magic;

		h[4 * i] = (uint8_t)(v >> 24);
		h[4 * i + 1] = (uint8_t)(v >> 16);
		h[4 * i + 2] = (uint8_t)(v >> 8);
		h[4 * i + 3] = (uint8_t)v;
	}
	if (gzwrite(gz, h, (unsigned)(4 * (ndims + 1))) <= 0 ||
	    gzwrite(gz, body, (unsigned)len) != (int)len || gzclose(gz) != Z_OK)
		die("cannot write", path);
}

/* Synthesizes an IDX pair like Fashion-MNIST (28 x 28, a textured blob on
 * a black ground, which compresses about as well) into dir. */
static void synth_pair(const char *dir, char *images, char *labels, size_t len)
{
	const uint32_t dims[3] = { SYNTH_IMAGES, 28, 28 }, ldims[1] = { SYNTH_IMAGES };
	uint8_t *x = xmalloc((size_t)SYNTH_IMAGES * 784), *y = xmalloc(SYNTH_IMAGES);
	uint32_t s = 12345;

	for (long i = 0; i < SYNTH_IMAGES; i++) {
		int rx = 6 + (int)(i % 7), ry = 8 + (int)(i % 5);

		for (int p = 0; p < 784; p++) {
			int dx = p % 28 - 14, dy = p / 28 - 14;

			s = s * 1664525u + 1013904223u;
			x[i * 784 + p] = dx * dx * ry * ry + dy * dy * rx * rx <= rx * rx * ry * ry ?
				(uint8_t)(96 + (s >> 26)) : 0;
		}
		y[i] = (uint8_t)(i % 10);
	}
	/* the pid: calibrations of several daemons may share dir (/tmp) */
	snprintf(images, len, "%s/.calib-images.%d.gz", dir, (int)getpid());
	snprintf(labels, len, "%s/.calib-labels.%d.gz", dir, (int)getpid());
	temp_add(images);
	temp_add(labels);
	write_idx(images, 0x803, 3, dims, x, (size_t)SYNTH_IMAGES * 784);
	write_idx(labels, 0x801, 1, ldims, y, SYNTH_IMAGES);
	free(x);
	free(y);
}

/* Bytes/s of IDX image data the trainer's loader turns into floats. */
static double decode_bw(const char *dir, const char *images, const char *labels)
{
	char ibuf[4096], lbuf[4096], err[512];
	struct dlt_dataset d;
	int synth = !images || !labels || access(images, R_OK) || access(labels, R_OK);
	double t0, t;
	long n;

	if (synth) {
		synth_pair(dir, ibuf, lbuf, sizeof ibuf);
		images = ibuf;
		labels = lbuf;
	}
	struct dlt_idx_header h;

	if (dlt_idx_probe(images, DLT_IDX_MAGIC_IMAGES, &h, err, sizeof err) < 0)
		die(err, NULL);
	n = h.count < DECODE_IMAGES ? h.count : DECODE_IMAGES;
	t0 = dlh_mono();
	if (dlt_dataset_load(&d, images, labels, 0, n, err, sizeof err) < 0)
		die(err, NULL);
	t = dlh_mono() - t0;
	dlt_dataset_free(&d);
	if (synth) {
		temp_remove(ibuf);
		temp_remove(lbuf);
	}
	return (double)n * h.rows * h.cols / t;
}

/* Parameters/s the trainer's He initialisation fills (a 784-512-10 MLP). */
static double init_rate(void)
{
	struct dlt_net_spec spec = { .in = { 1, 28, 28 }, .classes = 10, .pool = 1, .ndense = 1,
				     .dense = { 512 } };
	struct dlt_net net;
	char err[512];
	double t0, best = INFINITY;

	if (dlt_net_create(&net, &spec, 1, 1, 0, err, sizeof err) < 0)
		die(err, NULL);
	float *p = xmalloc(net.nparams * sizeof *p);

	for (int r = 0; r < 3; r++) {
		t0 = dlh_mono();
		dlt_net_init_params(&net, p, (uint64_t)r + 1);
		if (dlh_mono() - t0 < best)
			best = dlh_mono() - t0;
	}
	double rate = (double)net.nparams / best;

	free(p);
	dlt_net_destroy(&net);
	return rate;
}

/* Mean seconds of the row rank 0 appends to metrics.csv after every step
 * (dlt_rows: formatted into a buffer, written in batches of whole lines),
 * by the trainer's own code to a file in dir, as the job's is in the state
 * dir: the other ranks wait for it at the next gradient sum. */
static double metrics_line_s(const char *dir)
{
	char sub[4096], path[4096], err[512];
	int fd;

	snprintf(sub, sizeof sub, "%s/.calib-metrics.%d", dir, (int)getpid());
	if (mkdir(sub, 0700) < 0)
		die("cannot create", sub);
	if (dlt_metrics_open(sub, 0, &fd, err, sizeof err) < 0)
		die(err, NULL);
	/* as the trainer appends them: each row into its buffer, written in
	 * batches (engine/train/metrics.h dlt_rows) */
	static struct dlt_rows rows;
	double t0 = dlh_mono();
	dlt_rows_init(&rows, fd, DLT_ROWS_EVERY, t0);
	for (int i = 0; i < METRICS_LINES; i++) {
		double at = dlh_mono();
		struct dlh_metrics_row r = {
			.kind = DLH_ROW_TRAIN, .step = i + 1, .epoch = 1, .time_s = at - t0, .loss = 0.5,
			.accuracy = 0.875, .lr = 0.01, .samples_per_s = 12345.6,
		};
		if (dlt_rows_add(&rows, &r, at) < 0)
			die("cannot append to a metrics file in", sub);
	}
	if (dlt_rows_flush(&rows, dlh_mono()) < 0)
		die("cannot append to a metrics file in", sub);
	double t = (dlh_mono() - t0) / METRICS_LINES;

	close(fd);
	snprintf(path, sizeof path, "%s/%s", sub, DLH_FILE_METRICS);
	unlink(path);
	rmdir(sub);
	return t;
}

/* The median of three numbers. */
static double median3(const double v[3])
{
	double lo = fmin(v[0], v[1]), hi = fmax(v[0], v[1]);

	return fmax(lo, fmin(hi, v[2]));
}

/* Fills n floats with pseudo-random values in [-1, 1) whose bits do not
 * compress, as trained weights' do not: a disk or file system that
 * compresses or dedups writes a patterned buffer several times faster. */
static void fill_random(float *p, size_t n)
{
	uint64_t x = 0x9e3779b97f4a7c15u;

	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (float)((double)(x >> 11) * (2.0 / 9007199254740992.0) - 1.0);
	}
}

/* Times atomic writes in dir: a small file (write, fsync, rename, fsync
 * of the dir) and a checkpoint of the trainer's own format, written by
 * its own code (crc32 of the payload, then the same atomic write) with
 * weights that do not compress: prints write_s (small) and write_bw (the
 * checkpoint's bytes/s past the small write). */
static void write_times(const char *dir)
{
	char path[4096], err[512];
	const size_t n = WRITE_BIG / (2 * sizeof(float));   /* params, one state array */
	float *buf = xmalloc(2 * n * sizeof *buf);
	struct dlt_ckpt_meta m = { .nparams = n, .step = 1, .epoch = 1, .nstate = 1,
				   .optimizer = DLT_OPTIM_SGD };
	double small[3], large[3];

	fill_random(buf, 2 * n);
	for (int r = 0; r < 3; r++) {
		/* a new file each time, as a checkpoint is: rewriting one name
		 * ran 2-3x faster than the first write, and than dlh-train's */
		snprintf(path, sizeof path, "%s/.calib-write.%d.%d", dir, (int)getpid(), r);
		temp_add(path);
		double t0 = dlh_mono();

		if (dlh_write_atomic(path, buf, 4096) < 0)
			die("cannot write", path);
		double t1 = dlh_mono();

		if (dlt_ckpt_write(path, &m, buf, buf + n, err, sizeof err) < 0)
			die(err, NULL);
		double t2 = dlh_mono();

		small[r] = t1 - t0;
		large[r] = t2 - t1;
	}
	for (int r = 0; r < 3; r++) {
		snprintf(path, sizeof path, "%s/.calib-write.%d.%d", dir, (int)getpid(), r);
		temp_remove(path);
	}
	free(buf);
	/* the disk's speed varies 2-3x from one write to the next, either way:
	 * the median, not the best */
	double s = median3(small), l = median3(large);

	fprintf(fig, "write_s=%.4g\n", s);
	fprintf(fig, "write_bw=%.4g\n", (double)WRITE_BIG / (l > s ? l - s : l));
}

/* Bytes of this process's resident memory (VmRSS), or 0. */
static double rss_bytes(void)
{
	char *text = NULL, *at;
	size_t len;
	double kb = 0.0;

	if (dlh_read_file("/proc/self/status", 1 << 16, &text, &len) == 0 &&
	    (at = strstr(text, "VmRSS:")) != NULL)
		kb = strtod(at + strlen("VmRSS:"), NULL);
	free(text);
	return kb * 1024.0;
}

/* One rank: the device's own speeds. */
static void phase_single(const char *dir, const char *images, const char *labels)
{
	fprintf(fig, "device=cpu\n");
	fprintf(fig, "cpu.gemm_flops=%.4g\n", gemm_grids());
	for (int i = 0; i < DLH_CALIB_OPT_N; i++)
		fprintf(fig, "cpu.sgd_%ld=%.4g\ncpu.adam_%ld=%.4g\n", opt_sizes[i],
		       optim_s(DLT_OPTIM_SGD, opt_sizes[i]), opt_sizes[i],
		       optim_s(DLT_OPTIM_ADAM, opt_sizes[i]));
	for (int i = 0; i < DLH_CALIB_BW_N; i++) {
		double bw = copy_bw(bw_sizes[i]);

		fprintf(fig, "cpu.bw_%ld=%.4g\n", bw_sizes[i], bw);
		if (i == DLH_CALIB_BW_N - 1)
			fprintf(fig, "cpu.mem_bw=%.4g\n", bw);
	}
	fprintf(fig, "cpu.relu_bwd_s=%.4g\n", elem_pass_s(DLT_LAYER_RELU, 0.0f, 1));
	fprintf(fig, "cpu.dropout_s=%.4g\n", elem_pass_s(DLT_LAYER_DROPOUT, 0.5f, 0));
	fprintf(fig, "cpu.gather_bw=%.4g\n", gather_bw());
	fprintf(fig, "decode_bw=%.4g\n", decode_bw(dir, images, labels));
	fprintf(fig, "init_rate=%.4g\n", init_rate());
	write_times(dir);
	fprintf(fig, "metrics_s=%.4g\n", metrics_line_s(dir));
}

/* Mean seconds of an allreduce of bytes (float sums) on every rank. */
static double allreduce_s(float *buf, long bytes)
{
	int n = (int)(bytes / (long)sizeof(float)), reps = bytes < (64 << 10) ? 500 : 40;
	double t0;

	MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	for (int r = 0; r < reps; r++)
		MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
	return (MPI_Wtime() - t0) / reps;
}

/* Mean seconds of dlh-train's shared-memory step (fences, the sum of
 * every rank's gradient slot over this rank's slice, the SGD update of
 * the slice) for n parameters on every rank, each rank having written
 * its whole slot before, as backward does: the sum then reads lines
 * another core wrote, which is what makes it slower than a local pass. */
static double shm_step_s(long n)
{
	struct dlt_optim o = { .kind = DLT_OPTIM_SGD, .momentum = 0.9f };
	struct dlt_shm shm;
	char err[512];
	double sums[DLT_GRAD_EXTRA], total = 0.0;
	const int reps = n > (1L << 22) ? 4 : 20;

	if (dlt_shm_create(&shm, MPI_COMM_WORLD, (size_t)n, 1, NULL, err, sizeof err) < 0)
		die(err, NULL);
	for (int r = 0; r <= reps; r++) {
		volatile float sink = 0.0f;
		float s = 0.0f;

		/* forward reads the whole model (the slices the other ranks
		 * updated come from their caches, and the update of this rank's
		 * slice then takes its lines back from them), backward writes
		 * the slot */
		for (long i = 0; i < n; i++)
			s += shm.params[i];
		sink = s;
		(void)sink;
		fill(shm.slot[shm.rank], (size_t)n + 2);
		dlt_shm_fence(&shm);   /* every slot written: time the step alone */
		double t0 = dlh_mono();

		dlt_shm_step(&shm, &o, 0.01f, (unsigned long)r + 1, sums);
		if (r)   /* the first pages in */
			total += dlh_mono() - t0;
	}
	dlt_shm_destroy(&shm);
	return total / reps;
}

/* Least-squares line y = a + b x through n points. */
static void fit_line(const double *x, const double *y, int n, double *a, double *b)
{
	double sx = 0, sy = 0, sxx = 0, sxy = 0;

	for (int i = 0; i < n; i++) {
		sx += x[i];
		sy += y[i];
		sxx += x[i] * x[i];
		sxy += x[i] * y[i];
	}
	*b = (n * sxy - sx * sy) / (n * sxx - sx * sx);
	*a = (sy - *b * sx) / n;
}

/* Mean seconds each rank waits at a dlt_shm_fence after work of about
 * work_s seconds that is the same on every rank (sgemm from L2, as a
 * layer), over reps rounds: what the ranks' jitter adds to each of a
 * shared-memory step's two fences, where the slowest rank sets the pace. */
static double fence_wait_s(struct dlt_shm *shm, float *pool, double work_s, int reps)
{
	const int m = 64;
	double t_call = 0.0, wait = 0.0;
	long calls;

	gemm_rate(m, m, m, pool, GEMM_ALL_POOL);   /* warm */
	double t0 = dlh_mono();

	for (calls = 0; dlh_mono() - t0 < 2e-3; calls++)
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, m, m, 1.0f, pool, m,
			    pool + m * m, m, 0.0f, pool + 2 * m * m, m);
	t_call = (dlh_mono() - t0) / (double)calls;
	MPI_Bcast(&t_call, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);   /* the same work on all */
	calls = (long)(work_s / t_call) > 0 ? (long)(work_s / t_call) : 1;
	dlt_shm_fence(shm);
	for (int r = 0; r < reps; r++) {
		for (long c = 0; c < calls; c++)
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, m, m, 1.0f, pool, m,
				    pool + m * m, m, 0.0f, pool + 2 * m * m, m);
		double f0 = dlh_mono();

		dlt_shm_fence(shm);
		wait += dlh_mono() - f0;
	}
	return wait / reps;
}

/* Prints fence_a_s and fence_b: a fence's wait as a + b x the work
 * before it, from the mean wait of the ranks after 50 us and 2 ms. */
static void fence_waits(int rank, float *pool)
{
	struct dlt_shm shm;
	char err[512];
	double w[2], mean[2];
	const double work[2] = { 50e-6, 2e-3 };
	const int reps[2] = { 400, 40 };
	int ranks;

	MPI_Comm_size(MPI_COMM_WORLD, &ranks);
	if (dlt_shm_create(&shm, MPI_COMM_WORLD, 1024, 1, NULL, err, sizeof err) < 0)
		die(err, NULL);
	for (int i = 0; i < 2; i++) {
		w[i] = fence_wait_s(&shm, pool, work[i], reps[i]);
		MPI_Reduce(&w[i], &mean[i], 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
		mean[i] /= ranks;
	}
	dlt_shm_destroy(&shm);
	if (rank == 0) {
		double b = fmax(0.0, (mean[1] - mean[0]) / (work[1] - work[0]));

		fprintf(fig, "fence_a_s=%.4g\nfence_b=%.4g\n", fmax(0.0, mean[0] - b * work[0]), b);
	}
}

/* A barrier at which every rank but 0 sleeps rather than spins (MPI's
 * shared-memory barrier polls): while rank 0 times something alone, the
 * others must not run beside it. */
static void quiet_barrier(int rank)
{
	const struct timespec nap = { 0, 100000 };   /* 0.1 ms */
	MPI_Request req;
	int done = 0;

	MPI_Ibarrier(MPI_COMM_WORLD, &req);
	if (rank == 0) {
		MPI_Wait(&req, MPI_STATUS_IGNORE);
		return;
	}
	while (!done) {
		nanosleep(&nap, NULL);
		MPI_Test(&req, &done, MPI_STATUS_IGNORE);
	}
}

/* Every rank: what they do together. */
static void phase_all(int rank)
{
	double x[AR_SIZES], y[AR_SIZES], alpha, beta, t0, solo = 0.0, v, lo;
	float s[64] = { 0 };

	/* a rank's base: MPI, and OpenBLAS' buffers after a first sgemm, as
	 * the trainer's ranks hold before their own allocations */
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 4, 4, 4, 1.0f, s, 4, s + 16, 4,
		    0.0f, s + 32, 4);
	double rss = rss_bytes(), rss_hi;

	MPI_Reduce(&rss, &rss_hi, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	float *buf = xmalloc((size_t)4 << 20);
	const int m = 128;   /* a mid-sized layer's shape */
	float *pool = xmalloc(GEMM_POOL * sizeof *pool);

	fill(buf, (size_t)1 << 20);
	fill(pool, GEMM_POOL);
	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	for (int i = 0; i < BARRIERS; i++)
		MPI_Barrier(MPI_COMM_WORLD);
	v = (MPI_Wtime() - t0) / BARRIERS;
	for (int i = 0; i < AR_SIZES; i++) {   /* 8 B, 64 B, ... 4 MiB: x8 apart */
		x[i] = (double)(8L << (3 * i)) < (4 << 20) ? (double)(8L << (3 * i)) : (4 << 20);
		y[i] = allreduce_s(buf, (long)x[i]);
	}
	fit_line(x, y, AR_SIZES, &alpha, &beta);
	if (alpha < y[0] / 2)   /* the fit of a noisy run can go below zero */
		alpha = y[0];
	/* GEMM alone, then on every rank at once, alternated (A B A B: the
	 * machine's other load moves both alike); the best of each. The
	 * operands stay in L2 (GEMM_ALL_POOL), as a layer's do in dlh-train:
	 * this is what the cores' sharing costs the arithmetic. From the big
	 * pool both ranks streamed operands from DRAM and measured its
	 * contention (0.8), which the bandwidth terms already count, while
	 * dlh-train's two-rank layers ran as fast as one rank's. */
	double all = 0.0;

	for (int round = 0; round < 3; round++) {
		if (rank == 0)
			solo = fmax(solo, gemm_rate(m, m, m, pool, GEMM_ALL_POOL));
		quiet_barrier(rank);
		all = fmax(all, gemm_rate(m, m, m, pool, GEMM_ALL_POOL));
		MPI_Barrier(MPI_COMM_WORLD);
	}
	MPI_Reduce(&all, &lo, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
	MPI_Barrier(MPI_COMM_WORLD);
	double bw = copy_bw(bw_sizes[DLH_CALIB_BW_N - 1]), bwlo;

	MPI_Reduce(&bw, &bwlo, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
	if (rank == 0) {
		fprintf(fig, "sync_s=%.4g\n", v);
		fprintf(fig, "ar_alpha=%.4g\nar_beta=%.4g\n", alpha, beta > 0 ? beta : 0.0);
		fprintf(fig, "device=cpu\n");
		/* sharing the cores never speeds one up: above 1 is noise */
		fprintf(fig, "cpu.gemm_all=%.4g\n", fmin(1.0, lo / solo));
		fprintf(fig, "cpu.mem_bw_all=%.4g\n", bwlo);
		fprintf(fig, "base_rss=%.4g\n", rss_hi);
	}
	for (int i = 0; i < DLH_CALIB_OPT_N; i++) {
		double t = shm_step_s(opt_sizes[i]), slowest;

		MPI_Reduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
		if (rank == 0)
			fprintf(fig, "shm_%ld=%.4g\n", opt_sizes[i], slowest);
	}
	int ranks;

	MPI_Comm_size(MPI_COMM_WORLD, &ranks);
	if (rank == 0)
		fprintf(fig, "shm_ranks=%d\n", ranks);
	fence_waits(rank, pool);
	free(buf);
	free(pool);
}

/* The mean over the inner 3 x 3 x 3 points of the CPU's part of the grid
 * of a / b (floats). */
static double inner_ratio_f(const float a[DLT_GPU_CAL_DIMS][DLT_GPU_CAL_DIMS][DLT_GPU_CAL_DIMS],
			    const float b[DLT_GPU_CAL_DIMS][DLT_GPU_CAL_DIMS][DLT_GPU_CAL_DIMS])
{
	double sum = 0.0;
	int n = 0;

	for (int i = 1; i < CPU_N - 1; i++)
		for (int j = 1; j < CPU_N - 1; j++)
			for (int l = 1; l < CPU_N - 1; l++, n++)
				sum += b[i][j][l] > 0 ? a[i][j][l] / b[i][j][l] : 1.0;
	return sum / n;
}

/* One GPU of type name (CUDA device 0) and the allreduce over gpus of them. */
static void phase_gpu(const char *name, int gpus)
{
	static const char *forms[DLT_GPU_CAL_FORMS] = { "", "nt", "tn", "tf32" };
	struct dlt_gpu_cal_in in = {
		.ndims = DLH_CALIB_GEMM_N, .dims = gemm_dims, .nsizes = DLH_CALIB_BW_N,
		.sizes = bw_sizes, .gpus = gpus,
	};
	static struct dlt_gpu_cal c;
	const char *n = name;
	char err[512];
	_Static_assert(DLH_CALIB_GEMM_N <= DLT_GPU_CAL_DIMS, "the GPU grid holds the CPU's");
	_Static_assert(DLH_CALIB_BW_N <= DLT_GPU_CAL_SIZES, "and its working sets");

	if (dlt_gpu_calibrate(&in, &c, err, sizeof err) < 0)
		die("gpu", err);
	fprintf(fig, "device=%s\n", n);
	fprintf(fig, "%s.gpu=1\n%s.gemm_flops=%.4g\n%s.gemm_all=1\n", n, n, c.gemm_flops, n);
	fprintf(fig, "%s.mem_bw=%.4g\n%s.mem_bw_all=%.4g\n", n, c.bw[DLH_CALIB_BW_N - 1], n,
	       c.bw[DLH_CALIB_BW_N - 1]);
	fprintf(fig, "%s.gemm_nt=%.4g\n%s.gemm_tn=%.4g\n", n, inner_ratio_f(c.gemm[1], c.gemm[0]), n,
	       inner_ratio_f(c.gemm[2], c.gemm[0]));
	fprintf(fig, "%s.kernel_s=%.4g\n%s.sync_s=%.4g\n%s.h2d_s=%.4g\n%s.h2d_bw=%.4g\n", n, c.kernel_s,
	       n, c.sync_s, n, c.h2d_s, n, c.h2d_bw);
	fprintf(fig, "%s.node_s=%.4g\n%s.direct_s=%.4g\n%s.direct_dw_s=%.4g\n", n, c.node_s, n,
		c.direct_s, n, c.direct_dw_s);
	fprintf(fig, "%s.ctx_s=%.4g\n%s.blas_s=%.4g\n%s.nccl_s=%.4g\n", n, c.ctx_s, n, c.blas_s, n,
	       c.nccl_s);
	fprintf(fig, "%s.ctx_bytes=%.4g\n%s.blas_bytes=%.4g\n%s.nccl_bytes=%.4g\n%s.total_bytes=%.4g\n",
	       n, c.ctx_bytes, n, c.blas_bytes, n, c.nccl_bytes, n, c.total_bytes);
	if (gpus >= 2)
		fprintf(fig, "%s.nccl_alpha=%.4g\n%s.nccl_beta=%.4g\n%s.nccl_gpus=%d\n", n, c.ar_alpha, n,
		       c.ar_beta, n, gpus);
	for (int i = 0; i < DLH_CALIB_BW_N; i++)
		fprintf(fig, "%s.bw_%ld=%.4g\n", n, bw_sizes[i], c.bw[i]);
	for (int f = 0; f < DLT_GPU_CAL_FORMS; f++)
		for (int i = 0; i < DLH_CALIB_GEMM_N; i++)
			for (int j = 0; j < DLH_CALIB_GEMM_N; j++) {
				fprintf(fig, "%s.gemm%s_%dx%d=", n, forms[f], gemm_dims[i], gemm_dims[j]);
				for (int l = 0; l < DLH_CALIB_GEMM_N; l++)
					fprintf(fig, "%s%.4g", l ? " " : "", (double)c.gemm[f][i][j][l]);
				fprintf(fig, "\n");
			}
	/* for people: what was measured (a comment to the cache's parser) */
	fprintf(fig, "# %s: %s\n", n, c.name);
}

/* Two ranks on two nodes: the allreduce between them, alpha-beta fit. */
static void phase_link(int rank)
{
	double x[AR_SIZES], y[AR_SIZES], alpha, beta;
	float *buf = xmalloc((size_t)4 << 20);

	fill(buf, (size_t)1 << 20);
	for (int i = 0; i < AR_SIZES; i++) {
		x[i] = (double)(8L << (3 * i)) < (4 << 20) ? (double)(8L << (3 * i)) : (4 << 20);
		y[i] = allreduce_s(buf, (long)x[i]);
	}
	fit_line(x, y, AR_SIZES, &alpha, &beta);
	if (alpha < y[0] / 2)
		alpha = y[0];
	if (rank == 0)
		fprintf(fig, "net_alpha=%.4g\nnet_beta=%.4g\n", alpha, beta > 0 ? beta : 0.0);
	free(buf);
}

int main(int argc, char **argv)
{
	const char *phase = NULL, *dir = "/tmp", *images = NULL, *labels = NULL, *out = NULL;
	const char *type = NULL;
	int rank, gpus = 1;
	double t, first;

	fig = stdout;
	MPI_Init(&argc, &argv);
	t = dlh_now();
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	/* the moment the last rank is up: when the job could start */
	MPI_Reduce(&t, &first, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--phase"))
			phase = argv[i + 1];
		else if (!strcmp(argv[i], "--dir"))
			dir = argv[i + 1];
		else if (!strcmp(argv[i], "--images"))
			images = argv[i + 1];
		else if (!strcmp(argv[i], "--labels"))
			labels = argv[i + 1];
		else if (!strcmp(argv[i], "--out"))
			out = argv[i + 1];
		else if (!strcmp(argv[i], "--type"))
			type = argv[i + 1];
		else if (!strcmp(argv[i], "--gpus"))
			gpus = atoi(argv[i + 1]);
		else
			die("unknown option", argv[i]);
	}
	if (!phase || (strcmp(phase, "single") && strcmp(phase, "all") && strcmp(phase, "link") &&
		       strcmp(phase, "gpu")) || (!strcmp(phase, "gpu") && (!type || gpus < 1)))
		die("usage: dlh-calib --phase single|all|link|gpu [--dir DIR] [--images P --labels P] "
		    "[--type NAME --gpus N] [--out F]", NULL);
	if (rank == 0 && out && !(fig = fopen(out, "w")))
		die("cannot write --out", out);
	if (!strcmp(phase, "single")) {
		if (rank == 0)
			phase_single(dir, images, labels);
	} else if (!strcmp(phase, "link")) {
		phase_link(rank);
	} else if (!strcmp(phase, "gpu")) {
		if (rank == 0)
			phase_gpu(type, gpus);
	} else {
		phase_all(rank);
	}
	if (rank == 0) {
		/* comments to the cache parser; engine/calib.c reads them */
		fprintf(fig, "#t_init=%.6f\n", first);
		fprintf(fig, "#t_fin=%.6f\n", dlh_now());
		if (fig != stdout ? fclose(fig) != 0 : fflush(stdout) != 0)
			die("cannot write the figures", out ? out : "stdout");
	}
	MPI_Finalize();
	return 0;
}
