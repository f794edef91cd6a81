/* test_pool.c - the pool file (good files, each kind of bad file with its
 * line), detection of the local machine (NVML absent, present as a fake),
 * and the planner's view of what is free */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/pool/nvml.h"
#include "engine/pool/pool.h"
#include "tests/unit/check.h"

/* Two nodes, two types: the pool of the README's example. */
static const char two_nodes[] =
	"; a GPU node and a CPU node\n"
	"[type cpu]            ; one core\n"
	"flops = 90G\n"
	"memory = 12G\n"
	"bandwidth = 20G\n"
	"watts_idle = 3\n"
	"watts_busy = 12\n"
	"\n"
	"[type H100]\n"
	"flops = 67T\n"
	"memory = 80G\n"
	"bandwidth = 3.35T\n"
	"watts_idle = 70\n"
	"watts_busy = 700\n"
	"gpu = true\n"
	"\n"
	"[node gpu01]\n"
	"host = gpu01.example\n"
	"cpus = 32\n"
	"memory = 512G\n"
	"gpus = H100:8\n"
	"\n"
	"[node cpu01]\n"
	"cpus = 64\n"
	"memory = 256G\n";

static struct dlh_pool pool;   /* large: not on the stack */
static char err[8192];

static int parse(const char *text, const char *host)
{
	return dlh_pool_parse(&pool, text, strlen(text), "pool.ini", host, 0, err, sizeof err);
}

/* 1 when err holds exactly want (a line or lines). */
static int err_is(const char *want)
{
	return !strcmp(err, want);
}

TEST(good_file_gives_types_nodes_and_devices)
{
	CHECK_MSG(parse(two_nodes, "cpu01") == 0, "%s", err);
	CHECK(pool.ntypes == 2 && pool.nnodes == 2);
	const struct dlh_pool_type *h = &pool.type[1];
	CHECK(!strcmp(h->name, "H100") && h->gpu == 1);
	CHECK(h->flops == 67e12 && h->bandwidth == 3.35e12);
	CHECK(h->mem_bytes == 80LL << 30);
	CHECK(h->watts_idle == 70 && h->watts_busy == 700);
	CHECK(pool.type[0].flops == 90e9 && pool.type[0].mem_bytes == 12LL << 30 && !pool.type[0].gpu);
	const struct dlh_pool_node *g = &pool.nodes[0];
	CHECK(!strcmp(g->name, "gpu01") && !strcmp(g->host, "gpu01.example"));
	CHECK(g->cpus == 32 && g->mem_bytes == 512LL << 30);
	CHECK(g->cpu_type == 0 && g->devices[0] == 32 && g->devices[1] == 8);
	CHECK(!strcmp(pool.nodes[1].host, "cpu01") && pool.nodes[1].devices[1] == 0);
	CHECK(!strcmp(pool.source, "pool.ini"));
}

TEST(local_node_is_the_one_with_this_hostname)
{
	CHECK_MSG(parse(two_nodes, "cpu01") == 0, "%s", err);
	CHECK(pool.local == 1);
	CHECK(!strcmp(pool.node.host, "cpu01") && pool.node.cpus == 64 && pool.node.gpus == 0);
	CHECK(pool.node.mem_bytes == 256LL << 30);
	/* a short hostname matches the node's full one */
	CHECK_MSG(parse(two_nodes, "gpu01") == 0, "%s", err);
	CHECK(pool.local == 0 && pool.node.cpus == 32 && pool.node.gpus == 8);
}

TEST(no_node_is_local_when_none_is_this_machine)
{
	/* a head node outside the pool: it runs the launcher, no rank, and
	 * pool.node is this machine, not a node of the file */
	char self[256] = "";
	gethostname(self, sizeof self - 1);
	CHECK_MSG(parse(two_nodes, "elsewhere") == 0, "%s", err);
	CHECK_MSG(pool.local == -1 && !strcmp(pool.node.host, self), "local %d host %s", pool.local,
		  pool.node.host);
	CHECK(pool.node.cpus == (int)sysconf(_SC_NPROCESSORS_ONLN) && pool.node.gpus == 0);
}

TEST(a_node_whose_host_is_an_address_of_this_machine_is_local)
{
	const char text[] = "[node far]\nhost = 10.99.99.99\ncpus = 4\n"
			    "[node me]\nhost = 127.0.0.1\ncpus = 2\n";
	CHECK_MSG(parse(text, "elsewhere") == 0, "%s", err);
	CHECK_MSG(pool.local == 1, "local %d", pool.local);
	CHECK(dlh_pool_host_is_self("localhost", "elsewhere"));
	CHECK(dlh_pool_host_is_self("elsewhere.example.org", "elsewhere"));
	CHECK(dlh_pool_host_is_self("elsewhere", "elsewhere.example.org"));
	CHECK(!dlh_pool_host_is_self("elsewhere2", "elsewhere"));
	CHECK(!dlh_pool_host_is_self("10.99.99.99", "elsewhere"));
	CHECK(!dlh_pool_host_is_self("", "elsewhere"));
}

