/* tree.c - the file tree of the mount: paths to nodes, and what each node is */
#include "fs/tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/report/metrics.h"

/* The fixed children of a directory kind. Path constants live here. */
struct fs_entry {
	const char *name;      /* path component */
	enum fs_kind kind;     /* node it names */
};

static const struct fs_entry root_entries[] = {
	{ "README", FS_README }, { "pool", FS_POOL }, { "jobs", FS_JOBS }, { "queue", FS_QUEUE },
	{ "prometheus", FS_PROM }, { NULL, 0 },
};
static const struct fs_entry prom_entries[] = {
	{ "dlhfs.prom", FS_PROM_FILE }, { NULL, 0 },
};
static const struct fs_entry pool_entries[] = {
	{ "summary", FS_POOL_SUMMARY }, { "types", FS_POOL_TYPES }, { "nodes", FS_POOL_NODES },
	{ "calibration", FS_POOL_CALIB }, { "limits", FS_POOL_LIMITS }, { "ctl", FS_POOL_CTL },
	{ NULL, 0 },
};
static const struct fs_entry node_entries[] = {
	{ "cpus", FS_NODE_CPUS }, { "cpus_used", FS_NODE_USED }, { "memory", FS_NODE_MEMORY },
	{ "cpu_model", FS_NODE_MODEL }, { "jobs", FS_NODE_JOBS }, { "gpus", FS_NODE_GPUS },
	{ "devices", FS_NODE_DEVICES }, { "cpu", FS_NODE_CPU_DIR }, { "isolation", FS_NODE_ISOLATION },
	{ "host", FS_NODE_HOST }, { "role", FS_NODE_ROLE }, { "state", FS_NODE_STATE }, { NULL, 0 },
};
static const struct fs_entry gpu_entries[] = {
	{ "model", FS_NODE_GPU_MODEL }, { "memory", FS_NODE_GPU_MEMORY },
	{ "state", FS_NODE_GPU_STATE }, { "job", FS_NODE_GPU_JOB }, { NULL, 0 },
};
static const struct fs_entry cpu_entries[] = {
	{ "job", FS_NODE_CPU_JOB }, { NULL, 0 },
};
static const struct fs_entry jobs_entries[] = {
	{ "new", FS_JOBS_NEW }, { "errors", FS_JOBS_ERRORS }, { "index", FS_JOBS_INDEX },
	{ NULL, 0 },
};
static const struct fs_entry job_entries[] = {
	{ "spec", FS_JOB_SPEC }, { "status", FS_JOB_STATUS }, { "progress", FS_JOB_PROGRESS },
	{ "metrics", FS_JOB_METRICS }, { DLH_FILE_METRICS, FS_JOB_CSV }, { "estimate", FS_JOB_ESTIMATE },
	{ "plan", FS_JOB_PLAN },
	{ DLH_FILE_LOG, FS_JOB_LOG }, { DLH_DIR_CHECKPOINTS, FS_JOB_CKPTS }, { DLH_FILE_RESULT, FS_JOB_RESULT },
	{ DLH_DIR_LOGS, FS_JOB_LOGS }, { DLH_DIR_OUTPUT, FS_JOB_OUTPUT },
	{ "lr_finder", FS_JOB_LRFIND }, { "ctl", FS_JOB_CTL }, { "plots", FS_JOB_PLOTS },
	{ "report.html", FS_JOB_REPORT }, { NULL, 0 },
};
static const struct fs_entry plots_entries[] = {
	{ "loss.svg", FS_JOB_PLOT_LOSS }, { "accuracy.svg", FS_JOB_PLOT_ACCURACY },
	{ "throughput.svg", FS_JOB_PLOT_THROUGHPUT }, { "progress.svg", FS_JOB_PLOT_PROGRESS },
	{ NULL, 0 },
};

/* Real directories of a job whose regular files are served (the run's
 * owner writes them): the directory's kind, its files' kind, its name. */
static const struct { enum fs_kind dir, file; const char *name; } real_dirs[] = {
	{ FS_JOB_CKPTS, FS_JOB_CKPT, DLH_DIR_CHECKPOINTS },
	{ FS_JOB_LOGS, FS_JOB_RANKLOG, DLH_DIR_LOGS },
	{ FS_JOB_OUTPUT, FS_JOB_OUTFILE, DLH_DIR_OUTPUT },
};

