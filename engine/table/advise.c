/* advise.c - the engine's side of the planner and the estimator: the
 * decision at submission (engine/choose), the estimate and plan files
 * written before launch, the actual figures and the history after the run,
 * and the calibration they rest on (first mount, recalibrate) */
#include "engine/table/advise.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/table/table.h"
#include "engine/util/util.h"

_Static_assert(DLH_JOB_RANKS == DLH_RANKS_MAX, "a job records every rank of a plan");

/* ---- calibration ---- */

/* This node's GPU types into g (at most DLH_CALIB_DEVS), numbered as the
 * pool numbers them: in type order (dlh_plan_place). Only types missing
 * from have when have is not NULL, or measured there before the GEMMs and
 * passes were timed as a graph's nodes (no node_s), before the GEMM grid
 * reached the convolutions' shapes (fewer than DLH_CALIB_GEMM_N dims) or
 * before the direct conv products were timed (no direct_s, direct_dw_s).
 * e->mu held or not needed. Returns how many. */
static int local_gpus(const struct dlh_engine *e, const struct dlh_calib *have,
		      struct dlh_calib_gpu *g)
{
	const struct dlh_pool *p = &e->pool;
	int n = 0, first = 0;

	if (p->local < 0)
		return 0;
	for (int t = 0; t < p->ntypes && n < DLH_CALIB_DEVS; t++) {
		int count = p->nodes[p->local].devices[t];

		if (!p->type[t].gpu || count <= 0)
			continue;
		const struct dlh_calib_dev *d = have ? dlh_calib_dev(have, p->type[t].name) : NULL;
		if (!have || !d || d->gpu <= 0 || d->node_s <= 0 || d->direct_s <= 0 ||
		    d->direct_dw_s <= 0 ||
		    dlh_calib_grid_n(d) < DLH_CALIB_GEMM_N) {
			snprintf(g[n].type, sizeof g[n].type, "%s", p->type[t].name);
			g[n].first = first;
			g[n++].count = count;
		}
		first += count;
	}
	return n;
}

/* Measures the GPU types of g into c, each on its own; one that fails
 * (no GPU here, a driver error) is left out and its reason kept in
 * e->calib_gpu_err (pool/calibration shows it; not fatal: its pool
 * figures stand in). */
static void measure_gpus(struct dlh_engine *e, const struct dlh_calib_gpu *g, int n,
			 struct dlh_calib *c)
{
	char why[sizeof e->calib_gpu_err] = "", err[256];
	size_t used = 0;

	for (int i = 0; i < n && !atomic_load(&e->closing); i++) {
		struct dlh_calib_opts o = {
			.backend = &e->backend, .program = e->calib_prog, .dir = e->state,
			.cancel = &e->closing, .gpus = &g[i], .ngpus = 1,
		};
		if (dlh_calib_measure_gpus(&o, c, err, sizeof err) < 0 && used < sizeof why)
			used += (size_t)snprintf(why + used, sizeof why - used, "%s%s: %s",
						 used ? "; " : "", g[i].type, err);
	}
	pthread_mutex_lock(&e->mu);
	snprintf(e->calib_gpu_err, sizeof e->calib_gpu_err, "%s", why);
	pthread_mutex_unlock(&e->mu);
}

