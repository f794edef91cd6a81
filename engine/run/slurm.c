/* slurm.c - the Slurm backend: each run is a Slurm job that sbatch submits
 * as the run's owner (their uid, gid and groups), for the planner's nodes,
 * ranks per node and memory, with a time limit made from the estimate
 * (SLURM_TIME_MARGIN), Slurm's signal before that limit (DLH_SIG_LIMIT to
 * the batch shell, dlh-shepherd, which passes it on as the verbs' suspend:
 * the ranks checkpoint and stop, resumable; its exit file says it was the
 * limit) and --requeue. The engine arms no time limit of its own (Slurm
 * keeps it: be->keeps_limit).
 *
 * No shell sees a value of the spec: the batch script (SLURM_SCRIPT, the
 * same text for every job) only execs dlh-shepherd --argv-file SLURM_ARGV,
 * a file the daemon writes in the job's directory (its owner's alone) that
 * holds the run's environment and the shepherd's argv: mpirun, which starts
 * the ranks over the allocation through Slurm (srun), and the program. The
 * shepherd passes the verbs' signals to mpirun, sorts output by rank and
 * records how mpirun ended in DLH_RUN_EXIT_FILE, as with the local backend.
 * Every Slurm command is run from its absolute path with an argv array.
 *
 * The run's handle holds the Slurm job id (as its pid). Waiting asks Slurm
 * (scontrol show job) about the job every SLURM_POLL_S: each change of its
 * state goes to the job's log and to SLURM_STATE (pending, with Slurm's
 * reason, running, ...), and while it is pending Slurm's estimated start
 * (squeue --start, every SLURM_START_POLL_S) to SLURM_START, which the
 * queue file reads (pending()); the batch job's output (SLURM_OUT, which
 * Slurm writes as the owner) is copied into the job's log as it grows. A
 * requeued batch job of a [job] command takes up from its newest
 * checkpoint by itself (dlh-shepherd --take-up). Once Slurm
 * says the job ended (or no longer knows it), how it ended comes from the
 * shepherd's exit file, else from Slurm's state and exit code. */
#define _GNU_SOURCE   /* pipe2: close-on-exec from the start */
#include "engine/run/backend.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <math.h>
#include <poll.h>
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

#include "engine/contract/contract.h"
#include "engine/run/launch.h"

#define SLURM_NAME "slurm"
#define SLURM_SCRIPT "slurm.sh"       /* in the job dir: the batch script (no spec value) */
#define SLURM_ARGV "slurm.argv"       /* in the job dir: the run's environment, then
					 dlh-shepherd's argv, each NUL-ended (its owner's) */
#define SLURM_OUT "slurm.out"         /* in the job dir: the batch job's output */
#define SLURM_POS "slurm.pos"         /* how much of it the log has */
#define SLURM_STATE "slurm.state"     /* Slurm's word on the job, as last asked */
#define SLURM_START "slurm.start"     /* Slurm's estimated start of the job while it is
					 pending (squeue --start), as last asked */
#define SLURM_CMD_TIMEOUT 30.0        /* seconds a Slurm command may take */
#define SLURM_POLL_S 1.0              /* asking Slurm about a job that runs */
#define SLURM_START_POLL_S 5.0        /* asking squeue --start about a pending one */
#define SLURM_TIME_MARGIN 1.25        /* --time: the estimate times this, */
#define SLURM_TIME_EXTRA 120.0        /* plus this many seconds */
#define SLURM_GRACE_MIN 30            /* the signal before the limit, at least (s) */
#define SLURM_OUT_MAX 65536           /* bytes of a command's output kept */
#define SLURM_ENV_MAX 160             /* entries of the run's environment */
#define SLURM_FILE_MAX (256 * 1024)   /* the argv file's size */

/* ---- running Slurm's commands ---- */

/* The last line of text that is not empty into out. */
static void last_line(const char *text, char *out, size_t len)
{
	const char *best = NULL;
	size_t bl = 0;
	for (const char *l = text; *l;) {
		size_t n = strcspn(l, "\n");
		if (n)
			best = l, bl = n;
		l += n + (l[n] == '\n');
	}
	snprintf(out, len, "%.*s", best ? (int)bl : 0, best ? best : "");
}

/* Runs argv (argv[0] an absolute path; no shell) with env (NULL: the
 * daemon's), as cred (NULL: as the daemon), in dir (NULL: here), stdin
 * /dev/null, its output into out and its errors into err (outlen and
 * errlen bytes at most, NUL-ended); killed after SLURM_CMD_TIMEOUT. Returns
 * its exit status (>= 0), or -errno (-ETIMEDOUT) with err saying why. */
static int run_cmd(char *const argv[], char *const env[], const struct dlh_cred *cred,
		   const char *dir, char *out, size_t outlen, char *err, size_t errlen)
{
	int po[2] = { -1, -1 }, pe[2] = { -1, -1 };
	if (pipe2(po, O_CLOEXEC) || pipe2(pe, O_CLOEXEC)) {
		int rc = -errno;
		snprintf(err, errlen, "cannot make a pipe: %s", strerror(errno));
		for (int i = 0; i < 2; i++) {
			if (po[i] >= 0)
				close(po[i]);
			if (pe[i] >= 0)
				close(pe[i]);
		}
		return rc;
	}
	pid_t pid = fork();
	if (pid == 0) {
		/* async-signal-safe calls only from here to exec */
		dlh_child_as_from_shell();
		int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (nul < 0 || dlh_fd_onto(nul, 0) < 0 || dlh_fd_onto(po[1], 1) < 0 ||
		    dlh_fd_onto(pe[1], 2) < 0)
			_exit(127);
		/* as the job's owner: their groups, group and user, for good */
		if (cred && (setgroups((size_t)cred->ngroups, cred->groups) < 0 ||
			     setgid(cred->gid) < 0 || setuid(cred->uid) < 0))
			_exit(126);
		if (dir && chdir(dir) < 0)
			_exit(125);
		if (env)
			execve(argv[0], argv, env);
		else
			execv(argv[0], argv);
		_exit(127);
	}
	int saved = errno;
	close(po[1]);
	close(pe[1]);
	if (pid < 0) {
		close(po[0]);
		close(pe[0]);
		snprintf(err, errlen, "cannot fork: %s", strerror(saved));
		return -saved;
	}
	int fds[2] = { po[0], pe[0] };
	int rc = dlh_launch_gather(fds, out, outlen, err, errlen, SLURM_CMD_TIMEOUT);
	for (int i = 0; i < 2; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (rc)
		kill(-pid, SIGKILL);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (rc) {
		snprintf(err, errlen, "%s did not answer within %.0f s", argv[0], SLURM_CMD_TIMEOUT);
		return rc;
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) >= 125 && !err[0]) {
		snprintf(err, errlen, "cannot run \"%s\"%s", argv[0],
			 WEXITSTATUS(st) == 126 ? " as the job's owner" :
			 WEXITSTATUS(st) == 125 ? " in the job's directory" : "");
		return -EIO;
	}
	if (!WIFEXITED(st)) {
		snprintf(err, errlen, "%s was killed by signal %d", argv[0], WTERMSIG(st));
		return -EIO;
	}
	char last[512];
	last_line(err, last, sizeof last);
	snprintf(err, errlen, "%s", last);
	return WEXITSTATUS(st);
}

/* The path of Slurm's command name into out. */
static void slurm_cmd(const struct dlh_backend *be, const char *name, char *out, size_t len)
{
	snprintf(out, len, "%s/%s", be->bin, name);
}

