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

static const struct dlh_tools tools = { "/opt/dlh-train", "" };

/* A pool of one node, n1, with cpus cores and gpus GPUs of one type. */
static struct dlh_pool one_node(int cpus, int gpus)
{
	struct dlh_pool p;
	memset(&p, 0, sizeof p);
	p.node = (struct dlh_node){ "n1", cpus, 0, "", gpus };
	p.ntypes = gpus ? 2 : 1;
	snprintf(p.type[0].name, sizeof p.type[0].name, "cpu");
	snprintf(p.type[1].name, sizeof p.type[1].name, "G");
	p.type[1].gpu = 1;
	p.nnodes = 1;
	snprintf(p.nodes[0].name, sizeof p.nodes[0].name, "n1");
	snprintf(p.nodes[0].host, sizeof p.nodes[0].host, "n1");
	p.nodes[0].cpus = p.nodes[0].devices[0] = cpus;
	p.nodes[0].devices[1] = gpus;
	return p;
}

/* Whatever the schema accepts, dlh-train accepts: every good spec of the
 * corpus (tests/spec/good) plans to an argv that the trainer's own option
 * parser reads (the planner refuses it otherwise, with the trainer's words). */
TEST(plan_argv_of_every_good_spec_is_one_the_trainer_accepts)
{
	struct dlh_pool pool = one_node(64, 8);
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
	struct dlh_pool pool = one_node(4, 0);
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
	struct dlh_pool pool = one_node(3, 0);
	struct dlh_spec s = parsed("[train]\nbatch_size = 64\n");
	CHECK(s.ranks == 0);
	CHECK(dlh_plan_slots(&s, &pool) == 3);
	s.batch_size = 2;
	CHECK(dlh_plan_slots(&s, &pool) == 2);
}

TEST(plan_refuses_more_ranks_than_slots_and_missing_gpus)
{
	struct dlh_pool pool = one_node(2, 0);
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
	struct dlh_pool pool = one_node(16, 2);
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
	CHECK(dlh_plan_format(p, &pool, &out) == 0);
	CHECK_MSG(strstr(out.data, "rank 1 host n1 device gpu1 batch 32 env CUDA_VISIBLE_DEVICES=1\n"), "plan: %s", out.data);
	free(out.data);
	s = parsed("[resources]\nranks = 3\ndevice = gpu\n");
	CHECK(dlh_plan_make_with(&s, NULL, &pool, &tools, "/d", p, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "3 ranks need 3 GPUs (one each), the pool has 2"), "err: %s", err);
	s = parsed("[resources]\nranks = 2\n");
	CHECK(dlh_plan_make_with(&s, NULL, &pool, &tools, "/d", p, err, sizeof err) == 0);
	CHECK_MSG(argv_index(p, "--device") < 0, "a cpu plan passes --device");
	free(p);
}

TEST(plan_passes_precision_to_the_trainer_when_not_fp32)
{
	struct dlh_pool pool = one_node(4, 2);
	struct dlh_plan *p = malloc(sizeof *p);
	char err[256];
	const char *word[] = { "tf32", "bf16" };
	for (int i = 0; i < 2; i++) {
		char text[128];
		snprintf(text, sizeof text, "[train]\nprecision = %s\n[resources]\ndevice = gpu\n", word[i]);
		struct dlh_spec s = parsed(text);
		CHECK_MSG(dlh_plan_make_with(&s, NULL, &pool, &tools, "/d", p, err, sizeof err) == 0,
			  "%s", err);
		int at = argv_index(p, "--precision");
		CHECK_MSG(at > 0 && !strcmp(p->argv[at + 1], word[i]), "%s: --precision at %d", word[i], at);
	}
	struct dlh_spec s = parsed("[resources]\ndevice = gpu\n");   /* fp32: the trainer's default */
	CHECK(dlh_plan_make_with(&s, NULL, &pool, &tools, "/d", p, err, sizeof err) == 0);
	CHECK_MSG(argv_index(p, "--precision") < 0, "an fp32 plan passes --precision");
	free(p);
}

