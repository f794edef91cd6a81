/* supervise.c - starting a planned run and watching it: its waiter, time limits, grace periods, a run found after a restart
 *
 * A run is started and signalled only through engine/run/backend.h. When a
 * run ends its waiter records why and calls e->reschedule (the queue) so
 * that this file never calls up into queue.c, which calls it. */
#include "engine/live/slots.h"
#include "engine/supervise/supervise.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/table/advise.h"
#include "engine/table/disk.h"
#include "engine/supervise/eta.h"
#include "engine/supervise/hang.h"
#include "engine/supervise/profile.h"
#include "engine/live/nodes.h"
#include "engine/supervise/reason.h"
#include "engine/run/resume.h"
#include "engine/table/table.h"
#include "engine/plan/plan.h"
#include "engine/run/cgroup.h"
#include "engine/run/join.h"
#include "engine/run/nodecg.h"
#include "engine/run/probe.h"
#include "engine/util/util.h"

/* What the waiter thread of one run gets. */
struct waiter_arg {
	struct dlh_engine *e;        /* owner */
	struct dlh_job *job;         /* the job whose run it waits for */
	struct dlh_run run;          /* that run */
	int nodes[DLH_POOL_NODES];   /* the nodes of its ranks but the local one */
	int nnodes;
};

/* 1 when path exists. */
/* 1 when path is a regular file of its own (not a link the run's owner
 * put there). */
static int file_exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* ---- launching a run ---- */

static void *waiter_main(void *arg);

/* What a launch carries from step to step (malloc'd: the plan is large). */
struct launch {
	struct dlh_plan plan;        /* the run: ranks, their nodes and slots, argv */
	struct dlh_launch_host hosts[DLH_POOL_NODES];   /* its nodes, in rank order */
	int nhosts;                  /* 0: every rank on the local node */
	char agent[512];             /* how the other nodes are reached ("" = ssh) */
	struct dlh_cgroup cg;        /* its cgroups; zeroed when it has none */
	int join[4];                 /* cgroup.procs descriptors the run joins; -1 ends the list */
	struct dlh_nodecg *nodecg;   /* its groups on other nodes (malloc'd; NULL = none) */
	int nnodecg;                 /* entries of nodecg */
	int slots_taken;             /* plan.slot are marked held in e->holder */
	int started;                 /* the backend started the run (j->run) */
	struct waiter_arg *wa;       /* for the waiter thread; NULL once it owns it */
	char dir[4096];              /* STATE/jobs/ID */
	char err[1024];              /* why the launch failed */
	struct dlh_cred cred;        /* the owner the run runs as */
	int as_owner;                /* cred applies (a root daemon, a job not root's) */
};

/* Plans j's run in its directory with the job's recorded decision (j is
 * PLANNING from here). Returns 0, or -errno with l->err (its first line). */
static int plan_run(struct dlh_engine *e, struct dlh_job *j, struct launch *l)
{
	struct dlh_plan_override ov;
	j->status = DLH_PLANNING;
	int rc = dlh_plan_make_with(&j->spec, eng_job_override(j, &ov) ? &ov : NULL, &e->pool,
				    &e->tools, l->dir, &l->plan, l->err, sizeof l->err);
	if (rc)
		l->err[strcspn(l->err, "\n")] = '\0';
	else
		eng_plan_types(e, j, &l->plan);
	return rc;
}

/* The nodes of l's placed plan as the launch names them (l->hosts) and
 * the agent that reaches them. Returns 0, or -EINVAL with l->err. */
static int launch_hosts(struct dlh_engine *e, struct launch *l)
{
	return eng_launch_hosts(e, &l->plan, l->dir, l->hosts, &l->nhosts, l->agent, sizeof l->agent,
				l->err, sizeof l->err);
}

/* A [job] command handed a global batch ([train] batch_size): once its
 * ranks are placed, each rank's share in proportion to its device's speed:
 * the calibrated GEMM speed where every type of the pool is calibrated,
 * else the pool file's peak figures where each type has one, else equal. */
static void split_by_speed(struct dlh_engine *e, struct dlh_job *j, struct dlh_plan *p)
{
	double cal[DLH_POOL_TYPES], peak[DLH_POOL_TYPES];
	int calibrated = 1, peaks = 1;
	for (int t = 0; t < e->pool.ntypes; t++) {
		const struct dlh_calib_dev *d = e->cal.when > 0 ? dlh_calib_dev(&e->cal, e->pool.type[t].name) :
								  NULL;
		cal[t] = d ? d->gemm_flops : 0.0;
		peak[t] = e->pool.type[t].flops;
		calibrated &= cal[t] > 0.0;
		peaks &= peak[t] > 0.0;
	}
	if (!dlh_plan_split_placed(p, &e->pool, calibrated ? cal : peaks ? peak : cal))
		return;
	char list[256];
	size_t used = 0;
	for (int r = 0; r < p->ranks && used < sizeof list - 16; r++)
		used += (size_t)snprintf(list + used, sizeof list - used, "%s%d", r ? "," : "", p->batch[r]);
	eng_job_log(e, j, "batches by device speed (%s): %s%s", calibrated ? "calibrated" :
		    "the pool file's peak figures", list, used >= sizeof list - 16 ? ",..." : "");
}

/* Says in j's log which nodes of plan p Slurm holds back (the run waits
 * in Slurm's queue until they are back). */
static void held_back_note(struct dlh_engine *e, struct dlh_job *j, const struct dlh_plan *p)
{
	char list[256] = "";
	size_t used = 0;
	int seen[DLH_POOL_NODES] = { 0 };
	for (int r = 0; r < p->ranks && used < sizeof list; r++) {
		int k = p->node[r];
		if (k < 0 || seen[k] || !eng_slots_held_back(e, k))
			continue;
		seen[k] = 1;
		used += (size_t)snprintf(list + used, sizeof list - used, "%s%s (%s in Slurm)",
					 used ? ", " : "", e->pool.nodes[k].name,
					 e->pool.nodes[k].slurm_state);
	}
	eng_job_log(e, j, "planned over %s: its ranks do not fit the nodes in use, so it waits "
		    "in Slurm's queue until Slurm gives it nodes", list);
}

/* Places j's ranks on the nodes with room (engine/plan dlh_plan_place),
 * holds the lowest free CPU slot of each rank's node, pins the ranks to
 * them and writes the plan file that names them. Returns 0, -EAGAIN with
 * l->err when the ranks do not fit what is free now (nothing held), or
 * -errno with l->err (the slots stay held: launch_failed gives them back). */
static int take_slots(struct dlh_engine *e, struct dlh_job *j, struct launch *l)
{
	struct dlh_plan *p = &l->plan;
	int avail[DLH_POOL_NODES], now[DLH_POOL_NODES], rc, back = 0;
	eng_slots_avail(e, p->gpu, 0, avail);
	/* the nodes in use first; then, in a Slurm pool, those Slurm holds
	 * back too: the run waits in Slurm's queue (pending, Slurm's reason) */
	for (int k = 0; k < e->pool.nnodes; k++) {
		int held = eng_slots_held_back(e, k);
		now[k] = held ? 0 : avail[k];
		back |= held && avail[k] > 0;
	}
	rc = dlh_plan_place(p, &e->pool, now, eng_job_nodes(e, j), l->err, sizeof l->err);
	if (rc == -EAGAIN && back) {
		char why[sizeof l->err];
		snprintf(why, sizeof why, "%s", l->err);
		if (!(rc = dlh_plan_place(p, &e->pool, avail, eng_job_nodes(e, j), l->err,
					  sizeof l->err)))
			held_back_note(e, j, p);
		else
			snprintf(l->err, sizeof l->err, "%s", why);
	}
	if (rc || (rc = eng_slots_take(e, j->id, p))) {
		if (!l->err[0])
			snprintf(l->err, sizeof l->err, "its ranks' slots are not free");
		return -EAGAIN;
	}
	l->slots_taken = 1;
	split_by_speed(e, j, p);
	if ((rc = dlh_plan_pin(p))) {
		snprintf(l->err, sizeof l->err, "spec: the command line is longer than %d bytes",
			 DLH_ARGV_BYTES);
		return rc;
	}
	if ((rc = launch_hosts(e, l)))
		return rc;
	if ((rc = eng_write_plan(e, j, p)))
		snprintf(l->err, sizeof l->err, "cannot write the plan: %s", strerror(-rc));
	return rc;
}

