/* shepherd.c - dlh-shepherd: holds one run so that it outlives dlhfs
 *
 *   dlh-shepherd [--ready FILE] [--ranks DIR] [--take-up JOB_DIR] EXIT_FILE PROGRAM [ARGS...]
 *   dlh-shepherd --argv-file FILE
 *
 * With --argv-file, the environment entries and the arguments come from
 * FILE: "NAME=VALUE" entries, an empty one, then the arguments above, each
 * ended by a NUL. A Slurm batch script starts it so (engine/run/slurm.c):
 * no value of a job's spec is ever on a command line a shell reads.
 *
 * The local backend starts this in the run's own session, as the run's
 * owner, instead of the launcher itself. It starts PROGRAM (mpirun) as its
 * child, passes the verbs' signals (DLH_SIG_CHECKPOINT, DLH_SIG_SUSPEND) on
 * to it, waits for it and writes how it ended to EXIT_FILE ("exit=N" or
 * "signal=N", atomically), then exits with the same status. dlhfs may die
 * and be mounted again meanwhile: the run goes on, and the new daemon reads
 * the exit file instead of a status it could not wait for.
 *
 * DLH_SIG_LIMIT (a scheduler's time limit is near: Slurm sends it to the
 * batch shell, which is this process) is passed on as DLH_SIG_SUSPEND, and
 * the exit file then also says "time_limit=1": how dlhfs tells a stop for
 * the limit from one it asked for.
 *
 * Verbs are never lost: with --ready, a verb that comes before FILE exists
 * (the trainer's ranks make it once all of them take the signals) is held
 * and passed on when it appears; the backend starts the shepherd with the
 * signals blocked, so one sent at once waits for it too.
 *
 * Rank output: with --ranks, PROGRAM's output (mpirun --tag-output:
 * "[JOB,R]<stdout>:TEXT") comes through a pipe; each line goes to the
 * shepherd's own output (the job's log) as "[rank R] TEXT" and to
 * DIR/rank.R as TEXT, a line of its stderr also to DIR/rank.R.err (where
 * dlhfs finds a failed program's last words). Lines of the launcher itself
 * pass as they are. mpirun tags what it reads from a rank, not lines: a
 * rank's line read in two pieces (a terminal's output often is) comes as
 * "[1,0]<stdout>:TEXT[1,0]<stdout>:\n", and another rank's piece may come
 * between. A rank's piece without its newline waits for the rest of its
 * line, which goes on as one line.
 *
 * Take-up of a requeued run: with --take-up, a [job] command's run that
 * its scheduler started again by itself (Slurm requeued the batch job, a
 * node having failed under it: SLURM_RESTART_COUNT > 0) takes up from its
 * newest checkpoint as a resume does (engine/run/resume.h): `latest`
 * points at it, metrics.csv is cut back to its step (to the header where
 * there is none) and PROGRAM gets DLH_RESUME_FROM and DLH_START_STEP for
 * it. The rerun itself finds them, before PROGRAM starts: nothing waits
 * for dlhfs, which may not even have seen the requeue yet. dlh-train finds
 * its own checkpoint and is started without it.
 *
 * Everything arrives through poll(2): the output pipe and a signalfd of
 * the verbs, SIGCHLD (the launcher ended) and SIGTERM, SIGINT, SIGHUP,
 * which reach the whole session (a terminate): the shepherd lets them pass
 * and stays to record how PROGRAM ended. */
#define _GNU_SOURCE   /* pipe2: close-on-exec from the start */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/contract/contract.h"
#include "engine/run/resume.h"
#include "engine/util/util.h"

#define HELD_POLL_MS 20          /* looking for the ready file while a verb is held */
#define LINE_MAX_BYTES 65536     /* a longer line is passed on in pieces */
#define RANK_FILES_MAX 4096      /* ranks with a file of their own */
#define ENDED_WAIT_MS 1000       /* output still coming after the launcher ended */
#define BEGUN_MAX 64             /* ranks' lines begun and not yet ended */
#define BEGUN_BYTES 4096         /* a longer begun line is passed on in pieces */