TEST(env_section_gives_every_jobs_variables)
{
	const char text[] = "[node a]\ncpus = 1\n[env]\nGLOO_SOCKET_IFNAME = eth1\nNCCL_DEBUG = WARN ; a comment\n";
	CHECK_MSG(parse(text, "a") == 0, "%s", err);
	CHECK_MSG(!strcmp(pool.env, "GLOO_SOCKET_IFNAME=eth1\nNCCL_DEBUG=WARN\n"), "env: %s", pool.env);
	const char bad[] = "[node a]\ncpus = 1\n[env]\nMASTER_PORT = 1\n[env x]\n";
	CHECK(parse(bad, "a") == -EINVAL);
	CHECK_MSG(strstr(err, "pool.ini:4: [env] MASTER_PORT: MASTER_PORT is set by dlhfs or Open MPI"), "%s", err);
	CHECK_MSG(strstr(err, "pool.ini:5: [env x]: unknown section"), "%s", err);
}

/* A reload: nodes matched by name, new ones appended, removed ones gone
 * (or leaving while busy), a node back after removal revived at its index. */
TEST(merge_adds_updates_and_removes_nodes_by_name)
{
	static struct dlh_pool next;
	enum dlh_pool_change change[DLH_POOL_NODES];
	int busy[DLH_POOL_NODES] = { 1, 0 };   /* gpu01 holds a job */
	CHECK_MSG(parse(two_nodes, "cpu01") == 0, "%s", err);
	pool.nodes[1].drained = 1;             /* runtime state stays */
	pool.nodes[0].probe = DLH_PROBE_UP;
	const char two[] = "[type H100]\ngpu = true\n[type A100]\ngpu = true\n"
			   "[node cpu01]\ncpus = 64\nmemory = 256G\n[node cpu02]\ncpus = 8\ngpus = A100:2\n";
	CHECK_MSG(dlh_pool_parse(&next, two, strlen(two), "pool.ini", "cpu01", 0, err, sizeof err) == 0,
		  "%s", err);
	CHECK(dlh_pool_merge(&pool, &next, busy, change, err, sizeof err) == 0);
	CHECK(pool.nnodes == 3 && pool.local == 1);
	CHECK_MSG(change[0] == DLH_NODE_LEAVING && change[1] == DLH_NODE_SAME && change[2] == DLH_NODE_NEW,
		  "%d %d %d", change[0], change[1], change[2]);
	CHECK(pool.nodes[0].leaving && !dlh_pool_node_usable(&pool, 0));
	CHECK(pool.nodes[1].drained);
	int a = dlh_pool_find_type(&pool, "A100");
	CHECK(a >= 0 && pool.nodes[2].devices[a] == 2 && dlh_pool_find_node(&pool, "cpu02") == 2);
	CHECK(pool.nodes[2].probe == DLH_PROBE_NONE && dlh_pool_node_usable(&pool, 2));
	/* idle now: gone, and counted nowhere */
	busy[0] = 0;
	CHECK(dlh_pool_merge(&pool, &next, busy, change, err, sizeof err) == 0);
	CHECK(change[0] == DLH_NODE_REMOVED && pool.nodes[0].removed);
	CHECK(dlh_pool_find_node(&pool, "gpu01") == -ENOENT);
	CHECK(dlh_pool_devices(&pool, 1, 0) == 2);   /* cpu02's A100s only */
	/* back, at another host: revived where it was, to be probed */
	const char back[] = "[type H100]\ngpu = true\n[node gpu01]\nhost = 10.1.1.1\ncpus = 4\n"
			    "gpus = H100:1\n[node cpu01]\ncpus = 64\n[node cpu02]\ncpus = 8\n";
	CHECK(dlh_pool_parse(&next, back, strlen(back), "pool.ini", "cpu01", 0, err, sizeof err) == 0);
	CHECK(dlh_pool_merge(&pool, &next, busy, change, err, sizeof err) == 0);
	CHECK(change[0] == DLH_NODE_NEW && !pool.nodes[0].removed && pool.nodes[0].cpus == 4);
	CHECK(!strcmp(pool.nodes[0].host, "10.1.1.1") && pool.nodes[0].probe == DLH_PROBE_NONE);
	CHECK(pool.nodes[2].devices[a] == 0 && change[2] == DLH_NODE_CHANGED);   /* its A100s gone */
	/* a file that makes another node this machine's: refused, nothing changed */
	CHECK(dlh_pool_parse(&next, back, strlen(back), "pool.ini", "cpu02", 0, err, sizeof err) == 0);
	CHECK(dlh_pool_merge(&pool, &next, busy, change, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "makes cpu02 this machine's node, where the mount has cpu01"), "%s", err);
	CHECK(pool.local == 1 && pool.nodes[0].cpus == 4);
}

