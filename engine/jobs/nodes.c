/* nodes.c - the pool's nodes probed: what each has, which answer
 *
 * Each node of the pool but the local one (which dlhfs detects itself) is
 * asked through its agent what it has (engine/run/probe.c runs dlh-probe
 * there): at mount, in a thread of its own, and on pool/ctl refresh. The
 * nodes are asked at once, one thread each, without e->mu; the answers are
 * applied under it. A node that does not answer, or cannot see the state
 * directory, is down: the planner leaves it out (dlh_pool_free_view_nodes). */
#include "engine/jobs/nodes.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/jobs/advise.h"
#include "engine/plan/calib.h"
#include "engine/run/probe.h"
#include "engine/util/util.h"

/* One node's probe, as its thread sees it. */
struct node_probe {
	char agent[512], host[DLH_HOST_MAX + 1];
	const char *probe, *state;
	struct dlh_probe_result r;
	int measure;                 /* time the link once it answers */
	double alpha, beta;          /* the link, when measured (0: not) */
	char link_err[256];
	pthread_t t;
	int started;
};

static void *probe_one(void *arg)
{
	struct node_probe *p = arg;
	dlh_probe_node(p->agent, p->host, p->probe, p->state, DLH_PROBE_TIMEOUT, &p->r);
	return NULL;
}

/* Times the links of the nodes of p that answered and wait for it (one
 * after the other: each run takes the network between them; none once
 * dlhfs is stopping). e->mu not held. */
static void measure_links(struct dlh_engine *e, struct node_probe *p, int n)
{
	for (int k = 0; k < n && !atomic_load(&e->closing); k++)
		if (p[k].measure && p[k].r.up &&
		    eng_link_measure(e, p[k].host, p[k].agent, &p[k].alpha, &p[k].beta,
				     p[k].link_err, sizeof p[k].link_err))
			p[k].alpha = p[k].beta = 0;
}

/* The slowest link measured into the calibration the estimator reads
 * (inter-node allreduce), saved. e->mu held. */
static void note_links(struct dlh_engine *e)
{
	double a = 0, b = 0;
	for (int k = 0; k < e->pool.nnodes; k++) {
		a = fmax(a, e->pool.nodes[k].link_alpha);
		b = fmax(b, e->pool.nodes[k].link_beta);
	}
	if (a <= 0 || e->cal.when <= 0 || (a == e->cal.net_alpha && b == e->cal.net_beta))
		return;
	e->cal.net_alpha = a;
	e->cal.net_beta = b;
	if (dlh_calib_save(e->state, &e->cal) < 0)
		fprintf(stderr, "dlhfs: cannot save the links' figures in %s/%s\n", e->state,
			DLH_CALIB_FILE);
}

/* What node k's answer says, applied to the pool. e->mu held. */
static void apply(struct dlh_engine *e, int k, const struct dlh_probe_result *r)
{
	struct dlh_pool_node *nd = &e->pool.nodes[k];
	if (!r->up) {
		nd->probe = DLH_PROBE_DOWN;
		snprintf(nd->probe_what, sizeof nd->probe_what, "%s", r->why);
		return;
	}
	char mem[32];
	nd->probe = DLH_PROBE_UP;
	nd->cpus = r->cpus;   /* what the node has, over what the pool file says */
	nd->devices[nd->cpu_type] = r->cpus;
	if (r->mem_bytes > 0)
		nd->mem_bytes = r->mem_bytes;
	if (r->cpu_model[0])
		snprintf(nd->cpu_model, sizeof nd->cpu_model, "%s", r->cpu_model);
	dlh_size_text(nd->mem_bytes, mem, sizeof mem);
	snprintf(nd->probe_what, sizeof nd->probe_what, "%s answers: %d cpus, %s memory, gpus %s",
		 r->hostname, r->cpus, mem, r->gpus);
}

/* One round: every node but the local one, at once. e->mu not held;
 * e->probing is set by the caller. */