/* Isolates the run where the machine allows: a cgroup with the cpuset of
 * its slots and its memory limit, whose cgroup.procs descriptors go to
 * l->join. Never fails: without cgroups the run runs anyway, and the job's
 * log says why. */
static void isolate(struct dlh_engine *e, struct dlh_job *j, struct launch *l)
{
	if (e->cg.mode == DLH_CG_NONE) {
		if (j->spec.memory > 0)
			eng_job_log(e, j, "isolation: none, the memory limit is not enforced: %s",
				    e->cg.why);
		return;
	}
	char name[64], why[512], lim[32] = "none";
	snprintf(name, sizeof name, "%ld-%lu", j->id, ++e->launches);
	int local[DLH_RANKS_MAX], n = 0;   /* the slots of the ranks on this machine */
	for (int r = 0; r < l->plan.ranks; r++)
		if (l->plan.node[r] == e->pool.local)
			local[n++] = l->plan.slot[r];
	if (n == 0) {
		eng_job_log(e, j, "isolation: no group here: no rank runs on this machine");
		return;
	}
	/* the spec's memory, else the mount's default per rank; the task
	 * limit always (a fork bomb without a spec line is bounded too) */
	long long mem = j->spec.memory > 0 ? j->spec.memory :
			e->mem_per_rank > 0 ? e->mem_per_rank * n : 0;
	long pids = e->pids_per_rank > 0 ? e->pids_per_rank * (n + 1) : 0;
	int rc = dlh_cgroup_create(&e->cg, name, local, n, mem, pids, &l->cg, why, sizeof why);
	if (!rc && (rc = dlh_cgroup_join_fds(&l->cg, l->join))) {
		snprintf(why, sizeof why, "cannot open cgroup.procs: %s", strerror(-rc));
		dlh_cgroup_destroy(&l->cg);
	}
	if (mem > 0)
		dlh_size_text(mem, lim, sizeof lim);
	char tasks[48] = "none";
	if (l->cg.pids_max > 0)
		snprintf(tasks, sizeof tasks, "%ld", l->cg.pids_max);
	if (rc)
		eng_job_log(e, j, "isolation: none for this run: %s", why);
	else
		eng_job_log(e, j, "isolation: cgroup v%d \"%s\", memory limit %s%s, task limit %s",
			    e->cg.mode == DLH_CG_V1 ? 1 : 2, l->cg.cpuset, lim,
			    j->spec.memory > 0 || mem == 0 ? "" : " (the mount's mem_per_rank)", tasks);
}

/* Ends the helpers of n groups on other nodes (nodecg.h; no e->mu: each
 * waits for its node); ends (NULL or n entries) gets their reports. */
static void end_nodecg(struct dlh_nodecg *h, int n, struct dlh_nodecg_end *ends)
{
	for (int i = 0; i < n; i++)   /* all told first: they end together */
		dlh_nodecg_tell_end(&h[i]);
	for (int i = 0; i < n; i++)
		dlh_nodecg_end(&h[i], DLH_NODECG_END_S, ends ? &ends[i] : NULL);
}

struct nodecg_apart {
	struct dlh_nodecg *h;        /* malloc'd, freed by the thread */
	int n;
};

static void *end_nodecg_main(void *arg)
{
	struct nodecg_apart *a = arg;
	end_nodecg(a->h, a->n, NULL);
	free(a->h);
	free(a);
	return NULL;
}

/* Ends the n helpers h (malloc'd; taken) in a detached thread, so that
 * the caller, who holds e->mu, waits for no node; where no thread can be
 * made, here. */
static void end_nodecg_apart(struct dlh_nodecg *h, int n)
{
	struct nodecg_apart *a = n > 0 ? malloc(sizeof *a) : NULL;
	if (a) {
		*a = (struct nodecg_apart){ .h = h, .n = n };
		if (!dlh_thread_detached(end_nodecg_main, a))
			return;
		free(a);
	}
	end_nodecg(h, n, NULL);
	free(h);
}

/* Isolates the ranks of l's run on other nodes where each allows: a group
 * there with the cpuset of their slots, the memory and task limits of
 * isolate() for that node's ranks, made by a helper started as root
 * through the node's agent (engine/run/nodecg.h) that takes each rank in
 * as it starts. Only starts the helpers (a fork each): the run's waiter
 * waits for their first words without e->mu (nodecg_ready), and a rank
 * waits for its helper to listen. A node whose probe found no cgroups is
 * left out (env_nodecg leaves it out too). Never fails: a node whose group
 * cannot be made runs its ranks outside, and the log says why. e->mu held. */
static void isolate_nodes(struct dlh_engine *e, struct dlh_job *j, struct launch *l)
{
	char name[DLH_NODECG_NAME_MAX + 1];
	if (!e->cg_nodes || l->nhosts == 0)
		return;
	if (!e->probe_path[0]) {
		eng_job_log(e, j, "isolation: none on the other nodes: dlh-probe is not installed "
			    "beside dlhfs");
		return;
	}
	j->nodecg_seq++;   /* this run's name, not the last one's (its helper may linger) */
	eng_nodecg_name(j->id, j->nodecg_seq, name, sizeof name);   /* as eng_run_env gives it */
	struct dlh_nodecg_ask ask[DLH_POOL_NODES];
	int slots[DLH_RANKS_MAX], n = 0, used = 0;
	memset(ask, 0, sizeof ask);
	if (!(l->nodecg = calloc(DLH_POOL_NODES, sizeof *l->nodecg))) {
		eng_job_log(e, j, "isolation: none on the other nodes: out of memory");
		return;
	}
	for (int r = 0; r < l->plan.ranks; r++) {
		int k = l->plan.node[r];
		if (k < 0 || k == e->pool.local)
			continue;
		if (n == 0 || l->nodecg[n - 1].node != k) {   /* a node's ranks are consecutive */
			if (n == DLH_POOL_NODES)
				break;
			const struct dlh_pool_node *nd = &e->pool.nodes[k];
			ask[n] = (struct dlh_nodecg_ask){ .agent = nd->agent, .host = nd->host,
							  .probe = e->probe_path, .name = name,
							  .uid = j->uid, .slots = slots + used };
			l->nodecg[n].node = k;
			n++;
		}
		slots[used++] = l->plan.slot[r];
		ask[n - 1].nslots++;
	}
	char why[512];
	for (int i = 0; i < n; i++) {
		int k = l->nodecg[i].node;
		const struct dlh_pool_node *nd = &e->pool.nodes[k];
		snprintf(l->nodecg[i].host, sizeof l->nodecg[i].host, "%s", nd->name);
		if (!dlh_pool_node_isolates(nd)) {
			eng_job_log(e, j, "isolation: none on %s: %s", nd->name,
				    nd->isolation[0] ? nd->isolation : "its probe found no cgroups");
			continue;
		}
		/* the spec's memory, else the mount's default per rank, for this
		 * node's group; the task limit always */
		ask[i].memory = j->spec.memory > 0 ? j->spec.memory :
				e->mem_per_rank > 0 ? e->mem_per_rank * ask[i].nslots : 0;
		ask[i].pids = e->pids_per_rank > 0 ? e->pids_per_rank * (ask[i].nslots + 1) : 0;
		if (dlh_nodecg_start(&ask[i], &l->nodecg[i], why, sizeof why))
			eng_job_log(e, j, "isolation: none on %s: %s", nd->name, why);
		l->nodecg[i].node = k;
	}
	l->nnodecg = n;
}