TEST(cpus_option_overrides_the_local_node)
{
	int rc = dlh_pool_parse(&pool, two_nodes, strlen(two_nodes), "pool.ini", "cpu01", 2, err,
				sizeof err);
	CHECK_MSG(rc == 0, "%s", err);
	CHECK(pool.node.cpus == 2 && pool.nodes[1].cpus == 2 && pool.nodes[1].devices[0] == 2);
	CHECK(pool.nodes[0].cpus == 32);
}

TEST(cpu_type_defaults_to_the_builtin_cpu)
{
	CHECK_MSG(parse("[node a]\ncpus = 4\nmemory = 16G\n[node b]\ncpus = 8\nmemory = 16G\n", "a") == 0,
		  "%s", err);
	CHECK(pool.ntypes == 1 && !strcmp(pool.type[0].name, "cpu"));
	CHECK(pool.type[0].watts_idle == DLH_CPU_WATTS_IDLE && pool.type[0].watts_busy == DLH_CPU_WATTS_BUSY);
	CHECK(pool.type[0].bandwidth == DLH_CPU_BANDWIDTH && pool.type[0].flops == 0);
	/* memory per core: the smaller share, b's 2G */
	CHECK(pool.type[0].mem_bytes == 2LL << 30);
	CHECK(pool.nodes[1].devices[0] == 8);
}

TEST(nodes_may_name_their_own_cpu_type_and_several_gpu_types)
{
	const char *text =
		"[node x]\ncpus = 16\ncpu_type = epyc\ngpus = A100:2, H100\n"
		"[type epyc]\nflops = 50G\n"
		"[type A100]\ngpu = yes\n[type H100]\ngpu = on\nmemory = 80G\n";
	CHECK_MSG(parse(text, "x") == 0, "%s", err);
	int epyc = dlh_pool_find_type(&pool, "epyc"), a = dlh_pool_find_type(&pool, "A100"),
	    h = dlh_pool_find_type(&pool, "H100");
	CHECK(epyc >= 0 && a >= 0 && h >= 0 && dlh_pool_find_type(&pool, "cpu") == -ENOENT);
	CHECK(pool.nodes[0].cpu_type == epyc && pool.nodes[0].devices[epyc] == 16);
	CHECK(pool.nodes[0].devices[a] == 2 && pool.nodes[0].devices[h] == 1);
	CHECK(pool.node.gpus == 3 && dlh_pool_node_gpus(&pool, 0) == 3);
	/* GPUs are numbered in type order: A100 0-1, H100 2 */
	CHECK(dlh_pool_gpu_type(&pool, 0, 0) == a && dlh_pool_gpu_type(&pool, 0, 1) == a);
	CHECK(dlh_pool_gpu_type(&pool, 0, 2) == h && dlh_pool_gpu_type(&pool, 0, 3) == -ENOENT);
}

TEST(unknown_section_is_named_with_a_hint)
{
	CHECK(parse("[nod a]\ncpus = 1\n[node b]\ncpus = 1\n", "a") == -EINVAL);
	CHECK_MSG(err_is("pool.ini:1: [nod a]: unknown section (did you mean \"[node a]\"?)"), "%s", err);
	CHECK(parse("[gpu]\n[node b]\ncpus = 1\n", "a") == -EINVAL);
	CHECK_MSG(err_is("pool.ini:1: [gpu]: unknown section (expected \"[type NAME]\", \"[node NAME]\" or \"[env]\")"),
		  "%s", err);
}

TEST(unknown_key_is_named_with_a_hint)
{
	CHECK(parse("[node a]\ncpus = 2\nmemroy = 1G\n", "a") == -EINVAL);
	CHECK_MSG(err_is("pool.ini:3: [node a] memroy: unknown key (did you mean \"memory\"?)"), "%s", err);
	CHECK(parse("[type t]\nwatts = 3\n[node a]\ncpus = 2\n", "a") == -EINVAL);
	CHECK_MSG(err_is("pool.ini:2: [type t] watts: unknown key (did you mean \"watts_idle\"?)"), "%s", err);
}

