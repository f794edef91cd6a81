/* eta.c - when a running job is expected to end, from its own rows: what
 * the scheduler plans the slots it holds by where it has no time_limit */
#include "engine/supervise/eta.h"

#include <math.h>
#include <stdio.h>

#include "engine/report/metrics.h"
#include "engine/table/advise.h"
#include "engine/util/util.h"

double eng_eta_update(struct dlh_engine *e, struct dlh_job *j, double now, int *moved)
{
	char dir[4096], csv[4200];
	struct dlh_metrics m;
	struct dlh_run_info ri;
	if (j->eta_looked > 0 && now - j->eta_looked < ENG_ETA_EVERY)
		return j->eta_looked + ENG_ETA_EVERY;
	double was = j->eta_end, t = dlh_now();
	j->eta_looked = now;
	j->eta_end = 0;
	eng_job_dir(e, j->id, dir, sizeof dir);
	snprintf(csv, sizeof csv, "%s/" DLH_FILE_METRICS, dir);
	if (dlh_run_info_read(dir, &ri))
		ri.valid = 0;
	long total = dlh_total_steps(&ri, &j->spec);
	double left = 0;
	/* a profile run's rows are not the run's (supervise/profile.c) */
	if (total > 0 && !j->profile_phase && !dlh_metrics_read(csv, &m) && m.have_train && m.step < total) {
		left = dlh_metrics_eta(&m, total, j->spec.command[0] ? 0 : j->spec.batch_size);
		if (left > 0)
			j->eta_end = t + left;
	}
	if ((was > 0) != (j->eta_end > 0) ||
	    fabs(j->eta_end - was) > fmax(ENG_ETA_MOVED, 0.1 * (j->eta_end - t))) {
		*moved = 1;
		/* the estimate file's current figure: the run's length by its rows
		 * (a run taken up again: by the program's clock, resumes included) */
		if (j->eta_end > 0)
			eng_estimate_current(e, j, j->suspends || j->restarts || j->taken_back ?
						   m.time_s + left : j->eta_end - j->run_started, m.step);
	}
	return now + ENG_ETA_EVERY;
}
