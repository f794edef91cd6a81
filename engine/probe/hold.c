/* hold.c - dlh-probe --hold: a run's cgroup on this node, held for the run
 *
 *   dlh-probe --hold --name NAME --uid UID [--slots S,S...] [--memory BYTES] [--pids N]
 *
 * The daemon runs it as root through the node's agent before mpirun starts
 * a run with ranks here (engine/run/nodecg.c). It makes the run's group
 * (engine/run/cgroup.c: a cpuset of the ranks' slots on this node, the
 * memory limit without swap, the task limit), listens on the abstract unix
 * socket named for the run (engine/run/join.h) and says on stdout
 *
 *   isolation=cgroup vN PATH      or      isolation=none: why (then it exits)
 *
 * Each rank here connects first thing: a peer whose uid (SO_PEERCRED) is
 * not UID is refused; one that is is written into the group's cgroup.procs
 * (its pid as the kernel gives it, never one a peer names) and answered
 * "ok PATH" (or "no why"). Standard input is the daemon's word:
 *
 *   end           the run is over: what is left in the group is killed,
 *                 then it prints oom_kill=N, peak=BYTES, pids_hits=N and
 *                 left=N (processes it killed), removes the group and exits
 *   end of input  the daemon is gone (the run outlives it, as it does here):
 *                 the group is kept until its last process ends, then removed
 *
 * SIGTERM and SIGINT count as "end". No shell is involved. */
#define _GNU_SOURCE   /* accept4, struct ucred: SO_PEERCRED */
#include "engine/probe/hold.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engine/run/cgroup.h"
#include "engine/run/join.h"
#include "engine/util/util.h"

#define HOLD_SLOTS_MAX 1024
#define HOLD_TICK_MS 1000   /* how often an orphaned group is looked at */

static volatile sig_atomic_t ending;

static void on_signal(int sig)
{
	(void)sig;
	ending = 1;
}

/* The number of processes in group dir (0 when it cannot be read). */
static int members(const char *dir)
{
	char path[DLH_CG_PATH_MAX + 64], *text = NULL;
	int n = 0;
	snprintf(path, sizeof path, "%s/cgroup.procs", dir);
	if (dlh_read_file(path, 1 << 20, &text, NULL))
		return 0;
	for (char *p = text; *p; p++)
		n += *p == '\n';
	free(text);
	return n;
}

/* Takes one connection on ls: moves its peer into the group (join: its
 * cgroup.procs descriptors) when its uid is uid, and answers. */
static void take(int ls, uid_t uid, const int *join, const char *group)
{
	int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
	if (c < 0)
		return;
	struct ucred cr;
	socklen_t cl = sizeof cr;
	char answer[600];
	if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0) {
		snprintf(answer, sizeof answer, "no cannot tell who connected: %s\n", strerror(errno));
	} else if (cr.uid != uid) {
		snprintf(answer, sizeof answer, "no uid %u is not the run's owner (uid %u)\n",
			 (unsigned)cr.uid, (unsigned)uid);
	} else {
		char pid[32];
		int rc = 0;
		snprintf(pid, sizeof pid, "%ld\n", (long)cr.pid);
		for (int k = 0; join[k] >= 0 && !rc; k++)
			rc = dlh_write_all(join[k], pid, strlen(pid));
		if (rc)
			snprintf(answer, sizeof answer, "no cannot move pid %ld into \"%s\": %s\n",
				 (long)cr.pid, group, strerror(-rc));
		else
			snprintf(answer, sizeof answer, "ok %s\n", group);
	}
	if (dlh_write_all(c, answer, strlen(answer)) < 0) {
		;   /* the rank is gone: nothing to tell */
	}
	close(c);
}

