/* shm.c - the gradient sum and optimizer step of ranks that share one node's memory */
#include "engine/train/shm.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define LINE_FLOATS 16   /* floats in a 64-byte cache line */
#define SUM_BLOCK 2048   /* floats summed, then updated, at a time (8 KiB) */
#define READY_FLOATS DLT_SHM_MAX_BUCKETS   /* the buckets' counters (one uint each) */
/* A step's barrier polls, then sleeps. Where this rank's waits have been
 * short (ranks in step: microseconds), it polls up to SPIN_LONG_NS, since a
 * futex wake-up costs tens of microseconds per step; where they have been
 * long (a slower rank beside it: milliseconds), polling is futile and would
 * burn the core (or, under a CPU quota, the quota the rank computes with),
 * so it sleeps after SPIN_SHORT_NS. */
#define SPIN_LONG_NS 500000
#define SPIN_SHORT_NS 20000

/* The step's barrier, in the first cache line of rank 0's segment. */
struct bar {
	atomic_uint count;      /* ranks arrived in this generation */
	atomic_uint gen;        /* bumped by the last to arrive (the futex word) */
	atomic_uint sleepers;   /* ranks in FUTEX_WAIT on gen */
};
_Static_assert(sizeof(struct bar) <= LINE_FLOATS * sizeof(float), "the barrier fits a line");
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "lock-free atomics are address-free across processes");

/* n rounded up to whole cache lines of floats. */
static size_t pad(size_t n)
{
	return (n + LINE_FLOATS - 1) / LINE_FLOATS * LINE_FLOATS;
}

void dlt_shm_slice(size_t n, int k, const int *weight, int r, size_t *lo, size_t *hi)
{
	size_t lines = pad(n) / LINE_FLOATS, before = 0, total = 0, a, b;

	for (int i = 0; i < k; i++) {
		size_t w = weight ? (size_t)weight[i] : 1;

		before += i < r ? w : 0;
		total += w;
	}
	a = lines * before / total;
	b = lines * (before + (weight ? (size_t)weight[r] : 1)) / total;

	*lo = a * LINE_FLOATS < n ? a * LINE_FLOATS : n;
	*hi = b * LINE_FLOATS < n ? b * LINE_FLOATS : n;
}

void dlt_shm_update_weights(const int *batch, int k, int *weight)
{
	int most = 0;

	for (int r = 0; r < k; r++)
		most = batch[r] > most ? batch[r] : most;
	for (int r = 0; r < k; r++)
		weight[r] = 10L * batch[r] >= 9L * most ? batch[r] : 0;
}

int dlt_shm_possible(MPI_Comm comm)
{
	MPI_Comm node;
	int size, nsize;

	MPI_Comm_size(comm, &size);
	if (size < 2 || size > DLT_SHM_MAX_RANKS)
		return 0;
	MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
	MPI_Comm_size(node, &nsize);
	MPI_Comm_free(&node);
	return nsize == size;
}

int dlt_shm_create(struct dlt_shm *s, MPI_Comm comm, size_t nparams, int nstate,
		   const int *weight, char *err, size_t errlen)
{
	const size_t slot = pad(nparams + DLT_GRAD_EXTRA);
	MPI_Aint bytes;
	MPI_Info info;
	float *base;
	int rc;

	memset(s, 0, sizeof *s);
	s->comm = comm;
	s->leaders = MPI_COMM_NULL;
	s->nodes = 1;
	s->nparams = nparams;
	s->nstate = nstate;
	MPI_Comm_rank(comm, &s->rank);
	MPI_Comm_size(comm, &s->ranks);
	if (s->ranks > DLT_SHM_MAX_RANKS) {
		snprintf(err, errlen, "shared-memory reduction: %d ranks on one node, at most %d",
			 s->ranks, DLT_SHM_MAX_RANKS);
		return -EINVAL;
	}
	/* rank 0's segment: the barrier's line, params, state, its slot; the
	 * others' only their slot */
	bytes = (MPI_Aint)((s->rank == 0 ? LINE_FLOATS + READY_FLOATS + pad(nparams) +
			    pad(nparams * (size_t)nstate) : 0) + slot) * (MPI_Aint)sizeof(float);
	/* each rank's segment on its own pages, placed near the rank (first touch) */
	MPI_Info_create(&info);
	MPI_Info_set(info, "alloc_shared_noncontig", "true");
	MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
	rc = MPI_Win_allocate_shared(bytes, (int)sizeof(float), info, comm, &base, &s->win);
	MPI_Comm_set_errhandler(comm, MPI_ERRORS_ARE_FATAL);
	MPI_Info_free(&info);
	if (rc != MPI_SUCCESS) {
		snprintf(err, errlen, "shared-memory reduction: cannot allocate %ld bytes of "
			 "shared memory (is /dev/shm full?)", (long)bytes);
		return -ENOMEM;
	}
	for (int r = 0; r < s->ranks; r++) {
		MPI_Aint size;
		int unit;
		float *p;

		MPI_Win_shared_query(s->win, r, &size, &unit, &p);
		if (r == 0) {
			s->bar = p;
			p += LINE_FLOATS;
			s->ready = p;
			p += READY_FLOATS;
			s->params = p;
			s->state = p + pad(nparams);
			p += pad(nparams) + pad(nparams * (size_t)nstate);
		}
		s->slot[r] = p;
	}
	dlt_shm_slice(nparams, s->ranks, weight, s->rank, &s->lo, &s->hi);
	/* one passive epoch for the whole run; MPI_Win_sync orders the stores */
	MPI_Win_lock_all(MPI_MODE_NOCHECK, s->win);
	memset(s->slot[s->rank], 0, slot * sizeof(float));
	if (s->rank == 0) {
		memset(s->state, 0, nparams * (size_t)nstate * sizeof(float));
		memset(s->bar, 0, LINE_FLOATS * sizeof(float));
		memset(s->ready, 0, READY_FLOATS * sizeof(float));
	}
	dlt_shm_fence(s);
	return 0;
}

