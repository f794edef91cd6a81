/* choose.c - deciding how a job runs, before it runs */
#include "engine/plan/choose.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Goyal et al. 2017 warm up over 5 of 90 epochs: the same share of a run. */
#define WARMUP_SHARE (5.0 / 90.0)

/* What the estimate callback needs besides the configuration. */
struct ctx {
	const struct dlh_choose_in *in;
	const struct dlh_dataset_shape *shape;
	int tried;                    /* configurations the spec allows */
	struct dlh_calib_dev peak[DLH_PLANNER_TYPES];   /* types nobody measured: their
							   pool figures (peak_of) */
	int estimated;                /* of which the estimator could estimate */
	char err[256];                /* the estimator's last refusal */
};

/* The global batch of count ranks: the spec's, or with scale_batch the
 * spec's per device. */
static long global_batch(const struct dlh_spec *s, int count)
{
	return s->scale_batch ? (long)s->batch_size * count : s->batch_size;
}

/* 1 when the spec's [resources] device may run on type t (same indices
 * in the pool and its free view). */
static int type_allowed(const struct dlh_pool *p, int t, const struct dlh_spec *s)
{
	return p->type[t].gpu == (s->device == DLH_DEVICE_GPU);
}

/* A device type the calibration did not measure (a GPU type no node with
 * it has calibrated: dlh-calib --phase gpu runs where the GPUs are) as its
 * pool figures say: peak FLOP/s and bandwidth. NULL when the pool does not
 * know them either. */
static const struct dlh_calib_dev *peak_of(struct ctx *x, int t)
{
	const struct dlh_pool_type *pt = &x->in->pool->type[t];
	struct dlh_calib_dev *d = &x->peak[t];

	if (pt->flops <= 0.0 || pt->bandwidth <= 0.0)
		return NULL;
	memset(d, 0, sizeof *d);
	snprintf(d->type, sizeof d->type, "%s", pt->name);
	d->gemm_flops = pt->flops;
	d->mem_bw = d->mem_bw_all = pt->bandwidth;
	d->gemm_all = 1.0;
	d->peak = 1;
	return d;
}

/* Fills ein for configuration c: its parts' devices in order, per-rank
 * batches in proportion to each device's speed. */
static int fill_in(struct ctx *x, const struct dlh_pool_free *p, const struct dlh_config *c,
		   struct dlh_estimate_in *ein)
{
	const struct dlh_spec *s = x->in->spec;
	const struct dlh_calib_dev *dev[DLH_CONFIG_PARTS];
	double speed[DLH_RANKS_MAX];
	long global = global_batch(s, c->count);

	if (global > 1048576 || global < c->count || c->count > DLH_RANKS_MAX)
		return -EINVAL;
	for (int i = 0; i < c->nparts; i++) {
		int t = c->part[i].type;

		dev[i] = dlh_calib_dev(x->in->cal, p->type[t].name);
		if (!dev[i] && !(dev[i] = peak_of(x, t))) {
			snprintf(x->err, sizeof x->err, "device type \"%s\" is neither calibrated "
				 "nor given flops and bandwidth in the pool", p->type[t].name);
			return -ENOENT;
		}
	}
	memset(ein, 0, sizeof *ein);
	ein->spec = s;
	ein->train_n = x->shape->train_n;
	ein->test_n = x->shape->test_n;
	ein->c = x->shape->c;
	ein->h = x->shape->h;
	ein->w = x->shape->w;
	ein->classes = x->shape->classes;
	ein->ranks = c->count;
	ein->nodes = c->nodes;
	const struct dlh_pool_type *pt = x->in->pool->type;
	for (int i = 0; i < c->nparts; i++) {   /* GPUs: NCCL on the slowest part's link */
		const struct dlh_pool_type *t = &pt[c->part[i].type];
		double alpha = t->link_alpha, beta = t->link_bw > 0 ? 1.0 / t->link_bw : 0.0;
		const struct dlh_calib_dev *d = dev[i];
		if (d->gpu > 0 && d->nccl_gpus >= 2 && d->nccl_beta > 0) {
			/* as measured: the whole call's alpha-beta over P GPUs, as
			 * a ring's 2(P-1) steps and 2(P-1)/P of the bytes */
			double p = d->nccl_gpus;
			alpha = d->nccl_alpha / (2.0 * (p - 1));
			beta = d->nccl_beta * p / (2.0 * (p - 1));
		}
		if (t->gpu && beta > 0 && (ein->link_beta <= 0 || beta > ein->link_beta)) {
			ein->link_beta = beta;
			ein->link_alpha = alpha;
		}
	}
	if (ein->link_beta > 0) {   /* and between nodes: as measured, else a 100 Gb/s network */
		const struct dlh_calib *cal = x->in->cal;
		ein->net_alpha = cal->net_alpha > 0 ? cal->net_alpha : DLH_NET_ALPHA;
		ein->net_beta = cal->net_beta > 0 ? cal->net_beta : 1.0 / DLH_NET_BW;
	}
	for (int i = 0, r = 0; i < c->nparts; i++)
		for (int j = 0; j < c->part[i].count; j++, r++) {
			ein->dev[r] = dev[i];
			ein->watts_busy[r] = p->type[c->part[i].type].watts_busy;
			ein->watts_idle[r] = p->type[c->part[i].type].watts_idle;
			speed[r] = dev[i]->gemm_flops;
		}
	return dlh_split_batch((int)global, speed, c->count, ein->batch);
}