TEST(plan_unequal_cpu_batches_are_rebalanced_unless_the_spec_says_not)
{
	struct dlh_pool pool = one_node(2, 2);
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
	CHECK(dlh_plan_format(p, &pool, &out) == 0);
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
	struct dlh_pool pool = one_node(2, 0);
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
	struct dlh_pool pool = one_node(2, 0);
	struct dlh_spec s = parsed("[job]\ncommand = /bin/echo a;b  $(x)\n[resources]\nranks = 1\n");
	struct dlh_plan *p = malloc(sizeof *p);
	char err[256];
	CHECK(dlh_plan_make_with(&s, NULL, &pool, &tools, "/d", p, err, sizeof err) == 0);
	CHECK(!strcmp(p->argv[p->argc - 3], "/bin/echo"));
	CHECK(!strcmp(p->argv[p->argc - 2], "a;b"));
	CHECK(!strcmp(p->argv[p->argc - 1], "$(x)"));
	free(p);
}

/* A command's plan (jobs/<id>/plan) says its ranks and where they run; the
 * global batch, lr and per-rank batches are dlh-train's, not the
 * program's, and are left out. */
TEST(plan_of_a_command_has_no_batch_nor_lr)
{
	struct dlh_pool pool = one_node(4, 2);
	struct dlh_spec s = parsed("[job]\ncommand = /bin/true\n[resources]\nranks = 2\n");
	struct dlh_plan *p = malloc(sizeof *p);
	struct dlh_buf out = { 0 };
	char err[256];
	CHECK_MSG(dlh_plan_make_with(&s, NULL, &pool, &tools, "/d", p, err, sizeof err) == 0, "%s", err);
	CHECK(p->ranks == 2 && !p->trainer && p->lr == 0.0 && p->batch[0] == 0 && p->batch[1] == 0);
	CHECK(dlh_plan_format(p, &pool, &out) == 0);
	CHECK_MSG(!strncmp(out.data, "ranks 2\nmemory none\nrank 0 host n1 device cpu (a free slot at launch)\n"
			   "rank 1 host n1 device cpu (a free slot at launch)\n", 200), "plan: %s", out.data);
	CHECK_MSG(!strstr(out.data, "batch") && !strstr(out.data, "lr "), "plan: %s", out.data);
	free(out.data);
	out = (struct dlh_buf){ 0 };
	s = parsed("[job]\ncommand = /bin/true\n[resources]\ndevice = gpu\n");
	CHECK(s.ranks == 1);
	CHECK_MSG(dlh_plan_make_with(&s, NULL, &pool, &tools, "/d", p, err, sizeof err) == 0, "%s", err);
	CHECK(dlh_plan_format(p, &pool, &out) == 0);
	CHECK_MSG(strstr(out.data, "\nrank 0 host n1 device gpu0 env CUDA_VISIBLE_DEVICES=0\n") &&
		  !strstr(out.data, "rank 1 "), "plan: %s", out.data);
	free(out.data);
	free(p);
}

/* A command whose spec gives [train] batch_size and lr is handed them
 * (DLH_GLOBAL_BATCH, DLH_BATCH, DLH_LR): split equally, with scale_batch
 * scaled by the ranks, and the plan shows them; auto ranks are no more
 * than a fixed global batch. */