/* ---- what Slurm says of a job ---- */

/* A job as scontrol shows it. */
struct slurm_job {
	int found;               /* 1: Slurm knows the job */
	char state[32];          /* JobState: PENDING, RUNNING, COMPLETED, ... */
	char reason[128];        /* Reason: why it waits (Resources, Priority, ...), with
				    the spaces squeue shows (scontrol gives underscores) */
	char nodes[256];         /* NodeList, "(null)" while it waits */
	char limit[32];          /* TimeLimit: [D-]HH:MM:SS, UNLIMITED */
	int restarts;            /* Restarts: times Slurm requeued it (a node failed,
				    preemption with PreemptMode=REQUEUE) */
	int exit_status;         /* ExitCode=S:G: the batch script's status */
	int exit_signal;         /* and the signal that ended it, 0 = none */
	int from_sacct;          /* 1: scontrol had forgotten it; Slurm's accounting said */
};

/* The value of key ("JobState=") in scontrol's one-line text into out. */
static void field(const char *text, const char *key, char *out, size_t len)
{
	size_t kl = strlen(key);
	out[0] = '\0';
	for (const char *p = text; (p = strstr(p, key)); p += kl) {
		if (p != text && p[-1] != ' ')
			continue;
		p += kl;
		size_t n = strcspn(p, " \n");
		snprintf(out, len, "%.*s", (int)n, p);
		return;
	}
}

static int state_ended(const char *state);

/* Asks Slurm's accounting about job id, which slurmctld has forgotten
 * (MinJobAge), into *q: sacct -X -n -P -o State,ExitCode,NodeList,Timelimit.
 * Leaves q->found 0 where it cannot say (no accounting: sacct says the
 * storage is disabled; sacct not installed; the job not there). */
static void ask_sacct(const struct dlh_backend *be, long id, struct slurm_job *q)
{
	char prog[600], idtext[24], out[1024], err[512];
	slurm_cmd(be, "sacct", prog, sizeof prog);
	if (access(prog, X_OK))
		return;
	snprintf(idtext, sizeof idtext, "%ld", id);
	char *const argv[] = { prog, "-X", "-n", "-P", "-o", "JobID,State,ExitCode,NodeList,Timelimit",
			       "-j", idtext, NULL };
	if (run_cmd(argv, NULL, NULL, NULL, out, sizeof out, err, sizeof err) != 0)
		return;
	/* "7|CANCELLED by 1000|0:15|n[1-2]|00:01:00": the line of this job */
	for (char *line = out, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		char *f[5];
		int n = 0;
		for (char *p = line; n < 5; n++) {
			f[n] = p;
			p = strchr(p, '|');
			if (!p) {
				n++;
				break;
			}
			*p++ = '\0';
		}
		if (n < 5 || strcmp(f[0], idtext))
			continue;
		snprintf(q->state, sizeof q->state, "%.*s", (int)strcspn(f[1], " "), f[1]);
		if (sscanf(f[2], "%d:%d", &q->exit_status, &q->exit_signal) != 2)
			q->exit_status = q->exit_signal = 0;
		snprintf(q->nodes, sizeof q->nodes, "%s", f[3]);
		snprintf(q->limit, sizeof q->limit, "%s", f[4]);
		/* one it says still runs is no end: as forgotten (its record
		 * outlived slurmctld's state) */
		q->found = q->from_sacct = state_ended(q->state);
		return;
	}
}

/* Asks Slurm about job id into *q. Returns 0 (q->found 0: Slurm no longer
 * knows it), or -errno with err (Slurm did not answer: nothing is known). */
static int ask_job(const struct dlh_backend *be, long id, struct slurm_job *q, char *err,
		   size_t errlen)
{
	char prog[600], idtext[24], *out = malloc(SLURM_OUT_MAX), errtext[1024];
	memset(q, 0, sizeof *q);
	if (!out)
		return -ENOMEM;
	slurm_cmd(be, "scontrol", prog, sizeof prog);
	snprintf(idtext, sizeof idtext, "%ld", id);
	char *const argv[] = { prog, "show", "job", "-o", idtext, NULL };
	int rc = run_cmd(argv, NULL, NULL, NULL, out, SLURM_OUT_MAX, errtext, sizeof errtext);
	if (rc == 0 && strstr(out, "JobState=")) {
		char code[32];
		q->found = 1;
		field(out, "JobState=", q->state, sizeof q->state);
		field(out, "Reason=", q->reason, sizeof q->reason);
		for (char *c = q->reason; *c; c++)   /* scontrol's one word: squeue's spaces */
			if (*c == '_')
				*c = ' ';
		field(out, "NodeList=", q->nodes, sizeof q->nodes);
		field(out, "TimeLimit=", q->limit, sizeof q->limit);
		field(out, "Restarts=", code, sizeof code);
		q->restarts = atoi(code);
		field(out, "ExitCode=", code, sizeof code);
		if (sscanf(code, "%d:%d", &q->exit_status, &q->exit_signal) != 2)
			q->exit_status = q->exit_signal = 0;
		rc = 0;
	} else if (strstr(errtext, "Invalid job id")) {
		rc = 0;   /* ended long enough ago that slurmctld forgot it */
		ask_sacct(be, id, q);
	} else {
		snprintf(err, errlen, "scontrol show job %ld: %s", id, errtext[0] ? errtext :
			 rc < 0 ? strerror(-rc) : "no answer");
		rc = rc < 0 ? rc : -EIO;
	}
	free(out);
	return rc;
}

/* 1 when a job in Slurm's state has ended and left nothing running. */
static int state_ended(const char *state)
{
	static const char *const ended[] = {
		"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
		"DEADLINE", "OUT_OF_MEMORY", "SPECIAL_EXIT", "REVOKED",
	};
	for (size_t i = 0; i < sizeof ended / sizeof ended[0]; i++)
		if (!strcmp(state, ended[i]))
			return 1;
	return 0;
}

/* ---- the job's files ---- */

static void job_file(const char *job_dir, const char *name, char *out, size_t len)
{
	snprintf(out, len, "%s/%s", job_dir, name);
}

