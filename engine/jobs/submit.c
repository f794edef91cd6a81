/* submit.c - jobs/new: a spec becomes a job, or a rejection in the errors log
 *
 * Parses the spec, checking its data with the submitter's file rights in a
 * thread that the FUSE thread waits for only so long (check.c), and decides
 * how it runs (engine/plan/choose) without e->mu; then, under it, takes the
 * next id tentatively, plans the job once in that id's directory, spends the id, stores the job's files and record,
 * inserts it and lets the queue start it. A refusal (a bad spec, a plan the
 * pool cannot run, a full queue) spends no id and goes to the errors log.
 * Locking: table.h. */
#include "engine/engine.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/live/slots.h"
#include "engine/table/advise.h"
#include "engine/jobs/check.h"
#include "engine/table/disk.h"
#include "engine/jobs/queue.h"
#include "engine/table/table.h"
#include "engine/plan/plan.h"
#include "engine/util/util.h"


/* ---- the errors log ---- */

/* Appends add to the log at path (O_APPEND, so `tail -f jobs/errors`
 * follows it). When the log has grown to twice DLH_ERRORS_KEEP lines it is
 * rewritten atomically to the newest DLH_ERRORS_KEEP. Returns 0, or -errno
 * of the append (nothing of add is left then). */
static int append_capped(const char *path, const struct dlh_buf *add)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
	int rc = fd < 0 ? -errno : 0;
	if (fd >= 0) {
		off_t at = lseek(fd, 0, SEEK_END);
		rc = dlh_write_all(fd, add->data, add->len);
		if (rc && at >= 0 && ftruncate(fd, at) < 0)   /* no half line */
			rc = rc ? rc : -errno;
		close(fd);
	}
	if (rc)
		return rc;
	char *all = NULL;
	size_t len = 0, lines = 0, from = 0;
	if (dlh_read_file(path, 16 << 20, &all, &len))
		return 0;   /* appended: only not cut back */
	for (size_t i = 0; i < len; i++)
		lines += all[i] == '\n';
	if (lines > 2 * DLH_ERRORS_KEEP) {
		while (lines > DLH_ERRORS_KEEP && from < len)
			if (all[from++] == '\n')
				lines--;
		dlh_write_atomic(path, all + from, len - from);
	}
	free(all);
	return 0;
}

/* append_capped, and once more with the reserve given up when the disk is
 * full: a rejection always reaches its submitter. */
static void append_rejection(struct dlh_engine *e, const char *path, const struct dlh_buf *add)
{
	int rc = append_capped(path, add);
	if ((rc == -ENOSPC || rc == -EDQUOT) && eng_disk_release(e))
		append_capped(path, add);
}

/* Appends each line of err, prefixed with time and uid, to the errors log
 * of everyone (STATE/errors, what root and the mounting user read) and to
 * uid's own (STATE/errors.d/UID, what uid reads as jobs/errors). */
static void log_rejection(struct dlh_engine *e, uid_t uid, const char *err)
{
	char path[4096], when[32];
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
	dlh_engine_errors_path(e, 0, path, sizeof path);
	append_rejection(e, path, &add);
	if (uid != 0 && uid != getuid()) {
		snprintf(path, sizeof path, "%s/%s", e->state, DLH_ERRORS_DIR);
		if (!dlh_mkdir_p(path, 0700)) {
			dlh_engine_errors_path(e, uid, path, sizeof path);
			append_rejection(e, path, &add);
		}
	}
	dlh_buf_free(&add);
}

void dlh_engine_reject(struct dlh_engine *e, uid_t uid, const char *err)
{
	pthread_mutex_lock(&e->mu);
	log_rejection(e, uid, err);
	pthread_mutex_unlock(&e->mu);
}

/* ---- submitting ---- */

/* What a submission carries from step to step (malloc'd: it is large). */
struct submission {
	struct eng_checked checked;  /* the spec as parsed, and its data, as checked */
	struct dlh_choice choice;    /* how it runs (engine/plan/choose) */
	struct dlh_plan plan;        /* planned once, in the job's directory */
	struct dlh_job *job;         /* the new job; NULL once the table owns it */
	char dir[4096];              /* STATE/jobs/ID */
	char norm[DLH_SPEC_MAX * 2]; /* the normalized spec (spec.ini) */
	size_t norm_len;             /* its length */
};

