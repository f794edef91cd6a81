/* estimate.c - what a run of the built-in trainer will cost: a white-box
 * model of dlh-train's step (Paleo: every GEMM and memory pass of every
 * layer at the device's measured speed for that shape; BSP: the slowest
 * rank, then the gradient sum), plus evaluation, checkpoints and startup */
#include "engine/plan/estimate.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/contract/contract.h"
#include "engine/plan/cost.h"
#include "engine/train/gpu.h"
#include "engine/train/lrfind.h"
#include "engine/train/plan.h"
#include "engine/train/prefetch.h"

/* the characters of a device key: the pool's type names, '+'-joined */
#define DEVICE_CHARS "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-+"

/* What dlh-train does, mirrored (engine/train/main.c, layers.c, prefetch.h) */
#define EST_EVAL_ROWS 512         /* DLT_EVAL_ROWS: fewest rows per MLP eval batch */
#define EST_CNN_EVAL_ROWS 64      /* DLT_CNN_EVAL_ROWS */
#define EST_DENSE_BIG (1 << 20)   /* DLT_DENSE_BIG: weights of a "big" dense layer */
#define EST_DENSE_DW_ROWS 128     /* DLT_DENSE_DW_ROWS */
#define EST_DENSE_TRANS_ROWS 32   /* DLT_DENSE_TRANS_ROWS */
#define EST_CKPT_HEADER 4096      /* bytes of a checkpoint besides the floats */
#define EST_FILES_AT_EXIT 3       /* result, rank_times, run.info: small atomic writes */

#define F4 ((double)sizeof(float))

/* One rank's device as the estimator uses it. */
struct rdev {
	const struct dlh_calib_dev *d;
	double gemm_share;   /* GEMM speed factor with the node's other ranks busy */
	double bw_share;     /* DRAM bandwidth factor likewise */
	double floor_s;      /* a GPU's least seconds a kernel or GEMM takes: its launch
				(kernel_s), or in a CUDA graph a node's (node_s) */
	enum dlh_precision prec;   /* the GEMMs' arithmetic (a GPU's: the spec's) */
	long *nodes;         /* not NULL: counts the GPU calls priced (a step's graph) */
	struct dlh_estimate_parts *parts;   /* not NULL: a training pass's parts go there */
};

/* The shape of one layer, recovered from its costs. */
struct lshape {
	const char *kind;
	double in, out;      /* floats per sample */
	double k, o;         /* dense: inputs, outputs */
	double F, R, HW;     /* conv: filters, C k k, output pixels (same padding) */
	double boff;         /* dense: the float offset of its biases in the parameters */
	int ksize;           /* conv kernel side (1: no im2col) */
	int first;           /* the first layer with parameters: no input gradient */
};

/* Linear interpolation of v at fractional index x of an n-point grid. */
static double lerp_at(const double *v, int n, double x)
{
	if (x <= 0)
		return v[0];
	if (x >= n - 1)
		return v[n - 1];
	int i = (int)x;
	return v[i] + (v[i + 1] - v[i]) * (x - i);
}

/* Fractional grid index of size s on a grid whose points grow by ratio from lo. */
static double grid_pos(double s, double lo, double ratio)
{
	return s <= lo ? 0.0 : log(s / lo) / log(ratio);
}

typedef const float (*gemm_grid)[DLH_CALIB_GEMM_N][DLH_CALIB_GEMM_N];

/* FLOP/s of an m x n x k sgemm on the calibrated grid g, whose first gn
 * dims were measured: trilinear in log(m), log(n), log(k) (held at the
 * grid's edges), and with geo (a GPU's grid) in log(rate) too; 0 when the
 * grid has no rate there. A GPU's rates span five orders of magnitude
 * over the grid, because a small GEMM costs its latency whatever its size
 * (its rate grows as m n k): between two points a rate interpolated
 * linearly is up to 1.25 times too high per dimension, almost twice in
 * all three, where the geometric mean follows such a power law exactly
 * (a corner not measured, 0: the linear mean). A CPU's rates
 * span a few times, where the two agree. */
static double grid_rate(gemm_grid g, int gn, double m, double n, double k, int geo)
{
	static const int dims[DLH_CALIB_GEMM_N] = DLH_CALIB_GEMM_DIMS;
	const double ratio = (double)dims[1] / dims[0];
	double x[3] = { grid_pos(m, dims[0], ratio), grid_pos(n, dims[0], ratio),
			grid_pos(k, dims[0], ratio) };
	int lo[3];
	double f[3], rate = 0.0, lg = 0.0;
	for (int a = 0; a < 3; a++) {
		x[a] = x[a] > gn - 1 ? gn - 1 : x[a];
		lo[a] = (int)x[a] < gn - 1 ? (int)x[a] : gn - 2;
		f[a] = x[a] - lo[a];
	}
	for (int c = 0; c < 8; c++) {
		int i = lo[0] + (c & 1), j = lo[1] + (c >> 1 & 1), l = lo[2] + (c >> 2 & 1);
		double w = (c & 1 ? f[0] : 1 - f[0]) * (c >> 1 & 1 ? f[1] : 1 - f[1]) *
			   (c >> 2 & 1 ? f[2] : 1 - f[2]);
		if (w <= 0)
			continue;   /* (at a grid's point: the corners past it) */
		rate += w * g[i][j][l];
		if (g[i][j][l] > 0)
			lg += w * log(g[i][j][l]);
		else
			geo = 0;
	}
	if (geo)
		return exp(lg);
	return rate > 0 ? rate : 0.0;
}

/* Which operands of a GEMM are transposed (row-major, as dlh-train calls them). */
enum trans { NN, NT, TN, TT };

/* FLOP/s of an m x n x k sgemm of form t on d: its own grid where that
 * form's was measured, else the untransposed grid times the form's mean
 * factor; the large-shape rate without a grid. */
static double gemm_rate(const struct dlh_calib_dev *d, enum trans t, double m, double n,
			double k);

/* FLOP/s of an m x n x k GEMM of form t on rd in its precision: FP32 as
 * calibrated; tf32 and bf16 (the tensor cores) at the TF32 grid's rate
 * where it was measured, a transposed form at FP32's ratio to the
 * untransposed at that shape. */
static double gemm_rate_at(const struct rdev *rd, enum trans t, double m, double n, double k)
{
	const struct dlh_calib_dev *d = rd->d;
	double r = gemm_rate(d, t, m, n, k);
	if (rd->prec == DLH_PRECISION_FP32 || !d->grid_tf32 || !d->grid)
		return r;
	const int gn = dlh_calib_grid_n(d);
	double tc = grid_rate(d->gemm_tf32, gn, m, n, k, d->gpu > 0);
	double nn = grid_rate(d->gemm, gn, m, n, k, d->gpu > 0);
	return tc > 0 && nn > 0 ? tc * (t == NN ? 1.0 : r / nn) : r;
}

static double gemm_rate(const struct dlh_calib_dev *d, enum trans t, double m, double n,
			double k)
{
	const double f[4] = { 1.0, d->gemm_nt, d->gemm_tn, d->gemm_tt };
	double rate = 0.0;
	if (t == NT || t == TN) {
		int g = t == NT ? 0 : 1;   /* DLH_CALIB_GEMM_TR_NAMES order */
		if (d->grid_tr[g] &&
		    (rate = grid_rate(d->gemm_tr[g], dlh_calib_grid_n(d), m, n, k, d->gpu > 0)) > 0)
			return rate;
	}
	if (d->grid)
		rate = grid_rate(d->gemm, dlh_calib_grid_n(d), m, n, k, d->gpu > 0);
	return (rate > 0 ? rate : d->gemm_flops) * (f[t] > 0 ? f[t] : 1.0);
}

/* Seconds of an m x n x k sgemm of form t on rd. */
static double gemm_s(const struct rdev *rd, enum trans t, double m, double n, double k)
{
	if (m < 1 || n < 1 || k < 1)
		return 0.0;
	double s = 2.0 * m * n * k / (gemm_rate_at(rd, t, m, n, k) * rd->gemm_share);
	/* a GPU's GEMM reads its operands (BF16 in bf16) and writes its FP32
	 * product at least once */
	if (rd->d->gpu > 0 && rd->d->mem_bw > 0) {
		double in = rd->prec == DLH_PRECISION_BF16 ? 2.0 : F4;
		s = fmax(s, (in * (m * k + k * n) + F4 * m * n) / rd->d->mem_bw);
	}
	return s;
}

/* Bytes/s of a pass over a working set of ws bytes: interpolated in
 * log(ws) between the calibrated sizes; DRAM speed (shared with the
 * node's other ranks) past the largest. */
static double bw_at(const struct rdev *rd, double ws)
{
	static const long sizes[DLH_CALIB_BW_N] = DLH_CALIB_BW_SIZES;
	const struct dlh_calib_dev *d = rd->d;
	double v[DLH_CALIB_BW_N];
	for (int i = 0; i < DLH_CALIB_BW_N; i++)
		v[i] = d->bw[i] > 0 ? d->bw[i] : d->mem_bw;
	v[DLH_CALIB_BW_N - 1] *= rd->bw_share;
	return lerp_at(v, DLH_CALIB_BW_N,
		       grid_pos(ws, (double)sizes[0], (double)sizes[1] / (double)sizes[0]));
}

/* Seconds to move bytes through memory (read + written) with working set ws. */
static double move_s(const struct rdev *rd, double bytes, double ws)
{
	return bytes > 0 ? bytes / bw_at(rd, ws) : 0.0;
}

/* An elementwise pass reading nread and writing one array of n floats. */
static double elem_s(const struct rdev *rd, double n, int nread)
{
	return move_s(rd, (nread + 1) * n * F4, (nread + 1) * n * F4);
}

/* Seconds to gather a batch of bytes (rows of random images) from a
 * shard of shard bytes: the trainer's gather as calibrated, else a copy.
 * The trainer's ranks each hold as many cores as ranks (the job's
 * cpuset): its prefetch thread takes its turns on them, so whoever
 * gathers, the step pays for it. */
