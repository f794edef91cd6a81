/* supervise.h - private to the engine (supervise/): starting a planned run and watching it to its end (supervise.c)
 *
 * Every function here is called with e->mu held unless it says otherwise. */
#ifndef DLH_ENGINE_SUPERVISE_H
#define DLH_ENGINE_SUPERVISE_H

#include <stddef.h>

#include "engine/engine.h"
#include "engine/run/backend.h"

/* Plans and starts job j on free slots, isolated in cgroups where the
 * machine allows, and starts the thread that waits for its run. Returns 0,
 * or -errno after marking the job failed with the reason; -ENOMEM before
 * any step leaves the job as it was. */
int eng_job_launch(struct dlh_engine *e, struct dlh_job *j);

/* Stops j's run (DLH_VERB_TERMINATE), killing it after the grace period. */
void eng_job_terminate(struct dlh_engine *e, struct dlh_job *j);

/* Asks j's run to checkpoint and stop (DLH_VERB_SUSPEND); terminates it
 * after the suspend grace. */
void eng_job_suspend(struct dlh_engine *e, struct dlh_job *j);

/* Sends verb v to j's run through the backend. Returns the processes
 * signalled, or -errno. */
int eng_job_signal(struct dlh_engine *e, struct dlh_job *j, enum dlh_verb v);

/* A job found running (or planning) in the state directory: its daemon is
 * gone. Stops whatever is left of the run its backend recorded, then marks
 * it succeeded when the run finished meanwhile, else requeues it. At open. */
void eng_job_recover(struct dlh_engine *e, struct dlh_job *j);

/* A [job] command that ran and waits to run again (queued, suspended): where
 * its program takes up, found at open (what the waiter found when its run
 * ended is not kept across a restart of dlhfs), so that its launch, under
 * e->mu, reads no file its owner writes. */
void eng_job_take_up(struct dlh_engine *e, struct dlh_job *j);

/* Starts the timer thread (time limits, suspend and kill graces). At
 * open, e->mu not held. Returns 0, or -errno with err. */
int eng_supervise_start(struct dlh_engine *e, char *err, size_t errlen);

/* Sets e->stopping, terminates every run, waits for their waiters (each
 * run's job is requeued to resume at the next open), then ends the timer
 * thread. At close, e->mu not held. */
void eng_supervise_stop(struct dlh_engine *e);

#endif