/* Measures (e->mu not held: it takes seconds), then stores the result. */
static int measure(struct dlh_engine *e, char *err, size_t errlen)
{
	struct dlh_calib c;
	struct dlh_calib_gpu g[DLH_CALIB_DEVS];
	struct dlh_calib_opts o = {
		.backend = &e->backend, .program = e->calib_prog, .cpus = e->pool.node.cpus,
		.dir = e->state, .cancel = &e->closing,
	};
	int rc = dlh_calib_measure(&o, &c, err, errlen);

	pthread_mutex_lock(&e->mu);
	int ngpus = local_gpus(e, NULL, g);
	pthread_mutex_unlock(&e->mu);
	if (!rc)
		measure_gpus(e, g, ngpus, &c);

	pthread_mutex_lock(&e->mu);   /* the links, measured apart (eng_link_measure) */
	for (int k = 0; k < e->pool.nnodes; k++) {
		c.net_alpha = fmax(c.net_alpha, e->pool.nodes[k].link_alpha);
		c.net_beta = fmax(c.net_beta, e->pool.nodes[k].link_beta);
	}
	if (c.net_alpha <= 0) {   /* measured by an earlier mount */
		c.net_alpha = e->cal.net_alpha;
		c.net_beta = e->cal.net_beta;
	}
	pthread_mutex_unlock(&e->mu);
	if (!rc && (rc = dlh_calib_save(e->state, &c)) < 0)
		snprintf(err, errlen, "cannot write %s/%s: %s", e->state, DLH_CALIB_FILE,
			 strerror(-rc));
	pthread_mutex_lock(&e->mu);
	if (!rc)
		e->cal = c;
	snprintf(e->calib_err, sizeof e->calib_err, "%s", rc ? err : "");
	e->calibrating = 0;
	pthread_cond_broadcast(&e->changed);
	pthread_mutex_unlock(&e->mu);
	return rc;
}

int eng_link_measure(struct dlh_engine *e, const char *host, const char *agent, double *alpha,
		     double *beta, char *err, size_t errlen)
{
	struct dlh_launch_host hosts[2];
	char dir[2200];
	/* not beside the calibration's runs: their files in the state dir */
	snprintf(dir, sizeof dir, "%s/links", e->state);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot make \"%s\": %s", dir, strerror(errno));
		return -errno;
	}
	pthread_mutex_lock(&e->mu);   /* nor at the same time: each would time the other */
	while (e->calibrating && !e->stopping && !atomic_load(&e->closing))
		pthread_cond_wait(&e->changed, &e->mu);
	pthread_mutex_unlock(&e->mu);
	if (atomic_load(&e->closing)) {
		snprintf(err, errlen, "not measured: dlhfs is stopping");
		return -ECANCELED;
	}
	if (gethostname(hosts[0].host, sizeof hosts[0].host - 1) < 0)
		snprintf(hosts[0].host, sizeof hosts[0].host, "localhost");
	hosts[0].ranks = 1;
	snprintf(hosts[1].host, sizeof hosts[1].host, "%s", host);
	hosts[1].ranks = 1;
	struct dlh_calib_opts o = {
		.backend = &e->backend, .program = e->calib_prog, .cpus = 2, .dir = dir,
		.hosts = hosts, .nhosts = 2, .agent = agent, .cancel = &e->closing,
	};
	return dlh_calib_link(&o, alpha, beta, err, errlen);
}

/* At open: the GPU types of this node the cache lacks, measured and
 * added to it (the CPU's figures are the cache's). */
static void *calib_gpus_main(void *arg)
{
	struct dlh_engine *e = arg;
	struct dlh_calib_gpu g[DLH_CALIB_DEVS];
	struct dlh_calib *c = malloc(sizeof *c);

	pthread_mutex_lock(&e->mu);
	int n = local_gpus(e, &e->cal, g);
	if (c)
		*c = e->cal;
	pthread_mutex_unlock(&e->mu);
	if (c)
		measure_gpus(e, g, n, c);
	int rc = c ? dlh_calib_save(e->state, c) : -ENOMEM;
	pthread_mutex_lock(&e->mu);
	if (!rc)
		e->cal = *c;
	e->calibrating = 0;
	pthread_cond_broadcast(&e->changed);
	pthread_mutex_unlock(&e->mu);
	if (rc < 0 && !atomic_load(&e->closing))
		fprintf(stderr, "dlhfs: cannot write %s/%s: %s\n", e->state, DLH_CALIB_FILE,
			strerror(-rc));
	free(c);
	return NULL;
}

static void *calib_main(void *arg)
{
	struct dlh_engine *e = arg;
	char err[256];

	if (measure(e, err, sizeof err) < 0 && !atomic_load(&e->closing))
		fprintf(stderr, "dlhfs: calibration failed: %s (jobs run unestimated; "
			"echo recalibrate > pool/ctl retries)\n", err);
	return NULL;
}

