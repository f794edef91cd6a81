/* test_backend.c - the launch seam (engine/run/backend.h) and its local
 * backend: the launcher's argv, start, verbs, wait, the handle in the job
 * dir, and finding a run again as a restarted daemon does */
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

#include "engine/contract/contract.h"
#include "engine/run/backend.h"
#include "engine/run/proc.h"
#include "engine/util/util.h"
#include "tests/unit/check.h"
#include "tests/unit/tmpdir.h"

/* A stand-in for mpirun in dir: drops the launcher's options (everything
 * before the program, /bin/sh) and runs the program as the one rank. */
static void fake_launcher(const char *dir, char *path, size_t len)
{
	snprintf(path, len, "%s/launcher", dir);
	write_text(path, "#!/bin/sh\nwhile [ \"$1\" != /bin/sh ]; do shift; done\nexec \"$@\"\n");
	chmod(path, 0755);
}

/* Waits up to 5 s for text to appear in path. Returns 1 when it did. */
static int log_has(const char *path, const char *text)
{
	for (int i = 0; i < 500; i++) {
		char *all = NULL;
		if (!dlh_read_file(path, 1 << 20, &all, NULL)) {
			int hit = strstr(all, text) != NULL;
			free(all);
			if (hit)
				return 1;
		}
		usleep(10000);
	}
	return 0;
}

TEST(local_argv_is_mpirun_with_its_options_then_the_program)
{
	struct dlh_backend be;
	char err[256], *argv[DLH_LAUNCH_ARGV_MAX], store[4096];
	char *prog[] = { "/usr/bin/dlh-train", "--epochs", "2", NULL };
	struct dlh_launch l = { .argv = prog, .ranks = 3 };

	CHECK_MSG(dlh_backend_local(&be, "/opt/ompi/bin/mpirun", err, sizeof err) == 0, "%s", err);
	CHECK(!strcmp(be.name, "local") && !strcmp(be.launcher_name, "mpirun"));
	int n = be.ops->argv(&be, &l, argv, DLH_LAUNCH_ARGV_MAX, store, sizeof store);
	CHECK(n == 15 && argv[n] == NULL);
	struct dlh_buf joined = {0};
	for (int i = 0; i < n; i++)
		dlh_buf_printf(&joined, "%s%s", i ? " " : "", argv[i]);
	CHECK_MSG(!strcmp(joined.data, "/opt/ompi/bin/mpirun -np 3 --oversubscribe --bind-to none "
			  "--mca pml ob1 --mca btl self,vader /usr/bin/dlh-train --epochs 2"),
		  "%s", joined.data);
	dlh_buf_free(&joined);
	/* a store too small is refused, not cut */
	CHECK(be.ops->argv(&be, &l, argv, DLH_LAUNCH_ARGV_MAX, store, 40) == -E2BIG);
	CHECK(be.ops->argv(&be, &l, argv, 5, store, sizeof store) == -E2BIG);
}

TEST(local_describe_names_the_launch_env_and_exact_argv)
{
	struct dlh_backend be;
	char err[256];
	char *prog[] = { "/bin/sh", "-c", "true", NULL };
	char *env[] = { "OPENBLAS_NUM_THREADS=1", "DLH_JOB_ID=7", NULL };
	struct dlh_launch l = { .argv = prog, .ranks = 1, .env = env };
	struct dlh_buf out = {0};

	CHECK(dlh_backend_local(&be, "/usr/bin/mpirun", err, sizeof err) == 0);
	CHECK(be.ops->describe(&be, &l, &out) == 0);
	CHECK_MSG(strstr(out.data, "launch local: every rank on this machine under /usr/bin/mpirun\n") &&
		  strstr(out.data, "\nenv OPENBLAS_NUM_THREADS=1\n") &&
		  strstr(out.data, "\nargv /usr/bin/mpirun -np 1 ") &&
		  strstr(out.data, " self,vader /bin/sh -c true\n"), "%s", out.data);
	dlh_buf_free(&out);
}

TEST(local_backend_missing_launcher_is_named)
{
	struct dlh_backend be;
	char err[256] = "";
	const char *path = getenv("PATH");
	char *saved = path ? strdup(path) : NULL;

	setenv("PATH", "/nonexistent", 1);
	int rc = dlh_backend_local(&be, NULL, err, sizeof err);
	if (saved) {
		setenv("PATH", saved, 1);
		free(saved);
	}
	CHECK(rc == -ENOENT);
	CHECK_MSG(strstr(err, "mpirun not found on PATH"), "%s", err);
}