/* Appends a line of the backend's own to the job's log, as the daemon's lines. */
static void log_line(const char *job_dir, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_line(const char *job_dir, const char *fmt, ...)
{
	char path[4200], when[32], msg[1024], line[1100];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	dlh_time_iso(dlh_now(), when, sizeof when);
	snprintf(line, sizeof line, "%s dlhfs: %s", when, msg);
	job_file(job_dir, DLH_FILE_LOG, path, sizeof path);
	dlh_append_line(path, line);
}

/* Copies what the batch job wrote to SLURM_OUT since the last copy into the
 * job's log (SLURM_POS says how much it has). */
static void copy_output(const char *job_dir)
{
	char out[4200], pos_path[4200], logp[4200], *pos_text = NULL;
	job_file(job_dir, SLURM_OUT, out, sizeof out);
	job_file(job_dir, SLURM_POS, pos_path, sizeof pos_path);
	job_file(job_dir, DLH_FILE_LOG, logp, sizeof logp);
	long long pos = 0;
	if (!dlh_read_file_nofollow(pos_path, 64, &pos_text, NULL)) {
		pos = strtoll(pos_text, NULL, 10);
		free(pos_text);
	}
	int in = open(out, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (in < 0)
		return;
	int to = -1;
	char buf[65536];
	ssize_t n;
	long long at = pos;
	while ((n = pread(in, buf, sizeof buf, (off_t)at)) > 0) {
		if (to < 0 && (to = open(logp, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
					 0644)) < 0)
			break;
		if (dlh_write_all(to, buf, (size_t)n) < 0)
			break;
		at += n;
	}
	close(in);
	if (to >= 0)
		close(to);
	if (at != pos) {
		char text[32];
		int len = snprintf(text, sizeof text, "%lld\n", at);
		dlh_write_atomic(pos_path, text, (size_t)len);
	}
}

/* Records Slurm's word on the job (SLURM_STATE), and in the log when it
 * changed. A job Slurm requeued (its Restarts grew: a node failed, or it
 * was preempted to be requeued) runs its batch script again: the exit file
 * of a run before (its slurm_restart below Restarts) is no word on the
 * next, and goes. */
static void note_state(const char *job_dir, long id, const struct slurm_job *q)
{
	char path[4200], text[512], *old = NULL, was[16] = "";
	job_file(job_dir, SLURM_STATE, path, sizeof path);
	int n = snprintf(text, sizeof text, "job=%ld\nstate=%s\nreason=%s\nnodes=%s\nrestarts=%d\n",
			 id, q->found ? q->state : "GONE", q->found ? q->reason : "",
			 q->found ? q->nodes : "", q->found ? q->restarts : 0);
	if (!dlh_read_file_nofollow(path, 4096, &old, NULL) && !strcmp(old, text)) {
		free(old);
		return;
	}
	if (old && dlh_kv_get(old, "restarts", was, sizeof was))
		was[0] = '\0';
	free(old);
	dlh_write_atomic(path, text, (size_t)n);
	if (!q->found)
		return;
	if (q->restarts > atoi(was)) {
		/* the exit file of a run before this restart goes; the rerun's
		 * own (it may have ended while dlhfs was away) stays */
		char *exit_text = NULL, run[16] = "";
		job_file(job_dir, DLH_RUN_EXIT_FILE, path, sizeof path);
		if (!dlh_read_file_nofollow(path, 4096, &exit_text, NULL)) {
			if (dlh_kv_get(exit_text, "slurm_restart", run, sizeof run))
				run[0] = '\0';
			if (atoi(run) < q->restarts)
				unlink(path);
			free(exit_text);
		}
		log_line(job_dir, "slurm: job %ld was requeued by Slurm (restart %d); its batch job "
			 "runs again once Slurm lets it", id, q->restarts);
	}
	if (!strcmp(q->state, "PENDING"))
		log_line(job_dir, "slurm: job %ld pending (%s)", id, q->reason);
	else if (!strcmp(q->state, "RUNNING"))
		log_line(job_dir, "slurm: job %ld running on %s", id, q->nodes);
	else
		log_line(job_dir, "slurm: job %ld %s%s%s%s", id, q->state,
			 strcmp(q->reason, "None") ? " (" : "", strcmp(q->reason, "None") ? q->reason : "",
			 strcmp(q->reason, "None") ? ")" : "");
}

/* Slurm's time text ("2026-11-27T10:02:03", local time) as epoch seconds,
 * or INFINITY ("N/A", "Unknown", anything else). */
static double slurm_time(const char *text)
{
	struct tm tm = { 0 };
	char tail;
	if (sscanf(text, "%d-%d-%dT%d:%d:%d%c", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
		   &tm.tm_min, &tm.tm_sec, &tail) != 6 || tm.tm_year < 1970 || tm.tm_mon < 1 ||
	    tm.tm_mon > 12)
		return INFINITY;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	tm.tm_isdst = -1;
	time_t t = mktime(&tm);
	return t == (time_t)-1 ? INFINITY : (double)t;
}

/* Parses squeue's "ID|START|PRIORITY" lines (text) for job id into *start
 * and *prio. Returns 0, or -ENOENT when no line is the job's (it no longer
 * waits), -EINVAL when its line does not parse. */
int dlh_slurm_parse_start(const char *text, long id, double *start, long *prio)
{
	for (const char *l = text; *l;) {
		size_t n = strcspn(l, "\n");
		char line[256], *f[3], *save = NULL, *end;
		snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line ? n : sizeof line - 1), l);
		l += n + (l[n] == '\n');
		int k = 0;
		for (char *t = strtok_r(line, "|", &save); t && k < 3; t = strtok_r(NULL, "|", &save))
			f[k++] = t;
		if (k < 1)
			continue;
		while (*f[0] == ' ')
			f[0]++;
		errno = 0;
		long got = strtol(f[0], &end, 10);
		if (errno || end == f[0] || (*end && *end != ' ') || got != id)
			continue;
		if (k < 3)
			return -EINVAL;
		*start = slurm_time(f[1]);
		errno = 0;
		*prio = strtol(f[2], &end, 10);
		if (errno || end == f[2])
			*prio = -1;
		return 0;
	}
	return -ENOENT;
}

/* Asks Slurm when pending job id is expected to start (squeue --start)
 * and records it in SLURM_START; removes it when the job no longer waits.
 * A command that fails leaves the last answer. */
static void note_start(const struct dlh_backend *be, const char *job_dir, long id)
{
	char prog[600], idtext[24], out[2048], err[512], path[4200], text[160];
	double start = INFINITY;
	long prio = -1;
	slurm_cmd(be, "squeue", prog, sizeof prog);
	snprintf(idtext, sizeof idtext, "%ld", id);
	char *const argv[] = { prog, "--start", "--noheader", "--jobs", idtext, "--format=%i|%S|%Q",
			       NULL };
	job_file(job_dir, SLURM_START, path, sizeof path);
	if (run_cmd(argv, NULL, NULL, NULL, out, sizeof out, err, sizeof err) != 0)
		return;
	int rc = dlh_slurm_parse_start(out, id, &start, &prio);
	if (rc == -ENOENT) {
		unlink(path);
		return;
	}
	if (rc)
		return;
	int n = isinf(start) ? snprintf(text, sizeof text, "job=%ld\nstart=unknown\npriority=%ld\n", id, prio) :
		snprintf(text, sizeof text, "job=%ld\nstart=%.0f\npriority=%ld\n", id, start, prio);
	dlh_write_atomic(path, text, (size_t)n);
}

/* How the shepherd saw mpirun end (DLH_RUN_EXIT_FILE) into *end. Returns 0,
 * or -ENOENT (the shepherd wrote none: it never ran, or was killed). */
static int read_exit(const char *job_dir, struct dlh_run_end *end)
{
	char path[4200], v[32], *text = NULL;
	struct stat st;
	job_file(job_dir, DLH_RUN_EXIT_FILE, path, sizeof path);
	if (dlh_read_file_nofollow(path, 512, &text, NULL))
		return -ENOENT;
	int rc = -ENOENT;
	if (!dlh_kv_get(text, "exit", v, sizeof v))
		end->exit_code = atoi(v), rc = 0;
	else if (!dlh_kv_get(text, "signal", v, sizeof v))
		end->exit_code = -atoi(v), rc = 0;
	if (!rc) {
		if (!dlh_kv_get(text, "cpu_s", v, sizeof v))
			end->cpu_s = strtod(v, NULL);
		if (!dlh_kv_get(text, "max_rss_kb", v, sizeof v))
			end->max_rss = strtoll(v, NULL, 10) * 1024;
		if (!dlh_kv_get(text, "time_limit", v, sizeof v) && atoi(v) == 1)
			end->cause = DLH_END_TIME_LIMIT;   /* Slurm's signal before it */
		if (!lstat(path, &st))
			end->ended_at = (double)st.st_mtim.tv_sec + 1e-9 * (double)st.st_mtim.tv_nsec;
	}
	free(text);
	return rc;
}

