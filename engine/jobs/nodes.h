/* nodes.h - the pool's nodes probed: what each has, which answer */
#ifndef DLH_JOBS_NODES_H
#define DLH_JOBS_NODES_H

#include <stddef.h>

#include "engine/jobs/table.h"

/* Starts probing every node but the local one in a thread of its own (the
 * mount does not wait for it). e->mu not held. */
void eng_nodes_probe_start(struct dlh_engine *e);

/* Probes every node but the local one now and returns when all have
 * answered or timed out (pool/ctl refresh). Returns 0, or -EBUSY with err
 * while another round runs. e->mu not held. */
int eng_nodes_refresh(struct dlh_engine *e, char *err, size_t errlen);

/* A run on nodes[] (n of them, none the local one) failed: probes them
 * now (e->mu not held; at most DLH_PROBE_TIMEOUT), marks those that do not
 * answer down, and writes them into lost ("node dlhn2 lost (down: WHY)",
 * "" when every node answers). Returns how many were lost. */
int eng_nodes_lost(struct dlh_engine *e, const int *nodes, int n, char *lost, size_t len);

/* Waits for the probing thread eng_nodes_probe_start started. e->mu not held. */
void eng_nodes_stop(struct dlh_engine *e);

#endif