/* dlh-calib is -o calib's, else beside dlh-train. */
static void find_calib_prog(struct dlh_engine *e)
{
	if (e->calib_prog[0])
		return;
	snprintf(e->calib_prog, sizeof e->calib_prog, "%s", e->tools.trainer);
	char *slash = strrchr(e->calib_prog, '/');
	snprintf(slash ? slash + 1 : e->calib_prog,
		 sizeof e->calib_prog - (size_t)(slash ? slash + 1 - e->calib_prog : 0), "dlh-calib");
}

int eng_calibrate_now(struct dlh_engine *e, struct dlh_buf *out, char *err, size_t errlen)
{
	int rc;

	find_calib_prog(e);
	e->calibrating = 1;
	if ((rc = measure(e, err, errlen)) < 0)
		return rc;
	return dlh_calib_format(&e->cal, out);
}

void eng_calib_open(struct dlh_engine *e, int no_calibrate)
{
	char err[256];
	int rc;

	find_calib_prog(e);
	rc = dlh_calib_load(e->state, &e->cal, err, sizeof err);
	if (rc == -EINVAL)
		fprintf(stderr, "dlhfs: ignoring %s/%s: %s; measuring again\n", e->state,
			DLH_CALIB_FILE, err);
	if (dlh_history_fit(e->state, &e->corr) < 0)
		e->corr = (struct dlh_correction){ .compute = 1.0, .comm = 1.0, .startup = 1.0 };
	if (no_calibrate)
		return;
	struct dlh_calib_gpu g[DLH_CALIB_DEVS];
	if (!rc && local_gpus(e, &e->cal, g) == 0)
		return;   /* every device of this node is in the cache */
	if (rc)
		memset(&e->cal, 0, sizeof e->cal);
	e->calibrating = 1;
	if (pthread_create(&e->calib_thread, NULL, rc ? calib_main : calib_gpus_main, e)) {
		e->calibrating = 0;
		snprintf(e->calib_err, sizeof e->calib_err, "cannot start a thread");
		return;
	}
	e->calib_thread_live = 1;
}

void eng_calib_close(struct dlh_engine *e)
{
	if (e->calib_thread_live)
		pthread_join(e->calib_thread, NULL);
	e->calib_thread_live = 0;
}

int dlh_engine_recalibrate(struct dlh_engine *e, char *err, size_t errlen)
{
	pthread_mutex_lock(&e->mu);
	if (e->calibrating) {
		pthread_mutex_unlock(&e->mu);
		snprintf(err, errlen, "a calibration is running already");
		return -EBUSY;
	}
	e->calibrating = 1;
	pthread_mutex_unlock(&e->mu);
	return measure(e, err, errlen);
}

int dlh_engine_calibration(struct dlh_engine *e, struct dlh_buf *out)
{
	int rc = 0;

	pthread_mutex_lock(&e->mu);
	if (e->cal.when > 0) {
		rc = dlh_calib_format(&e->cal, out);
		/* comments to the cache's parser: a GPU type left out, or being measured */
		if (!rc && e->calib_gpu_err[0])
			rc = dlh_buf_printf(out, "# not measured: %s\n", e->calib_gpu_err) ? -ENOMEM : 0;
		if (!rc && e->calibrating)
			rc = dlh_buf_printf(out, "# measuring this node's GPUs; this file fills in "
					    "when done\n") ? -ENOMEM : 0;
	} else if (e->calibrating) {
		rc = dlh_buf_printf(out, "measuring (first mount); this file fills in when done\n")
			? -ENOMEM : 0;
	} else {
		rc = dlh_buf_printf(out, "not measured%s%s\n", e->calib_err[0] ? ": " : "",
				    e->calib_err) ? -ENOMEM : 0;
	}
	pthread_mutex_unlock(&e->mu);
	return rc;
}

/* ---- before the run ---- */

#define PROFILES_DIR "profiles"   /* STATE/profiles/KEY: a program's fitted cost model */

/* STATE/profiles/KEY of spec's program into buf. */
static void record_path(const struct dlh_engine *e, const struct dlh_spec *spec, char *buf,
			size_t len)
{
	snprintf(buf, len, "%s/" PROFILES_DIR "/%016llx", e->state,
		 (unsigned long long)dlh_profile_key(spec));
}

