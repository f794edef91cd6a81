/* chart.c - a line chart as SVG text: series, axes with ticks, legend, title */
#include "engine/report/chart.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define VALUE_MAX 1e300        /* larger magnitudes are left out like NaN: spans stay finite */
#define TICKS_WANT 6           /* about this many ticks per axis */
#define TICKS_MAX 40           /* never more (a guard against rounding) */
#define PAD_LEFT 72            /* room for the y tick labels and the y axis title */
#define PAD_RIGHT 24
#define PAD_BOTTOM 52          /* x tick labels and the x axis title */
#define TOP_PLAIN 62           /* the plot's top under the title and the legend */
#define TOP_NOTE 78            /* ... and a note */
#define LEGEND_CHAR_W 6.6      /* an estimate of a legend character's width, px */
#define FONT "font-family=\"DejaVu Sans,Arial,Helvetica,sans-serif\""

/* An axis: its range once widened to whole ticks, and the tick step. */
struct axis {
	double lo, hi;         /* shown range */
	double step;           /* tick step */
	int digits;            /* decimals of tick labels (significant digits if exp) */
	int exp;               /* 1: labels in exponent form (huge or tiny values) */
};

/* The plot area, px. */
struct frame {
	double left, top;      /* its top left corner */
	double right, bottom;  /* its bottom right corner (the axes meet at left, bottom) */
};

static int usable(double v)
{
	return isfinite(v) && fabs(v) < VALUE_MAX;
}

int dlh_xml_escape(struct dlh_buf *out, const char *s, size_t len)
{
	int rc = 0;
	size_t run = 0;   /* characters before s[i] not yet appended */
	for (size_t i = 0; i < len && !rc; i++) {
		const char *rep = NULL;
		switch (s[i]) {
		case '&': rep = "&amp;"; break;
		case '<': rep = "&lt;"; break;
		case '>': rep = "&gt;"; break;
		case '"': rep = "&quot;"; break;
		case '\'': rep = "&#39;"; break;
		case '\t': case '\n': case '\r': break;
		default:
			if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
				rep = "?";
		}
		if (!rep) {
			run++;
			continue;
		}
		rc = dlh_buf_append(out, s + i - run, run);
		rc = rc ? rc : dlh_buf_append(out, rep, strlen(rep));
		run = 0;
	}
	if (!rc && run)
		rc = dlh_buf_append(out, s + len - run, run);
	/* an empty buffer is still a string */
	return rc ? rc : dlh_buf_append(out, "", 0);
}

/* Appends s (NUL-terminated, NULL = "") escaped. */
static int esc(struct dlh_buf *out, const char *s)
{
	return dlh_xml_escape(out, s ? s : "", s ? strlen(s) : 0);
}