/* The real directory a directory kind (or one of its files' kind) stands
 * for, or NULL. */
static const char *real_dir_of(enum fs_kind k)
{
	for (size_t i = 0; i < sizeof real_dirs / sizeof real_dirs[0]; i++)
		if (real_dirs[i].dir == k || real_dirs[i].file == k)
			return real_dirs[i].name;
	return NULL;
}

/* The kind of the files in directory kind k (FS_JOB_CKPTS: FS_JOB_CKPT). */
static enum fs_kind file_kind_of(enum fs_kind k)
{
	for (size_t i = 0; i < sizeof real_dirs / sizeof real_dirs[0]; i++)
		if (real_dirs[i].dir == k)
			return real_dirs[i].file;
	return k;
}

/* Real files behind passthrough nodes, relative to the job's directory. */
static const struct { enum fs_kind kind; const char *file; } real_files[] = {
	{ FS_JOB_SPEC, "spec.ini" }, { FS_JOB_CSV, DLH_FILE_METRICS },
	{ FS_JOB_PLAN, "plan" }, { FS_JOB_LOG, DLH_FILE_LOG }, { FS_JOB_LRFIND, "lr_finder" },
	{ FS_JOB_ESTIMATE, "estimate" },
};

int fs_private(enum fs_kind k)
{
	switch (k) {
	case FS_JOB_SPEC: case FS_JOB_METRICS: case FS_JOB_CSV: case FS_JOB_PLAN:
	case FS_JOB_LOG: case FS_JOB_CKPTS: case FS_JOB_CKPT: case FS_JOB_RESULT:
	case FS_JOB_LOGS: case FS_JOB_RANKLOG: case FS_JOB_OUTPUT: case FS_JOB_OUTFILE:
	case FS_JOB_ESTIMATE: case FS_JOB_LRFIND: case FS_JOB_PLOTS: case FS_JOB_PLOT_LOSS:
	case FS_JOB_PLOT_ACCURACY: case FS_JOB_PLOT_THROUGHPUT: case FS_JOB_PLOT_PROGRESS:
	case FS_JOB_PLOT_EXTRA: case FS_JOB_REPORT:
		return 1;
	default:
		return 0;
	}
}

enum fs_source fs_source_of(enum fs_kind k)
{
	switch (k) {
	case FS_ROOT: case FS_POOL: case FS_POOL_NODES: case FS_NODE: case FS_NODE_GPUS: case FS_PROM:
	case FS_NODE_GPU: case FS_NODE_CPU_DIR: case FS_NODE_CPU: case FS_JOBS: case FS_JOB:
	case FS_JOB_CKPTS: case FS_JOB_LOGS: case FS_JOB_PLOTS: case FS_JOB_OUTPUT:
		return FS_DIR;
	case FS_JOB_SPEC: case FS_JOB_CSV: case FS_JOB_PLAN: case FS_JOB_LOG:
	case FS_JOB_CKPT: case FS_JOBS_ERRORS: case FS_JOB_LRFIND: case FS_JOB_ESTIMATE:
	case FS_JOB_RANKLOG: case FS_JOB_OUTFILE:
		return FS_PASSTHROUGH;
	case FS_JOBS_NEW:
		return FS_TRANSACTION;
	case FS_JOB_CTL: case FS_POOL_CTL:
		return FS_CONTROL;
	case FS_JOB_LINK:
		return FS_SYMLINK;
	default:
		return FS_GENERATED;
	}
}

static const struct fs_entry *entries_of(enum fs_kind k)
{
	switch (k) {
	case FS_ROOT: return root_entries;
	case FS_POOL: return pool_entries;
	case FS_PROM: return prom_entries;
	case FS_NODE: return node_entries;
	case FS_NODE_CPU: return cpu_entries;
	case FS_NODE_GPU: return gpu_entries;
	case FS_JOBS: return jobs_entries;
	case FS_JOB: return job_entries;
	case FS_JOB_PLOTS: return plots_entries;
	default: return NULL;
	}
}

/* A job id: all digits, no leading zero. Returns it, or -1. */
static long parse_id(const char *s)
{
	if (!*s || *s == '0' || strlen(s) > 18)
		return -1;
	for (const char *p = s; *p; p++)
		if (*p < '0' || *p > '9')
			return -1;
	return strtol(s, NULL, 10);
}