static void probe_round(struct dlh_engine *e)
{
	struct node_probe *p = calloc((size_t)DLH_POOL_NODES, sizeof *p);
	if (!p)
		return;
	pthread_mutex_lock(&e->mu);
	int n = e->pool.nnodes;
	for (int k = 0; k < n; k++) {
		if (k == e->pool.local)
			continue;
		snprintf(p[k].agent, sizeof p[k].agent, "%s", e->pool.nodes[k].agent);
		snprintf(p[k].host, sizeof p[k].host, "%s", e->pool.nodes[k].host);
		p[k].measure = e->pool.nodes[k].link_alpha <= 0 && e->calib_prog[0];
		e->pool.nodes[k].probe = DLH_PROBE_RUNNING;
	}
	pthread_mutex_unlock(&e->mu);
	for (int k = 0; k < n; k++) {
		if (k == e->pool.local)
			continue;
		p[k].probe = e->probe_path;
		p[k].state = e->state;
		if (!e->probe_path[0]) {
			snprintf(p[k].r.why, sizeof p[k].r.why, "dlh-probe was not found beside dlhfs");
			continue;
		}
		p[k].started = !pthread_create(&p[k].t, NULL, probe_one, &p[k]);
		if (!p[k].started)
			snprintf(p[k].r.why, sizeof p[k].r.why, "cannot start a thread to probe it");
	}
	for (int k = 0; k < n; k++)
		if (p[k].started)
			pthread_join(p[k].t, NULL);
	measure_links(e, p, n);
	pthread_mutex_lock(&e->mu);
	for (int k = 0; k < n; k++) {
		if (k == e->pool.local)
			continue;
		apply(e, k, &p[k].r);
		if (p[k].alpha > 0) {
			e->pool.nodes[k].link_alpha = p[k].alpha;
			e->pool.nodes[k].link_beta = p[k].beta;
		}
		if (p[k].measure)   /* its role says why it was not measured */
			snprintf(e->pool.nodes[k].link_why, sizeof e->pool.nodes[k].link_why, "%s",
				 p[k].alpha > 0 ? "" : p[k].link_err);
	}
	note_links(e);
	e->probing = 0;
	if (eng_slots_fit(e))
		fprintf(stderr, "dlhfs: out of memory growing the nodes' slots to their cores\n");
	if (e->on_run_end && !e->stopping)
		e->on_run_end(e);   /* the queue: nodes up now take queued jobs */
	pthread_cond_broadcast(&e->changed);
	pthread_mutex_unlock(&e->mu);
	free(p);
}

int eng_nodes_lost(struct dlh_engine *e, const int *nodes, int n, char *lost, size_t len)
{
	struct node_probe *p = calloc((size_t)(n > 0 ? n : 1), sizeof *p);
	int down = 0;
	size_t used = 0;
	lost[0] = '\0';
	if (!p || e->no_probe || !e->probe_path[0]) {
		free(p);
		return 0;
	}
	pthread_mutex_lock(&e->mu);
	for (int i = 0; i < n; i++) {
		snprintf(p[i].agent, sizeof p[i].agent, "%s", e->pool.nodes[nodes[i]].agent);
		snprintf(p[i].host, sizeof p[i].host, "%s", e->pool.nodes[nodes[i]].host);
		p[i].probe = e->probe_path;
		p[i].state = e->state;
	}
	pthread_mutex_unlock(&e->mu);
	for (int i = 0; i < n; i++)
		p[i].started = !pthread_create(&p[i].t, NULL, probe_one, &p[i]);
	for (int i = 0; i < n; i++)
		if (p[i].started)
			pthread_join(p[i].t, NULL);
	pthread_mutex_lock(&e->mu);
	for (int i = 0; i < n; i++) {
		if (!p[i].started || p[i].r.up)
			continue;
		apply(e, nodes[i], &p[i].r);
		down++;
		if (used < len)
			used += (size_t)snprintf(lost + used, len - used, "%snode %s lost (down: %s)",
						 down > 1 ? "; " : "", e->pool.nodes[nodes[i]].name,
						 p[i].r.why);
	}
	pthread_mutex_unlock(&e->mu);
	free(p);
	return down;
}

/* What the data check of one job asks. */
struct seer {
	struct dlh_engine *e;
	struct dlh_job *job;
	int n;                              /* nodes asked */
	int node[DLH_POOL_NODES];
	struct node_probe p[DLH_POOL_NODES];
	char paths[4][DLH_PATH_MAX + 1];
	const char *see[5];
};

