/* nodecg.h - a run's cgroup on each other node: dlh-probe --hold started
 * there as root through the node's agent, held while the run lasts
 *
 * Before mpirun starts a run with ranks on other nodes, the daemon starts
 * `dlh-probe --hold` on each of them (engine/probe/hold.c) with the limits
 * of that node's ranks; the helper makes the group and takes each rank in
 * as it starts (engine/run/join.h). When the run has ended the daemon says
 * "end": the helper kills what is left there, reports what the kernel
 * counted and removes the group. Should the daemon die first, the helper
 * keeps the group until its last process ends (runs outlive dlhfs). */
#ifndef DLH_RUN_NODECG_H
#define DLH_RUN_NODECG_H

#define DLH_NODECG_END_S 5.0   /* seconds a helper has to clean up and report at the end */

#include <stddef.h>
#include <sys/types.h>

/* One node's helper, as the daemon holds it. */
struct dlh_nodecg {
	pid_t pid;               /* the agent that runs it (its process group); 0 = none */
	int in, out, err;        /* its stdin (ours to write), stdout and stderr; -1 = closed */
	int node;                /* the pool node it is on */
	char host[72];           /* the node's name, for the job's log */
	char group[256];         /* ready: the group there */
	int mode;                /* ready: cgroup version 1 or 2; 0 = none */
	long long memory;        /* the memory limit it was asked for, bytes (0 = none) */
	long pids;               /* the task limit it was asked for (0 = none) */
};

/* What one helper is asked to make. */
struct dlh_nodecg_ask {
	const char *agent;       /* the node's agent, split on blanks; NULL or "" = ssh */
	const char *host;        /* where the agent reaches it */
	const char *probe;       /* dlh-probe's absolute path (the same on every node) */
	const char *name;        /* the run's name there (DLH_NODECG: group and socket) */
	uid_t uid;               /* the run's owner: only their processes are taken in */
	const int *slots;        /* the CPU slots of its ranks there */
	int nslots;
	long long memory;        /* bytes, 0 = none */
	long pids;               /* tasks, 0 = none */
};

/* Starts a's helper through the node's agent (no shell on this side; every
 * word quoted for the node's) into h, without waiting for it. Returns 0,
 * or -errno with why. */
int dlh_nodecg_start(const struct dlh_nodecg_ask *a, struct dlh_nodecg *h, char *why, size_t len);

/* Waits up to timeout seconds for h's first word. Returns 0 when its group
 * is made and it listens (h->group, h->mode), or -errno with why: what it
 * said ("none: ..." without the prefix) or the agent's last words (it is
 * then ended). */
int dlh_nodecg_ready(struct dlh_nodecg *h, double timeout, char *why, size_t len);

/* What a helper reported at the end of its run. */
struct dlh_nodecg_end {
	int oom;                 /* processes the kernel's OOM killer killed in the group */
	long long peak;          /* the most memory the group used at once, 0 = unknown */
	long pids_hits;          /* forks refused at its task limit */
	int left;                /* processes left in it, killed by the helper */
	int answered;            /* 1: it reported; 0: it did not in time (killed) */
};

/* Says "end" to h and closes its input (no wait): a caller ending several
 * tells them all first, so that they end together. Harmless twice. */
void dlh_nodecg_tell_end(struct dlh_nodecg *h);

/* Ends h: says "end" (unless told), reads its report into *r (r may be NULL) until it has
 * removed the group and exited, or timeout seconds pass (then the agent is
 * killed), and reaps it. h is then empty. Harmless on an empty h. */
void dlh_nodecg_end(struct dlh_nodecg *h, double timeout, struct dlh_nodecg_end *r);

#endif
