/* plots.c - a job's plots (loss, accuracy, throughput, progress) from its metrics.csv rows */
#include "engine/report/plots.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUCKETS (DLH_PLOT_POINTS_MAX / 2)   /* each keeps two points */

/* The colours of the series: each distinct over all four plots, so that a
 * screenshot of report.html tells them apart (tests/it/92-plots.sh). */
#define COLOR_LOSS "#9ecae1"
#define COLOR_LOSS_SMOOTH "#1f77b4"
#define COLOR_TEST_LOSS "#d62728"
#define COLOR_TEST_ACC "#2ca02c"
#define COLOR_ACC_SMOOTH "#ff7f0e"
#define COLOR_RATE "#9467bd"
#define COLOR_STEPS "#17becf"
#define COLOR_PREDICTED "#8c564b"
#define COLOR_FINISH "#e377c2"
#define COLOR_EXTRA "#bcbd22"
#define COLOR_EXTRA_EVAL "#7f7f7f"

void dlh_plots_init(struct dlh_plots *p)
{
	memset(p, 0, sizeof *p);
	p->w_loss = p->w_acc = 1;
}

void dlh_thin_add(struct dlh_thin *t, double x, double y)
{
	struct dlh_point pt = { x, y };
	if (!isfinite(x) || !isfinite(y))
		return;
	t->fed++;
	if (!t->width)
		t->width = 1;
	if (!t->open) {
		t->lo = t->hi = pt;
	} else {
		if (y < t->lo.y)
			t->lo = pt;
		if (y > t->hi.y)
			t->hi = pt;
	}
	if (++t->open < t->width)
		return;
	t->b[t->nb].lo = t->lo;
	t->b[t->nb].hi = t->hi;
	t->open = 0;
	if (++t->nb < BUCKETS)
		return;
	/* full: neighbours merge, buckets twice as wide from now on */
	for (size_t i = 0; i < BUCKETS / 2; i++) {
		struct dlh_point lo = t->b[2 * i].lo, hi = t->b[2 * i].hi;
		if (t->b[2 * i + 1].lo.y < lo.y)
			lo = t->b[2 * i + 1].lo;
		if (t->b[2 * i + 1].hi.y > hi.y)
			hi = t->b[2 * i + 1].hi;
		t->b[i].lo = lo;
		t->b[i].hi = hi;
	}
	t->nb = BUCKETS / 2;
	t->width *= 2;
}

/* Writes a bucket's one or two points in x order. Returns how many. */
static size_t bucket_points(struct dlh_point lo, struct dlh_point hi, struct dlh_point *out)
{
	if (lo.x == hi.x && lo.y == hi.y) {
		out[0] = lo;
		return 1;
	}
	out[0] = lo.x <= hi.x ? lo : hi;
	out[1] = lo.x <= hi.x ? hi : lo;
	return 2;
}

size_t dlh_thin_points(const struct dlh_thin *t, struct dlh_point *out)
{
	size_t n = 0;
	for (size_t i = 0; i < t->nb; i++)
		n += bucket_points(t->b[i].lo, t->b[i].hi, out + n);
	if (t->open)
		n += bucket_points(t->lo, t->hi, out + n);
	return n;
}

/* Adds v to a debiased exponential average (Adam's correction: the first
 * values are not pulled towards 0). Returns the smoothed value, or NaN
 * when v is not finite (the average stays as it was). */
static double smooth(double *ema, double *w, double v)
{
	if (!isfinite(v))
		return NAN;
	*ema = DLH_PLOT_SMOOTH * *ema + (1 - DLH_PLOT_SMOOTH) * v;
	*w *= DLH_PLOT_SMOOTH;
	return *ema / (1 - *w);
}

