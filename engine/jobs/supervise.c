/* supervise.c - starting a planned run and watching it: its waiter, time limits, grace periods, a run found after a restart
 *
 * A run is started and signalled only through engine/run/backend.h. When a
 * run ends its waiter records why and calls e->on_run_end (the queue) so
 * that this file never calls up into queue.c, which calls it. */
#include "engine/jobs/supervise.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/jobs/advise.h"
#include "engine/jobs/table.h"
#include "engine/plan/plan.h"
#include "engine/run/cgroup.h"
#include "engine/util/util.h"

/* What the waiter thread of one run gets. */
struct waiter_arg {
	struct dlh_engine *e;        /* owner */
	struct dlh_job *job;         /* the job whose run it waits for */
	struct dlh_run run;          /* that run */
};

#define FAILURE_SCAN (1 << 20)   /* bytes of log searched for why a run failed */

/* ---- why a run failed ---- */

/* Finds the most telling line of a failed run in its log: a trainer error,
 * the launcher's note about a rank that died, or an exec failure. */
static void failure_reason(const struct dlh_engine *e, const struct dlh_job *j,
			   char *out, size_t len)
{
	static const char *const marks[] = {
		"noticed that process rank", "dlh-train: rank", "ERROR: AddressSanitizer",
		"ERROR: LeakSanitizer", "runtime error:", "MPI_ABORT was invoked",
	};
	char path[4096];
	out[0] = '\0';
	eng_job_file(e, j->id, DLH_FILE_LOG, path, sizeof path);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	struct stat st;
	size_t want = 0;
	if (!fstat(fd, &st))
		want = st.st_size > FAILURE_SCAN ? FAILURE_SCAN : (size_t)st.st_size;
	char *text = malloc(want + 1);
	ssize_t n = text ? pread(fd, text, want, st.st_size - (off_t)want) : -1;
	close(fd);
	if (n < 0) {
		free(text);
		return;
	}
	text[n] = '\0';
	/* only this run: from the last launch on */
	char *from = text;
	for (char *p = strstr(text, "dlhfs: launching"); p; p = strstr(p + 1, "dlhfs: launching"))
		from = p;
	for (size_t m = 0; m < sizeof marks / sizeof marks[0] && !out[0]; m++) {
		char *hit = NULL;
		for (char *p = strstr(from, marks[m]); p; p = strstr(p + 1, marks[m]))
			hit = p;
		if (!hit)
			continue;
		char *bol = hit;
		while (bol > from && bol[-1] != '\n')
			bol--;
		size_t l = strcspn(bol, "\n");
		if (l >= len)
			l = len - 1;
		memcpy(out, bol, l);
		out[l] = '\0';
	}
	free(text);
}

/* 1 when path exists. */
static int file_exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

/* ---- running a job ---- */

static void *waiter_main(void *arg);

/* Plans and starts job j. Called with e->mu held. Returns 0, or -errno
 * after marking the job failed with the reason. */
