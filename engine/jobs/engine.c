/* engine.c - opening and closing the state directory, submit, and the queries of engine.h
 *
 * The job table and records are table.c, starting and watching runs
 * supervise.c, the queue (order, backfill, preemption) queue.c, the ctl
 * verbs ctl.c. Locking: table.h. */
#include "engine/engine.h"

#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine/jobs/advise.h"
#include "engine/jobs/queue.h"
#include "engine/jobs/supervise.h"
#include "engine/jobs/table.h"
#include "engine/run/cgroup.h"
#include "engine/run/launch.h"
#include "engine/plan/plan.h"
#include "engine/run/proc.h"
#include "engine/util/util.h"

#define LOCK_WAIT 5.0            /* seconds to wait for a state directory in use */

/* ---- opening: loading the state directory ---- */

/* dlh-train beside the running program (/proc/self/exe). */
static int trainer_beside_self(char *out, size_t len)
{
	char self[2048];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n < 0)
		return -errno;
	self[n] = '\0';
	char *slash = strrchr(self, '/');
	if (!slash)
		return -ENOENT;
	*slash = '\0';
	snprintf(out, len, "%s/dlh-train", self);
	return access(out, X_OK) ? -errno : 0;
}

/* Resolves the state directory and the tools of o into e, loads the pool
 * file when o names one, and creates STATE/jobs. Returns 0, or -errno with
 * err filled. */
static int setup(struct dlh_engine *e, const struct dlh_engine_opts *o, char *err, size_t errlen)
{
	int rc;
	const char *state = o->state_dir ? o->state_dir : DLH_STATE_DEFAULT;
	if (state[0] != '/') {
		snprintf(err, errlen, "state directory must be an absolute path, got \"%s\"", state);
		return -EINVAL;
	}
	if (strlen(state) >= sizeof e->state - 64 ||
	    (o->trainer && strlen(o->trainer) >= sizeof e->tools.trainer)) {
		snprintf(err, errlen, "a path given is too long");
		return -ENAMETOOLONG;
	}
	snprintf(e->state, sizeof e->state, "%s", state);
	if (o->trainer)
		snprintf(e->tools.trainer, sizeof e->tools.trainer, "%s", o->trainer);
	else if ((rc = trainer_beside_self(e->tools.trainer, sizeof e->tools.trainer))) {
		snprintf(err, errlen, "cannot find dlh-train beside this program: %s", strerror(-rc));
		return rc;
	}
	if (access(e->tools.trainer, X_OK)) {
		snprintf(err, errlen, "cannot execute \"%s\": %s", e->tools.trainer, strerror(errno));
		return -errno;
	}
	if ((rc = dlh_backend_local(&e->backend, o->launcher, err, errlen)))
		return rc;
	if (o->pool_file && (rc = dlh_pool_load(&e->pool, o->pool_file, o->cpus, err, errlen)))
		return rc;
	char dir[4096];
	snprintf(dir, sizeof dir, "%s/jobs", e->state);
	if ((rc = dlh_mkdir_p(dir, 0755)) || (access(dir, W_OK) && (rc = -errno))) {
		snprintf(err, errlen, "cannot use state directory \"%s\": %s", e->state, strerror(-rc));
		return rc;
	}
	return 0;
}

/* Takes the lock on STATE/lock, waiting up to wait seconds for another
 * daemon to let go of it (an unmount returns before the old daemon has
 * stopped its jobs). One daemon per state directory: ids and records
 * must have one writer. Returns the locked descriptor, or -errno with err. */
