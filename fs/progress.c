/* progress.c - the one line of a job's progress file, from its record,
 * its newest metrics.csv rows and the run's total steps (pure: the caller
 * reads the files) */
#include "fs/progress.h"

#include <math.h>
#include <stdio.h>

/* Seconds the run needs for its steps after m's newest (0: done or unknown). */
static double eta_of(const struct dlh_job *j, const struct dlh_metrics *m, long total)
{
	return dlh_metrics_eta(m, total, j->spec.command[0] ? 0 : j->spec.batch_size);
}

int fs_progress_render(const struct dlh_job *j, const struct dlh_metrics *m,
		       const struct dlh_run_info *ri, double idle, const char *note,
		       struct dlh_buf *out)
{
	switch (j->status) {
	case DLH_QUEUED:
		return dlh_buf_printf(out, "queued: %s%s%s%s\n", j->wait[0] ? j->wait : "waiting to be planned",
				      j->reason[0] ? " (" : "", j->reason, j->reason[0] ? ")" : "");
	case DLH_PLANNING:
		return dlh_buf_printf(out, "planning\n");
	default:
		break;
	}
	if (j->status == DLH_RUNNING && j->profile_phase)   /* supervise/profile.c */
		return dlh_buf_printf(out, "running: profile run %d of %d on %d rank%s: timing its first "
				      "steps to estimate the job\n", j->profile_phase, j->profile_n,
				      j->ranks, j->ranks == 1 ? "" : "s");
	long total = dlh_total_steps(ri, &j->spec);
	/* dlh-train's rows count only with its run.info: rows without it are
	 * another run's */
	if (!m->have_train || (!j->spec.command[0] && !ri->valid)) {
		if (j->status == DLH_RUNNING && note && note[0])
			return dlh_buf_printf(out, "running: %s\n", note);
		if (j->status == DLH_RUNNING)
			return dlh_buf_printf(out, "running: starting %d rank%s, loading data\n", j->ranks,
					      j->ranks == 1 ? "" : "s");
		return dlh_buf_printf(out, "%s%s%s\n", dlh_status_name(j->status),
				      j->reason[0] ? ": " : "", j->reason);
	}
	/* epoch E/N where the epochs are dlh-train's; a command's are its own */
	char epoch[48], step[64], q[32], quiet[48] = "", when[48];
	if (j->spec.command[0])
		snprintf(epoch, sizeof epoch, "epoch %d", m->epoch);
	else
		snprintf(epoch, sizeof epoch, "epoch %d/%d", m->epoch, j->spec.epochs);
	if (total > 0)
		snprintf(step, sizeof step, "step %ld/%ld  %lld%%", m->step, total,
			 /* down: 100% only at the last step */
			 m->step > 0 ? (long long)m->step * 100 / total : 0LL);
	else
		snprintf(step, sizeof step, "step %ld", m->step);
	if (j->status == DLH_RUNNING) {
		if (idle >= FS_IDLE_SHOWN) {   /* a run that waits shows how long it has not stepped */
			dlh_duration(idle, q, sizeof q);
			snprintf(quiet, sizeof quiet, "  no step for %s", q);
		}
		if (total > 0) {
			dlh_duration(eta_of(j, m, total), q, sizeof q);
			snprintf(when, sizeof when, "  ETA %s", q);
		} else {
			when[0] = '\0';
		}
		/* a program that does not know its samples writes nan: its steps' rate then */
		char rate[48] = "";
		double steps_s = dlh_metrics_step_rate(m);
		if (isfinite(m->samples_per_s))
			snprintf(rate, sizeof rate, "  %.0f samples/s", m->samples_per_s);
		else if (steps_s > 0)
			snprintf(rate, sizeof rate, "  %.3g steps/s", steps_s);
		return dlh_buf_printf(out, "%s  %s%s%s%s\n", epoch, step, rate, when, quiet);
	}
	dlh_duration(m->time_s, q, sizeof q);
	return dlh_buf_printf(out, "%s: %s  %s  in %s%s%s\n", dlh_status_name(j->status), epoch, step,
			      q, j->reason[0] ? "  " : "", j->reason);
}