int dlh_probe_hold(int argc, char **argv)
{
	const char *name = NULL;
	long long memory = 0;
	long pids = 0, uid = -1;
	int slots[HOLD_SLOTS_MAX], nslots = 0;
	for (int i = 0; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v)
			return 2;
		if (!strcmp(argv[i], "--uid"))
			uid = strtol(v, NULL, 10);
		else if (!strcmp(argv[i], "--memory"))
			memory = strtoll(v, NULL, 10);
		else if (!strcmp(argv[i], "--pids"))
			pids = strtol(v, NULL, 10);
		else if (!strcmp(argv[i], "--slots"))
			for (const char *p = v; *p && nslots < HOLD_SLOTS_MAX; p += strcspn(p, ","), p += *p == ',')
				slots[nslots++] = atoi(p);
		else if (!strcmp(argv[i], "--name"))
			name = v;
		else
			return 2;
		i++;
	}
	if (!name || uid < 0 || strchr(name, '/') || !name[0] || strlen(name) > DLH_NODECG_NAME_MAX)
		return 2;
	if (nslots == 0)
		slots[nslots++] = 0;
	signal(SIGPIPE, SIG_IGN);
	signal(SIGHUP, SIG_IGN);   /* its agent gone: the end of stdin says so */
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	static struct dlh_cgroup_sys sys;
	struct dlh_cgroup cg;
	char why[600];
	int join[4] = { -1, -1, -1, -1 };
	dlh_cgroup_setup(&sys);
	if (sys.mode == DLH_CG_NONE) {
		printf("isolation=none: %s\n", sys.why);
		return 0;
	}
	int rc = dlh_cgroup_create(&sys, name, slots, nslots, memory, pids, &cg, why, sizeof why);
	if (!rc && (rc = dlh_cgroup_join_fds(&cg, join)))
		snprintf(why, sizeof why, "cannot open cgroup.procs: %s", strerror(-rc));
	struct sockaddr_un a;
	socklen_t alen = dlh_nodecg_addr(name, &a);
	int ls = rc ? -1 : socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (!rc && (ls < 0 || bind(ls, (struct sockaddr *)&a, alen) < 0 || listen(ls, 64) < 0)) {
		rc = -errno;
		snprintf(why, sizeof why, "cannot listen on the run's socket: %s", strerror(errno));
	}
	if (rc) {
		printf("isolation=none: %s\n", why);
		if (ls >= 0)
			close(ls);
		for (int k = 0; join[k] >= 0; k++)
			close(join[k]);
		dlh_cgroup_destroy(&cg);
		dlh_cgroup_teardown(&sys);
		return 0;
	}
	printf("isolation=cgroup v%d %s\n", sys.mode == DLH_CG_V1 ? 1 : 2, cg.cpuset);
	fflush(stdout);

	int orphan = 0;   /* stdin ended without "end": the daemon is gone */
	char line[64];
	size_t used = 0;
	while (!ending) {
		struct pollfd p[2] = { { .fd = orphan ? -1 : 0, .events = POLLIN }, { .fd = ls, .events = POLLIN } };
		int n = poll(p, 2, orphan ? HOLD_TICK_MS : -1);
		if (n < 0 && errno != EINTR)
			break;
		if (n > 0 && (p[1].revents & POLLIN))
			take(ls, (uid_t)uid, join, cg.cpuset);
		if (n > 0 && p[0].revents) {
			ssize_t got = read(0, line + used, sizeof line - 1 - used);
			if (got <= 0) {
				orphan = 1;
			} else {
				used += (size_t)got;
				line[used] = '\0';
				if (strstr(line, "end\n"))
					ending = 1;
				if (used >= sizeof line - 1)
					used = 0;
			}
		}
		if (orphan && !ending && members(cg.cpuset) == 0)
			break;   /* the run ended without the daemon: nothing to report to */
	}
	close(ls);
	for (int k = 0; join[k] >= 0; k++)
		close(join[k]);
	int left = members(cg.cpuset);
	printf("oom_kill=%d\npeak=%lld\npids_hits=%ld\nleft=%d\n", dlh_cgroup_oom_kills(&cg),
	       dlh_cgroup_peak(&cg), dlh_cgroup_pids_hits(&cg), left);
	fflush(stdout);
	dlh_cgroup_destroy(&cg);   /* kills what is left, waits for it, removes it */
	dlh_cgroup_teardown(&sys);
	return 0;
}
