/* test_metrics.c - reading what a run appends (engine/jobs/metrics.c): metrics.csv */
#include <stdio.h>

#include "engine/jobs/metrics.h"
#include "tests/unit/check.h"
#include "tests/unit/tmpdir.h"

TEST(metrics_read_newest_rows_and_ignore_partial_line)
{
	char dir[512], path[600];
	fresh_dir(dir, sizeof dir, "metrics");
	snprintf(path, sizeof path, "%s/metrics.csv", dir);
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	fprintf(f, "kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s\n");
	for (int s = 1; s <= 3000; s++) {
		fprintf(f, "train,%d,%d,%.3f,%.4f,0.5,0.05,1000\n", s, (s - 1) / 1000 + 1, s * 0.01, 3.0 / s);
		if (s == 1000)
			fprintf(f, "eval,1000,1,10.5,0.61,0.777,,\n");
	}
	fprintf(f, "train,3001,4,30.01,0.1"); /* being written */
	fclose(f);
	struct dlh_metrics m;
	CHECK(dlh_metrics_read(path, &m) == 0);
	CHECK(m.have_train && m.step == 3000 && m.epoch == 3);
	CHECK(m.have_eval && m.eval_step == 1000 && m.test_accuracy > 0.776 && m.test_accuracy < 0.778);
}

TEST(metrics_missing_file_is_empty)
{
	struct dlh_metrics m;
	CHECK(dlh_metrics_read("/nonexistent/metrics.csv", &m) == 0);
	CHECK(!m.have_train && !m.have_eval);
}

/* the recent step rate: the train row DLH_METRICS_RATE_ROWS before the
 * newest, eval rows skipped; rows of an earlier run (time_s starting over)
 * close the window; a [job] command's total is its [job] steps */
TEST(metrics_step_rate_over_the_newest_rows)
{
	char dir[512], path[600];
	fresh_dir(dir, sizeof dir, "rate");
	snprintf(path, sizeof path, "%s/metrics.csv", dir);
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	fprintf(f, "kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s\n");
	for (int s = 1; s <= 100; s++) {   /* 1 s a step, then 0.5 s from step 60 */
		fprintf(f, "train,%d,1,%.3f,0.5,0.5,0.1,10\n", s, s <= 60 ? s : 60 + (s - 60) * 0.5);
		if (s % 30 == 0)
			fprintf(f, "eval,%d,1,%.3f,0.6,0.7,,\n", s, s <= 60 ? s : 60 + (s - 60) * 0.5);
	}
	fclose(f);
	struct dlh_metrics m;
	CHECK(dlh_metrics_read(path, &m) == 0);
	CHECK(m.have_train && m.step == 100 && m.have_eval && m.eval_step == 90);
	CHECK_MSG(m.rate_step == 100 - DLH_METRICS_RATE_ROWS, "rate_step %ld", m.rate_step);
	double r = dlh_metrics_step_rate(&m);
	CHECK_MSG(r > 1.99 && r < 2.01, "rate %g", r);

	/* a run that started its clock over at step 91: the window stops there */
	f = fopen(path, "w");
	CHECK(f != NULL);
	for (int s = 1; s <= 100; s++)
		fprintf(f, "train,%d,1,%.3f,0.5,0.5,0.1,10\n", s, s <= 90 ? s * 1.0 : (s - 90) * 0.25);
	fclose(f);
	CHECK(dlh_metrics_read(path, &m) == 0);
	CHECK_MSG(m.rate_step == 91, "rate_step %ld", m.rate_step);
	r = dlh_metrics_step_rate(&m);
	CHECK_MSG(r > 3.99 && r < 4.01, "rate %g", r);

	/* one row: no rate */
	f = fopen(path, "w");
	CHECK(f != NULL);
	fprintf(f, "train,1,1,3.5,0.5,0.5,0.1,10\n");
	fclose(f);
	CHECK(dlh_metrics_read(path, &m) == 0);
	CHECK(m.have_train && m.rate_step == 0 && dlh_metrics_step_rate(&m) == 0);
}

