/* table.c - the job table and the job records in the state dir: paths, logs, saves, lookups, loading
 *
 * The bottom of jobs/: nothing here calls up into the queue, the
 * supervisor or submit (table.h). */
#include "engine/table/table.h"

#include <dirent.h>
#include <errno.h>
#include <pwd.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/run/join.h"
#include "engine/run/owner.h"
#include "engine/util/util.h"

/* Now, rounded to the millisecond: job records store times with %.3f, so
 * what is rendered before and after a reload is the same. */
double eng_stamp(void)
{
	return floor(dlh_now() * 1000.0 + 0.5) / 1000.0;
}

void eng_job_dir(const struct dlh_engine *e, long id, char *buf, size_t len)
{
	snprintf(buf, len, "%s/jobs/%ld", e->state, id);
}

int eng_run_note(const struct dlh_engine *e, long id, char *out, size_t len)
{
	char dir[4096];
	out[0] = '\0';
	if (!e->backend.ops->note)
		return 0;
	eng_job_dir(e, id, dir, sizeof dir);
	return e->backend.ops->note(&e->backend, dir, out, len);
}

void eng_job_file(const struct dlh_engine *e, long id, const char *name,
		     char *buf, size_t len)
{
	snprintf(buf, len, "%s/jobs/%ld/%s", e->state, id, name);
}