int eng_job_launch(struct dlh_engine *e, struct dlh_job *j)
{
	char dir[4096], path[4096], err[1024];
	eng_job_dir(e, j->id, dir, sizeof dir);
	struct dlh_plan *plan = malloc(sizeof *plan);
	if (!plan)
		return -ENOMEM;
	j->status = DLH_PLANNING;
	struct dlh_plan_override ov;
	int rc = dlh_plan_make_with(&j->spec, eng_job_override(j, &ov) ? &ov : NULL, &e->pool,
				    &e->tools, dir, plan, err, sizeof err);
	if (rc) {
		err[strcspn(err, "\n")] = '\0';
		goto fail;
	}
	if (plan->ranks > e->pool.node.cpus - e->slots_used) {
		snprintf(err, sizeof err, "internal error: %d cpu slots needed, %d free", plan->ranks,
			 e->pool.node.cpus - e->slots_used);
		rc = -EAGAIN;
		goto fail;
	}
	/* the lowest free slots, one per rank */
	for (int r = 0, s = 0; r < plan->ranks; s++)
		if (!e->holder[s])
			plan->slot[r++] = s;
	if ((rc = dlh_plan_pin(plan))) {
		snprintf(err, sizeof err, "spec: the command line is longer than %d bytes",
			 DLH_ARGV_BYTES);
		goto fail;
	}
	if ((rc = eng_write_plan(e, j->id, plan))) {
		snprintf(err, sizeof err, "cannot write the plan: %s", strerror(-rc));
		goto fail;
	}

	struct eng_env env;
	eng_run_env(e, j->id, plan->ranks, &env);
	eng_job_log(e, j, "launching %d rank%s on %s (restart %d)", plan->ranks,
		plan->ranks == 1 ? "" : "s", plan->host, j->restarts);
	eng_job_file(e, j->id, DLH_FILE_LOG, path, sizeof path);
	struct waiter_arg *wa = malloc(sizeof *wa);
	if (!wa) {
		rc = -ENOMEM;
		snprintf(err, sizeof err, "out of memory");
		goto fail;
	}
	/* isolation: a cpuset of the run's slots and its memory limit */
	struct dlh_cgroup cg;
	int join[3] = { -1, -1, -1 };
	memset(&cg, 0, sizeof cg);
	if (e->cg.mode != DLH_CG_NONE) {
		char name[64], why[512], lim[32] = "none";
		snprintf(name, sizeof name, "%ld-%lu", j->id, ++e->launches);
		int crc = dlh_cgroup_create(&e->cg, name, plan->slot, plan->ranks, j->spec.memory,
					    &cg, why, sizeof why);
		if (!crc && (crc = dlh_cgroup_join_fds(&cg, join))) {
			snprintf(why, sizeof why, "cannot open cgroup.procs: %s", strerror(-crc));
			dlh_cgroup_destroy(&cg);
		}
		if (j->spec.memory > 0)
			dlh_size_text(j->spec.memory, lim, sizeof lim);
		if (crc)
			eng_job_log(e, j, "isolation: none for this run: %s", why);
		else
			eng_job_log(e, j, "isolation: cgroup v%d \"%s\", memory limit %s",
				e->cg.mode == DLH_CG_V1 ? 1 : 2, cg.cpuset, lim);
	} else if (j->spec.memory > 0) {
		eng_job_log(e, j, "isolation: none, the memory limit is not enforced: %s", e->cg.why);
	}
	struct dlh_launch l = {
		.argv = plan->argv, .ranks = plan->ranks, .env = env.v, .job_dir = dir,
		.log_path = path, .join = join,
	};
	rc = e->backend.ops->start(&e->backend, &l, &j->run, err, sizeof err);
	for (int k = 0; join[k] >= 0; k++)
		close(join[k]);
	if (rc) {
		free(wa);
		dlh_cgroup_destroy(&cg);
		goto fail;
	}
	j->cg = cg;
	j->status = DLH_RUNNING;
	j->reason[0] = '\0';
	j->run_started = eng_stamp();
	if (j->started == 0)
		j->started = j->run_started;
	j->finished = 0;
	j->ranks = plan->ranks;
	for (int r = 0; r < plan->ranks; r++)
		e->holder[plan->slot[r]] = j->id;
	e->slots_used += plan->ranks;
	j->limit_at = j->spec.time_limit > 0 ? dlh_mono() + (double)j->spec.time_limit : 0;
	j->timed_out = 0;
	j->wait[0] = '\0';
	if (j->limit_at)
		pthread_cond_signal(&e->timer_cv);
	eng_job_save(e, j);
	*wa = (struct waiter_arg){ .e = e, .job = j, .run = j->run };
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_t t;
	e->waiters++;
	if ((rc = pthread_create(&t, &attr, waiter_main, wa))) {
		/* without a waiter nobody would reap it: stop it and say so */
		struct dlh_run_end end;
		e->waiters--;
		e->backend.ops->signal(&e->backend, &j->run, DLH_VERB_KILL);
		e->backend.ops->wait(&e->backend, &j->run, dir, 1, &end);
		e->slots_used -= plan->ranks;
		for (int r = 0; r < plan->ranks; r++)
			e->holder[plan->slot[r]] = 0;
		memset(&j->run, 0, sizeof j->run);
		dlh_cgroup_destroy(&j->cg);
		free(wa);
		snprintf(err, sizeof err, "cannot start a supervisor thread: %s", strerror(rc));
		rc = -rc;
		pthread_attr_destroy(&attr);
		goto fail;
	}
	pthread_attr_destroy(&attr);
	free(plan);
	pthread_cond_broadcast(&e->changed);
	return 0;
fail:
	free(plan);
	j->status = DLH_FAILED;
	j->finished = eng_stamp();
	snprintf(j->reason, sizeof j->reason, "%s", err);
	eng_job_log(e, j, "failed: %s", err);
	eng_job_save(e, j);
	pthread_cond_broadcast(&e->changed);
	return rc;
}

