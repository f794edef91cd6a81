/* eta.h - when a running job is expected to end, from its own rows */
#ifndef DLH_SUPERVISE_ETA_H
#define DLH_SUPERVISE_ETA_H

#include "engine/table/table.h"

#define ENG_ETA_EVERY 2.0   /* a running job's rows are looked at this often (seconds) */
#define ENG_ETA_MOVED 5.0   /* an expected end that moves by more than this and a tenth
			       of what is left makes the queue look again */

/* Reads running job j's metrics.csv and run.info (or a command's [job]
 * steps) when ENG_ETA_EVERY has passed since the last look, and sets
 * j->eta_end to when its steps should be done by the rate of its newest
 * rows (epoch seconds; 0 = unknown: no rows yet, steps unknown). now is
 * CLOCK_MONOTONIC. *moved = 1 when the end became known or unknown, or
 * moved by more than ENG_ETA_MOVED and a tenth of what is left (the queue's
 * plan should be made again), else left as it is. Returns the
 * CLOCK_MONOTONIC time of the next look. e->mu held (the files are the
 * run's owner's: opened never to wait). */
double eng_eta_update(struct dlh_engine *e, struct dlh_job *j, double now, int *moved);

#endif
