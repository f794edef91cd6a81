/* metrics.h - the job directory's text files: metrics.csv, run.info, result */
#ifndef DLT_METRICS_H
#define DLT_METRICS_H

#include <stddef.h>

#include "engine/contract/contract.h"   /* the names, columns and row format */

/* What run.info says about a run. */
struct dlt_runinfo {
	int ranks;                /* MPI ranks */
	const int *batch;         /* per-rank batch sizes, ranks of them */
	long train_samples;       /* training images used, all ranks */
	long test_samples;        /* test images used, all ranks */
	long steps_per_epoch;     /* steps every rank takes per epoch */
	long total_steps;         /* steps_per_epoch * epochs */
	size_t params;            /* model parameters */
	long start_step;          /* 0, or the checkpoint step resumed from */
	const char *model;        /* layer stack description, NULL = not written */
	const char *optimizer;    /* optimizer name, NULL = not written */
	int buckets;              /* gradient buckets (0 = one allreduce), written with model */
	const char *allreduce;    /* "shm", "mpi" or "none" (1 rank), written with model */
};

/* What result says about a finished run. */
struct dlt_result {
	double test_accuracy;     /* last evaluation on the whole test set */
	double test_loss;         /* mean cross-entropy of that evaluation */
	double train_loss;        /* mean step loss over the last epoch */
	int epochs;               /* epochs trained */
	long steps;               /* global steps trained */
	double samples_per_s;     /* training samples / wall-clock seconds of the
				     training loop (evaluations, checkpoints included) */
	double train_time_s;      /* wall clock of the run, resumes included */
	const char *model;        /* final checkpoint, relative to the job dir */
};

/* Opens DIR/metrics.csv (DLH_FILE_METRICS) for appending (creating it), cuts it in place
 * (ftruncate, so a `tail -f` keeps following it) just after the last
 * complete row whose step is <= keep_step, and writes the header line when
 * the file is then empty. Stores the O_APPEND descriptor in *fd.
 * Returns 0, or -errno with a message in err. */
int dlt_metrics_open(const char *dir, long keep_step, int *fd,
		     char *err, size_t errlen);

/* Appends a train row (dlh_metrics_row_format) with one write(2).
 * Returns 0, or -errno. */
int dlt_metrics_train(int fd, long step, int epoch, double time_s,
		      double loss, double acc, double lr, double samples_per_s);

/* Appends an eval row (dlh_metrics_row_format) with one write(2).
 * Returns 0, or -errno. */
int dlt_metrics_eval(int fd, long step, int epoch, double time_s,
		     double loss, double acc);

/* metrics.csv rows held in memory and appended in batches, off the step's
 * path: a step only formats its row into the buffer; the buffer goes to the
 * file with one write(2) of whole lines when a row finds it DLT_ROWS_EVERY
 * seconds (the caller's `every`) after the last write or full, and whenever
 * the caller flushes (before an evaluation, a checkpoint, an exit). Readers
 * that tail the file see whole rows in order, each once; a process killed
 * outright loses at most what it held. */
#define DLT_ROWS_BUF (64 * 1024)   /* bytes of rows held at most (about 1000 rows) */
#define DLT_ROWS_EVERY 0.5         /* seconds between writes at most, while rows come */

struct dlt_rows {
	int fd;                    /* metrics.csv (dlt_metrics_open), O_APPEND */
	double every;              /* seconds a row may wait (checked when one comes) */
	double last;               /* the caller's clock at the last write */
	int err;                   /* the first write error (-errno): kept, rows kept */
	size_t len;                /* bytes held in buf, whole lines */
	char buf[DLT_ROWS_BUF];    /* the rows not yet written */
};

/* Starts w on fd, holding nothing, its clock at now (any monotonic seconds,
 * the same clock as later calls'). */
void dlt_rows_init(struct dlt_rows *w, int fd, double every, double now);

/* Holds row r (dlh_metrics_row_format); writes what is held first when r
 * would not fit, and with r when now is `every` past the last write.
 * Returns 0, or -errno (a row that cannot be formatted: -EOVERFLOW; a
 * failed write: that and every later call). */
int dlt_rows_add(struct dlt_rows *w, const struct dlh_metrics_row *r, double now);

/* Writes every row held with one write(2) (the rest of a short write
 * after it, so the file ends in a whole line), then holds nothing; now
 * restarts the wait. Returns 0 (also when nothing was held), or -errno. */
int dlt_rows_flush(struct dlt_rows *w, double now);

/* Writes DIR/run.info atomically as key=value lines. Returns 0, or
 * -errno with a message in err. */
int dlt_runinfo_write(const char *dir, const struct dlt_runinfo *ri,
		      char *err, size_t errlen);

/* Writes DIR/result atomically as key=value lines. Returns 0, or -errno
 * with a message in err. */
int dlt_result_write(const char *dir, const struct dlt_result *r,
		     char *err, size_t errlen);

#endif
