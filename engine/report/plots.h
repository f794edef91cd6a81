/* plots.h - a job's plots (loss, accuracy, throughput, progress) from its metrics.csv rows */
#ifndef DLH_PLOTS_H
#define DLH_PLOTS_H

#include "engine/contract/contract.h"
#include "engine/report/chart.h"
#include "engine/util/util.h"

#define DLH_PLOT_POINTS_MAX 1000   /* points of one series at most, however long the run */
#define DLH_PLOT_SMOOTH 0.9        /* weight of the past in the smoothed curves (debiased EMA) */

/* The plots of a job. */
enum dlh_plot {
	DLH_PLOT_LOSS = 0,         /* train loss raw and smoothed, test loss, against the step */
	DLH_PLOT_ACCURACY,         /* test accuracy, train batch accuracy smoothed */
	DLH_PLOT_THROUGHPUT,       /* samples per second */
	DLH_PLOT_PROGRESS,         /* steps against time, beside the estimate's line */
	DLH_PLOTS                  /* how many */
};

/* A series thinned as its points arrive: buckets of `width` points keep
 * their lowest and highest, and when the buckets are full neighbours merge
 * and the width doubles. At most DLH_PLOT_POINTS_MAX points come out. */
struct dlh_thin {
	struct {
		struct dlh_point lo;   /* the bucket's lowest point */
		struct dlh_point hi;   /* its highest */
	} b[DLH_PLOT_POINTS_MAX / 2];  /* closed buckets, x ascending */
	size_t nb;                 /* closed buckets used */
	long width;                /* points per bucket (0 before the first point) */
	long open;                 /* points in the open bucket */
	struct dlh_point lo, hi;   /* the open bucket's lowest and highest */
	long fed;                  /* usable points fed in all */
};

/* The series of a job's plots, fed row by row (dlh_plots_feed). */
struct dlh_plots {
	struct dlh_thin loss, loss_smooth, test_loss;    /* loss.svg */
	struct dlh_thin test_acc, acc_smooth;            /* accuracy.svg */
	struct dlh_thin rate;                            /* throughput.svg */
	struct dlh_thin steps;                           /* progress.svg: (time_s, step) */
	struct dlh_thin extra[DLH_METRICS_EXTRA_MAX];    /* NAME.svg: a program's own metric i, */
	struct dlh_thin extra_eval[DLH_METRICS_EXTRA_MAX];  /* in its train and eval rows */
	double ema_loss, ema_acc;  /* the smoothed curves' running averages (not debiased) */
	double w_loss, w_acc;      /* DLH_PLOT_SMOOTH to the power of the values in them */
	long train_rows, eval_rows;  /* rows fed */
	int partial;               /* 1: only the newest rows were read (a huge file) */
};

/* What the plots say besides the rows. */
struct dlh_plot_info {
	const char *job;           /* "job 7 (fmnist)": the titles begin with it */
	double predicted_s;        /* the estimate's run time, seconds (0: none) */
	long total_steps;          /* the run's steps (0: unknown) */
};

/* Empties p (it is large: about 100 KB). */
void dlh_plots_init(struct dlh_plots *p);

/* Adds one row of metrics.csv. NaN or infinite values are left out of the
 * plots (and of the smoothed curves). */
void dlh_plots_feed(struct dlh_plots *p, const struct dlh_metrics_row *r);

/* Appends plot which of p as an SVG document (dlh_chart_svg). Returns 0,
 * or -ENOMEM (-EINVAL for no such plot). */
int dlh_plot_svg(const struct dlh_plots *p, enum dlh_plot which, const struct dlh_plot_info *info,
		 struct dlh_buf *out);

/* Appends the plot of extra column i of metrics.csv (name: what the
 * header calls it) as an SVG document: its values in train rows and in
 * eval rows against the step. Returns 0, or -ENOMEM (-EINVAL for no such
 * column). */
int dlh_plot_extra_svg(const struct dlh_plots *p, int i, const char *name,
		       const struct dlh_plot_info *info, struct dlh_buf *out);

/* Adds a usable point to t (others are ignored). */
void dlh_thin_add(struct dlh_thin *t, double x, double y);

/* Writes t's points, x ascending, into out (DLH_PLOT_POINTS_MAX of them at
 * most). Returns how many. */
size_t dlh_thin_points(const struct dlh_thin *t, struct dlh_point *out);

#endif