/* The planner's callback: the estimate of configuration c. */
static int estimate_config(void *ctxp, const struct dlh_pool_free *p, const struct dlh_config *c,
			   struct dlh_config_cost *out)
{
	struct ctx *x = ctxp;
	const struct dlh_spec *s = x->in->spec;
	struct dlh_estimate_in ein;
	struct dlh_estimate est;

	for (int i = 0; i < c->nparts; i++)
		if (!type_allowed(x->in->pool, c->part[i].type, s))
			return -EINVAL;
	if (s->ranks > 0 && c->count != s->ranks)
		return -EINVAL;
	if (s->nodes > 0 && c->nodes != s->nodes)
		return -EINVAL;
	/* devices of two types launch too: each rank gets a GPU of its part's
	 * type (dlh_plan_place, --gpus); CPU types of two kinds share no
	 * placement rule yet: planned in a dry run only */
	if (c->nparts > 1 && !s->dry_run && !x->in->pool->type[c->part[0].type].gpu)
		return -EINVAL;
	x->tried++;
	if (fill_in(x, p, c, &ein) < 0 ||
	    dlh_estimate(&ein, x->in->cal, x->in->corr, &est, x->err, sizeof x->err) < 0)
		return -EINVAL;
	x->estimated++;
	out->total_s = est.total_s;
	out->joules = est.joules;
	out->mem_bytes = est.mem_bytes;
	out->fits = 1;
	for (int i = 0; i < c->nparts; i++) {   /* the peak rank against every part's type */
		double room = p->type[c->part[i].type].mem_bytes;

		out->fits &= room <= 0.0 || est.mem_bytes <= room;
	}
	return 0;
}

/* The planner's view of the pool: the devices of every usable node not in
 * use (used: CPU slots in use per node; NULL = none). */
static void pool_view(const struct dlh_pool *pool, const int *used, struct dlh_pool_free *v)
{
	dlh_pool_free_view_nodes(pool, used, NULL, v);
}

/* The spec's own ranks and equal batches (a [job] command: ranks only),
 * not estimated (why says why). */
static int unestimated(const struct dlh_choose_in *in, struct dlh_choice *out, const char *why)
{
	const struct dlh_spec *s = in->spec;
	int n = dlh_plan_slots(s, in->pool);

	out->estimated = 0;
	snprintf(out->why, sizeof out->why, "%s", why);
	out->ranks = n < 1 ? 1 : n > DLH_RANKS_MAX ? DLH_RANKS_MAX : n;
	snprintf(out->type, sizeof out->type, "%s", s->device == DLH_DEVICE_GPU ? "gpu" : "cpu");
	if (s->command[0])
		return 0;   /* a program's batch and lr: command_batch */
	out->lr = s->lr;
	out->warmup_steps = s->warmup_steps;
	/* cannot fail: the schema refuses batch_size < ranks, and ranks = auto
	 * takes at most batch_size slots */
	dlh_split_batch(s->batch_size, NULL, out->ranks, out->batch);
	return 0;
}