int eng_profile_record_read(const struct dlh_engine *e, const struct dlh_spec *spec,
			    struct dlh_profile_fit *f)
{
	char path[4096], *text = NULL;
	record_path(e, spec, path, sizeof path);
	int rc = dlh_read_file_nofollow(path, 1 << 16, &text, NULL);
	if (!rc)
		rc = dlh_profile_parse(text, f);
	free(text);
	return rc;
}

int eng_profile_record_write(const struct dlh_engine *e, const struct dlh_spec *spec,
			     const struct dlh_profile_fit *f)
{
	char path[4096];
	struct dlh_buf b = { 0 };
	snprintf(path, sizeof path, "%s/" PROFILES_DIR, e->state);
	int rc = dlh_mkdir_p(path, 0700);
	if (!rc)
		rc = dlh_profile_format(f, &b);
	record_path(e, spec, path, sizeof path);
	if (!rc)   /* what ran and how fast: root's, as STATE/history */
		rc = dlh_write_atomic(path, b.data, b.len);   /* in a 0700 directory */
	dlh_buf_free(&b);
	return rc;
}

int eng_choose(struct dlh_engine *e, const struct dlh_spec *spec,
	       const struct dlh_dataset_shape *shape, struct dlh_choice *c,
	       char *err, size_t errlen)
{
	struct dlh_calib cal;
	struct dlh_correction corr;
	/* the pool as it is now: probes, a reload and drains change e->pool under
	 * e->mu, and the choice takes a while without it */
	struct dlh_pool *pool = malloc(sizeof *pool);
	struct dlh_choose_in in = { .spec = spec, .pool = pool, .cal = &cal, .corr = &corr,
				    .shape = shape };
	if (!pool) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}

	/* a first-mount calibration takes seconds: the first jobs wait for it
	 * rather than run unplanned */
	pthread_mutex_lock(&e->mu);
	while (e->calibrating && !e->stopping && !atomic_load(&e->closing))
		pthread_cond_wait(&e->changed, &e->mu);
	if (e->calibrating) {   /* dlhfs is stopping: not planned without its figures */
		pthread_mutex_unlock(&e->mu);
		free(pool);
		snprintf(err, errlen, "dlhfs is stopping (a calibration was under way); submit "
			 "again once it is mounted");
		return -EAGAIN;
	}
	*pool = e->pool;
	cal = e->cal;
	corr = e->corr;
	int used[DLH_POOL_NODES];
	memcpy(used, e->node_used, sizeof used);
	in.cpus_used = used;
	pthread_mutex_unlock(&e->mu);
	struct dlh_profile_fit fit;
	if (spec->command[0] && !eng_profile_record_read(e, spec, &fit))
		in.fit = &fit;
	int rc = dlh_choose(&in, c, err, errlen);
	free(pool);
	return rc;
}

void eng_choice_apply(struct dlh_job *j, const struct dlh_choice *c)
{
	j->plan_ranks = c->ranks;
	memcpy(j->plan_batch, c->batch, sizeof c->batch[0] * (size_t)c->ranks);
	j->plan_lr = c->lr;
	j->plan_warmup = c->warmup_steps;
	j->plan_nodes = c->estimated ? c->best.c.nodes : 0;
	j->plan_parts[0] = '\0';
	for (int i = 0, used = 0; c->estimated && i < c->best.c.nparts; i++) {
		const struct dlh_part *pt = &c->best.c.part[i];
		if (j->spec.device != DLH_DEVICE_GPU)
			break;
		used += snprintf(j->plan_parts + used, sizeof j->plan_parts - (size_t)used, "%s%s:%d",
				 i ? "," : "", c->pool.type[pt->type].name, pt->count);
		if (used >= (int)sizeof j->plan_parts) {   /* cannot happen: 2 parts of short names */
			j->plan_parts[0] = '\0';
			break;
		}
	}
	j->est_total = c->estimated ? c->est.total_s : 0.0;
	j->profile_n = c->profile_runs;
	j->profile_phase = c->profile_runs > 0;
	memcpy(j->profile_counts, c->profile_counts, sizeof j->profile_counts);
}