/* Removes what a run that ended left in job_dir (its output is in the log). */
static void forget(const char *job_dir)
{
	static const char *const files[] = { DLH_RUN_EXIT_FILE, SLURM_OUT, SLURM_POS, SLURM_START };
	char path[4200];
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		job_file(job_dir, files[i], path, sizeof path);
		unlink(path);
	}
	dlh_run_forget(job_dir);
}

/* ---- the launch ---- */

/* Nodes of l and the most ranks one of them runs. */
static void shape(const struct dlh_launch *l, int *nodes, int *per_node)
{
	*nodes = l->hosts && l->nhosts > 0 ? l->nhosts : 1;
	*per_node = l->hosts && l->nhosts > 0 ? 0 : l->ranks;
	for (int i = 0; l->hosts && i < l->nhosts; i++)
		if (l->hosts[i].ranks > *per_node)
			*per_node = l->hosts[i].ranks;
}

/* The --time of l in minutes (0: none): its estimate times
 * SLURM_TIME_MARGIN plus SLURM_TIME_EXTRA, or the spec's time limit where
 * that is shorter or there is no estimate. */
static long time_minutes(const struct dlh_launch *l)
{
	double s = l->est_s > 0 ? l->est_s * SLURM_TIME_MARGIN + SLURM_TIME_EXTRA : 0;
	if (l->time_limit > 0 && (s <= 0 || l->time_limit < s))
		s = l->time_limit;
	return s > 0 ? (long)ceil(s / 60.0) : 0;
}

/* The seconds before the limit at which Slurm signals the batch shell. */
static int grace_s(const struct dlh_launch *l)
{
	return l->grace > SLURM_GRACE_MIN ? l->grace : SLURM_GRACE_MIN;
}

/* sbatch's argv for l into out (max entries, NULL-terminated) backed by
 * store. Returns the entries used, or -E2BIG. */
static int sbatch_argv(const struct dlh_backend *be, const struct dlh_launch *l, char **out,
		       size_t max, char *store, size_t storelen)
{
	char prog[600], opt[4400];
	const char *base = strrchr(l->job_dir, '/');
	size_t used = 0;
	int n = 0, rc, nodes, per_node;
	shape(l, &nodes, &per_node);
	slurm_cmd(be, "sbatch", prog, sizeof prog);
	rc = dlh_argv_put(out, max, &n, store, storelen, &used, prog);
	rc |= dlh_argv_put(out, max, &n, store, storelen, &used, "--parsable");
	snprintf(opt, sizeof opt, "--job-name=dlh-%s", base ? base + 1 : l->job_dir);
	rc |= dlh_argv_put(out, max, &n, store, storelen, &used, opt);
	if (be->partition[0]) {
		snprintf(opt, sizeof opt, "--partition=%s", be->partition);
		rc |= dlh_argv_put(out, max, &n, store, storelen, &used, opt);
	}
	if (be->account[0]) {
		snprintf(opt, sizeof opt, "--account=%s", be->account);
		rc |= dlh_argv_put(out, max, &n, store, storelen, &used, opt);
	}
	snprintf(opt, sizeof opt, "--nodes=%d", nodes);
	rc |= dlh_argv_put(out, max, &n, store, storelen, &used, opt);
	snprintf(opt, sizeof opt, "--ntasks=%d", l->ranks);
	rc |= dlh_argv_put(out, max, &n, store, storelen, &used, opt);
	snprintf(opt, sizeof opt, "--ntasks-per-node=%d", per_node);
	rc |= dlh_argv_put(out, max, &n, store, storelen, &used, opt);
	rc |= dlh_argv_put(out, max, &n, store, storelen, &used, "--cpus-per-task=1");
	if (l->gpu) {   /* a GPU a rank: as many a node as its most ranks */
		int typed = l->gpu_type && l->gpu_type[0];
		snprintf(opt, sizeof opt, "--gres=gpu:%s%s%d", typed ? l->gpu_type : "", typed ? ":" : "",
			 per_node);
		rc |= dlh_argv_put(out, max, &n, store, storelen, &used, opt);
	}
	if (l->memory > 0 && l->ranks > 0) {   /* per node: its share of every rank's */
		long long mb = (long long)ceil((double)l->memory / l->ranks * per_node / (1024.0 * 1024.0));
		snprintf(opt, sizeof opt, "--mem=%lldM", mb > 0 ? mb : 1);
		rc |= dlh_argv_put(out, max, &n, store, storelen, &used, opt);
	}
	long minutes = time_minutes(l);
	if (minutes > 0) {
		snprintf(opt, sizeof opt, "--time=%ld", minutes);
		rc |= dlh_argv_put(out, max, &n, store, storelen, &used, opt);
	}
	/* before the limit, to the batch shell (dlh-shepherd): checkpoint and stop
	 * (resumable), as suspend does, and say it was the limit */
	_Static_assert(DLH_SIG_LIMIT == SIGXCPU, "--signal names DLH_SIG_LIMIT");
	snprintf(opt, sizeof opt, "--signal=B:XCPU@%d", grace_s(l));
	rc |= dlh_argv_put(out, max, &n, store, storelen, &used, opt);
	rc |= dlh_argv_put(out, max, &n, store, storelen, &used, "--requeue");
	snprintf(opt, sizeof opt, "--chdir=%s", l->job_dir);
	rc |= dlh_argv_put(out, max, &n, store, storelen, &used, opt);
	snprintf(opt, sizeof opt, "--output=%s/%s", l->job_dir, SLURM_OUT);
	rc |= dlh_argv_put(out, max, &n, store, storelen, &used, opt);
	rc |= dlh_argv_put(out, max, &n, store, storelen, &used, "--open-mode=append");
	snprintf(opt, sizeof opt, "%s/%s", l->job_dir, SLURM_SCRIPT);
	rc |= dlh_argv_put(out, max, &n, store, storelen, &used, opt);
	return rc ? -E2BIG : n;
}

/* What the batch job runs: dlh-shepherd's options, then mpirun over the
 * allocation and l->argv (the argv file's second part). Returns the
 * entries used, or -E2BIG. */
static int slurm_argv(const struct dlh_backend *be, const struct dlh_launch *l, char **out,
		      size_t max, char *store, size_t storelen)
{
	static const char *const opts[] = {
		"--bind-to", "none", "--mca", "pml", "ob1", "--mca", "btl", "self,vader,tcp",
		"--map-by", "slot", "--tag-output",
	};
	char np[16], path[4200];
	size_t used = 0;
	int n = 0, rc = 0;
	if (l->ready_path) {
		rc |= dlh_argv_put(out, max, &n, store, storelen, &used, "--ready");
		rc |= dlh_argv_put(out, max, &n, store, storelen, &used, l->ready_path);
	}
	rc |= dlh_argv_put(out, max, &n, store, storelen, &used, "--ranks");
	job_file(l->job_dir, DLH_DIR_LOGS, path, sizeof path);
	rc |= dlh_argv_put(out, max, &n, store, storelen, &used, path);
	if (l->take_up) {   /* a requeued batch job's command takes up from its checkpoint */
		rc |= dlh_argv_put(out, max, &n, store, storelen, &used, "--take-up");
		rc |= dlh_argv_put(out, max, &n, store, storelen, &used, l->job_dir);
	}
	job_file(l->job_dir, DLH_RUN_EXIT_FILE, path, sizeof path);
	rc |= dlh_argv_put(out, max, &n, store, storelen, &used, path);
	snprintf(np, sizeof np, "%d", l->ranks);
	rc |= dlh_argv_put(out, max, &n, store, storelen, &used, be->launcher);
	rc |= dlh_argv_put(out, max, &n, store, storelen, &used, "-np");
	rc |= dlh_argv_put(out, max, &n, store, storelen, &used, np);
	for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
		rc |= dlh_argv_put(out, max, &n, store, storelen, &used, opts[i]);
	for (int i = 0; l->argv[i]; i++)
		rc |= dlh_argv_put(out, max, &n, store, storelen, &used, l->argv[i]);
	return rc ? -E2BIG : n;
}

