/* progress.h - the one line of a job's progress file, from its record,
 * its newest metrics.csv rows and the run's total steps */
#ifndef DLH_FS_PROGRESS_H
#define DLH_FS_PROGRESS_H

#include "engine/engine.h"
#include "engine/report/metrics.h"
#include "engine/util/util.h"

#define FS_IDLE_SHOWN 10.0   /* seconds without a step after which progress says so */

/* Appends job j's progress line to out. m: its newest rows; ri: its
 * run.info (valid 0 when there is none: a [job] command's total is then its
 * [job] steps, or unknown); idle: seconds since metrics.csv last grew
 * (shown while running, from FS_IDLE_SHOWN on). With a total: `epoch E/N
 * step S/T  P%  R samples/s  ETA M:SS`; without: `epoch E  step S  R
 * samples/s`. note: the launcher's word on a run whose program has not
 * started ("pending in Slurm ..."; "" = none), shown instead of "starting
 * N ranks". Reads no file. Returns 0, or -ENOMEM. */
int fs_progress_render(const struct dlh_job *j, const struct dlh_metrics *m,
		       const struct dlh_run_info *ri, double idle, const char *note,
		       struct dlh_buf *out);

#endif