int eng_job_override(const struct dlh_job *j, struct dlh_plan_override *ov)
{
	if (j->plan_ranks < 1)
		return 0;
	*ov = (struct dlh_plan_override){
		.ranks = j->plan_ranks, .batch = j->plan_batch, .lr = j->plan_lr,
		.warmup_steps = j->plan_warmup,
	};
	return 1;
}

void eng_plan_types(const struct dlh_engine *e, const struct dlh_job *j, struct dlh_plan *plan)
{
	char name[DLH_POOL_TYPE_NAME];
	int r = 0, count;
	const char *s = j->plan_parts;
	if (!plan->gpu || !s[0])
		return;
	while (*s) {
		size_t n = strcspn(s, ":");
		if (n >= sizeof name || s[n] != ':' || sscanf(s + n + 1, "%d", &count) != 1)
			break;
		snprintf(name, sizeof name, "%.*s", (int)n, s);
		int t = dlh_pool_find_type(&e->pool, name);
		for (int i = 0; t >= 0 && i < count && r < plan->ranks; i++)
			plan->gtype[r++] = t;
		s += n + 1 + strcspn(s + n + 1, ",");
		s += *s == ',';
	}
	if (r != plan->ranks)   /* the record does not match the plan: any GPU */
		for (r = 0; r < plan->ranks; r++)
			plan->gtype[r] = -1;
}

int eng_job_nodes(const struct dlh_engine *e, const struct dlh_job *j)
{
	int n = j->spec.nodes > 0 ? j->spec.nodes : j->plan_nodes, up = 0;
	if (!j->nodes_lost)
		return n;
	for (int k = 0; k < e->pool.nnodes; k++)   /* after a lost node: those that remain */
		up += dlh_pool_node_usable(&e->pool, k);
	return n < up ? n : up;
}

/* The agents of a run's nodes, when they differ: dir/agents (DLH_RUN_AGENTS),
 * a line "HOST AGENT WORDS" a node, which dlh-agent reads; and, as the
 * run's agent, "DLH-AGENT MAP" into agent. Returns 0, or -errno with err. */
static int agents_map(const struct dlh_engine *e, const char *dir, const int *node, int n,
		      const struct dlh_launch_host *hosts, char *agent, size_t agentlen,
		      char *err, size_t errlen)
{
	char path[4200];
	struct dlh_buf b = {0};
	int rc = 0;
	if (!e->agent_path[0]) {
		snprintf(err, errlen, "the run's nodes are reached by different agents (pool file) "
			 "and dlh-agent, which joins them, was not found beside dlhfs");
		return -EINVAL;
	}
	for (int i = 0; i < n && !rc; i++) {
		const struct dlh_pool_node *nd = &e->pool.nodes[node[i]];
		if (node[i] != e->pool.local)
			rc = dlh_buf_printf(&b, "%s %s\n", hosts[i].host,
					    nd->agent[0] ? nd->agent : DLH_AGENT_DEFAULT) ? -ENOMEM : 0;
	}
	snprintf(path, sizeof path, "%s/" DLH_RUN_AGENTS, dir);
	if (!rc)
		rc = dlh_write_atomic(path, b.data, b.len);
	dlh_buf_free(&b);
	if (rc) {
		snprintf(err, errlen, "cannot write \"%s\": %s", path, strerror(-rc));
		return rc;
	}
	/* Open MPI splits its agent on blanks: the two words must have none */
	if (strpbrk(path, " \t") || strpbrk(e->agent_path, " \t") ||
	    snprintf(agent, agentlen, "%s %s", e->agent_path, path) >= (int)agentlen) {
		snprintf(err, errlen, "the run's nodes are reached by different agents, and dlh-agent "
			 "\"%s\" or its map \"%s\" has a blank in its path or is too long for "
			 "mpirun's launch agent", e->agent_path, path);
		return -EINVAL;
	}
	return 0;
}

