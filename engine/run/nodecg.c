/* nodecg.c - a run's cgroup on each other node, held by dlh-probe --hold */
#define _GNU_SOURCE   /* pipe2: close-on-exec from the start */
#include "engine/run/nodecg.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/run/backend.h"
#include "engine/run/launch.h"
#include "engine/util/util.h"

#define NODECG_ARGV_MAX 64
#define NODECG_OUT_MAX 4096

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

int dlh_nodecg_start(const struct dlh_nodecg_ask *a, struct dlh_nodecg *h, char *why, size_t len)
{
	char words[512], cmd[8192] = "", *argv[NODECG_ARGV_MAX], num[3][32];
	int n = 0, rc = 0;
	memset(h, 0, sizeof *h);
	h->in = h->out = h->err = -1;
	snprintf(words, sizeof words, "%s", a->agent && a->agent[0] ? a->agent : DLH_AGENT_DEFAULT);
	for (char *w = strtok(words, " \t"); w && n < NODECG_ARGV_MAX - 3; w = strtok(NULL, " \t"))
		argv[n++] = w;
	snprintf(num[0], sizeof num[0], "%u", (unsigned)a->uid);
	snprintf(num[1], sizeof num[1], "%lld", a->memory);
	snprintf(num[2], sizeof num[2], "%ld", a->pids);
	const char *const head[] = { a->probe, "--hold", "--name", a->name, "--uid", num[0],
				     "--memory", num[1], "--pids", num[2], "--slots" };
	for (size_t i = 0; i < sizeof head / sizeof head[0]; i++)
		rc |= dlh_shell_quote(cmd, sizeof cmd, head[i]);
	char slots[4096] = "";
	size_t used = 0;
	for (int i = 0; i < a->nslots && used + 12 < sizeof slots; i++)
		used += (size_t)snprintf(slots + used, sizeof slots - used, "%s%d", i ? "," : "", a->slots[i]);
	rc |= dlh_shell_quote(cmd, sizeof cmd, slots[0] ? slots : "0");
	if (rc) {
		snprintf(why, len, "the helper's command line is too long");
		return -E2BIG;
	}
	argv[n++] = (char *)a->host;
	argv[n++] = cmd;
	argv[n] = NULL;
	int in[2] = { -1, -1 }, out[2] = { -1, -1 }, err[2] = { -1, -1 };
	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) {
		rc = -errno;
		snprintf(why, len, "cannot make a pipe: %s", strerror(errno));
		for (int i = 0; i < 2; i++) {
			close_fd(&in[i]);
			close_fd(&out[i]);
			close_fd(&err[i]);
		}
		return rc;
	}
	pid_t pid = fork();
	if (pid == 0) {
		/* async-signal-safe calls only from here to exec */
		dlh_child_as_from_shell();
		if (dlh_fd_onto(in[0], 0) < 0 || dlh_fd_onto(out[1], 1) < 0 || dlh_fd_onto(err[1], 2) < 0)
			_exit(127);
		execvp(argv[0], argv);
		static const char cant[] = "cannot execute the node's agent\n";
		ssize_t w = write(2, cant, sizeof cant - 1);
		(void)w;
		_exit(127);
	}
	rc = pid < 0 ? -errno : 0;
	close_fd(&in[0]);
	close_fd(&out[1]);
	close_fd(&err[1]);
	if (rc) {
		snprintf(why, len, "cannot fork: %s", strerror(-rc));
		close_fd(&in[1]);
		close_fd(&out[0]);
		close_fd(&err[0]);
		return rc;
	}
	h->pid = pid;
	h->in = in[1];
	h->out = out[0];
	h->err = err[0];
	h->node = -1;
	h->memory = a->memory;
	h->pids = a->pids;
	snprintf(h->host, sizeof h->host, "%s", a->host);
	return 0;
}

/* Reads h's stdout into buf (len bytes, NUL-ended) until it holds a whole
 * line (stop_at_line) or ends, for at most timeout seconds. Returns 0,
 * -ETIMEDOUT, or -errno. */