TEST(bad_values_are_named_with_their_line)
{
	CHECK(parse("[type t]\nflops = fast\n[node a]\ncpus = 2\n", "a") == -EINVAL);
	CHECK_MSG(err_is("pool.ini:2: [type t] flops: expected a rate such as \"90G\" or \"3.35T\" "
			 "(K, M, G, T, P: powers of 1000), got \"fast\""), "%s", err);
	CHECK(parse("[node a]\ncpus = 0\n", "a") == -EINVAL);
	CHECK_MSG(err_is("pool.ini:2: [node a] cpus: expected a whole number of cores from 1 to 1048576, "
			 "got \"0\""), "%s", err);
	CHECK(parse("[node a]\ncpus = 2\nmemory = 12X\n", "a") == -EINVAL);
	CHECK_MSG(strstr(err, "pool.ini:3: [node a] memory: expected a size such as \"80G\"") == err, "%s", err);
	CHECK(parse("[type t]\ngpu = maybe\n[node a]\ncpus = 2\n", "a") == -EINVAL);
	CHECK_MSG(err_is("pool.ini:2: [type t] gpu: expected true or false, got \"maybe\""), "%s", err);
	CHECK(parse("[type t]\nwatts_idle = -3\n[node a]\ncpus = 2\n", "a") == -EINVAL);
	CHECK_MSG(strstr(err, "pool.ini:2: [type t] watts_idle: expected watts") == err, "%s", err);
	CHECK(parse("[type t]\nwatts_idle = 30\nwatts_busy = 20\n[node a]\ncpus = 2\n", "a") == -EINVAL);
	CHECK_MSG(err_is("pool.ini:3: [type t] watts_busy: 20 is below watts_idle (30)"), "%s", err);
}

TEST(node_naming_an_unknown_type_is_refused_with_a_hint)
{
	CHECK(parse("[type H100]\ngpu = true\n[node a]\ncpus = 2\ngpus = H10:4\n", "a") == -EINVAL);
	CHECK_MSG(err_is("pool.ini:5: [node a] gpus: unknown device type \"H10\" (did you mean \"H100\"?)"),
		  "%s", err);
	CHECK(parse("[node a]\ncpus = 2\ncpu_type = xeon\n", "a") == -EINVAL);
	CHECK_MSG(err_is("pool.ini:3: [node a] cpu_type: unknown device type \"xeon\" "
			 "(define it with [type NAME])"), "%s", err);
}

TEST(gpus_must_name_gpu_types_once_with_a_count)
{
	CHECK(parse("[type t]\n[node a]\ncpus = 2\ngpus = t:1\n", "a") == -EINVAL);
	CHECK_MSG(err_is("pool.ini:4: [node a] gpus: \"t\" is not a GPU type (give [type t] gpu = true)"),
		  "%s", err);
	CHECK(parse("[type g]\ngpu = 1\n[node a]\ncpus = 2\ngpus = g:1, g:2\n", "a") == -EINVAL);
	CHECK_MSG(err_is("pool.ini:5: [node a] gpus: \"g\" listed twice"), "%s", err);
	CHECK(parse("[type g]\ngpu = 1\n[node a]\ncpus = 2\ngpus = g:x\n", "a") == -EINVAL);
	CHECK_MSG(err_is("pool.ini:5: [node a] gpus: \"g\": expected TYPE:COUNT, COUNT from 1 to 4096, "
			 "got \"x\""), "%s", err);
	CHECK(parse("[type g]\ngpu = 1\n[node a]\ncpus = 2\ncpu_type = g\n", "a") == -EINVAL);
	CHECK_MSG(err_is("pool.ini:5: [node a] cpu_type: \"g\" is a GPU type (gpu = true); name a CPU type"),
		  "%s", err);
}

TEST(duplicates_are_refused_with_the_first_line)
{
	CHECK(parse("[type t]\n[type t]\n[node a]\ncpus = 1\n", "a") == -EINVAL);
	CHECK_MSG(err_is("pool.ini:2: [type t]: defined again (first on line 1)"), "%s", err);
	CHECK(parse("[node a]\ncpus = 1\n[node a]\ncpus = 1\n", "a") == -EINVAL);
	CHECK_MSG(err_is("pool.ini:3: [node a]: defined again (first on line 1)"), "%s", err);
	CHECK(parse("[node a]\ncpus = 1\ncpus = 2\n", "a") == -EINVAL);
	CHECK_MSG(err_is("pool.ini:3: [node a] cpus: given twice (first on line 2)"), "%s", err);
	CHECK(parse("[node a]\ncpus = 1\n[node b]\nhost = a\ncpus = 1\n", "a") == -EINVAL);
	CHECK_MSG(err_is("pool.ini:4: [node b] host: \"a\" is already the host of [node a] (line 1)"),
		  "%s", err);
}