int eng_launch_hosts(const struct dlh_engine *e, const struct dlh_plan *plan, const char *dir,
		     struct dlh_launch_host *hosts, int *nhosts, char *agent, size_t agentlen,
		     char *err, size_t errlen)
{
	int node[DLH_POOL_NODES], count[DLH_POOL_NODES], other = -1, mixed = 0;
	int n = plan->ranks > 0 && plan->node[0] >= 0 ?
		dlh_plan_nodes(plan, node, count, DLH_POOL_NODES) : 0;
	*nhosts = 0;
	agent[0] = '\0';
	if (n == 0 || (n == 1 && node[0] == e->pool.local))
		return 0;   /* this machine only */
	for (int i = 0; i < n; i++) {
		struct dlh_launch_host *h = &hosts[i];
		const struct dlh_pool_node *nd = &e->pool.nodes[node[i]];
		if (node[i] == e->pool.local) {   /* the name mpirun knows itself by */
			if (gethostname(h->host, sizeof h->host - 1) < 0)
				snprintf(h->host, sizeof h->host, "localhost");
		} else {
			snprintf(h->host, sizeof h->host, "%s", nd->host);
			mixed |= other >= 0 && strcmp(nd->agent, e->pool.nodes[other].agent);
			other = node[i];
		}
		h->ranks = count[i];
	}
	*nhosts = n;
	if (mixed)   /* one launch: dlh-agent takes each node's own */
		return agents_map(e, dir, node, n, hosts, agent, agentlen, err, errlen);
	snprintf(agent, agentlen, "%s", other >= 0 ? e->pool.nodes[other].agent : "");
	return 0;
}

int eng_job_slots(const struct dlh_engine *e, const struct dlh_job *j)
{
	return j->plan_ranks > 0 ? j->plan_ranks : dlh_plan_slots(&j->spec, &e->pool);
}

/* The estimate file of a decision: the prediction, or why there is none. */
static int estimate_text(const struct dlh_choice *c, struct dlh_buf *b)
{
	if (!c->estimated)
		return dlh_buf_printf(b, "estimated=no\nreason=%s\n", c->why) ? -ENOMEM : 0;
	int rc = dlh_estimate_format(&c->est, NULL, b);
	if (!rc && c->profiled &&   /* a program's: what it was fitted from, and the fit */
	    !(rc = dlh_buf_printf(b, "source=%s\n", c->fit_source) ? -ENOMEM : 0))
		rc = dlh_profile_format(&c->fit, b);
	return rc;
}

int eng_write_choice(struct dlh_engine *e, const struct dlh_job *j, const struct dlh_choice *c,
		     const struct dlh_plan *plan)
{
	long id = j->id;
	char path[4096];
	struct dlh_buf b = {0};
	int rc = estimate_text(c, &b);

	eng_job_file(e, id, "estimate", path, sizeof path);
	if (!rc)
		rc = dlh_write_atomic(path, b.data, b.len);
	dlh_buf_free(&b);
	if (!rc && !(rc = dlh_choice_format(c, &b))) {
		eng_job_file(e, id, "planner", path, sizeof path);
		rc = dlh_write_atomic(path, b.data, b.len);
	}
	dlh_buf_free(&b);
	if (!rc && plan)
		rc = eng_write_plan(e, j, plan);
	return rc;
}

const char *eng_gpu_type(const struct dlh_engine *e, const struct dlh_plan *plan)
{
	int t = plan->gpu && plan->ranks > 0 ? plan->gtype[0] : -1;
	for (int r = 1; t >= 0 && r < plan->ranks; r++)
		if (plan->gtype[r] != t)
			t = -1;
	return t >= 0 && t < e->pool.ntypes ? e->pool.type[t].name : NULL;
}

