/* test_engine.c - the engine as a whole, without a mount: open, submit, ctl, wait;
 * the queue, restarts, suspend and resume, priorities and preemption */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/table/job.h"
#include "engine/run/proc.h"
#include "engine/util/util.h"
#include "tests/unit/check.h"
#include "tests/unit/tmpdir.h"

static const char slice_spec[] =
	"[data]\ntrain_limit = 256\ntest_limit = 256\n[train]\nepochs = 1\n[resources]\nranks = 1\n";

TEST(engine_second_open_of_a_state_dir_is_refused)
{
	char state[512], err[512];
	fresh_dir(state, sizeof state, "eng-lock");
	struct dlh_engine_opts o = { .state_dir = state, .trainer = "/bin/true", .shepherd = "", .launcher = "/bin/false",
				      .no_calibrate = 1, .no_probe = 1 };
	struct dlh_engine *a = NULL, *b = NULL;
	CHECK(dlh_engine_open(&a, &o, err, sizeof err) == 0);
	/* a lock held by this same process does not conflict (POSIX record
	 * locks are per process); another process must be refused */
	pid_t child = fork();
	if (child == 0) {
		int rc = dlh_engine_check(&o, err, sizeof err);
		_exit(rc == -EBUSY && strstr(err, "is in use by another dlhfs") ? 0 : 1);
	}
	int st;
	CHECK(waitpid(child, &st, 0) == child);
	CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the second daemon was not refused");
	dlh_engine_close(a);
	CHECK(dlh_engine_open(&b, &o, err, sizeof err) == 0); /* free again after close */
	dlh_engine_close(b);
}

/* An engine with o's state dir, launcher, cpus and limits, and what every
 * test here wants besides: no trainer, shepherd, calibration or probes, a
 * short kill grace. NULL (said) when it does not open. */
static struct dlh_engine *open_engine_opts(struct dlh_engine_opts o)
{
	o.trainer = "/bin/true";
	o.shepherd = "";
	o.kill_grace = 0.5;
	o.no_calibrate = 1;
	o.no_probe = 1;
	struct dlh_engine *e = NULL;
	char err[512];
	if (dlh_engine_open(&e, &o, err, sizeof err))
		printf("# open: %s\n", err);
	return e;
}

/* An engine whose "mpirun" is a program of our choosing. */
static struct dlh_engine *open_engine(const char *state, const char *mpirun, int cpus)
{
	return open_engine_opts((struct dlh_engine_opts){ .state_dir = state, .launcher = mpirun,
							   .cpus = cpus });
}

/* A "mpirun" in state that sleeps 30 s, its path into out. */
static void sleeper_in(const char *state, char *out, size_t len)
{
	snprintf(out, len, "%s/sleeper", state);
	write_text(out, "#!/bin/sh\nexec sleep 30\n");
	chmod(out, 0755);
}

TEST(engine_rejection_goes_to_errors_log_and_makes_no_job)
{
	char state[512], path[700], *text;
	fresh_dir(state, sizeof state, "eng-reject");
	struct dlh_engine *e = open_engine(state, "/bin/false", 2);
	CHECK(e != NULL);
	long id = 0;
	char err[DLH_ERR_MAX];
	const char bad[] = "[train]\nepochs = 0\n";
	CHECK(dlh_engine_submit(e, bad, sizeof bad - 1, 1234, &id, err, sizeof err) == -EINVAL);
	CHECK(dlh_engine_jobs(e, NULL, 0) == 0);
	dlh_engine_errors_path(e, 0, path, sizeof path);
	CHECK(dlh_read_file(path, 1 << 20, &text, NULL) == 0);
	CHECK_MSG(strstr(text, " uid=1234 spec:2: [train] epochs:"), "errors: %s", text);
	free(text);
	dlh_engine_close(e);
}

