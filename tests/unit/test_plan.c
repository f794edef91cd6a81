/* test_plan.c - placing a job (engine/plan/plan.c): ranks, batch per rank, GPUs,
 * rebalancing, the exact argv of the program each rank runs (the launcher
 * around it is the backend's: test_backend.c) */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/plan/plan.h"
#include "tests/unit/check.h"

static struct dlh_spec parsed(const char *text)
{
	struct dlh_spec s;
	char err[DLH_ERR_MAX];
	if (dlh_spec_parse(text, strlen(text), &s, err, sizeof err))
		dlh_spec_defaults(&s);
	return s;
}

/* The index of the last argv word of p equal to word, or -1. */
static int argv_index(const struct dlh_plan *p, const char *word)
{
	int at = -1;
	for (int i = 0; i < p->argc; i++)
		if (!strcmp(p->argv[i], word))
			at = i;
	return at;
}

static const struct dlh_tools tools = { "/opt/dlh-train" };

/* Whatever the schema accepts, dlh-train accepts: every good spec of the
 * corpus (tests/spec/good) plans to an argv that the trainer's own option
 * parser reads (the planner refuses it otherwise, with the trainer's words). */
TEST(plan_argv_of_every_good_spec_is_one_the_trainer_accepts)
{
	struct dlh_pool pool = { .node = { "n1", 64, 0, "", 8 } };
	struct dlh_plan *p = malloc(sizeof *p);
	char path[1024], err[1024];
	int n = 0, planned = 0;
	DIR *d = opendir("tests/spec/good");
	CHECK(d != NULL);
	for (struct dirent *de; d && (de = readdir(d));) {
		size_t l = strlen(de->d_name);
		char *text = NULL;
		size_t len;
		struct dlh_spec s;
		if (l <= 4 || strcmp(de->d_name + l - 4, ".ini"))
			continue;
		snprintf(path, sizeof path, "tests/spec/good/%s", de->d_name);
		CHECK(dlh_read_file(path, 1 << 20, &text, &len) == 0);
		n++;
		if (text && !dlh_spec_parse(text, len, &s, err, sizeof err)) {
			int rc = dlh_plan_make_with(&s, NULL, &pool, &tools, "/d", p, err, sizeof err);
			planned += rc == 0;
			CHECK_MSG(rc == 0 || !strstr(err, "dlh-train refuses"), "%s: %s", path, err);
		}
		free(text);
	}
	if (d)
		closedir(d);
	CHECK_MSG(n >= 10 && planned >= n / 2, "%d good specs, %d planned", n, planned);
	/* the schema's "no dense layers" for a CNN */
	struct dlh_spec s = parsed("[model]\ntype = cnn\ndense =\n");
	CHECK(s.ndense == 0);
	CHECK_MSG(dlh_plan_make_with(&s, NULL, &pool, &tools, "/d", p, err, sizeof err) == 0, "%s", err);
	free(p);
}

TEST(plan_splits_batch_with_remainder_first)
{
	struct dlh_pool pool = { .node = { "n1", 4, 0, "", 0 } };
	struct dlh_spec s = parsed("[train]\nbatch_size = 10\n[resources]\nranks = 4\n");
	struct dlh_plan *p = malloc(sizeof *p);
	char err[256];
	CHECK(dlh_plan_make_with(&s, NULL, &pool, &tools, "/st/jobs/1", p, err, sizeof err) == 0);
	CHECK_MSG(p->ranks == 4 && p->batch[0] == 3 && p->batch[1] == 3 && p->batch[2] == 2 &&
		  p->batch[3] == 2, "batches %d %d %d %d", p->batch[0], p->batch[1], p->batch[2], p->batch[3]);
	free(p);
}

TEST(plan_auto_ranks_take_every_slot)
{
	struct dlh_pool pool = { .node = { "n1", 3, 0, "", 0 } };
	struct dlh_spec s = parsed("[train]\nbatch_size = 64\n");
	CHECK(s.ranks == 0);
	CHECK(dlh_plan_slots(&s, &pool) == 3);
	s.batch_size = 2;
	CHECK(dlh_plan_slots(&s, &pool) == 2);
}

TEST(plan_refuses_more_ranks_than_slots_and_missing_gpus)
{
	struct dlh_pool pool = { .node = { "n1", 2, 0, "", 0 } };
	struct dlh_plan *p = malloc(sizeof *p);
	char err[256];
	struct dlh_spec s = parsed("[resources]\nranks = 3\n");
	CHECK(dlh_plan_make_with(&s, NULL, &pool, &tools, "/d", p, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "3 ranks need 3 cpu slots, the pool has 2"), "err: %s", err);
	s = parsed("[resources]\nranks = 1\ndevice = gpu\n");
	CHECK(dlh_plan_make_with(&s, NULL, &pool, &tools, "/d", p, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "no GPU"), "err: %s", err);
	free(p);
}