static double gather_s(const struct rdev *rd, double bytes, double shard)
{
	if (rd->d->gather_bw > 0)
		return 2.0 * bytes / rd->d->gather_bw;
	return move_s(rd, 2.0 * bytes, shard);
}

/* Recovers layer shapes from the cost module's counts (cost.c builds the
 * same stack as dlh-train's net.c). Returns the layer count. */
static int shapes(const struct dlh_spec *spec, const struct dlh_model_cost *mc,
		  struct lshape *s)
{
	double in = (double)mc->in, off = 0.0;   /* the parameters before layer i */
	int conv = 0, seen_params = 0;
	for (int i = 0; i < mc->nlayers; i++) {
		const struct dlh_layer_cost *l = &mc->layer[i];
		struct lshape *x = &s[i];
		memset(x, 0, sizeof *x);
		x->kind = l->kind;
		x->in = in;
		x->out = (double)l->out;
		x->first = l->params && !seen_params;
		seen_params |= l->params > 0;
		if (!strcmp(l->kind, "dense")) {
			x->o = (double)l->out;
			x->k = in;
			x->boff = off + x->o * x->k;   /* (its weights first, as net.c) */
		} else if (!strcmp(l->kind, "conv")) {
			x->F = spec->conv_filters[conv];
			x->ksize = spec->conv_kernel[conv++];
			x->R = ((double)l->params - x->F) / x->F;
			x->HW = (double)l->out / x->F;
		}
		in = (double)l->out;
		off += (double)l->params;
	}
	return mc->nlayers;
}

/* Seconds of a pass over n elements that costs per_elem each (a
 * calibrated per-element figure of the trainer's own loop) or at least
 * an elementwise pass reading nread arrays. */
static double per_elem_s(const struct rdev *rd, double n, double per_elem, int nread)
{
	return fmax(n * per_elem, elem_s(rd, n, nread));
}

/* Forward seconds of layer s for n rows (train: a training pass, where
 * dropout draws its mask; evaluation copies). ReLU and pool after a conv
 * are fused into it (dlt_layer_fuse): they cost nothing of their own. */
static double fwd_s(const struct rdev *rd, const struct lshape *s, const struct lshape *prev,
		    double n, int train)
{
	if (!strcmp(s->kind, "dense"))
		return gemm_s(rd, NT, n, s->o, s->k) + elem_s(rd, n * s->o, 1);
	if (!strcmp(s->kind, "conv")) {
		double col = s->ksize > 1 ? elem_s(rd, s->R * s->HW, 1) : 0.0;
		return n * (col + gemm_s(rd, NN, s->F, s->HW, s->R) + elem_s(rd, s->F * s->HW, 1));
	}
	if (prev && !strcmp(prev->kind, "conv"))
		return 0.0;
	if (!strcmp(s->kind, "pool") && prev && !strcmp(prev->kind, "relu"))
		return 0.0;   /* relu after a conv was fused, and so is this */
	if (train && !strcmp(s->kind, "dropout"))
		return per_elem_s(rd, n * s->out, rd->d->dropout_s, 1);
	return elem_s(rd, n * s->out, 1);   /* relu, a lone pool */
}

/* Backward seconds of layer s for n rows (weight and input gradients). */
static double bwd_s(const struct rdev *rd, const struct lshape *s, const struct lshape *prev,
		    double n)
{
	if (!strcmp(s->kind, "dense")) {
		int big = s->k * s->o >= EST_DENSE_BIG;
		double t = 0.0;
		if (big)
			for (double r = 0; r < s->o; r += EST_DENSE_DW_ROWS)
				t += gemm_s(rd, TN, fmin(EST_DENSE_DW_ROWS, s->o - r), s->k, n);
		else
			t += gemm_s(rd, TN, s->o, s->k, n);
		t += elem_s(rd, n * s->o, 0);   /* bias gradient: column sums */
		if (s->first)
			return t;
		if (!big || n > EST_DENSE_TRANS_ROWS)
			return t + gemm_s(rd, NN, n, s->k, s->o);
		return t + gemm_s(rd, TT, s->k, n, s->o) + elem_s(rd, s->k * n, 1);
	}
	if (!strcmp(s->kind, "conv")) {
		double fhw = s->F * s->HW, col = s->ksize > 1 ? elem_s(rd, s->R * s->HW, 1) : 0.0;
		double t = elem_s(rd, fhw, 1) + elem_s(rd, fhw, 0) + col +
			   gemm_s(rd, NT, s->R, s->F, s->HW);
		if (!s->first)
			t += gemm_s(rd, TN, s->R, s->HW, s->F) + col;
		return n * t;
	}
	if (prev && !strcmp(prev->kind, "conv"))
		return 0.0;
	if (!strcmp(s->kind, "pool") && prev && !strcmp(prev->kind, "relu"))
		return 0.0;
	/* ReLU backward branches on each sign (dlt's relu_backward): a
	 * mispredicted branch every other element, not memory speed */
	if (!strcmp(s->kind, "relu"))
		return per_elem_s(rd, n * s->out, rd->d->relu_bwd_s, 2);
	if (!strcmp(s->kind, "dropout"))
		return per_elem_s(rd, n * s->out, rd->d->dropout_s, 1);
	return elem_s(rd, n * s->out, 2);
}

/* Forward (+ backward when train) seconds of the whole stack for n rows,
 * and the loss on the classes outputs. */
static double pass_s(const struct rdev *rd, const struct lshape *s, int nl, double n,
		     int train, double *bwd_last)
{
	double t = 0.0, b = 0.0;
	for (int i = 0; i < nl; i++) {
		const struct lshape *prev = i ? &s[i - 1] : NULL;
		t += fwd_s(rd, &s[i], prev, n, train);
		if (train) {
			double bi = bwd_s(rd, &s[i], prev, n);
			b += bi;
			if (bwd_last && s[i].first)
				*bwd_last = bi;
		}
	}
	return t + b + elem_s(rd, n * s[nl - 1].out, 2);   /* softmax, cross-entropy */
}

/* The value at x of a series v measured at sizes (DLH_CALIB_OPT_SIZES):
 * piecewise linear, the end segments extended (the first down to a
 * non-negative intercept at 0). 0 when the series was not measured. */
static double series_at(const double *v, double x)
{
	static const long sizes[DLH_CALIB_OPT_N] = DLH_CALIB_OPT_SIZES;
	int i = 0;
	for (int k = 0; k < DLH_CALIB_OPT_N; k++)
		if (v[k] <= 0)
			return 0.0;
	while (i < DLH_CALIB_OPT_N - 2 && x > sizes[i + 1])
		i++;
	double slope = (v[i + 1] - v[i]) / (double)(sizes[i + 1] - sizes[i]);
	if (x < sizes[0]) {
		double at0 = fmax(0.0, v[0] - slope * sizes[0]);
		return at0 + (v[0] - at0) * x / sizes[0];
	}
	return fmax(0.0, v[i] + slope * (x - sizes[i]));
}

/* Bytes an optimizer update moves per parameter: params and state read
 * and written, the gradient read. */
static double update_bytes(const struct dlh_spec *spec, int *nstate)
{
	*nstate = strcmp(spec->optimizer, "adam") ? 1 : 2;
	return F4 * (2.0 + 2.0 * *nstate + 1.0);
}

/* Seconds of the optimizer's update of n parameters on rd: the trainer's
 * own update as calibrated, else its memory traffic. */
static double update_s(const struct rdev *rd, const struct dlh_spec *spec, double n)
{
	int nstate;
	double bytes = update_bytes(spec, &nstate) * n;
	double t = series_at(strcmp(spec->optimizer, "adam") ? rd->d->sgd_s : rd->d->adam_s, n);
	return t > 0 ? t : move_s(rd, bytes, bytes);
}

/* 1 when in's batches are not the trainer's equal split. */
static int weighted(const struct dlh_estimate_in *in)
{
	long long global = 0;
	for (int i = 0; i < in->ranks; i++)
		global += in->batch[i];
	for (int i = 0; i < in->ranks; i++)
		if (in->batch[i] != (int)(global / in->ranks + (i < global % in->ranks)))
			return 1;
	return 0;
}

/* 1 when every rank holds the whole training set: unequal CPU batches
 * re-split during the run (plan.c passes dlh-train --rebalance). */
static int whole_set(const struct dlh_estimate_in *in)
{
	return in->spec->rebalance && in->spec->device != DLH_DEVICE_GPU && weighted(in);
}

/* Rank r's training rows: the whole set (whole_set), else its shard. */
static void train_rows(const struct dlh_estimate_in *in, int r, long *lo, long *hi);

/* The batches of in as dlh-train's plan holds them (engine/train/plan.h):
 * given (--rank-batches) exactly when they are not its equal split. */
static void trainer_plan(const struct dlh_estimate_in *in, struct dlt_plan *p)
{
	p->ranks = in->ranks;
	p->global_batch = 0;
	for (int i = 0; i < in->ranks && i < DLT_MAX_RANKS; i++) {
		p->batch[i] = in->batch[i];
		p->global_batch += in->batch[i];
	}
	p->weighted = weighted(in);
}

/* Rank r's items of n, as the trainer shards them (dlt_plan_range). */
static void shard(const struct dlh_estimate_in *in, long n, int r, long *lo, long *hi)
{
	struct dlt_plan p;
	trainer_plan(in, &p);
	dlt_plan_range(&p, n, r, lo, hi);
}

/* The most rows rank r's buffers hold: its batch, or when it may be
 * re-split (whole_set) the trainer's cap on it (dlt_plan_cap). */
static double most_rows(const struct dlh_estimate_in *in, int r)
{
	struct dlt_plan p;
	if (!whole_set(in))
		return in->batch[r];
	trainer_plan(in, &p);
	return dlt_plan_cap(&p, r);
}

static void train_rows(const struct dlh_estimate_in *in, int r, long *lo, long *hi)
{
	if (whole_set(in)) {
		*lo = 0;
		*hi = in->train_n;
		return;
	}
	shard(in, in->train_n, r, lo, hi);
}

