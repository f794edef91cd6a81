/* launch.c - starting a plan's argv in its own session, output to the log */
#define _GNU_SOURCE   /* pipe2: close-on-exec from the start */
#include "engine/run/launch.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/contract/contract.h"
#include "engine/util/util.h"

extern char **environ;

/* Builds the child's environment before fork: the child may only call
 * async-signal-safe functions, so no malloc there. */
/* What of the daemon's environment a run as another user keeps: where the
 * launcher, its libraries and the GPU libraries are, where Slurm's
 * configuration is (SLURM_CONF: sbatch and the batch job find the cluster
 * by it), the locale and the time zone, the sanitizers' settings. Everything else (the daemon's
 * secrets, its HOME) stays with the daemon. */
static const char *const kept_for_users[] = {
	"LANG=", "LC_", "TZ=", "TMPDIR=", "LD_LIBRARY_PATH=", "OPAL_PREFIX=", "PMIX_",
	"OMPI_MCA_", "NCCL_", "CUDA_", "DLH_TRAIN_CUDA=", "ASAN_OPTIONS=", "UBSAN_OPTIONS=",
	"LSAN_OPTIONS=", "OPENBLAS_", "OMP_", "SLURM_CONF=", NULL,
};

int dlh_launch_kept(const char *kv)
{
	for (int i = 0; kept_for_users[i]; i++)
		if (!strncmp(kv, kept_for_users[i], strlen(kept_for_users[i])))
			return 1;
	return 0;
}

#define LAUNCH_PATH "PATH=/usr/local/bin:/usr/bin:/bin"   /* a user's run, when extra has none */

char **dlh_launch_env(char *const extra[], int for_user)
{
	size_t n = 0, m = 0;
	while (environ[n])
		n++;
	while (extra && extra[m])
		m++;
	char **env = calloc(n + m + 2, sizeof *env);
	if (!env)
		return NULL;
	size_t k = 0;
	if (for_user)
		env[k++] = LAUNCH_PATH;
	for (size_t i = 0; i < n; i++) {
		if (for_user && !dlh_launch_kept(environ[i]))
			continue;
		size_t name = strcspn(environ[i], "=");
		int replaced = 0;
		for (size_t j = 0; j < m && !replaced; j++)
			replaced = !strncmp(environ[i], extra[j], name) && extra[j][name] == '=';
		if (!replaced)
			env[k++] = environ[i];
	}
	for (size_t j = 0; j < m; j++) {
		if (for_user && !strncmp(extra[j], "PATH=", 5))
			env[0] = extra[j];   /* the caller's PATH over the default */
		else
			env[k++] = extra[j];
	}
	env[k] = NULL;
	return env;
}

int dlh_launch(char *const argv[], char *const extra[], const char *log_path, pid_t *pid)
{
	return dlh_launch_in(argv, extra, log_path, NULL, pid);
}

/* Writes the calling process's pid in decimal to fd, async-signal-safely.
 * Returns 0, or errno. */
static int write_own_pid(int fd)
{
	char rev[24], text[24];
	long v = (long)getpid();
	int n = 0, m = 0;
	do {
		rev[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v && n < (int)sizeof rev);
	while (n)
		text[m++] = rev[--n];
	return write(fd, text, (size_t)m) == (ssize_t)m ? 0 : errno ? errno : EIO;
}

int dlh_launch_in(char *const argv[], char *const extra[], const char *log_path,
		  const int *join, pid_t *pid)
{
	return dlh_launch_as(argv, extra, log_path, join, NULL, NULL, pid);
}

#define LAUNCH_EXTRA_MAX 128   /* extra environment entries with the user's own */

static int launch(char *const argv[], char *const extra[], const char *log_path,
		  const int *join, const struct dlh_cred *cred, const char *dir, int hold, pid_t *pid);

int dlh_launch_as(char *const argv[], char *const extra[], const char *log_path,
		  const int *join, const struct dlh_cred *cred, const char *dir, pid_t *pid)
{
	return launch(argv, extra, log_path, join, cred, dir, 0, pid);
}

int dlh_launch_holding(char *const argv[], char *const extra[], const char *log_path,
		       const int *join, const struct dlh_cred *cred, const char *dir, pid_t *pid)
{
	return launch(argv, extra, log_path, join, cred, dir, 1, pid);
}

static int launch(char *const argv[], char *const extra[], const char *log_path,
		  const int *join, const struct dlh_cred *cred, const char *dir, int hold, pid_t *pid)
{
	/* the user's HOME, USER, LOGNAME after (and so over) the caller's */
	char *more[LAUNCH_EXTRA_MAX + 4], home[600], user[80], logname[80];
	size_t m = 0;
	for (; extra && extra[m] && m < LAUNCH_EXTRA_MAX; m++)
		more[m] = extra[m];
	if (extra && extra[m])
		return -E2BIG;
	if (cred) {
		snprintf(home, sizeof home, "HOME=%s", cred->home);
		snprintf(user, sizeof user, "USER=%s", cred->user);
		snprintf(logname, sizeof logname, "LOGNAME=%s", cred->user);
		more[m++] = home;
		more[m++] = user;
		more[m++] = logname;
	}
	more[m] = NULL;
	/* the log: a regular file of one name, never through a link */
	int logfd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK |
			 O_CLOEXEC, 0644);
	if (logfd < 0)
		return -errno;
	struct stat lst;
	if (fstat(logfd, &lst) < 0 || !S_ISREG(lst.st_mode) || lst.st_nlink != 1) {
		close(logfd);
		return -EPERM;
	}
	int nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	int status[2] = { -1, -1 };
	char **env = dlh_launch_env(more, cred != NULL);
	int e = 0;
	/* close-on-exec from the start: other threads fork too (the probes) */
	if (nullfd < 0 || pipe2(status, O_CLOEXEC))
		e = -errno;
	else if (!env)
		e = -ENOMEM;
	pid_t child = e ? -1 : fork();
	if (child == 0) {
		/* async-signal-safe calls only from here to execve */
		sigset_t mask;
		sigemptyset(&mask);
		if (hold) {
			sigaddset(&mask, DLH_SIG_CHECKPOINT);
			sigaddset(&mask, DLH_SIG_SUSPEND);
		}
		sigprocmask(SIG_SETMASK, &mask, NULL); /* FUSE threads block some */
		struct sigaction dfl = { .sa_handler = SIG_DFL };
		sigaction(SIGPIPE, &dfl, NULL);        /* libfuse ignores it */
		setsid();
		int err = 0;
		for (int i = 0; join && join[i] >= 0 && !err; i++)
			err = write_own_pid(join[i]);
		/* for good: groups, then the group, then the user */
		if (!err && cred &&
		    (setgroups((size_t)cred->ngroups, cred->groups) < 0 || setgid(cred->gid) < 0 ||
		     setuid(cred->uid) < 0))
			err = errno;
		if (!err && dir && chdir(dir) < 0)   /* as the user: their rights */
			err = errno;
		if (err)
			;
		else if (dlh_fd_onto(nullfd, 0) < 0 || dlh_fd_onto(logfd, 1) < 0 ||
			 dup2(logfd, 2) < 0)
			err = errno;
		else {
			execve(argv[0], argv, env);
			err = errno;
		}
		/* the pipe closes on a successful exec; on failure it carries errno */
		ssize_t w = write(status[1], &err, sizeof err);
		(void)w;
		_exit(127);
	}
	if (child < 0 && !e)
		e = -errno;
	if (child > 0) {
		/* wait for the exec (or its failure): the child is in its own
		 * session from here on, so a cancel can always find it */
		close(status[1]);
		status[1] = -1;
		int err = 0;
		ssize_t n;
		while ((n = read(status[0], &err, sizeof err)) < 0 && errno == EINTR)
			;
		if (n == (ssize_t)sizeof err) {
			while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
				;
			e = -err;
		}
	}
	free(env);
	close(logfd);
	if (nullfd >= 0)
		close(nullfd);
	if (status[0] >= 0)
		close(status[0]);
	if (status[1] >= 0)
		close(status[1]);
	if (e)
		return e;
	*pid = child;
	return 0;
}

