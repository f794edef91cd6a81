/* core.h - private to engine/: launching and scheduling, the helpers engine.c, queue.c and ctl.c share
 *
 * engine.c opens, launches and supervises runs; queue.c schedules (order,
 * backfill, preemption); ctl.c applies ctl verbs; the engine's state and
 * the job table are table.h. Every function here is called with e->mu
 * held unless it says otherwise. */
#ifndef DLH_ENGINE_CORE_H
#define DLH_ENGINE_CORE_H

#include "engine/jobs/table.h"

/* Plans and starts job j on free slots. Returns 0, or -errno after marking
 * the job failed with the reason. */
int eng_job_launch(struct dlh_engine *e, struct dlh_job *j);

/* Stops j's run (DLH_VERB_TERMINATE), killing it after the grace period. */
void eng_job_terminate(struct dlh_engine *e, struct dlh_job *j);

/* Asks j's run to checkpoint and stop (DLH_VERB_SUSPEND); terminates it
 * after the suspend grace. */
void eng_job_suspend(struct dlh_engine *e, struct dlh_job *j);

/* Sends verb v to j's run through the backend. Returns the processes
 * signalled, or -errno. */
int eng_job_signal(struct dlh_engine *e, struct dlh_job *j, enum dlh_verb v);

/* Starts what may start, preempts where a waiting job needs it, and tells
 * the others why they wait (queue.c). */
void eng_schedule(struct dlh_engine *e);

#endif
