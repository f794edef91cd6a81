/* engine.c - jobs, the queue, launching and supervising runs: the daemon's core
 *
 * Locking: one mutex (e->mu) guards the job table, the slot count and every
 * job's fields. It is never held while waiting on a child (waiters block in
 * waitpid without it). No other lock nests inside it. */
#include "engine/engine.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine/cgroup.h"
#include "engine/launch.h"
#include "engine/plan.h"
#include "engine/proc.h"
#include "engine/sched.h"
#include "engine/util.h"

struct dlh_engine {
	pthread_mutex_t mu;          /* guards everything below */
	pthread_cond_t changed;      /* a job changed state or a waiter ended */
	pthread_cond_t timer_cv;     /* wakes the timer thread */
	pthread_t timer;             /* sends SIGKILL when a grace period ends */
	char state[2048];            /* state directory */
	struct dlh_tools tools;      /* mpirun and dlh-train */
	struct dlh_pool pool;        /* the machines */
	double grace;                /* seconds from SIGTERM to SIGKILL */
	double suspend_grace;        /* seconds from SIGUSR2 to SIGTERM */
	struct dlh_job **jobs;       /* ascending ids */
	size_t njobs, cap;           /* used and allocated entries */
	long next_id;                /* next id to hand out */
	int slots_used;              /* CPU slots held by running jobs */
	long *holder;                /* pool.node.cpus entries: the job holding each slot, 0 = free */
	int max_queued;              /* most jobs queued at once */
	struct dlh_cgroup_sys cg;    /* how runs are isolated */
	unsigned long launches;      /* runs launched, to name their cgroups */
	int waiters;                 /* live waiter threads */
	int stopping;                /* dlh_engine_close in progress */
	int lock_fd;                 /* STATE/lock, locked while the engine is open */
};

struct waiter_arg {
	struct dlh_engine *e;        /* owner */
	struct dlh_job *job;         /* the job whose mpirun it waits for */
	pid_t pid;                   /* that mpirun */
};

static void schedule(struct dlh_engine *e);
static void job_terminate(struct dlh_engine *e, struct dlh_job *j);

#define FAILURE_SCAN (1 << 20)   /* bytes of log searched for why a run failed */
#define LOCK_WAIT 5.0            /* seconds to wait for a state directory in use */

/* ---- small helpers ---- */

/* Now, rounded to the millisecond: job records store times with %.3f, so
 * what is rendered before and after a reload is the same. */
static double stamp(void)
{
	return floor(dlh_now() * 1000.0 + 0.5) / 1000.0;
}

static void job_dir(const struct dlh_engine *e, long id, char *buf, size_t len)
{
	snprintf(buf, len, "%s/jobs/%ld", e->state, id);
}

static void job_file(const struct dlh_engine *e, long id, const char *name,
		     char *buf, size_t len)
{
	snprintf(buf, len, "%s/jobs/%ld/%s", e->state, id, name);
}

