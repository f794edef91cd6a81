/* sched.h - the queue's order and conservative backfill, as pure functions
 *
 * No locks, no processes: the engine hands in what runs and what waits, and
 * gets back when each waiting job is estimated to start. Durations are the
 * jobs' estimates (today their [job] time_limit; INFINITY when unknown). */
#ifndef DLH_SCHED_H
#define DLH_SCHED_H

#include <stddef.h>

#define DLH_SCHED_DEPTH 256   /* waiting jobs given a reservation; later ones wait unestimated */

/* A running job: the slots it holds until its estimated end. */
struct dlh_sched_run {
	int cpus;              /* slots held */
	double end;            /* estimated end, epoch seconds; INFINITY = unknown */
};

/* A waiting job, in and out. */
struct dlh_sched_wait {
	long id;               /* job id, the last tie-breaker */
	int priority;          /* higher first */
	double submitted;      /* earlier first among equal priorities */
	int cpus;              /* slots it needs */
	double duration;       /* estimated run time, seconds; INFINITY = unknown */
	double start;          /* out: estimated start; == now: may start now; INFINITY = unknown */
};

/* Sorts w into queue order: priority descending, then submission time,
 * then id. */
void dlh_sched_order(struct dlh_sched_wait *w, size_t n);

/* Conservative backfill. Walks w in the given (queue) order and reserves
 * for each job the earliest start >= now at which `cpus` slots of `total`
 * stay free for its whole duration, given the running jobs and the
 * reservations of every job before it; sets w[i].start. A job may start
 * now only when that reservation is now: a job later in the queue starts
 * ahead of an earlier one only when, by the estimates, it ends before that
 * one's reserved start (or fits beside it), so it never delays it. Jobs
 * past DLH_SCHED_DEPTH, jobs needing more than total and jobs that never
 * fit by the estimates get INFINITY. */
void dlh_sched_plan(int total, double now, const struct dlh_sched_run *run, size_t nrun,
		    struct dlh_sched_wait *w, size_t nw);

#endif
