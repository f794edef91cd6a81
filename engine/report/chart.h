/* chart.h - a line chart as SVG text: series, axes with ticks, legend, title */
#ifndef DLH_CHART_H
#define DLH_CHART_H

#include <stddef.h>

#include "engine/util/util.h"

#define DLH_CHART_SERIES_MAX 4     /* series of one chart */
#define DLH_CHART_WIDTH 640            /* the SVG's width, px (it scales: viewBox) */
#define DLH_CHART_HEIGHT 360            /* its height, px */

/* One point of a series. */
struct dlh_point {
	double x;                      /* along the x axis (step, seconds) */
	double y;                      /* the value */
};

/* One line of a chart. */
struct dlh_series {
	const char *label;             /* legend text */
	const char *color;             /* stroke and marker colour, "#rrggbb" */
	const struct dlh_point *pt;    /* its points, x ascending; NaN or infinite
					  coordinates are left out */
	size_t n;                      /* points in pt */
	int dashed;                    /* 1: a dashed line */
	int markers;                   /* 1: a dot at every point (a lone point always has one) */
	int predicted;                 /* 1: a prediction, not data: a chart with
					  nothing else still says "no data yet" */
};

/* What dlh_chart_svg draws. */
struct dlh_chart {
	const char *title;             /* above the plot */
	const char *x_label;           /* the x axis's title */
	const char *y_label;           /* the y axis's title */
	struct dlh_series series[DLH_CHART_SERIES_MAX];
	int nseries;                   /* series used */
	int x_from_zero;               /* 1: the x axis starts at 0 (or below) */
	int y_from_zero;               /* 1: the y axis starts at 0 (or below) */
	int have_vline;                /* 1: a vertical line at vline_x */
	double vline_x;                /* where (in x units) */
	const char *vline_label;       /* its legend text */
	const char *vline_color;       /* its colour */
	const char *note;              /* a line under the title (NULL: none) */
};

/* Appends an <svg> element (no XML declaration, so that it can be inlined
 * into HTML as it is; with the SVG namespace, so that it is a file of its
 * own too) drawing c: the title, a legend, both axes with tick labels at
 * 1, 2 or 5 times a power of ten, the axis titles and each series. A chart
 * without one finite point of data (predictions aside) says "no data yet"
 * in the plot area. Text is
 * escaped for XML; no NaN or infinity reaches the output. Returns 0, or
 * -ENOMEM. */
int dlh_chart_svg(const struct dlh_chart *c, struct dlh_buf *out);

/* Appends s escaped for XML text and attribute values (&, <, >, ", ';
 * control characters but tab, newline and carriage return become '?').
 * Returns 0, or -ENOMEM. */
int dlh_xml_escape(struct dlh_buf *out, const char *s, size_t len);

/* The tick step for a range of span (> 0) cut into about want (> 0) pieces:
 * 1, 2 or 5 times a power of ten. */
double dlh_chart_tick_step(double span, int want);

#endif
