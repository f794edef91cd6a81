/* shepherd.c - dlh-shepherd: holds one run so that it outlives dlhfs
 *
 *   dlh-shepherd EXIT_FILE PROGRAM [ARGS...]
 *
 * The local backend starts this in the run's own session, as the run's
 * owner, instead of the launcher itself. It starts PROGRAM (mpirun) as its
 * child, passes the verbs' signals (DLH_SIG_CHECKPOINT, DLH_SIG_SUSPEND) on
 * to it, waits for it and writes how it ended to EXIT_FILE ("exit=N" or
 * "signal=N", atomically), then exits with the same status. dlhfs may die
 * and be mounted again meanwhile: the run goes on, and the new daemon reads
 * the exit file instead of a status it could not wait for.
 *
 * SIGTERM, SIGINT and SIGHUP reach the whole session (a terminate); the
 * shepherd lets them pass and stays to record how PROGRAM ended. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/contract/contract.h"

static volatile sig_atomic_t child_pid;

/* Passes a verb's signal on to the launcher. */
static void pass_on(int sig)
{
	int saved = errno;
	if (child_pid > 0)
		kill((pid_t)child_pid, sig);
	errno = saved;
}

/* SIGTERM and its kind: the session got it, the launcher too; stay. */
static void stay(int sig)
{
	(void)sig;
}

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

int main(int argc, char **argv)
{
	if (argc < 3 || argv[1][0] != '/' || argv[2][0] != '/') {
		fprintf(stderr, "usage: dlh-shepherd EXIT_FILE PROGRAM [ARGS...] (absolute paths)\n"
			"Started by dlhfs for each run: runs PROGRAM, passes it the checkpoint and\n"
			"suspend signals, and writes how it ended to EXIT_FILE.\n");
		return 2;
	}
	const char *exit_file = argv[1];
	unlink(exit_file);   /* a run's own file only */

	/* the verbs wait (blocked) until the launcher's pid is known */
	sigset_t verbs, old;
	sigemptyset(&verbs);
	sigaddset(&verbs, DLH_SIG_CHECKPOINT);
	sigaddset(&verbs, DLH_SIG_SUSPEND);
	sigprocmask(SIG_BLOCK, &verbs, &old);
	struct sigaction sa = { .sa_handler = pass_on };
	sigemptyset(&sa.sa_mask);
	sigaction(DLH_SIG_CHECKPOINT, &sa, NULL);
	sigaction(DLH_SIG_SUSPEND, &sa, NULL);
	sa.sa_handler = stay;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);

	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "dlh-shepherd: cannot fork: %s\n", strerror(errno));
		write_exit(exit_file, "exit=127\n");
		return 127;
	}
	if (pid == 0) {
		/* the launcher gets default dispositions (exec resets handlers)
		 * and the mask the shepherd was started with */
		sigprocmask(SIG_SETMASK, &old, NULL);
		execv(argv[2], argv + 2);
		fprintf(stderr, "dlh-shepherd: cannot execute \"%s\": %s\n", argv[2], strerror(errno));
		_exit(127);
	}
	child_pid = pid;
	sigprocmask(SIG_SETMASK, &old, NULL);

	int status = 0;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			fprintf(stderr, "dlh-shepherd: cannot wait for \"%s\": %s\n", argv[2],
				strerror(errno));
			return 127;
		}
	child_pid = 0;
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