/* Writes text to path atomically (engine/util). Returns 0, or -errno. */
static int write_exit(const char *path, const char *text)
{
	return dlh_write_atomic(path, text, strlen(text));
}

static int usage(void)
{
	fprintf(stderr, "usage: dlh-shepherd [--ready FILE] [--ranks DIR] [--take-up JOB_DIR] EXIT_FILE\n"
		"                    PROGRAM [ARGS...]\n"
		"       dlh-shepherd --argv-file FILE   (environment and arguments from FILE)\n"
		"(absolute paths). Started by dlhfs for each run: runs PROGRAM, passes it the\n"
		"checkpoint and suspend signals (held until FILE exists), sorts its tagged output\n"
		"by rank (DIR/rank.R) and writes how it ended to EXIT_FILE.\n");
	return 2;
}

/* Writes all of buf to fd (retrying short writes). */
static void put(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		buf += n;
		len -= (size_t)n;
	}
}

/* A rank's line begun in one piece of mpirun's output, its end to come. */
struct begun {
	long r;                      /* -1: free */
	int err;                     /* of its stderr */
	size_t len;
	char text[BEGUN_BYTES];
};

/* Where the ranks' lines go. */
struct ranks_out {
	const char *dir;             /* DIR/rank.R; NULL = no sorting */
	int fd[2][RANK_FILES_MAX];   /* open rank files (rank.R, rank.R.err), 0 = not yet,
					-1 = cannot */
	char line[LINE_MAX_BYTES];   /* the line being gathered */
	size_t len;
	struct begun begun[BEGUN_MAX];
	int nbegun;                  /* entries of begun in use or used (r = -1: free) */
	int cont;                    /* the line before was cut: its last piece goes on */
	long cont_job, cont_r;       /* that piece's job, rank */
	int cont_err;                /* and stream */
	char out[BEGUN_BYTES + LINE_MAX_BYTES + 64];   /* one line as it is written */
};

/* The file of rank r (err: its stderr file), opened on first use, or -1. */
static int rank_file(struct ranks_out *o, long r, int err)
{
	if (r < 0 || r >= RANK_FILES_MAX)
		return -1;
	int *fd = &o->fd[err][r];
	if (*fd == 0) {
		char path[4200];
		snprintf(path, sizeof path, "%s/rank.%ld%s", o->dir, r, err ? ".err" : "");
		*fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (*fd == 0)   /* never: 0 is the run's stdin */
			*fd = -1;
	}
	return *fd;
}

/* Reads the decimal number at s (before end) into *v: the byte after it,
 * or NULL when there is none. */
static const char *number_at(const char *s, const char *end, long *v)
{
	const char *d = s;
	long n = 0;
	while (d < end && *d >= '0' && *d <= '9' && d - s < 9)
		n = n * 10 + (*d++ - '0');
	*v = n;
	return d > s ? d : NULL;
}

/* Parses the tag "[JOB,R]<stdout>:" or "<stderr>:" at s, within len bytes:
 * returns its length with *job, *r, *err set, or 0. */
static size_t tag_at(const char *s, size_t len, long *job, long *r, int *err)
{
	const char *end = s + len, *p = s;
	if (p >= end || *p++ != '[' || !(p = number_at(p, end, job)) || p >= end || *p++ != ',' ||
	    !(p = number_at(p, end, r)) || p >= end || *p++ != ']' || end - p < 9)
		return 0;
	if (!memcmp(p, "<stdout>:", 9))
		*err = 0;
	else if (!memcmp(p, "<stderr>:", 9))
		*err = 1;
	else
		return 0;
	return (size_t)(p + 9 - s);
}

/* Rank r's line: what it began earlier, then text (len bytes), a newline
 * added where it has none (a piece of a long line), as "[rank R] LINE" to
 * the log and LINE to its files, each in one write. */
