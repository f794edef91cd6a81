/* submit.c - jobs/new: a spec becomes a job, or a rejection in the errors log
 *
 * Parses the spec, decides how it runs (engine/plan/choose), plans it,
 * stores the job's files and record, inserts it and lets the queue start
 * it. Locking: table.h. */
#include "engine/engine.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/jobs/advise.h"
#include "engine/jobs/queue.h"
#include "engine/jobs/table.h"
#include "engine/plan/plan.h"
#include "engine/util/util.h"

/* ---- the errors log ---- */

/* Appends each line of err to the errors log, prefixed with time and uid
 * (O_APPEND, so `tail -f jobs/errors` follows it). When the log has grown to
 * twice DLH_ERRORS_KEEP lines it is rewritten atomically to the newest
 * DLH_ERRORS_KEEP. */
static void log_rejection(struct dlh_engine *e, uid_t uid, const char *err)
{
	char path[4096], when[32];
	snprintf(path, sizeof path, "%s/errors", e->state);
	dlh_time_iso(dlh_now(), when, sizeof when);
	struct dlh_buf add = {0};
	for (const char *l = err; *l;) {
		size_t n = strcspn(l, "\n");
		if (n)
			dlh_buf_printf(&add, "%s uid=%u %.*s\n", when, (unsigned)uid, (int)n, l);
		l += n + (l[n] == '\n');
	}
	if (!add.data)
		return;
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd >= 0) {
		dlh_write_all(fd, add.data, add.len);
		close(fd);
	}
	dlh_buf_free(&add);
	char *all = NULL;
	size_t len = 0, lines = 0, from = 0;
	if (dlh_read_file(path, 16 << 20, &all, &len))
		return;
	for (size_t i = 0; i < len; i++)
		lines += all[i] == '\n';
	if (lines > 2 * DLH_ERRORS_KEEP) {
		while (lines > DLH_ERRORS_KEEP && from < len)
			if (all[from++] == '\n')
				lines--;
		dlh_write_atomic(path, all + from, len - from);
	}
	free(all);
}

void dlh_engine_reject(struct dlh_engine *e, uid_t uid, const char *err)
{
	pthread_mutex_lock(&e->mu);
	log_rejection(e, uid, err);
	pthread_mutex_unlock(&e->mu);
}

/* ---- submitting ---- */

/* Decides how spec runs (engine/choose); a refusal becomes spec error
 * text naming the key it comes from. e->mu not held. */
static int decide(struct dlh_engine *e, const struct dlh_spec *spec, struct dlh_choice *c,
		  char *err, size_t errlen)
{
	char why[1024];
	int rc = eng_choose(e, spec, c, why, sizeof why);

	if (rc == -ETIME)
		snprintf(err, errlen, "spec: [job] deadline: %s\n", why);
	else if (rc == -ENOSPC)
		snprintf(err, errlen, "spec: [train] batch_size: %s\n", why);
	else if (rc)
		snprintf(err, errlen, "spec: %s\n", why);
	return rc ? -EINVAL : 0;
}

