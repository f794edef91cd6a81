/* profile.c - a user's program estimated from measurement: the fit of its
 * profiles and the prediction for any rank count */
#include "engine/plan/profile.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One row into s (a train row's time since the row before, as a step or,
 * after an eval row, as a step with the evaluation). */
static void sum_add(struct dlh_profile_sum *s, const struct dlh_profile_row *r)
{
	if (r->eval) {
		s->between = 1;
		return;
	}
	double d = r->t - s->prev;
	s->prev = r->t;
	if (d < 0)
		return;   /* out of order: not a step */
	if (s->between)
		s->gaps += d, s->nev++;
	else
		s->steps += d, s->nstep++;
	s->between = 0;
}

void dlh_profile_acc_add(struct dlh_profile_acc *acc, const struct dlh_profile_row *r)
{
	if (!r->eval && !acc->has_train)
		acc->has_train = 1, acc->first_train_t = r->t;
	acc->last_t = r->t;
	if (acc->nrows++ == 0)   /* fewer rows than the warm-up: the first is the start */
		acc->alt.prev = r->t;
	else
		sum_add(&acc->alt, r);
	if (acc->train < DLH_PROFILE_WARMUP) {   /* the warm-up's rows are not timed */
		if (!r->eval && ++acc->train == DLH_PROFILE_WARMUP)
			acc->main.prev = r->t;
		return;
	}
	sum_add(&acc->main, r);
}

void dlh_profile_acc_result(const struct dlh_profile_acc *acc, struct dlh_profile_run *m)
{
	const struct dlh_profile_sum *s = acc->train < DLH_PROFILE_WARMUP ? &acc->alt : &acc->main;
	m->rows = s->nstep;
	m->span_s = s->steps;
	m->step_s = s->nstep ? s->steps / s->nstep : 0;
	m->evals = s->nev;
	m->eval_s = s->nev ? fmax(0.0, s->gaps / s->nev - m->step_s) : 0;
}

void dlh_profile_rows(const struct dlh_profile_row *r, int n, struct dlh_profile_run *m)
{
	struct dlh_profile_acc acc = { 0 };
	for (int i = 0; i < n; i++)
		dlh_profile_acc_add(&acc, &r[i]);
	dlh_profile_acc_result(&acc, m);
}

void dlh_profile_learn(struct dlh_profile_fit *f, double predicted_s, double actual_s)
{
	if (predicted_s <= 0 || actual_s <= 0)
		return;
	f->corrections++;
	f->tail_s += (actual_s - predicted_s) / f->corrections;
}

/* The share of a ring allreduce's bytes each of r ranks sends: 2(r-1)/r. */
static double ring(int r)
{
	return r > 1 ? 2.0 * (r - 1) / r : 0.0;
}