static void put_rank_line(struct ranks_out *o, long r, int err, const char *begun,
			  size_t blen, const char *text, size_t len)
{
	int n = snprintf(o->out, sizeof o->out, "[rank %ld] ", r);
	size_t tag = n > 0 ? (size_t)n : 0, at = tag;
	memcpy(o->out + at, begun, blen);
	at += blen;
	memcpy(o->out + at, text, len);
	at += len;
	if (at == tag || o->out[at - 1] != '\n')
		o->out[at++] = '\n';
	put(STDOUT_FILENO, o->out, at);
	for (int e = 0; e <= err; e++) {
		int fd = rank_file(o, r, e);
		if (fd > 0)
			put(fd, o->out + tag, at - tag);
	}
}

/* One piece of rank r's output (len bytes, at most LINE_MAX_BYTES): a
 * line's end (it ends in '\n'), or a part kept until its end comes. */
static void rank_piece(struct ranks_out *o, long r, int err, const char *text, size_t len)
{
	struct begun *b = NULL, *free_b = NULL;
	for (int i = 0; i < o->nbegun && !b; i++) {
		if (o->begun[i].r == r && o->begun[i].err == err)
			b = &o->begun[i];
		else if (o->begun[i].r < 0 && !free_b)
			free_b = &o->begun[i];
	}
	size_t had = b ? b->len : 0;
	int ended = len > 0 && text[len - 1] == '\n';
	if (ended || had + len > BEGUN_BYTES || (!b && !free_b && o->nbegun == BEGUN_MAX)) {
		/* ended; or too long, or too many begun at once: on as it is */
		put_rank_line(o, r, err, b ? b->text : "", had, text, len);
		if (b)
			b->r = -1;
		return;
	}
	if (!b) {   /* a free entry, else a new one */
		b = free_b ? free_b : &o->begun[o->nbegun++];
		b->r = r;
		b->err = err;
		b->len = 0;
	}
	memcpy(b->text + b->len, text, len);
	b->len += len;
}

/* Passes one line of mpirun's output (len bytes, its newline included or
 * not) on: its tagged pieces to their ranks, a line of the launcher's own
 * as it is. A line longer than o->line comes in parts: a part that does
 * not begin with a tag goes on the last piece of the part before. */
static void pass_line(struct ranks_out *o, const char *s, size_t len)
{
	long job, r, job2, r2;
	int err, err2;
	size_t at = tag_at(s, len, &job, &r, &err);
	if (!at && o->cont) {   /* the rest of a piece cut with its line */
		job = o->cont_job;
		r = o->cont_r;
		err = o->cont_err;
	} else if (!at) {
		put(STDOUT_FILENO, s, len);
		o->cont = 0;
		return;
	}
	for (;;) {
		/* this piece runs to the next tag of the same job, or to the end */
		size_t end = at, next = 0;
		for (; end < len; end++)
			if (s[end] == '[' && (next = tag_at(s + end, len - end, &job2, &r2, &err2)) &&
			    job2 == job)
				break;
		if (end > at)   /* a tag with nothing after it: nothing to pass */
			rank_piece(o, r, err, s + at, end - at);
		if (end >= len)
			break;
		r = r2;
		err = err2;
		s += end;
		len -= end;
		at = next;
	}
	/* cut, not ended: the next part goes on this piece */
	o->cont = len > 0 && s[len - 1] != '\n';
	o->cont_job = job;
	o->cont_r = r;
	o->cont_err = err;
}

/* At the end: lines begun and never ended go on as they are. */
static void pass_begun(struct ranks_out *o)
{
	for (int i = 0; i < o->nbegun; i++)
		if (o->begun[i].r >= 0) {
			put_rank_line(o, o->begun[i].r, o->begun[i].err, o->begun[i].text,
				      o->begun[i].len, "", 0);
			o->begun[i].r = -1;
		}
}

/* Reads what the pipe has; passes whole lines on. Returns 0 at end of file. */
static int drain(struct ranks_out *o, int fd)
{
	char buf[16384];
	ssize_t n = read(fd, buf, sizeof buf);
	if (n < 0)
		return errno == EINTR || errno == EAGAIN ? 1 : 0;
	if (n == 0) {   /* the rest, without its newline */
		if (o->len)
			pass_line(o, o->line, o->len);
		o->len = 0;
		pass_begun(o);
		return 0;
	}
	for (ssize_t i = 0; i < n; i++) {
		o->line[o->len++] = buf[i];
		if (buf[i] == '\n' || o->len == sizeof o->line) {
			pass_line(o, o->line, o->len);
			o->len = 0;
		}
	}
	return 1;
}

