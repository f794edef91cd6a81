/* plan.h - placing a job: ranks, batch per rank, lr, and the program each
 * rank runs (its exact argv; the launch backend, engine/run, starts it) */
#ifndef DLH_PLAN_H
#define DLH_PLAN_H

#include "engine/pool/pool.h"
#include "engine/util/util.h"
#include "schema/spec.h"

#define DLH_RANKS_MAX 1024
#define DLH_ARGV_MAX 160
#define DLH_ARGV_BYTES (16 * 1024)
#define DLH_REBALANCE_STEPS 20   /* steps between re-splits of unequal CPU batches */

/* Where the programs the plan runs live. */
struct dlh_tools {
	char trainer[1024];  /* absolute path of dlh-train */
	char rank[1024];     /* dlh-rank, which gives a [job] command's ranks torchrun's
				environment; "" = the command runs as it is */
};

struct dlh_plan {
	int ranks;                      /* MPI ranks, one per CPU slot (and per GPU) */
	int gpu;                        /* 1: [resources] device = gpu, rank r on GPU r */
	int batch[DLH_RANKS_MAX];       /* per-rank batch; sums to the global batch (a [job]
					   command's: 0 unless its spec gives [train] batch_size;
					   then handed on as DLH_BATCH) */
	int slot[DLH_RANKS_MAX];        /* the CPU slot each rank holds on its node (set by
					   the engine at launch; -1 before) */
	int node[DLH_RANKS_MAX];        /* the pool node each rank runs on (dlh_plan_place;
					   -1 before): ranks of a node are consecutive */
	int dev[DLH_RANKS_MAX];         /* gpu: the GPU each rank takes on its node */
	int gtype[DLH_RANKS_MAX];       /* gpu: the pool type each rank's GPU must be (-1:
					   any); ranks of one type are consecutive */
	double lr;                      /* learning rate used (a [job] command's: 0 unless
					   its spec gives [train] lr; then DLH_LR) */
	long long memory;               /* memory limit of all ranks together, bytes; 0 = none */
	char host[DLH_HOST_MAX + 1];    /* where the launcher runs (the local node) */
	char *argv[DLH_ARGV_MAX];       /* what every rank runs (dlh-train or the [job]
					   command), NULL-terminated */
	int argc;                       /* entries used in argv */
	int trainer;                    /* 1: argv runs dlh-train (not a [job] command) */
	int rebalance;                  /* steps between re-splits of the batches during the
					   run (dlh-train --rebalance), 0 = none */
	char store[DLH_ARGV_BYTES];     /* backing text for argv */
	size_t used;                    /* bytes of store used */
};

/* What the planner decided (engine/choose), over the spec's own values. */
struct dlh_plan_override {
	int ranks;                      /* ranks = devices */
	const int *batch;               /* ranks per-rank batches: the global batch is their sum */
	double lr;                      /* 0 = auto */
	int warmup_steps;               /* linear warmup steps */
};

/* Plans spec for job_dir on pool with ov's ranks, batches, lr and warmup
 * (ov NULL: the spec's own; ranks = auto then takes every CPU slot, or with
 * device = gpu every GPU, for dlh-train no more than the global batch; a
 * [job] command gets ranks only, its batch and lr are the program's).
 * Returns 0, or
 * -EINVAL with err naming the problem (e.g. more ranks than the pool has
 * slots), -E2BIG when the command line does not fit. */
int dlh_plan_make_with(const struct dlh_spec *spec, const struct dlh_plan_override *ov,
		       const struct dlh_pool *pool, const struct dlh_tools *tools,
		       const char *job_dir, struct dlh_plan *plan, char *err, size_t errlen);

/* A [job] command's batches and rate on ranks ranks, from its spec's
 * [train] keys (handed to it as DLH_BATCH, DLH_GLOBAL_BATCH, DLH_LR): the
 * global batch is batch_size (with scale_batch, batch_size x ranks), split
 * equally into batch[] (all 0 when batch_size is not given); *lr is the
 * spec's (with scale_batch, x ranks: the linear scaling rule; 0 when not
 * given). Returns 0, or -EINVAL when the global batch is below ranks. */
int dlh_plan_command_batch(const struct dlh_spec *spec, int ranks, int *batch, double *lr);

/* Once a [job] command's plan is placed: splits its global batch again in
 * proportion to the speed of each rank's device (type_speed[] by pool type;
 * the equal split stays where any is unknown, 0, or all are alike).
 * Returns 1 when the batches changed, else 0. */
int dlh_plan_split_placed(struct dlh_plan *p, const struct dlh_pool *pool, const double *type_speed);

/* Splits global into n per-rank batches in proportion to speed[] (largest
 * remainder, ties to the first rank, each at least 1). speed NULL, or no
 * speed positive: the equal split dlh-train makes by itself, the remainder
 * to the first ranks. Returns 0, or -EINVAL when global < n. */
int dlh_split_batch(int global, const double *speed, int n, int *out);

/* Places plan->ranks ranks on the nodes of pool into plan->node[] (and
 * plan->dev[]): avail[k] ranks may go to node k (free CPU slots, for a GPU
 * plan no more than its GPUs; 0 for a node that is not usable). A GPU plan
 * whose ranks name their GPU type (gtype[]) places each type's ranks on the
 * fewest nodes with GPUs of that type, each rank on the next GPU of the
 * type there (GPUs numbered in type order, as pool/nodes shows). nodes > 0:
 * spread over exactly that many nodes, those with the most room, as evenly
 * as the ranks divide; 0: on the fewest nodes, the local node first when
 * all fit there. Ranks fill the chosen nodes in order (the local node
 * first among equals), so that each node's ranks are consecutive. Returns
 * 0, or -EAGAIN with why when avail cannot hold them. */
int dlh_plan_place(struct dlh_plan *plan, const struct dlh_pool *pool, const int *avail, int nodes,
		   char *why, size_t len);

/* Once the engine has set plan->slot[]: appends --cpus with them, so that
 * dlh-train pins rank r to CPU slot[r] of its node, and for a GPU plan
 * --gpus with dev[] (a [job] command gets nothing). Returns 0, or -E2BIG
 * when the command line is full. */
int dlh_plan_pin(struct dlh_plan *plan);

/* The nodes of a placed plan in rank order: node indices into out (up to
 * max), ranks on each into count. Returns how many. */
int dlh_plan_nodes(const struct dlh_plan *plan, int *out, int *count, int max);

/* The number of CPU slots spec needs on pool (ranks, or for auto every
 * device of the usable nodes: for dlh-train no more than its batch_size). */
int dlh_plan_slots(const struct dlh_spec *spec, const struct dlh_pool *pool);

/* Appends the plan as the text of jobs/<id>/plan, up to how it is launched
 * (the backend's part); hosts are pool's. The global batch, lr and each
 * rank's batch are dlh-train's (plan->trainer) only. Returns 0, or -ENOMEM. */
int dlh_plan_format(const struct dlh_plan *plan, const struct dlh_pool *pool, struct dlh_buf *out);

#endif
