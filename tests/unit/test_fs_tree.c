/* test_fs_tree.c - the mount's path -> node mapping (fs/tree.c) without a mount:
 * each entry of its tables, pool nodes and their devices, jobs, names, checkpoints,
 * and the errors of paths that name nothing
 *
 * The tree asks a real engine for what exists: each case opens one on a temp
 * state dir with a two-node pool file (this machine with 2 cores, a GPU node
 * with 8 GPUs elsewhere) and an "mpirun" that sleeps, so a job it submits is
 * running until it is cancelled. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/engine.h"
#include "fs/tree.h"
#include "tests/unit/check.h"
#include "tests/unit/tmpdir.h"

/* A path component longer than fs_resolve's buffer. */
#define LONG_NAME 300

/* One expected child of a directory: its name and the kind it maps to. */
struct want {
	const char *name;      /* path component */
	enum fs_kind kind;     /* node it names */
};

/* What fs/tree.c's tables say, restated: the mount's layout (README.md). */
static const struct want root_want[] = {
	{ "README", FS_README }, { "pool", FS_POOL }, { "jobs", FS_JOBS }, { "queue", FS_QUEUE },
	{ "prometheus", FS_PROM },
};
static const struct want pool_want[] = {
	{ "summary", FS_POOL_SUMMARY }, { "types", FS_POOL_TYPES }, { "nodes", FS_POOL_NODES },
	{ "calibration", FS_POOL_CALIB }, { "limits", FS_POOL_LIMITS }, { "ctl", FS_POOL_CTL },
};
static const struct want node_want[] = {
	{ "cpus", FS_NODE_CPUS }, { "cpus_used", FS_NODE_USED }, { "memory", FS_NODE_MEMORY },
	{ "cpu_model", FS_NODE_MODEL }, { "jobs", FS_NODE_JOBS }, { "gpus", FS_NODE_GPUS },
	{ "devices", FS_NODE_DEVICES }, { "cpu", FS_NODE_CPU_DIR }, { "isolation", FS_NODE_ISOLATION },
	{ "host", FS_NODE_HOST }, { "role", FS_NODE_ROLE },
};
static const struct want gpu_want[] = {
	{ "model", FS_NODE_GPU_MODEL }, { "memory", FS_NODE_GPU_MEMORY },
	{ "state", FS_NODE_GPU_STATE }, { "job", FS_NODE_GPU_JOB },
};
static const struct want jobs_want[] = {
	{ "new", FS_JOBS_NEW }, { "errors", FS_JOBS_ERRORS }, { "index", FS_JOBS_INDEX },
};
/* a job's files that are there from submission on (result, lr_finder and
 * estimate come later: see their own cases) */
static const struct want job_want[] = {
	{ "spec", FS_JOB_SPEC }, { "status", FS_JOB_STATUS }, { "progress", FS_JOB_PROGRESS },
	{ "metrics", FS_JOB_METRICS }, { "metrics.csv", FS_JOB_CSV }, { "plan", FS_JOB_PLAN },
	{ "log", FS_JOB_LOG }, { "checkpoints", FS_JOB_CKPTS }, { "ctl", FS_JOB_CTL },
	{ "plots", FS_JOB_PLOTS }, { "plots/loss.svg", FS_JOB_PLOT_LOSS },
	{ "plots/accuracy.svg", FS_JOB_PLOT_ACCURACY }, { "plots/throughput.svg", FS_JOB_PLOT_THROUGHPUT },
	{ "plots/progress.svg", FS_JOB_PLOT_PROGRESS }, { "report.html", FS_JOB_REPORT },
};
#define NWANT(t) (sizeof t / sizeof t[0])

/* A job the sleeper runs (one rank) under the name fmnist. */
static const char named_spec[] =
	"[job]\nname = fmnist\n[data]\ntrain_limit = 256\ntest_limit = 256\n"
	"[train]\nepochs = 1\n[resources]\nranks = 1\n";

/* Opens an engine on a fresh state dir called name: the pool of the
 * header comment, an "mpirun" that sleeps, no cgroups, no calibration.
 * Returns it, or NULL (said on a comment line). */
static struct dlh_engine *tree_engine(char *state, size_t len, const char *name)
{
	char pool[700], sleeper[700], host[256] = "localhost", text[1024], err[512];
	struct dlh_engine *e = NULL;