/* Handles the end of job j's run (as its backend saw it); cg: the run's
 * cgroups, taken off the job (the caller removes them). e->mu held. */
static void job_exited(struct dlh_engine *e, struct dlh_job *j, const struct dlh_run_end *end,
		       const struct dlh_cgroup *cg)
{
	char path[4096];
	int oom = dlh_cgroup_oom_kills(cg);
	int leftover = end->leftover;
	double run_started = j->run_started;
	e->slots_used -= j->ranks;
	for (int s = 0; s < e->pool.node.cpus; s++)
		if (e->holder[s] == j->id)
			e->holder[s] = 0;
	j->run_started = 0;
	j->limit_at = 0;
	memset(&j->run, 0, sizeof j->run);
	j->kill_at = 0;
	j->term_at = 0;
	j->exit_code = end->state == DLH_RUN_EXITED ? end->exit_code : -SIGKILL;
	if (leftover)
		eng_job_log(e, j, "killed %d leftover process%s of the run", leftover,
			leftover == 1 ? "" : "es");
	if (end->state != DLH_RUN_EXITED)
		eng_job_log(e, j, "the run was lost: its launcher could not be waited for");
	else if (j->exit_code >= 0)
		eng_job_log(e, j, "%s exited with status %d", e->backend.launcher_name, j->exit_code);
	else
		eng_job_log(e, j, "%s killed by signal %d (%s)", e->backend.launcher_name,
			-j->exit_code, strsignal(-j->exit_code));

	eng_job_file(e, j->id, DLH_FILE_RESULT, path, sizeof path);
	if (j->cancelling) {
		j->status = DLH_CANCELLED;
		j->finished = eng_stamp();
	} else if (oom > 0 && !(j->exit_code == 0 && (j->spec.command[0] || file_exists(path)))) {
		char lim[32];
		dlh_size_text(cg->limit, lim, sizeof lim);
		eng_job_log(e, j, "out of memory: the kernel killed %d process%s of the run in its cgroup "
			"(limit %s)", oom, oom == 1 ? "" : "es", lim);
		j->status = DLH_FAILED;
		j->finished = eng_stamp();
		snprintf(j->reason, sizeof j->reason, "out of memory (limit %s)", lim);
	} else if (j->timed_out && !(j->exit_code == 0 && (j->spec.command[0] || file_exists(path)))) {
		char lim[32];
		dlh_duration((double)j->spec.time_limit, lim, sizeof lim);
		j->status = DLH_FAILED;
		j->finished = eng_stamp();
		snprintf(j->reason, sizeof j->reason, "time limit %s reached", lim);
	} else if (j->exit_code == 0 && (j->spec.command[0] || file_exists(path))) {
		j->status = DLH_SUCCEEDED;
		j->reason[0] = '\0';
		j->finished = eng_stamp();
		eng_job_actuals(e, j, j->finished - run_started);
	} else if (j->exit_code == DLH_EXIT_SUSPENDED || j->suspending) {
		/* stopped at a checkpoint (or, past the grace, stopped anyway):
		 * not a failure; resume restarts from the newest checkpoint. A
		 * victim of preemption waits in the queue to resume by itself. */
		j->status = j->preempted_by ? DLH_QUEUED : DLH_SUSPENDED;
		j->suspends++;
		if (!j->suspending)
			snprintf(j->reason, sizeof j->reason,
				 "the run stopped at a checkpoint by itself (exit status %d)",
				 DLH_EXIT_SUSPENDED);
		else if (j->exit_code != DLH_EXIT_SUSPENDED && strlen(j->reason) < 200)
			snprintf(j->reason + strlen(j->reason), sizeof j->reason - strlen(j->reason),
				 "; the run did not stop at a checkpoint, it resumes from its newest one");
	} else if (e->stopping) {
		j->status = DLH_QUEUED;
		snprintf(j->reason, sizeof j->reason,
			 "interrupted: dlhfs stopped while the job ran; it resumes from its newest checkpoint at the next mount");
	} else {
		char why[DLH_REASON_MAX - 64];
		failure_reason(e, j, why, sizeof why);
		if (!why[0]) {
			if (j->exit_code == 0)
				snprintf(why, sizeof why, "the trainer exited without writing a result");
			else if (j->exit_code > 0)
				snprintf(why, sizeof why, "%s exited with status %d",
					 e->backend.launcher_name, j->exit_code);
			else
				snprintf(why, sizeof why, "%s was killed by signal %d",
					 e->backend.launcher_name, -j->exit_code);
		}
		if (j->spec.restart == DLH_RESTART_ON_FAILURE && j->restarts < j->spec.max_restarts) {
			j->restarts++;
			j->status = DLH_QUEUED;
			snprintf(j->reason, sizeof j->reason, "restarting (%d of %d) after: %s",
				 j->restarts, j->spec.max_restarts, why);
		} else {
			j->status = DLH_FAILED;
			j->finished = eng_stamp();
			snprintf(j->reason, sizeof j->reason, "%s", why);
		}
	}
	j->cancelling = 0;
	j->suspending = 0;
	j->preempted_by = 0;
	j->timed_out = 0;
	eng_job_log(e, j, "%s%s%s", dlh_status_name(j->status), j->reason[0] ? ": " : "", j->reason);
	eng_job_save(e, j);
	pthread_cond_broadcast(&e->changed);
	if (!e->stopping && e->on_run_end)
		e->on_run_end(e);   /* the queue: slots are free (see table.h) */
}