/* Sets lr and warmup for the chosen global batch, and says what changed. */
static void scale_lr(const struct dlh_spec *s, long global, long steps, struct dlh_choice *out)
{
	size_t used = 0;

	out->lr = s->lr;
	out->warmup_steps = s->warmup_steps;
	if (global == s->batch_size)
		return;
	used += (size_t)snprintf(out->changes + used, sizeof out->changes - used,
				 "global_batch %ld = %d ranks x %d (scale_batch: batch_size is one "
				 "device's)\n", global, out->ranks, s->batch_size);
	if (s->lr <= 0.0) {   /* the range test runs at the global batch: nothing to scale */
		snprintf(out->changes + used, sizeof out->changes - used,
			 "lr auto: the range test runs at the global batch %ld\n", global);
		return;
	}
	out->lr = s->lr * (double)global / s->batch_size;
	long warm = lround(ceil(WARMUP_SHARE * (double)steps));

	if (warm > out->warmup_steps)
		out->warmup_steps = (int)(warm < 100000000 ? warm : 100000000);
	snprintf(out->changes + used, sizeof out->changes - used,
		 "lr %.6g -> %.6g: linear scaling rule (Goyal et al. 2017), x%ld/%d\n"
		 "warmup_steps %d -> %d: linear warmup over 5/90 of the run's %ld steps "
		 "(Goyal et al.)\n",
		 s->lr, out->lr, global, s->batch_size, s->warmup_steps, out->warmup_steps, steps);
}

void dlh_choose_command_devices(const struct dlh_pool *p, int gpu, int *max, const char **type,
				double *watts)
{
	const struct dlh_pool_type *t = NULL;
	for (int k = 0; k < p->nnodes && !t; k++) {
		if (!dlh_pool_node_usable(p, k))
			continue;
		if (!gpu)
			t = &p->type[p->nodes[k].cpu_type];
		for (int i = 0; gpu && i < p->ntypes && !t; i++)
			if (p->type[i].gpu && p->nodes[k].devices[i] > 0)
				t = &p->type[i];
	}
	*type = t ? t->name : gpu ? "gpu" : "cpu";
	*watts = t ? t->watts_busy : 0;
	*max = dlh_pool_devices(p, gpu, 1);
	if (*max < 1)
		*max = 1;
	if (*max > DLH_RANKS_MAX)
		*max = DLH_RANKS_MAX;
}

/* A [job] command: by the record of an earlier run of the program, else
 * profiled first: at the spec's count, or (ranks = auto) at one rank and
 * at every slot. */
static int command_choice(const struct dlh_choose_in *in, struct dlh_choice *out, char *err,
			  size_t errlen)
{
	const struct dlh_spec *s = in->spec;
	int max;
	const char *type;
	double watts;
	dlh_choose_command_devices(in->pool, s->device == DLH_DEVICE_GPU, &max, &type, &watts);
	if (s->batch_size > 0 && !s->scale_batch && max > s->batch_size)
		max = s->batch_size;   /* a rank a sample at least of the batch it is handed */
	if (s->profile == DLH_PROFILE_OFF) {
		if (s->deadline > 0) {
			snprintf(err, errlen, "a [job] command with profile = false has no estimate to "
				 "meet it by");
			return -ETIME;
		}
		return unestimated(in, out, "[job] profile = false: the program is not measured");
	}
	if (in->fit && s->profile == DLH_PROFILE_AUTO)
		return dlh_choose_profiled(in->fit, "the record of an earlier run of the program", s, max,
					   type, watts, out, err, errlen);
	int n = 0;
	if (s->ranks > 0) {
		out->profile_counts[n++] = s->ranks;
	} else {
		out->profile_counts[n++] = 1;
		if (max > 1)
			out->profile_counts[n++] = max;
	}
	out->profile_runs = n;
	char why[160];
	snprintf(why, sizeof why, "to be measured before its run: its first steps on %s%d rank%s "
		 "([job] profile)", n > 1 ? "1 rank, then on " : "", out->profile_counts[n - 1],
		 out->profile_counts[n - 1] == 1 ? "" : "s");
	unestimated(in, out, why);
	out->ranks = out->profile_counts[0];
	return 0;
}

/* What a [job] command is handed of its spec's [train] keys on out->ranks
 * ranks (dlh_plan_command_batch): into out->batch, out->lr and, where
 * scale_batch changes them, out->changes. */
static void command_batch(const struct dlh_spec *s, struct dlh_choice *out)
{
	size_t used = 0;
	if (dlh_plan_command_batch(s, out->ranks, out->batch, &out->lr) < 0 || !s->scale_batch)
		return;
	if (s->batch_size > 0)
		used += (size_t)snprintf(out->changes, sizeof out->changes,
					 "global_batch %ld = %d ranks x %d (scale_batch: batch_size is "
					 "one device's; DLH_GLOBAL_BATCH, each rank's DLH_BATCH)\n",
					 (long)s->batch_size * out->ranks, out->ranks, s->batch_size);
	if (s->lr > 0.0 && out->ranks > 1)
		snprintf(out->changes + used, sizeof out->changes - used,
			 "lr %.6g -> %.6g (DLH_LR): linear scaling rule (Goyal et al. 2017), x%d; "
			 "a program warms up as it chooses\n", s->lr, out->lr, out->ranks);
}

