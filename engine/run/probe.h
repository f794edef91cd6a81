/* probe.h - what a node of the pool has, asked over its agent (ssh) */
#ifndef DLH_RUN_PROBE_H
#define DLH_RUN_PROBE_H

#include <stddef.h>

#define DLH_PROBE_TIMEOUT 10.0   /* seconds a node has to answer */

/* What dlh-probe said on a node. */
struct dlh_probe_result {
	int up;                     /* answered and sees the state dir */
	char hostname[64];          /* its own name for itself */
	int cpus;                   /* cores */
	long long mem_bytes;        /* memory */
	char cpu_model[128];        /* its CPU model, "" if it does not say */
	char gpus[128];             /* TYPE:COUNT,... or "none" */
	char why[256];              /* down: why (the agent's last words, or the probe's) */
	int seen;                   /* dlh_probe_node_sees: 1 = every path readable there */
	char unseen[512];           /* else the first path it cannot read, and why */
};

/* Runs probe (dlh-probe's absolute path, the same on every node: a shared
 * filesystem) with --state state on host through agent (a program and its
 * options split on blanks; "" = ssh in BatchMode), no shell on this side and
 * every word quoted for the remote one, for at most timeout seconds (then
 * killed). Fills *r; never fails otherwise. */
void dlh_probe_node(const char *agent, const char *host, const char *probe, const char *state,
		    double timeout, struct dlh_probe_result *r);

/* dlh_probe_node that also asks whether the node can read each of the
 * files see[] (NULL-terminated): they go to the probe on its standard
 * input, never on a command line. r->seen, r->unseen say. */
void dlh_probe_node_sees(const char *agent, const char *host, const char *probe,
			 const char *state, const char *const *see, double timeout,
			 struct dlh_probe_result *r);

#endif