/* Seconds of dlh-train's shared-memory gradient sum of n parameters over
 * ranks on one node: its two barriers and each rank's sum of its slice
 * over the ranks' slots (the slice's update is update_s). The calibrated
 * step less a local update of the slice when it was measured on as many
 * ranks; else barriers and the slots' memory traffic. */
static double shm_sum_s(const struct rdev *rd, const struct dlh_calib *cal, double n, int ranks)
{
	double slice = n / ranks;
	double step = (int)cal->shm_ranks == ranks ? series_at(cal->shm_s, n) : 0.0;
	double local = series_at(rd->d->sgd_s, slice);
	if (step > 0 && local > 0)
		return fmax(2.0 * cal->sync_s, step - local);
	return 2.0 * cal->sync_s + move_s(rd, slice * F4 * (ranks + 1), slice * F4 * (ranks + 1));
}

/* Checks in and cal. Returns 0, or -EINVAL with err naming the problem. */
static int check_in(const struct dlh_estimate_in *in, const struct dlh_calib *cal,
		    char *err, size_t errlen)
{
	if (in->ranks < 1 || in->ranks > DLH_EST_RANKS || in->nodes < 1 || in->nodes > in->ranks) {
		snprintf(err, errlen, "estimate: %d ranks on %d nodes", in->ranks, in->nodes);
		return -EINVAL;
	}
	if (!cal || cal->when <= 0) {
		snprintf(err, errlen, "estimate: no calibration (STATE/%s)", DLH_CALIB_FILE);
		return -EINVAL;
	}
	if (in->train_n < 1 || in->test_n < 0 || in->spec->epochs < 1) {
		snprintf(err, errlen, "estimate: %ld training images, %ld test, %d epochs",
			 in->train_n, in->test_n, in->spec->epochs);
		return -EINVAL;
	}
	for (int r = 0; r < in->ranks; r++) {
		if (!in->dev[r] || in->dev[r]->gemm_flops <= 0 || in->dev[r]->mem_bw <= 0) {
			snprintf(err, errlen, "estimate: rank %d's device %s%s%s has no calibration", r,
				 in->dev[r] ? "\"" : "", in->dev[r] ? in->dev[r]->type : "(none)",
				 in->dev[r] ? "\"" : "");
			return -EINVAL;
		}
		if (in->batch[r] < 1) {
			snprintf(err, errlen, "estimate: rank %d's batch is %d", r, in->batch[r]);
			return -EINVAL;
		}
	}
	return 0;
}

/* Ring allreduce of bytes over n ranks on a link of latency alpha and
 * seconds per byte beta: 2(n-1) latencies, 2(n-1)/n of the bytes through
 * each rank. */
static double ring_ab(double alpha, double beta, int n, double bytes)
{
	if (n < 2)
		return 0.0;
	return 2.0 * (n - 1) * alpha + 2.0 * (n - 1) / n * bytes * beta;
}

/* The same within a node (its ranks' allreduce, calibrated on this node). */
static double ring_s(const struct dlh_calib *cal, int n, double bytes)
{
	return ring_ab(cal->ar_alpha, cal->ar_beta, n, bytes);
}

/* The same between nodes: on the slowest link measured to another node
 * (dlh-calib --phase link), else as within one. */
static double net_ring_s(const struct dlh_calib *cal, int n, double bytes)
{
	if (cal->net_alpha > 0 || cal->net_beta > 0)
		return ring_ab(cal->net_alpha, cal->net_beta, n, bytes);
	return ring_s(cal, n, bytes);
}

/* The same for GPUs, as NCCL sums: a ring over each node's per GPUs on
 * their link, then one over the nodes on the network. */
static double gpu_ring_s(const struct dlh_estimate_in *in, int per, double bytes)
{
	double s = ring_ab(in->link_alpha, in->link_beta, per, bytes);
	return in->nodes > 1 ? s + ring_ab(in->net_alpha, in->net_beta, in->nodes, bytes) : s;
}

/* Peak bytes rank r holds (see dlh_estimate's contract). */
static double rank_mem(const struct dlh_estimate_in *in, const struct dlh_calib *cal,
		       const struct dlh_model_cost *mc, const struct lshape *s, int r,
		       int nstate, double rows)
{
	const struct dlh_spec *spec = in->spec;
	const double np = (double)mc->params, dim = (double)mc->in;
	double widest = dim, act = 0.0, ws = 0.0, saved = 0.0;
	long lo, hi, tlo, thi;
	for (int i = 0; i < mc->nlayers; i++) {
		const struct lshape *x = &s[i];
		int fused_away = i && !strcmp(s[i - 1].kind, "conv");
		widest = fmax(widest, x->out);
		if (!fused_away && !(i > 1 && !strcmp(x->kind, "pool") && !strcmp(s[i - 2].kind, "conv")))
			act += x->out;
		if (!strcmp(x->kind, "conv")) {
			ws = fmax(ws, x->R * x->HW + x->F * x->HW + x->R * x->F);
			if (spec->pool > 1)
				saved += x->F * x->HW / (spec->pool * spec->pool);
		} else if (!strcmp(x->kind, "dense") && x->k * x->o >= EST_DENSE_BIG) {
			ws = fmax(ws, x->k * fmin(rows, EST_DENSE_TRANS_ROWS));
		}
	}
	train_rows(in, r, &lo, &hi);
	shard(in, in->test_n, r, &tlo, &thi);
	/* the trainer's prefetch ring: slots of its most rows */
	double slot = most_rows(in, r) * dim * F4;
	double depth = dlt_prefetch_depth((int)most_rows(in, r), (int)dim);
	double data = (double)(hi - lo) * (dim * F4 + 1) + (double)(thi - tlo) * (dim * F4 + 1) +
		      depth * slot + 2.0 * (hi - lo) * 4;
	double model = np * F4 * (2.0 + nstate) + (spec->lr <= 0 ? np * F4 * (1.0 + nstate) : 0);
	double work = rows * (act + 2.0 * widest + saved) * F4 + ws * F4;
	return cal->base_rss + model + work + data;
}

/* ---- a GPU rank (engine/train/cuda/gpu.cu), on its type's calibration ----
 *
 * The backend queues every kernel and cuBLAS call of a pass on one stream
 * and waits once at its end. A training step is a CUDA graph (dlh-train's
 * default, --cuda-graph on; its one warm-up step is not counted): one
 * launch (kernel_s) queues all its nodes, each of which costs its device
 * time but at least a node's (node_s); an evaluation pass is not
 * captured, so each of its calls costs at least its launch (kernel_s: the
 * host cannot queue faster, a small model is launch-bound). The GEMM grid
 * and the elementwise passes were timed as nodes of a graph, as a step
 * runs them. Then the copies in (a training step's values with its rows'
 * numbers; an evaluation batch's two), the copy of the two sums back and,
 * for an evaluation batch, the wait. A training step is queued before the
 * one before it is waited for (dlh-train's default, --step-ahead on), so
 * its device time and its host's work overlap: the step costs the more of
 * them (gpu_step_s). */

/* Seconds of one elementwise kernel moving bytes (read + written): at
 * least what the smallest pass timed took (64 KiB, as a node of a graph:
 * below that a kernel is bound by its latency, not its bytes), and at
 * least rd->floor_s. */
static double gk_s(const struct rdev *rd, double bytes)
{
	if (rd->nodes)
		(*rd->nodes)++;
	static const long sizes[DLH_CALIB_BW_N] = DLH_CALIB_BW_SIZES;
	double least = rd->d->bw[0] > 0 ? (double)sizes[0] / rd->d->bw[0] : 0.0;
	return fmax(fmax(rd->floor_s, least), bytes > 0 ? bytes / bw_at(rd, bytes) : 0.0);
}

/* Which operands of a GEMM are activations (not a layer's weights): in
 * bf16 each is cast before the product, a kernel of its own (gpu.cu's
 * bf16_operand; the weights are cast once a step, gpu_update_s). */
enum { ACT_A = 1, ACT_B = 2 };

/* Seconds of one cuBLAS sgemm (row-major form t, as gpu.cu's gemm(): A is
 * m x k, B k x n); in bf16 the casts of its activations acts (floats read,
 * as many BF16 written) before it. */
static double gg_s(const struct rdev *rd, enum trans t, double m, double n, double k, int acts)
{
	double cast = 0.0;
	if (rd->prec == DLH_PRECISION_BF16) {
		if (acts & ACT_A)
			cast += gk_s(rd, 6.0 * m * k);
		if (acts & ACT_B)
			cast += gk_s(rd, 6.0 * k * n);
	}
	if (rd->nodes)
		(*rd->nodes)++;
	const int parts = dlt_gpu_gemm_splits(m, n, k);
	if (parts > 1) {
		/* gpu.cu's gemm_split: the parts side by side in one batched
		 * product, as parallel as one parts times as wide; the rest of
		 * k a product of its own; the parts' sum */
		double kc = (double)dlt_gpu_split_kc((long)k, parts), rest = k - parts * kc;
		double s = fmax(rd->floor_s, gemm_s(rd, t, m, n * parts, kc));
		if (rest > 0) {
			if (rd->nodes)
				(*rd->nodes)++;
			s += fmax(rd->floor_s, gemm_s(rd, t, m, n, rest));
		}
		return s + gk_s(rd, (parts + (rest > 0) + 1.0) * m * n * F4) + cast;
	}
	return fmax(rd->floor_s, gemm_s(rd, t, m, n, k)) + cast;
}

/* Seconds of one cuBLASLt matmul with an epilogue (gpu.cu's lt_gemm: a
 * dense layer's bias and ReLU, or the ReLU's gradient and a bias
 * gradient): one node, the GEMM's time (its epilogue rides on the
 * product's output), never split. */
static double gl_s(const struct rdev *rd, enum trans t, double m, double n, double k)
{
	if (rd->nodes)
		(*rd->nodes)++;
	return fmax(rd->floor_s, gemm_s(rd, t, m, n, k));
}