static int lock_state(const char *state, double wait, char *err, size_t errlen)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/lock", state);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		snprintf(err, errlen, "cannot open \"%s\": %s", path, strerror(errno));
		return -errno;
	}
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	double until = dlh_mono() + wait;
	while (fcntl(fd, F_SETLK, &fl) < 0) {
		if ((errno != EAGAIN && errno != EACCES) || dlh_mono() >= until) {
			struct flock who = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
			if (fcntl(fd, F_GETLK, &who) == 0 && who.l_type != F_UNLCK)
				snprintf(err, errlen, "state directory \"%s\" is in use by another dlhfs (pid %ld)",
					 state, (long)who.l_pid);
			else
				snprintf(err, errlen, "cannot lock \"%s\": %s", path, strerror(errno));
			close(fd);
			return -EBUSY;
		}
		struct timespec ts = { 0, 50 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	return fd;
}

int dlh_engine_check(const struct dlh_engine_opts *o, char *err, size_t errlen)
{
	struct dlh_engine *e = calloc(1, sizeof *e);
	if (!e)
		return -ENOMEM;
	int rc = setup(e, o, err, errlen);
	if (!rc) {
		int fd = lock_state(e->state, LOCK_WAIT, err, errlen);
		if (fd < 0)
			rc = fd;
		else
			close(fd); /* released: open takes it again after daemonizing */
	}
	free(e);
	return rc;
}

int dlh_engine_calibrate(const struct dlh_engine_opts *o, struct dlh_buf *out,
			 char *err, size_t errlen)
{
	struct dlh_engine *e = calloc(1, sizeof *e);
	if (!e)
		return -ENOMEM;
	int rc = setup(e, o, err, errlen);
	if (!rc && (e->lock_fd = lock_state(e->state, 0, err, errlen)) < 0)
		rc = e->lock_fd;
	if (rc) {
		free(e);
		return rc;
	}
	if (!o->pool_file)   /* else setup() loaded it */
		dlh_pool_detect(&e->pool, o->cpus);
	pthread_mutex_init(&e->mu, NULL);
	pthread_cond_init(&e->changed, NULL);
	rc = eng_calibrate_now(e, out, err, errlen);
	pthread_cond_destroy(&e->changed);
	pthread_mutex_destroy(&e->mu);
	close(e->lock_fd);
	free(e);
	return rc;
}

int dlh_engine_open(struct dlh_engine **out, const struct dlh_engine_opts *o,
		    char *err, size_t errlen)
{
	struct dlh_engine *e = calloc(1, sizeof *e);
	if (!e)
		return -ENOMEM;
	int rc = setup(e, o, err, errlen);
	if (!rc && (e->lock_fd = lock_state(e->state, LOCK_WAIT, err, errlen)) < 0)
		rc = e->lock_fd;
	if (rc) {
		free(e);
		return rc;
	}
	e->grace = o->kill_grace > 0 ? o->kill_grace : DLH_KILL_GRACE;
	e->suspend_grace = o->suspend_grace > 0 ? o->suspend_grace : DLH_SUSPEND_GRACE;
	e->max_queued = o->max_queued > 0 ? o->max_queued : DLH_MAX_QUEUED;
	e->next_id = 1;
	if (!o->pool_file)   /* else setup() loaded it */
		dlh_pool_detect(&e->pool, o->cpus);
	if (!o->no_isolation)
		dlh_cgroup_setup(&e->cg);
	else
		snprintf(e->cg.why, sizeof e->cg.why, "turned off (-o isolation=off)");
	e->holder = calloc((size_t)e->pool.node.cpus, sizeof *e->holder);
	if (!e->holder) {
		dlh_cgroup_teardown(&e->cg);
		close(e->lock_fd);
		free(e);
		return -ENOMEM;
	}

	if ((rc = eng_table_load(e, err, errlen))) {
		eng_table_free(e);
		free(e->holder);
		dlh_cgroup_teardown(&e->cg);
		close(e->lock_fd);
		free(e);
		return rc;
	}
	pthread_mutex_init(&e->mu, NULL);
	pthread_condattr_t ca; /* deadlines on the monotonic clock */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&e->changed, &ca);
	pthread_cond_init(&e->timer_cv, &ca);
	pthread_condattr_destroy(&ca);
	e->on_run_end = eng_schedule;
	if ((rc = eng_supervise_start(e, err, errlen))) {
		eng_table_free(e);
		free(e->holder);
		dlh_cgroup_teardown(&e->cg);
		close(e->lock_fd);
		free(e);
		return rc;
	}
	eng_calib_open(e, o->no_calibrate);
	pthread_mutex_lock(&e->mu);
	for (size_t i = 0; i < e->njobs; i++) {
		struct dlh_job *j = e->jobs[i];
		if (j->status == DLH_RUNNING || j->status == DLH_PLANNING)
			eng_job_recover(e, j);
	}
	eng_schedule(e);
	pthread_mutex_unlock(&e->mu);
	*out = e;
	return 0;
}