TEST(local_run_records_its_handle_takes_verbs_and_reports_its_exit)
{
	char dir[512], launcher[600], log[600], err[256];
	struct dlh_backend be;
	struct dlh_run run, found;
	struct dlh_run_end end;

	fresh_dir(dir, sizeof dir, "verbs");
	fake_launcher(dir, launcher, sizeof launcher);
	snprintf(log, sizeof log, "%s/log", dir);
	CHECK(dlh_backend_local(&be, launcher, err, sizeof err) == 0);
	/* a program that keeps the contract: suspend -> exit 75, and says what
	 * environment it got */
	char *prog[] = { "/bin/sh", "-c",
		"trap 'echo checkpoint' USR1; trap 'exit 75' USR2; "
		"echo \"up $DLH_JOB_ID $OMPI_ALLOW_RUN_AS_ROOT_CONFIRM\"; "
		"while :; do sleep 0.02; done", NULL };
	char *env[] = { "DLH_JOB_ID=9", NULL };
	struct dlh_launch l = { .argv = prog, .ranks = 1, .env = env, .job_dir = dir, .log_path = log };

	CHECK_MSG(be.ops->start(&be, &l, &run, err, sizeof err) == 0, "%s", err);
	CHECK(!strcmp(run.backend, "local") && run.pid > 0 && run.pid_start > 0 && run.host[0]);
	CHECK(log_has(log, "up 9 1\n"));
	/* what a restarted daemon reads */
	CHECK(dlh_run_load(dir, &found) == 0);
	CHECK(found.pid == run.pid && found.pid_start == run.pid_start && !strcmp(found.host, run.host));
	CHECK(be.ops->state(&be, &found, dir) == DLH_RUN_RUNNING);
	CHECK(be.ops->wait(&be, &run, dir, 0, &end) == -EAGAIN);
	CHECK(be.ops->signal(&be, &run, DLH_VERB_CHECKPOINT) == 1);
	CHECK(log_has(log, "checkpoint\n"));
	CHECK(be.ops->signal(&be, &run, DLH_VERB_SUSPEND) == 1);
	CHECK(be.ops->wait(&be, &run, dir, 1, &end) == 0);
	CHECK_MSG(end.state == DLH_RUN_EXITED && end.exit_code == DLH_EXIT_SUSPENDED,
		  "state %d exit %d", end.state, end.exit_code);
	CHECK(dlh_run_load(dir, &found) == -ENOENT);   /* an ended run leaves no handle */
	CHECK(be.ops->state(&be, &run, dir) == DLH_RUN_LOST);
	CHECK(be.ops->signal(&be, &run, DLH_VERB_TERMINATE) == 0);
}

TEST(local_terminate_reaches_every_process_of_the_run)
{
	char dir[512], launcher[600], log[600], err[256];
	struct dlh_backend be;
	struct dlh_run run;
	struct dlh_run_end end;

	fresh_dir(dir, sizeof dir, "term");
	fake_launcher(dir, launcher, sizeof launcher);
	snprintf(log, sizeof log, "%s/log", dir);
	CHECK(dlh_backend_local(&be, launcher, err, sizeof err) == 0);
	/* a rank in the background, as mpirun's ranks are its children */
	char *prog[] = { "/bin/sh", "-c", "sleep 30 & echo started; wait", NULL };
	struct dlh_launch l = { .argv = prog, .ranks = 1, .job_dir = dir, .log_path = log };

	CHECK(be.ops->start(&be, &l, &run, err, sizeof err) == 0);
	CHECK(log_has(log, "started\n"));
	CHECK(be.ops->signal(&be, &run, DLH_VERB_TERMINATE) == 2);
	CHECK(be.ops->wait(&be, &run, dir, 1, &end) == 0);
	CHECK_MSG(end.state == DLH_RUN_EXITED && end.exit_code == -SIGTERM, "exit %d", end.exit_code);
	/* the backgrounded rank too (by the terminate, or as a leftover of the wait) */
	int left = 1;
	for (int i = 0; i < 200 && (left = dlh_proc_count_session(run.pid)); i++)
		usleep(10000);
	CHECK_MSG(left == 0, "%d processes of the run left", left);
}