/* Appends a timestamped harness event to the job's log. */
__attribute__((format(printf, 3, 4)))
static void job_log(const struct dlh_engine *e, const struct dlh_job *j, const char *fmt, ...)
{
	char path[4096], when[32], msg[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	dlh_time_iso(dlh_now(), when, sizeof when);
	char line[2200];
	snprintf(line, sizeof line, "%s dlhfs: %s", when, msg);
	job_file(e, j->id, "log", path, sizeof path);
	dlh_append_line(path, line);
}

static void job_save(const struct dlh_engine *e, const struct dlh_job *j)
{
	char dir[4096];
	job_dir(e, j->id, dir, sizeof dir);
	int rc = dlh_job_save(j, dir);
	if (rc)
		fprintf(stderr, "dlhfs: cannot save job %ld: %s\n", j->id, strerror(-rc));
}

static struct dlh_job *find(const struct dlh_engine *e, long id)
{
	size_t lo = 0, hi = e->njobs;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (e->jobs[mid]->id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < e->njobs && e->jobs[lo]->id == id ? e->jobs[lo] : NULL;
}

/* Inserts j keeping ids ascending. Returns 0, or -ENOMEM. */
static int insert(struct dlh_engine *e, struct dlh_job *j)
{
	if (e->njobs == e->cap) {
		size_t cap = e->cap ? e->cap * 2 : 64;
		struct dlh_job **p = realloc(e->jobs, cap * sizeof *p);
		if (!p)
			return -ENOMEM;
		e->jobs = p;
		e->cap = cap;
	}
	size_t i = e->njobs;
	while (i > 0 && e->jobs[i - 1]->id > j->id) {
		e->jobs[i] = e->jobs[i - 1];
		i--;
	}
	e->jobs[i] = j;
	e->njobs++;
	return 0;
}

/* Finds the most telling line of a failed run in its log: a trainer error,
 * mpirun's note about a rank that died, or an exec failure. */
static void failure_reason(const struct dlh_engine *e, const struct dlh_job *j,
			   char *out, size_t len)
{
	static const char *const marks[] = {
		"noticed that process rank", "dlh-train: rank", "ERROR: AddressSanitizer",
		"ERROR: LeakSanitizer", "runtime error:", "MPI_ABORT was invoked",
	};
	char path[4096];
	out[0] = '\0';
	job_file(e, j->id, "log", path, sizeof path);
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

static int file_exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

/* ---- running a job ---- */

static void *waiter_main(void *arg);

/* Plans and starts job j. Called with e->mu held. Returns 0, or -errno
 * after marking the job failed with the reason. */
static int job_launch(struct dlh_engine *e, struct dlh_job *j)
{
	char dir[4096], path[4096], err[1024];
	job_dir(e, j->id, dir, sizeof dir);
	struct dlh_plan *plan = malloc(sizeof *plan);
	if (!plan)
		return -ENOMEM;
	j->status = DLH_PLANNING;
	int rc = dlh_plan_make(&j->spec, &e->pool, &e->tools, dir, plan, err, sizeof err);
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
	struct dlh_buf text = {0};
	job_file(e, j->id, "plan", path, sizeof path);
	if ((rc = dlh_plan_format(plan, &text)) == 0)
		rc = dlh_write_atomic(path, text.data, text.len);
	dlh_buf_free(&text);
	if (rc) {
		snprintf(err, sizeof err, "cannot write the plan: %s", strerror(-rc));
		goto fail;
	}

	char env_id[64], env_dir[4200], env_csv[4200], env_ckpt[4200], env_ranks[32];
	snprintf(env_id, sizeof env_id, "DLH_JOB_ID=%ld", j->id);
	snprintf(env_dir, sizeof env_dir, "DLH_JOB_DIR=%s", dir);
	snprintf(env_csv, sizeof env_csv, "DLH_METRICS_CSV=%s/metrics.csv", dir);
	snprintf(env_ckpt, sizeof env_ckpt, "DLH_CHECKPOINT_DIR=%s/checkpoints", dir);
	snprintf(env_ranks, sizeof env_ranks, "DLH_RANKS=%d", plan->ranks);
	char *extra[] = {
		"OPENBLAS_NUM_THREADS=1", "OMP_NUM_THREADS=1",
		env_id, env_dir, env_csv, env_ckpt, env_ranks,
		/* mpirun refuses root without both */
		geteuid() == 0 ? "OMPI_ALLOW_RUN_AS_ROOT=1" : NULL,
		"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", NULL,
	};
	if (!extra[7])
		extra[8] = NULL;
	job_log(e, j, "launching %d rank%s on %s (restart %d)", plan->ranks,
		plan->ranks == 1 ? "" : "s", plan->host, j->restarts);
	job_file(e, j->id, "log", path, sizeof path);
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
			job_log(e, j, "isolation: none for this run: %s", why);
		else
			job_log(e, j, "isolation: cgroup v%d \"%s\", memory limit %s",
				e->cg.mode == DLH_CG_V1 ? 1 : 2, cg.cpuset, lim);
	} else if (j->spec.memory > 0) {
		job_log(e, j, "isolation: none, the memory limit is not enforced: %s", e->cg.why);
	}
	pid_t pid;
	rc = dlh_launch_in(plan->argv, extra, path, join, &pid);
	for (int k = 0; join[k] >= 0; k++)
		close(join[k]);
	if (rc) {
		free(wa);
		dlh_cgroup_destroy(&cg);
		snprintf(err, sizeof err, "cannot start \"%s\": %s", plan->argv[0], strerror(-rc));
		goto fail;
	}
	j->cg = cg;
	j->pid = pid;
	j->pid_start = dlh_proc_start(pid);
	j->status = DLH_RUNNING;
	j->reason[0] = '\0';
	if (j->started == 0)
		j->started = stamp();
	j->finished = 0;
	j->ranks = plan->ranks;
	for (int r = 0; r < plan->ranks; r++)
		e->holder[plan->slot[r]] = j->id;
	e->slots_used += plan->ranks;
	j->run_started = stamp();
	j->limit_at = j->spec.time_limit > 0 ? dlh_mono() + (double)j->spec.time_limit : 0;
	j->timed_out = 0;
	j->wait[0] = '\0';
	if (j->limit_at)
		pthread_cond_signal(&e->timer_cv);
	job_save(e, j);
	*wa = (struct waiter_arg){ .e = e, .job = j, .pid = pid };
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_t t;
	e->waiters++;
	if ((rc = pthread_create(&t, &attr, waiter_main, wa))) {
		/* without a waiter nobody would reap it: stop it and say so */
		e->waiters--;
		kill(pid, SIGKILL); /* our unreaped child: its pid cannot be reused */
		dlh_proc_kill_session(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		e->slots_used -= plan->ranks;
		for (int r = 0; r < plan->ranks; r++)
			e->holder[plan->slot[r]] = 0;
		j->pid = 0;
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
	j->finished = stamp();
	snprintf(j->reason, sizeof j->reason, "%s", err);
	job_log(e, j, "failed: %s", err);
	job_save(e, j);
	pthread_cond_broadcast(&e->changed);
	return rc;
}

/* Handles the end of job j's mpirun (wstatus from waitpid); cg: the run's
 * cgroups, taken off the job (the caller removes them). e->mu held. */
static void job_exited(struct dlh_engine *e, struct dlh_job *j, int wstatus,
		       const struct dlh_cgroup *cg)
{
	char path[4096];
	int oom = dlh_cgroup_oom_kills(cg);
	int leftover = dlh_proc_kill_session(j->pid, SIGKILL);
	e->slots_used -= j->ranks;
	for (int s = 0; s < e->pool.node.cpus; s++)
		if (e->holder[s] == j->id)
			e->holder[s] = 0;
	j->run_started = 0;
	j->limit_at = 0;
	j->pid = 0;
	j->pid_start = 0;
	j->kill_at = 0;
	j->term_at = 0;
	j->exit_code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -WTERMSIG(wstatus);
	if (leftover)
		job_log(e, j, "killed %d leftover process%s of the run", leftover,
			leftover == 1 ? "" : "es");
	if (WIFEXITED(wstatus))
		job_log(e, j, "mpirun exited with status %d", WEXITSTATUS(wstatus));
	else
		job_log(e, j, "mpirun killed by signal %d (%s)", WTERMSIG(wstatus),
			strsignal(WTERMSIG(wstatus)));

	job_file(e, j->id, "result", path, sizeof path);
	if (j->cancelling) {
		j->status = DLH_CANCELLED;
		j->finished = stamp();
	} else if (oom > 0 && !(j->exit_code == 0 && (j->spec.command[0] || file_exists(path)))) {
		char lim[32];
		dlh_size_text(cg->limit, lim, sizeof lim);
		job_log(e, j, "out of memory: the kernel killed %d process%s of the run in its cgroup "
			"(limit %s)", oom, oom == 1 ? "" : "es", lim);
		j->status = DLH_FAILED;
		j->finished = stamp();
		snprintf(j->reason, sizeof j->reason, "out of memory (limit %s)", lim);
	} else if (j->timed_out && !(j->exit_code == 0 && (j->spec.command[0] || file_exists(path)))) {
		char lim[32];
		dlh_duration((double)j->spec.time_limit, lim, sizeof lim);
		j->status = DLH_FAILED;
		j->finished = stamp();
		snprintf(j->reason, sizeof j->reason, "time limit %s reached", lim);
	} else if (j->exit_code == 0 && (j->spec.command[0] || file_exists(path))) {
		j->status = DLH_SUCCEEDED;
		j->reason[0] = '\0';
		j->finished = stamp();
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
				snprintf(why, sizeof why, "mpirun exited with status %d", j->exit_code);
			else
				snprintf(why, sizeof why, "mpirun was killed by signal %d", -j->exit_code);
		}
		if (j->spec.restart == DLH_RESTART_ON_FAILURE && j->restarts < j->spec.max_restarts) {
			j->restarts++;
			j->status = DLH_QUEUED;
			snprintf(j->reason, sizeof j->reason, "restarting (%d of %d) after: %s",
				 j->restarts, j->spec.max_restarts, why);
		} else {
			j->status = DLH_FAILED;
			j->finished = stamp();
			snprintf(j->reason, sizeof j->reason, "%s", why);
		}
	}
	j->cancelling = 0;
	j->suspending = 0;
	j->preempted_by = 0;
	j->timed_out = 0;
	job_log(e, j, "%s%s%s", dlh_status_name(j->status), j->reason[0] ? ": " : "", j->reason);
	job_save(e, j);
	pthread_cond_broadcast(&e->changed);
	if (!e->stopping)
		schedule(e);
}

static void *waiter_main(void *arg)
{
	struct waiter_arg *wa = arg;
	int wstatus = 0;
	while (waitpid(wa->pid, &wstatus, 0) < 0 && errno == EINTR)
		;
	struct dlh_engine *e = wa->e;
	pthread_mutex_lock(&e->mu);
	struct dlh_cgroup cg = wa->job->cg;
	memset(&wa->job->cg, 0, sizeof wa->job->cg);
	job_exited(e, wa->job, wstatus, &cg);
	pthread_mutex_unlock(&e->mu);
	dlh_cgroup_destroy(&cg); /* waits for stragglers: not under the lock */
	pthread_mutex_lock(&e->mu);
	e->waiters--;
	pthread_cond_broadcast(&e->changed);
	pthread_mutex_unlock(&e->mu);
	free(wa);
	return NULL;
}

/* The wall-clock time t as "HH:MM:SS" (local time), for progress lines. */
static void clock_text(double t, char *out, size_t len)
{
	time_t tt = (time_t)ceil(t);
	struct tm tm;
	localtime_r(&tt, &tm);
	strftime(out, len, "%H:%M:%S", &tm);
}

/* The queued jobs as scheduler input, in queue order, with their
 * estimated starts planned against the running jobs. e->mu held. Returns
 * the count, with *wout malloc'd (NULL and 0 when out of memory). */
static size_t plan_queue(struct dlh_engine *e, double now, struct dlh_sched_wait **wout)
{
	size_t nw = 0, nr = 0;
	struct dlh_sched_wait *w = malloc((e->njobs ? e->njobs : 1) * sizeof *w);
	struct dlh_sched_run *r = malloc((e->njobs ? e->njobs : 1) * sizeof *r);
	*wout = NULL;
	if (!w || !r) {
		free(w);
		free(r);
		return 0;
	}
	for (size_t i = 0; i < e->njobs; i++) {
		struct dlh_job *j = e->jobs[i];
		if (j->pid) {
			r[nr].cpus = j->ranks;
			r[nr].end = j->spec.time_limit > 0 && j->run_started > 0
				? j->run_started + (double)j->spec.time_limit : INFINITY;
			nr++;
		} else if (j->status == DLH_QUEUED) {
			w[nw] = (struct dlh_sched_wait){
				.id = j->id, .priority = j->priority, .submitted = j->submitted,
				.cpus = dlh_plan_slots(&j->spec, &e->pool),
				.duration = j->spec.time_limit > 0 ? (double)j->spec.time_limit : INFINITY,
			};
			nw++;
		}
	}
	dlh_sched_order(w, nw);
	dlh_sched_plan(e->pool.node.cpus, now, r, nr, w, nw);
	free(r);
	*wout = w;
	return nw;
}

/* Asks a running job to checkpoint and stop (SIGUSR2 to mpirun, which
 * forwards it to every rank), SIGTERM after the suspend grace. e->mu held. */
static void job_suspend(struct dlh_engine *e, struct dlh_job *j)
{
	j->suspending = 1;
	j->term_at = dlh_mono() + e->suspend_grace;
	kill(j->pid, SIGUSR2);
	pthread_cond_signal(&e->timer_cv);
}

static int cmp_victims(const void *pa, const void *pb)
{
	const struct dlh_job *a = *(struct dlh_job *const *)pa, *b = *(struct dlh_job *const *)pb;
	if (a->priority != b->priority)
		return a->priority < b->priority ? -1 : 1;
	/* the youngest run loses the least work */
	return (a->run_started < b->run_started) - (a->run_started > b->run_started);
}

/* Preemption: walks the waiting jobs in queue order; one that cannot start
 * now and needs more slots than are free (or being freed by suspends under
 * way) suspends the lowest-priority preemptible running jobs of lower
 * priority than its own, youngest first, until enough would be free. It
 * preempts nobody when even all of them would not be enough. The victims
 * checkpoint, stop, and wait in the queue (see job_exited). e->mu held. */
static void preempt(struct dlh_engine *e, const struct dlh_sched_wait *w, size_t nw, double now)
{
	int avail = e->pool.node.cpus - e->slots_used;
	struct dlh_job **cand = malloc((e->njobs ? e->njobs : 1) * sizeof *cand);
	if (!cand)
		return;
	for (size_t i = 0; i < e->njobs; i++)
		if (e->jobs[i]->pid && e->jobs[i]->suspending)
			avail += e->jobs[i]->ranks;
	for (size_t k = 0; k < nw; k++) {
		struct dlh_job *h = find(e, w[k].id);
		if (!h || h->status != DLH_QUEUED || w[k].cpus > e->pool.node.cpus)
			continue;
		if (w[k].start <= now || w[k].cpus <= avail) {
			avail -= w[k].cpus < avail ? w[k].cpus : avail;
			continue;
		}
		size_t nc = 0;
		int could = avail;
		for (size_t i = 0; i < e->njobs; i++) {
			struct dlh_job *r = e->jobs[i];
			if (r->pid && r->status == DLH_RUNNING && !r->suspending && !r->cancelling &&
			    r->spec.preemptible && r->priority < h->priority) {
				cand[nc++] = r;
				could += r->ranks;
			}
		}
		if (could < w[k].cpus)
			continue;
		qsort(cand, nc, sizeof *cand, cmp_victims);
		for (size_t c = 0; c < nc && avail < w[k].cpus; c++) {
			struct dlh_job *v = cand[c];
			v->preempted_by = h->id;
			snprintf(v->reason, sizeof v->reason, "preempted by job %ld (priority %d)", h->id,
				 h->priority);
			job_log(e, v, "preempted by job %ld (priority %d > %d): SIGUSR2 to the run "
				"(checkpoint, then stop); it resumes when slots free", h->id, h->priority,
				v->priority);
			job_log(e, h, "preempting job %ld (priority %d) for %d cpu slot%s", v->id,
				v->priority, v->ranks, v->ranks == 1 ? "" : "s");
			job_suspend(e, v);
			avail += v->ranks;
		}
		avail -= w[k].cpus;
	}
	free(cand);
}

/* Starts the queued jobs whose reservation is now (conservative backfill
 * in priority order, see sched.h), and tells the others why they wait and
 * when they are estimated to start. A job that could never fit (more
 * slots than the pool has) fails with the reason. e->mu held. */
static void schedule(struct dlh_engine *e)
{
	double now = dlh_now();
	struct dlh_sched_wait *w;
	size_t nw = plan_queue(e, now, &w);
	for (size_t k = 0; k < nw; k++) {
		struct dlh_job *j = find(e, w[k].id);
		if (!j || j->status != DLH_QUEUED)
			continue;
		int need = w[k].cpus, free_slots = e->pool.node.cpus - e->slots_used;
		if (need > e->pool.node.cpus) {
			job_launch(e, j); /* planning refuses it, with the reason */
			continue;
		}
		if (w[k].start <= now && need <= free_slots) {
			job_launch(e, j);
			continue;
		}
		char when[64];
		j->est_start = w[k].start;
		if (isinf(w[k].start))
			snprintf(when, sizeof when, "est. start unknown (jobs ahead have no time_limit)");
		else {
			char hms[16];
			clock_text(w[k].start, hms, sizeof hms);
			snprintf(when, sizeof when, "est. start %s", hms);
		}
		if (need <= free_slots)
			snprintf(j->wait, sizeof j->wait, "waiting for %d cpu slot%s; %d free but held "
				 "for jobs ahead in the queue; %s", need, need == 1 ? "" : "s",
				 free_slots, when);
		else
			snprintf(j->wait, sizeof j->wait, "waiting for %d cpu slot%s; %d free; %s",
				 need, need == 1 ? "" : "s", free_slots, when);
	}
	preempt(e, w, nw, now);
	free(w);
}

/* Sends SIGKILL to sessions whose grace period has ended. */
static void *timer_main(void *arg)
{
	struct dlh_engine *e = arg;
	pthread_mutex_lock(&e->mu);
	while (!(e->stopping && e->waiters == 0)) {
		double now = dlh_mono(), next = 0;
		for (size_t i = 0; i < e->njobs; i++) {
			struct dlh_job *j = e->jobs[i];
			if (j->limit_at && j->pid && !j->kill_at && !j->cancelling) {
				if (j->limit_at <= now) {
					char lim[32];
					dlh_duration((double)j->spec.time_limit, lim, sizeof lim);
					job_log(e, j, "time limit %s reached: SIGTERM to the run", lim);
					j->limit_at = 0;
					j->timed_out = 1;
					job_terminate(e, j);
				} else if (!next || j->limit_at < next) {
					next = j->limit_at;
				}
			}
			if (j->term_at && j->pid && !j->kill_at) {
				if (j->term_at <= now) {
					job_log(e, j, "the run did not suspend within %.0f s: SIGTERM",
						e->suspend_grace);
					j->term_at = 0;
					job_terminate(e, j);
				} else if (!next || j->term_at < next) {
					next = j->term_at;
				}
			}
			if (!j->kill_at || !j->pid)
				continue;
			if (j->kill_at <= now) {
				int n = dlh_proc_kill_session(j->pid, SIGKILL);
				job_log(e, j, "grace period over: SIGKILL to %d process%s", n,
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

/* Sends SIGTERM to every process of j's run and arms the SIGKILL timer. */
static void job_terminate(struct dlh_engine *e, struct dlh_job *j)
{
	dlh_proc_kill_session(j->pid, SIGTERM);
	j->kill_at = dlh_mono() + e->grace;
	pthread_cond_signal(&e->timer_cv);
}

/* ---- opening: loading the state directory ---- */

static int find_tool(const char *name, char *out, size_t len)
{
	const char *path = getenv("PATH");
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		size_t n = strcspn(path, ":");
		snprintf(out, len, "%.*s/%s", (int)n, path, name);
		if (n && access(out, X_OK) == 0)
			return 0;
		path += n + (path[n] == ':');
	}
	return -ENOENT;
}

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

/* A job found running in the state directory: its daemon is gone. Stops
 * whatever is left of its session (even when mpirun itself is gone: ranks
 * started after it are recognised by session and start time), then marks
 * it succeeded when the run finished meanwhile, else requeues it. */
static void recover(struct dlh_engine *e, struct dlh_job *j)
{
	if (j->pid && j->pid_start) {
		dlh_proc_kill_session_since(j->pid, j->pid_start, SIGTERM);
		double until = dlh_mono() + e->grace;
		while (dlh_proc_count_session_since(j->pid, j->pid_start) && dlh_mono() < until) {
			struct timespec ts = { 0, 30 * 1000 * 1000 };
			nanosleep(&ts, NULL);
		}
		dlh_proc_kill_session_since(j->pid, j->pid_start, SIGKILL);
	}
	char path[4096];
	job_file(e, j->id, "result", path, sizeof path);
	j->pid = 0;
	j->pid_start = 0;
	if (file_exists(path)) {
		j->status = DLH_SUCCEEDED;
		j->reason[0] = '\0';
		j->finished = stamp();
		job_log(e, j, "found finished after a restart of dlhfs");
	} else {
		j->status = DLH_QUEUED;
		snprintf(j->reason, sizeof j->reason,
			 "interrupted: dlhfs stopped while the job ran; resuming from its newest checkpoint");
		job_log(e, j, "found running after a restart of dlhfs; requeued");
	}
	job_save(e, j);
}

static int load_jobs(struct dlh_engine *e, char *err, size_t errlen)
{
	char dir[4096];
	snprintf(dir, sizeof dir, "%s/jobs", e->state);
	DIR *d = opendir(dir);
	if (!d) {
		snprintf(err, errlen, "cannot open \"%s\": %s", dir, strerror(errno));
		return -errno;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		char *end;
		long id = strtol(de->d_name, &end, 10);
		if (*end || id <= 0)
			continue;
		struct dlh_job *j = malloc(sizeof *j);
		if (!j) {
			closedir(d);
			return -ENOMEM;
		}
		char jd[4096];
		job_dir(e, id, jd, sizeof jd);
		int rc = dlh_job_load(j, jd);
		if (rc || j->id != id) {
			fprintf(stderr, "dlhfs: skipping \"%s\": unreadable job record (%s)\n", jd,
				strerror(rc ? -rc : EINVAL));
			free(j);
			if (id >= e->next_id)
				e->next_id = id + 1;
			continue;
		}
		if (insert(e, j)) {
			free(j);
			closedir(d);
			return -ENOMEM;
		}
		if (id >= e->next_id)
			e->next_id = id + 1;
	}
	closedir(d);
	return 0;
}

/* Resolves the state directory and the tools of o into e, creating
 * STATE/jobs. Returns 0, or -errno with err filled. */
static int setup(struct dlh_engine *e, const struct dlh_engine_opts *o, char *err, size_t errlen)
{
	int rc;
	const char *state = o->state_dir ? o->state_dir : DLH_STATE_DEFAULT;
	if (state[0] != '/') {
		snprintf(err, errlen, "state directory must be an absolute path, got \"%s\"", state);
		return -EINVAL;
	}
	if (strlen(state) >= sizeof e->state - 64 ||
	    (o->trainer && strlen(o->trainer) >= sizeof e->tools.trainer) ||
	    (o->mpirun && strlen(o->mpirun) >= sizeof e->tools.mpirun)) {
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
	if (o->mpirun)
		snprintf(e->tools.mpirun, sizeof e->tools.mpirun, "%s", o->mpirun);
	else if (find_tool("mpirun", e->tools.mpirun, sizeof e->tools.mpirun)) {
		snprintf(err, errlen, "mpirun not found on PATH (install openmpi-bin: make deps)");
		return -ENOENT;
	}
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

	char path[4096], *text;
	snprintf(path, sizeof path, "%s/next_id", e->state);
	if (!dlh_read_file(path, 64, &text, NULL)) {
		long n = strtol(text, NULL, 10);
		if (n > e->next_id)
			e->next_id = n;
		free(text);
	}
	if ((rc = load_jobs(e, err, errlen))) {
		for (size_t i = 0; i < e->njobs; i++)
			free(e->jobs[i]);
		free(e->jobs);
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
	if ((rc = pthread_create(&e->timer, NULL, timer_main, e))) {
		snprintf(err, errlen, "cannot start the timer thread: %s", strerror(rc));
		for (size_t i = 0; i < e->njobs; i++)
			free(e->jobs[i]);
		free(e->jobs);
		free(e->holder);
		dlh_cgroup_teardown(&e->cg);
		close(e->lock_fd);
		free(e);
		return -rc;
	}
	pthread_mutex_lock(&e->mu);
	for (size_t i = 0; i < e->njobs; i++) {
		struct dlh_job *j = e->jobs[i];
		if (j->status == DLH_RUNNING || j->status == DLH_PLANNING)
			recover(e, j);
	}
	schedule(e);
	pthread_mutex_unlock(&e->mu);
	*out = e;
	return 0;
}

void dlh_engine_close(struct dlh_engine *e)
{
	if (!e)
		return;
	pthread_mutex_lock(&e->mu);
	e->stopping = 1;
	for (size_t i = 0; i < e->njobs; i++)
		if (e->jobs[i]->pid && !e->jobs[i]->kill_at)
			job_terminate(e, e->jobs[i]);
	while (e->waiters > 0)
		pthread_cond_wait(&e->changed, &e->mu);
	pthread_cond_signal(&e->timer_cv);
	pthread_mutex_unlock(&e->mu);
	pthread_join(e->timer, NULL);
	for (size_t i = 0; i < e->njobs; i++)
		free(e->jobs[i]);
	free(e->jobs);
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

int dlh_engine_submit(struct dlh_engine *e, const char *text, size_t len,
		      uid_t uid, long *id, char *err, size_t errlen)
{
	struct dlh_spec *spec = malloc(sizeof *spec);
	struct dlh_plan *plan = malloc(sizeof *plan);
	struct dlh_job *j = calloc(1, sizeof *j);
	char *norm = malloc(DLH_SPEC_MAX * 2);
	int rc = -ENOMEM;
	if (!spec || !plan || !j || !norm) {
		snprintf(err, errlen, "spec: out of memory\n");
		goto out;
	}
	err[0] = '\0';
	rc = dlh_spec_parse(text, len, spec, err, errlen);
	if (!rc) /* the pool must be able to run it at all */
		rc = dlh_plan_make(spec, &e->pool, &e->tools, "/", plan, err, errlen);
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
	j->submitted = stamp();
	j->spec = *spec;
	j->priority = spec->priority;
	char dir[4096], path[4096], next[32];
	job_dir(e, j->id, dir, sizeof dir);
	snprintf(path, sizeof path, "%s/checkpoints", dir);
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
	job_file(e, j->id, "spec.ini", path, sizeof path);
	if (!(rc = dlh_write_atomic(path, norm, (size_t)n))) {
		job_file(e, j->id, "submitted.ini", path, sizeof path);
		rc = dlh_write_atomic(path, text, len);
	}
	if (!rc)
		rc = dlh_job_save(j, dir);
	if (!rc)
		rc = insert(e, j);
	if (rc) {
		pthread_mutex_unlock(&e->mu);
		snprintf(err, errlen, "spec: cannot store the job in \"%s\": %s\n", dir, strerror(-rc));
		goto out;
	}
	job_log(e, j, "submitted by uid %u", (unsigned)uid);
	*id = j->id;
	j = NULL; /* owned by the table now */
	schedule(e);
	pthread_mutex_unlock(&e->mu);
	rc = 0;
out:
	free(spec);
	free(plan);
	free(j);
	free(norm);
	return rc;
}

/* ---- ctl verbs: each is called with e->mu held, the job found and the
 * caller allowed; returns 0, or -EBUSY with err saying why ---- */

#define CTL_VERBS "cancel, suspend, resume, checkpoint, priority N"

/* The state a verb saw, for its refusal: "running", "being suspended"... */
static const char *state_words(const struct dlh_job *j)
{
	if (j->cancelling)
		return "being cancelled";
	if (j->suspending)
		return "being suspended";
	return dlh_status_name(j->status);
}

static int ctl_cancel(struct dlh_engine *e, struct dlh_job *j, uid_t uid, char *err, size_t errlen)
{
	if (dlh_status_terminal(j->status)) {
		snprintf(err, errlen, "ctl: \"cancel\": job %ld is already %s", j->id,
			 dlh_status_name(j->status));
		return -EBUSY;
	}
	if (j->pid) {
		if (!j->cancelling) { /* cancel wins over a suspend in progress */
			j->cancelling = 1;
			j->suspending = 0;
			j->preempted_by = 0;
			j->term_at = 0;
			snprintf(j->reason, sizeof j->reason, "cancelled by uid %u", (unsigned)uid);
			job_log(e, j, "cancel requested by uid %u: SIGTERM to the run", (unsigned)uid);
			job_terminate(e, j);
		}
		return 0;
	}
	j->status = DLH_CANCELLED;
	j->finished = stamp();
	snprintf(j->reason, sizeof j->reason, "cancelled by uid %u %s", (unsigned)uid,
		 j->started ? "while it waited" : "before it ran");
	job_log(e, j, "%s", j->reason);
	job_save(e, j);
	pthread_cond_broadcast(&e->changed);
	schedule(e);
	return 0;
}

static int ctl_suspend(struct dlh_engine *e, struct dlh_job *j, uid_t uid, char *err, size_t errlen)
{
	if (j->status == DLH_QUEUED) { /* held: it waits until resumed */
		j->status = DLH_SUSPENDED;
		snprintf(j->reason, sizeof j->reason, "suspended by uid %u while queued", (unsigned)uid);
		job_log(e, j, "%s", j->reason);
		job_save(e, j);
		pthread_cond_broadcast(&e->changed);
		schedule(e);
		return 0;
	}
	if (j->status != DLH_RUNNING || !j->pid || j->cancelling || j->suspending) {
		snprintf(err, errlen, "ctl: \"suspend\": job %ld is %s (suspend applies to a running "
			 "or queued job)", j->id, state_words(j));
		return -EBUSY;
	}
	snprintf(j->reason, sizeof j->reason, "suspended by uid %u", (unsigned)uid);
	job_log(e, j, "suspend requested by uid %u: SIGUSR2 to the run (checkpoint, then stop)",
		(unsigned)uid);
	job_suspend(e, j);
	return 0;
}

static int ctl_resume(struct dlh_engine *e, struct dlh_job *j, uid_t uid, char *err, size_t errlen)
{
	if (j->status != DLH_SUSPENDED) {
		snprintf(err, errlen, "ctl: \"resume\": job %ld is %s (resume applies to a suspended job)",
			 j->id, state_words(j));
		return -EBUSY;
	}
	j->status = DLH_QUEUED;
	snprintf(j->reason, sizeof j->reason, "resumed by uid %u", (unsigned)uid);
	job_log(e, j, "resume requested by uid %u: queued; it restarts from its newest checkpoint",
		(unsigned)uid);
	job_save(e, j);
	pthread_cond_broadcast(&e->changed);
	schedule(e);
	return 0;
}

/* 1 when dlh-train of j's current run has written run.info (it does so
 * after setting up, before its first step, its signal handlers long in
 * place). */
static int trainer_started(const struct dlh_engine *e, const struct dlh_job *j)
{
	char path[4096];
	struct stat st;
	job_file(e, j->id, "run.info", path, sizeof path);
	if (stat(path, &st))
		return 0;
	double t = (double)st.st_mtim.tv_sec + 1e-9 * (double)st.st_mtim.tv_nsec;
	return t + 0.002 >= j->run_started;
}

static int ctl_checkpoint(struct dlh_engine *e, struct dlh_job *j, uid_t uid, char *err, size_t errlen)
{
	if (j->status != DLH_RUNNING || !j->pid || j->cancelling || j->suspending) {
		snprintf(err, errlen, "ctl: \"checkpoint\": job %ld is %s (checkpoint applies to a "
			 "running job)", j->id, state_words(j));
		return -EBUSY;
	}
	if (!j->spec.command[0] && !trainer_started(e, j)) {
		/* before its handlers are in place the signal would kill the run */
		snprintf(err, errlen, "ctl: \"checkpoint\": job %ld is starting (no training step "
			 "yet); checkpoint applies once it trains", j->id);
		return -EBUSY;
	}
	job_log(e, j, "checkpoint requested by uid %u: SIGUSR1 to the run", (unsigned)uid);
	kill(j->pid, SIGUSR1); /* mpirun forwards it to every rank */
	return 0;
}

static int ctl_priority(struct dlh_engine *e, struct dlh_job *j, uid_t uid, int prio,
			char *err, size_t errlen)
{
	if (dlh_status_terminal(j->status)) {
		snprintf(err, errlen, "ctl: \"priority\": job %ld is already %s", j->id,
			 dlh_status_name(j->status));
		return -EBUSY;
	}
	job_log(e, j, "priority %d -> %d by uid %u", j->priority, prio, (unsigned)uid);
	j->priority = prio;
	job_save(e, j);
	pthread_cond_broadcast(&e->changed);
	schedule(e);
	return 0;
}

/* Parses a priority argument: an integer in DLH_PRIORITY_MIN..MAX. */
static int parse_priority(const char *arg, int *out)
{
	char *end;
	errno = 0;
	long v = strtol(arg, &end, 10);
	if (!*arg || *end || errno || v < DLH_PRIORITY_MIN || v > DLH_PRIORITY_MAX)
		return -EINVAL;
	*out = (int)v;
	return 0;
}

int dlh_engine_ctl(struct dlh_engine *e, long id, uid_t uid, const char *line,
		   char *err, size_t errlen)
{
	char word[64], arg[64];
	while (*line == ' ' || *line == '\t')
		line++;
	size_t n = strcspn(line, " \t\n");
	snprintf(word, sizeof word, "%.*s", (int)(n < sizeof word ? n : sizeof word - 1), line);
	const char *a = line + n;
	while (*a == ' ' || *a == '\t')
		a++;
	size_t m = strcspn(a, "\n");
	while (m && (a[m - 1] == ' ' || a[m - 1] == '\t' || a[m - 1] == '\r'))
		m--;
	int arg_long = m >= sizeof arg;
	snprintf(arg, sizeof arg, "%.*s", (int)(arg_long ? sizeof arg - 1 : m), a);
	int takes_arg = !strcmp(word, "priority");
	int known = takes_arg || !strcmp(word, "cancel") || !strcmp(word, "suspend") ||
		    !strcmp(word, "resume") || !strcmp(word, "checkpoint");
	int prio = 0;

	pthread_mutex_lock(&e->mu);
	struct dlh_job *j = find(e, id);
	int rc = 0;
	if (!j) {
		snprintf(err, errlen, "no job %ld", id);
		rc = -ENOENT;
	} else if (uid != 0 && uid != j->uid) {
		snprintf(err, errlen, "ctl: \"%s\": only uid %u or root may control job %ld",
			 word, (unsigned)j->uid, id);
		rc = -EPERM;
	} else if (!known) {
		snprintf(err, errlen, "ctl: unknown verb \"%s\" (expected: " CTL_VERBS ")", word);
		rc = -EINVAL;
	} else if (!takes_arg && arg[0]) {
		snprintf(err, errlen, "ctl: \"%s\" takes no argument, got \"%s\"", word, arg);
		rc = -EINVAL;
	} else if (takes_arg && (arg_long || parse_priority(arg, &prio))) {
		snprintf(err, errlen, "ctl: \"priority\": expected an integer from %d to %d, got \"%s\"",
			 DLH_PRIORITY_MIN, DLH_PRIORITY_MAX, arg);
		rc = -EINVAL;
	} else if (!strcmp(word, "cancel")) {
		rc = ctl_cancel(e, j, uid, err, errlen);
	} else if (!strcmp(word, "suspend")) {
		rc = ctl_suspend(e, j, uid, err, errlen);
	} else if (!strcmp(word, "resume")) {
		rc = ctl_resume(e, j, uid, err, errlen);
	} else if (!strcmp(word, "checkpoint")) {
		rc = ctl_checkpoint(e, j, uid, err, errlen);
	} else {
		rc = ctl_priority(e, j, uid, prio, err, errlen);
	}
	if (rc && j)
		job_log(e, j, "%s", err);
	pthread_mutex_unlock(&e->mu);
	return rc;
}

int dlh_engine_job(struct dlh_engine *e, long id, struct dlh_job *out)
{
	pthread_mutex_lock(&e->mu);
	struct dlh_job *j = find(e, id);
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
	job_dir(e, id, buf, len);
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

size_t dlh_engine_queue(struct dlh_engine *e, struct dlh_queue_entry *out, size_t max)
{
	pthread_mutex_lock(&e->mu);
	struct dlh_sched_wait *w;
	size_t nw = plan_queue(e, dlh_now(), &w);
	for (size_t k = 0; k < nw && k < max; k++) {
		const struct dlh_job *j = find(e, w[k].id);
		out[k] = (struct dlh_queue_entry){
			.id = w[k].id, .priority = w[k].priority, .cpus = w[k].cpus,
			.submitted = w[k].submitted, .est_start = w[k].start,
			.time_limit = j ? (double)j->spec.time_limit : 0,
		};
		if (j)
			snprintf(out[k].name, sizeof out[k].name, "%s", j->spec.name);
	}
	free(w);
	pthread_mutex_unlock(&e->mu);
	return nw;
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

int dlh_engine_holders(struct dlh_engine *e, long *out, int max)
{
	pthread_mutex_lock(&e->mu);
	int n = e->pool.node.cpus;
	for (int s = 0; s < n && s < max; s++)
		out[s] = e->holder[s];
	pthread_mutex_unlock(&e->mu);
	return n;
}

int dlh_engine_wait(struct dlh_engine *e, long id, double timeout)
{
	double until = dlh_mono() + timeout;
	pthread_mutex_lock(&e->mu);
	struct dlh_job *j = find(e, id);
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