/* Waits (without e->mu) for the first words of the n helpers of job j's
 * run that isolate_nodes started, all within one DLH_PROBE_TIMEOUT (they
 * started together), then logs each node's isolation and keeps what the
 * node said as its `isolation` (its probe may be old, or off). A helper
 * that fails is ended; its node's ranks run outside a group. */
static void nodecg_ready(struct dlh_engine *e, struct dlh_job *j, struct dlh_nodecg *h, int n)
{
	struct {
		int rc;
		char why[512];
	} got[DLH_POOL_NODES];
	double until = dlh_mono() + DLH_PROBE_TIMEOUT;
	for (int i = 0; i < n; i++)
		got[i].rc = h[i].pid > 0 ? dlh_nodecg_ready(&h[i], fmax(until - dlh_mono(), 0.1),
							      got[i].why, sizeof got[i].why) : 1;
	pthread_mutex_lock(&e->mu);
	for (int i = 0; i < n; i++) {
		if (got[i].rc == 1)
			continue;   /* not started: isolate_nodes said why */
		struct dlh_pool_node *nd = NULL;
		/* the node by its name: a reload may have moved the pool's entries */
		if (h[i].node >= 0 && h[i].node < e->pool.nnodes &&
		    !strcmp(e->pool.nodes[h[i].node].name, h[i].host))
			nd = &e->pool.nodes[h[i].node];
		/* a helper that did not start says nothing of the node's cgroups */
		if (nd && got[i].rc == -ENOTSUP)
			snprintf(nd->isolation, sizeof nd->isolation, "none: %s", got[i].why);
		else if (nd && !got[i].rc)
			snprintf(nd->isolation, sizeof nd->isolation, "cgroup v%d", h[i].mode);
		if (got[i].rc) {
			eng_job_log(e, j, "isolation: none on %s: %s", h[i].host, got[i].why);
			continue;
		}
		char lim[32] = "none", tasks[32] = "none";
		if (h[i].memory > 0)
			dlh_size_text(h[i].memory, lim, sizeof lim);
		if (h[i].pids > 0)
			snprintf(tasks, sizeof tasks, "%ld", h[i].pids);
		eng_job_log(e, j, "isolation: cgroup v%d \"%s\" on %s, memory limit %s%s, task limit %s",
			    h[i].mode, h[i].group, h[i].host, lim,
			    j->spec.memory > 0 || h[i].memory == 0 ? "" : " (the mount's mem_per_rank)",
			    tasks);
	}
	pthread_mutex_unlock(&e->mu);
}

/* Closes the cgroup.procs descriptors still open in l->join. */
static void close_joins(struct launch *l)
{
	for (int k = 0; l->join[k] >= 0; k++) {
		close(l->join[k]);
		l->join[k] = -1;
	}
}

/* Starts the run through the backend, with the environment of
 * engine/contract and its output appended to the job's log. Returns 0 with
 * j->run set, or -errno with l->err. */
/* A daemon running as root runs each job as its owner (never as root but
 * for root's jobs): it finds the owner's groups and lets them write the job
 * directory and its checkpoints (engine/run/owner.h). Returns 0, or -errno
 * with l->err. */
static int as_owner(struct dlh_engine *e, struct dlh_job *j, struct launch *l)
{
	int rc;
	if (geteuid() != 0 || j->uid == 0)
		return 0;
	if ((rc = dlh_cred_of(j->uid, &l->cred, l->err, sizeof l->err)))
		return rc;
	/* the run starts in its job directory as its owner: the state
	 * directory must let others through (mode o+x), else every run of
	 * every user fails at its chdir */
	struct stat st;
	if (!stat(e->state, &st) && st.st_uid != j->uid && !(st.st_mode & S_IXOTH)) {
		snprintf(l->err, sizeof l->err, "the state directory \"%s\" (mode %04o) lets no other "
			 "user reach a job directory: the run of uid %u cannot start in it "
			 "(chmod o+x \"%s\", as README, Sharing a mount, says)", e->state,
			 (unsigned)(st.st_mode & 07777), (unsigned)j->uid, e->state);
		return -EACCES;
	}
	if ((rc = eng_job_protect(e, j, l->err, sizeof l->err)))
		return rc;
	l->as_owner = 1;
	return 0;
}

void eng_job_take_up(struct dlh_engine *e, struct dlh_job *j)
{
	char dir[4096], why[300];
	if (!j->spec.command[0] || j->resume_ready ||
	    (j->status != DLH_QUEUED && j->status != DLH_SUSPENDED))
		return;
	eng_job_dir(e, j->id, dir, sizeof dir);
	gid_t gid = eng_primary_gid(j->uid);
	if (eng_take_up(dir, j->uid, gid == (gid_t)-1 ? 0 : gid, j->resume_from, sizeof j->resume_from,
		    &j->resume_step, why, sizeof why))
		return;   /* it left no checkpoint: it starts again */
	j->resume_ready = 1;
	if (why[0])
		eng_job_log(e, j, "%s", why);
}

/* A [job] command run again: where its program takes up, in env (found
 * when its last run ended, or at open after a restart of dlhfs; else
 * looked for now, and none found: its first run). */
static void resume_env(struct dlh_engine *e, struct dlh_job *j, struct launch *l,
		       struct eng_env *env)
{
	char path[4300], why[300];
	long step;
	if (j->resume_ready) {
		snprintf(path, sizeof path, "%s", j->resume_from);
		step = j->resume_step;
		j->resume_ready = 0;
	} else {
		gid_t gid = eng_primary_gid(j->uid);
		if (eng_take_up(l->dir, j->uid, gid == (gid_t)-1 ? 0 : gid, path, sizeof path, &step,
			    why, sizeof why))
			return;   /* no checkpoint: it starts again */
		if (why[0])
			eng_job_log(e, j, "%s", why);
	}
	for (char *c = path; *c; c++)   /* the owner named it: no line of its own in the log */
		if (*c == '\n' || *c == '\r')
			*c = '?';
	snprintf(env->resume, sizeof env->resume, DLH_ENV_RESUME_FROM "=%s", path);
	snprintf(env->start, sizeof env->start, DLH_ENV_START_STEP "=%ld", step);
	eng_env_add(env, env->resume);
	eng_env_add(env, env->start);
	eng_job_log(e, j, "its command takes up from %s, step %ld (" DLH_ENV_RESUME_FROM ", "
		    DLH_ENV_START_STEP ")", path, step);
}

static int start_run(struct dlh_engine *e, struct dlh_job *j, struct launch *l)
{
	char log[4096], ready[4096];
	struct eng_env env;
	int rc = as_owner(e, j, l);
	if (rc) {
		close_joins(l);
		return rc;
	}
	eng_run_env(e, j, &l->plan, l->nhosts, &env);
	if (l->plan.ranks > 0 && l->plan.node[0] >= 0 && l->plan.node[0] != e->pool.local)
		e->pool.nodes[l->plan.node[0]].free_port = 0;   /* this run's now: the next asks again */
	if (j->profile_phase)
		eng_profile_start(e, j);   /* a profile run starts from step 1, as the first did */
	else if (j->spec.command[0] && j->started > 0)
		resume_env(e, j, l, &env);
	eng_job_file(e, j->id, DLH_FILE_LOG, log, sizeof log);
	eng_job_file(e, j->id, DLH_FILE_READY, ready, sizeof ready);
	struct dlh_launch dl = {
		.argv = l->plan.argv, .ranks = l->plan.ranks, .env = env.v, .job_dir = l->dir,
		.log_path = log, .join = l->join, .cred = l->as_owner ? &l->cred : NULL,
		/* the trainer says when it takes verbs; a command takes them from its start */
		.ready_path = j->spec.command[0] ? NULL : ready,
		.hosts = l->hosts, .nhosts = l->nhosts, .agent = l->agent,
		/* what a scheduler is asked for (Slurm: --time, --mem) */
		.est_s = j->est_total, .time_limit = (double)j->spec.time_limit,
		.grace = dlh_spec_grace(&j->spec), .memory = l->plan.memory,
		.gpu = l->plan.gpu, .gpu_type = eng_gpu_type(e, &l->plan),
		/* a command is told where to take up (resume_env), dlh-train finds it;
		 * a profile run too, once its launcher runs it again (a requeue) */
		.take_up = j->spec.command[0] != 0,
	};
	rc = e->backend.ops->start(&e->backend, &dl, &j->run, l->err, sizeof l->err);
	if (!rc && l->as_owner)
		eng_job_log(e, j, "the run runs as its owner: uid %u (%s), group %u, %d groups",
			    (unsigned)l->cred.uid, l->cred.user, (unsigned)l->cred.gid,
			    l->cred.ngroups);
	close_joins(l);   /* the run has joined its cgroups, or there is no run */
	l->started = !rc;
	return rc;
}

