/* tree.c - the file tree of the mount: paths to nodes, and what each node is */
#include "fs/tree.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The fixed children of a directory kind. Path constants live here. */
struct fs_entry {
	const char *name;      /* path component */
	enum fs_kind kind;     /* node it names */
};

static const struct fs_entry root_entries[] = {
	{ "README", FS_README }, { "pool", FS_POOL }, { "jobs", FS_JOBS }, { "queue", FS_QUEUE },
	{ NULL, 0 },
};
static const struct fs_entry pool_entries[] = {
	{ "summary", FS_POOL_SUMMARY }, { "nodes", FS_POOL_NODES }, { NULL, 0 },
};
static const struct fs_entry node_entries[] = {
	{ "cpus", FS_NODE_CPUS }, { "cpus_used", FS_NODE_USED }, { "memory", FS_NODE_MEMORY },
	{ "cpu_model", FS_NODE_MODEL }, { "jobs", FS_NODE_JOBS }, { "gpus", FS_NODE_GPUS },
	{ "devices", FS_NODE_DEVICES }, { "cpu", FS_NODE_CPU_DIR }, { "isolation", FS_NODE_ISOLATION },
	{ NULL, 0 },
};
static const struct fs_entry cpu_entries[] = {
	{ "job", FS_NODE_CPU_JOB }, { NULL, 0 },
};
static const struct fs_entry jobs_entries[] = {
	{ "new", FS_JOBS_NEW }, { "errors", FS_JOBS_ERRORS }, { NULL, 0 },
};
static const struct fs_entry job_entries[] = {
	{ "spec", FS_JOB_SPEC }, { "status", FS_JOB_STATUS }, { "progress", FS_JOB_PROGRESS },
	{ "metrics", FS_JOB_METRICS }, { "metrics.csv", FS_JOB_CSV }, { "estimate", FS_JOB_ESTIMATE },
	{ "plan", FS_JOB_PLAN },
	{ "log", FS_JOB_LOG }, { "checkpoints", FS_JOB_CKPTS }, { "result", FS_JOB_RESULT },
	{ "lr_finder", FS_JOB_LRFIND }, { "ctl", FS_JOB_CTL }, { NULL, 0 },
};

/* Real files behind passthrough nodes, relative to the job's directory. */
static const struct { enum fs_kind kind; const char *file; } real_files[] = {
	{ FS_JOB_SPEC, "spec.ini" }, { FS_JOB_CSV, "metrics.csv" },
	{ FS_JOB_PLAN, "plan" }, { FS_JOB_LOG, "log" }, { FS_JOB_LRFIND, "lr_finder" },
	{ FS_JOB_ESTIMATE, "estimate" },
};

