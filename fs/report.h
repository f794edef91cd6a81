/* report.h - a job's plots/ and report.html: its metrics.csv drawn, its key files on one page */
#ifndef DLH_FS_REPORT_H
#define DLH_FS_REPORT_H

#include "engine/engine.h"
#include "engine/util/util.h"
#include "fs/tree.h"

/* metrics.csv read for plots: its newest 8 MiB, about 140k rows of
 * dlh-train's; 100k rows are parsed and drawn in about 150 ms, nearly all
 * of it dlh_metrics_row_parse (tests/unit/test_report.c measures the rest) */
#define FS_PLOT_CSV_MAX (8L << 20)
#define FS_REPORT_FILE_MAX (256 << 10)  /* of each key file, report.html shows this much */

/* The generated files report.html shows as they are (fs/render.c renders them). */
struct fs_report_text {
	const char *progress;   /* the progress line */
	const char *metrics;    /* metrics: the latest values */
	const char *result;     /* result, NULL before the job has ended */
};

/* Appends plots/<kind's file> of job j (kind FS_JOB_PLOT_*; for
 * FS_JOB_PLOT_EXTRA, the plot of the metrics.csv column called name): an
 * SVG document. Returns 0, or -errno (-ENOENT: no such column now). */
int fs_report_plot(struct dlh_engine *e, const struct dlh_job *j, enum fs_kind kind,
		   const char *name, struct dlh_buf *out);

/* Appends report.html of job j: one self-contained page (no links out, the
 * four plots and one per extra metrics.csv column inline) with the job's id, name, status and progress, the
 * plots, then spec, plan, estimate, result and metrics HTML-escaped.
 * Returns 0, or -errno. */
int fs_report_html(struct dlh_engine *e, const struct dlh_job *j, const struct fs_report_text *t,
		   struct dlh_buf *out);

#endif