/* Seconds of a conv's direct product (gpu.cu's k_conv_direct,
 * dlt_gpu_conv_direct) of outs outputs of taps taps each from m input
 * floats, with its bias, ReLU and pool writing written floats: one node,
 * at the kernel's calibrated speed per output and tap (direct_s; not
 * measured: two FLOPs each at the GEMMs' best rate), at least the bytes
 * it moves. */
static double gd_s(const struct rdev *rd, double outs, double taps, double m, double written)
{
	const struct dlh_calib_dev *d = rd->d;
	double s = d->direct_s > 0 ? outs * taps * d->direct_s : 2.0 * outs * taps / d->gemm_flops;
	if (rd->nodes)
		(*rd->nodes)++;
	return fmax(rd->floor_s, fmax(s, (written + m) * F4 / bw_at(rd, (written + m) * F4)));
}

/* Seconds of a conv's direct weight gradient (gpu.cu's k_conv_pool_dw,
 * dlt_gpu_conv_dw_direct) from pooled outputs of taps taps (and the bias)
 * each, reading the pool's gradient, argmax and output and m input
 * floats: one node, at its calibrated speed per pooled output and tap
 * (direct_dw_s; not measured: two FLOPs each at the GEMMs' best rate), at
 * least its bytes; then the parts' sum, a kernel (parts of f x (taps + 1)
 * each). */
static double gdw_s(const struct rdev *rd, double pooled, double taps, double m, int parts,
		    double f)
{
	const struct dlh_calib_dev *d = rd->d;
	double w = pooled * (taps + 1);
	double s = d->direct_dw_s > 0 ? w * d->direct_dw_s : 2.0 * w / d->gemm_flops;
	double bytes = (3.0 * pooled + m) * F4;
	if (rd->nodes)
		(*rd->nodes)++;
	s = fmax(rd->floor_s, fmax(s, bytes / bw_at(rd, bytes)));
	return s + gk_s(rd, (parts + 1.0) * f * (taps + 1) * F4);
}

/* A pageable host-to-device copy of bytes. */
static double h2d_s(const struct rdev *rd, double bytes)
{
	const struct dlh_calib_dev *d = rd->d;
	return d->h2d_s + (d->h2d_bw > 0 ? bytes / d->h2d_bw : 0.0);
}

/* The enum dlt_layer_kind of an estimator's layer (-1 past the last). */
static int layer_kind(const struct lshape *s, int nl, int i)
{
	static const struct {
		const char *name;
		int kind;
	} kinds[] = { { "dense", DLT_LAYER_DENSE }, { "relu", DLT_LAYER_RELU },
		      { "conv", DLT_LAYER_CONV }, { "pool", DLT_LAYER_POOL },
		      { "dropout", DLT_LAYER_DROPOUT } };
	for (size_t k = 0; i < nl && k < sizeof kinds / sizeof kinds[0]; k++)
		if (!strcmp(s[i].kind, kinds[k].name))
			return kinds[k].kind;
	return -1;
}

/* The layers after layer i of s (nl layers) that gpu.cu runs inside its
 * kernels (dlt_gpu_fused): a ReLU after a dense or conv layer (1: the
 * layer's bias kernel writes the ReLU's output, and its backward masks the
 * gradient in the kernel that reads it first), and a max-pool after a
 * conv's ReLU too (2); such a layer launches nothing. */
static int gpu_fused(const struct lshape *s, int nl, int i)
{
	return dlt_gpu_fused(layer_kind(s, nl, i), layer_kind(s, nl, i + 1),
			     layer_kind(s, nl, i + 2));
}

/* 1 when conv layer i of s has its weight and bias gradients computed
 * directly (dlt_gpu_conv_dw_direct): no im2col matrix in its pass. */
static int gpu_conv_dw_direct(const struct lshape *s, int nl, int i)
{
	return !strcmp(s[i].kind, "conv") && dlt_gpu_conv_dw_direct(s[i].R, i, gpu_fused(s, nl, i));
}

/* 1 when gpu.cu runs layer i of s inside an earlier layer's kernels. */
static int gpu_fused_into(const struct lshape *s, int nl, int i)
{
	return (i >= 1 && gpu_fused(s, nl, i - 1) >= 1) || (i >= 2 && gpu_fused(s, nl, i - 2) == 2);
}

/* 1 when dense layer i of s has its bias in cuBLASLt's epilogues: a
 * precision with them (dlt_gpu_dense_epilogue), its biases aligned for
 * them (dlt_gpu_bias_aligned). */
static int gpu_epilogue(const struct rdev *rd, const struct lshape *s)
{
	return dlt_gpu_dense_epilogue(rd->prec) && dlt_gpu_bias_aligned(s->boff);
}

/* 1 when dense layer i of s has its ReLU mask and bias gradient made by
 * the input-gradient product of layer i + 2 (dlt_gpu_dgrad_fused), its
 * bias in the epilogues (gpu_epilogue). */
static int gpu_dgrad(const struct rdev *rd, const struct lshape *s, int nl, int i)
{
	return gpu_epilogue(rd, &s[i]) &&
	       dlt_gpu_dgrad_fused(layer_kind(s, nl, i), layer_kind(s, nl, i + 1),
				   layer_kind(s, nl, i + 2));
}

/* Forward seconds of layer i of s (nl layers) for n rows (train: a
 * training pass), as layer_forward (a ReLU fused after it costs nothing
 * more: the same bytes): a dense layer's product with its bias in
 * cuBLASLt's epilogue (dlt_gpu_dense_epilogue), else with a bias kernel; a
 * conv's im2col product, its bias kernel or, with a ReLU and pool fused
 * after it, the pool's (reading the product, writing its output and
 * argmax); or with few taps its direct product, those in the same kernel
 * (dlt_gpu_conv_direct; im2col then only in training, for the weight
 * gradient). */
static double gpu_fwd_s(const struct rdev *rd, const struct lshape *ls, int nl, int i, double n,
			int train)
{
	const struct lshape *s = &ls[i], *pool = gpu_fused(ls, nl, i) == 2 ? &ls[i + 2] : NULL;
	double m = n * s->in;
	if (!strcmp(s->kind, "dense"))
		return gpu_epilogue(rd, s) ? gl_s(rd, NT, n, s->o, s->k) :
		       gg_s(rd, NT, n, s->o, s->k, ACT_A) + gk_s(rd, 2.0 * n * s->o * F4);
	if (!strcmp(s->kind, "conv")) {
		/* im2col writes the matrix the product reads: in bf16 as BF16 */
		double N = n * s->HW, col = rd->prec == DLH_PRECISION_BF16 ? 2.0 : F4;
		const int direct = dlt_gpu_conv_direct(s->R);
		const int im2col = !direct || (train && !gpu_conv_dw_direct(ls, nl, i));
		double t = im2col ? gk_s(rd, (s->R + 1) * N * col + m * F4) : 0.0;
		if (direct)   /* its bias, ReLU and pool in the same kernel */
			return t + gd_s(rd, s->F * N, s->R, m, pool ? 2.0 * n * pool->out : s->F * N);
		return t + gg_s(rd, NN, s->F, N, s->R, 0) +
		       gk_s(rd, pool ? s->F * N * F4 + 2.0 * n * pool->out * F4 :
				       2.0 * s->F * N * F4);
	}
	if (!strcmp(s->kind, "pool"))
		return gk_s(rd, m * F4 + 2.0 * n * s->out * F4);
	return gk_s(rd, 2.0 * m * F4);   /* relu, dropout (or its copy) */
}

/* Backward seconds of layer i of s (nl layers) for n rows, as
 * layer_backward: the input gradient too but for the first layer; a ReLU
 * fused after it (the kernel that reads the gradient first reads the
 * ReLU's output too, and for a dense layer writes the masked gradient
 * back), and a pool after that ReLU (gpu_fwd_s). A dense layer's bias
 * gradient is a kernel of its own, but for the last layer's (the loss
 * kernel sums it: dlt_gpu_loss_bgrad) and where the input-gradient product
 * of the dense layer two after makes it and the mask (gpu_dgrad), which
 * that product's epilogue does in place of a plain GEMM. */
static double gpu_bwd_s(const struct rdev *rd, const struct lshape *ls, int nl, int i, double n)
{
	const struct lshape *s = &ls[i], *pool = gpu_fused(ls, nl, i) == 2 ? &ls[i + 2] : NULL;
	const int dx = i > 0, relu = gpu_fused(ls, nl, i) >= 1;
	double m = n * s->in;
	if (!strcmp(s->kind, "dense")) {
		double t = gg_s(rd, TN, s->o, s->k, n, ACT_A | ACT_B);
		if (!(i == nl - 1 && dlt_gpu_loss_bgrad(layer_kind(ls, nl, i))) && !gpu_dgrad(rd, ls, nl, i))
			t += gk_s(rd, (relu ? 3.0 : 1.0) * n * s->o * F4);
		if (dx && i >= 2 && gpu_dgrad(rd, ls, nl, i - 2))
			t += gl_s(rd, NN, n, s->k, s->o);
		else if (dx)
			t += gg_s(rd, NN, n, s->k, s->o, ACT_A);
		return t;
	}
	if (!strcmp(s->kind, "conv") && gpu_conv_dw_direct(ls, nl, i))
		return gdw_s(rd, n * pool->out, s->R, m, dlt_gpu_dw_parts(n, s->F), s->F);
	if (!strcmp(s->kind, "conv")) {
		double N = n * s->HW;
		/* the product's gradient from the pool's (its gradient, argmax
		 * and output read), or from the ReLU's output gradient */
		double t = gk_s(rd, pool ? s->F * N * F4 + 3.0 * n * pool->out * F4 :
					   (relu ? 3.0 : 2.0) * s->F * N * F4);
		/* the weight and bias gradients (gpu.cu's conv_grads): split, one
		 * product with the im2col matrix's row of ones; else the weights'
		 * product and the bias's row sums (the im2col: as written) */
		if (dlt_gpu_gemm_splits(s->F, s->R + 1, N) > 1)
			t += gg_s(rd, NT, s->F, s->R + 1, N, ACT_A);
		else
			t += gg_s(rd, NT, s->F, s->R, N, ACT_A) + gk_s(rd, s->F * N * F4);
		return t + (dx ? gg_s(rd, TN, s->R, N, s->F, ACT_B) + gk_s(rd, (s->R * N + m) * F4) :
				 0.0);
	}
	if (!dx)
		return 0.0;
	if (!strcmp(s->kind, "pool"))
		return gk_s(rd, m * F4) + gk_s(rd, m * F4 + 2.0 * n * s->out * F4);
	if (!strcmp(s->kind, "relu"))
		return gk_s(rd, 3.0 * m * F4);
	return gk_s(rd, 2.0 * m * F4);   /* dropout */
}