/* l's environment and what mpirun needs run by root, into env
 * (NULL-terminated). Returns 0, or -E2BIG. */
static int run_env(const struct dlh_launch *l, char **env, size_t max)
{
	size_t n = 0;
	for (int i = 0; l->env && l->env[i]; i++) {
		if (n + 3 >= max)
			return -E2BIG;
		env[n++] = l->env[i];
	}
	if (!l->cred || l->cred->uid == 0) {   /* mpirun refuses root without both */
		env[n++] = "OMPI_ALLOW_RUN_AS_ROOT=1";
		env[n++] = "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1";
	}
	env[n] = NULL;
	return 0;
}

/* Writes path with len bytes of data, mode, owned by cred's user (NULL: the
 * daemon's) so that the batch job reads it as them. Returns 0, or -errno. */
static int write_owned(const char *path, const void *data, size_t len, mode_t mode,
		       const struct dlh_cred *cred)
{
	unlink(path);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	int rc = dlh_write_all(fd, data, len) < 0 ? -EIO : 0;
	if (!rc && cred && geteuid() == 0 && fchown(fd, cred->uid, cred->gid) < 0)
		rc = -errno;
	if (!rc && fchmod(fd, mode) < 0)
		rc = -errno;
	if (close(fd) < 0 && !rc)
		rc = -EIO;
	if (rc)
		unlink(path);
	return rc;
}

/* The argv file of l (SLURM_ARGV): env entries, an empty entry, then the
 * shepherd's argv, each NUL-ended. Returns 0, or -errno. */
static int write_argv_file(const struct dlh_backend *be, const struct dlh_launch *l)
{
	char *argv[DLH_LAUNCH_ARGV_MAX], *env[SLURM_ENV_MAX], path[4200];
	char *store = malloc(DLH_ARGV_STORE);
	struct dlh_buf b = { 0 };
	int rc = store ? 0 : -ENOMEM;
	if (!rc && (slurm_argv(be, l, argv, DLH_LAUNCH_ARGV_MAX, store, DLH_ARGV_STORE) < 0 ||
		    run_env(l, env, SLURM_ENV_MAX) < 0))
		rc = -E2BIG;
	for (int i = 0; !rc && env[i]; i++)
		rc = dlh_buf_append(&b, env[i], strlen(env[i]) + 1);
	if (!rc)
		rc = dlh_buf_append(&b, "", 1);
	for (int i = 0; !rc && argv[i]; i++)
		rc = dlh_buf_append(&b, argv[i], strlen(argv[i]) + 1);
	if (!rc && b.len > SLURM_FILE_MAX)
		rc = -E2BIG;
	job_file(l->job_dir, SLURM_ARGV, path, sizeof path);
	if (!rc)
		rc = write_owned(path, b.data, b.len, 0600, l->cred);
	dlh_buf_free(&b);
	free(store);
	return rc;
}

/* The batch script: the same for every job (the shepherd's path is the
 * daemon's, never the spec's). Returns 0, or -errno (-EINVAL: a path a
 * shell's single quotes cannot hold). */
static int write_script(const struct dlh_backend *be, const struct dlh_launch *l)
{
	char text[1400], path[4200];
	if (strchr(be->shepherd, '\''))
		return -EINVAL;
	int n = snprintf(text, sizeof text,
			 "#!/bin/sh\n# dlhfs: the run's environment and argv are in %s, which "
			 "dlh-shepherd reads\nexec '%s' --argv-file %s\n", SLURM_ARGV, be->shepherd,
			 SLURM_ARGV);
	job_file(l->job_dir, SLURM_SCRIPT, path, sizeof path);
	return write_owned(path, text, (size_t)n, 0644, NULL);
}

/* Adds "slurm_job ID" to the job's plan file (the plan is written before
 * the run; the id is known once sbatch answers). */
static void plan_job_id(const char *job_dir, long id)
{
	char path[4200], *text = NULL, line[64];
	size_t len = 0;
	job_file(job_dir, "plan", path, sizeof path);
	if (dlh_read_file_nofollow(path, 1 << 20, &text, &len))
		return;
	struct dlh_buf b = { 0 };
	int n = snprintf(line, sizeof line, "slurm_job %ld\n", id);
	/* a run before this one named its own */
	for (const char *l = text; *l;) {
		size_t m = strcspn(l, "\n");
		if (strncmp(l, "slurm_job ", 10))
			dlh_buf_append(&b, l, m + (l[m] == '\n'));
		l += m + (l[m] == '\n');
	}
	if (!dlh_buf_append(&b, line, (size_t)n))
		dlh_write_atomic(path, b.data, b.len);
	dlh_buf_free(&b);
	free(text);
}

/* The environment sbatch runs with, which the batch job inherits (Slurm's
 * --export=ALL): the daemon's, or for another user only what a run keeps
 * (SLURM_CONF among it) and their HOME, USER, LOGNAME. NULL: out of memory. */
static char **sbatch_env(const struct dlh_cred *cred, char *store, size_t len)
{
	if (!cred)
		return dlh_launch_env(NULL, 0);
	int at = snprintf(store, len, "HOME=%s", cred->home) + 1;
	int at2 = at + snprintf(store + at, len - (size_t)at, "USER=%s", cred->user) + 1;
	snprintf(store + at2, len - (size_t)at2, "LOGNAME=%s", cred->user);
	char *const extra[] = { store, store + at, store + at2, NULL };
	return dlh_launch_env(extra, 1);
}