/* Records the started run in j (RUNNING, its ranks, cgroups, start time
 * and time limit), arms the timer for the limit and saves the record. */
static void record_run(struct dlh_engine *e, struct dlh_job *j, struct launch *l)
{
	j->cg = l->cg;
	j->nodecg = l->nodecg;   /* the job's now: its waiter ends them */
	j->nnodecg = l->nnodecg;
	l->nodecg = NULL;
	l->nnodecg = 0;
	j->status = DLH_RUNNING;
	dlh_job_reason(j, NULL, NULL);
	j->run_started = eng_stamp();
	j->eta_end = j->eta_looked = 0;   /* its own rows tell its end once it steps */
	j->profile_stopped = 0;
	/* the machine's meter, where it has one and the run is all here */
	/* GPU runs: the packages' meter leaves out most of what they draw */
	j->energy_ok = l->nhosts == 0 && !l->plan.gpu && !dlh_energy_read(&j->energy_start);
	if (j->started == 0)
		j->started = j->run_started;
	j->finished = 0;
	j->ranks = l->plan.ranks;
	/* a launcher that keeps the limit itself (Slurm) signals the run before it */
	j->limit_at = j->spec.time_limit > 0 && !e->backend.keeps_limit ?
		      dlh_mono() + (double)j->spec.time_limit : 0;
	j->grace_at = j->limit_at ? j->limit_at - (double)dlh_spec_grace(&j->spec) : 0;
	j->timed_out = 0;
	j->resumable = 0;
	j->nodes_lost = 0;   /* placed again on the nodes that remain */
	eng_hang_arm(e, j);
	j->wait[0] = '\0';
	pthread_cond_signal(&e->timer_cv);   /* its time limit, its hang watch */
	eng_job_save(e, j);
}

/* Starts the detached waiter of j's run (j->run) with wa, which it then
 * owns and frees, and counts it. Returns 0, or pthread_create's error (wa
 * stays the caller's). e->mu held. */
static int spawn_waiter(struct dlh_engine *e, struct dlh_job *j, struct waiter_arg *wa,
			const int *node, int ranks)
{
	*wa = (struct waiter_arg){ .e = e, .job = j, .run = j->run };
	for (int r = 0; r < ranks; r++) {   /* the other nodes, each once */
		int seen = node[r] < 0 || node[r] == e->pool.local;
		for (int i = 0; i < wa->nnodes && !seen; i++)
			seen = wa->nodes[i] == node[r];
		if (!seen)
			wa->nodes[wa->nnodes++] = node[r];
	}
	int rc = dlh_thread_detached(waiter_main, wa);
	if (!rc)
		e->waiters++;
	return rc;
}

/* Starts the detached thread that waits for j's run (it takes l->wa).
 * Returns 0, or -errno with l->err. */
static int start_waiter(struct dlh_engine *e, struct dlh_job *j, struct launch *l)
{
	int rc = spawn_waiter(e, j, l->wa, l->plan.node, l->plan.ranks);
	if (rc) {
		snprintf(l->err, sizeof l->err, "cannot start a supervisor thread: %s", strerror(rc));
		return -rc;
	}
	l->wa = NULL;
	return 0;
}

/* The one way out of a failed launch: stops and reaps the run if it
 * started (without a waiter nobody would), gives back its slots and
 * cgroups, and marks j failed with l->err. Returns rc. */
static int launch_failed(struct dlh_engine *e, struct dlh_job *j, struct launch *l, int rc)
{
	if (l->started) {
		struct dlh_run_end end;
		e->backend.ops->signal(&e->backend, &j->run, DLH_VERB_KILL);
		e->backend.ops->wait(&e->backend, &j->run, l->dir, 1, &end);
		memset(&j->run, 0, sizeof j->run);
	}
	if (l->slots_taken)
		eng_slots_give(e, j->id);
	close_joins(l);
	memset(&j->cg, 0, sizeof j->cg);
	dlh_cgroup_destroy(&l->cg);
	if (j->nodecg) {   /* recorded on the job before its waiter could start */
		l->nodecg = j->nodecg;
		l->nnodecg = j->nnodecg;
		j->nodecg = NULL;
		j->nnodecg = 0;
	}
	/* their ranks went with mpirun: ended by a thread of their own (each
	 * may take DLH_NODECG_END_S, and e->mu is held here) */
	end_nodecg_apart(l->nodecg, l->nnodecg);
	l->nodecg = NULL;
	l->nnodecg = 0;
	j->status = DLH_FAILED;
	j->finished = eng_stamp();
	/* the launch's own words may carry the spec's values: its readers' */
	dlh_job_reason(j, l->err, "the launch failed");
	eng_job_log(e, j, "failed: %s", l->err);
	eng_job_save(e, j);
	pthread_cond_broadcast(&e->changed);
	return rc;
}

/* A launch of job j with nothing done yet, or NULL when out of memory. */
static struct launch *launch_new(const struct dlh_engine *e, const struct dlh_job *j)
{
	struct launch *l = calloc(1, sizeof *l);
	struct waiter_arg *wa = malloc(sizeof *wa);
	if (!l || !wa) {
		free(l);
		free(wa);
		return NULL;
	}
	for (int k = 0; k < 4; k++)
		l->join[k] = -1;
	l->wa = wa;
	eng_job_dir(e, j->id, l->dir, sizeof l->dir);
	return l;
}

int eng_job_launch(struct dlh_engine *e, struct dlh_job *j)
{
	struct launch *l = launch_new(e, j);
	if (!l)
		return -ENOMEM;   /* nothing done: the job waits for the next schedule */
	int rc = plan_run(e, j, l);
	if (!rc && (rc = take_slots(e, j, l)) == 0 && !eng_nodes_see(e, j, &l->plan)) {
		/* its nodes are asked whether they read its data: it waits for them */
		eng_slots_give(e, j->id);
		snprintf(l->err, sizeof l->err, "asking its nodes whether they read its data");
		rc = -EAGAIN;
	}
	if (rc == -EAGAIN) {
		/* not with what is free now: it waits (eng_schedule says why) */
		j->status = DLH_QUEUED;
		char down[256];
		eng_nodes_down_text(e, down, sizeof down);
		snprintf(j->wait, sizeof j->wait, "waiting for room: %s%s%s", l->err,
			 down[0] ? "; " : "", down);
		free(l->wa);
		free(l);
		return -EAGAIN;
	}
	if (!rc) {
		char where[512] = "";
		size_t used = 0;
		for (int i = 0; i < l->nhosts && used < sizeof where; i++)
			used += (size_t)snprintf(where + used, sizeof where - used, "%s%s:%d",
						 i ? "," : "", l->hosts[i].host, l->hosts[i].ranks);
		/* the run's part of the log starts here (reason.c) */
		char what[64] = "";
		if (j->profile_phase)
			snprintf(what, sizeof what, ", profile run %d of %d", j->profile_phase, j->profile_n);
		eng_job_log(e, j, "launching %d rank%s on %s (restart %d%s)", l->plan.ranks,
			    l->plan.ranks == 1 ? "" : "s", l->nhosts ? where : l->plan.host,
			    j->restarts, what);
		isolate(e, j, l);
		isolate_nodes(e, j, l);
		rc = start_run(e, j, l);
	}
	if (!rc) {
		record_run(e, j, l);
		rc = start_waiter(e, j, l);
	}
	if (rc)
		launch_failed(e, j, l, rc);
	else
		pthread_cond_broadcast(&e->changed);
	free(l->nodecg);   /* NULL but for a launch that made none (nnodecg 0) */
	free(l->wa);
	free(l);
	return rc;
}