TEST(total_steps_from_run_info_else_a_commands_spec)
{
	struct dlh_spec s;
	struct dlh_run_info ri = { .valid = 1, .total_steps = 9090 };
	dlh_spec_defaults(&s);
	s.steps = 120;                          /* ignored without a command */
	CHECK(dlh_total_steps(&ri, &s) == 9090);
	ri.valid = 0;
	CHECK(dlh_total_steps(&ri, &s) == 0);
	snprintf(s.command, sizeof s.command, "python3 train.py");
	CHECK(dlh_total_steps(&ri, &s) == 120);
	s.steps = 0;
	CHECK(dlh_total_steps(&ri, &s) == 0);
}

/* an eval row far back is found again without reading back to it (only
 * what was appended since is looked at), a newer one replaces it, and a
 * file cut back and written again is read anew */
TEST(metrics_eval_row_found_once_then_only_new_lines_are_read)
{
	char dir[512], path[600];
	fresh_dir(dir, sizeof dir, "evalseen");
	snprintf(path, sizeof path, "%s/metrics.csv", dir);
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	fprintf(f, "kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s\n");
	fprintf(f, "train,1,1,0.010,2.0,0.1,0.1,100\n");
	fprintf(f, "eval,1,1,0.020,1.5,0.42,,\n");
	for (int s = 2; s <= 20000; s++)   /* some 600 KB past it */
		fprintf(f, "train,%d,1,%.3f,1.0,0.5,0.1,100\n", s, s * 0.01);
	fclose(f);
	struct dlh_metrics m;
	CHECK(dlh_metrics_read(path, &m) == 0);
	CHECK(m.have_train && m.step == 20000 && m.have_eval && m.eval_step == 1);

	f = fopen(path, "a");
	CHECK(f != NULL);
	fprintf(f, "train,20001,1,200.010,1.0,0.5,0.1,100\n");
	fclose(f);
	CHECK(dlh_metrics_read(path, &m) == 0);
	CHECK(m.step == 20001 && m.have_eval && m.eval_step == 1 && m.test_accuracy > 0.41 &&
	      m.test_accuracy < 0.43);
	CHECK(dlh_metrics_read(path, &m) == 0);   /* nothing new */
	CHECK(m.step == 20001 && m.have_eval && m.eval_step == 1);

	f = fopen(path, "a");
	CHECK(f != NULL);
	fprintf(f, "eval,20001,1,200.020,0.9,0.66,,\ntrain,20002,2,200.030,1.0,0.5,0.1,100\n");
	fclose(f);
	CHECK(dlh_metrics_read(path, &m) == 0);
	CHECK(m.step == 20002 && m.have_eval && m.eval_step == 20001);

	/* cut back (as a resume does) and written again past where it was read:
	 * the eval rows are gone */
	f = fopen(path, "w");
	CHECK(f != NULL);
	fprintf(f, "kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s\n");
	for (int s = 1; s <= 30000; s++)
		fprintf(f, "train,%d,1,%.3f,1.5,0.5,0.1,100\n", s, s * 0.02);
	fclose(f);
	CHECK(dlh_metrics_read(path, &m) == 0);
	CHECK_MSG(m.step == 30000 && !m.have_eval, "step %ld, eval %d at %ld", m.step, m.have_eval,
		  m.eval_step);
}

int main(void)
{
	if (tmp_root_make())
		return 1;
	RUN(metrics_read_newest_rows_and_ignore_partial_line);
	RUN(metrics_missing_file_is_empty);
	RUN(metrics_step_rate_over_the_newest_rows);
	RUN(total_steps_from_run_info_else_a_commands_spec);
	RUN(metrics_eval_row_found_once_then_only_new_lines_are_read);
	tmp_root_remove();
	return CHECK_EXIT();
}