/* A device number: "0", or digits without a leading zero. Returns it, or -1. */
static long parse_index(const char *s)
{
	return !strcmp(s, "0") ? 0 : parse_id(s);
}

/* A copy of the engine's pool (malloc'd: it is large), or NULL. */
static struct dlh_pool *pool_copy(struct dlh_engine *e)
{
	struct dlh_pool *p = malloc(sizeof *p);
	if (p)
		dlh_engine_pool(e, p, NULL);
	return p;
}

/* The entries of node's cpu/ (dir FS_NODE_CPU_DIR) or gpus/ directory:
 * its CPU slots or GPUs. Returns the count, or -ENOENT (no such node). */
static int device_count(const struct dlh_pool *p, enum fs_kind dir, const char *node)
{
	int k = dlh_pool_find_node(p, node);
	if (k < 0)
		return k;
	return dir == FS_NODE_GPUS ? dlh_pool_node_gpus(p, k) : p->nodes[k].cpus;
}

/* Steps into a node of /pool/nodes, or a device number of a node's cpu/
 * or gpus/. Returns 0, -ENOENT, or -ENOMEM. */
static int step_pool(struct dlh_engine *e, struct fs_node *n, const char *name)
{
	struct dlh_pool *p = pool_copy(e);
	int rc = -ENOENT;
	long i;
	if (!p)
		return -ENOMEM;
	if (n->kind == FS_POOL_NODES) {
		if (dlh_pool_find_node(p, name) >= 0) {
			n->kind = FS_NODE;
			snprintf(n->name, sizeof n->name, "%s", name);
			rc = 0;
		}
	} else if ((i = parse_index(name)) >= 0 && i < device_count(p, n->kind, n->name)) {
		n->kind = n->kind == FS_NODE_GPUS ? FS_NODE_GPU : FS_NODE_CPU;
		n->id = i;
		rc = 0;
	}
	free(p);
	return rc;
}

/* Lists /pool/nodes, or a node's cpu/ or gpus/ (numbers). Returns 0, or -ENOMEM. */
static int list_pool(struct dlh_engine *e, const struct fs_node *n,
		     int (*fill)(void *ctx, const char *name), void *ctx)
{
	struct dlh_pool *p = pool_copy(e);
	char name[32];
	if (!p)
		return -ENOMEM;
	if (n->kind == FS_POOL_NODES) {
		for (int k = 0; k < p->nnodes; k++)
			if (!p->nodes[k].removed && fill(ctx, p->nodes[k].name))
				break;
	} else {
		int count = device_count(p, n->kind, n->name);
		for (int i = 0; i < count; i++) {
			snprintf(name, sizeof name, "%d", i);
			if (fill(ctx, name))
				break;
		}
	}
	free(p);
	return 0;
}

/* 1 unless kind is a job file that appears only once written: lr_finder
 * (lr = auto's range test), estimate (jobs from before estimates had none). */
static int optional_written(struct dlh_engine *e, enum fs_kind kind, long id)
{
	struct fs_node n = { .kind = kind, .id = id };
	struct stat st;

	if (kind != FS_JOB_LRFIND && kind != FS_JOB_ESTIMATE)
		return 1;
	return fs_real_stat(e, &n, 0, &st) == 0;
}

/* The extra columns job id's metrics.csv names (the run's owner writes
 * it: read as the plots read it, never waiting), those whose plot's name
 * is not one of plots/'s own. */
static void extra_columns(struct dlh_engine *e, long id, struct dlh_metrics_columns *c)
{
	char dir[4096], csv[4200], svg[DLH_METRICS_NAME_MAX + 8];
	dlh_engine_job_dir(e, id, dir, sizeof dir);
	snprintf(csv, sizeof csv, "%s/" DLH_FILE_METRICS, dir);
	if (dlh_metrics_columns_read(csv, c))
		memset(c, 0, sizeof *c);
	for (int i = 0; i < c->nextra; i++) {
		snprintf(svg, sizeof svg, "%s.svg", c->extra[i]);
		for (const struct fs_entry *ent = plots_entries; ent->name; ent++)
			if (!strcmp(ent->name, svg))
				c->extra[i][0] = '\0';   /* throughput, progress: report.html draws it */
	}
}

