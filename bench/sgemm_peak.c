/* sgemm_peak.c - OpenBLAS single-precision GEMM peak: best of R runs of C = A*B, N x N, 1 thread by default */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Returns the monotonic clock in seconds. */
static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1024;
	int reps = argc > 2 ? atoi(argv[2]) : 5;
	int threads = argc > 3 ? atoi(argv[3]) : 1;
	size_t nn = (size_t)n * (size_t)n;
	float *a = malloc(nn * sizeof *a), *b = malloc(nn * sizeof *b), *c = malloc(nn * sizeof *c);
	double best = 0.0;

	if (n < 1 || reps < 1 || threads < 1 || !a || !b || !c) {
		fprintf(stderr, "usage: sgemm_peak [N [REPS [THREADS]]]\n");
		return 2;
	}
	openblas_set_num_threads(threads);
	for (size_t i = 0; i < nn; i++) {
		a[i] = (float)(i % 7) * 0.25f - 0.75f;
		b[i] = (float)(i % 5) * 0.5f - 1.0f;
	}
	for (int r = 0; r <= reps; r++) {   /* run 0 warms up and is not counted */
		double t0 = now(), dt;

		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n,
			    1.0f, a, n, b, n, 0.0f, c, n);
		dt = now() - t0;
		if (r > 0 && 2.0 * n * n * (double)n / dt > best)
			best = 2.0 * n * n * (double)n / dt;
	}
	printf("sgemm_gflops=%.1f n=%d threads=%d reps=%d check=%g\n",
	       best / 1e9, n, threads, reps, (double)c[nn / 2]);
	free(a);
	free(b);
	free(c);
	return 0;
}
