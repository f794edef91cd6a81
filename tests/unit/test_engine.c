/* test_engine.c - the engine without a mount: records, plans, metrics, processes, jobs */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine/run/cgroup.h"
#include "engine/engine.h"
#include "engine/jobs/job.h"
#include "engine/run/launch.h"
#include "engine/jobs/metrics.h"
#include "engine/plan/plan.h"
#include "engine/run/proc.h"
#include "engine/sched/sched.h"
#include "engine/util/util.h"
#include "tests/unit/check.h"

static char tmp_root[256];

/* A fresh directory under the test's temp root. */
static void fresh_dir(char *out, size_t len, const char *name)
{
	snprintf(out, len, "%s/%s", tmp_root, name);
	dlh_mkdir_p(out, 0755);
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static const char slice_spec[] =
	"[data]\ntrain_limit = 256\ntest_limit = 256\n[train]\nepochs = 1\n[resources]\nranks = 1\n";

TEST(atomic_write_replaces_whole_file)
{
	char dir[512], path[600], *text;
	fresh_dir(dir, sizeof dir, "atomic");
	snprintf(path, sizeof path, "%s/f", dir);
	CHECK(dlh_write_atomic(path, "first version\n", 14) == 0);
	CHECK(dlh_write_atomic(path, "2\n", 2) == 0);
	CHECK(dlh_read_file(path, 100, &text, NULL) == 0);
	CHECK(strcmp(text, "2\n") == 0);
	free(text);
	char tmp[700];
	snprintf(tmp, sizeof tmp, "%s/.f.tmp", dir);
	CHECK(access(tmp, F_OK) != 0);
	/* a write that cannot finish leaves the old file whole and no temporary */
	char bad[700];
	snprintf(bad, sizeof bad, "%s/missing-dir/f", dir);
	CHECK(dlh_write_atomic(bad, "x", 1) == -ENOENT);
	CHECK(dlh_read_file(path, 100, &text, NULL) == 0 && !strcmp(text, "2\n"));
	free(text);
}

TEST(read_file_refuses_over_max)
{
	char dir[512], path[600], *text = NULL;
	fresh_dir(dir, sizeof dir, "readmax");
	snprintf(path, sizeof path, "%s/f", dir);
	write_text(path, "0123456789");
	CHECK(dlh_read_file(path, 9, &text, NULL) == -EFBIG);
	CHECK(dlh_read_file(path, 10, &text, NULL) == 0);
	free(text);
	CHECK(dlh_read_file("/nonexistent/x", 10, &text, NULL) == -ENOENT);
}

TEST(kv_get_finds_exact_keys)
{
	char v[32];
	const char *t = "steps=10\nsteps_per_epoch=5\nname=a b\n";
	CHECK(dlh_kv_get(t, "steps_per_epoch", v, sizeof v) == 0 && !strcmp(v, "5"));
	CHECK(dlh_kv_get(t, "steps", v, sizeof v) == 0 && !strcmp(v, "10"));
	CHECK(dlh_kv_get(t, "name", v, sizeof v) == 0 && !strcmp(v, "a b"));
	CHECK(dlh_kv_get(t, "step", v, sizeof v) == -ENOENT);
}

TEST(duration_formats)
{
	char b[32];
	dlh_duration(41, b, sizeof b);
	CHECK(!strcmp(b, "0:41"));
	dlh_duration(3725, b, sizeof b);
	CHECK(!strcmp(b, "1:02:05"));
	dlh_duration(-3, b, sizeof b);
	CHECK(!strcmp(b, "0:00"));
}

static struct dlh_spec parsed(const char *text)
{
	struct dlh_spec s;
	char err[DLH_ERR_MAX];
	if (dlh_spec_parse(text, strlen(text), &s, err, sizeof err))
		dlh_spec_defaults(&s);
	return s;
}

/* The index of the last argv word of p equal to word, or -1. */
static int argv_index(const struct dlh_plan *p, const char *word)
{
	int at = -1;
	for (int i = 0; i < p->argc; i++)
		if (!strcmp(p->argv[i], word))
			at = i;
	return at;
}

static const struct dlh_tools tools = { "/usr/bin/mpirun", "/opt/dlh-train" };

TEST(plan_splits_batch_with_remainder_first)
{
	struct dlh_pool pool = { .node = { "n1", 4, 0, "", 0 } };
	struct dlh_spec s = parsed("[train]\nbatch_size = 10\n[resources]\nranks = 4\n");
	struct dlh_plan *p = malloc(sizeof *p);
	char err[256];
	CHECK(dlh_plan_make(&s, &pool, &tools, "/st/jobs/1", p, err, sizeof err) == 0);
	CHECK_MSG(p->ranks == 4 && p->batch[0] == 3 && p->batch[1] == 3 && p->batch[2] == 2 &&
		  p->batch[3] == 2, "batches %d %d %d %d", p->batch[0], p->batch[1], p->batch[2], p->batch[3]);
	free(p);
}

TEST(plan_auto_ranks_take_every_slot)
{
	struct dlh_pool pool = { .node = { "n1", 3, 0, "", 0 } };
	struct dlh_spec s = parsed("[train]\nbatch_size = 64\n");
	CHECK(s.ranks == 0);
	CHECK(dlh_plan_slots(&s, &pool) == 3);
	s.batch_size = 2;
	CHECK(dlh_plan_slots(&s, &pool) == 2);
}

TEST(plan_refuses_more_ranks_than_slots_and_missing_gpus)
{
	struct dlh_pool pool = { .node = { "n1", 2, 0, "", 0 } };
	struct dlh_plan *p = malloc(sizeof *p);
	char err[256];
	struct dlh_spec s = parsed("[resources]\nranks = 3\n");
	CHECK(dlh_plan_make(&s, &pool, &tools, "/d", p, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "3 ranks need 3 cpu slots, the pool has 2"), "err: %s", err);
	s = parsed("[resources]\nranks = 1\ndevice = gpu\n");
	CHECK(dlh_plan_make(&s, &pool, &tools, "/d", p, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "no GPU"), "err: %s", err);
	free(p);
}

TEST(plan_gpu_takes_one_rank_per_gpu_and_passes_device)
{
	struct dlh_pool pool = { .node = { "n1", 16, 0, "", 2 } };
	struct dlh_spec s = parsed("[resources]\ndevice = gpu\n");
	struct dlh_plan *p = malloc(sizeof *p);
	struct dlh_buf out = { 0 };
	char err[256];
	int dev;
	CHECK(dlh_plan_slots(&s, &pool) == 2);
	CHECK_MSG(dlh_plan_make(&s, &pool, &tools, "/d", p, err, sizeof err) == 0, "%s", err);
	CHECK(p->ranks == 2 && p->gpu == 1);
	dev = argv_index(p, "--device");
	CHECK(dev > 0 && !strcmp(p->argv[dev + 1], "gpu"));
	CHECK(dlh_plan_format(p, &out) == 0);
	CHECK_MSG(strstr(out.data, "rank 1 host n1 device gpu1 batch 32\n"), "plan: %s", out.data);
	free(out.data);
	s = parsed("[resources]\nranks = 3\ndevice = gpu\n");
	CHECK(dlh_plan_make(&s, &pool, &tools, "/d", p, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "3 ranks need 3 GPUs (one each), the pool has 2"), "err: %s", err);
	s = parsed("[resources]\nranks = 2\n");
	CHECK(dlh_plan_make(&s, &pool, &tools, "/d", p, err, sizeof err) == 0);
	CHECK_MSG(argv_index(p, "--device") < 0, "a cpu plan passes --device");
	free(p);
}

TEST(plan_unequal_cpu_batches_are_rebalanced_unless_the_spec_says_not)
{
	struct dlh_pool pool = { .node = { "n1", 2, 0, "", 2 } };
	struct dlh_spec s = parsed("[train]\nbatch_size = 64\n");
	struct dlh_plan *p = malloc(sizeof *p);
	struct dlh_buf out = { 0 };
	const int split[2] = { 48, 16 }, even[2] = { 32, 32 };
	struct dlh_plan_override ov = { .ranks = 2, .batch = split, .lr = 0.01 };
	char err[256];
	int at;
	CHECK_MSG(dlh_plan_make_with(&s, &ov, &pool, &tools, "/d", p, err, sizeof err) == 0, "%s", err);
	at = argv_index(p, "--rebalance");
	CHECK_MSG(at > 0 && p->rebalance == DLH_REBALANCE_STEPS && atoi(p->argv[at + 1]) == DLH_REBALANCE_STEPS,
		  "--rebalance at %d", at);
	CHECK(argv_index(p, "48,16") > 0);
	CHECK(dlh_plan_format(p, &out) == 0);
	CHECK_MSG(strstr(out.data, "\nrebalance every 20 steps ("), "plan: %s", out.data);
	free(out.data);
	ov.batch = even;   /* one speed: nothing to correct */
	CHECK(dlh_plan_make_with(&s, &ov, &pool, &tools, "/d", p, err, sizeof err) == 0);
	CHECK(argv_index(p, "--rebalance") < 0 && p->rebalance == 0);
	s = parsed("[train]\nbatch_size = 64\nrebalance = false\n");
	ov.batch = split;
	CHECK(dlh_plan_make_with(&s, &ov, &pool, &tools, "/d", p, err, sizeof err) == 0);
	CHECK(argv_index(p, "--rebalance") < 0 && argv_index(p, "48,16") > 0);
	s = parsed("[train]\nbatch_size = 64\n[resources]\ndevice = gpu\n");
	CHECK_MSG(dlh_plan_make_with(&s, &ov, &pool, &tools, "/d", p, err, sizeof err) == 0, "%s", err);
	CHECK_MSG(argv_index(p, "--rebalance") < 0, "GPU ranks are not rebalanced");
	free(p);
}

TEST(plan_argv_is_exact_words_without_a_shell)
{
	struct dlh_pool pool = { .node = { "n1", 2, 0, "", 0 } };
	struct dlh_spec s = parsed("[resources]\nranks = 2\n[train]\nlr = 0.1\n");
	struct dlh_plan *p = malloc(sizeof *p);
	char err[256];
	CHECK(dlh_plan_make(&s, &pool, &tools, "/st/jobs/1", p, err, sizeof err) == 0);
	CHECK(!strcmp(p->argv[0], "/usr/bin/mpirun"));
	CHECK(!strcmp(p->argv[1], "-np") && !strcmp(p->argv[2], "2"));
	int at = argv_index(p, "/opt/dlh-train");
	CHECK(at > 0 && !strcmp(p->argv[at + 1], "--job-dir") && !strcmp(p->argv[at + 2], "/st/jobs/1"));
	int lr = argv_index(p, "--lr");
	CHECK_MSG(lr > 0 && !strcmp(p->argv[lr + 1], "0.1"), "lr printed as %s", p->argv[lr + 1]);
	CHECK(p->argv[p->argc] == NULL);
	free(p);
}

TEST(plan_user_command_is_split_on_blanks_only)
{
	struct dlh_pool pool = { .node = { "n1", 2, 0, "", 0 } };
	struct dlh_spec s = parsed("[job]\ncommand = /bin/echo a;b  $(x)\n[resources]\nranks = 1\n");
	struct dlh_plan *p = malloc(sizeof *p);
	char err[256];
	CHECK(dlh_plan_make(&s, &pool, &tools, "/d", p, err, sizeof err) == 0);
	CHECK(!strcmp(p->argv[p->argc - 3], "/bin/echo"));
	CHECK(!strcmp(p->argv[p->argc - 2], "a;b"));
	CHECK(!strcmp(p->argv[p->argc - 1], "$(x)"));
	free(p);
}

TEST(metrics_read_newest_rows_and_ignore_partial_line)
{
	char dir[512], path[600];
	fresh_dir(dir, sizeof dir, "metrics");
	snprintf(path, sizeof path, "%s/metrics.csv", dir);
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	fprintf(f, "kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s\n");
	for (int s = 1; s <= 3000; s++) {
		fprintf(f, "train,%d,%d,%.3f,%.4f,0.5,0.05,1000\n", s, (s - 1) / 1000 + 1, s * 0.01, 3.0 / s);
		if (s == 1000)
			fprintf(f, "eval,1000,1,10.5,0.61,0.777,,\n");
	}
	fprintf(f, "train,3001,4,30.01,0.1"); /* being written */
	fclose(f);
	struct dlh_metrics m;
	CHECK(dlh_metrics_read(path, &m) == 0);
	CHECK(m.have_train && m.step == 3000 && m.epoch == 3);
	CHECK(m.have_eval && m.eval_step == 1000 && m.test_accuracy > 0.776 && m.test_accuracy < 0.778);
}

TEST(metrics_missing_file_is_empty)
{
	struct dlh_metrics m;
	CHECK(dlh_metrics_read("/nonexistent/metrics.csv", &m) == 0);
	CHECK(!m.have_train && !m.have_eval);
}

TEST(job_record_round_trips)
{
	char dir[512], path[600];
	fresh_dir(dir, sizeof dir, "job");
	struct dlh_job j = { 0 }, k;
	j.id = 42;
	j.uid = 1000;
	j.status = DLH_CANCELLED;
	snprintf(j.reason, sizeof j.reason, "cancelled by uid 1000");
	j.submitted = 1700000000.5;
	j.pid = 1234;
	j.pid_start = 987654321ULL;
	j.ranks = 2;
	j.exit_code = -9;
	snprintf(path, sizeof path, "%s/spec.ini", dir);
	write_text(path, "[job]\nname = keep\n[train]\ntrain_nope = 1\n");
	CHECK(dlh_job_save(&j, dir) == 0);
	CHECK(dlh_job_load(&k, dir) == -EINVAL); /* the spec does not parse */
	write_text(path, "[job]\nname = keep\n[data]\ntrain = /nonexistent/gone.gz\n");
	CHECK(dlh_job_load(&k, dir) == 0);       /* data files may be gone since */
	CHECK(k.id == 42 && k.uid == 1000 && k.status == DLH_CANCELLED && k.pid == 1234);
	CHECK(k.pid_start == 987654321ULL && k.ranks == 2 && k.exit_code == -9);
	CHECK(!strcmp(k.reason, j.reason) && !strcmp(k.spec.name, "keep"));
	CHECK(k.submitted > 1700000000.4 && k.submitted < 1700000000.6);
}

TEST(launch_runs_in_own_session_and_session_kill_reaches_all)
{
	char dir[512], log[600];
	fresh_dir(dir, sizeof dir, "launch");
	snprintf(log, sizeof log, "%s/log", dir);
	/* a leader with a child that outlives nothing unless killed */
	char *argv[] = { "/usr/bin/env", "sleep", "30", NULL };
	char *extra[] = { "DLH_TEST=1", NULL };
	pid_t pid;
	CHECK(dlh_launch(argv, extra, log, &pid) == 0);
	for (int i = 0; i < 100 && dlh_proc_count_session(pid) < 1; i++)
		usleep(10000);
	CHECK(getsid(pid) == pid);
	CHECK(dlh_proc_start(pid) != 0);
	CHECK(dlh_proc_kill_session(pid, SIGKILL) >= 1);
	int st;
	CHECK(waitpid(pid, &st, 0) == pid && WIFSIGNALED(st));
	CHECK(dlh_proc_count_session(pid) == 0);
}

TEST(launch_exec_failure_is_returned)
{
	char dir[512], log[600];
	fresh_dir(dir, sizeof dir, "launchfail");
	snprintf(log, sizeof log, "%s/log", dir);
	char *argv[] = { "/nonexistent/mpirun", NULL };
	pid_t pid = 0;
	CHECK(dlh_launch(argv, NULL, log, &pid) == -ENOENT);
	CHECK(pid == 0);
	CHECK(waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD); /* the child was reaped */
}

TEST(engine_second_open_of_a_state_dir_is_refused)
{
	char state[512], err[512];
	fresh_dir(state, sizeof state, "eng-lock");
	struct dlh_engine_opts o = { .state_dir = state, .trainer = "/bin/true", .mpirun = "/bin/false",
				      .no_calibrate = 1 };
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

/* An engine whose "mpirun" is a program of our choosing. */
static struct dlh_engine *open_engine(const char *state, const char *mpirun, int cpus)
{
	struct dlh_engine_opts o = {
		.state_dir = state, .trainer = "/bin/true", .mpirun = mpirun, .cpus = cpus,
		.kill_grace = 0.5, .no_calibrate = 1,
	};
	struct dlh_engine *e = NULL;
	char err[512];
	if (dlh_engine_open(&e, &o, err, sizeof err))
		printf("# open: %s\n", err);
	return e;
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
	dlh_engine_errors_path(e, path, sizeof path);
	CHECK(dlh_read_file(path, 1 << 20, &text, NULL) == 0);
	CHECK_MSG(strstr(text, " uid=1234 spec:2: [train] epochs:"), "errors: %s", text);
	free(text);
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
	pid_t run = ja.pid;
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
	pid_t pid = j.pid;
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

TEST(sched_order_is_priority_then_submission_then_id)
{
	struct dlh_sched_wait w[] = {
		{ .id = 1, .priority = 0, .submitted = 10 }, { .id = 2, .priority = 5, .submitted = 30 },
		{ .id = 3, .priority = 0, .submitted = 5 }, { .id = 4, .priority = 5, .submitted = 30 },
		{ .id = 5, .priority = -1, .submitted = 1 },
	};
	dlh_sched_order(w, 5);
	long want[] = { 2, 4, 3, 1, 5 };
	for (int i = 0; i < 5; i++)
		CHECK_MSG(w[i].id == want[i], "position %d: job %ld, want %ld", i, w[i].id, want[i]);
}

TEST(sched_backfills_only_what_ends_before_the_reservation)
{
	/* 2 slots; one held until t=100; the head needs both */
	struct dlh_sched_run run[] = { { .cpus = 1, .end = 100 } };
	struct dlh_sched_wait w[] = {
		{ .id = 1, .cpus = 2, .duration = 50 },       /* head: reserved at 100 */
		{ .id = 2, .cpus = 1, .duration = 60 },       /* ends at 60 < 100: now */
		{ .id = 3, .cpus = 1, .duration = 200 },      /* would delay the head: after it */
		{ .id = 4, .cpus = 1, .duration = INFINITY }, /* no limit: beside job 3 */
		{ .id = 5, .cpus = 3, .duration = 1 },        /* never fits */
	};
	dlh_sched_plan(2, 0, run, 1, w, 5);
	CHECK_MSG(w[0].start == 100, "head at %g", w[0].start);
	CHECK_MSG(w[1].start == 0, "short job at %g", w[1].start);
	CHECK_MSG(w[2].start == 150, "long job at %g", w[2].start);
	CHECK_MSG(w[3].start == 150, "unlimited job at %g", w[3].start);
	CHECK(isinf(w[4].start));
}

TEST(sched_unknown_ends_let_only_limited_jobs_pass)
{
	struct dlh_sched_run run[] = { { .cpus = 1, .end = INFINITY } };
	struct dlh_sched_wait w[] = {
		{ .id = 1, .cpus = 2, .duration = 50 },       /* start unknown */
		{ .id = 2, .cpus = 1, .duration = 10 },       /* limited: may pass */
		{ .id = 3, .cpus = 1, .duration = INFINITY }, /* unlimited: may not */
	};
	dlh_sched_plan(2, 1000, run, 1, w, 3);
	CHECK(isinf(w[0].start));
	CHECK_MSG(w[1].start == 1000, "limited job at %g", w[1].start);
	CHECK(isinf(w[2].start));
}

TEST(engine_priority_orders_the_queue_and_max_queued_refuses)
{
	char state[512], sleeper[700];
	fresh_dir(state, sizeof state, "eng-prio");
	snprintf(sleeper, sizeof sleeper, "%s/sleeper", state);
	write_text(sleeper, "#!/bin/sh\nexec sleep 30\n");
	chmod(sleeper, 0755);
	struct dlh_engine_opts o = {
		.state_dir = state, .trainer = "/bin/true", .mpirun = sleeper, .cpus = 1,
		.kill_grace = 0.5, .max_queued = 2, .no_calibrate = 1,
	};
	struct dlh_engine *e = NULL;
	char err[DLH_ERR_MAX];
	CHECK(dlh_engine_open(&e, &o, err, sizeof err) == 0);
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
	CHECK(dlh_engine_holders(e, h, 2) == 1 && h[0] == a);
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

TEST(size_text_uses_the_largest_exact_unit)
{
	char t[32];
	dlh_size_text(64LL << 20, t, sizeof t);
	CHECK(!strcmp(t, "64M"));
	dlh_size_text(1536LL << 10, t, sizeof t);
	CHECK(!strcmp(t, "1536K"));
	dlh_size_text(3LL << 40, t, sizeof t);
	CHECK(!strcmp(t, "3T"));
	dlh_size_text(1000, t, sizeof t);
	CHECK(!strcmp(t, "1000"));
}

TEST(cgroup_run_group_has_cpuset_limit_and_its_process)
{
	struct dlh_cgroup_sys sys;
	dlh_cgroup_setup(&sys);
	if (sys.mode == DLH_CG_NONE)
		SKIP(sys.why);
	struct dlh_cgroup cg;
	char err[512], path[DLH_CG_PATH_MAX + 64], *text;
	int slots[] = { 0 };
	CHECK_MSG(dlh_cgroup_create(&sys, "unit-1", slots, 1, 64LL << 20, &cg, err, sizeof err) == 0,
		  "create: %s", err);
	snprintf(path, sizeof path, "%s/cpuset.cpus", cg.cpuset);
	CHECK(dlh_read_file(path, 4096, &text, NULL) == 0);
	char want[16];
	snprintf(want, sizeof want, "%d\n", sys.cpu[0]);
	CHECK_MSG(!strcmp(text, want), "cpuset.cpus: %s", text);
	free(text);
	snprintf(path, sizeof path, "%s/%s", cg.memory,
		 sys.mode == DLH_CG_V1 ? "memory.limit_in_bytes" : "memory.max");
	CHECK(dlh_read_file(path, 4096, &text, NULL) == 0);
	CHECK_MSG(!strcmp(text, "67108864\n"), "limit: %s", text);
	free(text);
	/* a launched program is inside before it runs */
	int join[3];
	CHECK(dlh_cgroup_join_fds(&cg, join) == 0);
	char log[700], dir[512];
	fresh_dir(dir, sizeof dir, "cgroup");
	snprintf(log, sizeof log, "%s/log", dir);
	char *argv[] = { "/bin/sh", "-c", "cat /proc/self/cgroup; exec sleep 30", NULL };
	pid_t pid;
	int rc = dlh_launch_in(argv, NULL, log, join, &pid);
	for (int k = 0; join[k] >= 0; k++)
		close(join[k]);
	CHECK(rc == 0);
	snprintf(path, sizeof path, "%s/cgroup.procs", cg.cpuset);
	CHECK(dlh_read_file(path, 4096, &text, NULL) == 0);
	char me[32];
	snprintf(me, sizeof me, "%ld\n", (long)pid);
	int inside = strstr(text, me) != NULL;
	free(text);
	CHECK(dlh_cgroup_oom_kills(&cg) == 0);
	char dirpath[DLH_CG_PATH_MAX];
	snprintf(dirpath, sizeof dirpath, "%s", cg.cpuset);
	dlh_cgroup_destroy(&cg); /* kills what is left */
	waitpid(pid, NULL, 0);
	CHECK_MSG(inside, "pid %ld is not in its group", (long)pid);
	CHECK_MSG(access(dirpath, F_OK) != 0, "%s left behind", dirpath);
	dlh_cgroup_teardown(&sys);
}

int main(void)
{
	snprintf(tmp_root, sizeof tmp_root, "/tmp/dlh-unit-XXXXXX");
	if (!mkdtemp(tmp_root)) {
		perror("mkdtemp");
		return 1;
	}
	RUN(atomic_write_replaces_whole_file);
	RUN(read_file_refuses_over_max);
	RUN(kv_get_finds_exact_keys);
	RUN(duration_formats);
	RUN(plan_splits_batch_with_remainder_first);
	RUN(plan_auto_ranks_take_every_slot);
	RUN(plan_refuses_more_ranks_than_slots_and_missing_gpus);
	RUN(plan_gpu_takes_one_rank_per_gpu_and_passes_device);
	RUN(plan_unequal_cpu_batches_are_rebalanced_unless_the_spec_says_not);
	RUN(plan_argv_is_exact_words_without_a_shell);
	RUN(plan_user_command_is_split_on_blanks_only);
	RUN(metrics_read_newest_rows_and_ignore_partial_line);
	RUN(metrics_missing_file_is_empty);
	RUN(job_record_round_trips);
	RUN(launch_runs_in_own_session_and_session_kill_reaches_all);
	RUN(launch_exec_failure_is_returned);
	RUN(engine_second_open_of_a_state_dir_is_refused);
	RUN(engine_rejection_goes_to_errors_log_and_makes_no_job);
	RUN(engine_failed_run_gets_reason_and_ids_are_never_reused);
	RUN(engine_success_needs_a_result_file);
	RUN(engine_queue_is_fifo_and_cancel_of_queued_is_immediate);
	RUN(engine_close_requeues_running_jobs);
	RUN(engine_restart_on_failure_relaunches_up_to_max);
	RUN(engine_user_command_succeeds_on_exit_zero);
	RUN(engine_suspend_exit_75_is_suspended_and_resume_requeues);
	RUN(sched_order_is_priority_then_submission_then_id);
	RUN(sched_backfills_only_what_ends_before_the_reservation);
	RUN(sched_unknown_ends_let_only_limited_jobs_pass);
	RUN(engine_priority_orders_the_queue_and_max_queued_refuses);
	RUN(engine_preemption_requeues_the_victim_and_resumes_it);
	RUN(size_text_uses_the_largest_exact_unit);
	RUN(cgroup_run_group_has_cpuset_limit_and_its_process);
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmp_root);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", tmp_root);
	return CHECK_EXIT();
}
