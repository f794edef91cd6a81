/* job.c - one job's record: status, times, its plan; stored as key=value */
#include "engine/table/job.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/util/util.h"

static const char *const status_names[] = {
	[DLH_QUEUED] = "queued",
	[DLH_PLANNING] = "planning",
	[DLH_RUNNING] = "running",
	[DLH_SUCCEEDED] = "succeeded",
	[DLH_FAILED] = "failed",
	[DLH_CANCELLED] = "cancelled",
	[DLH_SUSPENDED] = "suspended",
	[DLH_PLANNED] = "planned",
};

const char *dlh_status_name(enum dlh_status s)
{
	if ((unsigned)s >= sizeof status_names / sizeof status_names[0])
		return "unknown";
	return status_names[s];
}

int dlh_status_terminal(enum dlh_status s)
{
	return s == DLH_SUCCEEDED || s == DLH_FAILED || s == DLH_CANCELLED || s == DLH_PLANNED;
}

void dlh_job_reason(struct dlh_job *j, const char *detail, const char *fmt, ...)
{
	j->reason[0] = '\0';
	if (fmt) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(j->reason, sizeof j->reason, fmt, ap);
		va_end(ap);
	}
	snprintf(j->detail, sizeof j->detail, "%s", detail && strcmp(detail, j->reason) ? detail : "");
	/* one line each: the record keeps key=value lines */
	j->reason[strcspn(j->reason, "\n")] = '\0';
	j->detail[strcspn(j->detail, "\n")] = '\0';
}

const char *dlh_job_reason_full(const struct dlh_job *j)
{
	return j->detail[0] ? j->detail : j->reason;
}

int dlh_job_save(const struct dlh_job *j, const char *dir)
{
	char path[4096];
	struct dlh_buf b = {0};
	dlh_buf_printf(&b,
		"id=%ld\nuid=%u\nstatus=%s\nreason=%s\ndetail=%s\nsubmitted=%.3f\nstarted=%.3f\n"
		"finished=%.3f\nranks=%d\nrestarts=%d\nexit=%d\n"
		"priority=%d\nsuspends=%d\nresumable=%d\ncpu_s=%.3f\npeak_mem=%lld\n",
		j->id, (unsigned)j->uid, dlh_status_name(j->status), j->reason, j->detail,
		j->submitted, j->started, j->finished, j->ranks, j->restarts, j->exit_code, j->priority, j->suspends,
		j->resumable, j->cpu_s, j->peak_mem);
	if (j->plan_ranks > 0) {
		dlh_buf_printf(&b, "plan_ranks=%d\nplan_lr=%.17g\nplan_warmup=%d\nplan_nodes=%d\n"
			       "est_total=%.3f\nplan_batch=", j->plan_ranks, j->plan_lr, j->plan_warmup,
			       j->plan_nodes, j->est_total);
		for (int r = 0; r < j->plan_ranks; r++)
			dlh_buf_printf(&b, "%s%d", r ? "," : "", j->plan_batch[r]);
		dlh_buf_printf(&b, "\n");
		if (j->plan_parts[0])
			dlh_buf_printf(&b, "plan_parts=%s\n", j->plan_parts);
	}
	if (j->profile_phase > 0) {
		dlh_buf_printf(&b, "profile_phase=%d\nprofile_counts=", j->profile_phase);
		for (int k = 0; k < j->profile_n; k++)
			dlh_buf_printf(&b, "%s%d", k ? "," : "", j->profile_counts[k]);
		dlh_buf_printf(&b, "\n");
	}
	if (!b.data)
		return -ENOMEM;
	snprintf(path, sizeof path, "%s/job", dir);
	int rc = dlh_write_atomic(path, b.data, b.len);
	dlh_buf_free(&b);
	return rc;
}

static long kv_long(const char *text, const char *key)
{
	char v[64];
	return dlh_kv_get(text, key, v, sizeof v) ? 0 : strtol(v, NULL, 10);
}

static double kv_double(const char *text, const char *key)
{
	char v[64];
	return dlh_kv_get(text, key, v, sizeof v) ? 0 : strtod(v, NULL);
}