/* Waits for the launcher pid, passing verbs and output on; returns its
 * wait status, and sets *limit when DLH_SIG_LIMIT came. */
static int shepherd(pid_t pid, const char *ready, int sfd, int out, struct ranks_out *o,
		    int *limit)
{
	int held[2] = { 0, 0 };   /* verbs waiting for the ready file: checkpoint, suspend */
	int status = 0, ended = 0;
	while (!ended || out >= 0) {
		if (!ended) {
			pid_t w = waitpid(pid, &status, WNOHANG);
			if (w == pid)
				ended = 1;
			else if (w < 0 && errno != EINTR) {
				fprintf(stderr, "dlh-shepherd: cannot wait for the launcher: %s\n",
					strerror(errno));
				return 127 << 8;
			}
		}
		int is_ready = !ready || access(ready, F_OK) == 0;
		if (!ended && is_ready && (held[0] || held[1])) {
			if (held[0])
				kill(pid, DLH_SIG_CHECKPOINT);
			if (held[1])
				kill(pid, DLH_SIG_SUSPEND);
			held[0] = held[1] = 0;
		}
		if (ended && out < 0)
			break;
		struct pollfd p[2] = { { .fd = sfd, .events = POLLIN }, { .fd = out, .events = POLLIN } };
		/* once the launcher has ended, what it left in the pipe, then no more
		 * than a moment for a process of its that still holds the pipe */
		int wait_ms = ended ? ENDED_WAIT_MS : held[0] || held[1] ? HELD_POLL_MS : -1;
		int rc = poll(p, out >= 0 ? 2 : 1, wait_ms);
		if (rc < 0 && errno != EINTR)
			return 127 << 8;
		if (rc == 0 && ended)
			break;
		if (rc > 0 && p[0].revents) {
			struct signalfd_siginfo si;
			int got = read(sfd, &si, sizeof si) == (ssize_t)sizeof si ? (int)si.ssi_signo : 0;
			if (got == DLH_SIG_LIMIT) {   /* the scheduler's limit: as a suspend */
				*limit = 1;
				got = DLH_SIG_SUSPEND;
			}
			if (got == DLH_SIG_CHECKPOINT || got == DLH_SIG_SUSPEND) {
				if (!ready || access(ready, F_OK) == 0)
					kill(pid, got);
				else
					held[got == DLH_SIG_SUSPEND] = 1;
			}
			/* SIGCHLD: the loop reaps; SIGTERM and its kind: the session got it */
		}
		if (rc > 0 && out >= 0 && p[1].revents && !drain(o, out)) {
			close(out);
			out = -1;
		}
	}
	/* what came and was not passed on yet: a line without its end, lines
	 * begun (the pipe may still be held open, or have failed) */
	if (o->len)
		pass_line(o, o->line, o->len);
	o->len = 0;
	pass_begun(o);
	return status;
}

#define ARGV_FILE_MAX (256 * 1024)   /* the largest --argv-file read */

/* --take-up job_dir: where a [job] command's run that Slurm requeued
 * (SLURM_RESTART_COUNT > 0) takes up, into this process's environment for
 * PROGRAM, with metrics.csv cut back to it (see the top). Says what it did
 * on stdout (the job's log). A first start changes nothing: dlhfs told it
 * already. */
