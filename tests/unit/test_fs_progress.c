/* test_fs_progress.c - a job's progress line (fs/progress.c) without a mount:
 * dlh-train's (run.info's total, samples/s ETA), a [job] command's with
 * [job] steps (step S/N, %, ETA from the rows' step rate) and without (no
 * %, no ETA), the states around a run */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/progress.h"
#include "tests/unit/check.h"

/* A job record as the engine keeps one: defaults, status st. */
static struct dlh_job *job_new(enum dlh_status st, const char *command, long steps)
{
	struct dlh_job *j = calloc(1, sizeof *j);
	if (!j)
		return NULL;
	j->id = 1;
	j->status = st;
	j->ranks = 2;
	dlh_spec_defaults(&j->spec);
	snprintf(j->spec.command, sizeof j->spec.command, "%s", command);
	j->spec.steps = steps;
	return j;
}

/* The line for j, m, ri, idle into out (n bytes). */
static void line_of(const struct dlh_job *j, const struct dlh_metrics *m,
		    const struct dlh_run_info *ri, double idle, char *out, size_t n)
{
	struct dlh_buf b = { 0 };
	int rc = fs_progress_render(j, m, ri, idle, "", &b);
	snprintf(out, n, "%s", rc ? "(error)" : b.data ? b.data : "");
	dlh_buf_free(&b);
}

/* newest train row at step, time_s; rate window 20 steps back at 0.5 s a step */
static struct dlh_metrics rows_at(long step, double time_s, double samples_per_s)
{
	struct dlh_metrics m = { .have_train = 1, .step = step, .epoch = 2, .time_s = time_s,
				 .samples_per_s = samples_per_s };
	if (step > 20) {
		m.rate_step = step - 20;
		m.rate_time_s = time_s - 10;
	}
	return m;
}

TEST(command_with_steps_shows_step_of_total_percent_and_eta)
{
	char got[256];
	struct dlh_job *j = job_new(DLH_RUNNING, "python3 train.py", 120);
	struct dlh_run_info ri = { 0 };
	struct dlh_metrics m = rows_at(30, 40.0, 1234);
	CHECK(j != NULL);
	/* 90 steps left at 2 steps/s (the window, not the average 0.75/s) */
	line_of(j, &m, &ri, 0, got, sizeof got);
	CHECK_MSG(!strcmp(got, "epoch 2  step 30/120  25%  1234 samples/s  ETA 0:45\n"), "got %s", got);
	m = rows_at(120, 100.0, 1234);
	j->status = DLH_SUCCEEDED;
	line_of(j, &m, &ri, 0, got, sizeof got);
	CHECK_MSG(!strcmp(got, "succeeded: epoch 2  step 120/120  100%  in 1:40\n"), "got %s", got);
	free(j);
}

TEST(command_without_a_window_takes_the_average_rate)
{
	char got[256];
	struct dlh_job *j = job_new(DLH_RUNNING, "python3 train.py", 100);
	struct dlh_run_info ri = { 0 };
	struct dlh_metrics m = rows_at(10, 20.0, 0);   /* 2 s a step on average */
	CHECK(j != NULL);
	line_of(j, &m, &ri, 12, got, sizeof got);
	CHECK_MSG(!strcmp(got, "epoch 2  step 10/100  10%  0 samples/s  ETA 3:00  no step for 0:12\n"),
		  "got %s", got);
	free(j);
}

TEST(command_without_steps_shows_no_percent_nor_eta)
{
	char got[256];
	struct dlh_job *j = job_new(DLH_RUNNING, "python3 train.py", 0);
	struct dlh_run_info ri = { 0 };
	struct dlh_metrics m = rows_at(30, 40.0, 512.4);
	CHECK(j != NULL);
	line_of(j, &m, &ri, 0, got, sizeof got);
	CHECK_MSG(!strcmp(got, "epoch 2  step 30  512 samples/s\n"), "got %s", got);
	j->status = DLH_SUSPENDED;
	line_of(j, &m, &ri, 0, got, sizeof got);
	CHECK_MSG(!strcmp(got, "suspended: epoch 2  step 30  in 0:40\n"), "got %s", got);
	free(j);
}

TEST(command_before_its_first_row_is_starting)
{
	char got[256];
	struct dlh_job *j = job_new(DLH_RUNNING, "python3 train.py", 120);
	struct dlh_run_info ri = { 0 };
	struct dlh_metrics m = { 0 };
	CHECK(j != NULL);
	line_of(j, &m, &ri, 0, got, sizeof got);
	CHECK_MSG(!strcmp(got, "running: starting 2 ranks, loading data\n"), "got %s", got);
	free(j);
}

/* dlh-train: run.info's total and epochs of the spec, ETA from samples/s and
 * the global batch; rows without run.info are not yet this run's */
TEST(trainer_uses_run_info_and_samples_per_second)
{
	char got[256];
	struct dlh_job *j = job_new(DLH_RUNNING, "", 0);
	struct dlh_run_info ri = { .valid = 1, .total_steps = 1000, .steps_per_epoch = 100 };
	struct dlh_metrics m = rows_at(200, 10.0, 6400);   /* batch 64: 100 steps/s */
	CHECK(j != NULL);
	j->spec.epochs = 10;
	line_of(j, &m, &ri, 0, got, sizeof got);
	CHECK_MSG(!strcmp(got, "epoch 2/10  step 200/1000  20%  6400 samples/s  ETA 0:08\n"), "got %s", got);
	ri.valid = 0;
	line_of(j, &m, &ri, 0, got, sizeof got);
	CHECK_MSG(!strcmp(got, "running: starting 2 ranks, loading data\n"), "got %s", got);
	free(j);
}

TEST(queued_and_planning_say_why)
{
	char got[256];
	struct dlh_job *j = job_new(DLH_QUEUED, "python3 train.py", 120);
	struct dlh_run_info ri = { 0 };
	struct dlh_metrics m = { 0 };
	CHECK(j != NULL);
	snprintf(j->wait, sizeof j->wait, "waiting for 2 cpu slots; 1 free");
	line_of(j, &m, &ri, 0, got, sizeof got);
	CHECK_MSG(!strcmp(got, "queued: waiting for 2 cpu slots; 1 free\n"), "got %s", got);
	j->status = DLH_PLANNING;
	line_of(j, &m, &ri, 0, got, sizeof got);
	CHECK_MSG(!strcmp(got, "planning\n"), "got %s", got);
	free(j);
}

int main(void)
{
	RUN(command_with_steps_shows_step_of_total_percent_and_eta);
	RUN(command_without_a_window_takes_the_average_rate);
	RUN(command_without_steps_shows_no_percent_nor_eta);
	RUN(command_before_its_first_row_is_starting);
	RUN(trainer_uses_run_info_and_samples_per_second);
	RUN(queued_and_planning_say_why);
	return CHECK_EXIT();
}
