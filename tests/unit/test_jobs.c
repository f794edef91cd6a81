/* test_jobs.c - one job's record on disk (engine/table/job.c): save and load */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "engine/table/job.h"
#include "tests/unit/check.h"
#include "tests/unit/tmpdir.h"

TEST(job_record_round_trips)
{
	char dir[512], path[600];
	fresh_dir(dir, sizeof dir, "job");
	struct dlh_job j = { 0 }, k;
	j.id = 42;
	j.uid = 1000;
	j.status = DLH_CANCELLED;
	snprintf(j.reason, sizeof j.reason, "cancelled by uid 1000");
	j.submitted = 1700000000.5;
	j.ranks = 2;
	j.exit_code = -9;
	snprintf(path, sizeof path, "%s/spec.ini", dir);
	write_text(path, "[job]\nname = keep\n[train]\ntrain_nope = 1\n");
	CHECK(dlh_job_save(&j, dir) == 0);
	CHECK(dlh_job_load(&k, dir) == -EINVAL); /* the spec does not parse */
	write_text(path, "[job]\nname = keep\n[data]\ntrain = /nonexistent/gone.gz\n");
	CHECK(dlh_job_load(&k, dir) == 0);       /* data files may be gone since */
	CHECK(k.id == 42 && k.uid == 1000 && k.status == DLH_CANCELLED);
	CHECK(k.ranks == 2 && k.exit_code == -9);
	CHECK(!strcmp(k.reason, j.reason) && !strcmp(k.spec.name, "keep"));
	CHECK(k.submitted > 1700000000.4 && k.submitted < 1700000000.6);
}

int main(void)
{
	if (tmp_root_make())
		return 1;
	RUN(job_record_round_trips);
	tmp_root_remove();
	return CHECK_EXIT();
}
