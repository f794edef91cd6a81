/* handle.c - a run's handle in its job directory (run.handle): what a
 * backend needs to find the run again after the daemon restarts */
#include "engine/run/backend.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HANDLE_MAX 4096   /* largest handle text */

static void handle_path(const char *job_dir, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", job_dir, DLH_RUN_HANDLE_FILE);
}

int dlh_run_save(const char *job_dir, const struct dlh_run *run)
{
	char path[4096], text[HANDLE_MAX];
	int n = snprintf(text, sizeof text, "backend=%s\nhost=%s\npid=%ld\npid_start=%llu\nstarted=%.3f\n",
			 run->backend, run->host, (long)run->pid, run->pid_start, run->started);
	if (n < 0 || (size_t)n >= sizeof text)
		return -EOVERFLOW;
	handle_path(job_dir, path, sizeof path);
	return dlh_write_atomic(path, text, (size_t)n);
}

int dlh_run_load(const char *job_dir, struct dlh_run *run)
{
	char path[4096], v[128], *text = NULL;
	handle_path(job_dir, path, sizeof path);
	int rc = dlh_read_file_nofollow(path, HANDLE_MAX, &text, NULL);
	if (rc)
		return rc;
	memset(run, 0, sizeof *run);
	rc = -EINVAL;
	if (dlh_kv_get(text, "backend", run->backend, sizeof run->backend) ||
	    dlh_kv_get(text, "host", run->host, sizeof run->host) ||
	    dlh_kv_get(text, "pid", v, sizeof v))
		goto out;
	run->pid = (pid_t)strtol(v, NULL, 10);
	if (dlh_kv_get(text, "pid_start", v, sizeof v))
		goto out;
	run->pid_start = strtoull(v, NULL, 10);
	if (!dlh_kv_get(text, "started", v, sizeof v))
		run->started = strtod(v, NULL);
	rc = run->backend[0] && run->pid > 0 ? 0 : -EINVAL;
out:
	free(text);
	if (rc)
		memset(run, 0, sizeof *run);
	return rc;
}

void dlh_run_forget(const char *job_dir)
{
	char path[4096];
	handle_path(job_dir, path, sizeof path);
	unlink(path);
}
