/* fuzz_ctl.c - libFuzzer target: the ctl verbs of a job and of the pool, on
 * a real engine (a temporary state dir, one job that never launches) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct dlh_engine *eng;   /* open for the whole run */
static long job;                 /* a dry run: planned, never launched */
static char state[] = "/tmp/dlh-fuzz-ctl.XXXXXX";

/* At exit: the engine closed, its state dir removed. */
static void done(void)
{
	char cmd[64];
	dlh_engine_close(eng);
	snprintf(cmd, sizeof cmd, "rm -rf %s", state);
	if (system(cmd) != 0)
		fprintf(stderr, "fuzz_ctl: could not remove %s\n", state);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char err[DLH_ERR_MAX];
	(void)argc;
	(void)argv;
	if (!mkdtemp(state))
		abort();
	struct dlh_engine_opts o = {
		.state_dir = state, .trainer = "/bin/true", .shepherd = "", .launcher = "/bin/false", .cpus = 1,
		.no_isolation = 1, .no_calibrate = 1, .no_probe = 1,
	};
	const char spec[] = "[job]\ndry_run = true\n[data]\ntrain_limit = 256\n";
	if (dlh_engine_open(&eng, &o, err, sizeof err) ||
	    dlh_engine_submit(eng, spec, sizeof spec - 1, 0, &job, err, sizeof err)) {
		fprintf(stderr, "fuzz_ctl: %s\n", err);
		abort();
	}
	atexit(done);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char line[512], err[512];

	if (size >= sizeof line)
		return 0;   /* fs/ops.c refuses longer lines before the engine sees them */
	memcpy(line, data, size);
	line[size] = '\0';
	if (strchr(line, '\n'))
		return 0;   /* fs/ops.c splits a write into lines */
	dlh_engine_ctl(eng, job, 0, line, err, sizeof err);
	dlh_engine_ctl(eng, job, 12345, line, err, sizeof err);
	if (strcmp(line, "recalibrate"))   /* that one measures for seconds */
		dlh_engine_pool_ctl(eng, 12345, line, err, sizeof err);
	return 0;
}