static void take_up(const char *job_dir)
{
	static char resume[4400], start[64];
	char path[4300], csv[4200], why[300];
	const char *restarts = getenv("SLURM_RESTART_COUNT");
	long step = 0;
	if (!restarts || atol(restarts) <= 0)
		return;
	int found = !eng_take_up(job_dir, getuid(), getgid(), path, sizeof path, &step, why,
				 sizeof why);
	if (!found) {   /* it starts again: none of its rows stay */
		snprintf(csv, sizeof csv, "%s/" DLH_FILE_METRICS, job_dir);
		int rc = eng_metrics_keep(csv, 0);
		if (rc)
			snprintf(why, sizeof why, "cannot cut %s back to step 0: %s", DLH_FILE_METRICS,
				 strerror(-rc));
	}
	if (why[0])
		printf("dlh-shepherd: %s\n", why);
	if (!found) {
		unsetenv(DLH_ENV_RESUME_FROM);
		unsetenv(DLH_ENV_START_STEP);
		printf("dlh-shepherd: Slurm requeued the batch job (restart %ld): no checkpoint, its "
		       "command starts again\n", atol(restarts));
		fflush(stdout);
		return;
	}
	for (char *c = path; *c; c++)   /* the owner named it: no line of its own in the log */
		if (*c == '\n' || *c == '\r')
			*c = '?';
	snprintf(resume, sizeof resume, DLH_ENV_RESUME_FROM "=%s", path);
	snprintf(start, sizeof start, DLH_ENV_START_STEP "=%ld", step);
	putenv(resume);
	putenv(start);
	printf("dlh-shepherd: Slurm requeued the batch job (restart %ld): its command takes up from "
	       "%s, step %ld (" DLH_ENV_RESUME_FROM ", " DLH_ENV_START_STEP ")\n", atol(restarts),
	       path, step);
	fflush(stdout);
}

/* What --argv-file gave: kept for the process's life (the environment and
 * argv point into it), reachable to the end (volatile: a store the compiler
 * may not drop, so that LeakSanitizer sees them held). */
static char *volatile file_text;
static char **volatile file_argv;

/* Reads --argv-file path: puts its environment entries into this process's
 * environment and makes *argv (name first, then its arguments, NULL-ended;
 * the file's text stays allocated for them) and *argc. Returns 0, or -1
 * after saying why on stderr. */
static int argv_from_file(const char *path, char *name, int *argc, char ***argv)
{
	char *text = NULL;
	size_t len = 0;
	int rc = dlh_read_file(path, ARGV_FILE_MAX, &text, &len);
	file_text = text;
	if (rc || !len || text[len - 1] != '\0') {
		fprintf(stderr, "dlh-shepherd: cannot read \"%s\": %s\n", path,
			rc ? strerror(-rc) : "not NUL-ended entries");
		free(text);
		file_text = NULL;
		return -1;
	}
	size_t at = 0;
	while (at < len && text[at]) {   /* the environment, up to the empty entry */
		if (!strchr(text + at, '=') || putenv(text + at)) {
			fprintf(stderr, "dlh-shepherd: \"%s\": a bad environment entry\n", path);
			return -1;   /* text is the environment's now */
		}
		at += strlen(text + at) + 1;
	}
	at++;
	int n = 0;
	for (size_t i = at; i < len; i += strlen(text + i) + 1)
		n++;
	char **v = calloc((size_t)n + 2, sizeof *v);
	if (!v) {
		fprintf(stderr, "dlh-shepherd: out of memory\n");
		return -1;
	}
	file_argv = v;
	v[0] = name;
	n = 1;
	for (size_t i = at; i < len; i += strlen(text + i) + 1)
		v[n++] = text + i;
	*argc = n;
	*argv = v;
	return 0;
}