int eng_write_plan(struct dlh_engine *e, const struct dlh_job *j, const struct dlh_plan *plan)
{
	long id = j->id;
	char path[4096], dir[4096], *planner = NULL;
	struct dlh_buf b = {0};
	struct eng_env env;
	struct dlh_launch_host hosts[DLH_POOL_NODES];
	char agent[512], why[512];
	int nhosts, rc = dlh_plan_format(plan, &e->pool, &b);

	/* how it is launched, as the backend will do it: the same environment
	 * (rank 0's address; the port is chosen again at the launch) */
	eng_job_dir(e, id, dir, sizeof dir);
	if (eng_launch_hosts(e, plan, dir, hosts, &nhosts, agent, sizeof agent, why, sizeof why) && !rc)
		rc = dlh_buf_printf(&b, "launch refused: %s\n", why) ? -ENOMEM : 0, nhosts = 0;
	eng_run_env(e, j, plan, nhosts, &env);
	struct dlh_launch l = {
		.argv = plan->argv, .ranks = plan->ranks, .env = env.v, .job_dir = dir,
		.hosts = hosts, .nhosts = nhosts, .agent = agent,
		.est_s = j->est_total, .time_limit = (double)j->spec.time_limit,
		.grace = dlh_spec_grace(&j->spec), .memory = plan->memory,
		.gpu = plan->gpu, .gpu_type = eng_gpu_type(e, plan),
	};
	if (!rc)
		rc = e->backend.ops->describe(&e->backend, &l, &b);

	eng_job_file(e, id, "planner", path, sizeof path);
	if (!rc && !dlh_read_file_nofollow(path, 1 << 20, &planner, NULL))
		rc = dlh_buf_printf(&b, "%s", planner) ? -ENOMEM : 0;
	free(planner);
	eng_job_file(e, id, "plan", path, sizeof path);
	if (!rc)
		rc = dlh_write_atomic(path, b.data, b.len);
	dlh_buf_free(&b);
	return rc;
}

/* ---- after the run ---- */

/* Job id's estimate file into *text (the caller frees it). Returns 0, or -errno. */
static int read_estimate(const struct dlh_engine *e, long id, char **text)
{
	char path[4096];
	eng_job_file(e, id, "estimate", path, sizeof path);
	return dlh_read_file_nofollow(path, 1 << 20, text, NULL);
}

/* The prediction in an estimate file's text, or -errno (-ENOENT: none). */
static int stored_estimate(const char *text, struct dlh_estimate *pred)
{
	char v[64];
	int rc = dlh_estimate_parse(text, pred);
	if (!dlh_kv_get(text, "estimated", v, sizeof v) && !strcmp(v, "no"))
		rc = -ENOENT;
	return rc;
}

/* Appends to b the lines of an estimate file's text that begin with one
 * of the n prefixes (what dlh_estimate_format does not write), or all the
 * others (but). Returns 0, or -ENOMEM. */
static int kept_lines(const char *text, const char *const *prefix, int n, int but,
		      struct dlh_buf *b)
{
	int rc = 0;
	for (const char *l = text; *l && !rc;) {
		size_t len = strcspn(l, "\n");
		int match = 0;
		for (int i = 0; i < n && !match; i++)
			match = !strncmp(l, prefix[i], strlen(prefix[i]));
		if (match != but)
			rc = dlh_buf_printf(b, "%.*s\n", (int)len, l) ? -ENOMEM : 0;
		l += len + (l[len] == '\n');
	}
	return rc;
}

#define CURRENT "current_"   /* the estimate file's lines of the figure a running job's
				rows give (eng_estimate_current) */

void eng_estimate_current(const struct dlh_engine *e, const struct dlh_job *j, double total_s,
			  long step)
{
	static const char *const cur[] = { CURRENT };
	char path[4096], tmp[4200], *text = NULL;
	struct dlh_buf b = { 0 };
	int rc = 0;
	if (!read_estimate(e, j->id, &text)) {
		rc = kept_lines(text, cur, 1, 1, &b);
		free(text);
	}
	if (!rc && b.len)   /* a job with an estimate file only */
		rc = dlh_buf_printf(&b, CURRENT "total_s=%.6g\n" CURRENT "step=%ld\n" CURRENT "at=%.0f\n",
				    total_s, step, dlh_now()) ? -ENOMEM : 0;
	eng_job_file(e, j->id, "estimate", path, sizeof path);
	snprintf(tmp, sizeof tmp, "%s.current.tmp", path);
	/* no fsync: the figure is gone at the next look anyway (e->mu is held);
	 * a new file of ours (the owner may write in the job's directory) */
	unlink(tmp);
	int fd = !rc && b.len ? open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644) : -1;
	if (fd >= 0) {
		rc = dlh_write_all(fd, b.data, b.len);
		close(fd);
		if (rc || rename(tmp, path))
			unlink(tmp);
	}
	dlh_buf_free(&b);
}