int dlh_profile_fit(const struct dlh_profile_run *runs, int n, struct dlh_profile_fit *f,
		    char *err, size_t errlen)
{
	memset(f, 0, sizeof *f);
	if (n < 1 || n > DLH_PROFILE_RUNS) {
		snprintf(err, errlen, "no profile to fit");
		return -EINVAL;
	}
	const struct dlh_profile_run *lo = &runs[0], *hi = &runs[n - 1];
	if (n == 2 && runs[1].ranks < runs[0].ranks) {
		lo = &runs[1];
		hi = &runs[0];
	}
	for (int i = 0; i < n; i++) {
		if (runs[i].ranks < 1 || runs[i].step_s <= 0) {
			snprintf(err, errlen, "its profile on %d rank%s timed no steps (it wrote fewer "
				 "than %d train rows)", runs[i].ranks, runs[i].ranks == 1 ? "" : "s",
				 DLH_PROFILE_WARMUP + 2);
			return -EINVAL;
		}
		if (runs[i].steps <= 0) {
			snprintf(err, errlen, "the program does not tell its steps ([job] steps, or "
				 "run.info's total_steps as the Python library writes it)");
			return -EINVAL;
		}
	}
	if (n == 2 && lo->ranks == hi->ranks) {
		snprintf(err, errlen, "two profiles of %d ranks", lo->ranks);
		return -EINVAL;
	}
	f->runs = n;
	/* each rank keeps its batch when the steps shrink with the ranks */
	double p = hi->ranks, ratio = (double)lo->steps * lo->ranks / ((double)hi->steps * p);
	f->weak = n == 2 && fabs((double)hi->steps * p / ((double)lo->steps * lo->ranks) - 1.0) <=
			    DLH_PROFILE_WEAK_TOL && fabs(ratio - 1.0) <= DLH_PROFILE_WEAK_TOL &&
		  lo->steps != hi->steps;
	f->steps1 = f->weak ? lo->steps * lo->ranks : lo->steps;
	/* the lower count's step is its work (and its sum, when it has ranks) */
	double l = lo->ranks;
	if (n == 1) {
		f->compute_s = f->weak ? lo->step_s : lo->step_s * l;
		f->comm_s = 0;
	} else {
		/* lo: s_l = a w(l) + b ring(l); hi: s_h = a w(h) + b ring(h), with
		 * w(r) = 1 (weak) or 1/r; two equations, two unknowns */
		double wl = f->weak ? 1.0 : 1.0 / l, wh = f->weak ? 1.0 : 1.0 / p;
		double rl = ring(lo->ranks), rh = ring(hi->ranks);
		double det = wl * rh - wh * rl;
		f->compute_s = (lo->step_s * rh - hi->step_s * rl) / det;
		f->comm_s = (wl * hi->step_s - wh * lo->step_s) / det;
		if (f->comm_s < 0 || f->compute_s <= 0) {   /* better than linear: all work */
			f->comm_s = 0;
			f->compute_s = hi->step_s / wh;
		}
	}
	if (n == 2 && hi->ranks > lo->ranks) {
		f->startup_rank_s = fmax(0.0, (hi->startup_s - lo->startup_s) / (p - l));
		f->startup_s = lo->startup_s - f->startup_rank_s * (l - 1);
	} else {
		f->startup_s = lo->startup_s;
	}
	if (f->startup_s < 0)
		f->startup_s = 0;
	double mem = 0;
	for (int i = 0; i < n; i++)
		if (runs[i].peak_mem > 0)
			mem = fmax(mem, (double)runs[i].peak_mem / runs[i].ranks);
	f->mem_rank = mem;
	/* an epoch's steps and an evaluation, where a run said or timed them:
	 * at one rank, the test set shared by the ranks */
	for (int i = 0; i < n; i++) {
		const struct dlh_profile_run *r = &runs[i];
		if (r->steps_per_epoch > 0 && !f->spe1)
			f->spe1 = f->weak ? r->steps_per_epoch * r->ranks : r->steps_per_epoch;
		if (r->evals > 0 && !f->eval_s)
			f->eval_s = r->eval_s * r->ranks;
	}
	return 0;
}

void dlh_profile_predict(const struct dlh_profile_fit *f, int ranks, double watts_busy,
			 struct dlh_estimate *out)
{
	double r = ranks > 0 ? ranks : 1;
	memset(out, 0, sizeof *out);
	out->steps = f->weak ? (long)ceil((double)f->steps1 / r) : f->steps1;
	out->compute_s = f->weak ? f->compute_s : f->compute_s / r;
	out->comm_s = f->comm_s * ring(ranks);
	out->step_s = out->compute_s + out->comm_s;
	out->startup_s = f->startup_s + f->startup_rank_s * (r - 1);
	long spe = f->spe1 > 0 ? (f->weak ? (long)ceil((double)f->spe1 / r) : f->spe1) : 0;
	double evals = spe > 0 ? floor((double)out->steps / (double)spe) : 0;
	out->epoch_s = spe > 0 ? (double)spe * out->step_s + f->eval_s / r : 0;
	out->total_s = out->startup_s + (double)out->steps * out->step_s + evals * f->eval_s / r +
		       f->tail_s;
	if (out->total_s < out->startup_s)
		out->total_s = out->startup_s;
	out->mem_bytes = f->mem_rank;
	out->joules = r * watts_busy * out->total_s;
	out->raw_compute = (double)out->steps * out->compute_s;
	out->raw_comm = (double)out->steps * out->comm_s;
	out->raw_startup = out->startup_s + f->tail_s;
	out->raw_step = out->step_s;
}