__attribute__((format(printf, 3, 4)))
void eng_job_log(const struct dlh_engine *e, const struct dlh_job *j, const char *fmt, ...)
{
	char path[4096], when[32], msg[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	dlh_time_iso(dlh_now(), when, sizeof when);
	char line[2200];
	snprintf(line, sizeof line, "%s dlhfs: %s", when, msg);
	eng_job_file(e, j->id, DLH_FILE_LOG, path, sizeof path);
	dlh_append_line(path, line);
}

void eng_job_save(const struct dlh_engine *e, const struct dlh_job *j)
{
	char dir[4096];
	eng_job_dir(e, j->id, dir, sizeof dir);
	int rc = dlh_job_save(j, dir);
	if (rc)
		fprintf(stderr, "dlhfs: cannot save job %ld: %s\n", j->id, strerror(-rc));
}

struct dlh_job *eng_find(const struct dlh_engine *e, long id)
{
	size_t lo = 0, hi = e->njobs;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (e->jobs[mid]->id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < e->njobs && e->jobs[lo]->id == id ? e->jobs[lo] : NULL;
}

int eng_insert(struct dlh_engine *e, struct dlh_job *j)
{
	if (e->njobs == e->cap) {
		size_t cap = e->cap ? e->cap * 2 : 64;
		struct dlh_job **p = realloc(e->jobs, cap * sizeof *p);
		if (!p)
			return -ENOMEM;
		e->jobs = p;
		e->cap = cap;
	}
	size_t i = e->njobs;
	while (i > 0 && e->jobs[i - 1]->id > j->id) {
		e->jobs[i] = e->jobs[i - 1];
		i--;
	}
	e->jobs[i] = j;
	e->njobs++;
	return 0;
}

int eng_purge(struct dlh_engine *e, struct dlh_job *j, char *gone, size_t len)
{
	char dir[4096];
	/* nor while its nodes are asked about its data: that thread holds j */
	if (!dlh_status_terminal(j->status) || j->run.pid || j->seeing)
		return -EBUSY;
	eng_job_dir(e, j->id, dir, sizeof dir);
	snprintf(gone, len, "%s/jobs/" ENG_PURGED_PREFIX "%ld", e->state, j->id);
	if (rename(dir, gone) < 0 && errno != ENOENT)
		return -errno;
	size_t i = 0;
	while (i < e->njobs && e->jobs[i] != j)
		i++;
	if (i < e->njobs) {
		memmove(e->jobs + i, e->jobs + i + 1, (e->njobs - i - 1) * sizeof *e->jobs);
		e->njobs--;
	}
	free(j);
	return 0;
}

int eng_spend_id(struct dlh_engine *e, long id)
{
	char path[4096], next[32];
	snprintf(path, sizeof path, "%s/next_id", e->state);
	snprintf(next, sizeof next, "%ld\n", id + 1);
	int rc = dlh_write_atomic(path, next, strlen(next));
	if (!rc && id + 1 > e->next_id)
		e->next_id = id + 1;
	return rc;
}

/* Raises e->next_id to what STATE/next_id says, when it says more. */
static void read_next_id(struct dlh_engine *e)
{
	char path[4096], *text;
	snprintf(path, sizeof path, "%s/next_id", e->state);
	if (!dlh_read_file(path, 64, &text, NULL)) {
		long n = strtol(text, NULL, 10);
		if (n > e->next_id)
			e->next_id = n;
		free(text);
	}
}

int eng_table_load(struct dlh_engine *e, char *err, size_t errlen)
{
	char dir[4096];
	read_next_id(e);
	snprintf(dir, sizeof dir, "%s/jobs", e->state);
	DIR *d = opendir(dir);
	if (!d) {
		snprintf(err, errlen, "cannot open \"%s\": %s", dir, strerror(errno));
		return -errno;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		char *end;
		if (!strncmp(de->d_name, ENG_PURGED_PREFIX, strlen(ENG_PURGED_PREFIX))) {
			char gone[4200];   /* a purge cut short by a stop: finished now */
			snprintf(gone, sizeof gone, "%s/%s", dir, de->d_name);
			dlh_remove_tree(gone);
			continue;
		}
		long id = strtol(de->d_name, &end, 10);
		if (*end || id <= 0)
			continue;
		struct dlh_job *j = malloc(sizeof *j);
		if (!j) {
			closedir(d);
			return -ENOMEM;
		}
		char jd[4096];
		eng_job_dir(e, id, jd, sizeof jd);
		int rc = dlh_job_load(j, jd);
		if (rc || j->id != id) {
			fprintf(stderr, "dlhfs: skipping \"%s\": unreadable job record (%s)\n", jd,
				strerror(rc ? -rc : EINVAL));
			free(j);
			if (id >= e->next_id)
				e->next_id = id + 1;
			continue;
		}
		if (eng_insert(e, j)) {
			free(j);
			closedir(d);
			return -ENOMEM;
		}
		if (id >= e->next_id)
			e->next_id = id + 1;
	}
	closedir(d);
	return 0;
}

void eng_table_free(struct dlh_engine *e)
{
	for (size_t i = 0; i < e->njobs; i++)
		free(e->jobs[i]);
	free(e->jobs);
	e->jobs = NULL;
	e->njobs = e->cap = 0;
}

/* The contract's variables of job id's run of ranks ranks (names in its
 * directory) and the math libraries' threads. */
static void contract_env(const struct dlh_engine *e, long id, int ranks, struct eng_env *env)
{
	char dir[4096];
	eng_job_dir(e, id, dir, sizeof dir);
	snprintf(env->id, sizeof env->id, DLH_ENV_JOB_ID "=%ld", id);
	snprintf(env->dir, sizeof env->dir, DLH_ENV_JOB_DIR "=%s", dir);
	snprintf(env->csv, sizeof env->csv, DLH_ENV_METRICS_CSV "=%s/" DLH_FILE_METRICS, dir);
	snprintf(env->ckpt, sizeof env->ckpt, DLH_ENV_CHECKPOINT_DIR "=%s/" DLH_DIR_CHECKPOINTS, dir);
	snprintf(env->out, sizeof env->out, DLH_ENV_OUTPUT_DIR "=%s/" DLH_DIR_OUTPUT, dir);
	snprintf(env->ranks, sizeof env->ranks, DLH_ENV_RANKS "=%d", ranks);
	int n = 0;
	env->v[n++] = "OPENBLAS_NUM_THREADS=1";   /* one core per rank */
	env->v[n++] = "OMP_NUM_THREADS=1";
	env->v[n++] = env->id;
	env->v[n++] = env->dir;
	env->v[n++] = env->csv;
	env->v[n++] = env->ckpt;
	env->v[n++] = env->out;
	env->v[n++] = env->ranks;
	env->v[n] = NULL;
}

/* DLH_MASTER_ADDR and DLH_MASTER_PORT (see eng_run_env). */
static void run_master(const struct dlh_engine *e, long id, const struct dlh_plan *plan, int nhosts,
		       struct eng_env *env)
{
	char host[DLH_HOST_MAX + 1] = "127.0.0.1";
	int k = plan->ranks > 0 ? plan->node[0] : -1, port = 0;
	if (k >= 0 && k != e->pool.local)
		snprintf(host, sizeof host, "%s", e->pool.nodes[k].host);
	else if (nhosts > 0 && gethostname(host, sizeof host - 1) < 0)
		snprintf(host, sizeof host, "localhost");
	if (k < 0 || k == e->pool.local)
		port = dlh_free_port();
	else   /* free there when it was last asked (a probe, its nodes' check) */
		port = e->pool.nodes[k].free_port;
	if (!port)
		port = 29500 + (int)(id % 500);
	snprintf(env->master_addr, sizeof env->master_addr, "DLH_MASTER_ADDR=%s", host);
	snprintf(env->master_port, sizeof env->master_port, "DLH_MASTER_PORT=%d", port);
	eng_env_add(env, env->master_addr);
	eng_env_add(env, env->master_port);
}

/* DLH_RANK_NODES and, on GPUs, DLH_RANK_GPUS of plan's ranks. */
static void env_ranks(struct eng_env *env, const struct dlh_plan *plan)
{
	size_t a = (size_t)snprintf(env->nodes, sizeof env->nodes, DLH_ENV_RANK_NODES "=");
	size_t b = (size_t)snprintf(env->gpus, sizeof env->gpus, DLH_ENV_RANK_GPUS "=");
	int node = 0;
	for (int r = 0; r < plan->ranks && a < sizeof env->nodes && b < sizeof env->gpus; r++) {
		node += r > 0 && plan->node[r] != plan->node[r - 1];   /* a node's ranks are consecutive */
		a += (size_t)snprintf(env->nodes + a, sizeof env->nodes - a, "%s%d", r ? "," : "", node);
		b += (size_t)snprintf(env->gpus + b, sizeof env->gpus - b, "%s%d", r ? "," : "",
				      plan->dev[r]);
	}
	if (plan->ranks <= 0 || plan->node[0] < 0)
		return;   /* not placed: nothing to say */
	eng_env_add(env, env->nodes);
	if (plan->gpu)
		eng_env_add(env, env->gpus);
}

void eng_nodecg_name(long id, unsigned seq, char *out, size_t len)
{
	char host[65];
	if (gethostname(host, sizeof host - 1) < 0)
		snprintf(host, sizeof host, "localhost");
	host[sizeof host - 1] = '\0';
	for (char *c = host; *c; c++)   /* a cgroup's name and a socket's: no '/' */
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
		      *c == '-' || *c == '.'))
			*c = '_';
	snprintf(out, len, "dlhfs-%.40s-%ld-%ld-%u", host, (long)getpid(), id, seq);
}