TEST(local_stop_ends_a_run_found_after_a_restart)
{
	char dir[512], launcher[600], log[600], err[256];
	struct dlh_backend be;
	struct dlh_run run, found;
	struct dlh_run_end end;

	fresh_dir(dir, sizeof dir, "stop");
	fake_launcher(dir, launcher, sizeof launcher);
	snprintf(log, sizeof log, "%s/log", dir);
	CHECK(dlh_backend_local(&be, launcher, err, sizeof err) == 0);
	/* one that ignores SIGTERM: stop must kill it after the grace */
	char *prog[] = { "/bin/sh", "-c", "trap '' TERM; echo started; while :; do sleep 0.02; done",
			 NULL };
	struct dlh_launch l = { .argv = prog, .ranks = 1, .job_dir = dir, .log_path = log };

	CHECK(be.ops->start(&be, &l, &run, err, sizeof err) == 0);
	CHECK(log_has(log, "started\n"));
	CHECK(dlh_run_load(dir, &found) == 0);
	double t0 = dlh_mono();
	CHECK(be.ops->stop(&be, &found, dir, 0.3) >= 1);
	CHECK(dlh_mono() - t0 >= 0.3);
	CHECK(dlh_run_load(dir, &found) == -ENOENT);
	/* this process started it, so it reaps it (a restarted daemon cannot) */
	CHECK(be.ops->wait(&be, &run, dir, 1, &end) == 0 && end.exit_code == -SIGKILL);
	CHECK(be.ops->state(&be, &run, dir) == DLH_RUN_LOST);
}

/* dlh-shepherd of DLH_BUILD (build), or "" when it is not built. */
static void shepherd_path(char *out, size_t len)
{
	char cwd[512];
	const char *build = getenv("DLH_BUILD");
	if (!getcwd(cwd, sizeof cwd))
		cwd[0] = '\0';
	snprintf(out, len, "%s/%s/dlh-shepherd", cwd, build ? build : "build");
	if (access(out, X_OK))
		out[0] = '\0';
}

/* Starts prog (/bin/sh -c TEXT) in a fresh dir NAME under dlh-shepherd from
 * a child process that then exits, as a daemon that dies would, and loads
 * the handle the run left into *found. Returns 0, 1 when dlh-shepherd is
 * not built, or -1. */