static int slurm_start(const struct dlh_backend *be, const struct dlh_launch *l,
		       struct dlh_run *run, char *err, size_t errlen)
{
	char *argv[64], *store = malloc(DLH_ARGV_STORE), envstore[800], path[4200];
	char out[256], why[1024];
	int rc;
	if (!store) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	/* an earlier run's */
	static const char *const stale[] = { DLH_RUN_EXIT_FILE, SLURM_OUT, SLURM_POS, SLURM_STATE,
					     SLURM_START };
	for (size_t i = 0; i < sizeof stale / sizeof stale[0]; i++) {
		job_file(l->job_dir, stale[i], path, sizeof path);
		unlink(path);
	}
	if (l->ready_path)
		unlink(l->ready_path);
	if ((rc = write_argv_file(be, l)) || (rc = write_script(be, l))) {
		free(store);
		snprintf(err, errlen, "cannot write the batch job's files in \"%s\": %s", l->job_dir,
			 strerror(-rc));
		return rc;
	}
	if (sbatch_argv(be, l, argv, sizeof argv / sizeof argv[0], store, DLH_ARGV_STORE) < 0) {
		free(store);
		snprintf(err, errlen, "the sbatch command line is too long");
		return -E2BIG;
	}
	char **env = sbatch_env(l->cred, envstore, sizeof envstore);
	rc = env ? run_cmd(argv, env, l->cred, l->job_dir, out, sizeof out, why, sizeof why) : -ENOMEM;
	free(env);
	free(store);
	char *end;
	long id = rc == 0 ? strtol(out, &end, 10) : 0;
	if (rc != 0 || id <= 0 || (*end && *end != ';' && *end != '\n')) {
		snprintf(err, errlen, "sbatch refused the job: %s", why[0] ? why : rc < 0 ? strerror(-rc) :
			 "it printed no job id");
		return rc < 0 ? rc : -EIO;
	}
	memset(run, 0, sizeof *run);
	snprintf(run->backend, sizeof run->backend, "%s", SLURM_NAME);
	run->pid = (pid_t)id;
	run->started = dlh_now();
	snprintf(run->host, sizeof run->host, "%s", be->partition[0] ? be->partition : "slurm");
	if ((rc = dlh_run_save(l->job_dir, run))) {
		/* a job nobody could find again after a restart: not submitted */
		char prog[600], idtext[24], o2[64], e2[256];
		slurm_cmd(be, "scancel", prog, sizeof prog);
		snprintf(idtext, sizeof idtext, "%ld", id);
		char *const cancel[] = { prog, idtext, NULL };
		run_cmd(cancel, NULL, NULL, NULL, o2, sizeof o2, e2, sizeof e2);
		snprintf(err, errlen, "cannot record the run in \"%s\": %s", l->job_dir, strerror(-rc));
		memset(run, 0, sizeof *run);
		return rc;
	}
	plan_job_id(l->job_dir, id);
	log_line(l->job_dir, "slurm: submitted batch job %ld%s%s%s", id,
		 l->cred ? " as " : "", l->cred ? l->cred->user : "", l->cred ? "" : " as the daemon's user");
	return 0;
}

/* scancel ID with opts (NULL-ended). Returns 1 (Slurm took it), 0 (it
 * knows no such job any more), or -errno. */
static int scancel(const struct dlh_backend *be, long id, const char *const *opts)
{
	char prog[600], idtext[24], out[256], err[512];
	char *argv[8];
	int n = 0;
	slurm_cmd(be, "scancel", prog, sizeof prog);
	snprintf(idtext, sizeof idtext, "%ld", id);
	argv[n++] = prog;
	for (int i = 0; opts && opts[i] && n < 6; i++)
		argv[n++] = (char *)opts[i];
	argv[n++] = idtext;
	argv[n] = NULL;
	int rc = run_cmd(argv, NULL, NULL, NULL, out, sizeof out, err, sizeof err);
	if (rc < 0)
		return rc;
	if (strstr(err, "Invalid job id") || strstr(err, "already completing or completed"))
		return 0;
	return rc == 0 ? 1 : -EIO;
}

/* What scancel asks of job id for verb v: 1 (Slurm took it), 0 (it
 * knows no such job any more), or -errno. */
static int send_verb(const struct dlh_backend *be, long id, enum dlh_verb v)
{
	static const char *const ckpt[] = { "--batch", "--signal=USR1", NULL };
	static const char *const susp[] = { "--batch", "--signal=USR2", NULL };
	switch (v) {
	case DLH_VERB_CHECKPOINT:   /* to the shepherd, which passes it to mpirun */
		return scancel(be, id, DLH_SIG_CHECKPOINT == SIGUSR1 ? ckpt : susp);
	case DLH_VERB_SUSPEND:
		return scancel(be, id, DLH_SIG_SUSPEND == SIGUSR2 ? susp : ckpt);
	case DLH_VERB_TERMINATE:    /* Slurm: SIGTERM to every step, SIGKILL after KillWait */
	case DLH_VERB_KILL:
		return scancel(be, id, NULL);
	}
	return -EINVAL;
}

/* ---- verbs, sent by a thread of their own ----
 *
 * The engine asks for a verb holding its lock (a FUSE thread's write to
 * ctl, the timer); scancel takes as long as slurmctld does to answer (up
 * to SLURM_CMD_TIMEOUT while it is down). So signal() only queues the verb:
 * one thread sends them, in the order they were asked, for the daemon's
 * life. Each has Slurm's commands' directory with it (a reload may replace
 * the engine's backend meanwhile). */

struct verb {
	struct dlh_backend be;      /* only bin is set */
	long id;
	enum dlh_verb v;
	struct verb *next;
};

static pthread_mutex_t verb_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t verb_cv = PTHREAD_COND_INITIALIZER;
static struct verb *verb_head, **verb_tail = &verb_head;   /* guarded by verb_mu */
static int verb_thread_up;                                 /* guarded by verb_mu */

static void *verb_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&verb_mu);
	for (;;) {
		while (!verb_head)
			pthread_cond_wait(&verb_cv, &verb_mu);
		struct verb *q = verb_head;
		if (!(verb_head = q->next))
			verb_tail = &verb_head;
		pthread_mutex_unlock(&verb_mu);
		send_verb(&q->be, q->id, q->v);
		free(q);
		pthread_mutex_lock(&verb_mu);
	}
	return NULL;
}

/* Queues verb v for job id. Returns 1 (queued: Slurm is told shortly),
 * else what sending it here and now returned (no memory, no thread). */
static int queue_verb(const struct dlh_backend *be, long id, enum dlh_verb v)
{
	struct verb *q = malloc(sizeof *q);
	if (!q)
		return send_verb(be, id, v);
	memset(q, 0, sizeof *q);
	memcpy(q->be.bin, be->bin, sizeof q->be.bin);
	q->id = id;
	q->v = v;
	pthread_mutex_lock(&verb_mu);
	if (!verb_thread_up)
		verb_thread_up = !dlh_thread_detached(verb_main, NULL);
	if (!verb_thread_up) {
		pthread_mutex_unlock(&verb_mu);
		free(q);
		return send_verb(be, id, v);
	}
	*verb_tail = q;
	verb_tail = &q->next;
	pthread_cond_signal(&verb_cv);
	pthread_mutex_unlock(&verb_mu);
	return 1;
}

static int slurm_signal(const struct dlh_backend *be, const struct dlh_run *run, enum dlh_verb v)
{
	if (run->pid <= 0)
		return 0;
	if (v != DLH_VERB_CHECKPOINT && v != DLH_VERB_SUSPEND && v != DLH_VERB_TERMINATE &&
	    v != DLH_VERB_KILL)
		return -EINVAL;
	return queue_verb(be, run->pid, v);
}

/* Who ended job id by Slurm's state q (a run that stopped on Slurm's
 * signal before its limit is already DLH_END_TIME_LIMIT in *end), and
 * Slurm's words on it into end->said. */
static void slurm_cause(long id, const struct slurm_job *q, struct dlh_run_end *end)
{
	if (!q->found)
		return;
	if (!strcmp(q->state, "TIMEOUT") || !strcmp(q->state, "DEADLINE"))
		end->cause = DLH_END_TIME_LIMIT;
	else if (!strcmp(q->state, "PREEMPTED"))
		end->cause = DLH_END_PREEMPTED;
	else if (!strcmp(q->state, "NODE_FAIL") || !strcmp(q->state, "BOOT_FAIL"))
		end->cause = DLH_END_NODE_FAIL;
	switch (end->cause) {
	case DLH_END_TIME_LIMIT:
		snprintf(end->said, sizeof end->said, "Slurm's time limit of job %ld (%s%s%s)", id, q->limit,
			 strcmp(q->state, "TIMEOUT") && strcmp(q->state, "DEADLINE") ? "" : "; ended ",
			 strcmp(q->state, "TIMEOUT") && strcmp(q->state, "DEADLINE") ? "" : q->state);
		break;
	case DLH_END_PREEMPTED:
		snprintf(end->said, sizeof end->said, "Slurm preempted job %ld (PREEMPTED)", id);
		break;
	case DLH_END_NODE_FAIL:
		snprintf(end->said, sizeof end->said, "Slurm lost the nodes of job %ld (%s on %s)", id,
			 q->state, q->nodes);
		break;
	case DLH_END_OWN:
		break;
	}
}

