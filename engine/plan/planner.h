/* planner.h - choosing where a job runs: every feasible configuration of the
 * free pool (device type x count x node spread, and devices of two types
 * together), estimated, and the one with the fewest joules that meets the
 * deadline (without a deadline, the fastest)
 *
 * The planner does not know how a run's time and energy are estimated: it
 * calls an estimate function per configuration (engine/estimate for real
 * pools; any model in the tests). */
#ifndef DLH_PLANNER_H
#define DLH_PLANNER_H

#include <stddef.h>

#define DLH_PLANNER_TYPES 8        /* most device types in a pool */
#define DLH_PLANNER_NODES 256      /* most nodes */
#define DLH_PLANNER_TYPE_NAME 32   /* bytes of a type name, NUL included */
#define DLH_CONFIG_PARTS 2         /* device types one configuration takes, at most */
#define DLH_PLANNER_MIXED 4096     /* two-type count pairs tried per pair of types, about */

/* A kind of device: what the estimator needs to know of it. */
struct dlh_devtype {
	char name[DLH_PLANNER_TYPE_NAME];   /* "cpu", "H100", ... */
	double flops;                       /* sustained FLOP/s of the training math */
	double mem_bytes;                   /* memory one device offers a rank */
	double watts_idle, watts_busy;      /* power of one device */
};

/* The free part of a pool. */
struct dlh_pool_free {
	int ntypes;
	struct dlh_devtype type[DLH_PLANNER_TYPES];
	int nnodes;
	int free[DLH_PLANNER_NODES][DLH_PLANNER_TYPES];   /* free devices per node and type */
};

/* Devices of one type in a configuration: count of them on nodes nodes,
 * placed on the nodes with the most free devices of that type, as evenly as
 * they allow (per_node[i] devices on the i-th of them). */
struct dlh_part {
	int type;                             /* index into the pool's types */
	int count;                            /* devices */
	int nodes;                            /* nodes spanned */
	int per_node[DLH_PLANNER_NODES];      /* devices on each spanned node */
	int node[DLH_PLANNER_NODES];          /* which nodes (pool indices) */
};

/* One candidate: devices of one type, or of two (devices that differ in
 * speed: each part on the fewest nodes that hold it). Ranks are the parts'
 * devices in order, part 0's first. */
struct dlh_config {
	int nparts;                           /* 1, or 2 */
	struct dlh_part part[DLH_CONFIG_PARTS];
	int count;                            /* devices = ranks, all parts */
	int nodes;                            /* distinct nodes spanned, all parts */
};

/* What a configuration is estimated to cost. */
struct dlh_config_cost {
	double total_s;     /* wall time of the whole run */
	double joules;      /* energy of the devices it holds */
	double mem_bytes;   /* peak memory of one device */
	int fits;           /* 1 = the per-device memory fits the type's */
};

/* Fills *out for c; returns 0, or -errno to skip c (e.g. a count the global
 * batch cannot be split over). */
typedef int (*dlh_estimate_fn)(void *ctx, const struct dlh_pool_free *pool,
			       const struct dlh_config *c, struct dlh_config_cost *out);

/* A configuration and its cost. */
struct dlh_candidate {
	struct dlh_config c;
	struct dlh_config_cost cost;
};

/* Enumerates every configuration of pool (each type, each count from 1 to
 * the free devices of that type, at most max_count when > 0, each node
 * spread from the fewest nodes that can hold count to the most; and each
 * pair of types, each pair of counts, at most max_count together, each
 * part on its fewest nodes: when a pair of types has more than about
 * DLH_PLANNER_MIXED pairs of counts, counts on a ladder of steps up to
 * 1/8 of the free devices, the largest always among them), estimates it,
 * and picks: with deadline_s > 0 the fewest joules among those that fit
 * and finish within the deadline (ties: the faster), else the fastest that
 * fits (ties: fewer joules). *best gets it; alts (nalts of room) the next
 * best in the same order, *nalt how many. Returns 0; -ENOSPC when nothing
 * fits (err says the largest memory need against the devices'); -ETIME when
 * nothing meets the deadline (err gives the best achievable time and its
 * configuration). */
int dlh_planner_choose(const struct dlh_pool_free *pool, double deadline_s, int max_count,
		       dlh_estimate_fn est, void *ctx, struct dlh_candidate *best,
		       struct dlh_candidate *alts, int nalts, int *nalt, char *err, size_t errlen);

/* Writes "4 x H100 on 1 node" (or "... on 2 nodes (3+1)", or for two types
 * "2 x H100 + 4 x A100 on 2 nodes") into out. */
void dlh_config_describe(const struct dlh_pool_free *pool, const struct dlh_config *c,
			 char *out, size_t len);

/* Writes seconds as "1h02m03s", "4m05s" or "12.3s" into out. */
void dlh_duration_text(double s, char *out, size_t len);

#endif