/* ---- the end of a run ---- */

/* The run's groups on other nodes as their helpers ended (waiter_main). */
struct node_ends {
	const struct dlh_nodecg *h;  /* the helpers (their nodes, their limits) */
	struct dlh_nodecg_end *end;  /* what each reported */
	int n;
};

/* Handles the end of job j's run (as its backend saw it); cg: the run's
 * cgroups, taken off the job (the caller removes them); ne: its groups on
 * other nodes, ended. e->mu held. */
static void job_exited(struct dlh_engine *e, struct dlh_job *j, const struct dlh_run_end *end,
		       const struct dlh_cgroup *cg, const struct node_ends *ne, const char *lost)
{
	char path[4096], oom_where[96] = "";
	int oom = dlh_cgroup_oom_kills(cg);
	long long oom_limit = cg->limit;
	for (int i = 0; i < ne->n; i++) {   /* this machine's first, then the nodes' in order */
		const struct dlh_nodecg_end *x = &ne->end[i];
		if (x->oom > 0 && oom == 0) {
			oom = x->oom;
			oom_limit = ne->h[i].memory;
			snprintf(oom_where, sizeof oom_where, " on %s", ne->h[i].host);
		}
		if (x->left > 0)
			eng_job_log(e, j, "killed %d leftover process%s of the run on %s", x->left,
				    x->left == 1 ? "" : "es", ne->h[i].host);
		if (x->pids_hits > 0)
			eng_job_log(e, j, "the run reached its task limit on %s (%ld processes and "
				    "threads): %ld fork%s failed", ne->h[i].host, ne->h[i].pids,
				    x->pids_hits, x->pids_hits == 1 ? "" : "s");
		if (ne->h[i].mode && !x->answered)
			eng_job_log(e, j, "the cgroup helper on %s did not report the run's end",
				    ne->h[i].host);
	}
	int leftover = end->leftover;
	double run_started = j->run_started;
	/* when the run ended: as its holder recorded it when it ended while
	 * dlhfs was away (its wall time holds none of dlhfs's downtime) */
	double end_t = j->taken_back && end->ended_at > run_started && end->ended_at < dlh_now() ?
		       floor(end->ended_at * 1000.0 + 0.5) / 1000.0 : eng_stamp();
	long long peak = dlh_cgroup_peak(cg);
	for (int i = 0; i < ne->n; i++)
		if (ne->end[i].peak > peak)
			peak = ne->end[i].peak;
	if (end->cpu_s > 0)
		j->cpu_s += end->cpu_s;
	if (!peak)
		peak = end->max_rss;
	if (peak > j->peak_mem)
		j->peak_mem = peak;
	j->holder_died = end->holder_died;
	eng_slots_give(e, j->id);
	j->run_started = 0;
	j->limit_at = 0;
	j->grace_at = 0;
	memset(&j->run, 0, sizeof j->run);
	j->kill_at = 0;
	j->term_at = 0;
	j->exit_code = end->state == DLH_RUN_EXITED ? end->exit_code : -SIGKILL;
	if (leftover)
		eng_job_log(e, j, "killed %d leftover process%s of the run", leftover,
			leftover == 1 ? "" : "es");
	long hits = dlh_cgroup_pids_hits(cg);
	if (hits > 0)
		eng_job_log(e, j, "the run reached its task limit (%ld processes and threads): %ld "
			    "fork%s failed", cg->pids_max, hits, hits == 1 ? "" : "s");
	if (end->state != DLH_RUN_EXITED)
		eng_job_log(e, j, "the run was lost: its launcher could not be waited for");
	else if (end->holder_died)
		eng_job_log(e, j, "dlh-shepherd, which held the run, was killed by signal %d (%s); "
			    "%s's end is not known", -j->exit_code, strsignal(-j->exit_code),
			    e->backend.launcher_name);
	else if (j->exit_code >= 0)
		eng_job_log(e, j, "%s exited with status %d", e->backend.launcher_name, j->exit_code);
	else
		eng_job_log(e, j, "%s killed by signal %d (%s)", e->backend.launcher_name,
			-j->exit_code, strsignal(-j->exit_code));

	eng_job_file(e, j->id, DLH_FILE_RESULT, path, sizeof path);
	if (eng_profile_ended(e, j, peak, end_t)) {
		;   /* queued for its next profile run or its run (or failed: its deadline) */
	} else if (j->cancelling) {
		j->status = DLH_CANCELLED;
		j->finished = end_t;
	} else if (j->disk_why[0]) {   /* stopped for its disk use (disk.c) */
		j->status = DLH_FAILED;
		j->finished = end_t;
		dlh_job_reason(j, NULL, "%s", j->disk_why);
	} else if (oom > 0 && !(j->exit_code == 0 && (j->spec.command[0] || file_exists(path)))) {
		char lim[32];
		dlh_size_text(oom_limit, lim, sizeof lim);
		eng_job_log(e, j, "out of memory: the kernel killed %d process%s of the run in its cgroup%s "
			"(limit %s)", oom, oom == 1 ? "" : "es", oom_where, lim);
		j->status = DLH_FAILED;
		j->finished = end_t;
		dlh_job_reason(j, NULL, "out of memory%s (limit %s)", oom_where, lim);
	} else if ((j->timed_out || end->cause == DLH_END_TIME_LIMIT) &&
		   !(j->exit_code == 0 && (j->spec.command[0] || file_exists(path)))) {
		/* the engine's limit, or the launcher's (Slurm's --time): its words */
		char lim[64];
		dlh_duration((double)j->spec.time_limit, lim, sizeof lim);
		j->status = DLH_FAILED;
		j->finished = end_t;
		j->resumable = 1;
		dlh_job_reason(j, NULL, "%s%s reached: %s; `resume` continues "
			 "it from its newest checkpoint", end->said[0] ? "" : "time limit ",
			 end->said[0] ? end->said : lim, j->exit_code == DLH_EXIT_SUSPENDED ?
			 "the run stopped at a checkpoint it took then" :
			 "the run was stopped without a checkpoint of its own");
	} else if (end->cause == DLH_END_PREEMPTED && !j->suspending &&
		   !(j->exit_code == 0 && (j->spec.command[0] || file_exists(path)))) {
		/* the launcher's scheduler stopped it on purpose for another job:
		 * not a failure, and not resubmitted against its decision */
		j->status = DLH_SUSPENDED;
		j->suspends++;
		dlh_job_reason(j, NULL, "%s: `resume` continues it from its newest checkpoint",
			 end->said[0] ? end->said : "preempted by the launcher");
	} else if (j->exit_code == 0 && (j->spec.command[0] || file_exists(path))) {
		j->status = DLH_SUCCEEDED;
		dlh_job_reason(j, NULL, NULL);
		j->finished = end_t;
		eng_job_actuals(e, j, j->finished - run_started);
	} else if (j->exit_code == DLH_EXIT_SUSPENDED || j->suspending) {
		/* stopped at a checkpoint (or, past the grace, stopped anyway):
		 * not a failure; resume restarts from the newest checkpoint. A
		 * victim of preemption waits in the queue to resume by itself. */
		j->status = j->preempted_by ? DLH_QUEUED : DLH_SUSPENDED;
		j->suspends++;
		if (!j->suspending)
			dlh_job_reason(j, NULL, "the run stopped at a checkpoint by itself (exit status %d)",
				 DLH_EXIT_SUSPENDED);
		else if (j->exit_code != DLH_EXIT_SUSPENDED && !j->unqueued && strlen(j->reason) < 200)
			snprintf(j->reason + strlen(j->reason), sizeof j->reason - strlen(j->reason),
				 "; the run did not stop at a checkpoint, it resumes from its newest one");
	} else if (e->stopping) {
		j->status = DLH_QUEUED;
		dlh_job_reason(j, NULL, "interrupted: dlhfs stopped while the job ran; it resumes from its newest checkpoint at the next mount");
	} else {
		/* why: public (progress); full: the owner's (result) */
		char why[DLH_REASON_MAX - 64], full[DLH_REASON_MAX - 64] = "";
		if (lost[0]) {   /* the node, not what mpirun made of it */
			snprintf(why, sizeof why, "%s", lost);
			j->nodes_lost = 1;
		} else if (end->cause == DLH_END_NODE_FAIL && end->said[0]) {
			snprintf(why, sizeof why, "%s", end->said);   /* the launcher's word */
		} else if (j->hung) {
			snprintf(why, sizeof why, "%s", j->hang_why);
		} else {
			eng_failure_reason(e, j, why, sizeof why, full, sizeof full);
		}
		if (!why[0]) {
			if (j->exit_code == 0)
				snprintf(why, sizeof why, "the trainer exited without writing a result");
			else if (j->exit_code > 0)
				snprintf(why, sizeof why, "%s exited with status %d",
					 e->backend.launcher_name, j->exit_code);
			else
				snprintf(why, sizeof why, "%s was killed by signal %d",
					 e->backend.launcher_name, -j->exit_code);
		}
		if (j->spec.restart == DLH_RESTART_ON_FAILURE && j->restarts < j->spec.max_restarts) {
			j->restarts++;
			j->status = DLH_QUEUED;
			char all[DLH_REASON_MAX];
			snprintf(all, sizeof all, "restarting (%d of %d) after: %s", j->restarts,
				 j->spec.max_restarts, full[0] ? full : why);
			dlh_job_reason(j, all, "restarting (%d of %d) after: %s",
				 j->restarts, j->spec.max_restarts, why);
		} else {
			j->status = DLH_FAILED;
			j->finished = end_t;
			dlh_job_reason(j, full, "%s", why);
		}
	}
	j->cancelling = 0;
	j->suspending = 0;
	j->unqueued = 0;
	j->preempted_by = 0;
	j->timed_out = 0;
	j->hung = 0;
	j->holder_died = 0;
	j->taken_back = 0;
	j->disk_why[0] = '\0';
	eng_job_log(e, j, "%s%s%s", dlh_status_name(j->status), j->reason[0] ? ": " : "",
		    dlh_job_reason_full(j));
	eng_job_save(e, j);
	pthread_cond_broadcast(&e->changed);
	if (!e->stopping && e->reschedule)
		e->reschedule(e);   /* the queue: slots are free (see table.h) */
}