/* Seconds of the stack's forward (and with train, the backward; *bwd its
 * share) for n rows with the loss's kernel, the batch got in as the
 * backend gets it: a training step's rows from those the device holds
 * (--device-data), their numbers in the step's one copy with its values
 * and gathered by a kernel; an evaluation batch by its two copies. Then
 * the copy of the sums back and, for an evaluation batch, the wait for
 * the stream (a training step's is gpu_step_s's). Each call at least
 * rd->floor_s. */
static double gpu_pass_s(const struct rdev *rd, const struct lshape *s, int nl, double n,
			 double dim, int classes, int train, double *bwd)
{
	struct dlh_estimate_parts none, *p = train && rd->parts ? rd->parts : &none;
	double t = train ? h2d_s(rd, n * 4.0) + gk_s(rd, 2.0 * n * dim * F4) :
			   h2d_s(rd, n * dim * F4) + h2d_s(rd, n);
	double b = 0.0;
	p->input_s = t;
	for (int i = 0; i < nl; i++) {
		p->fwd_s[i] = gpu_fused_into(s, nl, i) ? 0.0 : gpu_fwd_s(rd, s, nl, i, n, train);
		t += p->fwd_s[i];
	}
	/* the loss and its sums: one kernel (training: the last dense layer's
	 * bias gradient too, its gradient read again) */
	p->loss_s = gk_s(rd, ((train && dlt_gpu_loss_bgrad(layer_kind(s, nl, nl - 1)) ? 3.0 : 2.0) *
			      n * classes + n) * F4);
	t += p->loss_s;
	for (int i = nl - 1; train && i >= 0; i--) {
		p->bwd_s[i] = gpu_fused_into(s, nl, i) ? 0.0 : gpu_bwd_s(rd, s, nl, i, n);
		b += p->bwd_s[i];
	}
	if (bwd)
		*bwd = b;
	/* the sums back; an evaluation batch waits for them */
	return t + b + rd->d->h2d_s + (train ? 0.0 : rd->d->sync_s);
}

/* rd as a GPU rank's graphed training step prices it: the GPU's own
 * speeds, its nodes back to back after one launch (the step's values and
 * rows' numbers copied in before it). */
static void graph_rdev(struct rdev *rd)
{
	rd->gemm_share = rd->bw_share = 1.0;
	rd->floor_s = rd->d->node_s > 0 ? rd->d->node_s : DLH_EST_GRAPH_NODE_S;
}

/* Seconds of a training step on a GPU whose device work (its copies, its
 * graph's nodes and the update) takes dev: the host launches the graph
 * (kernel_s), queues the two copies (a launch each), waits for the step
 * before (sync_s) and appends its metrics row (metrics_s), all while the
 * GPU runs the step queued before (--step-ahead), so the more of the two
 * sets the pace. */
static double gpu_step_s(const struct rdev *rd, const struct dlh_calib *cal, double dev)
{
	const struct dlh_calib_dev *d = rd->d;
	return fmax(dev, 3.0 * d->kernel_s + d->sync_s + cal->metrics_s);
}

/* Seconds of the optimizer's kernel over np parameters with nstate arrays
 * (a 1-rank run calls no allreduce: the sum of one is its gradients), and
 * in bf16 the cast of the updated weights. */
static double gpu_update_s(const struct rdev *rd, double np, int nstate)
{
	return gk_s(rd, np * F4 * (3.0 + 2.0 * nstate)) +
	       (rd->prec == DLH_PRECISION_BF16 ? gk_s(rd, 6.0 * np) : 0.0);   /* the weights' cast */
}

/* Device bytes a GPU rank holds: the context, cuBLAS and NCCL as
 * measured, gpu.cu's buffers (alloc_all) for rows rows, and the training
 * rows it holds (held rows of dim floats and a label: --device-data). */
static double gpu_mem(const struct lshape *s, int nl, double np, int nstate, double dim,
		      double rows, double held, int bf16, const struct dlh_calib_dev *d)
{
	double act = 0.0, widest = dim, ws = 0.0, extra = 0.0;   /* floats a row */
	double parts = 0.0;   /* the split GEMMs' (at any batch up to rows) */
	double col16 = 0.0, op16 = 1.0;   /* bf16: im2col's BF16 copies, an operand buffer */
	double lt = DLT_GPU_LT_WS_BYTES;   /* cuBLASLt's workspace, the ReLUs' bit masks */
	for (int i = 0; i < nl; i++) {
		if (dlt_gpu_dgrad_fused(layer_kind(s, nl, i), layer_kind(s, nl, i + 1),
					layer_kind(s, nl, i + 2)))
			lt += dlt_gpu_lt_mask_bytes(rows, s[i].o);
		act += s[i].out;
		widest = fmax(widest, s[i].out);
		if (!strcmp(s[i].kind, "conv")) {
			const double N = rows * s[i].HW;
			ws = fmax(ws, s[i].F * s[i].HW);
			op16 = fmax(op16, s[i].F * N);
			if (gpu_conv_dw_direct(s, nl, i)) {   /* no im2col: k_conv_pool_dw's parts */
				parts = fmax(parts, dlt_gpu_dw_part_floats(rows, s[i].F, s[i].R));
			} else {
				extra += (s[i].R + 1) * s[i].HW;   /* im2col, its row of ones */
				col16 += (s[i].R + 1) * N;
				parts = fmax(parts, dlt_gpu_part_floats(rows, 0, 0, s[i].F, s[i].R, s[i].HW));
			}
		} else if (!strcmp(s[i].kind, "pool")) {
			extra += s[i].out;                       /* argmax */
		} else if (!strcmp(s[i].kind, "dense")) {
			op16 = fmax(op16, rows * fmax(s[i].in, s[i].out));
			parts = fmax(parts, dlt_gpu_part_floats(rows, s[i].k, s[i].o, 0, 0, 0));
		}
	}
	/* activations, im2col and argmax, two deltas, the input, the conv
	 * workspace; parameters, gradients, optimizer state; the parts */
	double floats = rows * (act + extra + 2.0 * widest + dim + ws) +
			np * (2.0 + nstate) + 2.0 + parts;
	/* bf16 (gpu.cu's bf16_alloc): the weights, each im2col matrix and two
	 * operand buffers as BF16 */
	double halves = bf16 ? np + col16 + 2.0 * op16 : 0.0;
	return d->ctx_bytes + d->blas_bytes + d->nccl_bytes + floats * F4 + halves * 2.0 + rows +
	       lt + held * (dim * F4 + 1.0);
}

/* in's device types in rank order, each once, '+'-joined, into key. */
static void device_key(const struct dlh_estimate_in *in, char *key, size_t len)
{
	size_t used = 0;
	key[0] = '\0';
	for (int r = 0; r < in->ranks && r < DLH_EST_RANKS; r++) {
		if (!in->dev[r])
			continue;
		int seen = 0;
		for (int q = 0; q < r && !seen; q++)
			seen = in->dev[q] && !strcmp(in->dev[q]->type, in->dev[r]->type);
		if (!seen && used + strlen(in->dev[r]->type) + 2 <= len)
			used += (size_t)snprintf(key + used, len - used, "%s%s", used ? "+" : "",
						 in->dev[r]->type);
	}
}

/* The factors an estimate on device key takes from corr: the key's own,
 * fitted on its runs, else those of all runs. Returns whose they are. */
static const char *pick_factors(const struct dlh_correction *corr, const char *key, double *compute,
				double *comm, double *startup)
{
	for (int i = 0; i < corr->ndevices && i < DLH_CORR_DEVICES; i++) {
		const struct dlh_correction_device *d = &corr->device[i];
		if (d->runs > 0 && !strcmp(d->device, key)) {
			*compute = d->compute, *comm = d->comm, *startup = d->startup;
			return "runs on its devices";
		}
	}
	if (corr->runs > 0) {
		*compute = corr->compute, *comm = corr->comm, *startup = corr->startup;
		return "all runs";
	}
	*compute = *comm = *startup = 1.0;
	return "";
}

/* dlh_estimate, and with parts (not NULL) rank pr's training step priced
 * part by part into it (pr a GPU's). */
static int estimate(const struct dlh_estimate_in *in, const struct dlh_calib *cal,
		    const struct dlh_correction *corr, struct dlh_estimate *out, int pr,
		    struct dlh_estimate_parts *parts, char *err, size_t errlen)
{
	static const struct dlh_correction none = { .compute = 1.0, .comm = 1.0, .startup = 1.0 };
	const struct dlh_spec *spec = in->spec;
	struct dlh_model_cost mc;
	struct lshape s[DLH_COST_LAYERS];
	int rc, nstate, per_node;
	memset(out, 0, sizeof *out);
	if ((rc = check_in(in, cal, err, errlen)) < 0)
		return rc;
	device_key(in, out->device, sizeof out->device);
	double compute_f, comm_f, startup_f;
	out->corrected = pick_factors(corr ? corr : &none, out->device, &compute_f, &comm_f, &startup_f);
	rc = dlh_model_cost(spec, in->c, in->h, in->w, in->classes, &mc, err, errlen);
	if (rc < 0)
		return rc;
	int nl = shapes(spec, &mc, s);
	if (parts) {
		parts->nlayers = nl;
		for (int i = 0; i < nl; i++)
			parts->kind[i] = mc.layer[i].kind;
	}
	const double np = (double)mc.params, grad_bytes = (np + 2) * F4;
	update_bytes(spec, &nstate);
	const int cnn = !strcmp(spec->model_type, "cnn");
	/* CPU ranks: each node's in shared memory, its leader across nodes */
	const int shm = in->ranks > 1 && in->dev[0]->grid && in->link_beta <= 0;
	per_node = (in->ranks + in->nodes - 1) / in->nodes;