TEST(structure_problems_are_named)
{
	CHECK(parse("[node a]\nmemory = 1G\n", "a") == -EINVAL);
	CHECK_MSG(err_is("pool.ini:1: [node a]: cpus is required (its number of cores)"), "%s", err);
	CHECK(parse("; nothing\n", "a") == -EINVAL);
	CHECK_MSG(err_is("pool.ini: no [node NAME] section: the pool needs at least one node"), "%s", err);
	CHECK(parse("cpus = 2\n[node a]\ncpus = 1\n", "a") == -EINVAL);
	CHECK_MSG(strstr(err, "pool.ini:1: \"cpus\": key outside any section") == err, "%s", err);
	CHECK(parse("[node a]\ncpus 2\n", "a") == -EINVAL);
	CHECK_MSG(err_is("pool.ini:1: [node a]: cpus is required (its number of cores)\n"
			 "pool.ini:2: syntax error: expected \"[section]\" or \"key = value\", got \"cpus 2\""), "%s", err);
	CHECK(parse("[node a/b]\ncpus = 2\n", "a") == -EINVAL);
	CHECK_MSG(strstr(err, "pool.ini:1: [node]: expected \"[node NAME]\"") == err, "%s", err);
	CHECK(parse("[type a]\n[type b]\n[type c]\n[type d]\n[type e]\n[type f]\n[type g]\n[type h]\n"
		    "[type i]\n[node n]\ncpus = 1\n", "n") == -EINVAL);
	CHECK_MSG(strstr(err, "pool.ini:9: [type i]: more than 8 device types") == err, "%s", err);
}

TEST(every_problem_is_reported_one_line_each)
{
	CHECK(parse("[node a]\ncpus = x\nmemory = y\n[nodes b]\n", "a") == -EINVAL);
	CHECK_MSG(!strncmp(err, "pool.ini:2: ", 12) && strstr(err, "\npool.ini:3: ") &&
		  strstr(err, "\npool.ini:4: ") && !strchr(strstr(err, "\npool.ini:4: ") + 1, '\n'),
		  "%s", err);
}

TEST(problems_come_in_line_order_and_the_rest_are_counted)
{
	char text[2048] = "[type H100]\ngpu = true\n[node a]\ncpus = 1\ngpus = H10:1\n";
	for (int i = 0; i < 24; i++)
		strcat(text, "bad\n");
	CHECK(parse(text, "a") == -EINVAL);
	/* the unknown type (line 5, found at the end) comes before line 6's */
	CHECK_MSG(strstr(err, "pool.ini:5: [node a] gpus: unknown device type \"H10\" (did you mean \"H100\"?)\n"
			      "pool.ini:6: syntax error") == err, "%s", err);
	CHECK_MSG(strstr(err, "\npool.ini:24: syntax error"), "%s", err);
	CHECK_MSG(!strstr(err, "pool.ini:25:"), "%s", err);
	CHECK_MSG(strstr(err, "\npool.ini: 5 more problems not shown") && err[strlen(err) - 1] == 'n', "%s", err);
}

TEST(load_names_the_file_it_cannot_read)
{
	char path[] = "/tmp/dlh-pool-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	CHECK(write(fd, "[node a]\ncpus = two\n", 20) == 20);
	close(fd);
	CHECK(dlh_pool_load(&pool, path, 0, err, sizeof err) == -EINVAL);
	char want[256];
	snprintf(want, sizeof want, "%s:2: [node a] cpus:", path);
	CHECK_MSG(strstr(err, want) == err, "%s", err);
	unlink(path);
	CHECK(dlh_pool_load(&pool, path, 0, err, sizeof err) == -ENOENT);
	CHECK_MSG(strstr(err, "cannot read pool file") && strstr(err, path), "%s", err);
}

TEST(rates_are_written_as_pool_files_write_them)
{
	static const struct { double v; const char *text; } cases[] = {
		{ 67e12, "67T" }, { 3.35e12, "3.35T" }, { 90e9, "90G" }, { 0, "0" }, { 512, "512" },
		{ 2.5e18, "2500P" },
	};
	char b[32];
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		dlh_pool_rate_text(cases[i].v, b, sizeof b);
		CHECK_MSG(!strcmp(b, cases[i].text), "%g: got \"%s\", want \"%s\"", cases[i].v, b,
			  cases[i].text);
	}
}