void dlt_shm_destroy(struct dlt_shm *s)
{
	if (!s->params)
		return;
	if (s->leaders != MPI_COMM_NULL)
		MPI_Comm_free(&s->leaders);
	dlt_shm_fence(s);
	MPI_Win_unlock_all(s->win);
	MPI_Win_free(&s->win);
	memset(s, 0, sizeof *s);
}

void dlt_shm_fence(const struct dlt_shm *s)
{
	MPI_Win_sync(s->win);
	MPI_Barrier(s->comm);
	MPI_Win_sync(s->win);
}

static long futex(atomic_uint *word, int op, unsigned val)
{
	/* not FUTEX_PRIVATE: the word is shared between processes */
	return syscall(SYS_futex, (uint32_t *)word, op, val, NULL, NULL, 0);
}

static int64_t mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* The step's barrier: every rank's stores before it (its gradients, its
 * slice of the model) are visible to every rank after it. A waiter polls
 * for SPIN_NS, then sleeps on a futex: ranks that keep pace (the usual
 * case, waits of microseconds) never enter the kernel, and a rank that
 * waits long for a slower one does not burn the core (or, under a CPU
 * quota, the quota) while it waits. */
static void bar_wait(struct dlt_shm *s)
{
	struct bar *b = s->bar;
	unsigned g = atomic_load_explicit(&b->gen, memory_order_acquire);

	if (atomic_fetch_add_explicit(&b->count, 1, memory_order_acq_rel) == (unsigned)s->ranks - 1) {
		/* the last: nobody passes until gen moves, so count can be reset first */
		atomic_store_explicit(&b->count, 0, memory_order_relaxed);
		atomic_store(&b->gen, g + 1);
		if (atomic_load(&b->sleepers))
			futex(&b->gen, FUTEX_WAKE, INT_MAX);
		return;
	}
	int64_t until = mono_ns() + (s->wait_ema < 0.5e-9 * SPIN_LONG_NS ? SPIN_LONG_NS : SPIN_SHORT_NS);

	for (int i = 1;; i++) {
		if (atomic_load_explicit(&b->gen, memory_order_acquire) != g)
			return;
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#endif
		if (i % 64 == 0 && mono_ns() > until)
			break;
	}
	/* seq_cst both sides: either the last sees sleepers, or FUTEX_WAIT
	 * sees gen moved and returns at once */
	atomic_fetch_add(&b->sleepers, 1);
	while (atomic_load(&b->gen) == g)
		futex(&b->gen, FUTEX_WAIT, g);
	atomic_fetch_sub(&b->sleepers, 1);
}

/* The step's barrier, its seconds added to s->t_wait. */
static void timed_fence(struct dlt_shm *s)
{
	int64_t a = mono_ns();
	double w;

	bar_wait(s);
	w = 1e-9 * (double)(mono_ns() - a);
	s->t_wait += w;
	s->wait_ema += 0.1 * (w - s->wait_ema);
}

/* d[i] = the sum over ranks of slot[r][i], in rank order, for i in [lo, hi). */
static void sum_slice(const struct dlt_shm *s, float *restrict d, size_t lo, size_t hi)
{
	if (s->ranks == 2) {
		const float *restrict a = s->slot[0], *restrict b = s->slot[1];

		for (size_t i = lo; i < hi; i++)
			d[i] = a[i] + b[i];
		return;
	}
	for (size_t i = lo; i < hi; i++) {
		float v = s->slot[0][i];

		for (int r = 1; r < s->ranks; r++)
			v += s->slot[r][i];
		d[i] = v;
	}
}