	/* steps: the shard that fills the fewest batches sets the epoch */
	long spe = -1, global = 0;
	for (int r = 0; r < in->ranks; r++) {
		long lo, hi;
		shard(in, in->train_n, r, &lo, &hi);
		if (spe < 0 || (hi - lo) / in->batch[r] < spe)
			spe = (hi - lo) / in->batch[r];
		global += in->batch[r];
	}
	if (whole_set(in))   /* the global batch's rows of one permutation a step */
		spe = in->train_n / global;
	if (spe < 1 && whole_set(in)) {
		snprintf(err, errlen, "estimate: %ld training images cannot fill one global batch "
			 "of %ld", in->train_n, global);
		return -EINVAL;
	}
	if (spe < 1) {
		snprintf(err, errlen, "estimate: %ld training images over %d ranks cannot fill one "
			 "batch of %d per rank", in->train_n, in->ranks, in->batch[0]);
		return -EINVAL;
	}
	out->steps = spe * spec->epochs;

	/* per rank: forward + backward, update, evaluation; the slowest sets the step */
	double comp_max = 0.0, upd_max = 0.0, eval_max = 0.0, bwd_overlap = 0.0, mem = 0.0;
	double shm_sum = 0.0, gpu_start = 0.0;
	double busy[DLH_EST_RANKS];
	for (int r = 0; r < in->ranks; r++) {
		struct rdev rd = { in->dev[r], 1.0, 1.0, in->dev[r]->kernel_s,
				   in->dev[r]->gpu > 0 ? spec->precision : DLH_PRECISION_FP32, NULL,
				   r == pr ? parts : NULL };
		double b = in->batch[r], first_bwd = 0.0;
		/* the trainer's buffers hold its most rows; evaluation runs in chunks of them */
		double rows = fmax(most_rows(in, r), cnn ? EST_CNN_EVAL_ROWS : EST_EVAL_ROWS);
		long tlo, thi;
		if (per_node > 1) {
			rd.gemm_share = rd.d->gemm_all > 0 ? rd.d->gemm_all : 1.0;
			rd.bw_share = rd.d->mem_bw_all > 0 ? rd.d->mem_bw_all / rd.d->mem_bw : 1.0;
		}
		double comp, bwd, u;
		if (rd.d->gpu > 0) {   /* measured on a GPU: the backend's step; the batch
					  is gathered on the host behind it (prefetch) */
			graph_rdev(&rd);
			first_bwd = gpu_bwd_s(&rd, s, nl, 0, b);
			long nodes = 0;   /* the graph's, as gpu.cu captures them */
			rd.nodes = &nodes;
			comp = gpu_pass_s(&rd, s, nl, b, (double)mc.in, in->classes, 1, &bwd);
			u = gpu_update_s(&rd, np, nstate);
			rd.nodes = NULL;
			if (nodes > out->step_nodes)
				out->step_nodes = nodes;
			if (rd.parts) {
				rd.parts->update_s = u;
				rd.parts->step_s = gpu_step_s(&rd, cal, comp + u);
				rd.parts->nodes = nodes;
			}
			/* the host's share, metrics row included, hides behind the
			 * device's: what it adds to the step goes with the pass */
			comp = fmax(0.0, gpu_step_s(&rd, cal, comp + u) - u - cal->metrics_s);
			rd.floor_s = rd.d->kernel_s;   /* evaluation: launch by launch */
		} else {
			/* the batch gathered from the shard: rows of random images */
			comp = pass_s(&rd, s, nl, b, 1, &first_bwd) +
			       gather_s(&rd, b * mc.in * F4, (double)in->train_n * mc.in * F4);
			bwd = comp - pass_s(&rd, s, nl, b, 0, NULL);
			/* shm: each rank sums and updates its slice of its node's copy; else all of it */
			u = update_s(&rd, spec, shm ? np / per_node : np);
		}
		if (shm && in->nodes == 1)
			shm_sum = fmax(shm_sum, shm_sum_s(&rd, cal, np, in->ranks));
		else if (shm && per_node > 1)   /* the leader sums the node's slots */
			shm_sum = fmax(shm_sum, move_s(&rd, np * F4 * per_node, np * F4));
		shard(in, in->test_n, r, &tlo, &thi);
		double ev = 0.0;
		for (double i = 0; i < thi - tlo; i += rows)
			ev += rd.d->gpu > 0 ?
			      gpu_pass_s(&rd, s, nl, fmin(rows, (double)(thi - tlo) - i), (double)mc.in,
					 in->classes, 0, NULL) :
			      pass_s(&rd, s, nl, fmin(rows, (double)(thi - tlo) - i), 0, NULL);
		comp_max = fmax(comp_max, comp);
		upd_max = fmax(upd_max, u);
		eval_max = fmax(eval_max, ev);
		if (comp == comp_max)
			bwd_overlap = bwd - first_bwd;
		busy[r] = out->steps * (comp + u) + spec->epochs * ev;
		long hlo = 0, hhi = 0;   /* the training rows a GPU rank holds: its shard */
		if (rd.d->gpu > 0)
			train_rows(in, r, &hlo, &hhi);
		double held = (double)(hhi - hlo);
		mem = fmax(mem, rd.d->gpu > 0 ?
				gpu_mem(s, nl, np, nstate, (double)mc.in, rows, held,
					rd.prec == DLH_PRECISION_BF16, rd.d) :
				rank_mem(in, cal, &mc, s, r, nstate, rows));
		/* each rank's context, cuBLAS and NCCL before its first step, its
		 * weights and its training rows copied in */
		if (rd.d->gpu > 0)
			gpu_start = fmax(gpu_start, rd.d->ctx_s + rd.d->blas_s + rd.d->nccl_s +
					 h2d_s(&rd, np * F4 * (1.0 + nstate)) +
					 h2d_s(&rd, held * (mc.in * F4 + 1.0)));
	}

	/* rank 0 appends a metrics line after each step: the other ranks
	 * wait for it at the next gradient sum, so the step pays it once */
	upd_max += cal->metrics_s;   /* (a GPU rank's is in its comp: gpu_step_s) */

	/* the gradient sum: shm = two barriers (the sum is in u); across
	 * nodes a ring allreduce, bucket by bucket behind backward */
	double comm = 0.0;
	if (shm && in->nodes > 1) {
		/* the node's sum, then the leaders' ring across the nodes, bucket
		 * by bucket behind backward, and the node's two fences */
		double ar = net_ring_s(cal, in->nodes, grad_bytes);
		double last = net_ring_s(cal, in->nodes, (double)mc.layer[0].params * F4);
		double leaders = spec->bucket_mb > 0 ? fmax(last, ar - bwd_overlap) : ar;
		comm = shm_sum + leaders + 2.0 * cal->fence_a_s +
		       cal->fence_b * (comp_max + upd_max + shm_sum);
	} else if (shm) {
		/* and at each of its two fences the ranks' jitter: the slowest
		 * of them after the forward and backward, and after the sum and
		 * update, sets the pace */
		comm = shm_sum + 2.0 * cal->fence_a_s + cal->fence_b * (comp_max + upd_max + shm_sum);
	} else if (in->ranks > 1 && in->link_beta > 0) {
		/* GPUs (NCCL): a ring over each node's GPUs on their link, then over
		 * the nodes on the network, bucket by bucket behind backward */
		int per = (in->ranks + in->nodes - 1) / (in->nodes > 0 ? in->nodes : 1);
		double ar = gpu_ring_s(in, per, grad_bytes);
		double last = gpu_ring_s(in, per, (double)mc.layer[0].params * F4);
		comm = spec->bucket_mb > 0 ? fmax(last, ar - bwd_overlap) : ar;
	} else if (in->ranks > 1) {
		double ar = ring_s(cal, in->ranks, grad_bytes);
		double last = ring_s(cal, in->ranks, (double)mc.layer[0].params * F4);
		comm = spec->bucket_mb > 0 ? fmax(last, ar - bwd_overlap) : ar;
	}
	out->comm_bytes = shm && in->nodes > 1 ? 2.0 * (in->nodes - 1) / in->nodes * grad_bytes :
			  in->ranks > 1 ? 2.0 * (in->ranks - 1) / in->ranks * grad_bytes : 0.0;

	/* correction factors (dlh_history_fit) scale the three kinds of term */
	out->compute_s = comp_max * compute_f;
	out->comm_s = comm * comm_f;
	out->step_s = (comp_max + upd_max) * compute_f + out->comm_s;
	out->raw_step = comp_max + upd_max + comm;
	double eval = (eval_max + (in->ranks > 1 ? cal->sync_s : 0.0)) * compute_f;
	out->epoch_s = spe * out->step_s + eval;

	/* startup: launch, each rank decodes its shards from the files' start,
	 * weights are initialised; exit: the final checkpoint and files, MPI_Finalize */
	double ckpt = cal->write_s + (np * F4 * (1.0 + nstate) + EST_CKPT_HEADER) /
		      (cal->write_bw > 0 ? cal->write_bw : 1e9);
	long lo, hi, tlo, thi;
	train_rows(in, in->ranks - 1, &lo, &hi);
	shard(in, in->test_n, in->ranks - 1, &tlo, &thi);
	double decode = cal->decode_bw > 0 ? (double)(hi + thi) * mc.in / cal->decode_bw : 0.0;
	double init = cal->init_rate > 0 ? np / cal->init_rate : 0.0;
	double startup = cal->launch_s + cal->launch_rank_s * (in->ranks - 1) + decode + init +
			 gpu_start + ckpt + EST_FILES_AT_EXIT * cal->write_s + cal->finalize_s;
	out->startup_s = startup * startup_f;
	out->raw_startup = startup;
	out->raw_comm = out->steps * comm;