/* Reads the child's stdout into out and stderr into err (each NUL-ended,
 * cut at its size) until both end or timeout passes. Returns 0, or
 * -ETIMEDOUT. */
int dlh_launch_gather(int fds[2], char *out, size_t outlen, char *err, size_t errlen, double timeout)
{
	size_t used[2] = { 0, 0 }, cap[2] = { outlen, errlen };
	char *buf[2] = { out, err };
	double until = dlh_mono() + timeout;
	out[0] = err[0] = '\0';
	while (fds[0] >= 0 || fds[1] >= 0) {
		double left = until - dlh_mono();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd p[2] = { { .fd = fds[0], .events = POLLIN }, { .fd = fds[1], .events = POLLIN } };
		int rc = poll(p, 2, (int)(left * 1000) + 1);
		if (rc < 0 && errno != EINTR)
			return -errno;
		for (int i = 0; i < 2 && rc > 0; i++) {
			if (fds[i] < 0 || !p[i].revents)
				continue;
			char tmp[4096];
			ssize_t n = read(fds[i], tmp, sizeof tmp);
			if (n <= 0) {
				close(fds[i]);
				fds[i] = -1;
				continue;
			}
			size_t take = (size_t)n < cap[i] - 1 - used[i] ? (size_t)n : cap[i] - 1 - used[i];
			memcpy(buf[i] + used[i], tmp, take);
			used[i] += take;
			buf[i][used[i]] = '\0';
		}
	}
	return 0;
}

/* Appends word to out (after a blank), single-quoted. Returns 0 or -1. */
int dlh_shell_quote(char *out, size_t len, const char *word)
{
	size_t n = strlen(out);
	if (n + 4 >= len)
		return -1;
	if (n)
		out[n++] = ' ';
	out[n++] = '\'';
	for (const char *c = word; *c; c++) {
		const char *piece = *c == '\'' ? "'\\''" : NULL;
		size_t pl = piece ? 4 : 1;
		if (n + pl + 2 >= len)
			return -1;
		if (piece)
			memcpy(out + n, piece, pl);
		else
			out[n] = *c;
		n += pl;
	}
	out[n++] = '\'';
	out[n] = '\0';
	return 0;
}

/* Appends s to out[*n], copied into store. Returns 0, or -E2BIG. */
int dlh_argv_put(char **out, size_t max, int *n, char *store, size_t storelen, size_t *used,
	       const char *s)
{
	size_t l = strlen(s) + 1;
	if ((size_t)*n + 1 >= max || *used + l > storelen)
		return -E2BIG;
	memcpy(store + *used, s, l);
	out[(*n)++] = store + *used;
	out[*n] = NULL;
	*used += l;
	return 0;
}

int dlh_find_on_path(const char *name, int absolute, char *out, size_t len)
{
	const char *path = getenv("PATH");
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		size_t n = strcspn(path, ":");
		snprintf(out, len, "%.*s/%s", (int)n, path, name);
		if (n && (!absolute || path[0] == '/') && access(out, X_OK) == 0)
			return 0;
		path += n + (path[n] == ':');
	}
	return -ENOENT;
}