TEST(engine_spec_the_pool_cannot_run_is_refused_and_spends_no_id)
{
	char state[512], path[700], *text;
	fresh_dir(state, sizeof state, "eng-unplannable");
	struct dlh_engine *e = open_engine(state, "/bin/false", 2);
	CHECK(e != NULL);
	long id = 0;
	char err[DLH_ERR_MAX];
	const char wide[] = "[resources]\nranks = 3\n";
	CHECK(dlh_engine_submit(e, wide, sizeof wide - 1, 77, &id, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "3 ranks need 3 cpu slots, the pool has 2"), "err: %s", err);
	CHECK(dlh_engine_jobs(e, NULL, 0) == 0);
	dlh_engine_errors_path(e, 0, path, sizeof path);
	CHECK(dlh_read_file(path, 1 << 20, &text, NULL) == 0);
	CHECK_MSG(strstr(text, " uid=77 spec: [resources] ranks: 3 ranks need"), "errors: %s", text);
	free(text);
	struct stat st;
	snprintf(path, sizeof path, "%s/jobs/1", state);
	CHECK_MSG(stat(path, &st) != 0, "a refused spec left %s", path);
	CHECK(dlh_engine_submit(e, slice_spec, sizeof slice_spec - 1, 0, &id, err, sizeof err) == 0);
	CHECK_MSG(id == 1, "the refusal spent an id: the next job is %ld", id);
	CHECK(dlh_engine_wait(e, id, 10) == 0);
	dlh_engine_close(e);
}

TEST(engine_failed_run_gets_reason_and_ids_are_never_reused)
{
	char state[512];
	fresh_dir(state, sizeof state, "eng-fail");
	struct dlh_engine *e = open_engine(state, "/bin/false", 2);
	CHECK(e != NULL);
	long id1 = 0, id2 = 0;
	char err[DLH_ERR_MAX];
	CHECK(dlh_engine_submit(e, slice_spec, sizeof slice_spec - 1, 0, &id1, err, sizeof err) == 0);
	CHECK(dlh_engine_wait(e, id1, 10) == 0);
	struct dlh_job j;
	CHECK(dlh_engine_job(e, id1, &j) == 0);
	CHECK(j.status == DLH_FAILED);
	CHECK_MSG(strstr(j.reason, "exited with status 1"), "reason: %s", j.reason);
	dlh_engine_close(e);
	/* a job directory lost from disk still spends its id */
	char gone[700];
	snprintf(gone, sizeof gone, "rm -rf %s/jobs/%ld", state, id1);
	CHECK(system(gone) == 0);
	e = open_engine(state, "/bin/false", 2);
	CHECK(e != NULL);
	CHECK(dlh_engine_submit(e, slice_spec, sizeof slice_spec - 1, 0, &id2, err, sizeof err) == 0);
	CHECK_MSG(id2 == id1 + 1, "id %ld after %ld", id2, id1);
	dlh_engine_wait(e, id2, 10);
	dlh_engine_close(e);
}

TEST(engine_success_needs_a_result_file)
{
	char state[512];
	fresh_dir(state, sizeof state, "eng-true");
	struct dlh_engine *e = open_engine(state, "/bin/true", 2);
	CHECK(e != NULL);
	long id = 0;
	char err[DLH_ERR_MAX];
	CHECK(dlh_engine_submit(e, slice_spec, sizeof slice_spec - 1, 0, &id, err, sizeof err) == 0);
	CHECK(dlh_engine_wait(e, id, 10) == 0);
	struct dlh_job j;
	CHECK(dlh_engine_job(e, id, &j) == 0);
	CHECK_MSG(j.status == DLH_FAILED && strstr(j.reason, "without writing a result"), "%s: %s",
		  dlh_status_name(j.status), j.reason);
	dlh_engine_close(e);
}

/* An engine with one slot whose "mpirun" sleeps: it holds its slot until
 * it is cancelled or the engine closes. */