void dlh_engine_close(struct dlh_engine *e)
{
	if (!e)
		return;
	eng_supervise_stop(e);
	eng_calib_close(e);
	eng_table_free(e);
	free(e->holder);
	dlh_cgroup_teardown(&e->cg);
	pthread_cond_destroy(&e->changed);
	pthread_cond_destroy(&e->timer_cv);
	pthread_mutex_destroy(&e->mu);
	close(e->lock_fd); /* the next daemon may have the directory now */
	free(e);
}

/* ---- the public verbs ---- */

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

int dlh_engine_job(struct dlh_engine *e, long id, struct dlh_job *out)
{
	pthread_mutex_lock(&e->mu);
	struct dlh_job *j = eng_find(e, id);
	if (j)
		*out = *j;
	pthread_mutex_unlock(&e->mu);
	return j ? 0 : -ENOENT;
}

size_t dlh_engine_jobs(struct dlh_engine *e, long *ids, size_t max)
{
	pthread_mutex_lock(&e->mu);
	size_t n = e->njobs;
	for (size_t i = 0; i < n && i < max; i++)
		ids[i] = e->jobs[i]->id;
	pthread_mutex_unlock(&e->mu);
	return n;
}

long dlh_engine_find_name(struct dlh_engine *e, const char *name)
{
	long id = -ENOENT;
	pthread_mutex_lock(&e->mu);
	for (size_t i = e->njobs; i-- > 0;)
		if (!strcmp(e->jobs[i]->spec.name, name)) {
			id = e->jobs[i]->id;
			break;
		}
	pthread_mutex_unlock(&e->mu);
	return id;
}

void dlh_engine_job_dir(struct dlh_engine *e, long id, char *buf, size_t len)
{
	eng_job_dir(e, id, buf, len);
}

void dlh_engine_errors_path(struct dlh_engine *e, char *buf, size_t len)
{
	snprintf(buf, len, "%s/errors", e->state);
}

void dlh_engine_pool(struct dlh_engine *e, struct dlh_pool *pool, struct dlh_usage *use)
{
	pthread_mutex_lock(&e->mu);
	if (pool)
		*pool = e->pool;
	if (use) {
		memset(use, 0, sizeof *use);
		use->slots_used = e->slots_used;
		for (size_t i = 0; i < e->njobs; i++) {
			use->running += e->jobs[i]->status == DLH_RUNNING;
			use->queued += e->jobs[i]->status == DLH_QUEUED;
			use->suspended += e->jobs[i]->status == DLH_SUSPENDED;
		}
	}
	pthread_mutex_unlock(&e->mu);
}

size_t dlh_engine_running(struct dlh_engine *e, long *ids, int *ranks, size_t max)
{
	size_t n = 0;
	pthread_mutex_lock(&e->mu);
	for (size_t i = 0; i < e->njobs; i++) {
		if (e->jobs[i]->status != DLH_RUNNING)
			continue;
		if (n < max) {
			ids[n] = e->jobs[i]->id;
			ranks[n] = e->jobs[i]->ranks;
		}
		n++;
	}
	pthread_mutex_unlock(&e->mu);
	return n;
}

void dlh_engine_isolation(struct dlh_engine *e, char *buf, size_t len)
{
	pthread_mutex_lock(&e->mu);
	if (e->cg.mode == DLH_CG_NONE)
		snprintf(buf, len, "none: %s", e->cg.why);
	else
		snprintf(buf, len, "cgroup v%d", e->cg.mode == DLH_CG_V1 ? 1 : 2);
	pthread_mutex_unlock(&e->mu);
}

int dlh_engine_wait(struct dlh_engine *e, long id, double timeout)
{
	double until = dlh_mono() + timeout;
	pthread_mutex_lock(&e->mu);
	struct dlh_job *j = eng_find(e, id);
	int rc = j ? 0 : -ENOENT;
	while (j && !dlh_status_terminal(j->status)) {
		struct timespec ts;
		dlh_mono_ts(until, &ts);
		if (pthread_cond_timedwait(&e->changed, &e->mu, &ts) == ETIMEDOUT &&
		    !dlh_status_terminal(j->status)) {
			rc = -ETIMEDOUT;
			break;
		}
	}
	pthread_mutex_unlock(&e->mu);
	return rc;
}