/* The planner's decision of a record, if it has one and it is whole. */
static void load_plan(struct dlh_job *j, const char *text)
{
	enum { LIST = DLH_JOB_RANKS * 12 };
	int n = (int)kv_long(text, "plan_ranks"), r = 0;
	char *list = malloc(LIST);

	if (!list)
		return;
	if (n >= 1 && n <= DLH_JOB_RANKS && !dlh_kv_get(text, "plan_batch", list, LIST))
		for (char *s = list, *end; r < n && *s; s = end + (*end == ',')) {
			long b = strtol(s, &end, 10);
			if (end == s || b < 0)   /* 0: a [job] command's rank (no batch) */
				break;
			j->plan_batch[r++] = (int)b;
		}
	free(list);
	if (r != n || n < 1)
		return;
	j->plan_ranks = n;
	j->plan_lr = kv_double(text, "plan_lr");
	j->plan_warmup = (int)kv_long(text, "plan_warmup");
	j->plan_nodes = (int)kv_long(text, "plan_nodes");
	if (dlh_kv_get(text, "plan_parts", j->plan_parts, sizeof j->plan_parts))
		j->plan_parts[0] = '\0';
	j->est_total = kv_double(text, "est_total");
}

/* A [job] command's profile runs still to do, if the record has them: it
 * is profiled again from its first (what earlier ones measured is gone). */
static void load_profile(struct dlh_job *j, const char *text)
{
	char list[64];
	int n = 0;
	if ((int)kv_long(text, "profile_phase") < 1 || dlh_kv_get(text, "profile_counts", list, sizeof list))
		return;
	for (char *s = list, *end; n < DLH_PROFILE_RUNS && *s; s = end + (*end == ',')) {
		long r = strtol(s, &end, 10);
		if (end == s || r < 1 || r > DLH_JOB_RANKS)
			return;
		j->profile_counts[n++] = (int)r;
	}
	if (n < 1)
		return;
	j->profile_n = n;
	j->profile_phase = 1;
	j->plan_ranks = j->profile_counts[0];
}

int dlh_job_load(struct dlh_job *j, const char *dir)
{
	char path[4096];
	char *text, *spec;
	size_t speclen;
	memset(j, 0, sizeof *j);
	snprintf(path, sizeof path, "%s/job", dir);
	int rc = dlh_read_file_nofollow(path, 64 * 1024, &text, NULL);
	if (rc)
		return rc;
	char status[32] = "";
	dlh_kv_get(text, "status", status, sizeof status);
	j->status = (enum dlh_status)-1;
	for (size_t i = 0; i < sizeof status_names / sizeof status_names[0]; i++)
		if (!strcmp(status, status_names[i]))
			j->status = (enum dlh_status)i;
	j->id = kv_long(text, "id");
	j->uid = (uid_t)kv_long(text, "uid");
	dlh_kv_get(text, "reason", j->reason, sizeof j->reason);
	j->detail[0] = '\0';
	j->cpu_s = kv_double(text, "cpu_s");
	j->peak_mem = (long long)kv_double(text, "peak_mem");   /* a record written before details has none */
	dlh_kv_get(text, "detail", j->detail, sizeof j->detail);
	j->submitted = kv_double(text, "submitted");
	j->started = kv_double(text, "started");
	j->finished = kv_double(text, "finished");
	char v[64];
	j->ranks = (int)kv_long(text, "ranks");
	j->restarts = (int)kv_long(text, "restarts");
	j->exit_code = (int)kv_long(text, "exit");
	j->priority = (int)kv_long(text, "priority");
	int has_priority = !dlh_kv_get(text, "priority", v, sizeof v);
	j->suspends = (int)kv_long(text, "suspends");
	j->resumable = kv_long(text, "resumable") != 0;
	load_plan(j, text);
	load_profile(j, text);
	free(text);
	if ((int)j->status < 0 || j->id <= 0)
		return -EINVAL;

	snprintf(path, sizeof path, "%s/spec.ini", dir);
	rc = dlh_read_file_nofollow(path, DLH_SPEC_MAX, &spec, &speclen);
	if (rc)
		return rc;
	char err[DLH_ERR_MAX];
	rc = dlh_spec_parse_flags(spec, speclen, &j->spec, err, sizeof err, DLH_SPEC_STORED);
	free(spec);
	if (!rc && !has_priority) /* a record from before priorities */
		j->priority = j->spec.priority;
	return rc ? -EINVAL : 0;
}