	fresh_dir(state, len, name);
	gethostname(host, sizeof host - 1);
	snprintf(pool, sizeof pool, "%s/pool.ini", state);
	snprintf(text, sizeof text,
		 "[type cpu]\nflops = 90G\nmemory = 12G\nbandwidth = 20G\n"
		 "watts_idle = 3\nwatts_busy = 12\n\n"
		 "[type H100]\nflops = 67T\nmemory = 80G\nbandwidth = 3.35T\n"
		 "watts_idle = 70\nwatts_busy = 700\ngpu = true\n\n"
		 "[node gpu01]\nhost = gpu01.example\ncpus = 32\nmemory = 512G\ngpus = H100:8\n\n"
		 "[node here]\nhost = %s\ncpus = 2\nmemory = 8G\n", host);
	write_text(pool, text);
	snprintf(sleeper, sizeof sleeper, "%s/sleeper", state);
	write_text(sleeper, "#!/bin/sh\nexec sleep 30\n");
	chmod(sleeper, 0755);
	struct dlh_engine_opts o = {
		.state_dir = state, .trainer = "/bin/true", .shepherd = "", .launcher = sleeper, .pool_file = pool,
		.kill_grace = 0.5, .no_isolation = 1, .no_calibrate = 1, .no_probe = 1,
	};
	if (dlh_engine_open(&e, &o, err, sizeof err))
		printf("# open: %s\n", err);
	return e;
}

/* Submits named_spec. Returns its id, or -1. */
static long submit_named(struct dlh_engine *e)
{
	char err[DLH_ERR_MAX];
	long id = 0;

	if (dlh_engine_submit(e, named_spec, sizeof named_spec - 1, 0, &id, err, sizeof err)) {
		printf("# submit: %s\n", err);
		return -1;
	}
	return id;
}

