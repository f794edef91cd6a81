/* nodes.h - the pool's nodes probed: what each has, which answer */
#ifndef DLH_JOBS_NODES_H
#define DLH_JOBS_NODES_H

#include <stddef.h>

#include "engine/table/table.h"

/* Starts probing every node but the local one in a thread of its own (the
 * mount does not wait for it): a round now, then one every probe_every.
 * Once for the mount's life. e->mu not held. */
void eng_nodes_probe_start(struct dlh_engine *e);

/* "node N down since HH:MM:SS, ..." of the pool's nodes found down ("node
 * N drained in Slurm since ..." for a Slurm node: Slurm's word), or "" (for
 * a waiting job's reason). e->mu held. */
void eng_nodes_down_text(const struct dlh_engine *e, char *out, size_t len);

/* Probes every node but the local one now and returns when all have
 * answered or timed out (pool/ctl refresh); a round under way (the mount's,
 * a periodic one) is waited for first. Returns 0, or -EINVAL with err
 * (-o probe=off). e->mu not held. */
int eng_nodes_refresh(struct dlh_engine *e, char *err, size_t errlen);

/* pool/ctl reload: reads the pool file again and makes it the pool
 * (dlh_pool_merge: new nodes join, changed ones are updated, removed ones
 * leave once their jobs end), then probes the nodes as refresh does.
 * Returns when done: 0, or -EINVAL (no pool file; a file with problems:
 * err names them, the pool unchanged), -ENOSPC, -ENOMEM. e->mu not held. */
int eng_nodes_reload(struct dlh_engine *e, char *err, size_t errlen);

/* Nodes leaving the pool (reload) that no job holds any more are removed.
 * e->mu held. */
void eng_nodes_gone(struct dlh_engine *e);

/* A run on nodes[] (n of them, none the local one) failed: probes them
 * now (e->mu not held; at most DLH_PROBE_TIMEOUT), marks those that do not
 * answer down, and writes them into lost ("node dlhn2 lost (down: WHY)",
 * "" when every node answers). Returns how many were lost. */
int eng_nodes_lost(struct dlh_engine *e, const int *nodes, int n, char *lost, size_t len);

/* Whether job j's run, placed on plan's nodes, may start: 1 when every
 * node of it but the local one is known to read j's data files. Else 0:
 * a thread (counted in e->waiters) asks those nodes now, through their
 * agents (the paths on the probe's standard input); when they answer,
 * the nodes that see them are noted in j->seen and the queue runs again,
 * and a node that cannot read them fails the job with the file and why
 * (the data must be on a filesystem every node shares). e->mu held. */
int eng_nodes_see(struct dlh_engine *e, struct dlh_job *j, const struct dlh_plan *plan);

/* A Slurm pool's first round, now (sinfo's nodes become the pool), before
 * the runs of a restart are taken back and the queue plans: their nodes
 * must be there. Nothing for other pools. e->mu not held. */
void eng_nodes_first(struct dlh_engine *e);

/* Waits for the probing thread eng_nodes_probe_start started. e->mu not held. */
void eng_nodes_stop(struct dlh_engine *e);

#endif