/* The thread that waits for one run (arg: its struct waiter_arg, freed
 * here): blocks in the backend's wait without e->mu, then records the end
 * and removes the run's cgroups. */
static void *waiter_main(void *arg)
{
	struct waiter_arg *wa = arg;
	struct dlh_engine *e = wa->e;
	struct dlh_run_end end;
	char dir[4096];
	eng_job_dir(e, wa->job->id, dir, sizeof dir);   /* e->state never changes */
	e->backend.ops->wait(&e->backend, &wa->run, dir, 1, &end);
	pthread_mutex_lock(&e->mu);
	struct dlh_cgroup cg = wa->job->cg;
	memset(&wa->job->cg, 0, sizeof wa->job->cg);
	job_exited(e, wa->job, &end, &cg);
	pthread_mutex_unlock(&e->mu);
	dlh_cgroup_destroy(&cg); /* waits for stragglers: not under the lock */
	pthread_mutex_lock(&e->mu);
	e->waiters--;
	pthread_cond_broadcast(&e->changed);
	pthread_mutex_unlock(&e->mu);
	free(wa);
	return NULL;
}

/* ---- the timer thread ---- */

/* The timer thread (arg: the engine): terminates runs past their time limit
 * or their suspend grace and kills those past their kill grace; ends once
 * the engine stops and no waiter is left. */