double dlh_chart_tick_step(double span, int want)
{
	double raw = span / (want > 0 ? want : 1);
	double p = pow(10.0, floor(log10(raw)));
	double f = raw / p;
	return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

/* Widens [lo, hi] (usable, lo <= hi) to whole ticks. */
static void axis_fit(struct axis *a, double lo, double hi, int from_zero)
{
	if (from_zero && lo > 0)
		lo = 0;
	if (from_zero && hi < 0)
		hi = 0;
	double mag = fmax(fabs(lo), fabs(hi));
	if (hi - lo <= mag * 1e-12 || hi - lo < 1e-290) {   /* one value: a range around it */
		double d = mag > 1e-290 ? mag * 0.1 : 1;
		if (from_zero && lo == 0) {
			hi = lo + (mag > 1e-290 ? mag : 1);
		} else {
			lo -= d;
			hi += d;
		}
	}
	a->step = dlh_chart_tick_step(hi - lo, TICKS_WANT);
	a->lo = floor(lo / a->step) * a->step;
	a->hi = ceil(hi / a->step) * a->step;
	if (a->hi <= a->lo)   /* rounding at extremes */
		a->hi = a->lo + a->step;
	while ((a->hi - a->lo) / a->step > TICKS_MAX)
		a->step *= 2;
	/* the step has one significant digit: labels need its decimals */
	int d = -(int)floor(log10(a->step) + 1e-9);
	a->digits = d < 0 ? 0 : d;
	mag = fmax(fabs(a->lo), fabs(a->hi));
	a->exp = mag >= 1e7 || a->step < 1e-6;
	if (a->exp) {   /* 1.5e+09: as many digits as the step needs */
		int g = (int)floor(log10(mag)) + a->digits + 1;
		a->digits = g < 1 ? 1 : g > 15 ? 15 : g;
	}
}

/* A tick value as its label: no "-0", no more digits than the step needs. */
static void tick_label(const struct axis *a, double v, char *buf, size_t len)
{
	if (fabs(v) < a->step * 1e-9)
		v = 0;
	if (a->exp)
		snprintf(buf, len, "%.*g", a->digits, v);
	else
		snprintf(buf, len, "%.*f", a->digits, v);
}

static double px_x(const struct frame *f, const struct axis *a, double x)
{
	return f->left + (x - a->lo) / (a->hi - a->lo) * (f->right - f->left);
}

static double px_y(const struct frame *f, const struct axis *a, double y)
{
	return f->bottom - (y - a->lo) / (a->hi - a->lo) * (f->bottom - f->top);
}

/* Usable points of s. */
static size_t usable_points(const struct dlh_series *s)
{
	size_t k = 0;
	for (size_t i = 0; s->pt && i < s->n; i++)
		k += usable(s->pt[i].x) && usable(s->pt[i].y);
	return k;
}

/* The title, the note and the legend (series with a point, then the vline). */
static int draw_head(const struct dlh_chart *c, const size_t *have, struct dlh_buf *b)
{
	int rc = dlh_buf_printf(b, "<text x=\"%d\" y=\"22\" text-anchor=\"middle\" font-size=\"15\" "
				"font-weight=\"bold\" fill=\"#222\">", DLH_CHART_WIDTH / 2);
	rc |= esc(b, c->title);
	rc |= dlh_buf_printf(b, "</text>\n");
	if (c->note) {
		rc |= dlh_buf_printf(b, "<text x=\"%d\" y=\"62\" text-anchor=\"middle\" font-size=\"11\" "
				     "fill=\"#555\">", DLH_CHART_WIDTH / 2);
		rc |= esc(b, c->note);
		rc |= dlh_buf_printf(b, "</text>\n");
	}
	double x = PAD_LEFT;
	for (int i = 0; i <= c->nseries; i++) {
		const char *label, *color;
		int dashed;
		if (i < c->nseries) {
			if (!have[i])
				continue;
			label = c->series[i].label;
			color = c->series[i].color;
			dashed = c->series[i].dashed;
		} else if (c->have_vline && usable(c->vline_x)) {
			label = c->vline_label;
			color = c->vline_color;
			dashed = 1;
		} else {
			break;
		}
		rc |= dlh_buf_printf(b, "<line x1=\"%.1f\" y1=\"40\" x2=\"%.1f\" y2=\"40\" stroke=\"",
				     x, x + 18);
		rc |= esc(b, color);
		rc |= dlh_buf_printf(b, "\" stroke-width=\"3\"%s/>\n<text x=\"%.1f\" y=\"44\" "
				     "font-size=\"12\" fill=\"#222\">", dashed ? " stroke-dasharray=\"5 3\"" : "",
				     x + 23);
		rc |= esc(b, label);
		rc |= dlh_buf_printf(b, "</text>\n");
		x += 23 + LEGEND_CHAR_W * (double)strlen(label ? label : "") + 16;
	}
	return rc;
}

/* The axis titles, always (a chart without data still says what it would show). */
static int draw_axis_titles(const struct dlh_chart *c, const struct frame *f, struct dlh_buf *b)
{
	double mid_x = (f->left + f->right) / 2, mid_y = (f->top + f->bottom) / 2;
	int rc = dlh_buf_printf(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" font-size=\"12\" "
				"fill=\"#222\">", mid_x, DLH_CHART_HEIGHT - 10);
	rc |= esc(b, c->x_label);
	rc |= dlh_buf_printf(b, "</text>\n<text x=\"16\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"12\" "
			     "fill=\"#222\" transform=\"rotate(-90 16 %.1f)\">", mid_y, mid_y);
	rc |= esc(b, c->y_label);
	return rc | dlh_buf_printf(b, "</text>\n");
}

/* Grid lines, tick labels and the axes. */
static int draw_axes(const struct frame *f, const struct axis *ax, const struct axis *ay,
		     struct dlh_buf *b)
{
	char label[64];
	int rc = 0;
	long nx = lround((ax->hi - ax->lo) / ax->step), ny = lround((ay->hi - ay->lo) / ay->step);
	for (long i = 0; i <= nx; i++) {
		double v = ax->lo + (double)i * ax->step, p = px_x(f, ax, v);
		tick_label(ax, v, label, sizeof label);
		rc |= dlh_buf_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>\n"
				     "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"11\" "
				     "fill=\"#333\">%s</text>\n", p, f->top, p, f->bottom, p, f->bottom + 16, label);
	}
	for (long i = 0; i <= ny; i++) {
		double v = ay->lo + (double)i * ay->step, p = px_y(f, ay, v);
		tick_label(ay, v, label, sizeof label);
		rc |= dlh_buf_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>\n"
				     "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" font-size=\"11\" "
				     "fill=\"#333\">%s</text>\n", f->left, p, f->right, p, f->left - 6, p + 4, label);
	}
	return rc | dlh_buf_printf(b, "<path d=\"M%.1f %.1fV%.1fH%.1f\" fill=\"none\" stroke=\"#333\"/>\n",
				   f->left, f->top, f->bottom, f->right);
}

/* One series: a polyline through its usable points, dots where asked for
 * (always for a lone point). */
