/* local.c - the local backend: Open MPI's mpirun on this machine, its ranks
 * here or on the run's nodes (a hostfile in the job's directory; mpirun
 * starts its daemon on each other node through the agent, ssh by default,
 * and forwards the ranks' environment with -x), held by dlh-shepherd
 * (shepherd.c), which leads the run's session (so every local process is
 * found by session id), passes SIGUSR1/SIGUSR2 to mpirun (which forwards
 * them to every rank, on every node) and records how mpirun ended in the
 * job's DLH_RUN_EXIT_FILE. Ranks on other nodes end with mpirun: their
 * node's daemon kills them when it loses mpirun. The shepherd is the daemon's child; after the
 * daemon has died it is nobody's, and a new daemon waits for it through a
 * pidfd and reads its exit file. */
#include "engine/run/backend.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine/contract/contract.h"
#include "engine/run/launch.h"
#include "engine/run/proc.h"

#define LOCAL_NAME "local"
#define LOCAL_ENV_MAX 128         /* extra environment entries of one launch */
#define LOCAL_POLL_NS 30000000L   /* polling a stopping run's processes (30 ms) */

/* The shepherd's exit file of job_dir into buf. */
static void exit_file(const char *job_dir, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", job_dir, DLH_RUN_EXIT_FILE);
}

/* Removes what a run that has ended left in job_dir: its exit file and its
 * handle. */
static void forget(const char *job_dir)
{
	char path[4200];
	exit_file(job_dir, path, sizeof path);
	unlink(path);
	dlh_run_forget(job_dir);
}

/* 1 when l runs on other nodes than this one (then mpirun reaches them
 * through the agent, by the hostfile). */
static int several(const struct dlh_launch *l)
{
	return l->hosts && l->nhosts > 0;
}

/* The names of the environment every rank gets, forwarded by mpirun to the
 * ranks on other nodes (-x NAME): l's own, and the daemon's that a run
 * keeps (launch.c), but mpirun's own settings (it passes those itself). */
static int forward_env(const struct dlh_launch *l, char **out, size_t max, int *n, char *store,
		       size_t storelen, size_t *used)
{
	extern char **environ;
	char name[256];
	int rc = 0;
	for (int pass = 0; pass < 2; pass++) {
		char *const *v = pass ? environ : l->env;
		for (int i = 0; v && v[i] && !rc; i++) {
			size_t len = strcspn(v[i], "=");
			if (pass && !dlh_launch_kept(v[i]) && strncmp(v[i], "PATH=", 5))
				continue;
			if (!strncmp(v[i], "OMPI_", 5) || !strncmp(v[i], "PMIX_", 5) ||
			    !strncmp(v[i], "OPAL_", 5) || len >= sizeof name || !v[i][len])
				continue;
			int dup = 0;   /* the daemon's, where l has its own */
			for (int j = 0; pass && l->env && l->env[j] && !dup; j++)
				dup = !strncmp(l->env[j], v[i], len + 1);
			if (dup)
				continue;
			snprintf(name, sizeof name, "%.*s", (int)len, v[i]);
			rc = dlh_argv_put(out, max, n, store, storelen, used, "-x") |
			     dlh_argv_put(out, max, n, store, storelen, used, name);
		}
	}
	return rc;
}

/* The hostfile of l's run in job_dir into buf. */
static void hostfile_path(const struct dlh_launch *l, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", l->job_dir, DLH_RUN_HOSTFILE);
}

/* The text of l's hostfile: "HOST slots=N" a node, in rank order (mpirun
 * maps ranks by slot: a node's ranks are consecutive). */
static int hostfile_text(const struct dlh_launch *l, struct dlh_buf *b)
{
	int rc = 0;
	for (int i = 0; i < l->nhosts; i++)
		rc |= dlh_buf_printf(b, "%s slots=%d\n", l->hosts[i].host, l->hosts[i].ranks);
	return rc ? -ENOMEM : 0;
}