static void *timer_main(void *arg)
{
	struct dlh_engine *e = arg;
	pthread_mutex_lock(&e->mu);
	while (!(e->stopping && e->waiters == 0)) {
		double now = dlh_mono(), next = 0;
		for (size_t i = 0; i < e->njobs; i++) {
			struct dlh_job *j = e->jobs[i];
			if (j->limit_at && j->run.pid && !j->kill_at && !j->cancelling) {
				if (j->limit_at <= now) {
					char lim[32];
					dlh_duration((double)j->spec.time_limit, lim, sizeof lim);
					eng_job_log(e, j, "time limit %s reached: SIGTERM to the run", lim);
					j->limit_at = 0;
					j->timed_out = 1;
					eng_job_terminate(e, j);
				} else if (!next || j->limit_at < next) {
					next = j->limit_at;
				}
			}
			if (j->term_at && j->run.pid && !j->kill_at) {
				if (j->term_at <= now) {
					eng_job_log(e, j, "the run did not suspend within %.0f s: SIGTERM",
						e->suspend_grace);
					j->term_at = 0;
					eng_job_terminate(e, j);
				} else if (!next || j->term_at < next) {
					next = j->term_at;
				}
			}
			if (!j->kill_at || !j->run.pid)
				continue;
			if (j->kill_at <= now) {
				int n = eng_job_signal(e, j, DLH_VERB_KILL);
				n = n < 0 ? 0 : n;
				eng_job_log(e, j, "grace period over: SIGKILL to %d process%s", n,
					n == 1 ? "" : "es");
				j->kill_at = 0;
			} else if (!next || j->kill_at < next) {
				next = j->kill_at;
			}
		}
		if (!next) {
			pthread_cond_wait(&e->timer_cv, &e->mu);
		} else {
			struct timespec ts;
			dlh_mono_ts(next, &ts);
			pthread_cond_timedwait(&e->timer_cv, &e->mu, &ts);
		}
	}
	pthread_mutex_unlock(&e->mu);
	return NULL;
}

/* ---- signals ---- */

int eng_job_signal(struct dlh_engine *e, struct dlh_job *j, enum dlh_verb v)
{
	return e->backend.ops->signal(&e->backend, &j->run, v);
}

/* Stops every process of j's run and arms the kill timer. e->mu held. */
void eng_job_terminate(struct dlh_engine *e, struct dlh_job *j)
{
	eng_job_signal(e, j, DLH_VERB_TERMINATE);
	j->kill_at = dlh_mono() + e->grace;
	pthread_cond_signal(&e->timer_cv);
}

/* Asks a running job to checkpoint and stop, terminates it after the
 * suspend grace. e->mu held. */
void eng_job_suspend(struct dlh_engine *e, struct dlh_job *j)
{
	j->suspending = 1;
	j->term_at = dlh_mono() + e->suspend_grace;
	eng_job_signal(e, j, DLH_VERB_SUSPEND);
	pthread_cond_signal(&e->timer_cv);
}

/* ---- after a restart ---- */

void eng_job_recover(struct dlh_engine *e, struct dlh_job *j)
{
	char path[4096], dir[4096];
	struct dlh_run run;
	eng_job_dir(e, j->id, dir, sizeof dir);
	if (!dlh_run_load(dir, &run))
		e->backend.ops->stop(&e->backend, &run, dir, e->grace);
	eng_job_file(e, j->id, DLH_FILE_RESULT, path, sizeof path);
	memset(&j->run, 0, sizeof j->run);
	if (file_exists(path)) {
		j->status = DLH_SUCCEEDED;
		j->reason[0] = '\0';
		j->finished = eng_stamp();
		eng_job_log(e, j, "found finished after a restart of dlhfs");
	} else {
		j->status = DLH_QUEUED;
		snprintf(j->reason, sizeof j->reason,
			 "interrupted: dlhfs stopped while the job ran; resuming from its newest checkpoint");
		eng_job_log(e, j, "found running after a restart of dlhfs; requeued");
	}
	eng_job_save(e, j);
}

/* ---- the engine's open and close ---- */

int eng_supervise_start(struct dlh_engine *e, char *err, size_t errlen)
{
	int rc = pthread_create(&e->timer, NULL, timer_main, e);
	if (rc)
		snprintf(err, errlen, "cannot start the timer thread: %s", strerror(rc));
	return -rc;
}

void eng_supervise_stop(struct dlh_engine *e)
{
	pthread_mutex_lock(&e->mu);
	e->stopping = 1;
	for (size_t i = 0; i < e->njobs; i++)
		if (e->jobs[i]->run.pid && !e->jobs[i]->kill_at)
			eng_job_terminate(e, e->jobs[i]);
	while (e->waiters > 0)
		pthread_cond_wait(&e->changed, &e->mu);
	pthread_cond_signal(&e->timer_cv);
	pthread_cond_broadcast(&e->changed);   /* submissions waiting for calibration */
	pthread_mutex_unlock(&e->mu);
	pthread_join(e->timer, NULL);
}