int main(int argc, char **argv)
{
	static struct ranks_out o;
	const char *ready = NULL, *take_up_dir = NULL;
	int a = 1;
	if (argc == 3 && !strcmp(argv[1], "--argv-file") &&
	    argv_from_file(argv[2], argv[0], &argc, &argv))
		return 127;
	while (argc - a > 1 && (!strcmp(argv[a], "--ready") || !strcmp(argv[a], "--ranks") ||
				!strcmp(argv[a], "--take-up"))) {
		if (!strcmp(argv[a], "--ready"))
			ready = argv[a + 1];
		else if (!strcmp(argv[a], "--ranks"))
			o.dir = argv[a + 1];
		else
			take_up_dir = argv[a + 1];
		a += 2;
	}
	if (argc - a < 2 || argv[a][0] != '/' || argv[a + 1][0] != '/' ||
	    (ready && ready[0] != '/') || (o.dir && o.dir[0] != '/') ||
	    (take_up_dir && take_up_dir[0] != '/'))
		return usage();
	if (take_up_dir)
		take_up(take_up_dir);
	const char *exit_file = argv[a];
	unlink(exit_file);   /* a run's own file only */

	sigset_t taken, none;
	sigemptyset(&none);
	sigemptyset(&taken);
	sigaddset(&taken, DLH_SIG_CHECKPOINT);
	sigaddset(&taken, DLH_SIG_SUSPEND);
	sigaddset(&taken, DLH_SIG_LIMIT);
	sigaddset(&taken, SIGCHLD);
	sigaddset(&taken, SIGTERM);
	sigaddset(&taken, SIGINT);
	sigaddset(&taken, SIGHUP);
	sigprocmask(SIG_BLOCK, &taken, NULL);
	int sfd = signalfd(-1, &taken, SFD_CLOEXEC);
	int pipefd[2] = { -1, -1 };
	if (o.dir && (mkdir(o.dir, 0755) == 0 || errno == EEXIST) &&
	    pipe2(pipefd, O_CLOEXEC) < 0) {
		fprintf(stderr, "dlh-shepherd: cannot sort the output by rank: %s\n", strerror(errno));
		pipefd[0] = pipefd[1] = -1;
	}
	if (sfd < 0) {
		fprintf(stderr, "dlh-shepherd: cannot take signals: %s\n", strerror(errno));
		write_exit(exit_file, "exit=127\n");
		return 127;
	}

	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "dlh-shepherd: cannot fork: %s\n", strerror(errno));
		write_exit(exit_file, "exit=127\n");
		return 127;
	}
	if (pid == 0) {
		/* the launcher takes every signal, as if started by itself */
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (pipefd[1] >= 0 && (dup2(pipefd[1], STDOUT_FILENO) < 0 ||
				       dup2(pipefd[1], STDERR_FILENO) < 0))
			_exit(127);
		execv(argv[a + 1], argv + a + 1);
		fprintf(stderr, "dlh-shepherd: cannot execute \"%s\": %s\n", argv[a + 1],
			strerror(errno));
		_exit(127);
	}
	if (pipefd[1] >= 0)
		close(pipefd[1]);
	int limit = 0;
	int status = shepherd(pid, ready, sfd, pipefd[0], &o, &limit);
	char text[200];
	int code;
	if (WIFEXITED(status)) {
		code = WEXITSTATUS(status);
		snprintf(text, sizeof text, "exit=%d\n", code);
	} else {
		code = 128 + WTERMSIG(status);
		snprintf(text, sizeof text, "signal=%d\n", WTERMSIG(status));
	}
	/* what the launcher and every process it reaped (the ranks of this
	 * node) used: the job's CPU time and largest resident set */
	struct rusage ru;
	if (!getrusage(RUSAGE_CHILDREN, &ru)) {
		size_t l = strlen(text);
		snprintf(text + l, sizeof text - l, "cpu_s=%.3f\nmax_rss_kb=%ld\n",
			 (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
			 (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec, ru.ru_maxrss);
	}
	if (limit) {
		size_t l = strlen(text);
		snprintf(text + l, sizeof text - l, "time_limit=1\n");
	}
	/* which of Slurm's runs of the batch job this was: a requeue's word on
	 * the run before is told apart from the rerun's own (slurm.c) */
	const char *restart = getenv("SLURM_RESTART_COUNT");
	if (restart && restart[0] && strspn(restart, "0123456789") == strlen(restart) &&
	    strlen(restart) < 10) {
		size_t l = strlen(text);
		snprintf(text + l, sizeof text - l, "slurm_restart=%s\n", restart);
	}
	int rc = write_exit(exit_file, text);
	if (rc < 0)
		fprintf(stderr, "dlh-shepherd: cannot write \"%s\": %s\n", exit_file, strerror(-rc));
	return code;
}