/* A submission with nothing done yet, or NULL when out of memory. */
static struct submission *submission_new(void)
{
	struct submission *s = malloc(sizeof *s);
	if (s && !(s->job = calloc(1, sizeof *s->job))) {
		free(s);
		s = NULL;
	}
	return s;
}

/* Frees s and its job unless the table owns it. */
static void submission_free(struct submission *s)
{
	free(s->job);
	free(s);
}

/* Decides how spec runs (engine/choose); a refusal becomes spec error
 * text naming the key it comes from. e->mu not held. */
static int decide(struct dlh_engine *e, const struct dlh_spec *spec,
		  const struct dlh_dataset_shape *shape, struct dlh_choice *c, char *err, size_t errlen)
{
	char why[1024];
	int rc = eng_choose(e, spec, shape, c, why, sizeof why);

	if (rc == -ETIME)
		snprintf(err, errlen, "spec: [job] deadline: %s\n", why);
	else if (rc == -ENOSPC)
		snprintf(err, errlen, "spec: [train] batch_size: %s\n", why);
	else if (rc)
		snprintf(err, errlen, "spec: %s\n", why);
	return rc == -EAGAIN ? rc : rc ? -EINVAL : 0;   /* EAGAIN: not the spec's fault */
}

/* Parses the spec text and reads its data's headers with the submitter's
 * file rights (engine/jobs/check), then decides how it runs and normalizes
 * it. e->mu not held: deciding may wait for a first-mount calibration.
 * Returns 0, or -EINVAL/-EFBIG/-EAGAIN with err (a refusal). */
static int read_spec(struct dlh_engine *e, struct submission *s, const char *text, size_t len,
		     uid_t uid, char *err, size_t errlen)
{
	struct eng_checked *c = &s->checked;
	int rc = eng_check_spec(text, len, uid, e->data_timeout_ms, c, err, errlen);
	if (!rc)
		rc = decide(e, &c->spec, c->have ? &c->shape : NULL, &s->choice, err, errlen);
	if (rc)
		return rc;
	int n = dlh_spec_format(&c->spec, s->norm, sizeof s->norm);
	if (n < 0) {
		snprintf(err, errlen, "spec: cannot normalize the spec\n");
		return -EINVAL;
	}
	s->norm_len = (size_t)n;
	return 0;
}

/* Makes s's job from its spec and decision, with the next id taken
 * tentatively: store_job spends it. e->mu held. */
static void take_id(struct dlh_engine *e, struct submission *s, uid_t uid)
{
	struct dlh_job *j = s->job;
	j->id = e->next_id;
	j->uid = uid;
	j->status = DLH_QUEUED;
	j->submitted = eng_stamp();
	j->spec = s->checked.spec;
	j->priority = s->checked.spec.priority;
	eng_choice_apply(j, &s->choice);
	if (s->checked.spec.dry_run) {
		j->status = DLH_PLANNED;
		j->finished = j->submitted;
		dlh_job_reason(j, NULL, "dry run: estimated and planned, not launched");
	}
	eng_job_dir(e, j->id, s->dir, sizeof s->dir);
}

/* Plans the job, once, in its directory: a spec the pool cannot run is
 * refused here. e->mu held. Returns 0, or -errno with err (a refusal). */