/* Fills *end for job id, which Slurm says has ended (q), and forgets its
 * files. */
static void ended(const char *job_dir, long id, const struct slurm_job *q, struct dlh_run_end *end)
{
	memset(end, 0, sizeof *end);
	end->cpu_s = -1;
	copy_output(job_dir);
	if (!read_exit(job_dir, end)) {
		end->state = DLH_RUN_EXITED;   /* as the shepherd saw mpirun end */
	} else if (!q->found) {
		end->state = DLH_RUN_LOST;     /* Slurm forgot it, and nobody saw how it ended */
	} else if (!strcmp(q->state, "NODE_FAIL") || !strcmp(q->state, "BOOT_FAIL")) {
		end->state = DLH_RUN_LOST;     /* its nodes were lost */
	} else {
		end->state = DLH_RUN_EXITED;
		if (!strcmp(q->state, "COMPLETED"))
			end->exit_code = 0;
		else if (!strcmp(q->state, "OUT_OF_MEMORY"))
			end->exit_code = -SIGKILL;
		else if (!strcmp(q->state, "FAILED") && !q->exit_signal)
			end->exit_code = q->exit_status ? q->exit_status : 1;
		else   /* cancelled, timed out, preempted, or killed by a signal */
			end->exit_code = -(q->exit_signal ? q->exit_signal : SIGTERM);
		/* the shepherd wrote nothing: it was killed before mpirun ended */
		end->holder_died = strcmp(q->state, "COMPLETED") != 0;
	}
	slurm_cause(id, q, end);
	if (q->found)
		log_line(job_dir, "slurm: job %ld ended %s, exit code %d:%d%s", id, q->state,
			 q->exit_status, q->exit_signal, q->from_sacct ? " (sacct: slurmctld had "
			 "forgotten it)" : "");
	else
		log_line(job_dir, "slurm: job %ld is no longer known to Slurm", id);
	forget(job_dir);
}

static int slurm_wait(const struct dlh_backend *be, const struct dlh_run *run, const char *job_dir,
		      int block, struct dlh_run_end *end)
{
	char err[512], path[4200];
	struct slurm_job q;
	double start_asked = -INFINITY;   /* squeue --start, last asked (dlh_mono) */
	for (;;) {
		int rc = ask_job(be, run->pid, &q, err, sizeof err);
		if (!rc) {
			note_state(job_dir, run->pid, &q);
			copy_output(job_dir);
			if (q.found && !strcmp(q.state, "PENDING")) {
				if (dlh_mono() - start_asked >= SLURM_START_POLL_S) {
					note_start(be, job_dir, run->pid);
					start_asked = dlh_mono();
				}
			} else if (start_asked > -INFINITY || !block) {
				job_file(job_dir, SLURM_START, path, sizeof path);
				unlink(path);
				start_asked = -INFINITY;
			}
			if (!q.found || state_ended(q.state)) {
				ended(job_dir, run->pid, &q, end);
				return 0;
			}
		} else if (atomic_load(&be->leaving)) {
			/* the daemon stops and Slurm does not answer: the job is
			 * Slurm's still, its handle stays for the next mount */
			log_line(job_dir, "slurm: %s; dlhfs stops: job %ld is left to Slurm, and the next "
				 "mount finds it again", err, (long)run->pid);
			return -ESHUTDOWN;
		}
		if (!block)
			return -EAGAIN;
		struct timespec ts = { (time_t)SLURM_POLL_S, 0 };
		nanosleep(&ts, NULL);
	}
}

static enum dlh_run_state slurm_state(const struct dlh_backend *be, const struct dlh_run *run,
				      const char *job_dir)
{
	char err[512];
	struct slurm_job q;
	struct dlh_run_end end = { 0 };
	if (run->pid <= 0 || strcmp(run->backend, SLURM_NAME))
		return DLH_RUN_LOST;   /* another backend's: its pid is no Slurm job */
	if (ask_job(be, run->pid, &q, err, sizeof err))
		return DLH_RUN_RUNNING;   /* Slurm does not answer: waiting asks again */
	if (q.found && !state_ended(q.state))
		return DLH_RUN_RUNNING;
	return q.found || !read_exit(job_dir, &end) ? DLH_RUN_EXITED : DLH_RUN_LOST;
}

static int slurm_stop(const struct dlh_backend *be, const struct dlh_run *run, const char *job_dir,
		      double grace)
{
	char err[512];
	struct slurm_job q;
	if (run->pid > 0 && !strcmp(run->backend, SLURM_NAME) && scancel(be, run->pid, NULL) > 0) {
		double until = dlh_mono() + grace;
		while (!ask_job(be, run->pid, &q, err, sizeof err) && q.found && !state_ended(q.state) &&
		       dlh_mono() < until) {
			struct timespec ts = { 0, 200000000L };
			nanosleep(&ts, NULL);
		}
	}
	copy_output(job_dir);
	forget(job_dir);
	return 0;
}

static int slurm_failed_rank(const struct dlh_backend *be, const char *log, int *code)
{
	(void)be;
	return dlh_mpirun_failed_rank(log, code);
}

static int slurm_describe(const struct dlh_backend *be, const struct dlh_launch *l,
			  struct dlh_buf *out)
{
	char *argv[DLH_LAUNCH_ARGV_MAX], *sb[64];
	char *store = malloc(DLH_ARGV_STORE), *store2 = malloc(DLH_ARGV_STORE);
	int n, m, rc = 0, nodes, per_node;
	if (!store || !store2) {
		free(store);
		free(store2);
		return -ENOMEM;
	}
	n = slurm_argv(be, l, argv, DLH_LAUNCH_ARGV_MAX, store, DLH_ARGV_STORE);
	m = sbatch_argv(be, l, sb, sizeof sb / sizeof sb[0], store2, DLH_ARGV_STORE);
	if (n < 0 || m < 0) {
		free(store);
		free(store2);
		return -E2BIG;
	}
	shape(l, &nodes, &per_node);
	rc |= dlh_buf_printf(out, "launch %s: %d ranks on %d node%s (%d a node at most) of partition "
			     "%s, submitted with sbatch as the job's owner; the batch job runs %s "
			     "(%s in the job dir), which runs %s over the allocation\n", SLURM_NAME,
			     l->ranks, nodes, nodes == 1 ? "" : "s", per_node,
			     be->partition[0] ? be->partition : "(Slurm's default)", be->shepherd,
			     SLURM_ARGV, be->launcher);
	long minutes = time_minutes(l);
	if (minutes > 0)
		rc |= dlh_buf_printf(out, "time_limit %ld min: %s\n", minutes,
				     l->est_s > 0 && (l->time_limit <= 0 ||
						      l->est_s * SLURM_TIME_MARGIN + SLURM_TIME_EXTRA <= l->time_limit) ?
				     "the estimate x 1.25 + 2 min" : "the spec's time_limit");
	rc |= dlh_buf_printf(out, "sbatch");
	for (int i = 0; i < m; i++)
		rc |= dlh_buf_printf(out, " %s", sb[i]);
	rc |= dlh_buf_printf(out, "\nenv");
	for (int i = 0; l->env && l->env[i]; i++)
		if (strncmp(l->env[i], "DLH_", 4))   /* the contract's DLH_* are per job */
			rc |= dlh_buf_printf(out, " %s", l->env[i]);
	rc |= dlh_buf_printf(out, "\nargv");
	for (int i = 0; i < n; i++)
		rc |= dlh_buf_printf(out, " %s", argv[i]);
	rc |= dlh_buf_printf(out, "\n");
	free(store);
	free(store2);
	return rc ? -ENOMEM : 0;
}