void dlh_plots_feed(struct dlh_plots *p, const struct dlh_metrics_row *r)
{
	double step = (double)r->step;
	for (int i = 0; i < r->nextra && i < DLH_METRICS_EXTRA_MAX; i++)
		dlh_thin_add(r->kind == DLH_ROW_EVAL ? &p->extra_eval[i] : &p->extra[i], step, r->extra[i]);
	if (r->kind == DLH_ROW_EVAL) {
		p->eval_rows++;
		dlh_thin_add(&p->test_loss, step, r->loss);
		dlh_thin_add(&p->test_acc, step, r->accuracy);
		return;
	}
	p->train_rows++;
	dlh_thin_add(&p->loss, step, r->loss);
	dlh_thin_add(&p->loss_smooth, step, smooth(&p->ema_loss, &p->w_loss, r->loss));
	dlh_thin_add(&p->acc_smooth, step, smooth(&p->ema_acc, &p->w_acc, r->accuracy));
	dlh_thin_add(&p->rate, step, r->samples_per_s);
	dlh_thin_add(&p->steps, r->time_s, step);
}

/* The time axis's unit for a span of seconds: its name and its seconds. */
static const char *time_unit(double span, double *per)
{
	if (span > 3 * 3600.0) {
		*per = 3600;
		return "h";
	}
	if (span > 3 * 60.0) {
		*per = 60;
		return "min";
	}
	*per = 1;
	return "s";
}

/* Points of the series of one chart: pts[i] has room for DLH_PLOT_POINTS_MAX. */
struct scratch {
	struct dlh_point pts[DLH_CHART_SERIES_MAX][DLH_PLOT_POINTS_MAX];  /* series i's in pts[i] */
};

/* Sets series i of c to t's points (in s->pts[i]), label and colour. */
static void use_series(struct dlh_chart *c, struct scratch *s, const struct dlh_thin *t,
		       const char *label, const char *color, int markers)
{
	int i = c->nseries++;
	c->series[i] = (struct dlh_series){ .label = label, .color = color, .pt = s->pts[i],
					    .n = dlh_thin_points(t, s->pts[i]), .markers = markers };
}

/* progress.svg's series and notes: time in a unit that suits the run. */
static void progress_chart(const struct dlh_plots *p, const struct dlh_plot_info *info,
			   struct dlh_chart *c, struct scratch *s, char *xl, size_t xl_len,
			   char *note, size_t note_len)
{
	double last = 0, per;
	use_series(c, s, &p->steps, "actual steps", COLOR_STEPS, 0);
	for (size_t k = 0; k < c->series[0].n; k++)
		last = fmax(last, s->pts[0][k].x);
	int predicted = info->predicted_s > 0 && isfinite(info->predicted_s);
	const char *unit = time_unit(fmax(last, predicted ? info->predicted_s : 0), &per);
	for (size_t k = 0; k < c->series[0].n; k++)
		s->pts[0][k].x /= per;
	snprintf(xl, xl_len, "time since start (%s)", unit);
	c->x_label = xl;
	c->x_from_zero = c->y_from_zero = 1;
	if (!predicted) {
		snprintf(note, note_len, "no estimate for this job");
		c->note = note;
		return;
	}
	char d[32];
	if (info->predicted_s < 100)   /* H:MM:SS would round a short run to 0:00 */
		snprintf(d, sizeof d, "%.3g s", info->predicted_s);
	else
		dlh_duration(info->predicted_s, d, sizeof d);
	c->have_vline = 1;
	c->vline_x = info->predicted_s / per;
	c->vline_label = "predicted finish";
	c->vline_color = COLOR_FINISH;
	if (info->total_steps > 0) {
		s->pts[1][0] = (struct dlh_point){ 0, 0 };
		s->pts[1][1] = (struct dlh_point){ info->predicted_s / per, (double)info->total_steps };
		c->series[1] = (struct dlh_series){ .label = "predicted", .color = COLOR_PREDICTED,
						    .pt = s->pts[1], .n = 2, .dashed = 1,
						    .predicted = 1 };
		c->nseries = 2;
		snprintf(note, note_len, "estimate: %s for %ld steps", d, info->total_steps);
	} else {
		snprintf(note, note_len, "estimate: %s (steps unknown)", d);
	}
	c->note = note;
}