static int read_out(struct dlh_nodecg *h, char *buf, size_t len, int stop_at_line, double timeout)
{
	size_t got = strlen(buf);
	double until = dlh_mono() + timeout;
	while (h->out >= 0) {
		if (stop_at_line && strchr(buf, '\n'))
			return 0;
		double left = until - dlh_mono();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd p = { .fd = h->out, .events = POLLIN };
		int n = poll(&p, 1, (int)(left * 1000) + 1);
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n <= 0)
			continue;
		ssize_t r = got + 1 < len ? read(h->out, buf + got, len - 1 - got) : 0;
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			close_fd(&h->out);
			break;
		}
		got += (size_t)r;
		buf[got] = '\0';
	}
	return 0;
}

/* Stops h's agent for good (its process group) and reaps it. */
static void kill_agent(struct dlh_nodecg *h)
{
	close_fd(&h->in);
	close_fd(&h->out);
	close_fd(&h->err);
	if (h->pid > 0) {
		kill(-h->pid, SIGKILL);
		while (waitpid(h->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	h->pid = 0;
}

int dlh_nodecg_ready(struct dlh_nodecg *h, double timeout, char *why, size_t len)
{
	char text[1024] = "";
	int rc = read_out(h, text, sizeof text, 1, timeout);
	char *line = strstr(text, "isolation=");
	if (!rc && line) {
		line += strlen("isolation=");
		line[strcspn(line, "\r\n")] = '\0';
		int v;
		char group[256];
		if (sscanf(line, "cgroup v%d %255s", &v, group) == 2) {
			h->mode = v;
			snprintf(h->group, sizeof h->group, "%s", group);
			/* its stderr stays open until the end: an agent whose stderr
			 * was closed would die of SIGPIPE at its next word, and with
			 * it the helper's run */
			return 0;
		}
		snprintf(why, len, "%s", strncmp(line, "none: ", 6) ? line : line + 6);
		dlh_nodecg_end(h, 2.0, NULL);
		return -ENOTSUP;
	}
	if (rc == -ETIMEDOUT) {
		snprintf(why, len, "its cgroup helper did not answer in time");
	} else {
		/* the agent's last words: it could not start the helper */
		char err[2048] = "", last[300] = "";
		struct pollfd p = { .fd = h->err, .events = POLLIN };
		ssize_t r = h->err >= 0 && poll(&p, 1, 1000) > 0 ? read(h->err, err, sizeof err - 1) : 0;
		err[r > 0 ? r : 0] = '\0';
		for (char *l = strtok(err, "\r\n"); l; l = strtok(NULL, "\r\n"))
			snprintf(last, sizeof last, "%s", l);
		snprintf(why, len, "its cgroup helper did not start: %s",
			 last[0] ? last : rc ? strerror(-rc) : "it said nothing");
	}
	kill_agent(h);
	return rc ? rc : -EIO;
}

void dlh_nodecg_tell_end(struct dlh_nodecg *h)
{
	if (h->pid <= 0 || h->in < 0)
		return;
	/* a helper gone early must not kill the daemon: SIGPIPE held while
	 * writing, and one raised taken back */
	sigset_t pipe_set, old;
	struct timespec now = { 0, 0 };
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	if (h->in >= 0 && dlh_write_all(h->in, "end\n", 4) < 0) {
		;   /* gone: its end of the pipe says the rest */
	}
	close_fd(&h->in);
	while (sigtimedwait(&pipe_set, NULL, &now) == SIGPIPE)
		;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void dlh_nodecg_end(struct dlh_nodecg *h, double timeout, struct dlh_nodecg_end *r)
{
	char text[NODECG_OUT_MAX] = "", v[32];
	if (r)
		memset(r, 0, sizeof *r);
	if (h->pid <= 0)
		return;
	dlh_nodecg_tell_end(h);
	int rc = read_out(h, text, sizeof text, 0, timeout);
	if (r && !rc && !dlh_kv_get(text, "left", v, sizeof v)) {
		r->answered = 1;
		r->left = atoi(v);
		if (!dlh_kv_get(text, "oom_kill", v, sizeof v))
			r->oom = atoi(v);
		if (!dlh_kv_get(text, "peak", v, sizeof v))
			r->peak = atoll(v);
		if (!dlh_kv_get(text, "pids_hits", v, sizeof v))
			r->pids_hits = atol(v);
	}
	kill_agent(h);   /* it has exited, or it is past its time */
}
