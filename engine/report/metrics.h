/* metrics.h - reading what rank 0 appends: metrics.csv, run.info, result */
#ifndef DLH_METRICS_H
#define DLH_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "engine/contract/contract.h"
#include "schema/spec.h"

/* How far back from its end dlh_metrics_read looks for the newest rows
 * (bytes; some 140,000 rows). */
#define DLH_METRICS_BACK_MAX ((off_t)8 << 20)

/* Train rows the recent step rate of a [job] command is measured over. */
#define DLH_METRICS_RATE_ROWS 20

/* The newest training row and the newest evaluation row of metrics.csv
 * (rows as engine/contract/contract.h defines them). */
struct dlh_metrics {
	int have_train;        /* a train row was found */
	long step;             /* global step, 1-based */
	int epoch;             /* 1-based */
	double time_s;         /* seconds since the run first started */
	double loss;           /* batch loss */
	double accuracy;       /* batch accuracy */
	double lr;             /* learning rate of that step */
	double samples_per_s;  /* global throughput */
	long rate_step;        /* an older train row of the same run of rows, up to
				  DLH_METRICS_RATE_ROWS before the newest (0: none) ... */
	double rate_time_s;    /* ... and its time: the recent step rate */
	int have_eval;         /* an eval row was found */
	long eval_step;        /* step of the evaluation */
	int eval_epoch;        /* epoch it closed */
	double eval_time_s;    /* when */
	double test_loss;      /* mean test loss */
	double test_accuracy;  /* fraction correct on the test set */
	struct dlh_metrics_columns cols;   /* the extra columns the header names */
	int train_nextra;      /* the newest train row's extra values (NaN: empty) */
	double train_extra[DLH_METRICS_EXTRA_MAX];
	int eval_nextra;       /* the newest eval row's */
	double eval_extra[DLH_METRICS_EXTRA_MAX];
};

/* What the trainer says about the run before its first step (run.info). */
struct dlh_run_info {
	int valid;             /* run.info exists and parsed */
	long steps_per_epoch;  /* optimizer steps per epoch */
	long total_steps;      /* steps for the whole run */
	long train_samples;    /* training images used */
	long test_samples;     /* test images used */
};

/* Scans csv_path backwards for the newest train and eval rows, and the
 * train row up to DLH_METRICS_RATE_ROWS before the newest (rate_step: the
 * rows between have steps and times that fall going back; a row out of
 * that order, e.g. from before a restart that reset time_s, ends the
 * window). A partial last line (no newline yet) is ignored. Returns 0 (fields zero and have_*
 * 0 when the file is missing, holds no rows, or is a link or anything but a
 * regular file), or -errno on a read error. */
int dlh_metrics_read(const char *csv_path, struct dlh_metrics *m);

/* The extra columns metrics.csv's header line names, into c (none when
 * the file, opened as dlh_metrics_read opens it, is missing or has no such
 * header yet). Returns 0, or -errno on a read error. */
int dlh_metrics_columns_read(const char *csv_path, struct dlh_metrics_columns *c);

/* Calls row(ctx, r) for every complete row of csv_path in file order (the
 * header, malformed rows and a partial last line are skipped), reading at
 * most max_bytes: of a longer file only its newest rows, from the first
 * line that begins inside the last max_bytes. Opened as dlh_metrics_read
 * opens it (no link, only a regular file, never waiting). Returns 0 (a
 * missing file, a link or a special file have no rows), 1 when the file
 * was longer than max_bytes, or -errno on a read error. */
int dlh_metrics_scan(const char *csv_path, size_t max_bytes,
		     void (*row)(void *ctx, const struct dlh_metrics_row *r), void *ctx);

/* Where a scan of metrics.csv stopped: after its last whole line, which is
 * kept (offset, length, hash) to tell a file that only grew since from one
 * cut back and written again (a resume). */
struct dlh_metrics_mark {
	dev_t dev;
	ino_t ino;                 /* 0: no scan yet */
	off_t from;                /* where the first scan began (0, or inside a file
				      longer than max_bytes) */
	off_t at;                  /* the end of the last whole line scanned */
	off_t last_at;             /* the bytes before it (up to 512) */
	size_t last_len;
	uint64_t last_sum;
};

/* dlh_metrics_scan that goes on where *mark says an earlier scan of the
 * same file stopped, calling row() only for the rows appended since, and
 * moves *mark on: the rows fed over all the scans are those one
 * dlh_metrics_scan of the file would feed. With an empty mark (ino 0) it
 * scans as dlh_metrics_scan does. Returns what dlh_metrics_scan returns, or
 * -ESTALE, having called row() for nothing or for rows to be dropped, when
 * that cannot be: the file is gone or not the one the mark was taken from,
 * no longer holds the bytes before the mark (cut back and written again),
 * or has grown past max_bytes beyond where the rows began. The caller then
 * starts again from an empty mark. */
int dlh_metrics_scan_on(const char *csv_path, size_t max_bytes, struct dlh_metrics_mark *mark,
			void (*row)(void *ctx, const struct dlh_metrics_row *r), void *ctx);

/* The recent step rate (steps per second) of m's train rows, or 0 when the
 * rows do not tell one. */
double dlh_metrics_step_rate(const struct dlh_metrics *m);

/* Seconds the run needs for its steps after m's newest, total in all:
 * from the newest row's samples/s where the global batch is known
 * (global_batch > 0: dlh-train's), else from the recent step rate of the
 * rows, else from their average. 0 when done or unknown. */
double dlh_metrics_eta(const struct dlh_metrics *m, long total, long global_batch);

/* The train steps of a whole run: run.info's total when ri is valid, else
 * a [job] command's [job] steps, else 0 (unknown). */
long dlh_total_steps(const struct dlh_run_info *ri, const struct dlh_spec *s);

/* Parses DIR/run.info. Returns 0, or -errno (-ENOENT before the run starts). */
int dlh_run_info_read(const char *dir, struct dlh_run_info *ri);

#endif