static int start_orphan(const char *name, const char *text, struct dlh_backend *be, char *dir,
			size_t dirlen, char *log, size_t loglen, struct dlh_run *found)
{
	char launcher[600], err[256];
	fresh_dir(dir, dirlen, name);
	fake_launcher(dir, launcher, sizeof launcher);
	snprintf(log, loglen, "%s/log", dir);
	if (dlh_backend_local(be, launcher, err, sizeof err))
		return -1;
	shepherd_path(be->shepherd, sizeof be->shepherd);
	if (!be->shepherd[0])
		return 1;
	char *prog[] = { "/bin/sh", "-c", (char *)text, NULL };
	struct dlh_launch l = { .argv = prog, .ranks = 1, .job_dir = dir, .log_path = log };
	pid_t daemon = fork();
	if (daemon == 0) {
		struct dlh_run run;
		_exit(be->ops->start(be, &l, &run, err, sizeof err) ? 1 : 0);
	}
	int st;
	if (waitpid(daemon, &st, 0) != daemon || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return -1;
	return dlh_run_load(dir, found) ? -1 : 0;
}

/* A run started by a daemon that then died is found by another: it goes
 * on, takes verbs through its shepherd, and how it ended comes from the
 * shepherd's exit file. */
TEST(local_run_outlives_the_process_that_started_it)
{
	char dir[512], log[600];
	struct dlh_backend be;
	struct dlh_run found;
	struct dlh_run_end end;
	int rc = start_orphan("outlive", "trap 'echo checkpoint' USR1; trap 'exit 75' USR2; "
			      "echo up; while :; do sleep 0.02; done", &be, dir, sizeof dir, log,
			      sizeof log, &found);
	if (rc == 1)
		SKIP("dlh-shepherd not built");
	CHECK(rc == 0);
	CHECK(log_has(log, "up\n"));
	CHECK(be.ops->state(&be, &found, dir) == DLH_RUN_RUNNING);
	CHECK(be.ops->wait(&be, &found, dir, 0, &end) == -EAGAIN);
	CHECK(be.ops->signal(&be, &found, DLH_VERB_CHECKPOINT) == 1);
	CHECK(log_has(log, "checkpoint\n"));
	CHECK(be.ops->signal(&be, &found, DLH_VERB_SUSPEND) == 1);
	CHECK(be.ops->wait(&be, &found, dir, 1, &end) == 0);
	CHECK_MSG(end.state == DLH_RUN_EXITED && end.exit_code == DLH_EXIT_SUSPENDED,
		  "state %d exit %d", end.state, end.exit_code);
	CHECK(dlh_run_load(dir, &found) == -ENOENT);
	CHECK(be.ops->state(&be, &found, dir) == DLH_RUN_LOST);   /* its exit file is read once */
}

/* A run that ended while no daemon watched is found EXITED, with its status. */
TEST(local_run_that_ended_unwatched_keeps_its_status)
{
	char dir[512], log[600];
	struct dlh_backend be;
	struct dlh_run found;
	struct dlh_run_end end;
	int rc = start_orphan("unwatched", "exit 3", &be, dir, sizeof dir, log, sizeof log, &found);
	if (rc == 1)
		SKIP("dlh-shepherd not built");
	CHECK(rc == 0);
	/* the shepherd writes its exit file, then exits (nobody reaps it here) */
	for (int i = 0; i < 1000 && dlh_proc_alive(found.pid, found.pid_start); i++)
		usleep(10000);
	CHECK(be.ops->state(&be, &found, dir) == DLH_RUN_EXITED);
	CHECK(be.ops->wait(&be, &found, dir, 1, &end) == 0);
	CHECK_MSG(end.state == DLH_RUN_EXITED && end.exit_code == 3, "state %d exit %d", end.state,
		  end.exit_code);
}

TEST(handle_round_trips_and_refuses_garbage)
{
	char dir[512], path[600];
	struct dlh_run run = { .backend = "local", .pid = 4242, .pid_start = 123456789ULL,
			       .host = "node7", .started = 1700000000.25 }, back;

	fresh_dir(dir, sizeof dir, "handle");
	CHECK(dlh_run_load(dir, &back) == -ENOENT);
	CHECK(dlh_run_save(dir, &run) == 0);
	CHECK(dlh_run_load(dir, &back) == 0);
	CHECK(!strcmp(back.backend, "local") && back.pid == 4242 && back.pid_start == 123456789ULL &&
	      !strcmp(back.host, "node7") && back.started > 1700000000.2 && back.started < 1700000000.3);
	snprintf(path, sizeof path, "%s/%s", dir, DLH_RUN_HANDLE_FILE);
	write_text(path, "backend=local\nhost=x\n");
	CHECK(dlh_run_load(dir, &back) == -EINVAL);
	write_text(path, "backend=\nhost=x\npid=5\npid_start=9\n");
	CHECK(dlh_run_load(dir, &back) == -EINVAL);
	dlh_run_forget(dir);
	CHECK(dlh_run_load(dir, &back) == -ENOENT);
	dlh_run_forget(dir);   /* none: no error */
}

/* Runs dlh-shepherd --ranks DIR (a fresh dir NAME, into dir) on /bin/sh
 * -c said, its output (the log) into out (DIR/out). Returns its exit
 * status, -2 when dlh-shepherd is not built, or -1. */
static int run_shepherd(const char *name, const char *said, char *dir, size_t dirlen, char *out,
			size_t outlen)
{
	char shepherd[600], exit_file[600];
	shepherd_path(shepherd, sizeof shepherd);
	if (!shepherd[0])
		return -2;
	fresh_dir(dir, dirlen, name);
	snprintf(exit_file, sizeof exit_file, "%s/exit", dir);
	snprintf(out, outlen, "%s/out", dir);
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || dup2(fd, 1) < 0)
			_exit(126);
		execl(shepherd, shepherd, "--ranks", dir, exit_file, "/bin/sh", "-c", said, (char *)NULL);
		_exit(127);
	}
	int st;
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

/* mpirun tags what it reads from each rank, not lines: a rank's line read
 * in two pieces comes as "[1,0]<stdout>:TEXT[1,0]<stdout>:\n", with other
 * ranks' pieces between. dlh-shepherd puts each rank's line together. */
