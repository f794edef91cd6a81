/* main.c - dlh-calib: the microbenchmarks behind STATE/calibration (an MPI
 * program; engine/calib.c runs it under mpirun and reads what it prints)
 *
 *   dlh-calib --phase single [--dir DIR] [--images P --labels P]   (1 rank)
 *   dlh-calib --phase all                                          (all ranks)
 *
 * single times one core: sgemm over the grid of DLH_CALIB_GEMM_DIMS, copy
 * bandwidth over DLH_CALIB_BW_SIZES, the trainer's IDX loader, its weight
 * initialisation, atomic file writes. all times what the ranks of one node
 * do together: barrier, allreduce (alpha-beta fit), copy bandwidth and
 * sgemm with every core busy. Both print key=value lines (the cache's
 * keys, see calib.h) and the wall-clock moments the parent needs to time
 * mpirun's launch and exit. */
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "engine/calib.h"
#include "engine/train/idx.h"
#include "engine/train/net.h"
#include "engine/util.h"

#define GEMM_MAX_MNK (1L << 28)   /* larger shapes are not timed: they run at peak */
#define GEMM_BATCH_S 0.001        /* seconds of calls per timed batch */
#define GEMM_BATCHES 3            /* best batch of these */
#define BW_BATCH_BYTES (64L << 20) /* bytes copied per timed batch */
#define BW_BATCHES 5
#define AR_SIZES 6                /* allreduce sizes timed, 8 B to 4 MiB */
#define BARRIERS 2000             /* barriers averaged */
#define DECODE_IMAGES 10000       /* images the loader decodes */
#define SYNTH_IMAGES 10000        /* images of a synthesized IDX pair */
#define WRITE_BIG (8L << 20)      /* bytes of the large atomic write */

static const int gemm_dims[DLH_CALIB_GEMM_N] = DLH_CALIB_GEMM_DIMS;
static const long bw_sizes[DLH_CALIB_BW_N] = DLH_CALIB_BW_SIZES;

/* Prints a message and aborts every rank. */
static _Noreturn void die(const char *msg, const char *what)
{
	fprintf(stderr, "dlh-calib: %s%s%s\n", msg, what ? ": " : "", what ? what : "");
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

/* Best FLOP/s of m x n x k sgemm (row-major, no transposes) over a few
 * batches of calls: the best batch is the one least disturbed by other
 * work on a shared machine. */
static double gemm_rate(int m, int n, int k, const float *a, const float *b, float *c)
{
	double best = INFINITY;

	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n,
		    0.0f, c, n);   /* warm: packs buffers, pages in */
	for (int r = 0; r < GEMM_BATCHES; r++) {
		double t0 = dlh_mono(), t;
		long calls = 0;

		do {
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f,
				    a, k, b, n, 0.0f, c, n);
			calls++;
			t = dlh_mono() - t0;
		} while (t < GEMM_BATCH_S);
		if (t / (double)calls < best)
			best = t / (double)calls;
	}
	return 2.0 * m * n * k / best;
}

/* Times the grid; shapes over GEMM_MAX_MNK take the best of their smaller
 * neighbours (large shapes saturate). Prints cpu.gemm_MxN lines. Returns
 * the best rate seen. */
static double gemm_grid(void)
{
	const size_t big = (size_t)gemm_dims[DLH_CALIB_GEMM_N - 1];
	float *a = xmalloc(big * big * sizeof *a), *b = xmalloc(big * big * sizeof *b);
	float *c = xmalloc(big * big * sizeof *c);
	static double g[DLH_CALIB_GEMM_N][DLH_CALIB_GEMM_N][DLH_CALIB_GEMM_N];
	double peak = 0.0;

	fill(a, big * big);
	fill(b, big * big);
	for (int i = 0; i < DLH_CALIB_GEMM_N; i++)
		for (int j = 0; j < DLH_CALIB_GEMM_N; j++)
			for (int l = 0; l < DLH_CALIB_GEMM_N; l++) {
				long mnk = (long)gemm_dims[i] * gemm_dims[j] * gemm_dims[l];

				if (mnk <= GEMM_MAX_MNK) {
					g[i][j][l] = gemm_rate(gemm_dims[i], gemm_dims[j], gemm_dims[l],
							       a, b, c);
				} else {   /* i, j, l ascend: the neighbours are done */
					double v = i ? g[i - 1][j][l] : 0.0;

					v = j && g[i][j - 1][l] > v ? g[i][j - 1][l] : v;
					g[i][j][l] = l && g[i][j][l - 1] > v ? g[i][j][l - 1] : v;
				}
				if (g[i][j][l] > peak)
					peak = g[i][j][l];
			}
	for (int i = 0; i < DLH_CALIB_GEMM_N; i++)
		for (int j = 0; j < DLH_CALIB_GEMM_N; j++) {
			printf("cpu.gemm_%dx%d=", gemm_dims[i], gemm_dims[j]);
			for (int l = 0; l < DLH_CALIB_GEMM_N; l++)
				printf("%s%.4g", l ? " " : "", g[i][j][l]);
			printf("\n");
		}
	free(a);
	free(b);
	free(c);
	return peak;
}

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
			const float s = 1.0f + (float)p * 1e-7f;

			for (size_t i = 0; i < n; i++)
				y[i] = s * x[i];
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
	snprintf(images, len, "%s/.calib-images.gz", dir);
	snprintf(labels, len, "%s/.calib-labels.gz", dir);
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
		unlink(ibuf);
		unlink(lbuf);
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