static struct dlh_engine *sleeper_engine(char *state, size_t len, const char *name)
{
	char sleeper[700];
	fresh_dir(state, len, name);
	snprintf(sleeper, sizeof sleeper, "%s/sleeper", state);
	write_text(sleeper, "#!/bin/sh\nexec sleep 30\n");
	chmod(sleeper, 0755);
	return open_engine(state, sleeper, 1);
}

TEST(engine_queue_is_fifo_and_cancel_of_queued_is_immediate)
{
	char state[512];
	struct dlh_engine *e = sleeper_engine(state, sizeof state, "eng-queue");
	CHECK(e != NULL);
	long a = 0, b = 0;
	char err[DLH_ERR_MAX];
	CHECK(dlh_engine_submit(e, slice_spec, sizeof slice_spec - 1, 0, &a, err, sizeof err) == 0);
	CHECK(dlh_engine_submit(e, slice_spec, sizeof slice_spec - 1, 0, &b, err, sizeof err) == 0);
	struct dlh_job ja, jb;
	dlh_engine_job(e, a, &ja);
	dlh_engine_job(e, b, &jb);
	CHECK(ja.status == DLH_RUNNING && jb.status == DLH_QUEUED);
	pid_t run = ja.run.pid;
	CHECK(run > 0 && dlh_proc_count_session(run) == 1);
	CHECK_MSG(strstr(jb.wait, "waiting for 1 cpu slot; 0 free; est. start unknown"), "wait: %s",
		  jb.wait);
	CHECK(dlh_engine_ctl(e, b, 0, "cancel", err, sizeof err) == 0);
	dlh_engine_job(e, b, &jb);
	CHECK(jb.status == DLH_CANCELLED);
	CHECK(dlh_engine_ctl(e, b, 0, "cancel", err, sizeof err) == -EBUSY);
	CHECK(dlh_engine_ctl(e, a, 77, "cancel", err, sizeof err) == -EPERM);
	CHECK(dlh_engine_ctl(e, a, 0, "explode", err, sizeof err) == -EINVAL);
	CHECK(dlh_engine_ctl(e, 999, 0, "cancel", err, sizeof err) == -ENOENT);
	CHECK(dlh_engine_ctl(e, a, 0, "cancel", err, sizeof err) == 0);
	CHECK(dlh_engine_wait(e, a, 10) == 0);
	dlh_engine_job(e, a, &ja);
	CHECK(ja.status == DLH_CANCELLED);
	CHECK(dlh_proc_count_session(run) == 0);
	dlh_engine_close(e);
}

TEST(engine_close_requeues_running_jobs)
{
	char state[512];
	struct dlh_engine *e = sleeper_engine(state, sizeof state, "eng-close");
	CHECK(e != NULL);
	long a = 0;
	char err[DLH_ERR_MAX];
	CHECK(dlh_engine_submit(e, slice_spec, sizeof slice_spec - 1, 0, &a, err, sizeof err) == 0);
	struct dlh_job j;
	dlh_engine_job(e, a, &j);
	pid_t pid = j.run.pid;
	CHECK(j.status == DLH_RUNNING && pid > 0);
	dlh_engine_close(e);
	CHECK(dlh_proc_count_session(pid) == 0);
	char dir[700];
	snprintf(dir, sizeof dir, "%s/jobs/%ld", state, a);
	CHECK(dlh_job_load(&j, dir) == 0);
	CHECK_MSG(j.status == DLH_QUEUED && strstr(j.reason, "interrupted"), "%s: %s",
		  dlh_status_name(j.status), j.reason);
}