TEST(shepherd_puts_each_ranks_pieces_together_into_lines)
{
	char dir[512], out[600], path[640], *text = NULL;
	const char *said =
		"printf 'mpirun: a line of its own\\n"
		"[1,0]<stdout>:train.py: step 14: checkpoint on request[1,1]<stdout>:xyz\\n"
		"[1,0]<stdout>:\\n"
		"[1,1]<stderr>:oops[1,0]<stdout>:ghi[1,0]<stdout>:\\n"
		"[1,1]<stderr>:\\n"
		"[1,0]<stdout>:[1,1]<stdout>:w\\n"
		"[1,0]<stdout>:no end'";
	int st = run_shepherd("shepherd-pieces", said, dir, sizeof dir, out, sizeof out);
	if (st == -2)
		SKIP("dlh-shepherd not built");
	CHECK(st == 0);
	CHECK(dlh_read_file(out, 4096, &text, NULL) == 0);
	CHECK_MSG(!strcmp(text, "mpirun: a line of its own\n"
				"[rank 1] xyz\n"
				"[rank 0] train.py: step 14: checkpoint on request\n"
				"[rank 0] ghi\n"
				"[rank 1] oops\n"
				"[rank 1] w\n"
				"[rank 0] no end\n"), "the log:\n%s", text);
	free(text);
	snprintf(path, sizeof path, "%s/rank.0", dir);
	CHECK(dlh_read_file(path, 4096, &text, NULL) == 0);
	CHECK_MSG(!strcmp(text, "train.py: step 14: checkpoint on request\nghi\nno end\n"), "rank.0:\n%s", text);
	free(text);
	snprintf(path, sizeof path, "%s/rank.1.err", dir);
	CHECK(dlh_read_file(path, 4096, &text, NULL) == 0);
	CHECK_MSG(!strcmp(text, "oops\n"), "rank.1.err:\n%s", text);
	free(text);
}

/* A line longer than dlh-shepherd reads at once comes in parts: the part
 * after a cut goes on the piece the cut was in, and tags in it still count. */
TEST(shepherd_goes_on_with_a_piece_cut_with_its_long_line)
{
	char dir[512], out[600], path[640], *text = NULL;
	/* rank 0: 70000 bytes without a newline; rank 1 after it on the same line */
	const char *said = "printf '[1,0]<stdout>:'; head -c 70000 /dev/zero | tr '\\0' a; "
			   "printf '[1,1]<stdout>:b\\n[1,0]<stdout>:\\n'";
	int st = run_shepherd("shepherd-long", said, dir, sizeof dir, out, sizeof out);
	size_t len = 0;
	if (st == -2)
		SKIP("dlh-shepherd not built");
	CHECK(st == 0);
	CHECK(dlh_read_file(out, 1 << 20, &text, NULL) == 0);
	CHECK_MSG(!strstr(text, "<stdout>:"), "a raw tag in the log: ...%s", strstr(text, "<stdout>:") - 8);
	CHECK_MSG(strstr(text, "\n[rank 1] b\n"), "no line of rank 1's in the log");
	free(text);
	snprintf(path, sizeof path, "%s/rank.1", dir);
	CHECK(dlh_read_file(path, 4096, &text, NULL) == 0);
	CHECK_MSG(!strcmp(text, "b\n"), "rank.1: %s", text);
	free(text);
	snprintf(path, sizeof path, "%s/rank.0", dir);   /* every a, in lines of pieces */
	CHECK(dlh_read_file(path, 1 << 20, &text, &len) == 0);
	size_t as = 0;
	for (size_t i = 0; i < len; i++)
		as += text[i] == 'a';
	CHECK_MSG(as == 70000, "%zu of 70000 bytes of rank 0's line in rank.0", as);
	free(text);
}

/* A Slurm backend over stand-ins in dir: sbatch (never run here), a
 * scontrol that prints what dir/scontrol.out holds (or fails saying what
 * dir/scontrol.err holds, where there is one) and a sacct that prints
 * dir/sacct.out (accounting disabled where it is empty or missing); PATH
 * gets dir first.
 * Returns 0, or -1 (said). */
static int fake_slurm(const char *dir, struct dlh_backend *be)
{
	char path[600], text[1400], launcher[600], err[256];
	snprintf(path, sizeof path, "%s/sbatch", dir);
	write_text(path, "#!/bin/sh\nexit 1\n");
	chmod(path, 0755);
	snprintf(path, sizeof path, "%s/scontrol", dir);
	snprintf(text, sizeof text, "#!/bin/sh\n[ -e '%s/scontrol.err' ] && { cat '%s/scontrol.err' "
		 ">&2; exit 1; }\ncat '%s/scontrol.out'\n", dir, dir, dir);
	write_text(path, text);
	chmod(path, 0755);
	snprintf(path, sizeof path, "%s/sacct", dir);
	snprintf(text, sizeof text, "#!/bin/sh\n[ -s '%s/sacct.out' ] || { echo 'sacct: error: Slurm "
		 "accounting storage is disabled' >&2; exit 1; }\n"
		 "[ \"$*\" = '-X -n -P -o JobID,State,ExitCode,NodeList,Timelimit -j 7' ] || exit 2\n"
		 "cat '%s/sacct.out'\n", dir, dir);
	write_text(path, text);
	chmod(path, 0755);
	fake_launcher(dir, launcher, sizeof launcher);
	const char *old = getenv("PATH");
	snprintf(text, sizeof text, "%s:%s", dir, old ? old : "/usr/bin:/bin");
	setenv("PATH", text, 1);
	int rc = dlh_backend_slurm(be, launcher, "dlh", "", err, sizeof err);
	if (rc)
		printf("# dlh_backend_slurm: %s\n", err);
	return rc ? -1 : 0;
}

