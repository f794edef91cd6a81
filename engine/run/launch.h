/* launch.h - starting a plan's argv in its own session, output to the log */
#ifndef DLH_LAUNCH_H
#define DLH_LAUNCH_H

#include <sys/types.h>

#include "engine/run/owner.h"

/* Starts argv[0] (an absolute path) with argv, the daemon's environment
 * plus extra (NULL-terminated "K=V" strings, replacing same-named ones),
 * in a new session (so its pid is also the session id that finds every
 * rank), stdin from /dev/null, stdout and stderr appended to log_path.
 * No shell is involved. Returns once the program runs: 0 with *pid set,
 * or -errno (also when execve itself failed; the child is then reaped). */
int dlh_launch(char *const argv[], char *const extra[], const char *log_path, pid_t *pid);

/* dlh_launch, and before exec the child writes its pid to each descriptor
 * of join (cgroup.procs files, -1-terminated; NULL = none), so it and all it
 * starts run in those cgroups. A failed write fails the launch (-errno). */
int dlh_launch_in(char *const argv[], char *const extra[], const char *log_path,
		  const int *join, pid_t *pid);

/* dlh_launch_in, and then (cred not NULL) the child takes cred's groups,
 * group and user, in that order and for good, before exec; it starts in
 * dir (as that user) when dir is not NULL, root's runs too. Its environment is then not the daemon's: a
 * default PATH, HOME, USER and LOGNAME of cred, what the launcher and the
 * GPU libraries need of the daemon's (LD_LIBRARY_PATH, OPAL_PREFIX, PMIX_*,
 * OMPI_MCA_*, NCCL_*, CUDA_*), its locale and time zone, and extra. A failed
 * change fails the launch (-errno; -EPERM when this process may not). */
int dlh_launch_as(char *const argv[], char *const extra[], const char *log_path,
		  const int *join, const struct dlh_cred *cred, const char *dir, pid_t *pid);

/* dlh_launch_as, with the verbs' signals (DLH_SIG_CHECKPOINT,
 * DLH_SIG_SUSPEND) blocked in the program it starts, so that one sent at
 * once waits for the program to take it instead of killing it: for
 * dlh-shepherd, which takes them from its first instruction. */
int dlh_launch_holding(char *const argv[], char *const extra[], const char *log_path,
		       const int *join, const struct dlh_cred *cred, const char *dir, pid_t *pid);

/* 1 when the daemon's environment entry kv ("K=V") passes into a run as
 * another user (where the launcher, its libraries and the GPU libraries
 * are, the locale, the math libraries' threads, the sanitizers' settings). */
int dlh_launch_kept(const char *kv);

/* The environment of a program started by the daemon (malloc'd, before a
 * fork: the child may not allocate; free the array, not its strings): the
 * daemon's, or for_user only what dlh_launch_kept keeps and a plain PATH,
 * then extra's entries over it ("K=V", NULL-ended; a PATH among them
 * wins). NULL when out of memory. */
char **dlh_launch_env(char *const extra[], int for_user);

/* Reads a child's stdout (fds[0]) into out and stderr (fds[1]) into err,
 * each NUL-ended and cut at its size, until both end (each fd is closed and
 * set to -1) or timeout seconds pass. Returns 0, -ETIMEDOUT, or -errno. */
int dlh_launch_gather(int fds[2], char *out, size_t outlen, char *err, size_t errlen, double timeout);

/* Appends s to out[*n] (NULL-terminated, max entries), copied into store
 * (storelen bytes, *used of them taken). Returns 0, or -E2BIG. */
int dlh_argv_put(char **out, size_t max, int *n, char *store, size_t storelen, size_t *used,
		 const char *s);

/* Appends word to the command line out (len bytes; after a blank when out
 * is not empty), single-quoted for a POSIX shell ('\'' for a quote): how
 * a word reaches a node's shell through its agent. Returns 0, or -1 when it
 * does not fit. */
int dlh_shell_quote(char *out, size_t len, const char *word);

/* The first executable name in a directory of PATH (else the usual ones;
 * with absolute, only absolute ones) into out. Returns 0, or -ENOENT. */
int dlh_find_on_path(const char *name, int absolute, char *out, size_t len);

#endif