TEST(engine_restart_on_failure_relaunches_up_to_max)
{
	char state[512], path[700], *log;
	fresh_dir(state, sizeof state, "eng-restart");
	struct dlh_engine *e = open_engine(state, "/bin/false", 2);
	CHECK(e != NULL);
	const char spec[] = "[job]\nrestart = on-failure\nmax_restarts = 2\n"
			    "[data]\ntrain_limit = 256\n[resources]\nranks = 1\n";
	long id = 0;
	char err[DLH_ERR_MAX];
	CHECK(dlh_engine_submit(e, spec, sizeof spec - 1, 0, &id, err, sizeof err) == 0);
	CHECK(dlh_engine_wait(e, id, 10) == 0);
	struct dlh_job j;
	CHECK(dlh_engine_job(e, id, &j) == 0);
	CHECK_MSG(j.status == DLH_FAILED && j.restarts == 2, "%s after %d restarts",
		  dlh_status_name(j.status), j.restarts);
	snprintf(path, sizeof path, "%s/jobs/%ld/log", state, id);
	CHECK(dlh_read_file(path, 1 << 20, &log, NULL) == 0);
	int launches = 0;
	for (char *p = strstr(log, "launching"); p; p = strstr(p + 1, "launching"))
		launches++;
	CHECK_MSG(launches == 3, "%d launches", launches);
	CHECK(strstr(log, "restarting (2 of 2)") != NULL);
	free(log);
	dlh_engine_close(e);
}

TEST(engine_user_command_succeeds_on_exit_zero)
{
	char state[512];
	fresh_dir(state, sizeof state, "eng-command");
	/* a stand-in for mpirun that drops mpirun's options and runs the command */
	char runner[700];
	snprintf(runner, sizeof runner, "%s/runner", state);
	write_text(runner, "#!/bin/sh\nwhile [ \"$1\" != /bin/true ]; do shift; done\nexec \"$@\"\n");
	chmod(runner, 0755);
	struct dlh_engine *e = open_engine(state, runner, 2);
	CHECK(e != NULL);
	const char spec[] = "[job]\ncommand = /bin/true --flag\n[resources]\nranks = 1\n";
	long id = 0;
	char err[DLH_ERR_MAX];
	CHECK(dlh_engine_submit(e, spec, sizeof spec - 1, 0, &id, err, sizeof err) == 0);
	CHECK(dlh_engine_wait(e, id, 10) == 0);
	struct dlh_job j;
	CHECK(dlh_engine_job(e, id, &j) == 0);
	CHECK_MSG(j.status == DLH_SUCCEEDED, "%s: %s", dlh_status_name(j.status), j.reason);
	dlh_engine_close(e);
}

/* An engine with one slot whose "mpirun" checkpoints like dlh-train: it
 * exits 75 on SIGUSR2 and notes SIGUSR1 in a file. */
static struct dlh_engine *suspender_engine(char *state, size_t len, const char *name)
{
	char prog[700];
	fresh_dir(state, len, name);
	snprintf(prog, sizeof prog, "%s/suspender", state);
	write_text(prog, "#!/bin/sh\n"
		   "trap 'echo ckpt >> \"$DLH_JOB_DIR/usr1\"' USR1\n"
		   "trap 'exit 75' USR2\n"
		   "sleep 0.5\n"
		   ": > \"$DLH_JOB_DIR/run.info\"\n"
		   "while :; do sleep 0.05; done\n");
	chmod(prog, 0755);
	return open_engine(state, prog, 1);
}

