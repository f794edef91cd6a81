/* advise.h - private to engine/: the engine's side of the planner and the
 * estimator (advise.c). Functions take e->mu unless they say it is held. */
#ifndef DLH_ENGINE_ADVISE_H
#define DLH_ENGINE_ADVISE_H

#include <stddef.h>

#include "engine/engine.h"
#include "engine/plan/choose.h"
#include "engine/plan/plan.h"
#include "engine/run/backend.h"

/* Loads the cached calibration and the history's correction factors; with
 * no cache (and no_calibrate 0) starts measuring in a thread. At open. */
void eng_calib_open(struct dlh_engine *e, int no_calibrate);

/* Measures now (blocking), stores the cache and appends its text to out.
 * For dlh_engine_calibrate: e is set up but not opened. Returns 0, or -errno. */
int eng_calibrate_now(struct dlh_engine *e, struct dlh_buf *out, char *err, size_t errlen);

/* Waits for that thread. At close, e->mu not held. */
void eng_calib_close(struct dlh_engine *e);

/* Decides how spec runs on the pool as it is now (engine/choose), after
 * any first-mount calibration has ended. e->mu not held. */
int eng_choose(struct dlh_engine *e, const struct dlh_spec *spec,
	       const struct dlh_dataset_shape *shape, struct dlh_choice *c,
	       char *err, size_t errlen);

/* Records the decision in the job (its record keeps it across restarts). */
void eng_choice_apply(struct dlh_job *j, const struct dlh_choice *c);

/* Fills ov from the job's recorded decision; returns 1, or 0 when it has none. */
int eng_job_override(const struct dlh_job *j, struct dlh_plan_override *ov);

/* Times the allreduce between this node and host (reached through agent)
 * with dlh-calib --phase link. e->mu not held; blocks for seconds. Returns
 * 0, or -errno with err. */
int eng_link_measure(struct dlh_engine *e, const char *host, const char *agent, double *alpha,
		     double *beta, char *err, size_t errlen);

/* The GPU type of each rank of j's plan (plan->gtype), as the planner
 * chose them (j->plan_parts); left as any GPU without a record. */
void eng_plan_types(const struct dlh_engine *e, const struct dlh_job *j, struct dlh_plan *plan);

/* The nodes j's ranks spread over: the spec's [resources] nodes, else the
 * planner's choice (0: the fewest that hold them); after its run lost a
 * node, no more than the usable nodes that remain. e->mu held. */
int eng_job_nodes(const struct dlh_engine *e, const struct dlh_job *j);

/* The nodes of a placed plan as the launch names them (hosts, *nhosts; 0
 * when every rank is on this machine or it is not placed) and the agent
 * that reaches the others (agent, "" = ssh). Returns 0, or -EINVAL with
 * err when two nodes are reached by different agents. e->mu held. */
int eng_launch_hosts(const struct dlh_engine *e, const struct dlh_plan *plan, const char *dir,
		     struct dlh_launch_host *hosts, int *nhosts, char *agent, size_t agentlen,
		     char *err, size_t errlen);

/* CPU slots (or GPUs) job j runs on. e->mu held. */
int eng_job_slots(const struct dlh_engine *e, const struct dlh_job *j);

/* Writes job j's estimate and planner files, and its plan when given.
 * Returns 0, or -errno. */
int eng_write_choice(struct dlh_engine *e, const struct dlh_job *j, const struct dlh_choice *c,
		     const struct dlh_plan *plan);

/* Writes jobs/<id>/plan of job j: the plan, how it is launched (the argv
 * and environment the run gets), then the planner's part. Returns 0, or
 * -errno. */
/* The fitted cost model of spec's [job] command on record (STATE/profiles,
 * root's), from its profile or an earlier run. Returns 0, or -errno. */
int eng_profile_record_read(const struct dlh_engine *e, const struct dlh_spec *spec,
			    struct dlh_profile_fit *f);

/* Keeps f as the record of spec's program. Returns 0, or -errno. */
int eng_profile_record_write(const struct dlh_engine *e, const struct dlh_spec *spec,
			     const struct dlh_profile_fit *f);

/* Sets the current_ lines of job j's estimate file (a job that has one):
 * the run's total as its rows give it now (total_s, seconds), at its step. */
void eng_estimate_current(const struct dlh_engine *e, const struct dlh_job *j, double total_s,
			  long step);

int eng_write_plan(struct dlh_engine *e, const struct dlh_job *j, const struct dlh_plan *plan);

/* The pool's name of the GPU type every rank of a GPU plan takes (what a
 * scheduler is asked for: Slurm's GRES type), or NULL (a CPU plan, ranks of
 * several types, or any type). */
const char *eng_gpu_type(const struct dlh_engine *e, const struct dlh_plan *plan);

/* After a run that succeeded in wall_s: the estimate file gains the actual
 * figures and errors, the history the pair, and the correction factors are
 * refitted. e->mu held. */
void eng_job_actuals(struct dlh_engine *e, struct dlh_job *j, double wall_s);

#endif
