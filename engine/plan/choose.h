/* choose.h - deciding how a job runs, before it runs: the planner over the
 * pool's devices with the estimator behind it; per-rank batches in
 * proportion to each device's measured speed; the learning rate the global
 * batch calls for (the linear scaling rule, with warmup) */
#ifndef DLH_CHOOSE_H
#define DLH_CHOOSE_H

#include <stddef.h>

#include "engine/plan/calib.h"
#include "engine/plan/dataset.h"
#include "engine/plan/estimate.h"
#include "engine/plan/plan.h"
#include "engine/plan/planner.h"
#include "engine/plan/profile.h"
#include "engine/pool/pool.h"
#include "schema/spec.h"

#define DLH_CHOOSE_ALTS 4      /* next-best candidates kept for the plan */
#define DLH_CHOOSE_TEXT 1024   /* room for what changed / why not estimated */

/* What the harness decided for a job. */
struct dlh_choice {
	int estimated;                 /* 1: est and the candidates hold an estimate */
	int ranks;                     /* ranks = devices */
	int batch[DLH_RANKS_MAX];      /* per-rank batch; sums to the global batch (a [job]
					  command: 0 unless its spec gives batch_size) */
	double lr;                     /* the rate to train with; 0 = auto (range test), or
					  for a [job] command not given one (its own) */
	int warmup_steps;              /* linear warmup steps */
	char type[DLH_PLANNER_TYPE_NAME];  /* device type of the ranks */
	struct dlh_estimate est;       /* of the chosen configuration */
	struct dlh_candidate best;     /* the chosen configuration */
	struct dlh_candidate alt[DLH_CHOOSE_ALTS];   /* the next best, in order */
	int nalt;
	struct dlh_pool_free pool;     /* the pool view the candidates index */
	double deadline_s;             /* the spec's deadline (0 = none) */
	char changes[DLH_CHOOSE_TEXT]; /* what differs from the spec and why ("" = nothing) */
	char why[DLH_CHOOSE_TEXT];     /* estimated = 0: why there is no estimate */
	/* a [job] command: estimated by its profile (dlh_choose_profiled), or
	 * to be profiled before its run (profile_counts: the ranks of each run) */
	int profiled;                  /* est and ranks are fit's */
	struct dlh_profile_fit fit;
	char fit_source[64];           /* "its profile", "the record of an earlier run" */
	int fit_max;                   /* the counts considered: 1..fit_max */
	double fit_watts;              /* power of one rank's device, busy */
	int profile_runs;              /* > 0: it is profiled first, in this many runs */
	int profile_counts[DLH_PROFILE_RUNS];
};

/* What the decision is made from. */
struct dlh_choose_in {
	const struct dlh_spec *spec;
	const struct dlh_pool *pool;
	const int *cpus_used;          /* CPU slots in use on each node (pool indices);
					  NULL = none. GPUs are not held per job: all free */
	const struct dlh_calib *cal;   /* NULL or when == 0: not calibrated */
	const struct dlh_correction *corr;   /* NULL = none */
	const struct dlh_dataset_shape *shape;   /* the data as read at submission;
						    NULL = read it here */
	const struct dlh_profile_fit *fit;   /* a [job] command: the record of an earlier
						run of the same program (NULL = none) */
};

/* Decides ranks, batches, lr and warmup for in->spec and estimates the run.
 * A [job] command is estimated from in->fit (profile = auto), else it is to
 * be profiled first (profile_runs, profile_counts; not estimated yet; none
 * with profile = false: a deadline is then refused, -ETIME).
 * Without a calibration, for a user command, or with data it cannot read,
 * the ranks and batches are the spec's (estimated = 0, why says why). With
 * free devices the planner considers those, else the whole pool (the job
 * then waits for its devices). Returns 0; -ETIME (no configuration meets
 * the deadline; err gives the best achievable time), -ENOSPC (nothing fits
 * in memory), -EINVAL (the spec asks for what the pool lacks), each with
 * err saying why. */
int dlh_choose(const struct dlh_choose_in *in, struct dlh_choice *out, char *err, size_t errlen);

/* What a [job] command's ranks may run on in p: *max the devices of the
 * usable nodes (CPU slots, or GPUs with gpu), *type their type's name and
 * *watts its power busy (the first usable node's). */
void dlh_choose_command_devices(const struct dlh_pool *p, int gpu, int *max, const char **type,
				double *watts);

/* Decides the ranks of a [job] command from its fitted cost model f (from
 * source, as the plan says it): the spec's ranks when it names a number,
 * else among 1..max_ranks the fewest joules within [job] deadline, without
 * one the fastest; and estimates the run (each rank of type, drawing watts
 * busy). Returns 0, or -ETIME when the spec's count or none meets the
 * deadline (err: the best achievable time). */
int dlh_choose_profiled(const struct dlh_profile_fit *f, const char *source,
			const struct dlh_spec *spec, int max_ranks, const char *type, double watts,
			struct dlh_choice *out, char *err, size_t errlen);

/* Appends the planner's part of jobs/<id>/plan: the chosen configuration,
 * what changed from the spec and why, the next best candidates with their
 * predicted time and energy. Returns 0, or -ENOMEM. */
int dlh_choice_format(const struct dlh_choice *c, struct dlh_buf *out);

#endif
