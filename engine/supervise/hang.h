/* hang.h - a run that no longer steps: found, named, stopped */
#ifndef DLH_JOBS_HANG_H
#define DLH_JOBS_HANG_H

#include "engine/table/table.h"

#define ENG_HANG_MIN 60.0        /* the automatic hang_timeout is never shorter */
#define ENG_HANG_STEPS 10.0      /* ... and is this many estimated steps */
#define ENG_HANG_STARTUP 300.0   /* ... and before the first step (loading data),
				    at least this: an explicit hang_timeout applies as is */
#define ENG_HANG_LOOK 5.0        /* a [job] command that has not written a row yet is
				    looked at again this often (from its first on, it
				    is watched as dlh-train is) */

/* Sets j->hang_after for a run that starts now: [job] hang_timeout, or
 * ENG_HANG_STEPS estimated steps (the job's estimate), at least
 * ENG_HANG_MIN. e->mu held. */
void eng_hang_arm(struct dlh_engine *e, struct dlh_job *j);

/* Looks at running job j's heartbeat (contract.h; a [job] command's
 * metrics.csv). When no rank has stepped for j->hang_after, logs the hang
 * naming the rank that stalls (its pid, host, last step, process state)
 * and marks j hung (j->hung, j->hang_why): the caller stops the run, so
 * that the watch knows nothing of how runs are stopped. Returns the CLOCK_MONOTONIC time to
 * look again, or 0 (no need). e->mu held. */
double eng_hang_check(struct dlh_engine *e, struct dlh_job *j, double now);

#endif