TEST(plan_of_a_command_hands_on_its_batch_and_lr)
{
	struct dlh_pool pool = one_node(8, 0);
	struct dlh_plan *p = malloc(sizeof *p);
	struct dlh_buf out = { 0 };
	char err[256];
	struct dlh_spec s = parsed("[job]\ncommand = /bin/true\n[train]\nbatch_size = 10\nlr = 0.1\n"
				   "[resources]\nranks = 3\n");
	CHECK(s.batch_size == 10 && s.lr == 0.1);
	CHECK_MSG(dlh_plan_make_with(&s, NULL, &pool, &tools, "/d", p, err, sizeof err) == 0, "%s", err);
	CHECK(!p->trainer && p->batch[0] == 4 && p->batch[1] == 3 && p->batch[2] == 3 && p->lr == 0.1);
	CHECK(dlh_plan_format(p, &pool, &out) == 0);
	static const char want[] = "ranks 3\nglobal_batch 10 (DLH_GLOBAL_BATCH; each rank's DLH_BATCH "
				   "below)\nlr 0.1 (DLH_LR)\nmemory none\nrank 0 host n1 device cpu (a free "
				   "slot at launch) batch 4\n";
	CHECK_MSG(!strncmp(out.data, want, sizeof want - 1), "plan: %s", out.data);
	free(out.data);
	out = (struct dlh_buf){ 0 };
	/* scale_batch: one device's, times the ranks */
	s = parsed("[job]\ncommand = /bin/true\n[train]\nbatch_size = 32\nlr = 0.05\nscale_batch = true\n"
		   "[resources]\nranks = 4\n");
	CHECK_MSG(dlh_plan_make_with(&s, NULL, &pool, &tools, "/d", p, err, sizeof err) == 0, "%s", err);
	CHECK(p->batch[0] == 32 && p->batch[3] == 32 && p->lr == 0.2);
	/* only a rate: no batch */
	s = parsed("[job]\ncommand = /bin/true\n[train]\nlr = 0.05\nscale_batch = true\n"
		   "[resources]\nranks = 2\n");
	CHECK_MSG(dlh_plan_make_with(&s, NULL, &pool, &tools, "/d", p, err, sizeof err) == 0, "%s", err);
	CHECK(p->batch[0] == 0 && p->lr == 0.1);
	CHECK(dlh_plan_format(p, &pool, &out) == 0);
	CHECK_MSG(!strstr(out.data, "batch") && strstr(out.data, "lr 0.1 (DLH_LR)\n"), "plan: %s", out.data);
	free(out.data);
	/* ranks = auto: no more ranks than samples in the global batch */
	s = parsed("[job]\ncommand = /bin/true\n[train]\nbatch_size = 5\n[resources]\nranks = auto\n");
	CHECK(dlh_plan_slots(&s, &pool) == 5);
	s = parsed("[job]\ncommand = /bin/true\n[train]\nbatch_size = 5\nscale_batch = true\n"
		   "[resources]\nranks = auto\n");
	CHECK(dlh_plan_slots(&s, &pool) == 8);
	free(p);
}

/* Placed on devices of different speeds, a command's global batch is split
 * again in proportion to them; unknown speeds, or all alike, leave it equal;
 * the trainer's batches (the planner's) are never touched. */