/* fs_resolve of the path printf(fmt, ...) into *n. Returns its result. */
static int resolve(struct dlh_engine *e, struct fs_node *n, const char *fmt, ...)
{
	char path[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(path, sizeof path, fmt, ap);
	va_end(ap);
	return fs_resolve(e, path, n);
}

/* fs_list's names, each followed by one blank. */
struct names {
	char text[4096];       /* the names so far */
	int stop_after;        /* fill returns 1 once this many are in; 0 = never */
	int count;             /* names filled */
};

static int fill_name(void *ctx, const char *name)
{
	struct names *l = ctx;
	size_t used = strlen(l->text);

	snprintf(l->text + used, sizeof l->text - used, "%s ", name);
	l->count++;
	return l->stop_after && l->count >= l->stop_after;
}

/* The listing of path (resolved first). Returns fs_list's result, or
 * fs_resolve's error. */
static int list(struct dlh_engine *e, const char *path, struct names *l)
{
	struct fs_node n;
	int rc = fs_resolve(e, path, &n);

	memset(l, 0, sizeof *l);
	return rc ? rc : fs_list(e, &n, fill_name, l);
}

TEST(tree_root_and_its_entries)
{
	char state[512];
	struct dlh_engine *e = tree_engine(state, sizeof state, "tree-root");
	struct fs_node n;
	CHECK(e != NULL);
	CHECK(fs_resolve(e, "/", &n) == 0 && n.kind == FS_ROOT);
	CHECK(fs_resolve(e, "", &n) == 0 && n.kind == FS_ROOT);
	for (size_t i = 0; i < NWANT(root_want); i++) {
		int rc = resolve(e, &n, "/%s", root_want[i].name);
		CHECK_MSG(rc == 0 && n.kind == root_want[i].kind, "/%s: rc %d kind %d",
			  root_want[i].name, rc, n.kind);
	}
	/* slashes repeated or trailing name the same node */
	CHECK(fs_resolve(e, "//pool///nodes/", &n) == 0 && n.kind == FS_POOL_NODES);
	dlh_engine_close(e);
}

TEST(tree_pool_entries)
{
	char state[512];
	struct dlh_engine *e = tree_engine(state, sizeof state, "tree-pool");
	struct fs_node n;
	CHECK(e != NULL);
	for (size_t i = 0; i < NWANT(pool_want); i++) {
		int rc = resolve(e, &n, "/pool/%s", pool_want[i].name);
		CHECK_MSG(rc == 0 && n.kind == pool_want[i].kind, "/pool/%s: rc %d kind %d",
			  pool_want[i].name, rc, n.kind);
	}
	dlh_engine_close(e);
}

TEST(tree_pool_nodes_are_the_pool_file_nodes_with_their_files)
{
	char state[512];
	const char *nodes[] = { "here", "gpu01" };
	struct dlh_engine *e = tree_engine(state, sizeof state, "tree-nodes");
	struct fs_node n;
	CHECK(e != NULL);
	for (int k = 0; k < 2; k++) {
		CHECK(resolve(e, &n, "/pool/nodes/%s", nodes[k]) == 0);
		CHECK_MSG(n.kind == FS_NODE && !strcmp(n.name, nodes[k]), "%s: kind %d name %s",
			  nodes[k], n.kind, n.name);
		for (size_t i = 0; i < NWANT(node_want); i++) {
			int rc = resolve(e, &n, "/pool/nodes/%s/%s", nodes[k], node_want[i].name);
			CHECK_MSG(rc == 0 && n.kind == node_want[i].kind && !strcmp(n.name, nodes[k]),
				  "/pool/nodes/%s/%s: rc %d kind %d name %s", nodes[k],
				  node_want[i].name, rc, n.kind, n.name);
		}
	}
	CHECK(fs_resolve(e, "/pool/nodes/nosuch", &n) == -ENOENT);
	CHECK(fs_resolve(e, "/pool/nodes/here/nosuch", &n) == -ENOENT);
	dlh_engine_close(e);
}

TEST(tree_cpu_slots_are_numbers_below_the_node_cores)
{
	char state[512];
	struct dlh_engine *e = tree_engine(state, sizeof state, "tree-cpu");
	struct fs_node n;
	CHECK(e != NULL);
	CHECK(fs_resolve(e, "/pool/nodes/here/cpu/0", &n) == 0);
	CHECK(n.kind == FS_NODE_CPU && n.id == 0 && !strcmp(n.name, "here"));
	CHECK(fs_resolve(e, "/pool/nodes/here/cpu/1/job", &n) == 0);
	CHECK(n.kind == FS_NODE_CPU_JOB && n.id == 1 && !strcmp(n.name, "here"));
	CHECK(fs_resolve(e, "/pool/nodes/gpu01/cpu/31", &n) == 0 && n.id == 31);
	CHECK(fs_resolve(e, "/pool/nodes/here/cpu/2", &n) == -ENOENT);     /* 2 cores */
	CHECK(fs_resolve(e, "/pool/nodes/gpu01/cpu/32", &n) == -ENOENT);
	CHECK(fs_resolve(e, "/pool/nodes/here/cpu/01", &n) == -ENOENT);    /* leading zero */
	CHECK(fs_resolve(e, "/pool/nodes/here/cpu/-1", &n) == -ENOENT);
	CHECK(fs_resolve(e, "/pool/nodes/here/cpu/x", &n) == -ENOENT);
	CHECK(fs_resolve(e, "/pool/nodes/here/cpu/0/nosuch", &n) == -ENOENT);
	dlh_engine_close(e);
}

TEST(tree_gpus_are_numbers_below_the_node_gpus)
{
	char state[512];
	struct dlh_engine *e = tree_engine(state, sizeof state, "tree-gpu");
	struct fs_node n;
	CHECK(e != NULL);
	CHECK(fs_resolve(e, "/pool/nodes/gpu01/gpus/7", &n) == 0);
	CHECK(n.kind == FS_NODE_GPU && n.id == 7 && !strcmp(n.name, "gpu01"));
	for (size_t i = 0; i < NWANT(gpu_want); i++) {
		int rc = resolve(e, &n, "/pool/nodes/gpu01/gpus/3/%s", gpu_want[i].name);
		CHECK_MSG(rc == 0 && n.kind == gpu_want[i].kind && n.id == 3 &&
			  !strcmp(n.name, "gpu01"), "gpus/3/%s: rc %d kind %d id %ld",
			  gpu_want[i].name, rc, n.kind, n.id);
	}
	CHECK(fs_resolve(e, "/pool/nodes/gpu01/gpus/8", &n) == -ENOENT);   /* H100:8 */
	CHECK(fs_resolve(e, "/pool/nodes/here/gpus/0", &n) == -ENOENT);    /* no GPU */
	CHECK(fs_resolve(e, "/pool/nodes/gpu01/gpus/0/nosuch", &n) == -ENOENT);
	dlh_engine_close(e);
}

TEST(tree_jobs_new_and_errors)
{
	char state[512], want[700], real[4096];
	struct dlh_engine *e = tree_engine(state, sizeof state, "tree-jobs");
	struct fs_node n;
	CHECK(e != NULL);
	for (size_t i = 0; i < NWANT(jobs_want); i++) {
		int rc = resolve(e, &n, "/jobs/%s", jobs_want[i].name);
		CHECK_MSG(rc == 0 && n.kind == jobs_want[i].kind, "/jobs/%s: rc %d kind %d",
			  jobs_want[i].name, rc, n.kind);
	}
	CHECK(fs_source_of(FS_JOBS_NEW) == FS_TRANSACTION);
	CHECK(fs_source_of(FS_JOBS_ERRORS) == FS_PASSTHROUGH);
	CHECK(fs_resolve(e, "/jobs/errors", &n) == 0);
	fs_real_path(e, &n, 0, real, sizeof real);
	dlh_engine_errors_path(e, 0, want, sizeof want);
	CHECK_MSG(!strcmp(real, want), "errors at %s, want %s", real, want);
	/* any other reader: that user's own rejections */
	uid_t other = getuid() == 0 ? 4242 : getuid() + 1;
	char own[64];
	snprintf(own, sizeof own, "/errors.d/%u", (unsigned)other);
	fs_real_path(e, &n, other, real, sizeof real);
	CHECK_MSG(strlen(real) > strlen(own) && !strcmp(real + strlen(real) - strlen(own), own),
		  "errors of uid %u at %s", (unsigned)other, real);
	dlh_engine_close(e);
}

TEST(tree_job_dir_maps_each_file_of_a_job)
{
	char state[512];
	struct dlh_engine *e = tree_engine(state, sizeof state, "tree-job");
	struct fs_node n;
	CHECK(e != NULL);
	long id = submit_named(e);
	CHECK(id > 0);
	CHECK(resolve(e, &n, "/jobs/%ld", id) == 0 && n.kind == FS_JOB && n.id == id);
	for (size_t i = 0; i < NWANT(job_want); i++) {
		int rc = resolve(e, &n, "/jobs/%ld/%s", id, job_want[i].name);
		CHECK_MSG(rc == 0 && n.kind == job_want[i].kind && n.id == id,
			  "/jobs/%ld/%s: rc %d kind %d id %ld", id, job_want[i].name, rc, n.kind, n.id);
	}
	CHECK(resolve(e, &n, "/jobs/%ld/nosuch", id) == -ENOENT);
	CHECK(resolve(e, &n, "/jobs/%ld", id + 1) == -ENOENT);      /* no such job */
	CHECK(fs_resolve(e, "/jobs/0", &n) == -ENOENT);
	CHECK(resolve(e, &n, "/jobs/0%ld", id) == -ENOENT);        /* leading zero */
	CHECK(fs_resolve(e, "/jobs/nosuch", &n) == -ENOENT);        /* no job of that name */
	dlh_engine_close(e);
}

TEST(tree_job_result_appears_once_the_job_has_ended)
{
	char state[512], dir[64], err[DLH_ERR_MAX];
	struct dlh_engine *e = tree_engine(state, sizeof state, "tree-result");
	struct fs_node n;
	struct names l;
	CHECK(e != NULL);
	long id = submit_named(e);
	CHECK(id > 0);
	struct dlh_job j;
	CHECK(dlh_engine_job(e, id, &j) == 0 && j.status == DLH_RUNNING);
	CHECK(resolve(e, &n, "/jobs/%ld/result", id) == -ENOENT);
	snprintf(dir, sizeof dir, "/jobs/%ld", id);
	CHECK(list(e, dir, &l) == 0);
	CHECK_MSG(!strstr(l.text, " result "), "listing: %s", l.text);
	CHECK(dlh_engine_ctl(e, id, 0, "cancel", err, sizeof err) == 0);
	CHECK(dlh_engine_wait(e, id, 10) == 0);
	CHECK(resolve(e, &n, "/jobs/%ld/result", id) == 0 && n.kind == FS_JOB_RESULT && n.id == id);
	CHECK(list(e, dir, &l) == 0);
	CHECK_MSG(strstr(l.text, " result "), "listing: %s", l.text);
	dlh_engine_close(e);
}

TEST(tree_job_plots_and_report_are_listed_and_private)
{
	char state[512], dir[64];
	struct dlh_engine *e = tree_engine(state, sizeof state, "tree-plots");
	struct fs_node n;
	struct names l;
	CHECK(e != NULL);
	long id = submit_named(e);
	CHECK(id > 0);
	snprintf(dir, sizeof dir, "/jobs/%ld", id);
	CHECK(list(e, dir, &l) == 0);
	CHECK_MSG(strstr(l.text, " plots report.html "), "listing: %s", l.text);
	snprintf(dir, sizeof dir, "/jobs/%ld/plots", id);
	CHECK(list(e, dir, &l) == 0);
	CHECK_MSG(!strcmp(l.text, ". .. loss.svg accuracy.svg throughput.svg progress.svg "), "plots/: %s",
		  l.text);
	const enum fs_kind kinds[] = { FS_JOB_PLOTS, FS_JOB_PLOT_LOSS, FS_JOB_PLOT_ACCURACY,
				       FS_JOB_PLOT_THROUGHPUT, FS_JOB_PLOT_PROGRESS, FS_JOB_REPORT };
	for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
		CHECK_MSG(fs_private(kinds[i]), "kind %d", kinds[i]);
	CHECK(resolve(e, &n, "/jobs/%ld/plots/nosuch.svg", id) == -ENOENT);
	CHECK(resolve(e, &n, "/jobs/%ld/report.html/x", id) == -ENOTDIR);
	dlh_engine_close(e);
}

TEST(tree_job_lr_finder_and_estimate_appear_once_written)
{
	char state[512], dir[4096], path[4200], err[DLH_ERR_MAX];
	const char *files[] = { "lr_finder", "estimate" };
	const enum fs_kind kinds[] = { FS_JOB_LRFIND, FS_JOB_ESTIMATE };
	struct dlh_engine *e = tree_engine(state, sizeof state, "tree-written");
	struct fs_node n;
	struct names l;
	CHECK(e != NULL);
	long id = submit_named(e);
	CHECK(id > 0);
	/* ended, so that nothing writes to its directory meanwhile */
	CHECK(dlh_engine_ctl(e, id, 0, "cancel", err, sizeof err) == 0);
	CHECK(dlh_engine_wait(e, id, 10) == 0);
	dlh_engine_job_dir(e, id, dir, sizeof dir);
	for (int k = 0; k < 2; k++) {
		snprintf(path, sizeof path, "%s/%s", dir, files[k]);
		unlink(path);
		CHECK_MSG(resolve(e, &n, "/jobs/%ld/%s", id, files[k]) == -ENOENT, "%s before", files[k]);
		write_text(path, "x\n");
		CHECK_MSG(resolve(e, &n, "/jobs/%ld/%s", id, files[k]) == 0 && n.kind == kinds[k],
			  "%s after: kind %d", files[k], n.kind);
	}
	snprintf(path, sizeof path, "/jobs/%ld", id);
	CHECK(list(e, path, &l) == 0);
	CHECK_MSG(strstr(l.text, " lr_finder ") && strstr(l.text, " estimate "), "listing: %s", l.text);
	snprintf(path, sizeof path, "%s/lr_finder", dir);
	unlink(path);
	snprintf(path, sizeof path, "/jobs/%ld", id);
	CHECK(list(e, path, &l) == 0);
	CHECK_MSG(!strstr(l.text, " lr_finder "), "listing: %s", l.text);
	dlh_engine_close(e);
}

TEST(tree_job_name_is_a_symlink_to_its_newest_job)
{
	char state[512];
	struct dlh_engine *e = tree_engine(state, sizeof state, "tree-link");
	struct fs_node n;
	struct names l;
	CHECK(e != NULL);
	long a = submit_named(e), b = submit_named(e);
	CHECK(a > 0 && b > a);
	CHECK(fs_resolve(e, "/jobs/fmnist", &n) == 0);
	CHECK_MSG(n.kind == FS_JOB_LINK && n.id == b, "kind %d id %ld, want the link to %ld",
		  n.kind, n.id, b);
	CHECK(fs_source_of(FS_JOB_LINK) == FS_SYMLINK);
	/* the tree does not follow the link: the kernel does */
	CHECK(fs_resolve(e, "/jobs/fmnist/spec", &n) == -ENOENT);
	CHECK(list(e, "/jobs", &l) == 0);
	char want[128];
	snprintf(want, sizeof want, ". .. new errors index %ld %ld fmnist ", a, b);
	CHECK_MSG(!strcmp(l.text, want), "listing \"%s\", want \"%s\"", l.text, want);
	dlh_engine_close(e);
}

TEST(tree_checkpoints_are_the_regular_files_of_the_job_checkpoints_dir)
{
	char state[512], dir[4096], path[4200], real[4096];
	struct dlh_engine *e = tree_engine(state, sizeof state, "tree-ckpt");
	struct fs_node n;
	struct names l;
	CHECK(e != NULL);
	long id = submit_named(e);
	CHECK(id > 0);
	dlh_engine_job_dir(e, id, dir, sizeof dir);
	snprintf(path, sizeof path, "%s/checkpoints/sub", dir);
	CHECK(dlh_mkdir_p(path, 0755) == 0);
	snprintf(path, sizeof path, "%s/checkpoints/step-5.ckpt", dir);
	write_text(path, "x");
	snprintf(path, sizeof path, "%s/checkpoints/step-6.ckpt.tmp", dir);
	write_text(path, "x");
	snprintf(path, sizeof path, "%s/checkpoints/.hidden", dir);
	write_text(path, "x");
	CHECK(resolve(e, &n, "/jobs/%ld/checkpoints/step-5.ckpt", id) == 0);
	CHECK(n.kind == FS_JOB_CKPT && n.id == id && !strcmp(n.name, "step-5.ckpt"));
	CHECK(fs_source_of(FS_JOB_CKPT) == FS_PASSTHROUGH);
	fs_real_path(e, &n, 0, real, sizeof real);
	snprintf(path, sizeof path, "%s/checkpoints/step-5.ckpt", dir);
	CHECK_MSG(!strcmp(real, path), "real path %s", real);
	CHECK(resolve(e, &n, "/jobs/%ld/checkpoints/step-6.ckpt.tmp", id) == -ENOENT);
	CHECK(resolve(e, &n, "/jobs/%ld/checkpoints/.hidden", id) == -ENOENT);
	CHECK(resolve(e, &n, "/jobs/%ld/checkpoints/sub", id) == -ENOENT);   /* not a file */
	CHECK(resolve(e, &n, "/jobs/%ld/checkpoints/nosuch", id) == -ENOENT);
	CHECK(resolve(e, &n, "/jobs/%ld/checkpoints/step-5.ckpt/x", id) == -ENOTDIR);
	snprintf(path, sizeof path, "/jobs/%ld/checkpoints", id);
	CHECK(list(e, path, &l) == 0);
	CHECK_MSG(strstr(l.text, " step-5.ckpt ") && !strstr(l.text, ".tmp") &&
		  !strstr(l.text, "hidden"), "listing: %s", l.text);
	dlh_engine_close(e);
}

TEST(tree_a_file_used_as_a_directory_is_enotdir)
{
	char state[512];
	const char *paths[] = {
		"/README/x", "/queue/x", "/pool/summary/x", "/pool/ctl/x", "/pool/types/x",
		"/pool/nodes/here/cpus/x", "/pool/nodes/here/cpu/0/job/x",
		"/pool/nodes/gpu01/gpus/0/model/x", "/jobs/new/x", "/jobs/errors/x",
		"/README/x/y",
	};
	struct dlh_engine *e = tree_engine(state, sizeof state, "tree-notdir");
	struct fs_node n;
	CHECK(e != NULL);
	for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
		int rc = fs_resolve(e, paths[i], &n);
		CHECK_MSG(rc == -ENOTDIR, "%s: %d", paths[i], rc);
	}
	long id = submit_named(e);
	CHECK(id > 0);
	CHECK(resolve(e, &n, "/jobs/%ld/spec/x", id) == -ENOTDIR);
	CHECK(resolve(e, &n, "/jobs/%ld/ctl/x", id) == -ENOTDIR);
	dlh_engine_close(e);
}

