/* estimate.h - what a run of the built-in trainer will cost, before it runs:
 * step, epoch and total time, energy, memory per device, bytes communicated
 * per step (white box, after Paleo and the BSP model of Hashemi et al.: the
 * model's counts from engine/cost, the devices' speeds from engine/calib),
 * and after it, the same lines with the actual values and the error
 *
 * Contract between the engine (caller) and the estimator; the estimator's
 * inner terms are its own. */
#ifndef DLH_ESTIMATE_H
#define DLH_ESTIMATE_H

#include <stddef.h>

#include "engine/plan/calib.h"
#include "engine/plan/cost.h"
#include "engine/util/util.h"
#include "schema/spec.h"

#define DLH_EST_RANKS 1024   /* most ranks an estimate covers (DLH_RANKS_MAX) */
/* Seconds a node of a GPU's step graph takes at least, back to back after
 * the graph's one launch, where the type's calibration has no node_s (a
 * cache from before dlh-calib timed graphs): the order published for
 * H100-class GPUs */
#define DLH_EST_GRAPH_NODE_S 1.5e-6

/* One configuration to estimate: what the plan would run. */
struct dlh_estimate_in {
	const struct dlh_spec *spec;   /* the validated spec (model, epochs, data, ...) */
	long train_n, test_n;          /* images trained on per epoch and evaluated
					  (train_limit/test_limit applied) */
	int c, h, w, classes;          /* input shape and classes (28x28x1, 10) */
	int ranks;                     /* ranks = devices */
	int nodes;                     /* nodes they span (1 = shared memory only) */
	int batch[DLH_EST_RANKS];      /* per-rank batch; sums to the global batch */
	const struct dlh_calib_dev *dev[DLH_EST_RANKS];   /* each rank's device's speeds */
	double watts_busy[DLH_EST_RANKS];  /* each rank's device's power training */
	double watts_idle[DLH_EST_RANKS];  /* and waiting */
	/* GPUs sum their gradients with NCCL: a ring over a node's GPUs on their
	 * link, and one over the nodes on the network (0: CPU ranks, which sum in
	 * shared memory and over MPI as calibrated) */
	double link_alpha, link_beta;  /* a node's GPUs: seconds a ring step, seconds a byte */
	double net_alpha, net_beta;    /* between nodes */
};

/* The prediction (and, once a run ended, what was measured). */
struct dlh_estimate {
	double step_s;          /* one optimizer step (slowest rank + sync) */
	double compute_s;       /* of which the slowest rank's forward + backward (the
				   update and the metrics line are the rest of
				   step_s besides comm_s) */
	double comm_s;          /* of which the gradient sum not hidden behind backprop */
	double epoch_s;         /* one epoch: steps + its evaluation pass */
	double startup_s;       /* launch, data decode, model init before the first step,
				   and the exit after the last (final checkpoint, files,
				   MPI_Finalize): the run's time outside its loop */
	double total_s;         /* whole run: startup + epochs + checkpoints */
	double joules;          /* energy of the devices held, over total_s */
	double mem_bytes;       /* peak memory of the largest rank */
	double comm_bytes;      /* bytes each rank sends per step */
	long steps;             /* optimizer steps of the run */
	long step_nodes;        /* a GPU rank's step: the kernels, GEMMs and copies of its
				   CUDA graph the estimate prices (an allreduce's calls
				   besides; 0: no GPU rank) */
	/* the uncorrected terms that sum to total_s, which the history refits
	   (negative in an actual) */
	double raw_compute;     /* device work: steps, evaluations, checkpoints */
	double raw_comm;        /* gradient sums over the run */
	double raw_startup;     /* startup_s before correction */
	double raw_step;        /* step_s before correction: the white box's own step */
	char source[160];       /* what the devices' figures are: "cpu measured;
				   H100 measured on it (GPU)", "A100 pool peak
				   figures (not calibrated)" ("" in an actual) */
	char device[DLH_CORR_DEVICE];   /* the ranks' device types in rank order, each
				   once, '+'-joined ("cpu", "H100", "A100+H100"):
				   the history's key for a correction of their own */
	const char *corrected;  /* whose correction scaled it: "" (none), "all runs",
				   or "runs on DEVICE" */
};

/* Fills out for in on calibration cal, with the correction factors corr
 * (NULL = none; see dlh_history_fit). Returns 0, or -EINVAL with err naming
 * the problem (a model the cost module refuses, no calibration for a device). */
int dlh_estimate(const struct dlh_estimate_in *in, const struct dlh_calib *cal,
		 const struct dlh_correction *corr, struct dlh_estimate *out,
		 char *err, size_t errlen);

/* A GPU rank's training step as the estimate prices it, part by part, as
 * dlh-train --gpu-profile measures a graphed step: to compare them. */
struct dlh_estimate_parts {
	int nlayers;                           /* the stack's layers */
	const char *kind[DLH_COST_LAYERS];     /* "conv", "relu", ... */
	double fwd_s[DLH_COST_LAYERS];         /* each layer's forward (0: run by an earlier
						  layer's kernels, fused) */
	double bwd_s[DLH_COST_LAYERS];         /* and backward */
	double input_s;                        /* the step's values and rows copied in, the
						  batch gathered */
	double loss_s;                         /* the loss kernel */
	double update_s;                       /* the optimizer (and bf16's weight cast) */
	double step_s;                         /* the step (the parts' sum, at least the
						  host's share) */
	long nodes;                            /* the graph's nodes priced */
};

/* Fills out for rank r of in (a GPU's: its device's figures in cal), no
 * correction. Returns 0, or -EINVAL with err (a CPU rank, a model the cost
 * module refuses, no calibration for its device). */
int dlh_estimate_parts(const struct dlh_estimate_in *in, const struct dlh_calib *cal, int r,
		       struct dlh_estimate_parts *out, char *err, size_t errlen);

/* Appends the text of jobs/<id>/estimate: key=value lines of pred; with
 * act (NULL before the run ends) each measured key also as actual_KEY= and
 * error_KEY= in % ((actual - predicted) / actual). Returns 0, or -ENOMEM. */
int dlh_estimate_format(const struct dlh_estimate *pred, const struct dlh_estimate *act,
			struct dlh_buf *out);

/* Reads the predicted values back from the text dlh_estimate_format wrote
 * (the actual_ and error_ lines are skipped). Returns 0, or -EINVAL when a
 * predicted key is missing. */
int dlh_estimate_parse(const char *text, struct dlh_estimate *pred);

/* Reads what a finished run measured from its job directory (metrics.csv,
 * rank_times, result) and its wall time into act; fields it cannot know stay
 * negative. Returns 0, or -errno (-ENOENT: the run left no metrics). */
int dlh_estimate_actual(const char *job_dir, double wall_s, struct dlh_estimate *act);

/* Appends (predicted, actual) of a finished run to the history file
 * (STATE/history). Returns 0, or -errno. */
int dlh_history_add(const char *state_dir, const struct dlh_estimate *pred,
		    const struct dlh_estimate *act);

/* Refits corr by least squares on the history (identity factors with fewer
 * runs than it needs): the factors of all runs, and those of each device
 * key (dlh_estimate.device) with enough runs of its own, which an estimate
 * on that key takes instead. Returns the runs used, or -errno. */
int dlh_history_fit(const char *state_dir, struct dlh_correction *corr);

#endif