static int plan_job(struct dlh_engine *e, struct submission *s, char *err, size_t errlen)
{
	struct dlh_plan_override ov;
	int avail[DLH_POOL_NODES], rc;
	char why[512];
	if (e->slurm_unheard && !s->job->spec.dry_run) {
		/* no node known yet: it waits, and is planned at its launch */
		memset(&s->plan, 0, sizeof s->plan);
		eng_slurm_unheard_wait(e, s->job);
		return 0;
	}
	rc = dlh_plan_make_with(&s->job->spec, eng_job_override(s->job, &ov) ? &ov : NULL,
				&e->pool, &e->tools, s->dir, &s->plan, err, errlen);
	if (rc)
		return rc;
	eng_plan_types(e, s->job, &s->plan);
	/* where its ranks would go were every node free: the plan's hosts
	 * (at launch they go where there is room then) */
	eng_slots_avail(e, s->plan.gpu, 1, avail);
	if (!dlh_plan_place(&s->plan, &e->pool, avail, eng_job_nodes(e, s->job), why, sizeof why))
		return 0;
	for (int r = 0; r < s->plan.ranks; r++)   /* it waits for its nodes */
		s->plan.node[r] = -1;
	if (!s->job->spec.dry_run && eng_slots_capacity(e, s->plan.gpu) >= s->plan.ranks &&
	    s->job->spec.nodes <= e->pool.nnodes)
		return 0;   /* nodes drained or down now: it waits for them */
	snprintf(err, errlen, "spec: [resources] %s: %s\n", s->job->spec.nodes > 0 ? "nodes" : "ranks",
		 why);
	return -EINVAL;
}

/* Refuses a [resources] disk above the mount's disk_max. e->mu held.
 * Returns 0, or -EINVAL with err. */
static int disk_room(struct dlh_engine *e, const struct dlh_job *j, char *err, size_t errlen)
{
	char want[32], max[32];
	if (e->disk_max <= 0 || j->spec.disk <= e->disk_max)
		return 0;
	dlh_size_text(j->spec.disk, want, sizeof want);
	dlh_size_text(e->disk_max, max, sizeof max);
	snprintf(err, errlen, "spec: [resources] disk: %s is more than this mount lets a job hold "
		 "(disk_max=%s)\n", want, max);
	return -EINVAL;
}

/* Refuses a job when max_queued jobs are queued already. e->mu held.
 * Returns 0, or -EAGAIN with err (a refusal). */
static int queue_room(struct dlh_engine *e, uid_t uid, char *err, size_t errlen)
{
	int queued = 0, mine = 0;
	for (size_t i = 0; i < e->njobs; i++) {
		queued += e->jobs[i]->status == DLH_QUEUED;
		mine += e->jobs[i]->status == DLH_QUEUED && e->jobs[i]->uid == uid;
	}
	if (queued >= e->max_queued) {
		snprintf(err, errlen, "spec: the queue is full: %d jobs queued (max_queued=%d); "
			 "submit again when some have started\n", queued, e->max_queued);
		return -EAGAIN;
	}
	if (e->max_queued_per_user > 0 && mine >= e->max_queued_per_user) {
		snprintf(err, errlen, "spec: uid %u has %d jobs queued (max_queued_per_user=%d); "
			 "submit again when some have started\n", (unsigned)uid, mine,
			 e->max_queued_per_user);
		return -EAGAIN;
	}
	return 0;
}

/* Creates the job's directory and writes its files: the normalized spec,
 * the submitted text, estimate, planner, plan and its record; then spends
 * its id. e->mu held. Returns 0, or -errno with err (the directory may be
 * left half made: store_files removes it). */
static int store_once(struct dlh_engine *e, struct submission *s, const char *text, size_t len,
		      char *err, size_t errlen)
{
	struct dlh_job *j = s->job;
	char path[4096];
	int rc;
	snprintf(path, sizeof path, "%s/" DLH_DIR_CHECKPOINTS, s->dir);
	if (!(rc = dlh_mkdir_p(path, 0755))) {
		snprintf(path, sizeof path, "%s/" DLH_DIR_OUTPUT, s->dir);
		rc = dlh_mkdir_p(path, 0755);
	}
	if (rc) {
		snprintf(err, errlen, "spec: cannot create the job in \"%s\": %s\n", s->dir,
			 strerror(-rc));
		return rc;
	}
	eng_job_file(e, j->id, "spec.ini", path, sizeof path);
	if (!(rc = dlh_write_atomic(path, s->norm, s->norm_len))) {
		eng_job_file(e, j->id, "submitted.ini", path, sizeof path);
		rc = dlh_write_atomic(path, text, len);
	}
	char why[600];
	if (!rc && (rc = eng_job_protect(e, j, why, sizeof why))) {
		snprintf(err, errlen, "spec: cannot keep the job's files private: %s\n", why);
		return rc;
	}
	if (!rc)
		rc = eng_write_choice(e, j, &s->choice, &s->plan);
	if (!rc)
		rc = dlh_job_save(j, s->dir);
	if (!rc)   /* last: a job not stored spends no id */
		rc = eng_spend_id(e, j->id);
	if (rc)
		snprintf(err, errlen, "spec: cannot store the job in \"%s\": %s\n", s->dir,
			 strerror(-rc));
	return rc;
}

