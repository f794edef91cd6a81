/* queue.h - private to engine/jobs/: the queue driver (queue.c) */
#ifndef DLH_ENGINE_QUEUE_H
#define DLH_ENGINE_QUEUE_H

#include "engine/engine.h"

/* Where a job has no [job] time_limit, the scheduler plans with its
 * estimate (or, running, with the rate of its own rows) this much longer. */
#define ENG_EST_MARGIN 1.2

/* Starts what may start, preempts where a waiting job needs it, and tells
 * the others why they wait. e->mu held. Also e->reschedule (table.h): the
 * supervisor calls it when a run has ended. */
void eng_schedule(struct dlh_engine *e);

/* Says in j->wait that Slurm has not answered sinfo since the mount
 * (e->slurm_unheard), so the job waits unplanned. e->mu held. */
void eng_slurm_unheard_wait(struct dlh_engine *e, struct dlh_job *j);

/* The rank slots one user's runs may hold while another user's job waits
 * (-o ranks_per_user; 0 = no cap). e->mu held. */
int eng_ranks_per_user(const struct dlh_engine *e);

#endif