static int local_argv(const struct dlh_backend *be, const struct dlh_launch *l, char **out,
		      size_t max, char *store, size_t storelen)
{
	static const char *const opts[] = {
		"--oversubscribe", "--bind-to", "none", "--mca", "pml", "ob1",
	};
	char np[16], hostfile[4200];
	size_t used = 0;
	int n = 0, rc;

	snprintf(np, sizeof np, "%d", l->ranks);
	rc = dlh_argv_put(out, max, &n, store, storelen, &used, be->launcher);
	rc |= dlh_argv_put(out, max, &n, store, storelen, &used, "-np");
	rc |= dlh_argv_put(out, max, &n, store, storelen, &used, np);
	for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
		rc |= dlh_argv_put(out, max, &n, store, storelen, &used, opts[i]);
	rc |= dlh_argv_put(out, max, &n, store, storelen, &used, "--mca");
	rc |= dlh_argv_put(out, max, &n, store, storelen, &used, "btl");
	if (!several(l)) {
		/* one node: shared memory only; skips probing the network (about 200 ms) */
		rc |= dlh_argv_put(out, max, &n, store, storelen, &used, "self,vader");
	} else {
		/* shared memory within a node, TCP between them; every node's
		 * daemon started from here through the agent (no tree of ssh) */
		hostfile_path(l, hostfile, sizeof hostfile);
		rc |= dlh_argv_put(out, max, &n, store, storelen, &used, "self,vader,tcp");
		rc |= dlh_argv_put(out, max, &n, store, storelen, &used, "--hostfile");
		rc |= dlh_argv_put(out, max, &n, store, storelen, &used, hostfile);
		rc |= dlh_argv_put(out, max, &n, store, storelen, &used, "--map-by");
		rc |= dlh_argv_put(out, max, &n, store, storelen, &used, "slot");
		rc |= dlh_argv_put(out, max, &n, store, storelen, &used, "--mca");
		rc |= dlh_argv_put(out, max, &n, store, storelen, &used, "plm_rsh_agent");
		rc |= dlh_argv_put(out, max, &n, store, storelen, &used,
			  l->agent && l->agent[0] ? l->agent : DLH_AGENT_DEFAULT);
		rc |= dlh_argv_put(out, max, &n, store, storelen, &used, "--mca");
		rc |= dlh_argv_put(out, max, &n, store, storelen, &used, "plm_rsh_no_tree_spawn");
		rc |= dlh_argv_put(out, max, &n, store, storelen, &used, "1");
		rc |= forward_env(l, out, max, &n, store, storelen, &used);
	}
	if (be->shepherd[0])   /* "[1,R]<stdout>:": the shepherd sorts lines by rank */
		rc |= dlh_argv_put(out, max, &n, store, storelen, &used, "--tag-output");
	for (int i = 0; l->argv[i]; i++)
		rc |= dlh_argv_put(out, max, &n, store, storelen, &used, l->argv[i]);
	return rc ? -E2BIG : n;
}

/* l's environment and what mpirun itself needs, into env (NULL-terminated). */
static int local_env(const struct dlh_launch *l, char **env, size_t max)
{
	size_t n = 0;
	for (int i = 0; l->env && l->env[i]; i++) {
		if (n + 3 >= max)
			return -E2BIG;
		env[n++] = l->env[i];
	}
	if (n + 3 >= max)
		return -E2BIG;
	/* mpirun refuses root without both */
	if (geteuid() == 0)
		env[n++] = "OMPI_ALLOW_RUN_AS_ROOT=1";
	env[n++] = "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1";
	env[n] = NULL;
	return 0;
}

static int local_start(const struct dlh_backend *be, const struct dlh_launch *l,
		       struct dlh_run *run, char *err, size_t errlen)
{
	char *argv[DLH_LAUNCH_ARGV_MAX + 6], *env[LOCAL_ENV_MAX], exit_path[4200], logs[4200];
	char *store = malloc(DLH_ARGV_STORE);
	pid_t pid;
	int rc, k = 0;