	long ckpts = spec->checkpoint_every > 0 ? (out->steps - 1) / spec->checkpoint_every : 0;
	long lr_steps = spec->lr <= 0 ? DLT_LRFIND_STEPS : 0;
	out->raw_compute = (out->steps + lr_steps) * (comp_max + upd_max) + lr_steps * comm +
			   spec->epochs * (eval_max + (in->ranks > 1 ? cal->sync_s : 0.0)) + ckpts * ckpt;
	out->total_s = out->startup_s + spec->epochs * out->epoch_s +
		       lr_steps * out->step_s + ckpts * ckpt * compute_f;
	out->mem_bytes = mem;
	for (int r = 0, used = 0; r < in->ranks; r++) {   /* each type once, in rank order */
		const struct dlh_calib_dev *d = in->dev[r];
		int seen = 0;
		for (int q = 0; q < r; q++)
			seen |= !strcmp(in->dev[q]->type, d->type);
		if (!seen && used < (int)sizeof out->source)
			used += snprintf(out->source + used, sizeof out->source - (size_t)used, "%s%s %s",
					 used ? "; " : "", d->type,
					 d->peak ? "pool peak figures (not calibrated)" :
					 d->gpu > 0 ? "measured on it (GPU)" : "measured");
	}
	for (int r = 0; r < in->ranks; r++) {
		double b = fmin(busy[r] * compute_f + decode, out->total_s);
		out->joules += in->watts_busy[r] * b + in->watts_idle[r] * (out->total_s - b);
	}
	return 0;
}

int dlh_estimate(const struct dlh_estimate_in *in, const struct dlh_calib *cal,
		 const struct dlh_correction *corr, struct dlh_estimate *out,
		 char *err, size_t errlen)
{
	return estimate(in, cal, corr, out, -1, NULL, err, errlen);
}

int dlh_estimate_parts(const struct dlh_estimate_in *in, const struct dlh_calib *cal, int r,
		       struct dlh_estimate_parts *out, char *err, size_t errlen)
{
	struct dlh_estimate e;

	memset(out, 0, sizeof *out);
	if (r < 0 || r >= in->ranks || r >= DLH_EST_RANKS || !in->dev[r] || in->dev[r]->gpu <= 0) {
		snprintf(err, errlen, "estimate: rank %d is not a GPU's: no graphed step to price", r);
		return -EINVAL;
	}
	return estimate(in, cal, NULL, &e, r, out, err, errlen);
}

/* ---- the estimate file ---- */

/* The keys of the estimate file, in order, and where each lives. */
static const struct {
	const char *key;
	size_t off;
} est_keys[] = {
	{ "step_s", offsetof(struct dlh_estimate, step_s) },
	{ "compute_s", offsetof(struct dlh_estimate, compute_s) },
	{ "comm_s", offsetof(struct dlh_estimate, comm_s) },
	{ "epoch_s", offsetof(struct dlh_estimate, epoch_s) },
	{ "startup_s", offsetof(struct dlh_estimate, startup_s) },
	{ "total_s", offsetof(struct dlh_estimate, total_s) },
	{ "joules", offsetof(struct dlh_estimate, joules) },
	{ "mem_bytes", offsetof(struct dlh_estimate, mem_bytes) },
	{ "comm_bytes", offsetof(struct dlh_estimate, comm_bytes) },
};
#define NKEYS ((int)(sizeof est_keys / sizeof est_keys[0]))

static double key_val(const struct dlh_estimate *e, int i)
{
	return *(const double *)((const char *)e + est_keys[i].off);
}

int dlh_estimate_format(const struct dlh_estimate *pred, const struct dlh_estimate *act,
			struct dlh_buf *out)
{
	char total[32], step[32];
	int rc = 0;
	for (int i = 0; i < NKEYS; i++)
		rc |= dlh_buf_printf(out, "%s=%.6g\n", est_keys[i].key, key_val(pred, i));
	rc |= dlh_buf_printf(out, "steps=%ld\n", pred->steps);
	if (pred->step_nodes > 0)   /* what a GPU step's graph holds, as priced */
		rc |= dlh_buf_printf(out, "step_nodes=%ld\n", pred->step_nodes);
	if (pred->source[0])
		rc |= dlh_buf_printf(out, "source=%s\n", pred->source);
	if (pred->device[0])   /* the history's key for a correction of its own */
		rc |= dlh_buf_printf(out, "device=%s\n", pred->device);
	if (pred->corrected && pred->corrected[0])
		rc |= dlh_buf_printf(out, "corrected_by=the history of %s\n", pred->corrected);
	/* the uncorrected terms, so the history can refit them after the run */
	if (pred->raw_compute >= 0)
		rc |= dlh_buf_printf(out, "raw_compute_s=%.6g\nraw_comm_s=%.6g\nraw_startup_s=%.6g\n"
				     "raw_step_s=%.6g\n", pred->raw_compute, pred->raw_comm,
				     pred->raw_startup, pred->raw_step);
	dlh_duration(pred->total_s, total, sizeof total);
	snprintf(step, sizeof step, "%.3g ms", pred->step_s * 1e3);
	rc |= dlh_buf_printf(out, "human=step %s, total %s, %.0f J, %.0f MiB per device\n", step,
			     total, pred->joules, pred->mem_bytes / (1024.0 * 1024.0));
	for (int i = 0; act && i < NKEYS; i++) {
		double a = key_val(act, i), p = key_val(pred, i);
		if (a < 0)
			continue;
		rc |= dlh_buf_printf(out, "actual_%s=%.6g\n", est_keys[i].key, a);
		if (a > 0)
			rc |= dlh_buf_printf(out, "error_%s=%.1f\n", est_keys[i].key, 100.0 * (a - p) / a);
	}
	if (act && act->steps >= 0)
		rc |= dlh_buf_printf(out, "actual_steps=%ld\n", act->steps);
	return rc ? -ENOMEM : 0;
}

int dlh_estimate_parse(const char *text, struct dlh_estimate *pred)
{
	char v[64];

	memset(pred, 0, sizeof *pred);
	for (int i = 0; i < NKEYS; i++) {
		if (dlh_kv_get(text, est_keys[i].key, v, sizeof v))
			return -EINVAL;
		*(double *)((char *)pred + est_keys[i].off) = strtod(v, NULL);
	}
	if (dlh_kv_get(text, "steps", v, sizeof v))
		return -EINVAL;
	pred->steps = strtol(v, NULL, 10);
	if (!dlh_kv_get(text, "step_nodes", v, sizeof v))
		pred->step_nodes = strtol(v, NULL, 10);
	pred->raw_compute = pred->raw_comm = pred->raw_startup = pred->raw_step = -1;
	if (!dlh_kv_get(text, "raw_step_s", v, sizeof v))
		pred->raw_step = strtod(v, NULL);
	if (!dlh_kv_get(text, "raw_compute_s", v, sizeof v))
		pred->raw_compute = strtod(v, NULL);
	if (!dlh_kv_get(text, "raw_comm_s", v, sizeof v))
		pred->raw_comm = strtod(v, NULL);
	if (!dlh_kv_get(text, "raw_startup_s", v, sizeof v))
		pred->raw_startup = strtod(v, NULL);
	if (!dlh_kv_get(text, "device", v, sizeof v) && strspn(v, DEVICE_CHARS) == strlen(v))
		snprintf(pred->device, sizeof pred->device, "%s", v);
	return 0;
}

/* ---- what a run measured ---- */

#define ACT_TEXT_MAX (256L << 20)   /* largest metrics.csv read */

/* Reads DIR/name into *text. Returns 0, or -errno. */
static int job_file(const char *dir, const char *name, char **text)
{
	char path[4096];
	size_t len;
	snprintf(path, sizeof path, "%s/%s", dir, name);
	return dlh_read_file_nofollow(path, ACT_TEXT_MAX, text, &len);
}

/* From metrics.csv: the mean step (train rows after a train or eval row),
 * the mean evaluation (eval row after a train row), the first train row's
 * time and the steps. Returns 0, or -ENOENT without train rows. */
static int metrics_times(const char *text, double *step, double *eval, double *first,
			 double *last_eval, long *steps, long *evals)
{
	double prev = -1, sum_step = 0, sum_eval = 0;
	long nstep = 0, neval = 0;
	*steps = 0;
	*first = -1;
	*last_eval = -1;
	for (const char *line = text; line && *line;) {
		struct dlh_metrics_row row;
		if (!dlh_metrics_row_parse(line, strcspn(line, "\n"), &row)) {
			double t = row.time_s;
			if (row.kind == DLH_ROW_TRAIN) {
				if (*first < 0)
					*first = t;
				else if (prev >= 0) {
					sum_step += t - prev;
					nstep++;
				}
				(*steps)++;
			} else if (prev >= 0) {
				sum_eval += t - prev;
				neval++;
				*last_eval = t;
			}
			prev = t;
		}
		line = strchr(line, '\n');
		line = line ? line + 1 : NULL;
	}
	if (*steps == 0)
		return -ENOENT;
	*step = nstep ? sum_step / nstep : 0.0;
	*eval = neval ? sum_eval / neval : 0.0;
	*evals = neval;
	return 0;
}

/* From rank_times (DLH_RANK_TIMES_HEADER): the slowest rank's forward + backward per step, the
 * least wait per step (the wait of the rank that waited least is the
 * gradient sum itself, not imbalance), the largest peak RSS (-1 when the
 * trainer did not write it). Returns 0, or -ENOENT. */