/* A waiter's last act: it is counted out (an unmount waits for none to
 * be left) and frees what it owned. Returns NULL, the thread's result. */
static void *waiter_done(struct dlh_engine *e, struct waiter_arg *wa, struct dlh_nodecg *nodecg)
{
	pthread_mutex_lock(&e->mu);
	e->waiters--;
	pthread_cond_broadcast(&e->changed);
	pthread_mutex_unlock(&e->mu);
	free(nodecg);
	free(wa);
	return NULL;
}

/* The thread that waits for one run (arg: its struct waiter_arg, freed
 * here): blocks in the backend's wait without e->mu, then records the end
 * and removes the run's cgroups. */
static void *waiter_main(void *arg)
{
	struct waiter_arg *wa = arg;
	struct dlh_engine *e = wa->e;
	struct dlh_run_end end;
	char dir[4096];
	eng_job_dir(e, wa->job->id, dir, sizeof dir);   /* e->state never changes */
	/* the groups on the other nodes: the waiter's from now on */
	pthread_mutex_lock(&e->mu);
	struct dlh_nodecg *nodecg = wa->job->nodecg;
	struct node_ends ne = { .h = nodecg, .n = wa->job->nnodecg };
	wa->job->nodecg = NULL;
	wa->job->nnodecg = 0;
	pthread_mutex_unlock(&e->mu);
	nodecg_ready(e, wa->job, nodecg, ne.n);
	if (e->backend.ops->wait(&e->backend, &wa->run, dir, 1, &end) == -ESHUTDOWN) {
		/* left as it is (the launcher did not answer as dlhfs stops): the
		 * record says running, the handle stays; the next mount takes it
		 * back (helpers on other nodes keep their groups until they empty) */
		return waiter_done(e, wa, nodecg);
	}
	char lost[DLH_REASON_MAX - 64] = "";
	pthread_mutex_lock(&e->mu);   /* a run stopped on purpose lost no node */
	const struct dlh_job *j = wa->job;
	/* the launcher's limit or preemption: stopped on purpose too */
	int by_launcher = end.cause == DLH_END_TIME_LIMIT || end.cause == DLH_END_PREEMPTED;
	int asked = j->cancelling || j->suspending || j->timed_out || e->stopping || by_launcher;
	int command = j->spec.command[0] != 0;
	/* runs again (a restart, a resume): its rows past its checkpoint go */
	int rerun = j->suspending || j->timed_out || j->preempted_by || e->stopping || by_launcher ||
		    (j->spec.restart == DLH_RESTART_ON_FAILURE && j->restarts < j->spec.max_restarts);
	uid_t uid = j->uid;
	pthread_mutex_unlock(&e->mu);
	/* the groups on the other nodes: what is left there killed, what the
	 * kernel counted reported, the groups removed */
	struct dlh_nodecg_end ends[DLH_POOL_NODES];
	ne.end = ends;
	end_nodecg(nodecg, ne.n, ends);
	if (wa->nnodes > 0 && !asked && !(end.state == DLH_RUN_EXITED &&
					  (end.exit_code == 0 || end.exit_code == DLH_EXIT_SUSPENDED)))
		eng_nodes_lost(e, wa->nodes, wa->nnodes, lost, sizeof lost);   /* no e->mu */
	/* a command's program: `latest`, and where a next run takes up (files
	 * its owner writes: read here, not under e->mu); a run that ended well
	 * keeps its rows */
	char from[4300], why[300] = "";
	long step = 0;
	int again = command && !(end.state == DLH_RUN_EXITED && end.exit_code == 0) &&
		    (rerun || (end.state == DLH_RUN_EXITED && end.exit_code == DLH_EXIT_SUSPENDED));
	gid_t gid = command ? eng_primary_gid(uid) : 0;
	if (command && !again)
		eng_latest_update(dir, uid, gid == (gid_t)-1 ? 0 : gid);
	else if (again && eng_take_up(dir, uid, gid == (gid_t)-1 ? 0 : gid, from, sizeof from, &step,
				  why, sizeof why))
		again = 0;
	pthread_mutex_lock(&e->mu);
	if (lost[0])
		eng_job_log(e, wa->job, "%s: nothing more is planned there until it answers "
			    "(echo refresh > pool/ctl)", lost);
	if (why[0])
		eng_job_log(e, wa->job, "%s", why);
	wa->job->resume_ready = again;
	if (again) {
		snprintf(wa->job->resume_from, sizeof wa->job->resume_from, "%s", from);
		wa->job->resume_step = step;
	}
	struct dlh_cgroup cg = wa->job->cg;
	memset(&wa->job->cg, 0, sizeof wa->job->cg);
	job_exited(e, wa->job, &end, &cg, &ne, lost);
	pthread_mutex_unlock(&e->mu);
	dlh_cgroup_destroy(&cg); /* waits for stragglers: not under the lock */
	return waiter_done(e, wa, nodecg);
}

/* ---- the timer thread ---- */