TEST(tree_unknown_names_are_enoent)
{
	char state[512];
	const char *paths[] = {
		"/nosuch", "/readme", "/pool/nosuch", "/pool/nodes/nosuch", "/pool/nodes/here/nosuch",
		"/jobs/nosuch", "/jobs/1", "/nosuch/x",
	};
	struct dlh_engine *e = tree_engine(state, sizeof state, "tree-enoent");
	struct fs_node n;
	CHECK(e != NULL);
	for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
		int rc = fs_resolve(e, paths[i], &n);
		CHECK_MSG(rc == -ENOENT, "%s: %d", paths[i], rc);
	}
	dlh_engine_close(e);
}

TEST(tree_overlong_component_is_enametoolong)
{
	char state[512], path[LONG_NAME + 8];
	struct dlh_engine *e = tree_engine(state, sizeof state, "tree-long");
	struct fs_node n;
	CHECK(e != NULL);
	path[0] = '/';
	memset(path + 1, 'a', LONG_NAME);
	path[LONG_NAME + 1] = '\0';
	/* fs_resolve's own answer; tree.h names only ENOENT and ENOTDIR */
	CHECK(fs_resolve(e, path, &n) == -ENAMETOOLONG);
	dlh_engine_close(e);
}

TEST(tree_real_paths_of_passthrough_files)
{
	char state[512], dir[4096], real[4096], want[4200];
	const struct { enum fs_kind kind; const char *file; } files[] = {
		{ FS_JOB_SPEC, "spec.ini" }, { FS_JOB_CSV, "metrics.csv" }, { FS_JOB_PLAN, "plan" },
		{ FS_JOB_LOG, "log" }, { FS_JOB_LRFIND, "lr_finder" }, { FS_JOB_ESTIMATE, "estimate" },
	};
	struct dlh_engine *e = tree_engine(state, sizeof state, "tree-real");
	CHECK(e != NULL);
	dlh_engine_job_dir(e, 7, dir, sizeof dir);
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		struct fs_node n = { .kind = files[i].kind, .id = 7 };
		CHECK(fs_source_of(files[i].kind) == FS_PASSTHROUGH);
		fs_real_path(e, &n, 0, real, sizeof real);
		snprintf(want, sizeof want, "%s/%s", dir, files[i].file);
		CHECK_MSG(!strcmp(real, want), "kind %d at %s, want %s", files[i].kind, real, want);
	}
	dlh_engine_close(e);
}

