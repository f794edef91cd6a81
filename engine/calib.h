/* calib.h - what this machine's devices measure: GEMM throughput, memory
 * bandwidth, allreduce latency and bandwidth (alpha-beta), measured by
 * microbenchmarks on first mount and cached in the state dir with the date
 *
 * Contract between the engine (caller), fs/ (pool/ctl recalibrate, the
 * pool/calibration file) and the estimator. */
#ifndef DLH_CALIB_H
#define DLH_CALIB_H

#include <stddef.h>

#include "engine/util.h"

#define DLH_CALIB_DEVS 8          /* most device types calibrated */
#define DLH_CALIB_TYPE_NAME 32    /* bytes of a type name, NUL included */
#define DLH_CALIB_FILE "calibration"   /* STATE/calibration */

/* One device type's measured speeds (a "cpu" device is one core). The
 * estimator owns which shapes and terms are measured: fields may grow. */
struct dlh_calib_dev {
	char type[DLH_CALIB_TYPE_NAME];   /* "cpu", or a GPU model */
	double gemm_flops;                /* sustained sgemm FLOP/s, large shapes */
	double mem_bw;                    /* bytes/s one device streams */
};

/* Everything measured, and when. */
struct dlh_calib {
	double when;                      /* epoch seconds of the measurement; 0 = none */
	int ndev;
	struct dlh_calib_dev dev[DLH_CALIB_DEVS];
	double ar_alpha;                  /* allreduce latency, seconds */
	double ar_beta;                   /* allreduce seconds per byte */
};

/* Correction factors the history refits (identity: all 1). */
struct dlh_correction {
	double compute, comm, startup;    /* multiply those terms of an estimate */
	int runs;                         /* history entries they were fitted on */
};

/* How to measure. */
struct dlh_calib_opts {
	const char *mpirun;               /* absolute path of mpirun */
	const char *program;              /* absolute path of the microbenchmark program */
	int cpus;                         /* CPU slots (ranks for the allreduce test) */
};

/* Runs the microbenchmarks (blocking; seconds, not minutes). Returns 0, or
 * -errno with err naming what failed. */
int dlh_calib_measure(const struct dlh_calib_opts *o, struct dlh_calib *c,
		      char *err, size_t errlen);

/* Loads STATE/calibration. Returns 0, -ENOENT (never measured), or -EINVAL
 * with err naming the bad line. */
int dlh_calib_load(const char *state_dir, struct dlh_calib *c, char *err, size_t errlen);

/* Writes STATE/calibration atomically. Returns 0, or -errno. */
int dlh_calib_save(const char *state_dir, const struct dlh_calib *c);

/* Appends the text of the cache (and of /dlh/pool/calibration): key=value
 * lines, the date first. Returns 0, or -ENOMEM. */
int dlh_calib_format(const struct dlh_calib *c, struct dlh_buf *out);

/* The device of type name, or NULL when it was not calibrated. */
const struct dlh_calib_dev *dlh_calib_dev(const struct dlh_calib *c, const char *type);

#endif
