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

/* Waits for the probing thread eng_nodes_probe_start started. e->mu not held. */
void eng_nodes_stop(struct dlh_engine *e);

#endif