TEST(engine_suspend_exit_75_is_suspended_and_resume_requeues)
{
	char state[512], path[700];
	struct dlh_engine *e = suspender_engine(state, sizeof state, "eng-suspend");
	CHECK(e != NULL);
	long a = 0;
	char err[DLH_ERR_MAX];
	struct dlh_job j;
	CHECK(dlh_engine_submit(e, slice_spec, sizeof slice_spec - 1, 0, &a, err, sizeof err) == 0);
	dlh_engine_job(e, a, &j);
	CHECK(j.status == DLH_RUNNING);
	CHECK(dlh_engine_ctl(e, a, 0, "resume", err, sizeof err) == -EBUSY);
	/* before the trainer has started (no run.info of this run) a signal could kill it */
	CHECK(dlh_engine_ctl(e, a, 0, "checkpoint", err, sizeof err) == -EBUSY);
	CHECK_MSG(strstr(err, "is starting"), "err: %s", err);
	snprintf(path, sizeof path, "%s/jobs/%ld/run.info", state, a);
	for (int i = 0; i < 200 && access(path, F_OK); i++)
		usleep(20 * 1000);
	CHECK(dlh_engine_ctl(e, a, 0, "checkpoint", err, sizeof err) == 0);
	snprintf(path, sizeof path, "%s/jobs/%ld/usr1", state, a);
	for (int i = 0; i < 100 && access(path, F_OK); i++)
		usleep(20 * 1000);
	CHECK_MSG(access(path, F_OK) == 0, "SIGUSR1 did not reach the run");
	CHECK(dlh_engine_ctl(e, a, 0, "suspend", err, sizeof err) == 0);
	CHECK(dlh_engine_ctl(e, a, 0, "suspend", err, sizeof err) == -EBUSY);
	CHECK(dlh_engine_ctl(e, a, 0, "checkpoint", err, sizeof err) == -EBUSY);
	for (int i = 0; i < 200; i++) {
		dlh_engine_job(e, a, &j);
		if (j.status != DLH_RUNNING)
			break;
		usleep(20 * 1000);
	}
	CHECK_MSG(j.status == DLH_SUSPENDED && j.exit_code == DLH_EXIT_SUSPENDED && j.suspends == 1,
		  "%s exit %d: %s", dlh_status_name(j.status), j.exit_code, j.reason);
	struct dlh_usage use;
	dlh_engine_pool(e, NULL, &use);
	CHECK(use.slots_used == 0);
	CHECK(dlh_engine_ctl(e, a, 0, "priority 1001", err, sizeof err) == -EINVAL);
	CHECK(dlh_engine_ctl(e, a, 0, "priority -7", err, sizeof err) == 0);
	CHECK(dlh_engine_ctl(e, a, 0, "resume now", err, sizeof err) == -EINVAL);
	CHECK(dlh_engine_ctl(e, a, 0, "resume", err, sizeof err) == 0);
	dlh_engine_job(e, a, &j);
	CHECK_MSG(j.status == DLH_RUNNING && j.priority == -7, "%s prio %d", dlh_status_name(j.status),
		  j.priority);
	CHECK(dlh_engine_ctl(e, a, 0, "cancel", err, sizeof err) == 0);
	CHECK(dlh_engine_wait(e, a, 10) == 0);
	dlh_engine_close(e);
	/* the record keeps the priority and the count of suspends */
	snprintf(path, sizeof path, "%s/jobs/%ld", state, a);
	CHECK(dlh_job_load(&j, path) == 0);
	CHECK(j.priority == -7 && j.suspends == 1 && j.status == DLH_CANCELLED);
}

