/* profile.c - a [job] command measured before its run: its profile runs and
 * what follows their end */
#include "engine/supervise/profile.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/plan/choose.h"
#include "engine/report/metrics.h"
#include "engine/table/advise.h"
#include "engine/util/util.h"

/* Empties job j's files a profile run wrote (metrics.csv, run.info, what
 * is in checkpoints/ and output/): the run starts from nothing. */
static void clean(struct dlh_engine *e, const struct dlh_job *j)
{
	char dir[4096], path[4300];
	const char *files[] = { DLH_FILE_METRICS, DLH_FILE_RUNINFO, DLH_FILE_HEARTBEAT };
	const char *dirs[] = { DLH_DIR_CHECKPOINTS, DLH_DIR_OUTPUT };
	eng_job_dir(e, j->id, dir, sizeof dir);
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		snprintf(path, sizeof path, "%s/%s", dir, files[i]);
		unlink(path);
	}
	for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
		snprintf(path, sizeof path, "%s/%s", dir, dirs[i]);
		DIR *d = opendir(path);
		struct dirent *de;
		char entry[4600];
		while (d && (de = readdir(d)))
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
				snprintf(entry, sizeof entry, "%s/%s", path, de->d_name);
				if (dlh_remove_tree(entry) < 0)   /* a directory, no link followed */
					unlink(entry);            /* else a file (or a link itself) */
			}
		if (d)
			closedir(d);
	}
}

static void take_row(void *ctx, const struct dlh_metrics_row *row)
{
	if (isfinite(row->time_s))
		dlh_profile_acc_add(ctx, &(struct dlh_profile_row){ .eval = row->kind == DLH_ROW_EVAL,
								    .t = row->time_s });
}

/* What j's current profile run shows now, into m (its ranks, steps timed,
 * step, evaluations, start-up, steps): the rows appended since the last
 * look are read, the rest is in j->profile_acc. */
static void measure(struct dlh_engine *e, struct dlh_job *j, struct dlh_profile_run *m)
{
	char dir[4096], csv[4200];
	struct dlh_run_info ri;
	struct stat st;
	eng_job_dir(e, j->id, dir, sizeof dir);
	snprintf(csv, sizeof csv, "%s/" DLH_FILE_METRICS, dir);
	memset(m, 0, sizeof *m);
	m->ranks = j->profile_counts[j->profile_phase - 1];
	if (dlh_metrics_scan_on(csv, 4 << 20, &j->profile_mark, take_row, &j->profile_acc) == -ESTALE) {
		/* cut back or replaced: read it again from its start */
		memset(&j->profile_acc, 0, sizeof j->profile_acc);
		memset(&j->profile_mark, 0, sizeof j->profile_mark);
		if (dlh_metrics_scan_on(csv, 4 << 20, &j->profile_mark, take_row, &j->profile_acc) < 0) {
			memset(&j->profile_acc, 0, sizeof j->profile_acc);
			memset(&j->profile_mark, 0, sizeof j->profile_mark);
		}
	}
	const struct dlh_profile_acc *acc = &j->profile_acc;
	dlh_profile_acc_result(acc, m);
	/* the rows' times are the program's clock: the file's time when its last
	 * row was written puts them on the wall clock, and the first row after
	 * the launch */
	if (acc->has_train && !lstat(csv, &st) && S_ISREG(st.st_mode)) {
		double written = (double)st.st_mtim.tv_sec + 1e-9 * (double)st.st_mtim.tv_nsec;
		m->startup_s = fmax(0.0, written - acc->last_t + acc->first_train_t - j->run_started);
	}
	if (!dlh_run_info_read(dir, &ri) && ri.valid) {
		m->steps = ri.total_steps;
		m->steps_per_epoch = ri.steps_per_epoch;
	} else {
		m->steps = j->spec.steps;
	}
}

/* Makes j's running profile run its run: what it writes is the job's
 * already; it is not estimated (why), and goes on. */
static void adopt(struct dlh_engine *e, struct dlh_job *j, const char *why)
{
	eng_job_log(e, j, "not estimated: %s; profile run %d of %d goes on as the job's run", why,
		    j->profile_phase, j->profile_n);
	j->profile_phase = 0;
	eng_job_save(e, j);
}

double eng_profile_watch(struct dlh_engine *e, struct dlh_job *j, double now)
{
	struct dlh_profile_run m;
	char why[160];
	if (!j->profile_phase || j->profile_stopped || j->cancelling || j->suspending)
		return 0;
	measure(e, j, &m);
	double elapsed = dlh_now() - j->run_started;
	int timed = m.rows >= DLH_PROFILE_ROWS && m.span_s >= DLH_PROFILE_SPAN;
	int late = elapsed >= ENG_PROFILE_LIMIT;
	/* an evaluation due soon (at the end of the first epoch) is timed too;
	 * a program past its first epoch without one evaluates otherwise */
	long done = m.rows + DLH_PROFILE_WARMUP;
	if (timed && !m.evals && m.steps_per_epoch > 0 && m.step_s > 0 && done <= m.steps_per_epoch) {
		double due = (double)(m.steps_per_epoch - done + 1) * m.step_s;
		timed = due > DLH_PROFILE_EVAL_WAIT || elapsed + due + 1 >= ENG_PROFILE_LIMIT;
	}
	if (!timed && !late)
		return now + ENG_PROFILE_LOOK;
	/* what cannot be timed is not stopped: it runs on as the job's run */
	if (m.rows < 2) {
		snprintf(why, sizeof why, "it wrote %d train row%s past its first %d in %.0f s",
			 m.rows, m.rows == 1 ? "" : "s", DLH_PROFILE_WARMUP, ENG_PROFILE_LIMIT);
		adopt(e, j, why);
		return 0;
	}
	if (m.steps <= 0) {
		adopt(e, j, "it does not tell its steps ([job] steps, or run.info's total_steps as the "
		      "Python library writes it)");
		return 0;
	}
	j->profile[j->profile_phase - 1] = m;
	j->profile_stopped = 1;
	eng_job_log(e, j, "profile run %d of %d: %d step%s timed: stopping it", j->profile_phase,
		    j->profile_n, m.rows, m.rows == 1 ? "" : "s");
	return 0;
}