/* What wait() makes of Slurm job 7 ended in state (scontrol's line; NULL:
 * slurmctld forgot it, and sacct answers sacct_out, "" = no accounting)
 * with exit_file ("" = none) into *end, the job's log into log (loglen
 * > 0). Returns wait()'s value. */
static int slurm_end_of(const char *name, const char *state, const char *exit_file,
			const char *sacct_out, struct dlh_run_end *end, char *log, size_t loglen)
{
	char dir[512], path[600], line[512];
	struct dlh_backend be;
	struct dlh_run run = { .backend = "slurm", .pid = 7 };
	fresh_dir(dir, sizeof dir, name);
	if (fake_slurm(dir, &be))
		return -1;
	snprintf(path, sizeof path, "%s/scontrol.out", dir);
	snprintf(line, sizeof line, "JobId=7 JobName=dlh-1 JobState=%s Reason=None Restarts=0 "
		 "ExitCode=0:15 TimeLimit=00:01:00 NodeList=n[1-2]\n", state ? state : "");
	write_text(path, line);
	if (!state) {
		snprintf(path, sizeof path, "%s/scontrol.err", dir);
		write_text(path, "slurm_load_jobs error: Invalid job id specified\n");
	}
	snprintf(path, sizeof path, "%s/sacct.out", dir);
	write_text(path, sacct_out);
	if (exit_file[0]) {
		snprintf(path, sizeof path, "%s/" DLH_RUN_EXIT_FILE, dir);
		write_text(path, exit_file);
	}
	int rc = be.ops->wait(&be, &run, dir, 0, end);
	if (loglen) {
		char *l = NULL;
		size_t n = 0;
		snprintf(path, sizeof path, "%s/" DLH_FILE_LOG, dir);
		snprintf(log, loglen, "%s", dlh_read_file(path, 1 << 16, &l, &n) == 0 && l ? l : "");
		free(l);
	}
	return rc;
}

TEST(slurm_timeout_preempted_and_node_fail_are_causes_with_slurms_words)
{
	struct dlh_run_end end;
	CHECK(slurm_end_of("s-timeout", "TIMEOUT", "", "", &end, NULL, 0) == 0);
	CHECK_MSG(end.state == DLH_RUN_EXITED && end.cause == DLH_END_TIME_LIMIT &&
		  !strcmp(end.said, "Slurm's time limit of job 7 (00:01:00; ended TIMEOUT)"),
		  "state %d cause %d said \"%s\"", end.state, end.cause, end.said);
	CHECK(slurm_end_of("s-preempt", "PREEMPTED", "", "", &end, NULL, 0) == 0);
	CHECK_MSG(end.cause == DLH_END_PREEMPTED && !strcmp(end.said, "Slurm preempted job 7 (PREEMPTED)"),
		  "cause %d said \"%s\"", end.cause, end.said);
	CHECK(slurm_end_of("s-nodefail", "NODE_FAIL", "", "", &end, NULL, 0) == 0);
	CHECK_MSG(end.state == DLH_RUN_LOST && end.cause == DLH_END_NODE_FAIL &&
		  !strcmp(end.said, "Slurm lost the nodes of job 7 (NODE_FAIL on n[1-2])"),
		  "state %d cause %d said \"%s\"", end.state, end.cause, end.said);
	CHECK(slurm_end_of("s-done", "COMPLETED", "exit=0\n", "", &end, NULL, 0) == 0);
	CHECK_MSG(end.state == DLH_RUN_EXITED && end.cause == DLH_END_OWN && !end.said[0] &&
		  end.exit_code == 0, "cause %d exit %d", end.cause, end.exit_code);
}

/* A job that ended while nobody watched, so long ago that slurmctld forgot
 * it: its end comes from Slurm's accounting (sacct) where there is one,
 * else it is lost (no exit file either) */