/* Steps from node n into the child called name. Returns 0, or -ENOENT. */
static int step(struct dlh_engine *e, struct fs_node *n, const char *name)
{
	const struct fs_entry *ent = entries_of(n->kind);
	for (; ent && ent->name; ent++) {
		if (!strcmp(ent->name, name)) {
			n->kind = ent->kind;
			return 0;
		}
	}
	struct dlh_job_brief job;
	switch (n->kind) {
	case FS_POOL_NODES:
	case FS_NODE_CPU_DIR:
	case FS_NODE_GPUS:
		return step_pool(e, n, name);
	case FS_JOBS: {
		long id = parse_id(name);
		if (id > 0) {
			if (dlh_engine_job_brief(e, id, &job))
				return -ENOENT;
			n->kind = FS_JOB;
			n->id = id;
			return 0;
		}
		id = dlh_engine_find_name(e, name);
		if (id < 0)
			return -ENOENT;
		n->kind = FS_JOB_LINK;
		n->id = id;
		return 0;
	}
	case FS_JOB:
		return -ENOENT;
	case FS_JOB_PLOTS: {
		struct dlh_metrics_columns c;
		size_t len = strlen(name);
		if (len < 5 || strcmp(name + len - 4, ".svg"))
			return -ENOENT;
		extra_columns(e, n->id, &c);
		for (int i = 0; i < c.nextra; i++)
			if (strlen(c.extra[i]) == len - 4 && !memcmp(c.extra[i], name, len - 4)) {
				n->kind = FS_JOB_PLOT_EXTRA;
				snprintf(n->name, sizeof n->name, "%s", c.extra[i]);
				return 0;
			}
		return -ENOENT;
	}
	case FS_JOB_CKPTS: case FS_JOB_LOGS: case FS_JOB_OUTPUT: {
		char dir[4096], rel[300];
		struct stat st;
		if (name[0] == '.' || strstr(name, ".tmp"))
			return -ENOENT;
		dlh_engine_job_dir(e, n->id, dir, sizeof dir);
		snprintf(rel, sizeof rel, "%s/%s", real_dir_of(n->kind), name);
		if (dlh_stat_beneath(dir, rel, &st) || !S_ISREG(st.st_mode))
			return -ENOENT;
		n->kind = file_kind_of(n->kind);
		snprintf(n->name, sizeof n->name, "%s", name);
		return 0;
	}
	default:
		return -ENOENT;
	}
}

int fs_resolve(struct dlh_engine *e, const char *path, struct fs_node *n)
{
	memset(n, 0, sizeof *n);
	n->kind = FS_ROOT;
	char comp[256];
	const char *p = path;
	while (*p) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		size_t len = strcspn(p, "/");
		if (len >= sizeof comp)
			return -ENAMETOOLONG;
		memcpy(comp, p, len);
		comp[len] = '\0';
		p += len;
		if (fs_source_of(n->kind) != FS_DIR)
			return n->kind == FS_JOB_LINK ? -ENOENT : -ENOTDIR;
		int rc = step(e, n, comp);
		if (rc)
			return rc;
	}
	/* result exists once the job has ended */
	if (n->kind == FS_JOB_RESULT) {
		struct dlh_job_brief job;
		if (dlh_engine_job_brief(e, n->id, &job) || !dlh_status_terminal(job.status))
			return -ENOENT;
	}
	if (!optional_written(e, n->kind, n->id))
		return -ENOENT;
	return 0;
}

static int real_rel(const struct fs_node *n, char *rel, size_t len);

void fs_real_path(struct dlh_engine *e, const struct fs_node *n, uid_t reader, char *buf,
		  size_t len)
{
	char dir[4096], rel[300];
	if (n->kind == FS_JOBS_ERRORS) {
		dlh_engine_errors_path(e, reader, buf, len);
		return;
	}
	dlh_engine_job_dir(e, n->id, dir, sizeof dir);
	if (real_rel(n, rel, sizeof rel))
		snprintf(rel, sizeof rel, ".none");
	snprintf(buf, len, "%s/%s", dir, rel);
}

/* The real file of n relative to its job's directory into rel. Returns 0,
 * or -ENOENT when n has none. */