int dlh_choose(const struct dlh_choose_in *in, struct dlh_choice *out, char *err, size_t errlen)
{
	const struct dlh_spec *s = in->spec;
	struct dlh_dataset_shape shape;
	struct ctx x = { .in = in, .shape = &shape };
	char why[512];
	int rc;

	memset(out, 0, sizeof *out);
	out->deadline_s = (double)s->deadline;
	if (s->command[0]) {
		if ((rc = command_choice(in, out, err, errlen)) == 0)
			command_batch(s, out);
		return rc;
	}
	if (!in->cal || in->cal->when <= 0)
		return unestimated(in, out, "the pool is not calibrated yet");
	if (in->shape)
		shape = *in->shape;
	else if (dlh_dataset_shape(s, &shape, why, sizeof why) < 0)
		return unestimated(in, out, why);

	pool_view(in->pool, s->dry_run ? NULL : in->cpus_used, &out->pool);
	rc = dlh_planner_choose(&out->pool, out->deadline_s, 0, estimate_config, &x, &out->best,
				out->alt, DLH_CHOOSE_ALTS, &out->nalt, err, errlen);
	if ((!x.tried || (rc == -ENOSPC && x.estimated)) && in->cpus_used && !s->dry_run) {
		/* nothing (that fits) is free: plan on the whole pool and wait for it */
		pool_view(in->pool, NULL, &out->pool);
		x.tried = x.estimated = 0;
		rc = dlh_planner_choose(&out->pool, out->deadline_s, 0, estimate_config, &x,
					&out->best, out->alt, DLH_CHOOSE_ALTS, &out->nalt, err, errlen);
	}
	if (!x.tried)   /* the pool has not what the spec asks: dlh_plan_make_with says what */
		return unestimated(in, out, "no device of the pool matches [resources]");
	if (rc == -ENOSPC && !x.estimated)   /* no configuration could be estimated */
		return unestimated(in, out, x.err);
	if (rc)
		return rc;

	const struct dlh_config *bc = &out->best.c;
	struct dlh_estimate_in ein;

	out->ranks = bc->count;
	snprintf(out->type, sizeof out->type, "%s%s%s", out->pool.type[bc->part[0].type].name,
		 bc->nparts > 1 ? "+" : "", bc->nparts > 1 ? out->pool.type[bc->part[1].type].name : "");
	if (fill_in(&x, &out->pool, bc, &ein) < 0 ||
	    dlh_estimate(&ein, in->cal, in->corr, &out->est, err, errlen) < 0)
		return -EINVAL;
	memcpy(out->batch, ein.batch, sizeof out->batch[0] * (size_t)out->ranks);
	scale_lr(s, global_batch(s, out->ranks), out->est.steps, out);
	if (bc->nparts > 1) {
		size_t used = strlen(out->changes);

		snprintf(out->changes + used, sizeof out->changes - used,
			 "batches by device speed: %d x %s take %d each, %d x %s %d each "
			 "(gradients weighted by batch: the update is the global batch's)\n",
			 bc->part[0].count, out->pool.type[bc->part[0].type].name, out->batch[0],
			 bc->part[1].count, out->pool.type[bc->part[1].type].name,
			 out->batch[bc->part[0].count]);
	}
	for (int i = 0; i < bc->nparts; i++) {
		const char *name = out->pool.type[bc->part[i].type].name;
		size_t used = strlen(out->changes);

		const struct dlh_calib_dev *d = dlh_calib_dev(in->cal, name);
		if (!d)
			snprintf(out->changes + used, sizeof out->changes - used,
				 "estimate: %s is not calibrated (no node with it has measured it: "
				 "dlh-calib --phase gpu runs where its GPUs are); its pool figures "
				 "stand in: peak FLOP/s and bandwidth\n", name);
		else if (d->gpu > 0)
			snprintf(out->changes + used, sizeof out->changes - used,
				 "estimate: %s as calibrated on it: cuBLAS %.3g GFLOP/s at best, "
				 "launch %.3g us, sync %.3g us, context + cuBLAS + NCCL %.0f MiB\n",
				 name, d->gemm_flops / 1e9, d->kernel_s * 1e6, d->sync_s * 1e6,
				 (d->ctx_bytes + d->blas_bytes + d->nccl_bytes) / 1048576.0);
	}
	out->estimated = 1;
	return 0;
}

