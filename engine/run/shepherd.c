/* shepherd.c - dlh-shepherd: holds one run so that it outlives dlhfs
 *
 *   dlh-shepherd [--ready FILE] EXIT_FILE PROGRAM [ARGS...]
 *
 * The local backend starts this in the run's own session, as the run's
 * owner, instead of the launcher itself. It starts PROGRAM (mpirun) as its
 * child, passes the verbs' signals (DLH_SIG_CHECKPOINT, DLH_SIG_SUSPEND) on
 * to it, waits for it and writes how it ended to EXIT_FILE ("exit=N" or
 * "signal=N", atomically), then exits with the same status. dlhfs may die
 * and be mounted again meanwhile: the run goes on, and the new daemon reads
 * the exit file instead of a status it could not wait for.
 *
 * Verbs are never lost: with --ready, a verb that comes before FILE exists
 * (the trainer's ranks make it once all of them take the signals) is held
 * and passed on when it appears; the backend starts the shepherd with the
 * signals blocked, so one sent at once waits for it too.
 *
 * Everything arrives as a blocked signal taken by sigtimedwait: the verbs,
 * SIGCHLD (the launcher ended), and SIGTERM, SIGINT, SIGHUP, which reach
 * the whole session (a terminate): the shepherd lets them pass and stays to
 * record how PROGRAM ended. */
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

#define HELD_POLL_NS 20000000L   /* looking for the ready file while a verb is held */

/* Writes text to path atomically (PATH.tmp, fsync, rename). Returns 0 or -1. */
static int write_exit(const char *path, const char *text)
{
	char tmp[4200];
	if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
		return -1;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	size_t len = strlen(text);
	int ok = write(fd, text, len) == (ssize_t)len && fsync(fd) == 0;
	ok &= close(fd) == 0;
	if (!ok || rename(tmp, path) < 0) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: dlh-shepherd [--ready FILE] EXIT_FILE PROGRAM [ARGS...] "
		"(absolute paths)\n"
		"Started by dlhfs for each run: runs PROGRAM, passes it the checkpoint and\n"
		"suspend signals (held until FILE exists), and writes how it ended to EXIT_FILE.\n");
	return 2;
}

/* Waits for the launcher pid, passing verbs on; returns its wait status. */
static int shepherd(pid_t pid, const char *ready, const sigset_t *taken)
{
	int held[2] = { 0, 0 };   /* verbs waiting for the ready file: checkpoint, suspend */
	for (;;) {
		int status;
		pid_t w = waitpid(pid, &status, WNOHANG);
		if (w == pid)
			return status;
		if (w < 0 && errno != EINTR) {
			fprintf(stderr, "dlh-shepherd: cannot wait for the launcher: %s\n",
				strerror(errno));
			return 127 << 8;
		}
		int is_ready = !ready || access(ready, F_OK) == 0;
		if (is_ready && (held[0] || held[1])) {
			if (held[0])
				kill(pid, DLH_SIG_CHECKPOINT);
			if (held[1])
				kill(pid, DLH_SIG_SUSPEND);
			held[0] = held[1] = 0;
		}
		struct timespec poll = { 0, HELD_POLL_NS };
		int sig = held[0] || held[1] ? sigtimedwait(taken, NULL, &poll) :
					       sigwaitinfo(taken, NULL);
		if (sig == DLH_SIG_CHECKPOINT || sig == DLH_SIG_SUSPEND) {
			if (!ready || access(ready, F_OK) == 0)
				kill(pid, sig);
			else
				held[sig == DLH_SIG_SUSPEND] = 1;
		}
		/* SIGCHLD: the loop reaps; SIGTERM and its kind: the session got it */
	}
}

int main(int argc, char **argv)
{
	const char *ready = NULL;
	int a = 1;
	if (argc > 2 && !strcmp(argv[1], "--ready")) {
		ready = argv[2];
		a = 3;
	}
	if (argc - a < 2 || argv[a][0] != '/' || argv[a + 1][0] != '/' || (ready && ready[0] != '/'))
		return usage();
	const char *exit_file = argv[a];
	unlink(exit_file);   /* a run's own file only */

	sigset_t taken, none;
	sigemptyset(&none);
	sigemptyset(&taken);
	sigaddset(&taken, DLH_SIG_CHECKPOINT);
	sigaddset(&taken, DLH_SIG_SUSPEND);
	sigaddset(&taken, SIGCHLD);
	sigaddset(&taken, SIGTERM);
	sigaddset(&taken, SIGINT);
	sigaddset(&taken, SIGHUP);
	sigprocmask(SIG_BLOCK, &taken, NULL);

	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "dlh-shepherd: cannot fork: %s\n", strerror(errno));
		write_exit(exit_file, "exit=127\n");
		return 127;
	}
	if (pid == 0) {
		/* the launcher takes every signal, as if started by itself */
		sigprocmask(SIG_SETMASK, &none, NULL);
		execv(argv[a + 1], argv + a + 1);
		fprintf(stderr, "dlh-shepherd: cannot execute \"%s\": %s\n", argv[a + 1],
			strerror(errno));
		_exit(127);
	}
	int status = shepherd(pid, ready, &taken);
	char text[64];
	int code;
	if (WIFEXITED(status)) {
		code = WEXITSTATUS(status);
		snprintf(text, sizeof text, "exit=%d\n", code);
	} else {
		code = 128 + WTERMSIG(status);
		snprintf(text, sizeof text, "signal=%d\n", WTERMSIG(status));
	}
	if (write_exit(exit_file, text) < 0)
		fprintf(stderr, "dlh-shepherd: cannot write \"%s\": %s\n", exit_file, strerror(errno));
	return code;
}
