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

int main(void)
{
	if (tmp_root_make())
		return 1;
	RUN(metrics_read_newest_rows_and_ignore_partial_line);
	RUN(metrics_missing_file_is_empty);
	tmp_root_remove();
	return CHECK_EXIT();
}
