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
	double samples_per_s;     /* training samples / seconds inside steps */
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

/* Writes DIR/run.info atomically as key=value lines. Returns 0, or
 * -errno with a message in err. */
int dlt_runinfo_write(const char *dir, const struct dlt_runinfo *ri,
		      char *err, size_t errlen);

/* Writes DIR/result atomically as key=value lines. Returns 0, or -errno
 * with a message in err. */
int dlt_result_write(const char *dir, const struct dlt_result *r,
		     char *err, size_t errlen);

#endif
