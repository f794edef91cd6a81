/* estimate_tool.c - bench-estimate: the estimator driven without a mount,
 * for bench/estimate (until the daemon writes jobs/<id>/estimate itself)
 *
 *   bench-estimate calibrate STATE MPIRUN CALIB     measure, write STATE/calibration
 *   bench-estimate run STATE MPIRUN TRAINER SPEC JOBDIR
 *       estimate SPEC with STATE's calibration, run it exactly as the
 *       daemon would (dlh_plan_make's argv, exec'd, no shell), time it,
 *       print the estimate file with the actuals, then one line
 *       "row PRED_TOTAL ACTUAL_TOTAL PRED_STEP ACTUAL_STEP PRED_MEM ACTUAL_MEM" */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "engine/calib.h"
#include "engine/estimate.h"
#include "engine/launch.h"
#include "engine/plan.h"
#include "engine/pool.h"
#include "schema/spec.h"

/* The item count and item size of an IDX file's header (gzip or plain).
 * Returns 0, or -1. */
static int idx_count(const char *path, long *count, int *rows, int *cols)
{
	unsigned char h[16];
	gzFile gz = gzopen(path, "rb");
	int n = gz ? gzread(gz, h, sizeof h) : -1;
	if (gz)
		gzclose(gz);
	if (n < 8)
		return -1;
	*count = (long)h[4] << 24 | (long)h[5] << 16 | (long)h[6] << 8 | h[7];
	*rows = n == 16 && h[3] == 3 ? h[8] << 24 | h[9] << 16 | h[10] << 8 | h[11] : 1;
	*cols = n == 16 && h[3] == 3 ? h[12] << 24 | h[13] << 16 | h[14] << 8 | h[15] : 1;
	return 0;
}

static int calibrate(char **argv)
{
	struct dlh_calib c;
	struct dlh_buf b = { 0 };
	char err[1024];
	struct dlh_calib_opts o = {
		.mpirun = argv[3], .program = argv[4], .cpus = (int)sysconf(_SC_NPROCESSORS_ONLN),
		.dir = argv[2],
		.images = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz",
		.labels = "/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz",
	};
	double t0 = dlh_now();
	if (dlh_calib_measure(&o, &c, err, sizeof err) < 0) {
		fprintf(stderr, "bench-estimate: %s\n", err);
		return 1;
	}
	fprintf(stderr, "bench-estimate: calibration took %.1f s\n", dlh_now() - t0);
	if (dlh_calib_save(argv[2], &c) < 0 || dlh_calib_format(&c, &b) < 0) {
		fprintf(stderr, "bench-estimate: cannot save the calibration in \"%s\"\n", argv[2]);
		return 1;
	}
	fputs(b.data, stdout);
	dlh_buf_free(&b);
	return 0;
}

/* Fills in from spec and plan (the bench's pool: one node of CPU slots). */
static int make_in(const struct dlh_spec *spec, const struct dlh_plan *plan,
		   const struct dlh_calib *cal, struct dlh_estimate_in *in)
{
	long n;
	int rows, cols;
	memset(in, 0, sizeof *in);
	in->spec = spec;
	if (idx_count(spec->train, &n, &rows, &cols) < 0)
		return -1;
	in->train_n = spec->train_limit > 0 && spec->train_limit < n ? spec->train_limit : n;
	if (idx_count(spec->test, &n, &rows, &cols) < 0)
		return -1;
	in->test_n = spec->test_limit > 0 && spec->test_limit < n ? spec->test_limit : n;
	in->c = 1;
	in->h = rows;
	in->w = cols;
	in->classes = 10;
	in->ranks = plan->ranks;
	in->nodes = 1;
	for (int r = 0; r < plan->ranks; r++) {
		in->batch[r] = plan->batch[r];
		in->dev[r] = dlh_calib_dev(cal, "cpu");
	}
	return 0;
}

static int run(char **argv)
{
	static struct dlh_spec spec;
	static struct dlh_plan plan;
	static struct dlh_estimate_in in;
	struct dlh_calib cal;
	struct dlh_pool pool;
	struct dlh_tools tools;
	struct dlh_estimate pred, act;
	struct dlh_buf b = { 0 };
	char err[DLH_ERR_MAX], log[4096], *text = NULL;
	size_t len;
	const char *state = argv[2], *job = argv[6];
	pid_t pid;
	int status;

	if (dlh_calib_load(state, &cal, err, sizeof err) < 0 ||
	    dlh_read_file(argv[5], DLH_SPEC_MAX, &text, &len) < 0 ||
	    dlh_spec_parse(text, len, &spec, err, sizeof err) < 0) {
		fprintf(stderr, "bench-estimate: %s: %s\n", argv[5], err);
		return 1;
	}
	free(text);
	snprintf(tools.mpirun, sizeof tools.mpirun, "%s", argv[3]);
	snprintf(tools.trainer, sizeof tools.trainer, "%s", argv[4]);
	if (dlh_pool_detect(&pool, 0) < 0 ||
	    dlh_plan_make(&spec, &pool, &tools, job, &plan, err, sizeof err) < 0 ||
	    make_in(&spec, &plan, &cal, &in) < 0 ||
	    dlh_estimate(&in, &cal, NULL, &pred, err, sizeof err) < 0) {
		fprintf(stderr, "bench-estimate: %s: %s\n", argv[5], err);
		return 1;
	}
	char *extra[] = { "OPENBLAS_NUM_THREADS=1", "OMP_NUM_THREADS=1",
			  "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", NULL };
	snprintf(log, sizeof log, "%s/log", job);
	if (dlh_mkdir_p(job, 0755) < 0) {
		fprintf(stderr, "bench-estimate: cannot create \"%s\"\n", job);
		return 1;
	}
	double t0 = dlh_now();
	if (dlh_launch(plan.argv, extra, log, &pid) < 0) {
		fprintf(stderr, "bench-estimate: cannot start %s\n", plan.argv[0]);
		return 1;
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	double wall = dlh_now() - t0;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "bench-estimate: %s: the run failed (status %d), see %s\n",
			argv[5], status, log);
		return 1;
	}
	if (dlh_estimate_actual(job, wall, &act) < 0) {
		fprintf(stderr, "bench-estimate: %s: no metrics in %s\n", argv[5], job);
		return 1;
	}
	dlh_estimate_format(&pred, &act, &b);
	fputs(b.data, stdout);
	dlh_buf_free(&b);
	printf("row %.4f %.4f %.6f %.6f %.0f %.0f\n", pred.total_s, act.total_s, pred.step_s,
	       act.step_s, pred.mem_bytes, act.mem_bytes);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "calibrate"))
		return calibrate(argv);
	if (argc == 7 && !strcmp(argv[1], "run"))
		return run(argv);
	fprintf(stderr, "usage: bench-estimate calibrate STATE MPIRUN CALIB\n"
		"       bench-estimate run STATE MPIRUN TRAINER SPEC JOBDIR\n");
	return 2;
}