TEST(slurm_forgotten_job_ends_as_sacct_says_where_there_is_accounting)
{
	struct dlh_run_end end;
	char log[4096];
	CHECK(slurm_end_of("s-acct-timeout", NULL, "", "7|TIMEOUT|0:15|n[1-2]|00:01:00\n", &end, log,
				  sizeof log) == 0);
	CHECK_MSG(end.state == DLH_RUN_EXITED && end.cause == DLH_END_TIME_LIMIT &&
		  !strcmp(end.said, "Slurm's time limit of job 7 (00:01:00; ended TIMEOUT)"),
		  "state %d cause %d said \"%s\"", end.state, end.cause, end.said);
	CHECK_MSG(strstr(log, "slurm: job 7 ended TIMEOUT, exit code 0:15 (sacct: slurmctld had "
			 "forgotten it)") != NULL, "log: %s", log);
	CHECK(slurm_end_of("s-acct-cancel", NULL, "", "7|CANCELLED by 1000|0:15|n1|00:05:00\n", &end,
				  log, sizeof log) == 0);
	CHECK_MSG(end.state == DLH_RUN_EXITED && end.exit_code == -SIGTERM && end.cause == DLH_END_OWN,
		  "state %d exit %d cause %d", end.state, end.exit_code, end.cause);
	CHECK(slurm_end_of("s-acct-done", NULL, "", "7|COMPLETED|0:0|n1|00:05:00\n", &end, log,
				  sizeof log) == 0);
	CHECK_MSG(end.state == DLH_RUN_EXITED && end.exit_code == 0, "state %d exit %d", end.state,
		  end.exit_code);
	/* a record that says it still runs is no end: as forgotten */
	CHECK(slurm_end_of("s-acct-stale", NULL, "", "7|RUNNING|0:0|n1|00:05:00\n", &end, log,
				  sizeof log) == 0);
	CHECK_MSG(end.state == DLH_RUN_LOST, "state %d", end.state);
	CHECK(slurm_end_of("s-acct-none", NULL, "", "", &end, log, sizeof log) == 0);
	CHECK_MSG(end.state == DLH_RUN_LOST && strstr(log, "slurm: job 7 is no longer known to Slurm"),
		  "state %d log: %s", end.state, log);
}

/* dlh-shepherd stopped the run on Slurm's signal before the limit: its
 * exit file says so, whatever state Slurm gives the batch job after */
TEST(slurm_run_stopped_on_the_limits_signal_ends_for_the_time_limit)
{
	struct dlh_run_end end;
	CHECK(slurm_end_of("s-signal", "FAILED", "exit=75\ntime_limit=1\n", "", &end, NULL, 0) == 0);
	CHECK_MSG(end.state == DLH_RUN_EXITED && end.exit_code == DLH_EXIT_SUSPENDED &&
		  end.cause == DLH_END_TIME_LIMIT && !strcmp(end.said, "Slurm's time limit of job 7 (00:01:00)"),
		  "exit %d cause %d said \"%s\"", end.exit_code, end.cause, end.said);
	CHECK(slurm_end_of("s-asked", "FAILED", "exit=75\n", "", &end, NULL, 0) == 0);
	CHECK_MSG(end.cause == DLH_END_OWN, "a suspend it was asked for: cause %d", end.cause);
}

/* Slurm's own limit (--time) and its signal to dlh-shepherd (XCPU); the
 * engine arms no timer of its own; a pending job's note says pending */
TEST(slurm_asks_for_the_limit_and_the_signal_and_notes_pending)
{
	char dir[512], path[600], note[256];
	struct dlh_backend be;
	char *prog[] = { "/usr/bin/dlh-train", NULL };
	fresh_dir(dir, sizeof dir, "s-argv");
	CHECK(fake_slurm(dir, &be) == 0);
	CHECK(be.keeps_limit == 1);
	struct dlh_launch l = { .argv = prog, .ranks = 2, .job_dir = dir, .time_limit = 60 };
	struct dlh_buf out = { 0 };
	CHECK(be.ops->describe(&be, &l, &out) == 0);
	CHECK_MSG(strstr(out.data, " --time=1 --signal=B:XCPU@30 --requeue ") != NULL, "%s", out.data);
	dlh_buf_free(&out);
	snprintf(path, sizeof path, "%s/slurm.state", dir);
	write_text(path, "job=7\nstate=PENDING\nreason=Resources\nnodes=\nrestarts=0\n");
	CHECK(be.ops->note(&be, dir, note, sizeof note) == 1);
	CHECK_MSG(!strcmp(note, "pending in Slurm (job 7): Resources"), "%s", note);
	write_text(path, "job=7\nstate=RUNNING\nreason=None\nnodes=n1\nrestarts=0\n");
	CHECK(be.ops->note(&be, dir, note, sizeof note) == 0);
}

/* A GPU plan asks Slurm for a GPU a rank of the most a node runs, of the
 * plan's type where it has one (--gres=gpu:TYPE:N); a CPU plan for none */