TEST(engine_priority_orders_the_queue_and_max_queued_refuses)
{
	char state[512], sleeper[700];
	fresh_dir(state, sizeof state, "eng-prio");
	sleeper_in(state, sleeper, sizeof sleeper);
	struct dlh_engine *e = open_engine_opts((struct dlh_engine_opts){
		.state_dir = state, .launcher = sleeper, .cpus = 1, .max_queued = 2 });
	char err[DLH_ERR_MAX];
	CHECK(e != NULL);
	/* not preemptible: this is about order, not preemption */
	const char lo[] = "[job]\npriority = 1\npreemptible = false\n[data]\ntrain_limit = 256\n"
			  "[resources]\nranks = 1\n";
	const char hi[] = "[job]\npriority = 9\npreemptible = false\n[data]\ntrain_limit = 256\n"
			  "[resources]\nranks = 1\n";
	long a = 0, b = 0, c = 0, d = 0;
	CHECK(dlh_engine_submit(e, lo, sizeof lo - 1, 0, &a, err, sizeof err) == 0); /* runs */
	CHECK(dlh_engine_submit(e, lo, sizeof lo - 1, 0, &b, err, sizeof err) == 0);
	CHECK(dlh_engine_submit(e, hi, sizeof hi - 1, 0, &c, err, sizeof err) == 0);
	CHECK(dlh_engine_submit(e, hi, sizeof hi - 1, 0, &d, err, sizeof err) == -EAGAIN);
	CHECK_MSG(strstr(err, "queue is full: 2 jobs queued (max_queued=2)"), "err: %s", err);
	struct dlh_queue_entry q[4];
	CHECK(dlh_engine_queue(e, q, 4) == 2);
	CHECK_MSG(q[0].id == c && q[0].priority == 9 && q[1].id == b, "queue %ld %ld", q[0].id, q[1].id);
	long h[2] = { 0, 0 };
	CHECK(dlh_engine_holders(e, 0, h, 2) == 1 && h[0] == a);
	/* the higher priority starts first when the slot frees */
	CHECK(dlh_engine_ctl(e, a, 0, "cancel", err, sizeof err) == 0);
	CHECK(dlh_engine_wait(e, a, 10) == 0);
	struct dlh_job jb, jc;
	dlh_engine_job(e, b, &jb);
	dlh_engine_job(e, c, &jc);
	CHECK_MSG(jc.status == DLH_RUNNING && jb.status == DLH_QUEUED, "c %s, b %s",
		  dlh_status_name(jc.status), dlh_status_name(jb.status));
	/* a priority raised by ctl reorders */
	CHECK(dlh_engine_ctl(e, b, 0, "priority 20", err, sizeof err) == 0);
	CHECK(dlh_engine_queue(e, q, 4) == 1 && q[0].priority == 20);
	dlh_engine_close(e);
}

TEST(engine_max_queued_per_user_refuses_one_user_not_the_others)
{
	char state[512], sleeper[700];
	fresh_dir(state, sizeof state, "eng-peruser");
	if (geteuid() != 0)
		SKIP("needs root: only a root daemon takes other users' jobs");
	sleeper_in(state, sleeper, sizeof sleeper);
	struct dlh_engine *e = open_engine_opts((struct dlh_engine_opts){
		.state_dir = state, .launcher = sleeper, .cpus = 1, .max_queued_per_user = 1 });
	char err[DLH_ERR_MAX];
	CHECK(e != NULL);
	const char spec[] = "[data]\ntrain_limit = 256\n[resources]\nranks = 1\n";
	long a = 0, b = 0, c = 0, d = 0;
	/* this process's own job holds the one slot, so the others only queue
	 * (a job of another uid would run as that user) */
	CHECK(dlh_engine_submit(e, spec, sizeof spec - 1, getuid(), &a, err, sizeof err) == 0);
	struct dlh_job ja;
	CHECK(dlh_engine_job(e, a, &ja) == 0 && ja.status == DLH_RUNNING);
	CHECK(dlh_engine_submit(e, spec, sizeof spec - 1, 1000, &b, err, sizeof err) == 0); /* waits */
	CHECK(dlh_engine_submit(e, spec, sizeof spec - 1, 1000, &c, err, sizeof err) == -EAGAIN);
	CHECK_MSG(strstr(err, "uid 1000 has 1 jobs queued (max_queued_per_user=1)"), "err: %s", err);
	CHECK_MSG(dlh_engine_submit(e, spec, sizeof spec - 1, 2000, &d, err, sizeof err) == 0, "%s", err);
	struct dlh_queue_entry q[4];
	CHECK(dlh_engine_queue(e, q, 4) == 2);
	dlh_engine_close(e);
}