TEST(plan_gpu_takes_one_rank_per_gpu_and_passes_device)
{
	struct dlh_pool pool = { .node = { "n1", 16, 0, "", 2 } };
	struct dlh_spec s = parsed("[resources]\ndevice = gpu\n");
	struct dlh_plan *p = malloc(sizeof *p);
	struct dlh_buf out = { 0 };
	char err[256];
	int dev;
	CHECK(dlh_plan_slots(&s, &pool) == 2);
	CHECK_MSG(dlh_plan_make_with(&s, NULL, &pool, &tools, "/d", p, err, sizeof err) == 0, "%s", err);
	CHECK(p->ranks == 2 && p->gpu == 1);
	dev = argv_index(p, "--device");
	CHECK(dev > 0 && !strcmp(p->argv[dev + 1], "gpu"));
	CHECK(dlh_plan_format(p, &out) == 0);
	CHECK_MSG(strstr(out.data, "rank 1 host n1 device gpu1 batch 32\n"), "plan: %s", out.data);
	free(out.data);
	s = parsed("[resources]\nranks = 3\ndevice = gpu\n");
	CHECK(dlh_plan_make_with(&s, NULL, &pool, &tools, "/d", p, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "3 ranks need 3 GPUs (one each), the pool has 2"), "err: %s", err);
	s = parsed("[resources]\nranks = 2\n");
	CHECK(dlh_plan_make_with(&s, NULL, &pool, &tools, "/d", p, err, sizeof err) == 0);
	CHECK_MSG(argv_index(p, "--device") < 0, "a cpu plan passes --device");
	free(p);
}

TEST(plan_unequal_cpu_batches_are_rebalanced_unless_the_spec_says_not)
{
	struct dlh_pool pool = { .node = { "n1", 2, 0, "", 2 } };
	struct dlh_spec s = parsed("[train]\nbatch_size = 64\n");
	struct dlh_plan *p = malloc(sizeof *p);
	struct dlh_buf out = { 0 };
	const int split[2] = { 48, 16 }, even[2] = { 32, 32 };
	struct dlh_plan_override ov = { .ranks = 2, .batch = split, .lr = 0.01 };
	char err[256];
	int at;
	CHECK_MSG(dlh_plan_make_with(&s, &ov, &pool, &tools, "/d", p, err, sizeof err) == 0, "%s", err);
	at = argv_index(p, "--rebalance");
	CHECK_MSG(at > 0 && p->rebalance == DLH_REBALANCE_STEPS && atoi(p->argv[at + 1]) == DLH_REBALANCE_STEPS,
		  "--rebalance at %d", at);
	CHECK(argv_index(p, "48,16") > 0);
	CHECK(dlh_plan_format(p, &out) == 0);
	CHECK_MSG(strstr(out.data, "\nrebalance every 20 steps ("), "plan: %s", out.data);
	free(out.data);
	ov.batch = even;   /* one speed: nothing to correct */
	CHECK(dlh_plan_make_with(&s, &ov, &pool, &tools, "/d", p, err, sizeof err) == 0);
	CHECK(argv_index(p, "--rebalance") < 0 && p->rebalance == 0);
	s = parsed("[train]\nbatch_size = 64\nrebalance = false\n");
	ov.batch = split;
	CHECK(dlh_plan_make_with(&s, &ov, &pool, &tools, "/d", p, err, sizeof err) == 0);
	CHECK(argv_index(p, "--rebalance") < 0 && argv_index(p, "48,16") > 0);
	s = parsed("[train]\nbatch_size = 64\n[resources]\ndevice = gpu\n");
	CHECK_MSG(dlh_plan_make_with(&s, &ov, &pool, &tools, "/d", p, err, sizeof err) == 0, "%s", err);
	CHECK_MSG(argv_index(p, "--rebalance") < 0, "GPU ranks are not rebalanced");
	free(p);
}

TEST(plan_argv_is_exact_words_without_a_shell)
{
	struct dlh_pool pool = { .node = { "n1", 2, 0, "", 0 } };
	struct dlh_spec s = parsed("[resources]\nranks = 2\n[train]\nlr = 0.1\n");
	struct dlh_plan *p = malloc(sizeof *p);
	char err[256];
	CHECK(dlh_plan_make_with(&s, NULL, &pool, &tools, "/st/jobs/1", p, err, sizeof err) == 0);
	CHECK(p->ranks == 2);
	int at = argv_index(p, "/opt/dlh-train");
	CHECK(at == 0 && !strcmp(p->argv[at + 1], "--job-dir") && !strcmp(p->argv[at + 2], "/st/jobs/1"));
	int lr = argv_index(p, "--lr");
	CHECK_MSG(lr > 0 && !strcmp(p->argv[lr + 1], "0.1"), "lr printed as %s", p->argv[lr + 1]);
	CHECK(p->argv[p->argc] == NULL);
	free(p);
}

TEST(plan_user_command_is_split_on_blanks_only)
{
	struct dlh_pool pool = { .node = { "n1", 2, 0, "", 0 } };
	struct dlh_spec s = parsed("[job]\ncommand = /bin/echo a;b  $(x)\n[resources]\nranks = 1\n");
	struct dlh_plan *p = malloc(sizeof *p);
	char err[256];
	CHECK(dlh_plan_make_with(&s, NULL, &pool, &tools, "/d", p, err, sizeof err) == 0);
	CHECK(!strcmp(p->argv[p->argc - 3], "/bin/echo"));
	CHECK(!strcmp(p->argv[p->argc - 2], "a;b"));
	CHECK(!strcmp(p->argv[p->argc - 1], "$(x)"));
	free(p);
}

int main(void)
{
	RUN(plan_splits_batch_with_remainder_first);
	RUN(plan_argv_of_every_good_spec_is_one_the_trainer_accepts);
	RUN(plan_auto_ranks_take_every_slot);
	RUN(plan_refuses_more_ranks_than_slots_and_missing_gpus);
	RUN(plan_gpu_takes_one_rank_per_gpu_and_passes_device);
	RUN(plan_unequal_cpu_batches_are_rebalanced_unless_the_spec_says_not);
	RUN(plan_argv_is_exact_words_without_a_shell);
	RUN(plan_user_command_is_split_on_blanks_only);
	return CHECK_EXIT();
}