/* Draws c into out (a note added when only the newest rows were read)
 * and frees s. */
static int draw(const struct dlh_plots *p, struct dlh_chart *c, struct scratch *s, char *note,
		size_t note_len, struct dlh_buf *out)
{
	if (p->partial) {   /* a huge metrics.csv: said where it shows */
		size_t k = strlen(note);
		snprintf(note + k, note_len - k, "%sthe newest rows only (metrics.csv is large)",
			 k ? "; " : "");
		c->note = note;
	}
	int rc = dlh_chart_svg(c, out);
	free(s);
	return rc;
}

int dlh_plot_svg(const struct dlh_plots *p, enum dlh_plot which, const struct dlh_plot_info *info,
		 struct dlh_buf *out)
{
	static const char *const what[DLH_PLOTS] = { "loss", "accuracy", "throughput", "progress" };
	struct dlh_chart c = { .x_label = "step" };
	char title[200], xl[64], note[160] = "";
	if ((unsigned)which >= DLH_PLOTS)
		return -EINVAL;
	struct scratch *s = malloc(sizeof *s);
	if (!s)
		return -ENOMEM;
	snprintf(title, sizeof title, "%s%s%s", info && info->job ? info->job : "",
		 info && info->job ? ": " : "", what[which]);
	c.title = title;
	switch (which) {
	case DLH_PLOT_LOSS:
		c.y_label = "loss";
		c.y_from_zero = 1;
		use_series(&c, s, &p->loss, "train loss", COLOR_LOSS, 0);
		use_series(&c, s, &p->loss_smooth, "train loss (smoothed)", COLOR_LOSS_SMOOTH, 0);
		use_series(&c, s, &p->test_loss, "test loss", COLOR_TEST_LOSS, 1);
		break;
	case DLH_PLOT_ACCURACY:
		c.y_label = "accuracy";
		c.y_from_zero = 1;
		use_series(&c, s, &p->test_acc, "test accuracy", COLOR_TEST_ACC, 1);
		use_series(&c, s, &p->acc_smooth, "train batch accuracy (smoothed)", COLOR_ACC_SMOOTH, 0);
		break;
	case DLH_PLOT_THROUGHPUT:
		c.y_label = "samples per second";
		c.y_from_zero = 1;
		use_series(&c, s, &p->rate, "samples/s", COLOR_RATE, 0);
		break;
	default: {
		struct dlh_plot_info none = { 0 };
		c.y_label = "step";
		progress_chart(p, info ? info : &none, &c, s, xl, sizeof xl, note, sizeof note);
		break;
	}
	}
	return draw(p, &c, s, note, sizeof note, out);
}

int dlh_plot_extra_svg(const struct dlh_plots *p, int i, const char *name,
		       const struct dlh_plot_info *info, struct dlh_buf *out)
{
	struct dlh_chart c = { .x_label = "step", .y_label = name };
	char title[200], train[48], eval[48], note[160] = "";
	if (i < 0 || i >= DLH_METRICS_EXTRA_MAX)
		return -EINVAL;
	struct scratch *s = malloc(sizeof *s);
	if (!s)
		return -ENOMEM;
	snprintf(title, sizeof title, "%s%s%s", info && info->job ? info->job : "",
		 info && info->job ? ": " : "", name);
	snprintf(train, sizeof train, "%s", name);
	snprintf(eval, sizeof eval, "%s (eval)", name);
	c.title = title;
	if (p->extra[i].fed || !p->extra_eval[i].fed)
		use_series(&c, s, &p->extra[i], train, COLOR_EXTRA, 0);
	if (p->extra_eval[i].fed)
		use_series(&c, s, &p->extra_eval[i], eval, COLOR_EXTRA_EVAL, 1);
	return draw(p, &c, s, note, sizeof note, out);
}