static int real_rel(const struct fs_node *n, char *rel, size_t len)
{
	if (n->kind == FS_JOB_CKPT || n->kind == FS_JOB_RANKLOG || n->kind == FS_JOB_OUTFILE) {
		snprintf(rel, len, "%s/%s", real_dir_of(n->kind), n->name);
		return 0;
	}
	for (size_t i = 0; i < sizeof real_files / sizeof real_files[0]; i++)
		if (real_files[i].kind == n->kind) {
			snprintf(rel, len, "%s", real_files[i].file);
			return 0;
		}
	return -ENOENT;
}

int fs_real_open(struct dlh_engine *e, const struct fs_node *n, uid_t reader)
{
	char dir[4096], rel[300];
	if (n->kind == FS_JOBS_ERRORS) {
		dlh_engine_errors_path(e, reader, dir, sizeof dir);
		int fd = open(dir, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		return fd < 0 ? -errno : fd;
	}
	if (real_rel(n, rel, sizeof rel))
		return -ENOENT;
	dlh_engine_job_dir(e, n->id, dir, sizeof dir);
	return dlh_open_beneath(dir, rel);
}

int fs_real_stat(struct dlh_engine *e, const struct fs_node *n, uid_t reader, struct stat *st)
{
	char dir[4096], rel[300];
	if (n->kind == FS_JOBS_ERRORS) {
		dlh_engine_errors_path(e, reader, dir, sizeof dir);
		return lstat(dir, st) == 0 && S_ISREG(st->st_mode) ? 0 : -ENOENT;
	}
	if (real_rel(n, rel, sizeof rel))
		return -ENOENT;
	dlh_engine_job_dir(e, n->id, dir, sizeof dir);
	int rc = dlh_stat_beneath(dir, rel, st);
	return rc ? rc : S_ISREG(st->st_mode) ? 0 : -EINVAL;
}

int fs_list(struct dlh_engine *e, const struct fs_node *n,
	    int (*fill)(void *ctx, const char *name), void *ctx)
{
	if (fill(ctx, ".") || fill(ctx, ".."))
		return 0;
	const struct fs_entry *ent = entries_of(n->kind);
	struct dlh_job job;
	int terminal = n->kind == FS_JOB && !dlh_engine_job(e, n->id, &job) &&
		       dlh_status_terminal(job.status);
	for (; ent && ent->name; ent++) {
		if ((ent->kind == FS_JOB_RESULT && !terminal) || !optional_written(e, ent->kind, n->id))
			continue;
		if (fill(ctx, ent->name))
			return 0;
	}
	if (n->kind == FS_POOL_NODES || n->kind == FS_NODE_CPU_DIR || n->kind == FS_NODE_GPUS) {
		return list_pool(e, n, fill, ctx);
	} else if (n->kind == FS_JOBS) {
		size_t count;
		long *ids = dlh_engine_job_ids(e, &count);
		if (!ids)
			return -ENOMEM;
		char name[32];
		for (size_t i = 0; i < count; i++) {
			snprintf(name, sizeof name, "%ld", ids[i]);
			if (fill(ctx, name))
				break;
		}
		/* each name once, for its newest job */
		for (size_t i = count; i-- > 0;) {
			if (dlh_engine_job(e, ids[i], &job) || !job.spec.name[0])
				continue;
			if (dlh_engine_find_name(e, job.spec.name) == ids[i] && fill(ctx, job.spec.name))
				break;
		}
		free(ids);
	} else if (n->kind == FS_JOB_PLOTS) {
		struct dlh_metrics_columns c;
		char svg[DLH_METRICS_NAME_MAX + 8];
		extra_columns(e, n->id, &c);
		for (int i = 0; i < c.nextra; i++) {
			snprintf(svg, sizeof svg, "%s.svg", c.extra[i]);
			if (c.extra[i][0] && fill(ctx, svg))
				break;
		}
	} else if (n->kind == FS_JOB_CKPTS || n->kind == FS_JOB_LOGS || n->kind == FS_JOB_OUTPUT) {
		char dir[4096];
		dlh_engine_job_dir(e, n->id, dir, sizeof dir);
		/* the run's owner writes there: links and other odd entries are not shown */
		DIR *d = dlh_opendir_beneath(dir, real_dir_of(n->kind));
		if (!d)
			return 0;
		struct dirent *de;
		struct stat st;
		while ((de = readdir(d)))
			if (de->d_name[0] != '.' && !strstr(de->d_name, ".tmp") &&
			    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			    S_ISREG(st.st_mode) && fill(ctx, de->d_name))
				break;
		closedir(d);
	}
	return 0;
}
