/* test_sched.c - the queue's order and conservative backfill (engine/sched/sched.c),
 * pure functions driven by hand */
#include <math.h>

#include "engine/sched/sched.h"
#include "tests/unit/check.h"

TEST(sched_order_is_priority_then_submission_then_id)
{
	struct dlh_sched_wait w[] = {
		{ .id = 1, .priority = 0, .submitted = 10 }, { .id = 2, .priority = 5, .submitted = 30 },
		{ .id = 3, .priority = 0, .submitted = 5 }, { .id = 4, .priority = 5, .submitted = 30 },
		{ .id = 5, .priority = -1, .submitted = 1 },
	};
	dlh_sched_order(w, 5);
	long want[] = { 2, 4, 3, 1, 5 };
	for (int i = 0; i < 5; i++)
		CHECK_MSG(w[i].id == want[i], "position %d: job %ld, want %ld", i, w[i].id, want[i]);
}

TEST(sched_backfills_only_what_ends_before_the_reservation)
{
	/* 2 slots; one held until t=100; the head needs both */
	struct dlh_sched_run run[] = { { .cpus = 1, .end = 100 } };
	struct dlh_sched_wait w[] = {
		{ .id = 1, .cpus = 2, .duration = 50 },       /* head: reserved at 100 */
		{ .id = 2, .cpus = 1, .duration = 60 },       /* ends at 60 < 100: now */
		{ .id = 3, .cpus = 1, .duration = 200 },      /* would delay the head: after it */
		{ .id = 4, .cpus = 1, .duration = INFINITY }, /* no limit: beside job 3 */
		{ .id = 5, .cpus = 3, .duration = 1 },        /* never fits */
	};
	dlh_sched_plan(2, 0, run, 1, w, 5);
	CHECK_MSG(w[0].start == 100, "head at %g", w[0].start);
	CHECK_MSG(w[1].start == 0, "short job at %g", w[1].start);
	CHECK_MSG(w[2].start == 150, "long job at %g", w[2].start);
	CHECK_MSG(w[3].start == 150, "unlimited job at %g", w[3].start);
	CHECK(isinf(w[4].start));
}

TEST(sched_unknown_ends_let_only_limited_jobs_pass)
{
	struct dlh_sched_run run[] = { { .cpus = 1, .end = INFINITY } };
	struct dlh_sched_wait w[] = {
		{ .id = 1, .cpus = 2, .duration = 50 },       /* start unknown */
		{ .id = 2, .cpus = 1, .duration = 10 },       /* limited: may pass */
		{ .id = 3, .cpus = 1, .duration = INFINITY }, /* unlimited: may not */
	};
	dlh_sched_plan(2, 1000, run, 1, w, 3);
	CHECK(isinf(w[0].start));
	CHECK_MSG(w[1].start == 1000, "limited job at %g", w[1].start);
	CHECK(isinf(w[2].start));
}

int main(void)
{
	RUN(sched_order_is_priority_then_submission_then_id);
	RUN(sched_backfills_only_what_ends_before_the_reservation);
	RUN(sched_unknown_ends_let_only_limited_jobs_pass);
	return CHECK_EXIT();
}
