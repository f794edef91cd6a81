/* probe.c - what a node of the pool has, asked over its agent (ssh)
 *
 * The agent is started with an argv: its own words (the pool file's
 * `agent`, split on blanks), the host, then one command for the node's
 * shell, every word of it single-quoted. Its output is read through pipes
 * with a deadline; a node that does not answer in time is killed off and
 * shown down with the agent's last words. */
#define _GNU_SOURCE   /* pipe2: close-on-exec from the start */
#include "engine/run/probe.h"

#include <errno.h>
#include <grp.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/run/launch.h"
#include "engine/run/owner.h"
#include "engine/util/util.h"

#define PROBE_ARGV_MAX 64
#define PROBE_OUT_MAX 8192

/* The last non-empty line of text into out (ssh ends its lines "\r\n"). */
static void last_line(const char *text, char *out, size_t len)
{
	const char *best = NULL;
	size_t bl = 0;
	for (const char *l = text; *l;) {
		size_t n = strcspn(l, "\r\n");
		if (n) {
			best = l;
			bl = n;
		}
		l += n;
		l += strspn(l, "\r\n");
	}
	snprintf(out, len, "%.*s", best ? (int)bl : 0, best ? best : "");
}

/* Reads dlh-probe's key=value lines into r. */
static void parse(const char *text, struct dlh_probe_result *r)
{
	char v[256];
	if (!dlh_kv_get(text, "hostname", v, sizeof v))
		snprintf(r->hostname, sizeof r->hostname, "%s", v);
	if (!dlh_kv_get(text, "cpus", v, sizeof v))
		r->cpus = atoi(v);
	if (!dlh_kv_get(text, "memory", v, sizeof v))
		r->mem_bytes = atoll(v);
	if (!dlh_kv_get(text, "free_port", v, sizeof v))
		r->free_port = atoi(v);
	if (!dlh_kv_get(text, "cpu_model", v, sizeof v))
		snprintf(r->cpu_model, sizeof r->cpu_model, "%s", v);
	if (!dlh_kv_get(text, "gpus", v, sizeof v))
		snprintf(r->gpus, sizeof r->gpus, "%s", v);
	if (dlh_kv_get(text, "isolation", r->isolation, sizeof r->isolation))
		r->isolation[0] = '\0';
	r->up = r->cpus > 0;
	if (!r->up)
		snprintf(r->why, sizeof r->why, "the probe said nothing of its cores");
	else if (!dlh_kv_get(text, "state_dir", v, sizeof v) && strcmp(v, "yes")) {
		r->up = 0;
		snprintf(r->why, sizeof r->why, "cannot see the state directory (%s): runs need "
			 "it on every node", strncmp(v, "no: ", 4) ? v : v + 4);
	}
	char s[512];
	if (!dlh_kv_get(text, "seen", s, sizeof s)) {
		r->seen = !strcmp(s, "yes");
		snprintf(r->unseen, sizeof r->unseen, "%s", r->seen ? "" : strncmp(s, "no: ", 4) ? s : s + 4);
	}
	if (r->seen && dlh_kv_get(text, "hashes", r->hashes, sizeof r->hashes))
		r->hashes[0] = '\0';
}

/* Whether the node read a's token (r->token_ok); a node that did not is
 * not up: it does not share the state directory. */
static void check_token(const struct dlh_probe_ask *a, const char *text, struct dlh_probe_result *r)
{
	char v[sizeof r->token];
	if (dlh_kv_get(text, "token", v, sizeof v))
		snprintf(v, sizeof v, "no: the probe did not say");
	snprintf(r->token, sizeof r->token, "%s", v);
	r->token_ok = !strcmp(v, a->token);
	if (r->token_ok || !r->up)
		return;
	r->up = 0;
	if (!strncmp(v, "no: ", 4))
		snprintf(r->why, sizeof r->why, "does not share the state directory: it cannot read "
			 "the file dlhfs wrote there a moment ago (%.150s)", v + 4);
	else
		snprintf(r->why, sizeof r->why, "does not share the state directory: the file dlhfs "
			 "wrote there a moment ago reads otherwise on it (another directory at the "
			 "same path)");
}

void dlh_probe_node(const char *agent, const char *host, const char *probe, const char *state,
		    double timeout, struct dlh_probe_result *r)
{
	const struct dlh_probe_ask a = { .agent = agent, .host = host, .probe = probe,
					 .state = state, .timeout = timeout };
	dlh_probe_ask(&a, r);
}

/* The environment the agent gets as another user (dlh_launch_env: none of
 * the daemon's secrets) with that user's HOME, USER and LOGNAME (ssh finds
 * their keys by their home). */
static char **user_env(const struct dlh_cred *c, char *store, size_t len)
{
	int at = snprintf(store, len, "HOME=%s", c->home) + 1;
	int at2 = at + snprintf(store + at, len - (size_t)at, "USER=%s", c->user) + 1;
	snprintf(store + at2, len - (size_t)at2, "LOGNAME=%s", c->user);
	char *const extra[] = { store, store + at, store + at2, NULL };
	return dlh_launch_env(extra, 1);
}