int dlt_shm_multi(struct dlt_shm *s, MPI_Comm world, const size_t *lo, const size_t *hi, int nb,
		  char *err, size_t errlen)
{
	int me, lead = s->rank == 0;
	if (nb > DLT_SHM_MAX_BUCKETS) {
		snprintf(err, errlen, "shared-memory reduction: %d buckets, at most %d", nb,
			 DLT_SHM_MAX_BUCKETS);
		return -EINVAL;
	}
	MPI_Comm_rank(world, &me);
	MPI_Comm_split(world, lead ? 0 : MPI_UNDEFINED, me, &s->leaders);
	MPI_Allreduce(&lead, &s->nodes, 1, MPI_INT, MPI_SUM, world);
	s->nb = nb > 0 ? nb : 1;
	for (int b = 0; b < nb; b++) {
		s->blo[b] = lo[b];
		s->bhi[b] = hi[b];
	}
	if (nb == 0) {
		s->blo[0] = 0;
		s->bhi[0] = s->nparams + DLT_GRAD_EXTRA;
	}
	return 0;
}

/* The leader: sums (over the node's slots, into its own, in rank order)
 * and starts the leaders' allreduce of every bucket in order that every
 * rank of the node has marked in this step; lets MPI progress the rest. */
static void leader_progress(struct dlt_shm *s)
{
	atomic_uint *ready = s->ready;
	const unsigned want = (unsigned)s->ranks * (s->done + 1);
	float *g = s->slot[0];
	int flag;

	while (s->started < s->nb &&   /* as a difference: the counters wrap */
	       (int)(atomic_load_explicit(&ready[s->started], memory_order_acquire) - want) >= 0) {
		const int b = s->started;
		for (int r = 1; r < s->ranks; r++) {
			const float *restrict x = s->slot[r];
			for (size_t i = s->blo[b]; i < s->bhi[b]; i++)
				g[i] += x[i];
		}
		MPI_Iallreduce(MPI_IN_PLACE, g + s->blo[b], (int)(s->bhi[b] - s->blo[b]), MPI_FLOAT,
			       MPI_SUM, s->leaders, &s->req[b]);
		s->started++;
	}
	if (s->started)
		MPI_Testall(s->started, s->req, &flag, MPI_STATUSES_IGNORE);
}

void dlt_shm_mark(struct dlt_shm *s, int b)
{
	atomic_uint *ready = s->ready;
	atomic_fetch_add_explicit(&ready[b], 1, memory_order_release);
	s->marked = b + 1;
	if (s->rank == 0)
		leader_progress(s);
}

/* Several nodes: the step after backward. The leader waits for its node's
 * marks and the leaders' sums; the global sum is then in slot[0]. */
static void multi_step(struct dlt_shm *s, const struct dlt_optim *o, float lr, unsigned long t,
		       double sums[DLT_GRAD_EXTRA])
{
	const size_t np = s->nparams;
	while (s->marked < s->nb)
		dlt_shm_mark(s, s->marked);
	if (s->rank == 0) {
		int64_t a = mono_ns();
		while (s->started < s->nb) {   /* a rank of the node is still in backward */
			leader_progress(s);
			if (s->started < s->nb)
				sched_yield();
		}
		MPI_Waitall(s->nb, s->req, MPI_STATUSES_IGNORE);
		s->t_leaders += 1e-9 * (double)(mono_ns() - a);
	}
	timed_fence(s);
	const float *g = s->slot[0];
	for (int k = 0; k < DLT_GRAD_EXTRA; k++)
		sums[k] = g[np + k];
	if (s->hi > s->lo)
		dlt_optim_step_strided(o, lr, t, s->params + s->lo, s->state + s->lo, np,
				       g + s->lo, s->hi - s->lo);
	timed_fence(s);
	s->done++;
	s->marked = 0;
	s->started = 0;
}

void dlt_shm_step(struct dlt_shm *s, const struct dlt_optim *o, float lr, unsigned long t,
		  double sums[DLT_GRAD_EXTRA])
{
	const size_t np = s->nparams;
	if (s->nodes > 1) {
		multi_step(s, o, lr, t, sums);
		return;
	}
	/* the sum goes into this rank's own slot: no other rank reads lo..hi
	 * of it after the fence below has let them all start reducing */
	float *g = s->slot[s->rank];

	timed_fence(s);
	for (int k = 0; k < DLT_GRAD_EXTRA; k++) {
		float v = s->slot[0][np + k];

		for (int r = 1; r < s->ranks; r++)   /* in float and rank order, as MPI would */
			v += s->slot[r][np + k];
		sums[k] = v;
	}
	/* block by block, so each block's sum is still in L1 when the optimizer
	 * reads it (the update is elementwise: blocks change no result) */
	for (size_t lo = s->lo; lo < s->hi; lo += SUM_BLOCK) {
		size_t hi = lo + SUM_BLOCK < s->hi ? lo + SUM_BLOCK : s->hi;

		sum_slice(s, g, lo, hi);
		dlt_optim_step_strided(o, lr, t, s->params + lo, s->state + lo, np, g + lo, hi - lo);
	}
	timed_fence(s);
}