void eng_job_actuals(struct dlh_engine *e, struct dlh_job *j, double wall_s)
{
	char dir[4096], path[4096], *text = NULL;
	struct dlh_estimate pred, act;
	struct dlh_buf b = {0};

	if (j->est_total <= 0 || read_estimate(e, j->id, &text) < 0)
		return;
	eng_job_dir(e, j->id, dir, sizeof dir);
	if (stored_estimate(text, &pred) < 0 || dlh_estimate_actual(dir, wall_s, &act) < 0) {
		free(text);
		return;
	}
	/* its energy: the machine's meter over the run (RAPL), the job's share
	 * of its cores; where there is none, the measured time at the power the
	 * estimate modelled for its devices */
	struct dlh_energy now_m;
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	if (j->energy_ok && !dlh_energy_read(&now_m) && cores > 0) {
		double used = dlh_energy_since(&j->energy_start, &now_m);
		double share = j->ranks < cores ? (double)j->ranks / (double)cores : 1.0;
		if (used >= 0) {
			act.joules = used * share;
			eng_job_log(e, j, "energy: %.1f J measured (the machine's RAPL meter, %.1f J "
				    "over the run, %d of its %ld cores)", act.joules, used, j->ranks, cores);
		}
	}
	if (act.joules < 0 && act.total_s > 0 && pred.total_s > 0 && pred.joules > 0)
		act.joules = pred.joules * act.total_s / pred.total_s;
	if (act.mem_bytes < 0 && j->spec.command[0] && j->peak_mem > 0 && j->ranks > 0)
		act.mem_bytes = (double)j->peak_mem / j->ranks;   /* a program's: its cgroup's, per rank */
	int rc = dlh_estimate_format(&pred, &act, &b);
	/* a program's: where its estimate came from and its fit; any job's: the
	 * figure its rows gave last while it ran, and its error */
	static const char *const kept[] = { "source=", "corrected_by=", "profile_", CURRENT };
	if (!rc)
		rc = kept_lines(text, kept, 4, 0, &b);
	free(text);
	char cur[64];
	if (!rc && !dlh_kv_get(b.data, CURRENT "total_s", cur, sizeof cur) && act.total_s > 0)
		rc = dlh_buf_printf(&b, "error_" CURRENT "total_s=%.1f\n",
				    100.0 * (act.total_s - strtod(cur, NULL)) / act.total_s) ? -ENOMEM : 0;
	if (!rc) {
		eng_job_file(e, j->id, "estimate", path, sizeof path);
		dlh_write_atomic(path, b.data, b.len);
	}
	dlh_buf_free(&b);
	if (j->spec.command[0]) {   /* a program's: its record learns, not the trainer's refit */
		struct dlh_profile_fit f;
		eng_job_log(e, j, "estimate: %.1f s predicted, %.1f s actual (%+.1f%%)", pred.total_s,
			    act.total_s, act.total_s > 0 ? 100.0 * (act.total_s - pred.total_s) / act.total_s : 0.0);
		if (!j->suspends && !j->restarts && !j->taken_back &&
		    !eng_profile_record_read(e, &j->spec, &f)) {
			dlh_profile_learn(&f, pred.total_s, act.total_s);
			eng_profile_record_write(e, &j->spec, &f);
		}
		return;
	}
	/* a run that was interrupted (suspended, restarted) is not the run
	 * that was predicted: it would teach the refit the wrong thing */
	if (j->suspends || j->restarts)
		return;
	/* nor a run found again after a restart of dlhfs: how long dlhfs was
	 * away is in its wall time as much as the run (a +54% error learnt) */
	if (j->taken_back) {
		eng_job_log(e, j, "estimate: %.1f s predicted, %.1f s actual; not learnt from: dlhfs "
			    "restarted while it ran", pred.total_s, act.total_s);
		return;
	}
	if (dlh_history_add(e->state, &pred, &act) < 0)
		return;
	struct dlh_correction corr;

	if (dlh_history_fit(e->state, &corr) >= 0)
		e->corr = corr;
	eng_job_log(e, j, "estimate: %.1f s predicted, %.1f s actual (%+.1f%%)", pred.total_s,
		    act.total_s, act.total_s > 0 ? 100.0 * (act.total_s - pred.total_s) / act.total_s : 0.0);
}