enum fs_source fs_source_of(enum fs_kind k)
{
	switch (k) {
	case FS_ROOT: case FS_POOL: case FS_POOL_NODES: case FS_NODE: case FS_NODE_GPUS:
	case FS_NODE_CPU_DIR: case FS_NODE_CPU: case FS_JOBS: case FS_JOB: case FS_JOB_CKPTS:
		return FS_DIR;
	case FS_JOB_SPEC: case FS_JOB_CSV: case FS_JOB_PLAN: case FS_JOB_LOG:
	case FS_JOB_CKPT: case FS_JOBS_ERRORS: case FS_JOB_LRFIND: case FS_JOB_ESTIMATE:
		return FS_PASSTHROUGH;
	case FS_JOBS_NEW:
		return FS_TRANSACTION;
	case FS_JOB_CTL:
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
	case FS_NODE: return node_entries;
	case FS_NODE_CPU: return cpu_entries;
	case FS_JOBS: return jobs_entries;
	case FS_JOB: return job_entries;
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

/* 1 unless kind is a job file that appears only once written: lr_finder
 * (lr = auto's range test), estimate (jobs from before estimates had none). */
static int optional_written(struct dlh_engine *e, enum fs_kind kind, long id)
{
	struct fs_node n = { .kind = kind, .id = id };
	char path[4096];
	struct stat st;

	if (kind != FS_JOB_LRFIND && kind != FS_JOB_ESTIMATE)
		return 1;
	fs_real_path(e, &n, path, sizeof path);
	return stat(path, &st) == 0;
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
	struct dlh_job job;
	struct dlh_pool pool;
	switch (n->kind) {
	case FS_POOL_NODES:
		dlh_engine_pool(e, &pool, NULL);
		if (strcmp(name, pool.node.host))
			return -ENOENT;
		n->kind = FS_NODE;
		snprintf(n->name, sizeof n->name, "%s", name);
		return 0;
	case FS_NODE_CPU_DIR: {
		/* slot numbers: "0", or digits without a leading zero */
		long slot = !strcmp(name, "0") ? 0 : parse_id(name);
		if (slot < 0 || slot >= dlh_engine_holders(e, NULL, 0))
			return -ENOENT;
		n->kind = FS_NODE_CPU;
		n->id = slot;
		return 0;
	}
	case FS_JOBS: {
		long id = parse_id(name);
		if (id > 0) {
			if (dlh_engine_job(e, id, &job))
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
	case FS_JOB_CKPTS: {
		char dir[4096], path[4400];
		struct stat st;
		if (name[0] == '.' || strstr(name, ".tmp"))
			return -ENOENT;
		dlh_engine_job_dir(e, n->id, dir, sizeof dir);
		snprintf(path, sizeof path, "%s/checkpoints/%s", dir, name);
		if (stat(path, &st) || !S_ISREG(st.st_mode))
			return -ENOENT;
		n->kind = FS_JOB_CKPT;
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
		struct dlh_job job;
		if (dlh_engine_job(e, n->id, &job) || !dlh_status_terminal(job.status))
			return -ENOENT;
	}
	if (!optional_written(e, n->kind, n->id))
		return -ENOENT;
	return 0;
}

void fs_real_path(struct dlh_engine *e, const struct fs_node *n, char *buf, size_t len)
{
	char dir[4096];
	if (n->kind == FS_JOBS_ERRORS) {
		dlh_engine_errors_path(e, buf, len);
		return;
	}
	dlh_engine_job_dir(e, n->id, dir, sizeof dir);
	if (n->kind == FS_JOB_CKPT) {
		snprintf(buf, len, "%s/checkpoints/%s", dir, n->name);
		return;
	}
	for (size_t i = 0; i < sizeof real_files / sizeof real_files[0]; i++)
		if (real_files[i].kind == n->kind) {
			snprintf(buf, len, "%s/%s", dir, real_files[i].file);
			return;
		}
	snprintf(buf, len, "%s/.none", dir);
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
	if (n->kind == FS_POOL_NODES) {
		struct dlh_pool pool;
		dlh_engine_pool(e, &pool, NULL);
		fill(ctx, pool.node.host);
	} else if (n->kind == FS_NODE_CPU_DIR) {
		char name[32];
		int slots = dlh_engine_holders(e, NULL, 0);
		for (int s = 0; s < slots; s++) {
			snprintf(name, sizeof name, "%d", s);
			if (fill(ctx, name))
				break;
		}
	} else if (n->kind == FS_JOBS) {
		size_t count = dlh_engine_jobs(e, NULL, 0);
		long *ids = malloc((count + 1) * sizeof *ids);
		if (!ids)
			return -ENOMEM;
		size_t got = dlh_engine_jobs(e, ids, count);
		if (got < count)
			count = got; /* never more than fit: jobs may appear meanwhile */
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
	} else if (n->kind == FS_JOB_CKPTS) {
		char dir[4096], path[4200];
		dlh_engine_job_dir(e, n->id, dir, sizeof dir);
		snprintf(path, sizeof path, "%s/checkpoints", dir);
		DIR *d = opendir(path);
		if (!d)
			return 0;
		struct dirent *de;
		while ((de = readdir(d)))
			if (de->d_name[0] != '.' && !strstr(de->d_name, ".tmp") && fill(ctx, de->d_name))
				break;
		closedir(d);
	}
	return 0;
}
