/* probe.h - what a node of the pool has, asked over its agent (ssh) */
#ifndef DLH_RUN_PROBE_H
#define DLH_RUN_PROBE_H

#include <stddef.h>

#define DLH_PROBE_TIMEOUT 10.0   /* seconds a node has to answer */
#define DLH_PROBE_READ_BW 50e6   /* bytes/s a node is given to read and hash a job's data */
#define DLH_PROBE_SEE_MAX 8      /* most files one probe reads */

/* What dlh-probe said on a node. */
struct dlh_probe_result {
	int up;                     /* answered and sees the state dir */
	char hostname[64];          /* its own name for itself */
	int cpus;                   /* cores */
	long long mem_bytes;        /* memory */
	char cpu_model[128];        /* its CPU model, "" if it does not say */
	char gpus[128];             /* TYPE:COUNT,... or "none" */
	int free_port;              /* a TCP port free there when it answered (0: none said) */
	char why[256];              /* down: why (the agent's last words, or the probe's) */
	int timed_out;              /* down because it did not answer in time */
	int seen;                   /* see asked: 1 = every path readable there */
	char unseen[512];           /* else the first path it cannot read, and why */
	char hashes[DLH_PROBE_SEE_MAX * 17];   /* seen: each file's FNV-1a, hex, ","-separated */
	char token[130];            /* token asked: what the node read in its file
				       (token_ok says whether it matched) */
	int token_ok;               /* 1: the node read the token dlhfs wrote */
	char isolation[200];        /* how it isolates a run: "cgroup v2", "cgroup v1",
				       "none: why"; "" = not said (a probe not run as root) */
};

struct dlh_cred;

/* What one probe of a node asks. */
struct dlh_probe_ask {
	const char *agent;          /* a program and its options split on blanks; NULL or ""
				       = ssh in BatchMode */
	const char *host;           /* the node */
	const char *probe;          /* dlh-probe's absolute path (the same on every node) */
	const char *state;          /* the state dir, which the node must see */
	const char *token_path;     /* NULL, or a file in the state dir holding token: the
				       node must read the same (a shared filesystem) */
	const char *token;
	const char *const *see;     /* NULL, or files (NULL-ended) it must read; their
				       hashes come back (r->hashes) */
	const struct dlh_cred *cred;   /* NULL, or run the agent as this user (their keys,
				       their rights on the node) */
	double timeout;             /* seconds, then the agent is killed */
};

/* Runs probe (dlh-probe's absolute path, the same on every node: a shared
 * filesystem) with --state state on host through agent (a program and its
 * options split on blanks; "" = ssh in BatchMode), no shell on this side and
 * every word quoted for the remote one, for at most timeout seconds (then
 * killed). Fills *r; never fails otherwise. */
void dlh_probe_node(const char *agent, const char *host, const char *probe, const char *state,
		    double timeout, struct dlh_probe_result *r);

/* dlh_probe_node with a's questions: whether the node reads a's token and
 * each of a's files (they go to the probe on its standard input, never on a
 * command line), as a's user. r->up: answered, sees the state dir and
 * (token asked) read the token; r->seen, r->unseen, r->hashes: the files. */
void dlh_probe_ask(const struct dlh_probe_ask *a, struct dlh_probe_result *r);

#endif