int dlh_engine_submit(struct dlh_engine *e, const char *text, size_t len,
		      uid_t uid, long *id, char *err, size_t errlen)
{
	struct dlh_spec *spec = malloc(sizeof *spec);
	struct dlh_plan *plan = malloc(sizeof *plan);
	struct dlh_job *j = calloc(1, sizeof *j);
	struct dlh_choice *choice = malloc(sizeof *choice);
	char *norm = malloc(DLH_SPEC_MAX * 2);
	int rc = -ENOMEM;
	if (!spec || !plan || !j || !norm || !choice) {
		snprintf(err, errlen, "spec: out of memory\n");
		goto out;
	}
	err[0] = '\0';
	rc = dlh_spec_parse(text, len, spec, err, errlen);
	if (!rc)
		rc = decide(e, spec, choice, err, errlen);
	if (!rc) /* the pool must be able to run it at all */
		rc = dlh_plan_make_with(spec, &(struct dlh_plan_override){
						.ranks = choice->ranks, .batch = choice->batch,
						.lr = choice->lr, .warmup_steps = choice->warmup_steps },
					&e->pool, &e->tools, "/", plan, err, errlen);
	if (rc) {
		dlh_engine_reject(e, uid, err);
		goto out;
	}
	int n = dlh_spec_format(spec, norm, DLH_SPEC_MAX * 2);
	if (n < 0) {
		rc = -EINVAL;
		snprintf(err, errlen, "spec: cannot normalize the spec\n");
		dlh_engine_reject(e, uid, err);
		goto out;
	}

	pthread_mutex_lock(&e->mu);
	int queued = 0;
	for (size_t i = 0; i < e->njobs; i++)
		queued += e->jobs[i]->status == DLH_QUEUED;
	if (queued >= e->max_queued) {
		pthread_mutex_unlock(&e->mu);
		snprintf(err, errlen, "spec: the queue is full: %d jobs queued (max_queued=%d); "
			 "submit again when some have started\n", queued, e->max_queued);
		dlh_engine_reject(e, uid, err);
		rc = -EAGAIN;
		goto out;
	}
	j->id = e->next_id;
	j->uid = uid;
	j->status = DLH_QUEUED;
	j->submitted = eng_stamp();
	j->spec = *spec;
	j->priority = spec->priority;
	eng_choice_apply(j, choice);
	if (spec->dry_run) {
		j->status = DLH_PLANNED;
		j->finished = j->submitted;
		snprintf(j->reason, sizeof j->reason, "dry run: estimated and planned, not launched");
	}
	char dir[4096], path[4096], next[32];
	struct dlh_plan_override ov;
	eng_job_dir(e, j->id, dir, sizeof dir);
	snprintf(path, sizeof path, "%s/" DLH_DIR_CHECKPOINTS, dir);
	snprintf(next, sizeof next, "%ld\n", j->id + 1);
	char np[4096];
	snprintf(np, sizeof np, "%s/next_id", e->state);
	/* the id is spent once next_id is on disk, even if the rest fails */
	if ((rc = dlh_write_atomic(np, next, strlen(next))) || (rc = dlh_mkdir_p(path, 0755))) {
		pthread_mutex_unlock(&e->mu);
		snprintf(err, errlen, "spec: cannot create the job in \"%s\": %s\n", dir, strerror(-rc));
		goto out;
	}
	e->next_id++;
	eng_job_file(e, j->id, "spec.ini", path, sizeof path);
	if (!(rc = dlh_write_atomic(path, norm, (size_t)n))) {
		eng_job_file(e, j->id, "submitted.ini", path, sizeof path);
		rc = dlh_write_atomic(path, text, len);
	}
	if (!rc && (rc = dlh_plan_make_with(spec, eng_job_override(j, &ov) ? &ov : NULL, &e->pool,
					    &e->tools, dir, plan, err, errlen)) == 0)
		rc = eng_write_choice(e, j->id, choice, plan);
	if (!rc)
		rc = dlh_job_save(j, dir);
	if (!rc)
		rc = eng_insert(e, j);
	if (rc) {
		pthread_mutex_unlock(&e->mu);
		snprintf(err, errlen, "spec: cannot store the job in \"%s\": %s\n", dir, strerror(-rc));
		goto out;
	}
	eng_job_log(e, j, "submitted by uid %u", (unsigned)uid);
	if (choice->estimated)
		eng_job_log(e, j, "planned: %d x %s, estimated %.1f s, %.0f J%s", choice->ranks,
			    choice->type, choice->est.total_s, choice->est.joules,
			    spec->dry_run ? " (dry run: not launched)" : "");
	else
		eng_job_log(e, j, "not estimated: %s", choice->why);
	*id = j->id;
	j = NULL; /* owned by the table now */
	eng_schedule(e);
	pthread_mutex_unlock(&e->mu);
	rc = 0;
out:
	free(spec);
	free(plan);
	free(j);
	free(choice);
	free(norm);
	return rc;
}