/* DLH_NODECG and DLH_NODECG_NODES of plan's ranks on other nodes than
 * this one whose probe did not find them without cgroups (see
 * eng_run_env; isolate_nodes starts a helper on each). */
static void env_nodecg(const struct dlh_engine *e, const struct dlh_job *j, struct eng_env *env,
		       const struct dlh_plan *plan)
{
	size_t a = (size_t)snprintf(env->nodecg_nodes, sizeof env->nodecg_nodes,
				    DLH_ENV_NODECG_NODES "=");
	int node = 0, any = 0;
	if (!e->cg_nodes || plan->ranks <= 0 || plan->node[0] < 0)
		return;
	for (int r = 0; r < plan->ranks && a < sizeof env->nodecg_nodes; r++) {
		int first = r == 0 || plan->node[r] != plan->node[r - 1];
		node += r > 0 && first;
		if (first && plan->node[r] != e->pool.local &&
		    dlh_pool_node_isolates(&e->pool.nodes[plan->node[r]])) {
			a += (size_t)snprintf(env->nodecg_nodes + a, sizeof env->nodecg_nodes - a,
					      "%s%d", any ? "," : "", node);
			any = 1;
		}
	}
	if (!any)
		return;
	char name[DLH_NODECG_NAME_MAX + 1];
	eng_nodecg_name(j->id, j->nodecg_seq, name, sizeof name);
	snprintf(env->nodecg, sizeof env->nodecg, DLH_ENV_NODECG "=%s", name);
	eng_env_add(env, env->nodecg);
	eng_env_add(env, env->nodecg_nodes);
}

/* A [job] command's DLH_GLOBAL_BATCH, DLH_RANK_BATCHES and DLH_LR, where
 * its plan has them (its spec's [train] batch_size, lr). */
static void env_batches(struct eng_env *env, const struct dlh_plan *plan)
{
	long global = 0;
	size_t a = (size_t)snprintf(env->batches, sizeof env->batches, DLH_ENV_RANK_BATCHES "=");
	for (int r = 0; r < plan->ranks && a < sizeof env->batches; r++) {
		global += plan->batch[r];
		a += (size_t)snprintf(env->batches + a, sizeof env->batches - a, "%s%d", r ? "," : "",
				      plan->batch[r]);
	}
	if (!plan->trainer && global > 0) {
		snprintf(env->global, sizeof env->global, DLH_ENV_GLOBAL_BATCH "=%ld", global);
		eng_env_add(env, env->global);
		eng_env_add(env, env->batches);
	}
	if (!plan->trainer && plan->lr > 0.0) {
		snprintf(env->lr, sizeof env->lr, DLH_ENV_LR "=%.15g", plan->lr);
		eng_env_add(env, env->lr);
	}
}

/* The entries of pool_env (the pool file's [env]) that job_env does not
 * name, then job_env's: both lists of "NAME=VALUE\n" entries. */