TEST(plan_command_batch_split_by_placed_device_speed)
{
	static struct dlh_pool pool;
	struct dlh_plan *p = malloc(sizeof *p);
	char err[256];
	pool = one_node(2, 0);
	pool.ntypes = 2;   /* type 1: a CPU twice as fast, on n2 */
	snprintf(pool.type[1].name, sizeof pool.type[1].name, "fast");
	pool.type[1].gpu = 0;
	snprintf(pool.nodes[1].name, sizeof pool.nodes[1].name, "n2");
	snprintf(pool.nodes[1].host, sizeof pool.nodes[1].host, "h2");
	pool.nodes[1].cpus = pool.nodes[1].devices[1] = 2;
	pool.nodes[1].cpu_type = 1;
	pool.nnodes = 2;
	struct dlh_spec s = parsed("[job]\ncommand = /bin/true\n[train]\nbatch_size = 90\n"
				   "[resources]\nranks = 3\n");
	CHECK_MSG(dlh_plan_make_with(&s, NULL, &pool, &tools, "/d", p, err, sizeof err) == 0, "%s", err);
	int avail[2] = { 1, 2 };
	CHECK(dlh_plan_place(p, &pool, avail, 0, err, sizeof err) == 0);
	int fast = p->node[0] == 1 ? 0 : 2;   /* n2's two ranks, wherever placed */
	double speed[2] = { 1e9, 2e9 };
	CHECK(dlh_plan_split_placed(p, &pool, speed) == 1);
	CHECK_MSG(p->batch[fast] == 36 && p->batch[fast == 0 ? 1 : 1] == 36 &&
		  p->batch[fast == 0 ? 2 : 0] == 18, "batches %d %d %d", p->batch[0], p->batch[1],
		  p->batch[2]);
	/* a speed unknown: equal stays */
	CHECK(dlh_plan_make_with(&s, NULL, &pool, &tools, "/d", p, err, sizeof err) == 0);
	CHECK(dlh_plan_place(p, &pool, avail, 0, err, sizeof err) == 0);
	double half[2] = { 1e9, 0.0 };
	CHECK(dlh_plan_split_placed(p, &pool, half) == 0 && p->batch[0] == 30 && p->batch[2] == 30);
	/* the trainer's are the planner's */
	s = parsed("[train]\nbatch_size = 90\n[resources]\nranks = 3\n");
	CHECK(dlh_plan_make_with(&s, NULL, &pool, &tools, "/d", p, err, sizeof err) == 0);
	CHECK(dlh_plan_place(p, &pool, avail, 0, err, sizeof err) == 0);
	CHECK(dlh_plan_split_placed(p, &pool, speed) == 0 && p->batch[0] == 30);
	free(p);
}

/* A command's ranks = auto is every slot (every GPU) of the pool: a
 * program's batch is its own, the trainer's batch_size does not cap it. */
TEST(plan_auto_ranks_of_a_command_take_every_slot)
{
	struct dlh_pool pool = one_node(100, 3);
	struct dlh_spec s = parsed("[job]\ncommand = /bin/true\n[resources]\nranks = auto\n");
	CHECK(s.ranks == 0 && s.command[0]);
	CHECK(dlh_plan_slots(&s, &pool) == 100);
	s = parsed("[job]\ncommand = /bin/true\n[resources]\nranks = auto\ndevice = gpu\n");
	CHECK(dlh_plan_slots(&s, &pool) == 3);
	s = parsed("[job]\ncommand = /bin/true\n");
	CHECK(dlh_plan_slots(&s, &pool) == 1);
	s = parsed("[job]\nname = t\n");   /* the trainer: no more than its batch_size */
	CHECK(dlh_plan_slots(&s, &pool) == 64);
}


/* Placement across nodes: ranks of a node are consecutive, the local node
 * first; [resources] nodes spreads them evenly; a GPU plan gives each rank
 * its node's GPU by --gpus (CUDA_VISIBLE_DEVICES in the plan). */