/* store_once; on a full disk once more with the daemon's reserve given up
 * (a job filling the disk is stopped by the disk watch). A job that could
 * not be stored leaves no directory and spends no id. e->mu held. Returns
 * 0, or -errno with err. */
static int store_files(struct dlh_engine *e, struct submission *s, const char *text, size_t len,
		       char *err, size_t errlen)
{
	int rc = store_once(e, s, text, len, err, errlen);
	if ((rc == -ENOSPC || rc == -EDQUOT) && eng_disk_release(e)) {
		dlh_remove_tree(s->dir);
		rc = store_once(e, s, text, len, err, errlen);
	}
	if (rc)
		dlh_remove_tree(s->dir);
	return rc;
}

/* Inserts the stored job into the table, which owns it from then on, sets
 * *id and starts its log. e->mu held. Returns 0, or -ENOMEM with err. */
static int insert_job(struct dlh_engine *e, struct submission *s, long *id, char *err,
		      size_t errlen)
{
	struct dlh_job *j = s->job;
	int rc = eng_insert(e, j);
	if (rc) {
		snprintf(err, errlen, "spec: cannot store the job in \"%s\": %s\n", s->dir,
			 strerror(-rc));
		return rc;
	}
	s->job = NULL;
	*id = j->id;
	eng_job_log(e, j, "submitted by uid %u", (unsigned)j->uid);
	if (s->choice.estimated)
		eng_job_log(e, j, "planned: %d x %s, estimated %.1f s, %.0f J%s", s->choice.ranks,
			    s->choice.type, s->choice.est.total_s, s->choice.est.joules,
			    s->checked.spec.dry_run ? " (dry run: not launched)" : "");
	else
		eng_job_log(e, j, "not estimated: %s", s->choice.why);
	return 0;
}

int dlh_engine_submit(struct dlh_engine *e, const char *text, size_t len,
		      uid_t uid, long *id, char *err, size_t errlen)
{
	struct submission *s = submission_new();
	if (!s) {
		snprintf(err, errlen, "spec: out of memory\n");
		return -ENOMEM;
	}
	err[0] = '\0';
	int rc = 0;
	if (geteuid() != 0 && uid != geteuid()) {
		/* a daemon that is not root cannot run a job as its owner */
		snprintf(err, errlen, "spec: this mount runs as uid %u and runs no other user's jobs "
			 "(a team's mount runs as root: README, Sharing a mount)\n", (unsigned)geteuid());
		rc = -EPERM;
	}
	if (!rc)
		rc = read_spec(e, s, text, len, uid, err, errlen);   /* parse, decide: unlocked */
	int refused = rc != 0;
	if (!rc) {
		pthread_mutex_lock(&e->mu);
		take_id(e, s, uid);                          /* tentative: a refusal spends none */
		rc = plan_job(e, s, err, errlen);
		if (!rc)
			rc = disk_room(e, s->job, err, errlen);
		if (!rc)
			rc = queue_room(e, uid, err, errlen);
		if (!rc)
			rc = store_files(e, s, text, len, err, errlen);
		refused = rc != 0;   /* a job not stored is refused too, in the errors */
		if (!rc)
			rc = insert_job(e, s, id, err, errlen);
		if (!rc)
			eng_schedule(e);
		pthread_mutex_unlock(&e->mu);
	}
	if (refused)   /* not under e->mu: dlh_engine_reject takes it */
		dlh_engine_reject(e, uid, err);
	submission_free(s);
	return rc;
}