static void env_job(struct eng_env *env, const char *pool_env, const char *job_env)
{
	size_t used = 0;
	for (int pass = 0; pass < 2; pass++) {
		for (const char *e = pass ? job_env : pool_env; *e; e = strchr(e, '\n') + 1) {
			size_t len = strcspn(e, "\n");
			if ((!pass && dlh_env_names(job_env, e)) || used + len + 1 > sizeof env->job)
				continue;
			memcpy(env->job + used, e, len);
			env->job[used + len] = '\0';
			eng_env_add(env, env->job + used);
			used += len + 1;
		}
	}
}

void eng_env_add(struct eng_env *env, char *kv)
{
	int n = 0;
	while (env->v[n])
		n++;
	if (n + 1 < (int)(sizeof env->v / sizeof env->v[0])) {
		env->v[n++] = kv;
		env->v[n] = NULL;
	}
}

void eng_run_env(const struct dlh_engine *e, const struct dlh_job *j, const struct dlh_plan *plan,
		 int nhosts, struct eng_env *env)
{
	contract_env(e, j->id, plan->ranks, env);
	run_master(e, j->id, plan, nhosts, env);
	env_ranks(env, plan);
	env_nodecg(e, j, env, plan);
	env_batches(env, plan);
	env_job(env, e->pool.env, j->spec.env);
}

gid_t eng_primary_gid(uid_t uid)
{
	struct passwd pw, *found = NULL;
	char buf[4096];
	return getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found ? pw.pw_gid :
									    (gid_t)-1;
}

/* Lets job j's owner write in dir (a directory of the job's) and keeps it
 * from everyone but the owner, root and its readable_by readers. Returns
 * 0, or -errno with err. */
static int job_grant(const struct dlh_job *j, const char *dir, char *err, size_t errlen)
{
	enum dlh_share share = j->spec.readable_by;
	if (geteuid() == 0 && j->uid != 0) {   /* the owner writes, the readers read */
		struct dlh_readers r = {
			.group = share == DLH_SHARE_GROUP ? eng_primary_gid(j->uid) : (gid_t)-1,
			.all = share == DLH_SHARE_ALL,
		};
		return dlh_grant_dir(dir, j->uid, &r, err, errlen);
	}
	/* the daemon's own job: its mode says who else reads */
	mode_t m = share == DLH_SHARE_ALL ? 0755 : share == DLH_SHARE_GROUP ? 0750 : 0700;
	if (chmod(dir, m) < 0) {
		snprintf(err, errlen, "cannot chmod \"%s\": %s", dir, strerror(errno));
		return -errno;
	}
	return 0;
}

int eng_job_protect(const struct dlh_engine *e, const struct dlh_job *j, char *err,
		    size_t errlen)
{
	char dirs[3][4200];
	eng_job_dir(e, j->id, dirs[0], sizeof dirs[0]);
	snprintf(dirs[1], sizeof dirs[1], "%s/%s", dirs[0], DLH_DIR_CHECKPOINTS);
	snprintf(dirs[2], sizeof dirs[2], "%s/%s", dirs[0], DLH_DIR_OUTPUT);
	for (int i = 0; i < 3; i++) {
		struct stat st;
		if (i == 2 && stat(dirs[i], &st) < 0)
			continue;   /* a job from before output/ existed */
		int rc = job_grant(j, dirs[i], err, errlen);
		if (rc)
			return rc;
	}
	return 0;
}

#define DRAINED_FILE "drained"   /* in the state dir: drained nodes, a name a line */

void eng_drained_load(struct dlh_engine *e)
{
	char path[4200], *text = NULL;
	snprintf(path, sizeof path, "%s/%s", e->state, DRAINED_FILE);
	if (dlh_read_file_nofollow(path, 1 << 20, &text, NULL))
		return;
	for (char *l = text; *l;) {
		size_t n = strcspn(l, "\n");
		char name[DLH_HOST_MAX + 1];
		snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), l);
		int k = dlh_pool_find_node(&e->pool, name);
		if (k >= 0)
			e->pool.nodes[k].drained = 1;
		l += n + (l[n] == '\n');
	}
	free(text);
}

int eng_drained_save(const struct dlh_engine *e)
{
	char path[4200];
	struct dlh_buf b = { 0 };
	for (int k = 0; k < e->pool.nnodes; k++)
		if (e->pool.nodes[k].drained)
			dlh_buf_printf(&b, "%s\n", e->pool.nodes[k].name);
	snprintf(path, sizeof path, "%s/%s", e->state, DRAINED_FILE);
	int rc = dlh_write_atomic(path, b.data ? b.data : "", b.len);
	dlh_buf_free(&b);
	return rc;
}