TEST(plan_places_ranks_across_nodes)
{
	static struct dlh_pool pool;
	struct dlh_plan *p = malloc(sizeof *p);
	struct dlh_buf out = { 0 };
	char err[512];
	pool = one_node(2, 0);
	for (int k = 1; k < 4; k++) {   /* n2..n4: 4 cores and 2 GPUs each */
		snprintf(pool.nodes[k].name, sizeof pool.nodes[k].name, "n%d", k + 1);
		snprintf(pool.nodes[k].host, sizeof pool.nodes[k].host, "h%d", k + 1);
		pool.nodes[k].cpus = pool.nodes[k].devices[0] = 4;
		pool.nodes[k].devices[1] = 2;
	}
	pool.nnodes = 4;
	pool.ntypes = 2;
	int avail[4] = { 2, 4, 4, 4 };
	struct dlh_spec s = parsed("[resources]\nranks = 6\nnodes = 3\n");
	CHECK_MSG(dlh_plan_make_with(&s, NULL, &pool, &tools, "/d", p, err, sizeof err) == 0, "%s", err);
	CHECK(dlh_plan_place(p, &pool, avail, 3, err, sizeof err) == 0);
	/* the nodes with the most room (n2..n4, not the local node's 2) */
	CHECK_MSG(p->node[0] == 1 && p->node[1] == 1 && p->node[2] == 2 && p->node[3] == 2 &&
		  p->node[4] == 3 && p->node[5] == 3, "nodes %d %d %d %d %d %d", p->node[0], p->node[1],
		  p->node[2], p->node[3], p->node[4], p->node[5]);
	int node[4], count[4];
	CHECK(dlh_plan_nodes(p, node, count, 4) == 3 && count[0] == 2 && count[2] == 2);
	/* with equal room the local node is among the chosen, and first */
	avail[0] = 4;
	CHECK(dlh_plan_place(p, &pool, avail, 3, err, sizeof err) == 0);
	CHECK(p->node[0] == 0 && p->node[2] == 1 && p->node[4] == 2);
	avail[0] = 2;
	/* fewest nodes: 6 ranks do not fit the local node's 2: the roomiest nodes, filled */
	CHECK(dlh_plan_place(p, &pool, avail, 0, err, sizeof err) == 0);
	CHECK(dlh_plan_nodes(p, node, count, 4) == 2 && node[0] == 1 && count[0] == 4 && count[1] == 2);
	/* 4 nodes with room for 2 each cannot hold 3 ranks on one node */
	avail[1] = avail[2] = avail[3] = 1;
	CHECK(dlh_plan_place(p, &pool, avail, 2, err, sizeof err) == -EAGAIN);
	CHECK_MSG(strstr(err, "has room for 2, not 3") || strstr(err, "has room for 1, not 3"), "%s", err);
	/* GPUs: two per node, each rank its own */
	s = parsed("[resources]\nranks = 4\nnodes = 2\ndevice = gpu\n");
	int gavail[4] = { 0, 2, 2, 2 };
	CHECK_MSG(dlh_plan_make_with(&s, NULL, &pool, &tools, "/d", p, err, sizeof err) == 0, "%s", err);
	CHECK(dlh_plan_place(p, &pool, gavail, 2, err, sizeof err) == 0);
	for (int r = 0; r < 4; r++)
		p->slot[r] = r % 2;
	CHECK(dlh_plan_pin(p) == 0);
	int g = argv_index(p, "--gpus");
	CHECK(g > 0 && !strcmp(p->argv[g + 1], "0,1,0,1"));
	CHECK(dlh_plan_format(p, &pool, &out) == 0);
	CHECK_MSG(strstr(out.data, "rank 2 host h3 device gpu0 batch 16 env CUDA_VISIBLE_DEVICES=0\n"),
		  "plan: %s", out.data);
	free(out.data);
	free(p);
}

int main(void)
{
	RUN(plan_splits_batch_with_remainder_first);
	RUN(plan_argv_of_every_good_spec_is_one_the_trainer_accepts);
	RUN(plan_auto_ranks_take_every_slot);
	RUN(plan_refuses_more_ranks_than_slots_and_missing_gpus);
	RUN(plan_gpu_takes_one_rank_per_gpu_and_passes_device);
	RUN(plan_passes_precision_to_the_trainer_when_not_fp32);
	RUN(plan_unequal_cpu_batches_are_rebalanced_unless_the_spec_says_not);
	RUN(plan_argv_is_exact_words_without_a_shell);
	RUN(plan_user_command_is_split_on_blanks_only);
	RUN(plan_of_a_command_has_no_batch_nor_lr);
	RUN(plan_of_a_command_hands_on_its_batch_and_lr);
	RUN(plan_command_batch_split_by_placed_device_speed);
	RUN(plan_auto_ranks_of_a_command_take_every_slot);
	RUN(plan_places_ranks_across_nodes);
	return CHECK_EXIT();
}