	if (!store) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	exit_file(l->job_dir, exit_path, sizeof exit_path);
	unlink(exit_path);   /* an earlier run's */
	if (several(l)) {
		struct dlh_buf hf = {0};
		char path[4200];
		hostfile_path(l, path, sizeof path);
		rc = hostfile_text(l, &hf);
		if (!rc)
			rc = dlh_write_atomic(path, hf.data, hf.len);
		dlh_buf_free(&hf);
		if (rc) {
			free(store);
			snprintf(err, errlen, "cannot write the hostfile \"%s\": %s", path, strerror(-rc));
			return rc;
		}
	}
	if (be->shepherd[0]) {   /* dlh-shepherd [--ready FILE] EXIT_FILE mpirun ... */
		argv[k++] = (char *)be->shepherd;
		if (l->ready_path) {
			argv[k++] = "--ready";
			argv[k++] = (char *)l->ready_path;
			unlink(l->ready_path);   /* an earlier run's */
		}
		snprintf(logs, sizeof logs, "%s/%s", l->job_dir, DLH_DIR_LOGS);
		argv[k++] = "--ranks";
		argv[k++] = logs;
		argv[k++] = exit_path;
	}
	if (local_argv(be, l, argv + k, DLH_LAUNCH_ARGV_MAX, store, DLH_ARGV_STORE) < 0 ||
	    local_env(l, env, LOCAL_ENV_MAX) < 0) {
		free(store);
		snprintf(err, errlen, "the command line is longer than %d bytes", DLH_ARGV_STORE);
		return -E2BIG;
	}
	/* every run starts in its job directory, root's too */
	rc = be->shepherd[0] ? dlh_launch_holding(argv, env, l->log_path, l->join, l->cred, l->job_dir, &pid) :
			       dlh_launch_as(argv, env, l->log_path, l->join, l->cred, l->job_dir, &pid);
	free(store);
	if (rc) {
		snprintf(err, errlen, "cannot start \"%s\": %s", be->launcher, strerror(-rc));
		return rc;
	}
	memset(run, 0, sizeof *run);
	snprintf(run->backend, sizeof run->backend, "%s", LOCAL_NAME);
	run->pid = pid;
	run->pid_start = dlh_proc_start(pid);
	run->started = dlh_now();
	if (gethostname(run->host, sizeof run->host) < 0)
		snprintf(run->host, sizeof run->host, "localhost");
	run->host[sizeof run->host - 1] = '\0';
	if ((rc = dlh_run_save(l->job_dir, run))) {
		/* a run nobody could find again after a restart: not started */
		dlh_proc_kill_session(pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		snprintf(err, errlen, "cannot record the run in \"%s\": %s", l->job_dir,
			 strerror(-rc));
		memset(run, 0, sizeof *run);
		return rc;
	}
	return 0;
}

static int local_signal(const struct dlh_backend *be, const struct dlh_run *run, enum dlh_verb v)
{
	(void)be;
	if (run->pid <= 0)
		return 0;
	switch (v) {
	case DLH_VERB_CHECKPOINT:   /* mpirun forwards both to every rank */
	case DLH_VERB_SUSPEND:
		if (kill(run->pid, v == DLH_VERB_CHECKPOINT ? DLH_SIG_CHECKPOINT : DLH_SIG_SUSPEND))
			return errno == ESRCH ? 0 : -errno;
		return 1;
	case DLH_VERB_TERMINATE:
		return dlh_proc_kill_session(run->pid, SIGTERM);
	case DLH_VERB_KILL:
		return dlh_proc_kill_session(run->pid, SIGKILL);
	}
	return -EINVAL;
}

/* read_exit, and (end not NULL) when the launcher ended (the file's time)
 * and what its processes used, into end. */
static int read_end(const char *job_dir, int *code, struct dlh_run_end *end)
{
	char path[4200], v[32], *text = NULL;
	struct stat st;
	exit_file(job_dir, path, sizeof path);
	if (dlh_read_file_nofollow(path, 512, &text, NULL))
		return -ENOENT;
	int rc = -ENOENT;
	if (!dlh_kv_get(text, "exit", v, sizeof v))
		*code = atoi(v), rc = 0;
	else if (!dlh_kv_get(text, "signal", v, sizeof v))
		*code = -atoi(v), rc = 0;
	if (!rc && end) {
		if (!dlh_kv_get(text, "cpu_s", v, sizeof v))
			end->cpu_s = strtod(v, NULL);
		if (!dlh_kv_get(text, "max_rss_kb", v, sizeof v))
			end->max_rss = strtoll(v, NULL, 10) * 1024;
		if (!lstat(path, &st))
			end->ended_at = (double)st.st_mtim.tv_sec + 1e-9 * (double)st.st_mtim.tv_nsec;
	}
	free(text);
	return rc;
}

/* How the launcher ended, from the shepherd's exit file of job_dir:
 * >= 0 its status, < 0 minus its signal. Returns 0, or -ENOENT when there
 * is no such file (no shepherd, or it was killed) or it does not parse. */
static int read_exit(const char *job_dir, int *code)
{
	return read_end(job_dir, code, NULL);
}

/* Fills *end for a run whose leader has exited (status: from waitpid, or
 * -1 when it was not ours to wait for), stops what is left of the run and
 * forgets its files. */
static void ended(const struct dlh_backend *be, const struct dlh_run *run, const char *job_dir,
		  int wstatus, struct dlh_run_end *end)
{
	int code;
	memset(end, 0, sizeof *end);
	end->cpu_s = -1;
	if (!read_end(job_dir, &code, end)) {
		end->state = DLH_RUN_EXITED;   /* what the shepherd saw of the launcher */
		end->exit_code = code;
	} else if (wstatus != -1) {
		end->state = DLH_RUN_EXITED;   /* the leader itself, as waitpid saw it */
		end->exit_code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -WTERMSIG(wstatus);
		/* the leader is the shepherd, and it wrote no exit file */
		end->holder_died = be->shepherd[0] != '\0' && WIFSIGNALED(wstatus);
	} else {
		end->state = DLH_RUN_LOST;     /* nobody saw how it ended */
	}
	/* ranks that outlived mpirun keep its session id */
	end->leftover = dlh_proc_kill_session_since(run->pid, run->pid_start, SIGKILL);
	forget(job_dir);
}

static int local_wait(const struct dlh_backend *be, const struct dlh_run *run,
		      const char *job_dir, int block, struct dlh_run_end *end)
{
	int wstatus = 0;
	pid_t w;
	(void)be;
	while ((w = waitpid(run->pid, &wstatus, block ? 0 : WNOHANG)) < 0 && errno == EINTR)
		;
	if (w == 0)
		return -EAGAIN;
	if (w > 0) {
		ended(be, run, job_dir, wstatus, end);
		return 0;
	}
	if (errno != ECHILD)
		return -errno;
	/* not our child: a run found after a restart, held by its shepherd */
	if (!block && dlh_proc_alive(run->pid, run->pid_start))
		return -EAGAIN;
	int rc = block ? dlh_proc_wait_exit(run->pid, run->pid_start) : 0;
	if (rc)
		return rc;
	ended(be, run, job_dir, -1, end);
	return 0;
}

static enum dlh_run_state local_state(const struct dlh_backend *be, const struct dlh_run *run,
				      const char *job_dir)
{
	int code;
	(void)be;
	if (strcmp(run->backend, LOCAL_NAME))
		return DLH_RUN_LOST;   /* another backend's (a Slurm job id is no pid of ours) */
	if (run->pid > 0 && run->pid_start && dlh_proc_alive(run->pid, run->pid_start))
		return DLH_RUN_RUNNING;
	return read_exit(job_dir, &code) ? DLH_RUN_LOST : DLH_RUN_EXITED;
}

static int local_stop(const struct dlh_backend *be, const struct dlh_run *run,
		      const char *job_dir, double grace)
{
	int killed = 0;
	(void)be;
	if (run->pid > 0 && run->pid_start && !strcmp(run->backend, LOCAL_NAME)) {
		/* even when mpirun itself is gone: ranks started after it are
		 * recognised by session and start time */
		dlh_proc_kill_session_since(run->pid, run->pid_start, SIGTERM);
		double until = dlh_mono() + grace;
		while (dlh_proc_count_session_since(run->pid, run->pid_start) && dlh_mono() < until) {
			struct timespec ts = { 0, LOCAL_POLL_NS };
			nanosleep(&ts, NULL);
		}
		killed = dlh_proc_kill_session_since(run->pid, run->pid_start, SIGKILL);
	}
	forget(job_dir);
	return killed;
}

/* Open MPI's words for the first rank that failed: "Process name:
 * [[JOB,STEP],R]" then "Exit code: N" (a non-zero exit), or "noticed that
 * process rank R with PID P on node H exited on signal N". */
static int local_failed_rank(const struct dlh_backend *be, const char *log, int *code)
{
	(void)be;
	return dlh_mpirun_failed_rank(log, code);
}

int dlh_mpirun_failed_rank(const char *log, int *code)
{
	const char *p;
	long r, c, job, step;
	*code = 0;
	if ((p = strstr(log, "Process name: [[")) &&
	    sscanf(p, "Process name: [[%ld,%ld],%ld]", &job, &step, &r) == 3) {
		const char *x = strstr(p, "Exit code:");
		if (x && sscanf(x, "Exit code: %ld", &c) == 1)
			*code = (int)c;
		return (int)r;
	}
	if ((p = strstr(log, "noticed that process rank ")) &&
	    sscanf(p, "noticed that process rank %ld", &r) == 1) {
		const char *x = strstr(p, "exited on signal ");
		if (x && sscanf(x, "exited on signal %ld", &c) == 1)
			*code = -(int)c;
		return (int)r;
	}
	return -1;
}

static int local_describe(const struct dlh_backend *be, const struct dlh_launch *l,
			  struct dlh_buf *out)
{
	char *argv[DLH_LAUNCH_ARGV_MAX];
	char *store = malloc(DLH_ARGV_STORE);
	int n, rc = 0;