static void *seer_main(void *arg)
{
	struct seer *s = arg;
	struct dlh_engine *e = s->e;
	struct dlh_job *j = s->job;
	for (int i = 0; i < s->n; i++)   /* one after the other: a few, and each is quick */
		dlh_probe_node_sees(s->p[i].agent, s->p[i].host, s->p[i].probe, s->p[i].state, s->see,
				    DLH_PROBE_TIMEOUT, &s->p[i].r);
	pthread_mutex_lock(&e->mu);
	char why[DLH_REASON_MAX - 64] = "";
	const char *bad_node = "";
	for (int i = 0; i < s->n; i++) {
		int k = s->node[i];
		if (!s->p[i].r.up)   /* not answering: down, and the job placed again */
			apply(e, k, &s->p[i].r);
		else if (s->p[i].r.seen)
			j->seen[k] = 1;
		else if (!why[0] && (bad_node = e->pool.nodes[k].name))
			snprintf(why, sizeof why, "node %s cannot read the job's data: %s (the data "
				 "must be on a filesystem every node shares)", e->pool.nodes[k].name,
				 s->p[i].r.unseen);
	}
	j->seeing = 0;
	if (why[0] && j->status == DLH_QUEUED) {
		j->status = DLH_FAILED;
		j->finished = eng_stamp();
		dlh_job_reason(j, why, "node %s cannot read the job's data", bad_node);
		eng_job_log(e, j, "failed: %s", why);
		eng_job_save(e, j);
	} else if (!why[0]) {
		eng_job_log(e, j, "its nodes read its data");
	}
	if (e->on_run_end && !e->stopping)
		e->on_run_end(e);   /* the queue: it may start now */
	e->waiters--;
	pthread_cond_broadcast(&e->changed);
	pthread_mutex_unlock(&e->mu);
	free(s);
	return NULL;
}

int eng_nodes_see(struct dlh_engine *e, struct dlh_job *j, const struct dlh_plan *plan)
{
	if (j->spec.command[0] || e->no_probe || !e->probe_path[0])
		return 1;   /* a command's files are its own; without probes, as the pool file says */
	if (j->seeing)
		return 0;
	struct seer *s = calloc(1, sizeof *s);
	if (!s)
		return 1;   /* the run will say */
	for (int r = 0; r < plan->ranks; r++) {
		int k = plan->node[r], dup = 0;
		if (k < 0 || k == e->pool.local || j->seen[k])
			continue;
		for (int i = 0; i < s->n && !dup; i++)
			dup = s->node[i] == k;
		if (dup)
			continue;
		struct node_probe *p = &s->p[s->n];
		s->node[s->n++] = k;
		snprintf(p->agent, sizeof p->agent, "%s", e->pool.nodes[k].agent);
		snprintf(p->host, sizeof p->host, "%s", e->pool.nodes[k].host);
		p->probe = e->probe_path;
		p->state = e->state;
	}
	if (s->n == 0) {
		free(s);
		return 1;
	}
	const char *files[4] = { j->spec.train, j->spec.train_labels, j->spec.test, j->spec.test_labels };
	int m = 0;
	for (int i = 0; i < 4; i++)
		if (files[i][0] && (i % 2 == 0 || strcmp(j->spec.format, "csv"))) {
			snprintf(s->paths[m], sizeof s->paths[m], "%s", files[i]);
			s->see[m] = s->paths[m];
			m++;
		}
	s->see[m] = NULL;
	s->e = e;
	s->job = j;
	pthread_attr_t attr;
	pthread_t t;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	int rc = pthread_create(&t, &attr, seer_main, s);
	pthread_attr_destroy(&attr);
	if (rc) {
		free(s);
		return 1;
	}
	j->seeing = 1;
	e->waiters++;
	eng_job_log(e, j, "asking %d node%s whether they read its data", s->n, s->n == 1 ? "" : "s");
	return 0;
}

static void *probe_thread(void *arg)
{
	probe_round(arg);
	return NULL;
}

void eng_nodes_probe_start(struct dlh_engine *e)
{
	if (e->pool.nnodes < 2 || e->no_probe)
		return;
	pthread_mutex_lock(&e->mu);
	e->probing = 1;
	e->probe_started = !pthread_create(&e->probe_thread, NULL, probe_thread, e);
	if (!e->probe_started)
		e->probing = 0;
	pthread_mutex_unlock(&e->mu);
}

int eng_nodes_refresh(struct dlh_engine *e, char *err, size_t errlen)
{
	pthread_mutex_lock(&e->mu);
	int busy = e->probing, off = e->no_probe;
	e->probing |= !off;
	pthread_mutex_unlock(&e->mu);
	if (off) {
		snprintf(err, errlen, "pool ctl: \"refresh\": this mount does not probe its nodes "
			 "(-o probe=off)");
		return -EINVAL;
	}
	if (busy) {
		snprintf(err, errlen, "pool ctl: \"refresh\": the nodes are being probed; "
			 "try again when pool/nodes/*/state no longer says probing");
		return -EBUSY;
	}
	probe_round(e);
	return 0;
}

void eng_nodes_stop(struct dlh_engine *e)
{
	if (e->probe_started)
		pthread_join(e->probe_thread, NULL);
	e->probe_started = 0;
}