#define EXPIRE_BATCH 16   /* jobs purged at once, their files removed without e->mu */

/* Purges the ended jobs older than e->expire, removing their files with
 * e->mu released. Returns the CLOCK_MONOTONIC time the next one is due, or
 * 0 (none). e->mu held (released and taken again while files go). */
static double expire_jobs(struct dlh_engine *e, double now)
{
	char (*gone)[4200] = NULL;
	for (;;) {
		double wall = dlh_now(), next = 0;
		int n = 0;
		for (size_t i = 0; i < e->njobs;) {
			struct dlh_job *j = e->jobs[i];
			double due = j->finished + e->expire;
			if (!dlh_status_terminal(j->status) || j->finished <= 0 || j->run.pid) {
				i++;
			} else if (due > wall) {
				double at = now + (due - wall);
				next = !next || at < next ? at : next;
				i++;
			} else if (n < EXPIRE_BATCH && (gone || (gone = malloc(EXPIRE_BATCH * sizeof *gone))) &&
				   !eng_purge(e, j, gone[n], sizeof gone[n])) {
				n++;   /* j is gone from the table: i names the next */
			} else {
				i++;
			}
		}
		if (!n) {
			free(gone);
			return next;
		}
		pthread_cond_broadcast(&e->changed);
		pthread_mutex_unlock(&e->mu);
		for (int k = 0; k < n; k++)
			dlh_remove_tree(gone[k]);
		pthread_mutex_lock(&e->mu);
		e->timer_gen++;
	}
}

/* The timer thread (arg: the engine): terminates runs past their time limit
 * or their suspend grace and kills those past their kill grace; ends once
 * the engine stops and no waiter is left. */
static void *timer_main(void *arg)
{
	struct dlh_engine *e = arg;
	pthread_mutex_lock(&e->mu);
	while (!(e->stopping && e->waiters == 0)) {
		double now = dlh_mono(), next = 0;
		int moved = 0;   /* a running job's expected end moved: the queue plans again */
		for (size_t i = 0; i < e->njobs; i++) {
			struct dlh_job *j = e->jobs[i];
			if (j->status == DLH_RUNNING && j->run.pid) {
				int was_hung = j->hung;
				double at = eng_hang_check(e, j, now);
				if (j->hung && !was_hung)   /* just found: stopped once */
					eng_job_terminate(e, j);
				else if (at && (!next || at < next))
					next = at;
				at = eng_eta_update(e, j, now, &moved);
				if (!next || at < next)
					next = at;
				at = eng_profile_watch(e, j, now);
				if (j->profile_stopped && !j->kill_at && !j->term_at)
					eng_job_terminate(e, j);   /* timed: the profile run ends */
				else if (at && (!next || at < next))
					next = at;
			}
			if (j->grace_at && j->run.pid && !j->kill_at && !j->cancelling &&
			    !j->suspending) {
				if (j->grace_at <= now) {
					char lim[32], g[32];
					dlh_duration((double)j->spec.time_limit, lim, sizeof lim);
					dlh_duration((double)dlh_spec_grace(&j->spec), g, sizeof g);
					eng_job_log(e, j, "time limit %s in %s: asking the run to "
						    "checkpoint and stop", lim, g);
					j->grace_at = 0;
					j->timed_out = 1;
					eng_job_signal(e, j, DLH_VERB_SUSPEND);
				} else if (!next || j->grace_at < next) {
					next = j->grace_at;
				}
			}
			if (j->limit_at && j->run.pid && !j->kill_at && !j->cancelling) {
				if (j->limit_at <= now) {
					char lim[32];
					dlh_duration((double)j->spec.time_limit, lim, sizeof lim);
					eng_job_log(e, j, "time limit %s reached: SIGTERM to the run", lim);
					j->limit_at = 0;
					j->timed_out = 1;
					eng_job_terminate(e, j);
				} else if (!next || j->limit_at < next) {
					next = j->limit_at;
				}
			}
			if (j->term_at && j->run.pid && !j->kill_at) {
				if (j->term_at <= now) {
					eng_job_log(e, j, "the run did not suspend within %.0f s: SIGTERM",
						e->suspend_grace);
					j->term_at = 0;
					eng_job_terminate(e, j);
				} else if (!next || j->term_at < next) {
					next = j->term_at;
				}
			}
			if (!j->kill_at || !j->run.pid)
				continue;
			if (j->kill_at <= now) {
				int n = eng_job_signal(e, j, DLH_VERB_KILL);
				n = n < 0 ? 0 : n;
				eng_job_log(e, j, "grace period over: SIGKILL to %d process%s", n,
					n == 1 ? "" : "es");
				j->kill_at = 0;
			} else if (!next || j->kill_at < next) {
				next = j->kill_at;
			}
		}
		/* each may release e->mu a while: a signal sent meanwhile is
		 * lost, so what changed then is looked at before any wait */
		if (moved && !e->stopping && e->reschedule)
			e->reschedule(e);
		unsigned long gen = e->timer_gen;
		if (!e->stopping) {
			double at = eng_disk_check(e, now);
			if (at && (!next || at < next))
				next = at;
		}
		if (e->expire > 0 && !e->stopping) {
			double at = expire_jobs(e, now);
			if (at && (!next || at < next))
				next = at;
		}
		if (gen != e->timer_gen)
			continue;
		if (!next) {
			pthread_cond_wait(&e->timer_cv, &e->mu);
		} else {
			struct timespec ts;
			dlh_mono_ts(next, &ts);
			pthread_cond_timedwait(&e->timer_cv, &e->mu, &ts);
		}
	}
	pthread_mutex_unlock(&e->mu);
	return NULL;
}

/* ---- signals ---- */

int eng_job_signal(struct dlh_engine *e, struct dlh_job *j, enum dlh_verb v)
{
	return e->backend.ops->signal(&e->backend, &j->run, v);
}

/* Stops every process of j's run and arms the kill timer. e->mu held. */
void eng_job_terminate(struct dlh_engine *e, struct dlh_job *j)
{
	eng_job_signal(e, j, DLH_VERB_TERMINATE);
	j->kill_at = dlh_mono() + e->grace;
	pthread_cond_signal(&e->timer_cv);
}

/* Asks a running job to checkpoint and stop, terminates it after the
 * suspend grace. e->mu held. */
void eng_job_suspend(struct dlh_engine *e, struct dlh_job *j)
{
	j->suspending = 1;
	j->term_at = dlh_mono() + e->suspend_grace;
	eng_job_signal(e, j, DLH_VERB_SUSPEND);
	pthread_cond_signal(&e->timer_cv);
}

/* ---- after a restart ---- */

/* The node of the pool whose host is host (the local node also by this
 * machine's name), or -1. */
static int node_of_host(const struct dlh_engine *e, const char *host)
{
	char self[256] = "";
	gethostname(self, sizeof self - 1);
	for (int k = 0; k < e->pool.nnodes; k++)
		if (!strcmp(e->pool.nodes[k].host, host))
			return k;
	return !strcmp(host, self) || !strcmp(host, e->pool.node.host) ? e->pool.local : -1;
}

/* The list "A,B,..." at s into out (up to max). Returns how many, or -1
 * when s does not start with one. */
static int read_ints(const char *s, int *out, int max)
{
	int n = 0;
	for (;;) {
		char *end;
		long v = strtol(s, &end, 10);
		if (end == s || v < 0 || v > INT_MAX || n == max)
			return -1;
		out[n++] = (int)v;
		if (*end != ',')
			return n;
		s = end + 1;
	}
}

/* A GPU plan's CPU slots: the "--cpus LIST --gpus LIST" that dlh_plan_pin
 * put at the end of dlh-train's command line (its "argv" line), when the
 * GPU list is p->dev[]; into p->slot[]. Returns 1 when found, else 0 (a
 * [job] command is given neither). */
