/* disk.h - private to the engine (table/): the state directory's room (disk.c) */
#ifndef DLH_JOBS_DISK_H
#define DLH_JOBS_DISK_H

#include "engine/table/table.h"

#define ENG_DISK_LOOK 1.0              /* seconds between looks while a job runs */
#define ENG_DISK_LOOK_NEAR 0.1         /* ... while one has a disk limit, or the
					  filesystem has less than 4 reserves free */
#define ENG_DISK_FULL (4LL << 20)      /* free bytes below which the filesystem is full */
#define ENG_RESERVE_DEFAULT (64LL << 20)   /* -o reserve's default (at most 5% of the
					      filesystem) */

/* At open, e->mu not held: removes what a killed calibration left in the
 * state dir and makes the reserve (STATE/.reserve, e->reserve bytes) where
 * there is room for it. */
void eng_disk_open(struct dlh_engine *e);

/* Gives up the reserve: its room is the daemon's to write with now.
 * Returns 1 when it freed some, 0 when there was none. Any lock state. */
int eng_disk_release(struct dlh_engine *e);

/* One look at the running jobs (the timer thread; e->mu held, released
 * while directories are measured): a job past its disk limit ([resources]
 * disk, else the mount's disk_per_job) is stopped with the reason in
 * j->disk_why; on a full filesystem the running job that holds the most is,
 * and the reserve is given up. Returns the CLOCK_MONOTONIC time to look
 * again, or 0 while nothing runs. */
double eng_disk_check(struct dlh_engine *e, double now);

#endif