/* Times atomic writes in dir (write, fsync, rename, fsync of the dir, as
 * a checkpoint): prints write_s (small) and write_bw (large). */
static void write_times(const char *dir)
{
	char path[4096];
	char *buf = xmalloc(WRITE_BIG);
	double small = INFINITY, large = INFINITY;

	memset(buf, 0x5a, WRITE_BIG);
	snprintf(path, sizeof path, "%s/.calib-write", dir);
	for (int r = 0; r < 3; r++) {
		double t0 = dlh_mono();

		if (dlh_write_atomic(path, buf, 4096) < 0)
			die("cannot write", path);
		double t1 = dlh_mono();

		if (dlh_write_atomic(path, buf, WRITE_BIG) < 0)
			die("cannot write", path);
		double t2 = dlh_mono();

		small = t1 - t0 < small ? t1 - t0 : small;
		large = t2 - t1 < large ? t2 - t1 : large;
	}
	unlink(path);
	free(buf);
	printf("write_s=%.4g\n", small);
	printf("write_bw=%.4g\n", (double)WRITE_BIG / (large > small ? large - small : large));
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
	double peak = gemm_grid();

	printf("device=cpu\n");
	printf("cpu.gemm_flops=%.4g\n", peak);
	for (int i = 0; i < DLH_CALIB_BW_N; i++) {
		double bw = copy_bw(bw_sizes[i]);

		printf("cpu.bw_%ld=%.4g\n", bw_sizes[i], bw);
		if (i == DLH_CALIB_BW_N - 1)
			printf("cpu.mem_bw=%.4g\n", bw);
	}
	printf("decode_bw=%.4g\n", decode_bw(dir, images, labels));
	printf("init_rate=%.4g\n", init_rate());
	write_times(dir);
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
	const int m = 256;
	float *a = xmalloc((size_t)m * m * sizeof *a), *b = xmalloc((size_t)m * m * sizeof *b);
	float *c = xmalloc((size_t)m * m * sizeof *c);

	fill(buf, (size_t)1 << 20);
	fill(a, (size_t)m * m);
	fill(b, (size_t)m * m);
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
	/* GEMM alone, then on every rank at once */
	if (rank == 0)
		solo = gemm_rate(m, m, m, a, b, c);
	MPI_Barrier(MPI_COMM_WORLD);
	double all = gemm_rate(m, m, m, a, b, c);

	MPI_Reduce(&all, &lo, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
	MPI_Barrier(MPI_COMM_WORLD);
	double bw = copy_bw(bw_sizes[DLH_CALIB_BW_N - 1]), bwlo;

	MPI_Reduce(&bw, &bwlo, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
	if (rank == 0) {
		printf("sync_s=%.4g\n", v);
		printf("ar_alpha=%.4g\nar_beta=%.4g\n", alpha, beta > 0 ? beta : 0.0);
		printf("device=cpu\n");
		printf("cpu.gemm_all=%.4g\n", lo / solo);
		printf("cpu.mem_bw_all=%.4g\n", bwlo);
		printf("base_rss=%.4g\n", rss_hi);
	}
	free(buf);
	free(a);
	free(b);
	free(c);
}

int main(int argc, char **argv)
{
	const char *phase = NULL, *dir = "/tmp", *images = NULL, *labels = NULL;
	int rank;
	double t, first;

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
		else
			die("unknown option", argv[i]);
	}
	if (!phase || (strcmp(phase, "single") && strcmp(phase, "all")))
		die("usage: dlh-calib --phase single|all [--dir DIR] [--images P --labels P]", NULL);
	if (!strcmp(phase, "single")) {
		if (rank == 0)
			phase_single(dir, images, labels);
	} else {
		phase_all(rank);
	}
	if (rank == 0) {
		/* comments to the cache parser; engine/calib.c reads them */
		printf("#t_init=%.6f\n", first);
		printf("#t_fin=%.6f\n", dlh_now());
		fflush(stdout);
	}
	MPI_Finalize();
	return 0;
}