TEST(tree_source_of_each_kind)
{
	const enum fs_kind dirs[] = {
		FS_ROOT, FS_POOL, FS_POOL_NODES, FS_NODE, FS_NODE_GPUS, FS_NODE_GPU,
		FS_NODE_CPU_DIR, FS_NODE_CPU, FS_JOBS, FS_JOB, FS_JOB_CKPTS, FS_JOB_PLOTS,
	};
	const enum fs_kind generated[] = {
		FS_README, FS_POOL_SUMMARY, FS_POOL_TYPES, FS_POOL_CALIB, FS_POOL_LIMITS, FS_NODE_HOST,
		FS_NODE_ROLE,
		FS_NODE_CPUS, FS_NODE_USED, FS_NODE_MEMORY, FS_NODE_MODEL, FS_NODE_JOBS,
		FS_NODE_GPU_MODEL, FS_NODE_GPU_MEMORY, FS_NODE_GPU_STATE, FS_NODE_GPU_JOB,
		FS_NODE_DEVICES, FS_NODE_ISOLATION, FS_NODE_CPU_JOB, FS_QUEUE, FS_JOB_STATUS,
		FS_JOB_PROGRESS, FS_JOB_METRICS, FS_JOB_RESULT, FS_JOB_PLOT_LOSS, FS_JOB_PLOT_ACCURACY,
		FS_JOB_PLOT_THROUGHPUT, FS_JOB_PLOT_PROGRESS, FS_JOB_REPORT,
	};
	for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
		CHECK_MSG(fs_source_of(dirs[i]) == FS_DIR, "kind %d", dirs[i]);
	for (size_t i = 0; i < sizeof generated / sizeof generated[0]; i++)
		CHECK_MSG(fs_source_of(generated[i]) == FS_GENERATED, "kind %d", generated[i]);
	CHECK(fs_source_of(FS_JOB_CTL) == FS_CONTROL && fs_source_of(FS_POOL_CTL) == FS_CONTROL);
	CHECK(fs_source_of(FS_JOBS_NEW) == FS_TRANSACTION);
	CHECK(fs_source_of(FS_JOB_LINK) == FS_SYMLINK);
}