/* One candidate as a line of the plan. */
static int candidate_line(struct dlh_buf *b, const char *label, const struct dlh_pool_free *p,
			  const struct dlh_candidate *c)
{
	char what[256], t[32];

	dlh_config_describe(p, &c->c, what, sizeof what);
	dlh_duration_text(c->cost.total_s, t, sizeof t);
	return dlh_buf_printf(b, "%s %s: %s, %.0f J, %.0f MiB per device\n", label, what, t,
			      c->cost.joules, c->cost.mem_bytes / 1048576.0);
}

int dlh_choose_profiled(const struct dlh_profile_fit *f, const char *source,
			const struct dlh_spec *spec, int max_ranks, const char *type, double watts,
			struct dlh_choice *out, char *err, size_t errlen)
{
	char d[32], t[32];
	struct dlh_estimate e;
	memset(out, 0, sizeof *out);
	int ranks = spec->ranks > 0 ? spec->ranks : dlh_profile_choose(f, max_ranks, (double)spec->deadline,
									 watts, &e);
	if (spec->ranks > 0)
		dlh_profile_predict(f, ranks, watts, &e);
	dlh_duration_text((double)spec->deadline, d, sizeof d);
	dlh_duration_text(e.total_s, t, sizeof t);
	if (ranks == -ETIME || (spec->deadline > 0 && e.total_s > (double)spec->deadline)) {
		if (spec->ranks > 0)
			snprintf(err, errlen, "%d x %s is estimated at %s by %s, past the deadline %s "
				 "(ranks = auto lets the planner choose)", spec->ranks, type, t, source, d);
		else
			snprintf(err, errlen, "no rank count meets the deadline %s: the fastest, %d x %s, "
				 "is estimated at %s by %s", d, dlh_profile_choose(f, max_ranks, 0, watts, &e),
				 type, t, source);
		return -ETIME;
	}
	out->estimated = out->profiled = 1;
	out->ranks = ranks;
	out->est = e;
	out->fit = *f;
	out->fit_max = max_ranks > ranks ? max_ranks : ranks;
	out->fit_watts = watts;
	out->deadline_s = (double)spec->deadline;
	snprintf(out->type, sizeof out->type, "%s", type);
	snprintf(out->fit_source, sizeof out->fit_source, "%s", source);
	return 0;
}

/* The planner's part of a [job] command's plan: the counts by its fit. */
static int profiled_format(const struct dlh_choice *c, struct dlh_buf *out)
{
	char d[32], t[32];
	int rc = 0;
	if (c->deadline_s > 0) {
		dlh_duration_text(c->deadline_s, d, sizeof d);
		rc |= dlh_buf_printf(out, "planner fewest joules finishing within the deadline %s, by %s\n",
				     d, c->fit_source);
	} else {
		rc |= dlh_buf_printf(out, "planner fastest (no [job] deadline), by %s\n", c->fit_source);
	}
	for (int r = 1; r <= c->fit_max && r <= DLH_RANKS_MAX; r++) {
		struct dlh_estimate e;
		dlh_profile_predict(&c->fit, r, c->fit_watts, &e);
		dlh_duration_text(e.total_s, t, sizeof t);
		rc |= dlh_buf_printf(out, "%s %d x %s: %s, %.0f J, %.0f MiB per device\n",
				     r == c->ranks ? "chosen" : "candidate", r, c->type, t, e.joules,
				     e.mem_bytes / 1048576.0);
	}
	return rc ? -ENOMEM : 0;
}

int dlh_choice_format(const struct dlh_choice *c, struct dlh_buf *out)
{
	int rc = 0;

	if (!c->estimated || c->profiled) {
		rc = c->profiled ? profiled_format(c, out) :
				   dlh_buf_printf(out, "planner none: %s\n", c->why);
		return rc ? rc : dlh_buf_printf(out, "%s", c->changes);
	}
	if (c->deadline_s > 0) {
		char d[32];

		dlh_duration_text(c->deadline_s, d, sizeof d);
		rc |= dlh_buf_printf(out, "planner fewest joules finishing within the deadline %s\n", d);
	} else {
		rc |= dlh_buf_printf(out, "planner fastest (no [job] deadline)\n");
	}
	rc |= candidate_line(out, "chosen", &c->pool, &c->best);
	for (int i = 0; i < c->nalt; i++)
		rc |= candidate_line(out, "candidate", &c->pool, &c->alt[i]);
	if (c->changes[0])
		rc |= dlh_buf_printf(out, "%s", c->changes);
	return rc ? -ENOMEM : 0;
}