static int read_gpu_slots(const char *text, struct dlh_plan *p)
{
	const char *argv = !strncmp(text, "argv ", 5) ? text : strstr(text, "\nargv ");
	if (!argv)
		return 0;
	const char *eol = strchr(argv + 1, '\n'), *at = NULL;
	for (const char *c = strstr(argv, " --cpus "); c && (!eol || c < eol); c = strstr(c + 1, " --cpus "))
		at = c;
	int slot[DLH_RANKS_MAX], dev[DLH_RANKS_MAX];
	if (!at || read_ints(at + 8, slot, DLH_RANKS_MAX) != p->ranks)
		return 0;
	const char *g = strstr(at + 8, " --gpus ");
	if (!g || (eol && g > eol) || g != at + 8 + strcspn(at + 8, " \n") ||
	    read_ints(g + 8, dev, DLH_RANKS_MAX) != p->ranks ||
	    memcmp(dev, p->dev, (size_t)p->ranks * sizeof *dev))
		return 0;
	memcpy(p->slot, slot, (size_t)p->ranks * sizeof *slot);
	return 1;
}

/* j's run as its plan file names it, read back into p: its ranks, each
 * one's node (p->node[]) and CPU slot (p->slot[]) from its line ("rank R
 * host H device cpuS"), or for a GPU plan ("rank R host H device gpuG
 * ...") p->gpu, each rank's GPU (p->dev[]) and its slot from dlh-train's
 * --cpus (-1: the plan does not say, as for a [job] command). Returns 0,
 * or -ENOENT when the plan is unreadable or names no rank, -EBUSY when it
 * names more than DLH_RANKS_MAX, -EINVAL when it mixes CPU and GPU ranks. */
static int read_planned_ranks(struct dlh_engine *e, struct dlh_job *j, struct dlh_plan *p)
{
	char path[4096], *text = NULL;
	int n = 0, gpus = 0;
	eng_job_file(e, j->id, "plan", path, sizeof path);
	if (dlh_read_file_nofollow(path, 1 << 20, &text, NULL))
		return -ENOENT;
	for (char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		int r, d;
		char host[256], kind[4];
		if (sscanf(l, "rank %d host %255s device %3[cpgu]%d", &r, host, kind, &d) != 4 ||
		    (strcmp(kind, "cpu") && strcmp(kind, "gpu")))
			continue;
		if (n >= DLH_RANKS_MAX) {
			free(text);
			return -EBUSY;
		}
		int gpu = kind[0] == 'g';
		gpus += gpu;
		p->node[n] = node_of_host(e, host);
		p->slot[n] = gpu ? -1 : d;
		p->dev[n] = gpu ? d : -1;
		n++;
	}
	p->ranks = n;
	p->gpu = gpus > 0;
	if (p->gpu && gpus == n)
		read_gpu_slots(text, p);
	free(text);
	return n == 0 ? -ENOENT : gpus && gpus != n ? -EINVAL : 0;
}

/* Takes back a run that went on while no dlhfs watched (or ended then):
 * its slots, its time limit, a waiter. Returns 0, or -errno (nothing
 * taken). e->mu held. */
static int adopt(struct dlh_engine *e, struct dlh_job *j, const struct dlh_run *run,
		 enum dlh_run_state st)
{
	struct dlh_plan *p = malloc(sizeof *p);
	if (!p)
		return -ENOMEM;
	int rc = read_planned_ranks(e, j, p);
	if (rc || (rc = eng_slots_hold_plan(e, j->id, p))) {
		free(p);
		return rc;
	}
	int ranks = p->ranks, gpu = p->gpu;
	struct waiter_arg *wa = malloc(sizeof *wa);
	j->run = *run;
	rc = wa ? spawn_waiter(e, j, wa, p->node, ranks) : ENOMEM;
	free(p);
	if (rc) {
		free(wa);
		memset(&j->run, 0, sizeof j->run);
		eng_slots_give(e, j->id);
		return -rc;
	}
	j->status = DLH_RUNNING;
	j->ranks = ranks;
	j->taken_back = 1;   /* its time was partly dlhfs's downtime: no history */
	memset(&j->cg, 0, sizeof j->cg);   /* its cgroups stay as they are */
	if (j->run_started == 0)
		j->run_started = run->started;
	j->limit_at = 0;
	if (j->spec.time_limit > 0 && !e->backend.keeps_limit) {
		double left = (double)j->spec.time_limit - (dlh_now() - j->run_started);
		j->limit_at = dlh_mono() + (left > 0 ? left : 0);
		j->grace_at = j->limit_at - (double)dlh_spec_grace(&j->spec);
	}
	eng_hang_arm(e, j);
	pthread_cond_signal(&e->timer_cv);
	if (st == DLH_RUN_RUNNING)
		eng_job_log(e, j, "found its run going on after a restart of dlhfs: %s pid %ld "
			    "on %s, %d %srank%s; watching it again", run->backend, (long)run->pid,
			    run->host, ranks, gpu ? "GPU " : "", ranks == 1 ? "" : "s");
	else
		eng_job_log(e, j, "found its run ended while dlhfs was away (%s pid %ld on %s)",
			    run->backend, (long)run->pid, run->host);
	eng_job_save(e, j);
	return 0;
}

void eng_job_recover(struct dlh_engine *e, struct dlh_job *j)
{
	char path[4096], dir[4096];
	struct dlh_run run;
	eng_job_dir(e, j->id, dir, sizeof dir);
	if (!dlh_run_load(dir, &run)) {
		enum dlh_run_state st = e->backend.ops->state(&e->backend, &run, dir);
		int rc = st == DLH_RUN_LOST ? -ESRCH : adopt(e, j, &run, st);
		if (!rc && j->profile_phase) {
			/* what earlier profile runs measured is gone with the old
			 * daemon: this one is the job's run, not estimated */
			eng_job_log(e, j, "not estimated: dlhfs restarted during profile run %d of %d, "
				    "which goes on as the job's run", j->profile_phase, j->profile_n);
			j->profile_phase = 0;
			eng_job_save(e, j);
		}
		if (!rc)
			return;
		if (st != DLH_RUN_LOST)
			eng_job_log(e, j, "cannot watch its run again (%s): stopping it", strerror(-rc));
		e->backend.ops->stop(&e->backend, &run, dir, e->grace);
	}
	eng_job_file(e, j->id, DLH_FILE_RESULT, path, sizeof path);
	memset(&j->run, 0, sizeof j->run);
	if (file_exists(path)) {
		j->status = DLH_SUCCEEDED;
		dlh_job_reason(j, NULL, NULL);
		j->finished = eng_stamp();
		eng_job_log(e, j, "found finished after a restart of dlhfs");
	} else {
		j->status = DLH_QUEUED;
		dlh_job_reason(j, NULL, "interrupted: dlhfs stopped while the job ran; resuming from its newest checkpoint");
		eng_job_log(e, j, "found running after a restart of dlhfs; requeued");
	}
	eng_job_save(e, j);
}

/* ---- the engine's open and close ---- */

int eng_supervise_start(struct dlh_engine *e, char *err, size_t errlen)
{
	int rc = pthread_create(&e->timer, NULL, timer_main, e);
	if (rc)
		snprintf(err, errlen, "cannot start the timer thread: %s", strerror(rc));
	return -rc;
}

void eng_supervise_stop(struct dlh_engine *e)
{
	pthread_mutex_lock(&e->mu);
	e->stopping = 1;
	atomic_store(&e->backend.leaving, 1);   /* a launcher that does not answer is not waited for */
	for (size_t i = 0; i < e->njobs; i++)
		if (e->jobs[i]->run.pid && !e->jobs[i]->kill_at)
			eng_job_terminate(e, e->jobs[i]);
	while (e->waiters > 0)
		pthread_cond_wait(&e->changed, &e->mu);
	pthread_cond_signal(&e->timer_cv);
	pthread_cond_broadcast(&e->changed);   /* submissions waiting for calibration */
	pthread_mutex_unlock(&e->mu);
	pthread_join(e->timer, NULL);
}