TEST(free_view_takes_what_the_local_node_uses)
{
	struct dlh_pool_free *f = calloc(1, sizeof *f);
	int cpus[DLH_POOL_NODES] = { 0 }, gpus[DLH_POOL_NODES] = { 0 };
	CHECK(f);
	CHECK_MSG(parse(two_nodes, "gpu01") == 0, "%s", err);
	cpus[pool.local] = 5;
	gpus[pool.local] = 3;
	dlh_pool_free_view_nodes(&pool, cpus, gpus, f);
	CHECK(f->ntypes == 2 && f->nnodes == 2);
	CHECK(!strcmp(f->type[1].name, "H100") && f->type[1].flops == 67e12);
	CHECK(f->type[1].mem_bytes == (double)(80LL << 30) && f->type[1].watts_busy == 700);
	CHECK(f->free[0][0] == 27 && f->free[0][1] == 5);   /* the local node */
	CHECK(f->free[1][0] == 64 && f->free[1][1] == 0);   /* nothing in use there */
	/* more in use than exist (a smaller -o cpus after a restart): none free, never negative */
	cpus[pool.local] = gpus[pool.local] = 99;
	dlh_pool_free_view_nodes(&pool, cpus, gpus, f);
	CHECK(f->free[0][0] == 0 && f->free[0][1] == 0 && f->free[1][0] == 64);
	free(f);
}

TEST(detect_sees_this_machine_as_one_node_with_a_cpu_type)
{
	CHECK(dlh_pool_detect(&pool, 0) == 0);
	char host[DLH_HOST_MAX + 1] = "";
	gethostname(host, sizeof host - 1);
	CHECK(pool.nnodes == 1 && pool.local == 0 && !strcmp(pool.nodes[0].name, host));
	CHECK(!strcmp(pool.node.host, host) && !strcmp(pool.source, "detected"));
	CHECK(pool.node.cpus == (int)sysconf(_SC_NPROCESSORS_ONLN) && pool.node.mem_bytes > (64 << 20));
	CHECK(!strcmp(pool.type[0].name, "cpu") && !pool.type[0].gpu);
	CHECK(pool.type[0].watts_busy == DLH_CPU_WATTS_BUSY && pool.type[0].bandwidth == DLH_CPU_BANDWIDTH);
	CHECK(pool.type[0].mem_bytes == pool.node.mem_bytes / pool.node.cpus);
	CHECK(pool.nodes[0].devices[0] == pool.node.cpus);
	CHECK(dlh_pool_detect(&pool, 3) == 0 && pool.node.cpus == 3 && pool.nodes[0].devices[0] == 3);
}