static int draw_series(const struct dlh_series *s, size_t have, const struct frame *f,
		       const struct axis *ax, const struct axis *ay, struct dlh_buf *b)
{
	int rc = 0;
	if (have >= 2) {
		rc |= dlh_buf_printf(b, "<polyline fill=\"none\" stroke=\"");
		rc |= esc(b, s->color);
		rc |= dlh_buf_printf(b, "\" stroke-width=\"2.5\" stroke-linejoin=\"round\"%s points=\"",
				     s->dashed ? " stroke-dasharray=\"7 4\"" : "");
		for (size_t i = 0; i < s->n; i++)
			if (usable(s->pt[i].x) && usable(s->pt[i].y))
				rc |= dlh_buf_printf(b, "%.1f,%.1f ", px_x(f, ax, s->pt[i].x),
						     px_y(f, ay, s->pt[i].y));
		rc |= dlh_buf_printf(b, "\"/>\n");
	}
	if (have == 1 || s->markers) {
		rc |= dlh_buf_printf(b, "<g fill=\"");
		rc |= esc(b, s->color);
		rc |= dlh_buf_printf(b, "\">");
		for (size_t i = 0; i < s->n; i++)
			if (usable(s->pt[i].x) && usable(s->pt[i].y))
				rc |= dlh_buf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\"/>",
						     px_x(f, ax, s->pt[i].x), px_y(f, ay, s->pt[i].y));
		rc |= dlh_buf_printf(b, "</g>\n");
	}
	return rc;
}

/* "no data yet" in the middle of the plot area. */
static int no_data(const struct frame *f, struct dlh_buf *b)
{
	return dlh_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"14\" "
			      "fill=\"#777\">no data yet</text>\n", (f->left + f->right) / 2,
			      (f->top + f->bottom) / 2);
}

int dlh_chart_svg(const struct dlh_chart *c, struct dlh_buf *b)
{
	size_t have[DLH_CHART_SERIES_MAX] = { 0 }, total = 0, data = 0;
	double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
	int ns = c->nseries < 0 ? 0 : c->nseries > DLH_CHART_SERIES_MAX ? DLH_CHART_SERIES_MAX : c->nseries;
	struct dlh_chart cc = *c;
	cc.nseries = ns;
	for (int i = 0; i < ns; i++) {
		const struct dlh_series *s = &c->series[i];
		have[i] = usable_points(s);
		total += have[i];
		data += s->predicted ? 0 : have[i];
		for (size_t k = 0; have[i] && k < s->n; k++) {
			if (!usable(s->pt[k].x) || !usable(s->pt[k].y))
				continue;
			x0 = fmin(x0, s->pt[k].x);
			x1 = fmax(x1, s->pt[k].x);
			y0 = fmin(y0, s->pt[k].y);
			y1 = fmax(y1, s->pt[k].y);
		}
	}
	if (total && c->have_vline && usable(c->vline_x)) {
		x0 = fmin(x0, c->vline_x);
		x1 = fmax(x1, c->vline_x);
	}
	cc.have_vline = total && c->have_vline && usable(c->vline_x);
	struct frame f = { PAD_LEFT, c->note ? TOP_NOTE : TOP_PLAIN, DLH_CHART_WIDTH - PAD_RIGHT,
			   DLH_CHART_HEIGHT - PAD_BOTTOM };
	int rc = dlh_buf_printf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
				"viewBox=\"0 0 %d %d\" " FONT ">\n<title>", DLH_CHART_WIDTH, DLH_CHART_HEIGHT,
				DLH_CHART_WIDTH, DLH_CHART_HEIGHT);
	rc |= esc(b, c->title);
	rc |= dlh_buf_printf(b, "</title>\n<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n");
	rc |= draw_head(&cc, have, b);
	rc |= draw_axis_titles(c, &f, b);
	if (!total) {
		rc |= dlh_buf_printf(b, "<path d=\"M%.1f %.1fV%.1fH%.1f\" fill=\"none\" stroke=\"#333\"/>\n",
				     f.left, f.top, f.bottom, f.right);
		rc |= no_data(&f, b);
		rc |= dlh_buf_printf(b, "</svg>\n");
		return rc ? -ENOMEM : 0;
	}
	struct axis ax, ay;
	axis_fit(&ax, x0, x1, c->x_from_zero);
	axis_fit(&ay, y0, y1, c->y_from_zero);
	rc |= draw_axes(&f, &ax, &ay, b);
	for (int i = 0; i < ns; i++)
		rc |= draw_series(&c->series[i], have[i], &f, &ax, &ay, b);
	if (cc.have_vline) {   /* over the curves: a curve that ends where it stands hides no marker */
		double p = px_x(&f, &ax, c->vline_x);
		rc |= dlh_buf_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"",
				     p, f.top, p, f.bottom);
		rc |= esc(b, c->vline_color);
		rc |= dlh_buf_printf(b, "\" stroke-width=\"3\" stroke-dasharray=\"6 3\"/>\n");
	}
	if (!data)
		rc |= no_data(&f, b);
	rc |= dlh_buf_printf(b, "</svg>\n");
	return rc ? -ENOMEM : 0;
}