TEST(tree_lists_fixed_entries_nodes_and_devices)
{
	char state[512];
	struct dlh_engine *e = tree_engine(state, sizeof state, "tree-list");
	struct names l;
	CHECK(e != NULL);
	CHECK(list(e, "/", &l) == 0);
	CHECK_MSG(!strcmp(l.text, ". .. README pool jobs queue prometheus "), "/: %s", l.text);
	CHECK(list(e, "/prometheus", &l) == 0);
	CHECK_MSG(!strcmp(l.text, ". .. dlhfs.prom "), "/prometheus: %s", l.text);
	CHECK(list(e, "/pool", &l) == 0);
	CHECK_MSG(!strcmp(l.text, ". .. summary types nodes calibration limits ctl "), "/pool: %s", l.text);
	CHECK(list(e, "/pool/nodes", &l) == 0);
	CHECK_MSG(!strcmp(l.text, ". .. gpu01 here "), "/pool/nodes: %s", l.text);
	CHECK(list(e, "/pool/nodes/here/cpu", &l) == 0);
	CHECK_MSG(!strcmp(l.text, ". .. 0 1 "), "cpu/: %s", l.text);
	CHECK(list(e, "/pool/nodes/gpu01/gpus", &l) == 0);
	CHECK_MSG(!strcmp(l.text, ". .. 0 1 2 3 4 5 6 7 "), "gpus/: %s", l.text);
	CHECK(list(e, "/pool/nodes/here/gpus", &l) == 0);
	CHECK_MSG(!strcmp(l.text, ". .. "), "gpus/ of a CPU node: %s", l.text);
	CHECK(list(e, "/pool/nodes/gpu01/gpus/0", &l) == 0);
	CHECK_MSG(!strcmp(l.text, ". .. model memory state job "), "gpus/0: %s", l.text);
	CHECK(list(e, "/jobs", &l) == 0);
	CHECK_MSG(!strcmp(l.text, ". .. new errors index "), "/jobs: %s", l.text);
	/* a fill that says "full" ends the listing there */
	struct fs_node n;
	CHECK(fs_resolve(e, "/", &n) == 0);
	memset(&l, 0, sizeof l);
	l.stop_after = 3;
	CHECK(fs_list(e, &n, fill_name, &l) == 0);
	CHECK_MSG(!strcmp(l.text, ". .. README "), "stopped: %s", l.text);
	dlh_engine_close(e);
}

