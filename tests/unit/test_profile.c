/* test_profile.c - a user's program estimated from its profiles (engine/plan/profile) */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "engine/plan/profile.h"
#include "tests/unit/check.h"

#define NEAR(a, b) (fabs((a) - (b)) <= 1e-9 * fmax(1.0, fabs(b)))

/* A program whose step is a/r + b 2(r-1)/r (the global batch split), its
 * start-up s + k(r-1): profiles at 1 and 2 ranks predict 4 exactly. */
TEST(two_profiles_of_a_split_batch_predict_any_count)
{
	double a = 0.2, b = 0.03, s = 1.5, k = 0.25;
	struct dlh_profile_run runs[2] = {
		{ .ranks = 1, .rows = 8, .step_s = a, .startup_s = s, .steps = 500, .peak_mem = 100 << 20 },
		{ .ranks = 2, .rows = 8, .step_s = a / 2 + b, .startup_s = s + k, .steps = 500,
		  .peak_mem = 220 << 20 },
	};
	struct dlh_profile_fit f;
	struct dlh_estimate e;
	char err[256];
	CHECK(dlh_profile_fit(runs, 2, &f, err, sizeof err) == 0);
	CHECK(!f.weak && f.steps1 == 500 && NEAR(f.compute_s, a) && NEAR(f.comm_s, b));
	CHECK(NEAR(f.startup_s, s) && NEAR(f.startup_rank_s, k));
	CHECK(NEAR(f.mem_rank, (double)(110 << 20)));
	dlh_profile_predict(&f, 4, 10.0, &e);
	double step4 = a / 4 + b * 1.5;
	CHECK(e.steps == 500 && NEAR(e.step_s, step4));
	CHECK(NEAR(e.total_s, s + 3 * k + 500 * step4));
	CHECK(NEAR(e.joules, 4 * 10.0 * e.total_s));
	/* the fit survives its text (the history keeps it) */
	struct dlh_buf t = { 0 };
	struct dlh_profile_fit back;
	CHECK(dlh_profile_format(&f, &t) == 0);
	CHECK(dlh_profile_parse(t.data, &back) == 0);
	CHECK(back.weak == f.weak && back.steps1 == 500 && fabs(back.compute_s - a) < 1e-6 &&
	      fabs(back.comm_s - b) < 1e-6);
	dlh_buf_free(&t);
}

/* Each rank keeps its batch: the steps halve at 2 ranks, a step costs the
 * same work plus the sum */
TEST(a_program_whose_ranks_keep_their_batch_is_weak_scaling)
{
	struct dlh_profile_run runs[2] = {
		{ .ranks = 1, .rows = 8, .step_s = 0.1, .startup_s = 2, .steps = 1000 },
		{ .ranks = 2, .rows = 8, .step_s = 0.12, .startup_s = 2, .steps = 500 },
	};
	struct dlh_profile_fit f;
	struct dlh_estimate e;
	char err[256];
	CHECK(dlh_profile_fit(runs, 2, &f, err, sizeof err) == 0);
	CHECK(f.weak && f.steps1 == 1000 && NEAR(f.compute_s, 0.1) && NEAR(f.comm_s, 0.02));
	dlh_profile_predict(&f, 2, 1.0, &e);
	CHECK(e.steps == 500 && NEAR(e.total_s, 2 + 500 * 0.12));
}

/* the deadline: the fewest joules that meet it; none: -ETIME with the fastest */
TEST(the_count_for_a_deadline_is_the_cheapest_that_meets_it)
{
	struct dlh_profile_fit f = { .runs = 2, .steps1 = 100, .compute_s = 1.0, .comm_s = 0.05,
				     .startup_s = 1.0, .startup_rank_s = 0.1 };
	struct dlh_estimate e;
	/* 1 rank: 101 s; 2: 1.1 + 100 x 0.55 = 56.1 s; 4: 1.3 + 100 x 0.325 = 33.8 s */
	CHECK(dlh_profile_choose(&f, 4, 0, 1.0, &e) == 4 && NEAR(e.total_s, 33.8));
	CHECK(dlh_profile_choose(&f, 4, 60, 1.0, &e) == 2 && NEAR(e.total_s, 56.1));
	CHECK(dlh_profile_choose(&f, 4, 200, 1.0, &e) == 1);
	CHECK(dlh_profile_choose(&f, 4, 30, 1.0, &e) == -ETIME && NEAR(e.total_s, 33.8));
}

