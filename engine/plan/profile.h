/* profile.h - a user's program estimated from measurement
 *
 * Short runs of the program (profiles: a few train rows at one rank and at
 * the planned count) give its step time, its start-up and its memory. The
 * split the built-in trainer's estimate uses, a step's work shared by the
 * ranks plus a gradient sum that grows as 2(R-1)/R (a ring allreduce),
 * fitted to them predicts any rank count. Pure: the engine runs the
 * profiles (engine/supervise/profile.c) and hands in what they measured. */
#ifndef DLH_PROFILE_H
#define DLH_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/plan/estimate.h"

#define DLH_PROFILE_WARMUP 2      /* a profile's first train rows, not timed (allocation,
				     caches, the first collective's set-up) */
#define DLH_PROFILE_ROWS 8        /* steps timed after them at least ... */
#define DLH_PROFILE_SPAN 3.0      /* ... and for this long at least (seconds); then the
				     run is stopped */
#define DLH_PROFILE_EVAL_WAIT 15.0 /* an evaluation this near (seconds, by the steps of an
				     epoch) is waited for, to be timed too */
#define DLH_PROFILE_RUNS 2        /* at most: one rank, and the planned count */
#define DLH_PROFILE_WEAK_TOL 0.15 /* steps x ranks within this of one rank's steps: each
				     rank keeps its batch (weak scaling) */

/* One row of a profile's metrics.csv, as the fit needs it. */
struct dlh_profile_row {
	int eval;                 /* an eval row (else a train row) */
	double t;                 /* its time_s */
};

/* The step times of a profile's rows so far, taken one row at a time (a
 * profile's metrics.csv is read as it grows). Zeroed: no row yet. */
struct dlh_profile_sum {
	double prev, steps, gaps;
	int nstep, nev, between;
};
struct dlh_profile_acc {
	int nrows, train;             /* rows taken; train rows of the warm-up seen */
	int has_train;                /* a train row was taken: first_train_t holds */
	double first_train_t, last_t; /* time_s of the first train row and of the last row */
	struct dlh_profile_sum main;  /* after the warm-up's last train row */
	struct dlh_profile_sum alt;   /* after the first row (fewer rows than the warm-up) */
};

/* What one profile run measured. */
struct dlh_profile_run {
	int ranks;                /* ranks it ran */
	int rows;                 /* steps timed (train rows after DLH_PROFILE_WARMUP) */
	double span_s;            /* the time they took */
	double step_s;            /* their mean (an evaluation's time left out) */
	int evals;                /* evaluations timed (eval rows between two train rows) */
	double eval_s;            /* their mean */
	long steps_per_epoch;     /* as the program said it (run.info); 0 = unknown */
	double startup_s;         /* from the launch to its first train row */
	long steps;               /* the run's steps as the program said them (run.info,
				     or the spec's [job] steps); 0 = unknown */
	long long peak_mem;       /* the most memory the run used at once, bytes; 0 = unknown */
};

/* The program's cost model, fitted to its profiles. */
struct dlh_profile_fit {
	int runs;                 /* profiles it was fitted from */
	int weak;                 /* 1: each rank keeps its batch (the steps shrink as ranks
				     grow); 0: the global batch is split over the ranks */
	long steps1;              /* the run's steps at one rank (0 = unknown) */
	double compute_s;         /* a step's work at one rank */
	double comm_s;            /* the gradient sum's cost, times 2(R-1)/R */
	double startup_s;         /* start-up at one rank ... */
	double startup_rank_s;    /* ... and for each rank more */
	double mem_rank;          /* bytes one rank uses at its peak (0 = unknown) */
	long spe1;                /* steps of an epoch at one rank (0 = unknown) */
	double eval_s;            /* an evaluation at one rank (the test set shared by the ranks) */
	double tail_s;            /* what runs took beyond the model, on the mean (the exit,
				     what the profiles did not see): learnt from the runs */
	int corrections;          /* runs tail_s was learnt from */
};

/* Times the n rows of a profile (in file order) into m: after the first
 * DLH_PROFILE_WARMUP train rows, the intervals between train rows are
 * steps (rows, span_s, step_s) unless an eval row lies between them: then
 * the interval less a step is an evaluation (evals, eval_s). */
/* Takes one more row, in file order, into acc. */
void dlh_profile_acc_add(struct dlh_profile_acc *acc, const struct dlh_profile_row *r);

/* What acc's rows say into m's rows, span_s, step_s, evals and eval_s, as
 * dlh_profile_rows of the same rows. */
void dlh_profile_acc_result(const struct dlh_profile_acc *acc, struct dlh_profile_run *m);

void dlh_profile_rows(const struct dlh_profile_row *r, int n, struct dlh_profile_run *m);

/* Learns from a run of f's program that took actual_s where f predicted
 * predicted_s: tail_s moves to the mean of the runs' excess. */
void dlh_profile_learn(struct dlh_profile_fit *f, double predicted_s, double actual_s);

/* Fits f to the n profile runs (one or two, different rank counts).
 * Returns 0, or -EINVAL with err saying why (no rows timed, the steps not
 * told, two runs of one count). */
int dlh_profile_fit(const struct dlh_profile_run *runs, int n, struct dlh_profile_fit *f,
		    char *err, size_t errlen);

/* The estimate of a run of ranks ranks by f (steps, step_s, compute_s,
 * comm_s, startup_s, total_s, mem_bytes; joules with each rank drawing
 * watts_busy over the run). */
void dlh_profile_predict(const struct dlh_profile_fit *f, int ranks, double watts_busy,
			 struct dlh_estimate *out);

/* The rank count for a run by f: with a deadline (seconds, 0 = none), the
 * fewest joules among the counts 1..max_ranks estimated to meet it; without
 * one, the fastest. *out gets its estimate. Returns the count, or -ETIME
 * when none meets the deadline (*out: the fastest). */
int dlh_profile_choose(const struct dlh_profile_fit *f, int max_ranks, double deadline_s,
		       double watts_busy, struct dlh_estimate *out);

/* The record key of spec's program: what makes two runs the same program
 * (its command, [job] env, [job] steps, device, and the [train] batch_size
 * and scale_batch it is handed). */
uint64_t dlh_profile_key(const struct dlh_spec *spec);

/* Appends f as key=value lines (profile_*) for the estimate and the
 * history. Returns 0, or -ENOMEM. */
int dlh_profile_format(const struct dlh_profile_fit *f, struct dlh_buf *out);

/* Reads f back from text dlh_profile_format wrote. Returns 0, or -EINVAL. */
int dlh_profile_parse(const char *text, struct dlh_profile_fit *f);

#endif
