/* test_jobs.c - one job's record on disk (engine/table/job.c): save and load */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
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

/* A [job] command's job as an older dlhfs stored it: its spec.ini lists
 * the built-in trainer's keys at their defaults (and deadline), as the
 * normalized spec then did. It loads at mount, without them; and its
 * record's plan, ranks without batches, loads too. */
TEST(older_command_job_loads_without_the_trainers_keys)
{
	char dir[512], path[600];
	fresh_dir(dir, sizeof dir, "job-command");
	struct dlh_job j = { 0 }, k;
	j.id = 7;
	j.status = DLH_QUEUED;
	j.plan_ranks = 2;   /* a command's: ranks, batches 0 */
	snprintf(path, sizeof path, "%s/spec.ini", dir);
	write_text(path, "[job]\nname =\ncommand = python3 /opt/train.py\nsteps = 0\nrestart = never\n"
		   "max_restarts = 3\npriority = 0\npreemptible = true\ntime_limit = 0\n"
		   "time_limit_grace = 0\nhang_timeout = 0\ndeadline = 0\ndry_run = false\n"
		   "readable_by = owner\n\n[data]\n"
		   "train = /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz\n"
		   "format = idx\ntrain_limit = 0\ntest_limit = 0\n\n"
		   "[model]\ntype = mlp\nlayers = 256, 128, 100\ndropout = 0\n\n"
		   "[train]\nepochs = 10\nbatch_size = 64\nlr = 0.01\noptimizer = sgd\nmomentum = 0.9\n"
		   "seed = 1\ncheckpoint_every = 500\n\n"
		   "[resources]\nranks = auto\nnodes = auto\ndevice = cpu\nmemory = 0\ndisk = 0\n");
	CHECK(dlh_job_save(&j, dir) == 0);
	CHECK(dlh_job_load(&k, dir) == 0);
	CHECK(k.id == 7 && !strcmp(k.spec.command, "python3 /opt/train.py"));
	CHECK(k.spec.ranks == 0);   /* auto, as it was planned */
	CHECK_MSG(k.plan_ranks == 2 && k.plan_batch[0] == 0 && k.plan_batch[1] == 0,
		  "plan_ranks %d", k.plan_ranks);
	/* submitted now, the same text is refused */
	char *text = NULL;
	size_t len;
	char err[DLH_ERR_MAX];
	struct dlh_spec s;
	CHECK(dlh_read_file(path, 1 << 20, &text, &len) == 0);
	CHECK(dlh_spec_parse(text, len, &s, err, sizeof err) == -EINVAL);
	free(text);
}

int main(void)
{
	if (tmp_root_make())
		return 1;
	RUN(job_record_round_trips);
	RUN(older_command_job_loads_without_the_trainers_keys);
	tmp_root_remove();
	return CHECK_EXIT();
}