	if (!store)
		return -ENOMEM;
	n = local_argv(be, l, argv, DLH_LAUNCH_ARGV_MAX, store, DLH_ARGV_STORE);
	if (n < 0) {
		free(store);
		return n;
	}
	if (!several(l)) {
		rc |= dlh_buf_printf(out, "launch %s: every rank on this machine under %s%s%s\n",
				     LOCAL_NAME, be->launcher, be->shepherd[0] ? ", held by " : "",
				     be->shepherd);
	} else {
		char path[4200];
		hostfile_path(l, path, sizeof path);
		rc |= dlh_buf_printf(out, "launch %s: %d ranks on %d nodes under %s%s%s, the other "
				     "nodes reached by \"%s\"\nhostfile %s\n", LOCAL_NAME, l->ranks,
				     l->nhosts, be->launcher, be->shepherd[0] ? ", held by " : "",
				     be->shepherd, l->agent && l->agent[0] ? l->agent : DLH_AGENT_DEFAULT,
				     path);
		for (int i = 0; i < l->nhosts; i++)
			rc |= dlh_buf_printf(out, "host %s slots=%d\n", l->hosts[i].host,
					     l->hosts[i].ranks);
	}
	rc |= dlh_buf_printf(out, "env");
	for (int i = 0; l->env && l->env[i]; i++)
		if (strncmp(l->env[i], "DLH_", 4))   /* the contract's DLH_* are per job */
			rc |= dlh_buf_printf(out, " %s", l->env[i]);
	rc |= dlh_buf_printf(out, "\nargv");
	for (int i = 0; i < n; i++)
		rc |= dlh_buf_printf(out, " %s", argv[i]);
	rc |= dlh_buf_printf(out, "\n");
	free(store);
	return rc ? -ENOMEM : 0;
}

static const struct dlh_backend_ops local_ops = {
	.argv = local_argv,
	.start = local_start,
	.signal = local_signal,
	.wait = local_wait,
	.state = local_state,
	.stop = local_stop,
	.failed_rank = local_failed_rank,
	.describe = local_describe,
};

int dlh_backend_local(struct dlh_backend *be, const char *path, char *err, size_t errlen)
{
	memset(be, 0, sizeof *be);
	be->name = LOCAL_NAME;
	be->launcher_name = "mpirun";
	be->ops = &local_ops;
	if (path) {
		if (strlen(path) >= sizeof be->launcher) {
			snprintf(err, errlen, "the mpirun path is too long");
			return -ENAMETOOLONG;
		}
		snprintf(be->launcher, sizeof be->launcher, "%s", path);
		return 0;
	}
	if (dlh_find_on_path("mpirun", 0, be->launcher, sizeof be->launcher)) {
		snprintf(err, errlen, "mpirun not found on PATH (install openmpi-bin: make deps)");
		return -ENOENT;
	}
	return 0;
}