TEST(engine_ranks_per_user_gives_freed_slots_to_the_other_users_first)
{
	char state[512], sleeper[700];
	fresh_dir(state, sizeof state, "eng-ranksuser");
	sleeper_in(state, sleeper, sizeof sleeper);
	struct dlh_engine *e = open_engine_opts((struct dlh_engine_opts){
		.state_dir = state, .launcher = sleeper, .cpus = 2, .ranks_per_user = 1 });
	char err[DLH_ERR_MAX];
	CHECK(e != NULL);
	const char spec[] = "[data]\ntrain_limit = 256\n[resources]\nranks = 1\n";
	long a = 0, b = 0, c = 0, d = 0;
	unsigned me = getuid(), other = me + 1;
	/* alone, this user has the whole pool: the cap binds only while another waits */
	CHECK(dlh_engine_submit(e, spec, sizeof spec - 1, me, &a, err, sizeof err) == 0);
	CHECK(dlh_engine_submit(e, spec, sizeof spec - 1, me, &b, err, sizeof err) == 0);
	struct dlh_job jb, jc;
	CHECK(dlh_engine_job(e, b, &jb) == 0 && jb.status == DLH_RUNNING);
	CHECK(dlh_engine_submit(e, spec, sizeof spec - 1, me, &c, err, sizeof err) == 0);
	CHECK(dlh_engine_submit(e, spec, sizeof spec - 1, other, &d, err, sizeof err) == 0);
	/* the other user's later job is first in the queue; c waits unreserved */
	struct dlh_queue_entry q[4];
	CHECK(dlh_engine_queue(e, q, 4) == 2);
	CHECK_MSG(q[0].id == d && q[1].id == c && isinf(q[1].est_start), "queue %ld %ld", q[0].id,
		  q[1].id);
	CHECK(dlh_engine_job(e, c, &jc) == 0);
	CHECK_MSG(strstr(jc.wait, "hold 2 rank slots, its share (ranks_per_user=1)"), "c: %s", jc.wait);
	/* with nobody else waiting, c starts when a slot frees */
	CHECK(dlh_engine_ctl(e, d, 0, "cancel", err, sizeof err) == 0);
	CHECK(dlh_engine_ctl(e, a, 0, "cancel", err, sizeof err) == 0);
	CHECK(dlh_engine_wait(e, a, 10) == 0);
	CHECK(dlh_engine_job(e, c, &jc) == 0);
	CHECK_MSG(jc.status == DLH_RUNNING, "c %s: %s", dlh_status_name(jc.status), jc.wait);
	dlh_engine_close(e);
}

/* Polls job id until its status is st or 4 s pass. Returns 1 when reached. */
static int wait_status(struct dlh_engine *e, long id, enum dlh_status st)
{
	struct dlh_job j;
	for (int i = 0; i < 200; i++) {
		if (!dlh_engine_job(e, id, &j) && j.status == st)
			return 1;
		usleep(20 * 1000);
	}
	return 0;
}

TEST(engine_preemption_requeues_the_victim_and_resumes_it)
{
	char state[512];
	struct dlh_engine *e = suspender_engine(state, sizeof state, "eng-preempt");
	CHECK(e != NULL);
	const char lo[] = "[job]\npriority = 0\n[data]\ntrain_limit = 256\n[resources]\nranks = 1\n";
	const char hi[] = "[job]\npriority = 5\n[data]\ntrain_limit = 256\n[resources]\nranks = 1\n";
	long a = 0, b = 0;
	char err[DLH_ERR_MAX];
	CHECK(dlh_engine_submit(e, lo, sizeof lo - 1, 0, &a, err, sizeof err) == 0);
	char path[700];
	snprintf(path, sizeof path, "%s/jobs/%ld/run.info", state, a);
	for (int i = 0; i < 200 && access(path, F_OK); i++) /* its traps are in place */
		usleep(20 * 1000);
	CHECK(dlh_engine_submit(e, hi, sizeof hi - 1, 0, &b, err, sizeof err) == 0);
	CHECK_MSG(wait_status(e, b, DLH_RUNNING), "the higher priority did not start");
	struct dlh_job j;
	dlh_engine_job(e, a, &j);
	CHECK_MSG(j.status == DLH_QUEUED && strstr(j.reason, "preempted by job") && j.suspends == 1,
		  "victim %s: %s", dlh_status_name(j.status), j.reason);
	/* it resumes by itself once the slot frees */
	CHECK(dlh_engine_ctl(e, b, 0, "cancel", err, sizeof err) == 0);
	CHECK_MSG(wait_status(e, a, DLH_RUNNING), "the victim did not resume");
	CHECK(dlh_engine_ctl(e, a, 0, "cancel", err, sizeof err) == 0);
	CHECK(dlh_engine_wait(e, a, 10) == 0);
	dlh_engine_close(e);
}

