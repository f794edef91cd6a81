/* shm.h - the gradient sum and optimizer step of ranks that share one node's memory
 *
 * When every rank runs on one node, an allreduce through MPI copies each
 * gradient into MPI's buffers, reduces it, and copies the sum back into
 * every rank, which then all run the same optimizer step over all the
 * parameters. Here the ranks instead share one MPI-3 window: each rank's
 * backward writes its gradients into its own slot; after a barrier, rank r
 * sums slice r of [0, nparams) over the slots in rank order and runs the
 * optimizer on that slice of the one shared copy of the parameters and the
 * optimizer state; a second barrier ends the step. Every rank reads each
 * gradient once and updates 1/ranks of the model; nothing is copied back.
 *
 * The sum is taken in rank order in float, so with 2 ranks it is bit for
 * bit MPI's (a + b is commutative); the update is the single-process update
 * on the global batch, as with MPI.
 *
 * Ranks on several nodes (dlt_shm_multi): each node's ranks share a window
 * as above; the node's leader (its rank 0) sums each gradient bucket over
 * its node's slots as soon as every rank there has written it (each rank
 * marks a bucket done as backward produces it), and starts an
 * MPI_Iallreduce of that bucket among the leaders while backward goes on.
 * After backward the leaders wait for their buckets; the global sum is
 * then in the leader's slot, and every rank of the node updates its slice
 * of the node's copy from it. Every node's copy gets the same update: the
 * single-process update on the global batch, to float rounding (the sum's
 * order differs). */
#ifndef DLT_SHM_H
#define DLT_SHM_H

#include <mpi.h>
#include <stddef.h>

#include "engine/train/optim.h"

#define DLT_SHM_MAX_RANKS 256   /* most ranks on one node */
#define DLT_SHM_MAX_BUCKETS 64  /* most gradient buckets summed across nodes */

/* Floats after each rank's gradients that are summed with them: the loss
 * sum, the correct count, and the harness's two requests (checkpoint,
 * suspend: ctl.h), so that agreeing on them costs no synchronisation of
 * its own. The MPI paths carry the same floats. */
#define DLT_GRAD_EXTRA 4

/* The shared window and this rank's view of it. */
struct dlt_shm {
	MPI_Comm comm;                        /* the ranks (a node's) */
	MPI_Win win;                          /* the shared memory */
	int rank, ranks;                      /* in comm */
	size_t nparams;                       /* floats in params and each slot's gradients */
	int nstate;                           /* optimizer state arrays */
	void *bar;                            /* the step's barrier (shm.c) */
	float *params;                        /* nparams, one copy for the node */
	float *state;                         /* nstate arrays of nparams, one after the other */
	float *slot[DLT_SHM_MAX_RANKS];       /* rank r's gradients, then DLT_GRAD_EXTRA floats */
	size_t lo, hi;                        /* this rank's slice of [0, nparams) */
	double t_wait;                        /* seconds in dlt_shm_step's barriers (waiting) */
	double wait_ema;                      /* a barrier's recent wait, seconds (smoothed) */
	/* several nodes (dlt_shm_multi) */
	MPI_Comm leaders;                     /* the nodes' leaders; MPI_COMM_NULL elsewhere */
	int nodes;                            /* nodes of the run; 1 = this node only */
	int nb;                               /* buckets */
	size_t blo[DLT_SHM_MAX_BUCKETS], bhi[DLT_SHM_MAX_BUCKETS];   /* their float ranges */
	void *ready;                          /* per bucket, how many marks every rank made */
	unsigned done;                        /* steps completed */
	int marked;                           /* buckets this rank marked in this step */
	int started;                          /* leader: buckets allreduced in this step */
	MPI_Request req[DLT_SHM_MAX_BUCKETS]; /* leader: their requests */
	double t_leaders;                     /* leader: seconds waiting for the leaders' sums */
};

/* Returns 1 when all ranks of comm (more than one) share this node's
 * memory, so dlt_shm_create can serve them; else 0. Collective. */
int dlt_shm_possible(MPI_Comm comm);

/* Allocates the window for nparams parameters and nstate optimizer state
 * arrays (zeroed) over the ranks of comm; rank r sums and updates a slice
 * proportional to weight[r] (NULL = equal slices; ranks on slower devices
 * get smaller batches and so smaller slices). Collective. Returns 0, or
 * -ENOMEM / -EINVAL with a message in err. */
int dlt_shm_create(struct dlt_shm *s, MPI_Comm comm, size_t nparams, int nstate,
		   const int *weight, char *err, size_t errlen);

/* Makes s (over one node's ranks, comm of dlt_shm_create) sum across the
 * nodes of world: nb buckets [lo[b], hi[b]) of the gradients and the extra
 * floats, in the order backward produces them (nb 0: one bucket of all).
 * Collective over world. Returns 0, or -EINVAL with err. */
int dlt_shm_multi(struct dlt_shm *s, MPI_Comm world, const size_t *lo, const size_t *hi, int nb,
		  char *err, size_t errlen);

/* Several nodes: this rank has written bucket b of its gradients (buckets
 * in order; b is the next one). The leader starts what is ready. */
void dlt_shm_mark(struct dlt_shm *s, int b);

/* Frees the window. Collective. */
void dlt_shm_destroy(struct dlt_shm *s);

/* A barrier that also makes every rank's stores to the window visible to
 * all the others. Collective. */
void dlt_shm_fence(const struct dlt_shm *s);

/* The step after every rank wrote its gradients (and its loss sum and
 * DLT_GRAD_EXTRA floats after them) into its slot: sums slice lo..hi of the
 * gradients over the ranks (several nodes: over every rank of every node),
 * runs the optimizer (lr, 1-based step t) on that slice of params and
 * state, and sets sums[] to the sums of the extra floats over the ranks.
 * Collective; on return every rank sees the whole updated model. */
void dlt_shm_step(struct dlt_shm *s, const struct dlt_optim *o, float lr, unsigned long t,
		  double sums[DLT_GRAD_EXTRA]);

/* The update weights of k ranks with these batches: a rank's batch where it
 * is at least 9/10 of the largest, else 0. With devices of different speeds
 * (batches by speed) the slow ranks then sum and update nothing: the step's
 * second barrier waits for the end of every rank's slice, and a slow rank's
 * slice, however small, would make the fast ranks wait there for it (a rank
 * throttled by a CPU quota may sit out the rest of its period in the middle
 * of it); the fast ranks do the whole update, a small part of a step. Equal
 * batches (and the +-1 of an uneven global batch) keep every rank's share. */
void dlt_shm_update_weights(const int *batch, int k, int *weight);

/* Slice r of n floats over k ranks, proportional to weight (k entries, or
 * NULL for equal): cache-line aligned boundaries so two ranks never write
 * the same line. Sets [*lo, *hi). */
void dlt_shm_slice(size_t n, int k, const int *weight, int r, size_t *lo, size_t *hi);

#endif
