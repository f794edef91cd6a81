/* profile.h - a [job] command measured before its run: its profile runs
 * (the program itself, as the job's run, stopped once a few train rows are
 * timed; what it wrote is then removed), then the fit that estimates and
 * plans the real run (engine/plan/profile.h). A profile run that ends by
 * itself, or cannot be timed, is the job's run. */
#ifndef DLH_SUPERVISE_PROFILE_H
#define DLH_SUPERVISE_PROFILE_H

#include "engine/table/table.h"

#define ENG_PROFILE_LIMIT 60.0   /* a profile run is stopped this long after its launch at
				    the latest, its rows timed so far taken */
#define ENG_PROFILE_LOOK 0.2     /* its rows are looked at this often (seconds) */

/* Before j's profile run starts: what an earlier one cut short left of the
 * job's files is removed (the run starts from nothing). e->mu held. */
void eng_profile_start(struct dlh_engine *e, struct dlh_job *j);

/* Looks at the rows of j's running profile run: once it has timed
 * DLH_PROFILE_ROWS steps past its warm-up (or ENG_PROFILE_LIMIT has passed
 * with two at least), records what it measured and sets
 * j->profile_stopped: the caller stops the run. A run that writes fewer
 * rows, or does not tell its steps, is not stopped: it goes on as the
 * job's run, not estimated. now is CLOCK_MONOTONIC; returns when to look
 * again (0: no more). e->mu held. */
double eng_profile_watch(struct dlh_engine *e, struct dlh_job *j, double now);

/* The end of j's run when it was a profile run: the next profile run is
 * queued, or, after the last, the fit estimates the job, chooses its ranks
 * (engine/plan/choose.h), keeps the fit as the program's record, and the
 * job is queued for its run (or fails: no count meets its deadline).
 * Returns 1 when so (j->status set), 0 when the end is the job's own (the
 * run ended by itself: it was the job's run; it was cancelled or
 * suspended; dlhfs stops). peak: the
 * run's peak memory (bytes, 0 unknown); end_t when it ended. e->mu held. */
int eng_profile_ended(struct dlh_engine *e, struct dlh_job *j, long long peak, double end_t);

#endif
