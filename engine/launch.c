/* launch.c - starting a plan's argv in its own session, output to the log */
#include "engine/launch.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

/* Builds the child's environment before fork: the child may only call
 * async-signal-safe functions, so no malloc there. */
static char **build_env(char *const extra[])
{
	size_t n = 0, m = 0;
	while (environ[n])
		n++;
	while (extra && extra[m])
		m++;
	char **env = calloc(n + m + 1, sizeof *env);
	if (!env)
		return NULL;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		size_t name = strcspn(environ[i], "=");
		int replaced = 0;
		for (size_t j = 0; j < m && !replaced; j++)
			replaced = !strncmp(environ[i], extra[j], name) && extra[j][name] == '=';
		if (!replaced)
			env[k++] = environ[i];
	}
	for (size_t j = 0; j < m; j++)
		env[k++] = extra[j];
	env[k] = NULL;
	return env;
}

/* Writes s to fd, ignoring errors: used in the child after fork. */
static void child_say(int fd, const char *s)
{
	ssize_t rc = write(fd, s, strlen(s));
	(void)rc;
}

int dlh_launch(char *const argv[], char *const extra[], const char *log_path, pid_t *pid)
{
	int logfd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (logfd < 0)
		return -errno;
	int nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (nullfd < 0) {
		int e = -errno;
		close(logfd);
		return e;
	}
	char **env = build_env(extra);
	if (!env) {
		close(logfd);
		close(nullfd);
		return -ENOMEM;
	}
	pid_t child = fork();
	if (child == 0) {
		/* async-signal-safe calls only from here to execve */
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL); /* FUSE threads block some */
		struct sigaction dfl = { .sa_handler = SIG_DFL };
		sigaction(SIGPIPE, &dfl, NULL);        /* libfuse ignores it */
		setsid();
		if (dup2(nullfd, 0) < 0 || dup2(logfd, 1) < 0 || dup2(logfd, 2) < 0)
			_exit(127);
		execve(argv[0], argv, env);
		child_say(2, "dlhfs: cannot execute \"");
		child_say(2, argv[0]);
		child_say(2, "\": ");
		child_say(2, strerror(errno));
		child_say(2, "\n");
		_exit(127);
	}
	int e = child < 0 ? -errno : 0;
	free(env);
	close(logfd);
	close(nullfd);
	if (e)
		return e;
	*pid = child;
	return 0;
}