/* Slurm's word on the job of job_dir as wait() last recorded it
 * (SLURM_STATE): its job id, state and reason. Returns 0, or -errno (none
 * recorded). Reads the job dir only. */
static int read_state(const char *job_dir, char *job, size_t joblen, char *state, size_t statelen,
		      char *reason, size_t reasonlen)
{
	char path[4200], *text = NULL;
	job_file(job_dir, SLURM_STATE, path, sizeof path);
	int rc = dlh_read_file_nofollow(path, 4096, &text, NULL);
	if (rc)
		return rc;
	if (dlh_kv_get(text, "state", state, statelen) || dlh_kv_get(text, "job", job, joblen))
		rc = -EINVAL;
	else if (dlh_kv_get(text, "reason", reason, reasonlen))
		reason[0] = '\0';
	free(text);
	return rc;
}

/* 1 when state is one Slurm holds a job waiting in. */
static int state_pending(const char *state)
{
	return !strcmp(state, "PENDING") || !strcmp(state, "REQUEUED");
}

static int slurm_note(const struct dlh_backend *be, const char *job_dir, char *out, size_t len)
{
	char state[32], reason[128], job[24];
	(void)be;
	out[0] = '\0';
	if (read_state(job_dir, job, sizeof job, state, sizeof state, reason, sizeof reason))
		return 0;
	if (state_pending(state))
		snprintf(out, len, "pending in Slurm (job %s): %s", job, reason[0] ? reason : "no reason given");
	else if (!strcmp(state, "CONFIGURING"))
		snprintf(out, len, "Slurm is starting its nodes (job %s)", job);
	else if (!strcmp(state, "SUSPENDED"))
		snprintf(out, len, "suspended by Slurm (job %s): %s", job, reason);
	return state_pending(state);
}

static int slurm_pending(const struct dlh_backend *be, const char *job_dir, struct dlh_run_pending *p)
{
	char path[4200], *text = NULL, v[64], state[32];
	(void)be;
	memset(p, 0, sizeof *p);
	p->start = INFINITY;
	p->priority = -1;
	if (read_state(job_dir, v, sizeof v, state, sizeof state, p->reason, sizeof p->reason) ||
	    !state_pending(state))
		return 0;
	p->job = atol(v);
	job_file(job_dir, SLURM_START, path, sizeof path);
	if (!dlh_read_file_nofollow(path, 4096, &text, NULL) && !dlh_kv_get(text, "job", v, sizeof v) &&
	    atol(v) == p->job) {
		if (!dlh_kv_get(text, "start", v, sizeof v) && strcmp(v, "unknown"))
			p->start = strtod(v, NULL);
		if (!dlh_kv_get(text, "priority", v, sizeof v))
			p->priority = atol(v);
	}
	free(text);
	return p->job > 0;
}

static int slurm_priority(const struct dlh_backend *be, const struct dlh_run *run, int prio,
			  const struct dlh_cred *cred, char *err, size_t errlen)
{
	char prog[600], job[40], nice[40], out[256], why[512];
	if (run->pid <= 0)
		return 0;
	slurm_cmd(be, "scontrol", prog, sizeof prog);
	snprintf(job, sizeof job, "jobid=%ld", (long)run->pid);
	snprintf(nice, sizeof nice, "nice=%d", -prio);   /* Slurm: a higher nice goes later */
	char *const argv[] = { prog, "update", job, nice, NULL };
	int rc = run_cmd(argv, NULL, cred, NULL, out, sizeof out, why, sizeof why);
	if (rc == 0)
		return 0;
	snprintf(err, errlen, "scontrol update %s %s%s%s: %s", job, nice, cred ? " as " : "",
		 cred ? cred->user : "", why[0] ? why : rc < 0 ? strerror(-rc) : "refused");
	return rc < 0 ? rc : -EPERM;
}

static int slurm_argv_op(const struct dlh_backend *be, const struct dlh_launch *l, char **out,
			 size_t max, char *store, size_t storelen)
{
	return slurm_argv(be, l, out, max, store, storelen);
}

static const struct dlh_backend_ops slurm_ops = {
	.argv = slurm_argv_op,
	.start = slurm_start,
	.signal = slurm_signal,
	.wait = slurm_wait,
	.state = slurm_state,
	.stop = slurm_stop,
	.failed_rank = slurm_failed_rank,
	.describe = slurm_describe,
	.note = slurm_note,
	.pending = slurm_pending,
	.priority = slurm_priority,
};

/* The directory on PATH (else the usual ones, only absolute ones) that
 * holds name into out. Returns 0, or -ENOENT. */
static int find_dir(const char *name, char *out, size_t len)
{
	if (dlh_find_on_path(name, 1, out, len))
		return -ENOENT;
	*strrchr(out, '/') = '\0';
	return 0;
}

int dlh_backend_slurm(struct dlh_backend *be, const char *path, const char *partition,
		      const char *account, char *err, size_t errlen)
{
	int rc = dlh_backend_local(be, path, err, errlen);   /* mpirun, as the local backend finds it */
	if (rc)
		return rc;
	be->name = SLURM_NAME;
	be->launcher_name = "mpirun";
	be->ops = &slurm_ops;
	be->keeps_limit = 1;   /* --time and --signal (sbatch_argv) */
	snprintf(be->partition, sizeof be->partition, "%s", partition ? partition : "");
	snprintf(be->account, sizeof be->account, "%s", account ? account : "");
	if (find_dir("sbatch", be->bin, sizeof be->bin)) {
		snprintf(err, errlen, "backend = slurm: sbatch not found on PATH (install slurm-client: "
			 "make deps)");
		return -ENOENT;
	}
	return 0;
}

int dlh_slurm_sinfo(const char *partition, const char *format, struct dlh_buf *out, char *err,
		    size_t errlen)
{
	char dir[512], prog[600], part[128], fmt[128];
	if (find_dir("sinfo", dir, sizeof dir)) {
		snprintf(err, errlen, "sinfo not found on PATH (install slurm-client: make deps)");
		return -ENOENT;
	}
	snprintf(prog, sizeof prog, "%s/sinfo", dir);
	snprintf(fmt, sizeof fmt, "--format=%s", format);
	char *argv[8] = { prog, "--noheader", "--Node", fmt, NULL };
	if (partition && partition[0]) {
		snprintf(part, sizeof part, "--partition=%s", partition);
		argv[4] = part;
		argv[5] = NULL;
	}
	char *text = malloc(SLURM_OUT_MAX);
	if (!text)
		return -ENOMEM;
	int rc = run_cmd(argv, NULL, NULL, NULL, text, SLURM_OUT_MAX, err, errlen);
	if (rc > 0) {
		if (!err[0])
			snprintf(err, errlen, "sinfo exited with status %d", rc);
		rc = -EIO;
	}
	if (!rc && dlh_buf_append(out, text, strlen(text)))
		rc = -ENOMEM;
	free(text);
	return rc;
}