static int rank_times(const char *dir, double *compute, double *wait, double *rss)
{
	char *text = NULL;
	int rc = job_file(dir, DLH_FILE_RANK_TIMES, &text), rows = 0;
	*compute = *wait = *rss = -1;
	if (rc)
		return rc;
	if (strncmp(text, DLH_RANK_TIMES_HEADER, strlen(DLH_RANK_TIMES_HEADER))) {
		free(text);   /* not the columns the contract names */
		return -EINVAL;
	}
	for (const char *line = strchr(text, '\n'); line && line[1];) {
		int r, b;
		long steps;
		double c, w, m;
		int n = sscanf(line + 1, "%d,%d,%ld,%lf,%lf,%lf", &r, &b, &steps, &c, &w, &m);
		if (n >= 5 && steps > 0) {
			*compute = fmax(*compute, c / steps);
			*wait = rows == 0 ? w / steps : fmin(*wait, w / steps);
			if (n == 6)
				*rss = fmax(*rss, m);
			rows++;
		}
		line = strchr(line + 1, '\n');
	}
	free(text);
	return rows ? 0 : -ENOENT;
}

int dlh_estimate_actual(const char *job_dir, double wall_s, struct dlh_estimate *act)
{
	char *text = NULL, v[64];
	double step, eval, first, last_eval, c, w, m;
	long steps, evals;
	for (int i = 0; i < NKEYS; i++)
		*(double *)((char *)act + est_keys[i].off) = -1;
	act->steps = -1;
	act->raw_compute = act->raw_comm = act->raw_startup = act->raw_step = -1;
	int rc = job_file(job_dir, DLH_FILE_METRICS, &text);
	if (rc)
		return rc;
	rc = metrics_times(text, &step, &eval, &first, &last_eval, &steps, &evals);
	free(text);
	if (rc)
		return rc;
	act->steps = steps;
	act->step_s = step;
	if (evals > 0)
		act->epoch_s = (last_eval - first + step) / evals;
	if (rank_times(job_dir, &c, &w, &m) == 0) {
		act->compute_s = c;
		act->comm_s = w;
		act->mem_bytes = m;
	}
	if (wall_s > 0) {
		act->total_s = wall_s;
		text = NULL;
		/* outside the loop: launch to the first step, the last eval to the exit */
		if (job_file(job_dir, DLH_FILE_RESULT, &text) == 0 &&
		    dlh_kv_get(text, "train_time_s", v, sizeof v) == 0)
			act->startup_s = wall_s - (strtod(v, NULL) - first + step);
		free(text);
	}
	return 0;
}

/* ---- history and the refit ---- */

#define HISTORY_FILE "history"
#define HISTORY_MIN 6          /* runs before the factors move from 1 */

int dlh_history_add(const char *state_dir, const struct dlh_estimate *pred,
		    const struct dlh_estimate *act)
{
	char path[4096], line[640], dev[DLH_CORR_DEVICE + 8] = "";
	if (act->total_s <= 0 || pred->raw_compute < 0)
		return -EINVAL;
	if (pred->device[0] && strspn(pred->device, DEVICE_CHARS) == strlen(pred->device))
		snprintf(dev, sizeof dev, " device=%s", pred->device);
	snprintf(path, sizeof path, "%s/%s", state_dir, HISTORY_FILE);
	snprintf(line, sizeof line, "time=%.0f compute=%.6g comm=%.6g startup=%.6g "
		 "predicted=%.6g actual=%.6g step=%.6g actual_step=%.6g%s", dlh_now(),
		 pred->raw_compute, pred->raw_comm, pred->raw_startup, pred->total_s,
		 act->total_s, pred->step_s, act->step_s, dev);
	return dlh_append_line_private(path, line);   /* what ran, how long: root's */
}

/* One history line's terms x (compute, comm, startup), actual y and device
 * key ("" in a line from before keys). Returns 1, or 0 for a line that is
 * not one. */
static int history_row(const char *line, double x[3], double *y, char *device, size_t len)
{
	const char *names[4] = { "compute=", "comm=", "startup=", "actual=" };
	const char *eol = strchr(line, '\n');
	double v[4];
	for (int i = 0; i < 4; i++) {
		const char *p = strstr(line, names[i]);
		while (p && p != line && p[-1] != ' ')
			p = strstr(p + 1, names[i]);
		if (!p || (eol && p > eol) || sscanf(p + strlen(names[i]), "%lf", &v[i]) != 1 || !isfinite(v[i]) ||
		    v[i] < 0)
			return 0;
	}
	memcpy(x, v, 3 * sizeof *x);
	*y = v[3];
	device[0] = '\0';
	const char *d = strstr(line, " device="), *end = strchr(line, '\n');
	if (d && (!end || d < end)) {   /* in this line, not the next */
		d += strlen(" device=");
		size_t n = strspn(d, DEVICE_CHARS);
		if (n < len)
			snprintf(device, len, "%.*s", (int)n, d);
	}
	return *y > 0;
}

/* Solves the n x n system a x = b in place (Gaussian elimination with
 * partial pivoting). Returns 0, or -1 when it is singular. */
static int solve(double a[3][3], double b[3], int n, double x[3])
{
	for (int c = 0; c < n; c++) {
		int p = c;
		for (int r = c + 1; r < n; r++)
			if (fabs(a[r][c]) > fabs(a[p][c]))
				p = r;
		if (fabs(a[p][c]) < 1e-12 * (fabs(a[0][0]) + 1e-300))
			return -1;
		for (int k = 0; k < n; k++) {
			double t = a[c][k];
			a[c][k] = a[p][k];
			a[p][k] = t;
		}
		double t = b[c];
		b[c] = b[p];
		b[p] = t;
		for (int r = c + 1; r < n; r++) {
			double f = a[r][c] / a[c][c];
			for (int k = c; k < n; k++)
				a[r][k] -= f * a[c][k];
			b[r] -= f * b[c];
		}
	}
	for (int c = n - 1; c >= 0; c--) {
		double s = b[c];
		for (int k = c + 1; k < n; k++)
			s -= a[c][k] * x[k];
		x[c] = s / a[c][c];
	}
	return 0;
}

/* The normal equations of the relative least squares over some runs. */
struct fit_sums {
	double ata[3][3], aty[3], sum[3];
	int runs;
};

static void fit_add(struct fit_sums *f, const double x[3], double y)
{
	/* relative least squares: each run weighs by 1/actual, so a long run
	 * does not outweigh many short ones */
	for (int i = 0; i < 3; i++) {
		f->sum[i] += x[i];
		for (int j = 0; j < 3; j++)
			f->ata[i][j] += x[i] * x[j] / (y * y);
		f->aty[i] += x[i] / y;
	}
	f->runs++;
}

/* The factors of f's runs into out (compute, comm, startup). Returns 1, or
 * 0 (identity kept) with too few runs or a fit that far off is noise. */
static int fit_solve(const struct fit_sums *f, double out[3])
{
	out[0] = out[1] = out[2] = 1.0;
	if (f->runs < HISTORY_MIN)
		return 0;
	/* terms that never occurred (no comm on one rank) keep factor 1 */
	int idx[3], n = 0;
	double a[3][3], b[3], x[3];
	for (int i = 0; i < 3; i++)
		if (f->sum[i] > 0)
			idx[n++] = i;
	for (int i = 0; i < n; i++) {
		b[i] = f->aty[idx[i]];
		for (int j = 0; j < n; j++)
			a[i][j] = f->ata[idx[i]][idx[j]];
	}
	if (n == 0 || solve(a, b, n, x) < 0)
		return 0;
	for (int i = 0; i < n; i++)
		if (!(x[i] > 0.1 && x[i] < 10.0))
			return 0;
	for (int i = 0; i < n; i++)
		out[idx[i]] = x[i];
	return 1;
}

int dlh_history_fit(const char *state_dir, struct dlh_correction *corr)
{
	char path[4096], *text = NULL, device[DLH_CORR_DEVICE];
	size_t len;
	struct fit_sums all = { 0 }, *by = calloc(2 * DLH_CORR_DEVICES, sizeof *by);
	char keys[2 * DLH_CORR_DEVICES][DLH_CORR_DEVICE];
	int nkeys = 0;
	*corr = (struct dlh_correction){ .compute = 1.0, .comm = 1.0, .startup = 1.0 };
	if (!by)
		return -ENOMEM;
	snprintf(path, sizeof path, "%s/%s", state_dir, HISTORY_FILE);
	int rc = dlh_read_file(path, 64L << 20, &text, &len);
	if (rc) {
		free(by);
		return rc == -ENOENT ? 0 : rc;
	}
	for (const char *line = text; line && *line;) {
		double x[3], y;
		if (history_row(line, x, &y, device, sizeof device)) {
			fit_add(&all, x, y);
			int k = 0;
			while (k < nkeys && strcmp(keys[k], device))
				k++;
			if (device[0] && k == nkeys && nkeys < 2 * DLH_CORR_DEVICES)
				snprintf(keys[nkeys++], sizeof keys[0], "%s", device);
			if (device[0] && k < nkeys)
				fit_add(&by[k], x, y);
		}
		line = strchr(line, '\n');
		line = line ? line + 1 : NULL;
	}
	free(text);
	double f[3];
	if (fit_solve(&all, f))
		*corr = (struct dlh_correction){ .compute = f[0], .comm = f[1], .startup = f[2],
						 .runs = all.runs };
	/* each key with enough runs of its own, the most runs first */
	for (int done = 0; done < nkeys && corr->ndevices < DLH_CORR_DEVICES; done++) {
		int best = -1;
		for (int k = 0; k < nkeys; k++)
			if (by[k].runs > 0 && (best < 0 || by[k].runs > by[best].runs))
				best = k;
		if (best < 0)
			break;
		if (fit_solve(&by[best], f)) {
			struct dlh_correction_device *d = &corr->device[corr->ndevices++];
			snprintf(d->device, sizeof d->device, "%s", keys[best]);
			d->compute = f[0], d->comm = f[1], d->startup = f[2], d->runs = by[best].runs;
		}
		by[best].runs = 0;   /* taken */
	}
	free(by);
	return all.runs;
}