/* A temporary /dev with two GPUs and the driver's other files. */
static const char *const dev_names[] = { "nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "null" };
#define NDEV_NAMES (int)(sizeof dev_names / sizeof dev_names[0])

static int fake_dev(char *dir)
{
	char path[256];
	if (!mkdtemp(dir))
		return -1;
	for (int i = 0; i < NDEV_NAMES; i++) {
		snprintf(path, sizeof path, "%s/%s", dir, dev_names[i]);
		int fd = open(path, O_CREAT | O_WRONLY, 0600);
		if (fd < 0)
			return -1;
		close(fd);
	}
	return 0;
}

static void rm_fake_dev(const char *dir)
{
	char path[256];
	for (int i = 0; i < NDEV_NAMES; i++) {
		snprintf(path, sizeof path, "%s/%s", dir, dev_names[i]);
		unlink(path);
	}
	rmdir(dir);
}

TEST(without_nvml_gpus_are_counted_from_dev)
{
	char dir[] = "/tmp/dlh-dev-XXXXXX";
	CHECK(fake_dev(dir) == 0);
	struct dlh_pool_probe probe = { .nvml = "libdlh-no-such-nvml.so.1", .dev_dir = dir };
	int rc = dlh_pool_probe(&pool, &probe, 0);
	rm_fake_dev(dir);
	CHECK(rc == 0 && pool.ntypes == 2);
	CHECK(!strcmp(pool.type[1].name, "gpu") && pool.type[1].gpu && pool.type[1].flops == 0);
	CHECK(pool.nodes[0].devices[1] == 2 && pool.node.gpus == 2);
}

TEST(nvml_open_fails_cleanly)
{
	struct dlh_nvml n;
	CHECK(dlh_nvml_open(&n, "libdlh-no-such-nvml.so.1") == -ENOENT && !n.lib);
	/* a library that is not NVML */
	CHECK(dlh_nvml_open(&n, "libm.so.6") == -ENOSYS && !n.lib);
}

/* A fake NVML: two H100s and one model the table does not know. */
static const char *const fake_names[] = { "NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3", "NVIDIA Foo 9000" };
static int fake_inits, fake_shutdowns, fake_init_rc;
static int fake_init(void) { fake_inits++; return fake_init_rc; }
static int fake_shutdown(void) { fake_shutdowns++; return 0; }
static int fake_count(unsigned int *n) { *n = 3; return 0; }
static int fake_handle(unsigned int i, void **dev)
{
	*dev = (void *)&fake_names[i];
	return 0;
}
static int fake_name(void *dev, char *name, unsigned int len)
{
	snprintf(name, len, "%s", *(const char *const *)dev);
	return 0;
}
static int fake_memory(void *dev, struct dlh_nvml_memory *m)
{
	m->total = dev == &fake_names[2] ? 24ULL << 30 : 80ULL << 30;
	return 0;
}
static int fake_power(void *dev, unsigned int *mw)
{
	*mw = dev == &fake_names[2] ? 300000 : 700000;
	return 0;
}
static const struct dlh_nvml fake_nvml = {
	.init = fake_init, .shutdown = fake_shutdown, .count = fake_count, .handle = fake_handle,
	.name = fake_name, .memory = fake_memory, .power_limit = fake_power,
};

TEST(nvml_gpus_become_one_type_per_model)
{
	CHECK(parse("[node a]\ncpus = 4\n", "a") == 0);
	fake_init_rc = 0;
	fake_inits = fake_shutdowns = 0;
	CHECK(dlh_pool_add_nvml(&pool, 0, &fake_nvml) == 3);
	CHECK(fake_inits == 1 && fake_shutdowns == 1);
	int h = dlh_pool_find_type(&pool, "H100"), foo = dlh_pool_find_type(&pool, "Foo-9000");
	CHECK(h > 0 && foo > 0 && pool.ntypes == 3);
	CHECK(pool.type[h].gpu && pool.type[h].flops == 67e12 && pool.type[h].bandwidth == 3.35e12);
	CHECK(pool.type[h].mem_bytes == 80LL << 30);
	CHECK(pool.type[h].watts_busy == 700 && pool.type[h].watts_idle == 700 * DLH_GPU_IDLE_SHARE);
	CHECK(pool.type[foo].gpu && pool.type[foo].flops == 0 && pool.type[foo].watts_busy == 300);
	CHECK(pool.nodes[0].devices[h] == 2 && pool.nodes[0].devices[foo] == 1);
}

TEST(nvml_that_does_not_initialize_adds_nothing)
{
	CHECK(parse("[node a]\ncpus = 4\n", "a") == 0);
	fake_init_rc = 9;   /* NVML_ERROR_DRIVER_NOT_LOADED */
	fake_inits = fake_shutdowns = 0;
	CHECK(dlh_pool_add_nvml(&pool, 0, &fake_nvml) == -ENODEV);
	CHECK(fake_shutdowns == 0 && pool.ntypes == 1);
}

TEST(slurm_keys_make_a_slurm_pool_without_nodes)
{
	CHECK_MSG(parse("backend = slurm\npartition = gpu\naccount = proj1\n[type H100]\ngpu = true\n"
			"flops = 67T\n", "cpu01") == 0, "%s", err);
	CHECK(dlh_pool_is_slurm(&pool) && pool.nnodes == 0 && pool.local == -1);
	CHECK(!strcmp(pool.partition, "gpu") && !strcmp(pool.account, "proj1"));
	CHECK(dlh_pool_find_type(&pool, "cpu") >= 0);
	CHECK(parse(two_nodes, "cpu01") == 0 && !strcmp(pool.backend, "local") &&
	      !dlh_pool_is_slurm(&pool));
}

TEST(slurm_key_problems_name_their_line)
{
	CHECK(parse("backend = pbs\n[node a]\ncpus = 1\n", "x") == -EINVAL);
	CHECK_MSG(err_is("pool.ini:1: backend: expected local or slurm, got \"pbs\""), "%s", err);
	CHECK(parse("backend = slurm\npartition = a b\nbackend = slurm\n", "x") == -EINVAL);
	CHECK_MSG(err_is("pool.ini:2: partition: expected a Slurm partition name (1 to 64 letters, "
			 "digits, '.', '_' or '-'), got \"a b\"\n"
			 "pool.ini:3: backend: given twice (first on line 1)"), "%s", err);
	CHECK(parse("backend = slurm\n[node a]\ncpus = 1\n", "x") == -EINVAL);
	CHECK_MSG(err_is("pool.ini:2: [node a]: a Slurm pool's nodes are Slurm's (sinfo): leave "
			 "out [node NAME] sections"), "%s", err);
	CHECK(parse("account = p\n[node a]\ncpus = 1\n", "x") == -EINVAL);
	CHECK_MSG(err_is("pool.ini:1: account: only a Slurm pool has one (backend = slurm)"), "%s", err);
	CHECK(parse("backnd = slurm\n", "x") == -EINVAL);
	CHECK_MSG(strstr(err, "pool.ini:1: \"backnd\": key outside any section") &&
		  strstr(err, "did you mean \"backend\"?"), "%s", err);
}

TEST(sinfo_lines_become_nodes_with_gpus_and_states)
{
	static struct dlh_pool next;
	CHECK(parse("backend = slurm\n[type H100]\ngpu = true\nflops = 67T\n", "x") == 0);
	const char *text = "n1|32|515000|gpu:H100:4(S:0-1)|idle|none\n"
			   "n2|16|64000|(null)|drained|disk failing\n"
			   "n3|8|1000|gpu:2,shard:8|mixed|none\n"
			   "n1|32|515000|gpu:H100:4(S:0-1)|idle|none\n"
			   "n4|8|1000|gpu:A100:1|down*|Not responding\n";
	CHECK_MSG(dlh_pool_slurm_parse(&pool, text, &next, err, sizeof err) == 0, "%s", err);
	CHECK(next.nnodes == 4 && next.local == -1);
	int h = dlh_pool_find_type(&next, "H100"), g = dlh_pool_find_type(&next, "gpu");
	int a = dlh_pool_find_type(&next, "A100"), c = dlh_pool_find_type(&next, "cpu");
	CHECK(h >= 0 && g >= 0 && a >= 0 && c >= 0 && next.type[g].gpu && next.type[a].gpu);
	CHECK(next.type[h].flops == 67e12);   /* the pool file's figures kept */
	CHECK(next.nodes[0].cpus == 32 && next.nodes[0].devices[c] == 32 && next.nodes[0].devices[h] == 4);
	CHECK(next.nodes[0].mem_bytes == 515000LL * 1024 * 1024);
	CHECK(!strcmp(next.nodes[1].slurm_state, "drained") &&
	      !strcmp(next.nodes[1].probe_what, "disk failing"));
	CHECK(next.nodes[2].devices[g] == 2 && !strcmp(next.nodes[2].name, "n3"));
	CHECK(dlh_pool_slurm_usable("idle") && dlh_pool_slurm_usable("mixed") &&
	      dlh_pool_slurm_usable("allocated"));
	CHECK(!dlh_pool_slurm_usable("drained") && !dlh_pool_slurm_usable("down*") &&
	      !dlh_pool_slurm_usable("idle*") && !dlh_pool_slurm_usable("draining"));
	CHECK(dlh_pool_slurm_parse(&pool, "n1|x|1|(null)|idle|none\n", &next, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "sinfo line 1: expected NAME|CPUS|MEMORY|GRES|STATE|REASON"), "%s", err);
}

int main(void)
{
	RUN(slurm_keys_make_a_slurm_pool_without_nodes);
	RUN(slurm_key_problems_name_their_line);
	RUN(sinfo_lines_become_nodes_with_gpus_and_states);
	RUN(good_file_gives_types_nodes_and_devices);
	RUN(local_node_is_the_one_with_this_hostname);
	RUN(no_node_is_local_when_none_is_this_machine);
	RUN(a_node_whose_host_is_an_address_of_this_machine_is_local);
	RUN(env_section_gives_every_jobs_variables);
	RUN(merge_adds_updates_and_removes_nodes_by_name);
	RUN(cpus_option_overrides_the_local_node);
	RUN(cpu_type_defaults_to_the_builtin_cpu);
	RUN(nodes_may_name_their_own_cpu_type_and_several_gpu_types);
	RUN(unknown_section_is_named_with_a_hint);
	RUN(unknown_key_is_named_with_a_hint);
	RUN(bad_values_are_named_with_their_line);
	RUN(node_naming_an_unknown_type_is_refused_with_a_hint);
	RUN(gpus_must_name_gpu_types_once_with_a_count);
	RUN(duplicates_are_refused_with_the_first_line);
	RUN(structure_problems_are_named);
	RUN(every_problem_is_reported_one_line_each);
	RUN(problems_come_in_line_order_and_the_rest_are_counted);
	RUN(load_names_the_file_it_cannot_read);
	RUN(rates_are_written_as_pool_files_write_them);
	RUN(free_view_takes_what_the_local_node_uses);
	RUN(detect_sees_this_machine_as_one_node_with_a_cpu_type);
	RUN(without_nvml_gpus_are_counted_from_dev);
	RUN(nvml_open_fails_cleanly);
	RUN(nvml_gpus_become_one_type_per_model);
	RUN(nvml_that_does_not_initialize_adds_nothing);
	return CHECK_EXIT();
}