/* Logs what profile run k (0-based) measured. */
static void log_run(struct dlh_engine *e, const struct dlh_job *j, int k)
{
	const struct dlh_profile_run *m = &j->profile[k];
	char mem[32] = "unknown";
	if (m->peak_mem > 0)
		dlh_size_text(m->peak_mem, mem, sizeof mem);
	eng_job_log(e, j, "profile run %d of %d: %d rank%s, %d step%s timed: %.4g s a step, "
		    "%.3g s to its first step, %ld steps in its run, peak memory %s", k + 1, j->profile_n,
		    m->ranks, m->ranks == 1 ? "" : "s", m->rows, m->rows == 1 ? "" : "s", m->step_s,
		    m->startup_s, m->steps, mem);
}

/* After the last profile run: the fit, the choice, the record; j queued
 * for its run or failed for its deadline. */
static void fitted(struct dlh_engine *e, struct dlh_job *j, double end_t)
{
	char why[512];
	struct dlh_profile_fit f;
	struct dlh_choice *c = calloc(1, sizeof *c);
	int max;
	const char *type;
	double watts;
	j->profile_phase = 0;
	dlh_choose_command_devices(&e->pool, j->spec.device == DLH_DEVICE_GPU, &max, &type, &watts);
	j->status = DLH_QUEUED;
	int rc = dlh_profile_fit(j->profile, j->profile_n, &f, why, sizeof why);
	if (!rc && c)
		rc = dlh_choose_profiled(&f, "its profile", &j->spec, max, type, watts, c, why, sizeof why);
	else if (!c)
		rc = -ENOMEM, snprintf(why, sizeof why, "out of memory");
	if (rc == -ETIME) {
		j->status = DLH_FAILED;
		j->finished = end_t;
		dlh_job_reason(j, NULL, "[job] deadline: %s", why);
	} else if (rc) {
		eng_job_log(e, j, "not estimated: %s", why);
		if (c) {   /* the estimate file says why */
			memset(c, 0, sizeof *c);
			snprintf(c->why, sizeof c->why, "its profile: %s", why);
			eng_write_choice(e, j, c, NULL);
		}
		if (j->spec.deadline > 0) {
			j->status = DLH_FAILED;
			j->finished = end_t;
			dlh_job_reason(j, NULL, "[job] deadline: the program could not be estimated: %s", why);
		}
		j->plan_ranks = j->spec.ranks > 0 ? j->spec.ranks : max;
	} else {
		if (eng_profile_record_write(e, &j->spec, &f))
			eng_job_log(e, j, "the program's profile is not kept for its next runs");
		eng_choice_apply(j, c);
		if ((rc = eng_write_choice(e, j, c, NULL)))
			eng_job_log(e, j, "cannot write its estimate: %s", strerror(-rc));
		char t[32];
		dlh_duration_text(c->est.total_s, t, sizeof t);
		eng_job_log(e, j, "estimated by its profile: %d x %s, %s, %.0f J (%s)", c->ranks, c->type,
			    t, c->est.joules, j->spec.deadline > 0 ? "the fewest joules within its deadline" :
			    j->spec.ranks > 0 ? "the spec's ranks" : "the fastest");
	}
	free(c);
}

void eng_profile_start(struct dlh_engine *e, struct dlh_job *j)
{
	clean(e, j);   /* an earlier profile run's, cut short (a restart of dlhfs) */
	memset(&j->profile_acc, 0, sizeof j->profile_acc);
	memset(&j->profile_mark, 0, sizeof j->profile_mark);
}

int eng_profile_ended(struct dlh_engine *e, struct dlh_job *j, long long peak, double end_t)
{
	if (!j->profile_phase || j->cancelling || e->stopping)
		return 0;
	if (j->suspending || j->exit_code == DLH_EXIT_SUSPENDED) {
		/* suspended (ctl, preemption) at a checkpoint of its own: that run
		 * was the job's, and the next takes up from its checkpoint */
		eng_job_log(e, j, "not estimated: suspended in profile run %d of %d, which was the "
			    "job's run", j->profile_phase, j->profile_n);
		j->profile_phase = 0;
		return 0;
	}
	int k = j->profile_phase - 1;
	if (!j->profile_stopped) {   /* it ended by itself: that was the job's run */
		eng_job_log(e, j, "profile run %d of %d ended by itself: it was the job's run", k + 1,
			    j->profile_n);
		j->profile_phase = 0;
		return 0;
	}
	j->profile_stopped = 0;
	clean(e, j);   /* the next run, profile or not, starts from nothing */
	if (peak > 0)
		j->profile[k].peak_mem = peak;
	log_run(e, j, k);
	if (j->profile_phase < j->profile_n) {
		j->profile_phase++;
		j->plan_ranks = j->profile_counts[j->profile_phase - 1];
		j->status = DLH_QUEUED;
		return 1;
	}
	fitted(e, j, end_t);
	return 1;
}