TEST(slurm_asks_for_gres_of_a_gpu_plan)
{
	char dir[512];
	struct dlh_backend be;
	char *prog[] = { "/usr/bin/dlh-train", NULL };
	const struct dlh_launch_host hosts[] = { { "n1", 2 }, { "n2", 1 } };
	fresh_dir(dir, sizeof dir, "s-gres");
	CHECK(fake_slurm(dir, &be) == 0);
	struct dlh_launch l = { .argv = prog, .ranks = 3, .job_dir = dir, .hosts = hosts, .nhosts = 2,
				.gpu = 1, .gpu_type = "H100" };
	struct dlh_buf out = { 0 };
	CHECK(be.ops->describe(&be, &l, &out) == 0);
	CHECK_MSG(strstr(out.data, " --nodes=2 --ntasks=3 --ntasks-per-node=2 --cpus-per-task=1 "
			 "--gres=gpu:H100:2 ") != NULL, "%s", out.data);
	dlh_buf_free(&out);
	l.gpu_type = NULL;
	CHECK(be.ops->describe(&be, &l, &out) == 0);
	CHECK_MSG(strstr(out.data, " --gres=gpu:2 ") != NULL, "%s", out.data);
	dlh_buf_free(&out);
	l.gpu = 0;
	CHECK(be.ops->describe(&be, &l, &out) == 0);
	CHECK_MSG(strstr(out.data, "--gres") == NULL, "%s", out.data);
	dlh_buf_free(&out);
}

/* squeue --start's lines: the job's own line by its id (not another's,
 * not a longer id that begins the same), Slurm's local time as epoch
 * seconds, N/A as no start, a cut line or no line said so */
TEST(slurm_start_of_a_job_from_squeue_lines)
{
	double start = 0;
	long prio = 0;
	struct tm tm = { .tm_year = 126, .tm_mon = 10, .tm_mday = 27, .tm_hour = 10, .tm_min = 2,
			 .tm_sec = 3, .tm_isdst = -1 };
	double want = (double)mktime(&tm);
	const char *text = "712|2026-11-27T09:00:00|99\n  71|2026-11-27T10:02:03|4294\n72|N/A|10\n";
	CHECK(dlh_slurm_parse_start(text, 71, &start, &prio) == 0);
	CHECK_MSG(start == want && prio == 4294, "start %.0f (want %.0f), priority %ld", start, want, prio);
	CHECK(dlh_slurm_parse_start(text, 72, &start, &prio) == 0);
	CHECK(isinf(start) && prio == 10);
	CHECK(dlh_slurm_parse_start(text, 7, &start, &prio) == -ENOENT);
	CHECK(dlh_slurm_parse_start("", 7, &start, &prio) == -ENOENT);
	CHECK(dlh_slurm_parse_start("7|Unknown|x\n", 7, &start, &prio) == 0);
	CHECK(isinf(start) && prio == -1);
	CHECK(dlh_slurm_parse_start("7|2026-11-27T10:02:03\n", 7, &start, &prio) == -EINVAL);
	CHECK(dlh_slurm_parse_start("squeue: error: Invalid job id specified\n", 7, &start, &prio) == -ENOENT);
}

int main(void)
{
	if (tmp_root_make())
		return 1;
	RUN(local_argv_is_mpirun_with_its_options_then_the_program);
	RUN(local_describe_names_the_launch_env_and_exact_argv);
	RUN(local_backend_missing_launcher_is_named);
	RUN(local_run_records_its_handle_takes_verbs_and_reports_its_exit);
	RUN(local_terminate_reaches_every_process_of_the_run);
	RUN(local_stop_ends_a_run_found_after_a_restart);
	RUN(local_run_outlives_the_process_that_started_it);
	RUN(local_run_that_ended_unwatched_keeps_its_status);
	RUN(handle_round_trips_and_refuses_garbage);
	RUN(shepherd_puts_each_ranks_pieces_together_into_lines);
	RUN(shepherd_goes_on_with_a_piece_cut_with_its_long_line);
	RUN(slurm_timeout_preempted_and_node_fail_are_causes_with_slurms_words);
	RUN(slurm_forgotten_job_ends_as_sacct_says_where_there_is_accounting);
	RUN(slurm_run_stopped_on_the_limits_signal_ends_for_the_time_limit);
	RUN(slurm_asks_for_the_limit_and_the_signal_and_notes_pending);
	RUN(slurm_asks_for_gres_of_a_gpu_plan);
	RUN(slurm_start_of_a_job_from_squeue_lines);
	tmp_root_remove();
	return CHECK_EXIT();
}