int dlh_profile_choose(const struct dlh_profile_fit *f, int max_ranks, double deadline_s,
		       double watts_busy, struct dlh_estimate *out)
{
	int best = 0, fastest = 1;
	struct dlh_estimate e, b, fast;
	dlh_profile_predict(f, 1, watts_busy, &fast);
	for (int r = 1; r <= (max_ranks > 0 ? max_ranks : 1); r++) {
		dlh_profile_predict(f, r, watts_busy, &e);
		if (e.total_s < fast.total_s) {
			fast = e;
			fastest = r;
		}
		if (deadline_s > 0 && e.total_s <= deadline_s && (!best || e.joules < b.joules)) {
			best = r;
			b = e;
		}
	}
	if (deadline_s <= 0 || !best) {
		*out = fast;
		return deadline_s > 0 ? -ETIME : fastest;
	}
	*out = b;
	return best;
}

uint64_t dlh_profile_key(const struct dlh_spec *spec)
{
	uint64_t h = dlh_hash(spec->command, strlen(spec->command) + 1);
	h = dlh_hash_more(h, spec->env, strlen(spec->env) + 1);
	h = dlh_hash_more(h, &spec->steps, sizeof spec->steps);
	if (spec->batch_size > 0) {   /* the batch it is handed: the work of a step */
		h = dlh_hash_more(h, &spec->batch_size, sizeof spec->batch_size);
		h = dlh_hash_more(h, &spec->scale_batch, sizeof spec->scale_batch);
	}
	return dlh_hash_more(h, &spec->device, sizeof spec->device);
}

static const struct {
	const char *key;
	size_t off;
} fit_keys[] = {
	{ "profile_compute_s", offsetof(struct dlh_profile_fit, compute_s) },
	{ "profile_comm_s", offsetof(struct dlh_profile_fit, comm_s) },
	{ "profile_startup_s", offsetof(struct dlh_profile_fit, startup_s) },
	{ "profile_startup_rank_s", offsetof(struct dlh_profile_fit, startup_rank_s) },
	{ "profile_mem_rank", offsetof(struct dlh_profile_fit, mem_rank) },
	{ "profile_eval_s", offsetof(struct dlh_profile_fit, eval_s) },
	{ "profile_tail_s", offsetof(struct dlh_profile_fit, tail_s) },
};

int dlh_profile_format(const struct dlh_profile_fit *f, struct dlh_buf *out)
{
	int rc = dlh_buf_printf(out, "profile_runs=%d\nprofile_scaling=%s\nprofile_steps1=%ld\n"
				"profile_steps_per_epoch1=%ld\nprofile_corrections=%d\n", f->runs,
				f->weak ? "weak" : "strong", f->steps1, f->spe1, f->corrections);
	for (size_t i = 0; i < sizeof fit_keys / sizeof fit_keys[0]; i++)
		rc |= dlh_buf_printf(out, "%s=%.6g\n", fit_keys[i].key,
				     *(const double *)((const char *)f + fit_keys[i].off));
	return rc ? -ENOMEM : 0;
}

int dlh_profile_parse(const char *text, struct dlh_profile_fit *f)
{
	char v[64];
	memset(f, 0, sizeof *f);
	if (dlh_kv_get(text, "profile_runs", v, sizeof v))
		return -EINVAL;
	f->runs = atoi(v);
	if (dlh_kv_get(text, "profile_scaling", v, sizeof v))
		return -EINVAL;
	f->weak = !strcmp(v, "weak");
	if (dlh_kv_get(text, "profile_steps1", v, sizeof v))
		return -EINVAL;
	f->steps1 = strtol(v, NULL, 10);
	if (!dlh_kv_get(text, "profile_steps_per_epoch1", v, sizeof v))
		f->spe1 = strtol(v, NULL, 10);
	if (!dlh_kv_get(text, "profile_corrections", v, sizeof v))
		f->corrections = atoi(v);
	for (size_t i = 0; i < sizeof fit_keys / sizeof fit_keys[0]; i++) {
		if (dlh_kv_get(text, fit_keys[i].key, v, sizeof v)) {
			if (fit_keys[i].off == offsetof(struct dlh_profile_fit, eval_s) ||
			    fit_keys[i].off == offsetof(struct dlh_profile_fit, tail_s))
				continue;   /* a record from before they were kept */
			return -EINVAL;
		}
		*(double *)((char *)f + fit_keys[i].off) = strtod(v, NULL);
	}
	return f->runs > 0 && f->steps1 > 0 && f->compute_s > 0 ? 0 : -EINVAL;
}