TEST(engine_pool_ctl_names_unknown_verbs_and_refuses_other_users)
{
	char state[512], err[256] = "";
	fresh_dir(state, sizeof state, "eng-poolctl");
	struct dlh_engine *e = open_engine(state, "/bin/false", 1);
	CHECK(e);
	int rc = dlh_engine_pool_ctl(e, 0, "  shutdown node1\n", err, sizeof err);
	CHECK_MSG(rc == -EINVAL && strstr(err, "unknown verb \"shutdown\"") &&
		  strstr(err, "expected: recalibrate, refresh, reload, drain NODE, undrain NODE"), "%d %s", rc, err);
	rc = dlh_engine_pool_ctl(e, 0, "drain nosuch\n", err, sizeof err);
	CHECK_MSG(rc == -EINVAL && strstr(err, "no node \"nosuch\" in the pool"), "%d %s", rc, err);
	rc = dlh_engine_pool_ctl(e, 0, "drain\n", err, sizeof err);
	CHECK_MSG(rc == -EINVAL && strstr(err, "takes a node's name"), "%d %s", rc, err);
	rc = dlh_engine_pool_ctl(e, 0, "recalibrate now\n", err, sizeof err);
	CHECK_MSG(rc == -EINVAL && strstr(err, "takes no argument"), "%d %s", rc, err);
	/* neither root nor the user the daemon runs as */
	uid_t other = getuid() == 0 ? 4242 : getuid() + 1;
	rc = dlh_engine_pool_ctl(e, other, "recalibrate", err, sizeof err);
	CHECK_MSG(rc == -EPERM && strstr(err, "may control the pool"), "%d %s", rc, err);
	char host[128];
	gethostname(host, sizeof host);
	char line[300];
	snprintf(line, sizeof line, "drain %s", host);
	rc = dlh_engine_pool_ctl(e, other, line, err, sizeof err);
	CHECK_MSG(rc == -EPERM, "%d %s", rc, err);
	dlh_engine_close(e);
}

int main(void)
{
	if (tmp_root_make())
		return 1;
	RUN(engine_second_open_of_a_state_dir_is_refused);
	RUN(engine_rejection_goes_to_errors_log_and_makes_no_job);
	RUN(engine_spec_the_pool_cannot_run_is_refused_and_spends_no_id);
	RUN(engine_failed_run_gets_reason_and_ids_are_never_reused);
	RUN(engine_success_needs_a_result_file);
	RUN(engine_queue_is_fifo_and_cancel_of_queued_is_immediate);
	RUN(engine_close_requeues_running_jobs);
	RUN(engine_restart_on_failure_relaunches_up_to_max);
	RUN(engine_user_command_succeeds_on_exit_zero);
	RUN(engine_suspend_exit_75_is_suspended_and_resume_requeues);
	RUN(engine_priority_orders_the_queue_and_max_queued_refuses);
	RUN(engine_max_queued_per_user_refuses_one_user_not_the_others);
	RUN(engine_ranks_per_user_gives_freed_slots_to_the_other_users_first);
	RUN(engine_preemption_requeues_the_victim_and_resumes_it);
	RUN(engine_pool_ctl_names_unknown_verbs_and_refuses_other_users);
	tmp_root_remove();
	return CHECK_EXIT();
}