void dlh_probe_ask(const struct dlh_probe_ask *a, struct dlh_probe_result *r)
{
	char words[512], cmd[4096] = "", *argv[PROBE_ARGV_MAX], envstore[800];
	const char *const *see = a->see;
	const char *host = a->host;
	double timeout = a->timeout;
	int n = 0;
	memset(r, 0, sizeof *r);
	snprintf(words, sizeof words, "%s", a->agent && a->agent[0] ? a->agent :
		 "ssh -o BatchMode=yes -o ConnectTimeout=5");
	for (char *w = strtok(words, " \t"); w && n < PROBE_ARGV_MAX - 3; w = strtok(NULL, " \t"))
		argv[n++] = w;
	if (dlh_shell_quote(cmd, sizeof cmd, a->probe) || dlh_shell_quote(cmd, sizeof cmd, "--state") ||
	    dlh_shell_quote(cmd, sizeof cmd, a->state) ||
	    (a->token_path && (dlh_shell_quote(cmd, sizeof cmd, "--token") ||
			       dlh_shell_quote(cmd, sizeof cmd, a->token_path))) ||
	    (see && dlh_shell_quote(cmd, sizeof cmd, "--see-stdin"))) {
		snprintf(r->why, sizeof r->why, "the probe's command line is too long");
		return;
	}
	argv[n++] = (char *)host;
	argv[n++] = cmd;
	argv[n] = NULL;
	int out[2] = { -1, -1 }, err[2] = { -1, -1 }, in[2] = { -1, -1 };
	if (see && pipe2(in, O_CLOEXEC)) {
		snprintf(r->why, sizeof r->why, "cannot make a pipe: %s", strerror(errno));
		return;
	}
	if (pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) {
		snprintf(r->why, sizeof r->why, "cannot make a pipe: %s", strerror(errno));
		for (int i = 0; i < 2; i++) {
			if (out[i] >= 0)
				close(out[i]);
			if (err[i] >= 0)
				close(err[i]);
			if (in[i] >= 0)
				close(in[i]);
		}
		return;
	}
	char **env = a->cred ? user_env(a->cred, envstore, sizeof envstore) : NULL;
	if (a->cred && !env) {
		snprintf(r->why, sizeof r->why, "out of memory");
		for (int i = 0; i < 2; i++) {
			close(out[i]);
			close(err[i]);
			if (in[i] >= 0)
				close(in[i]);
		}
		return;
	}
	char cant[600];
	int cant_len = snprintf(cant, sizeof cant, "cannot execute \"%.500s\": ", argv[0]);
	size_t cant_n = cant_len < 0 ? 0 : (size_t)cant_len < sizeof cant ? (size_t)cant_len : sizeof cant - 1;
	pid_t pid = fork();
	if (pid != 0)
		free(env);   /* the child's copy is its own */
	if (pid == 0) {
		/* async-signal-safe calls only from here to exec */
		dlh_child_as_from_shell();
		int src = see ? in[0] : open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (src < 0 || dlh_fd_onto(src, 0) < 0 || dlh_fd_onto(out[1], 1) < 0 ||
		    dlh_fd_onto(err[1], 2) < 0)
			_exit(127);
		/* as the job's owner: their groups, group and user, for good */
		if (a->cred && (setgroups((size_t)a->cred->ngroups, a->cred->groups) < 0 ||
				setgid(a->cred->gid) < 0 || setuid(a->cred->uid) < 0))
			_exit(126);
		if (env)
			execvpe(argv[0], argv, env);
		else
			execvp(argv[0], argv);
		/* no stdio here: the words made before the fork */
		static const char enoent[] = "no such file\n", eacces[] = "permission denied\n",
				  other[] = "exec failed\n";
		const char *why = errno == ENOENT ? enoent : errno == EACCES ? eacces : other;
		size_t why_n = why == enoent ? sizeof enoent - 1 : why == eacces ? sizeof eacces - 1 :
			       sizeof other - 1;
		ssize_t w = write(2, cant, cant_n);
		w = write(2, why, why_n);
		(void)w;
		_exit(127);
	}
	close(out[1]);
	close(err[1]);
	if (see) {   /* the paths, each ended by a NUL (a few KiB: the pipe holds them) */
		/* an agent gone early must not kill the daemon: SIGPIPE held in this
		 * thread while it writes, and one it raised taken back */
		sigset_t pipe_set, old;
		struct timespec now = { 0, 0 };
		sigemptyset(&pipe_set);
		sigaddset(&pipe_set, SIGPIPE);
		pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
		close(in[0]);
		for (int i = 0; pid > 0 && see[i]; i++)
			if (write(in[1], see[i], strlen(see[i]) + 1) < 0)
				break;
		close(in[1]);
		while (sigtimedwait(&pipe_set, NULL, &now) == SIGPIPE)
			;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	if (pid < 0) {
		snprintf(r->why, sizeof r->why, "cannot fork: %s", strerror(errno));
		close(out[0]);
		close(err[0]);
		return;
	}
	static const size_t cap = PROBE_OUT_MAX;
	char *text = calloc(1, cap), *errtext = calloc(1, cap);
	int fds[2] = { out[0], err[0] };
	int rc = text && errtext ? dlh_launch_gather(fds, text, cap, errtext, cap, timeout) : -ENOMEM;
	for (int i = 0; i < 2; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (rc == -ETIMEDOUT)
		kill(-pid, SIGKILL);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (rc == -ETIMEDOUT) {
		snprintf(r->why, sizeof r->why, "did not answer within %.0f s", timeout);
		r->timed_out = 1;
	} else if (rc) {
		snprintf(r->why, sizeof r->why, "cannot read the probe: %s", strerror(-rc));
	} else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		char last[200];
		last_line(errtext, last, sizeof last);
		snprintf(r->why, sizeof r->why, "%s: %s", argv[0],
			 last[0] ? last : WIFEXITED(st) ? "exited with an error" : "killed");
	} else {
		parse(text, r);
		if (a->token_path)
			check_token(a, text, r);
	}
	free(text);
	free(errtext);
}