int main(void)
{
	if (tmp_root_make())
		return 1;
	RUN(tree_root_and_its_entries);
	RUN(tree_pool_entries);
	RUN(tree_pool_nodes_are_the_pool_file_nodes_with_their_files);
	RUN(tree_cpu_slots_are_numbers_below_the_node_cores);
	RUN(tree_gpus_are_numbers_below_the_node_gpus);
	RUN(tree_jobs_new_and_errors);
	RUN(tree_job_dir_maps_each_file_of_a_job);
	RUN(tree_job_result_appears_once_the_job_has_ended);
	RUN(tree_job_plots_and_report_are_listed_and_private);
	RUN(tree_job_lr_finder_and_estimate_appear_once_written);
	RUN(tree_job_name_is_a_symlink_to_its_newest_job);
	RUN(tree_checkpoints_are_the_regular_files_of_the_job_checkpoints_dir);
	RUN(tree_a_file_used_as_a_directory_is_enotdir);
	RUN(tree_unknown_names_are_enoent);
	RUN(tree_overlong_component_is_enametoolong);
	RUN(tree_real_paths_of_passthrough_files);
	RUN(tree_source_of_each_kind);
	RUN(tree_lists_fixed_entries_nodes_and_devices);
	tmp_root_remove();
	return CHECK_EXIT();
}