TEST(what_cannot_be_fitted_says_why)
{
	struct dlh_profile_run none = { .ranks = 1, .rows = 0, .step_s = 0, .steps = 10 };
	struct dlh_profile_run mute = { .ranks = 1, .rows = 8, .step_s = 0.1, .steps = 0 };
	struct dlh_profile_fit f;
	char err[256];
	CHECK(dlh_profile_fit(&none, 1, &f, err, sizeof err) == -EINVAL && strstr(err, "timed no steps"));
	CHECK(dlh_profile_fit(&mute, 1, &f, err, sizeof err) == -EINVAL &&
	      strstr(err, "does not tell its steps"));
	/* one profile at 3 ranks: all of the step is work, shared */
	struct dlh_profile_run three = { .ranks = 3, .rows = 8, .step_s = 0.1, .startup_s = 1, .steps = 90 };
	CHECK(dlh_profile_fit(&three, 1, &f, err, sizeof err) == 0 && NEAR(f.compute_s, 0.3) &&
	      f.comm_s == 0);
}

/* After the warm-up rows, train intervals are steps; one that spans an
 * eval row is an evaluation (less a step) */
TEST(the_rows_give_the_step_and_the_evaluation)
{
	struct dlh_profile_row r[] = {
		{ 0, 1.0 }, { 0, 3.0 },                      /* warm-up: slow, not timed */
		{ 0, 3.1 }, { 0, 3.2 }, { 0, 3.3 }, { 0, 3.4 },
		{ 1, 3.9 }, { 0, 4.0 },                      /* an evaluation of 0.5 s */
		{ 0, 4.1 },
	};
	struct dlh_profile_run m = { 0 };
	dlh_profile_rows(r, 9, &m);
	CHECK_MSG(m.rows == 5 && NEAR(m.step_s, 0.1) && fabs(m.span_s - 0.5) < 1e-9, "%d %g %g", m.rows,
		  m.step_s, m.span_s);
	CHECK(m.evals == 1 && fabs(m.eval_s - 0.5) < 1e-9);
	dlh_profile_rows(r, 1, &m);
	CHECK(m.rows == 0 && m.step_s == 0);
	/* the fit takes the evaluation, per epoch, shared by the ranks; what
	 * runs took beyond it is learnt */
	struct dlh_profile_run one = { .ranks = 1, .rows = 8, .step_s = 0.1, .startup_s = 1,
				       .steps = 100, .steps_per_epoch = 50, .evals = 1, .eval_s = 0.6 };
	struct dlh_profile_fit f;
	struct dlh_estimate e;
	char err[256];
	CHECK(dlh_profile_fit(&one, 1, &f, err, sizeof err) == 0 && f.spe1 == 50 && NEAR(f.eval_s, 0.6));
	dlh_profile_predict(&f, 2, 1.0, &e);   /* 1 + 100 x 0.05 + 2 x 0.3 */
	CHECK_MSG(NEAR(e.total_s, 6.6), "%g", e.total_s);
	dlh_profile_learn(&f, 6.6, 7.6);
	dlh_profile_learn(&f, 7.6, 6.6);
	CHECK(f.corrections == 2 && NEAR(f.tail_s, 0.5));   /* the mean excess over 6.6: (1 + 0) / 2 */
	dlh_profile_predict(&f, 2, 1.0, &e);
	CHECK(NEAR(e.total_s, 7.1));
}

int main(void)
{
	RUN(two_profiles_of_a_split_batch_predict_any_count);
	RUN(a_program_whose_ranks_keep_their_batch_is_weak_scaling);
	RUN(the_count_for_a_deadline_is_the_cheapest_that_meets_it);
	RUN(what_cannot_be_fitted_says_why);
	RUN(the_rows_give_the_step_and_the_evaluation);
	return CHECK_EXIT();
}
