/* profile.h - a [job] command measured before its run: its profile runs
 * (the program itself, a few train rows at a time, in a directory of their
 * own), then the fit that estimates and plans the real run
 * (engine/plan/profile.h) */
#ifndef DLH_SUPERVISE_PROFILE_H
#define DLH_SUPERVISE_PROFILE_H

#include "engine/table/table.h"

#define ENG_PROFILE_LIMIT 60.0   /* a profile run is stopped this long after its launch at
				    the latest, its rows timed so far taken */
#define ENG_PROFILE_LOOK 0.2     /* its rows are looked at this often (seconds) */
#define ENG_PROFILE_DIR "profile"   /* STATE/jobs/ID/profile/K: profile run K's files */

/* Makes the directory of j's next profile run (j->profile_phase), empty,
 * with its checkpoints/ and output/, writable by the job's owner as the
 * job's directory is; its path into dir. Returns 0, or -errno with err.
 * e->mu held. */
int eng_profile_prepare(struct dlh_engine *e, struct dlh_job *j, char *dir, size_t len,
			char *err, size_t errlen);

/* Points env's contract variables (DLH_JOB_DIR, DLH_METRICS_CSV,
 * DLH_CHECKPOINT_DIR, DLH_OUTPUT_DIR) at the profile run's directory dir. */
void eng_profile_env(const char *dir, struct eng_env *env);

/* Looks at the rows of j's running profile run: once it has timed
 * DLH_PROFILE_ROWS steps past its warm-up, or ENG_PROFILE_LIMIT has
 * passed, records what it measured and sets j->profile_stopped: the caller
 * stops the run. now is CLOCK_MONOTONIC; returns when to look again. e->mu
 * held. */
double eng_profile_watch(struct dlh_engine *e, struct dlh_job *j, double now);

/* The end of j's run when it was a profile run: the next profile run is
 * queued, or, after the last, the fit estimates the job, chooses its ranks
 * (engine/plan/choose.h), keeps the fit as the program's record, and the
 * job is queued for its run (or fails: no count meets its deadline).
 * Returns 1 when so (j->status set), 0 when the end is the job's own (it
 * failed by itself, was cancelled or suspended, dlhfs stops). peak: the
 * run's peak memory (bytes, 0 unknown); end_t when it ended. e->mu held. */
int eng_profile_ended(struct dlh_engine *e, struct dlh_job *j, long long peak, double end_t);

#endif
