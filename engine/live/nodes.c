/* nodes.c - the pool's nodes probed: what each has, which answer
 *
 * Each node of the pool but the local one (which dlhfs detects itself) is
 * asked through its agent what it has (engine/run/probe.c runs dlh-probe
 * there): at mount, in a thread of its own, and on pool/ctl refresh. The
 * nodes are asked at once, one thread each, without e->mu; the answers are
 * applied under it. A node that does not answer, does not read back the
 * token dlhfs wrote in the state directory a moment before (it does not
 * share it), or whose copy of a job's data differs from this machine's, is
 * down: the planner leaves it out (dlh_pool_free_view_nodes). Before a
 * job's first run on other nodes, each is asked as the job's owner (their
 * keys, their rights): a node the owner cannot reach fails the job.
 *
 * A Slurm pool (backend = slurm) is probed differently: each round asks
 * sinfo for the partition's nodes (engine/run/slurm.c), which become the
 * pool (dlh_pool_slurm_parse, dlh_pool_merge: a node keeps its index), each
 * up or down as Slurm's state says (idle, mixed, allocated: up; drained,
 * down, not responding: down). Slurm decides where ranks run and that its
 * nodes share the files: no node is asked through an agent. */
#include "engine/live/nodes.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/live/slots.h"
#include "engine/table/advise.h"
#include "engine/plan/calib.h"
#include "engine/run/backend.h"
#include "engine/run/owner.h"
#include "engine/run/probe.h"
#include "engine/util/util.h"

/* One node's probe, as its thread sees it. */
struct node_probe {
	char agent[512], host[DLH_HOST_MAX + 1];
	const char *probe, *state;
	const char *token_path, *token;   /* the round's token (make_token) */
	struct dlh_probe_result r;
	int measure;                 /* time the link once it answers */
	double alpha, beta;          /* the link, when measured (0: not) */
	char link_err[256];
	pthread_t t;
	int started;
	int asked;                   /* 1: this round asks it */
};

static void *probe_one(void *arg)
{
	struct node_probe *p = arg;
	const struct dlh_probe_ask a = {
		.agent = p->agent, .host = p->host, .probe = p->probe, .state = p->state,
		.token_path = p->token_path, .token = p->token, .timeout = DLH_PROBE_TIMEOUT,
	};
	dlh_probe_ask(&a, &p->r);
	return NULL;
}

/* A token for the nodes to read back: a file in the state dir holding
 * random text (path and text out; readable by all, since owners' probes
 * read it too). Returns 0, or -errno (then no token is asked). */
static int make_token(const struct dlh_engine *e, char *path, size_t plen, char *text, size_t tlen)
{
	unsigned char raw[16];
	if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
		return -EIO;
	size_t o = 0;
	for (size_t i = 0; i < sizeof raw && o + 3 <= tlen; i++)
		o += (size_t)snprintf(text + o, tlen - o, "%02x", raw[i]);
	snprintf(path, plen, "%s/.token-%s", e->state, text);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	int rc = dlh_write_all(fd, text, strlen(text)) < 0 || fchmod(fd, 0644) < 0 ? -EIO : 0;
	if (close(fd) < 0 && !rc)
		rc = -EIO;
	if (rc)
		unlink(path);
	return rc;
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
		if (nd->probe != DLH_PROBE_DOWN)
			nd->down_since = dlh_now();
		nd->probe = DLH_PROBE_DOWN;
		snprintf(nd->probe_what, sizeof nd->probe_what, "%s", r->why);
		return;
	}
	char mem[32];
	nd->probe = DLH_PROBE_UP;
	nd->down_since = 0;
	nd->cpus = r->cpus;   /* what the node has, over what the pool file says */
	nd->devices[nd->cpu_type] = r->cpus;
	if (r->mem_bytes > 0)
		nd->mem_bytes = r->mem_bytes;
	if (r->cpu_model[0])
		snprintf(nd->cpu_model, sizeof nd->cpu_model, "%s", r->cpu_model);
	nd->free_port = r->free_port;
	if (r->isolation[0])
		snprintf(nd->isolation, sizeof nd->isolation, "%s", r->isolation);
	dlh_size_text(nd->mem_bytes, mem, sizeof mem);
	snprintf(nd->probe_what, sizeof nd->probe_what, "%s answers: %d cpus, %s memory, gpus %s",
		 r->hostname, r->cpus, mem, r->gpus);
}

static int node_busy(const struct dlh_engine *e, int k);

/* Slurm's word on node k (slurm_state, and probe_what holding its reason
 * as dlh_pool_slurm_parse left it) made its probe state. e->mu held. */
static void apply_slurm(struct dlh_engine *e, int k, const struct dlh_pool_node *from)
{
	struct dlh_pool_node *nd = &e->pool.nodes[k];
	char mem[32], gpus[128] = "";
	size_t used = 0;
	snprintf(nd->slurm_state, sizeof nd->slurm_state, "%s", from->slurm_state);
	for (int t = 0; t < e->pool.ntypes && used < sizeof gpus; t++)
		if (e->pool.type[t].gpu && nd->devices[t])
			used += (size_t)snprintf(gpus + used, sizeof gpus - used, "%s%s:%d",
						 used ? "," : "", e->pool.type[t].name, nd->devices[t]);
	if (!dlh_pool_slurm_usable(from->slurm_state)) {
		if (nd->probe != DLH_PROBE_DOWN)
			nd->down_since = dlh_now();
		nd->probe = DLH_PROBE_DOWN;
		snprintf(nd->probe_what, sizeof nd->probe_what, "Slurm says %s%s%s", from->slurm_state,
			 from->probe_what[0] ? ": " : "", from->probe_what);
		return;
	}
	nd->probe = DLH_PROBE_UP;
	nd->down_since = 0;
	dlh_size_text(nd->mem_bytes, mem, sizeof mem);
	snprintf(nd->probe_what, sizeof nd->probe_what, "Slurm says %s: %d cpus, %s memory, gpus %s",
		 from->slurm_state, nd->cpus, mem, gpus[0] ? gpus : "none");
}

/* The Slurm nodes of sinfo's text made the pool (p's nodes merged, each
 * with Slurm's state). Returns 0, or -errno with err. e->mu held. */
static int slurm_apply(struct dlh_engine *e, const struct dlh_pool *base, const char *text,
		       char *err, size_t errlen)
{
	struct dlh_pool *next = malloc(sizeof *next);
	enum dlh_pool_change *change = calloc(DLH_POOL_NODES, sizeof *change);
	int busy[DLH_POOL_NODES] = { 0 };
	int rc = next && change ? dlh_pool_slurm_parse(base, text, next, err, errlen) : -ENOMEM;
	for (int k = 0; !rc && k < e->pool.nnodes; k++)
		busy[k] = node_busy(e, k);
	if (!rc)
		rc = dlh_pool_merge(&e->pool, next, busy, change, err, errlen);
	for (int i = 0; !rc && i < next->nnodes; i++) {
		int k = dlh_pool_find_node(&e->pool, next->nodes[i].name);
		if (k >= 0)
			apply_slurm(e, k, &next->nodes[i]);
	}
	if (rc == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	free(next);
	free(change);
	return rc;
}

/* A Slurm pool's round: sinfo's nodes become the pool. Where Slurm does not
 * answer, every node is down with its words; then (resched) the queue runs.
 * e->mu not held; e->probing is set by the caller. */
static void slurm_round(struct dlh_engine *e, int resched)
{
	struct dlh_buf b = { 0 };
	char err[512] = "", partition[sizeof e->pool.partition];
	pthread_mutex_lock(&e->mu);
	snprintf(partition, sizeof partition, "%s", e->pool.partition);
	pthread_mutex_unlock(&e->mu);
	int rc = dlh_slurm_sinfo(partition, DLH_SINFO_FORMAT, &b, err, sizeof err);
	pthread_mutex_lock(&e->mu);
	if (!rc)
		rc = slurm_apply(e, &e->pool, b.data ? b.data : "", err, sizeof err);
	if (!rc)
		e->slurm_unheard = 0;   /* its nodes are known: the queue plans against them */
	else if (e->slurm_unheard)
		snprintf(e->slurm_why, sizeof e->slurm_why, "%s", err);
	for (int k = 0; rc && k < e->pool.nnodes; k++) {
		struct dlh_pool_node *nd = &e->pool.nodes[k];
		if (nd->removed)
			continue;
		if (nd->probe != DLH_PROBE_DOWN)
			nd->down_since = dlh_now();
		nd->probe = DLH_PROBE_DOWN;
		snprintf(nd->probe_what, sizeof nd->probe_what, "Slurm did not answer: %s", err);
	}
	e->probing = 0;
	if (eng_slots_fit(e))
		fprintf(stderr, "dlhfs: out of memory growing the nodes' slots to their cores\n");
	if (resched && e->reschedule && !e->stopping)
		e->reschedule(e);   /* the queue: nodes up now take queued jobs */
	pthread_cond_broadcast(&e->changed);
	pthread_mutex_unlock(&e->mu);
	dlh_buf_free(&b);
}

void eng_nodes_first(struct dlh_engine *e)
{
	if (!dlh_pool_is_slurm(&e->pool) || e->no_probe)
		return;
	pthread_mutex_lock(&e->mu);
	e->probing = 1;
	e->slurm_unheard = 1;   /* until sinfo answers */
	pthread_mutex_unlock(&e->mu);
	slurm_round(e, 0);
}

/* One round: every node but the local one, at once. e->mu not held;
 * e->probing is set by the caller. */
static void probe_round(struct dlh_engine *e)
{
	if (dlh_pool_is_slurm(&e->pool)) {   /* the backend never changes */
		slurm_round(e, 1);
		return;
	}
	struct node_probe *p = calloc((size_t)DLH_POOL_NODES, sizeof *p);
	pthread_mutex_lock(&e->mu);
	if (!p) {   /* no round: the next one, or a refresh, asks again */
		e->probing = 0;
		pthread_cond_broadcast(&e->changed);
		pthread_mutex_unlock(&e->mu);
		return;
	}
	int n = e->pool.nnodes;
	for (int k = 0; k < n; k++) {
		if (k == e->pool.local || e->pool.nodes[k].removed)
			continue;
		p[k].asked = 1;
		snprintf(p[k].agent, sizeof p[k].agent, "%s", e->pool.nodes[k].agent);
		snprintf(p[k].host, sizeof p[k].host, "%s", e->pool.nodes[k].host);
		/* timed once: not again after it failed (link_why says why) */
		p[k].measure = e->pool.nodes[k].link_alpha <= 0 && !e->pool.nodes[k].link_why[0] &&
			       e->calib_prog[0];
		if (e->pool.nodes[k].probe == DLH_PROBE_NONE)   /* later rounds keep what it was */
			e->pool.nodes[k].probe = DLH_PROBE_RUNNING;
	}
	pthread_mutex_unlock(&e->mu);
	char token_path[4200], token[40];
	int have_token = !make_token(e, token_path, sizeof token_path, token, sizeof token);
	for (int k = 0; k < n; k++) {
		if (!p[k].asked)
			continue;
		p[k].probe = e->probe_path;
		p[k].state = e->state;
		p[k].token_path = have_token ? token_path : NULL;
		p[k].token = token;
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
	if (have_token)
		unlink(token_path);
	measure_links(e, p, n);
	pthread_mutex_lock(&e->mu);
	for (int k = 0; k < n; k++) {
		const struct dlh_pool_node *nd = &e->pool.nodes[k];
		/* a node a reload took out or moved meanwhile: this answer is not its */
		if (!p[k].asked || nd->removed || strcmp(nd->host, p[k].host) || strcmp(nd->agent, p[k].agent))
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
	if (e->reschedule && !e->stopping)
		e->reschedule(e);   /* the queue: nodes up now take queued jobs */
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
	/* Slurm's nodes: Slurm says whether one failed (its next round shows it) */
	if (!p || e->no_probe || !e->probe_path[0] || dlh_pool_is_slurm(&e->pool)) {
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

/* What the check of one job's nodes asks, before its first run there. */
struct seer {
	struct dlh_engine *e;
	struct dlh_job *job;
	int n;                              /* nodes asked */
	int node[DLH_POOL_NODES];
	struct node_probe p[DLH_POOL_NODES];
	int access[DLH_POOL_NODES];         /* 1: up for dlhfs, not reachable by the owner */
	int differs[DLH_POOL_NODES];        /* the first data file its answer gives another
					       copy of than this machine's, or -1 */
	int confirmed[DLH_POOL_NODES];      /* 1: dlhfs's own probe found that copy too */
	char paths[4][DLH_PATH_MAX + 1];
	const char *see[5];                 /* the job's data files (none for a command) */
	uint64_t hash[4];                   /* this machine's copy of each */
	char hash_why[512];                 /* why this machine could not hash one ("" = it did) */
	int as_owner;                       /* ask as cred's user (the daemon is root, they not) */
	struct dlh_cred cred;
};

/* This machine's hashes of the files (their contents, for the nodes' to be
 * compared with), cached by path, size and modification time. */
static struct {
	pthread_mutex_t mu;
	struct { char path[DLH_PATH_MAX + 1]; dev_t dev; ino_t ino; off_t size;
		 struct timespec mtime; uint64_t h; } c[16];
	unsigned next;
} hashes = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* Hashes this machine's copy of path into *h; its size into *size. Returns
 * 0, or -1 with why. */
static int local_hash(const char *path, uint64_t *h, long long *size, char *why, size_t len)
{
	struct stat st;
	int fd = dlh_open_regular(path, 0), rc = 0;   /* a device or FIFO is never opened */
	if (fd < 0 || fstat(fd, &st) < 0) {
		snprintf(why, len, "\"%s\": %s", path, strerror(fd < 0 ? -fd : errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	*size = st.st_size;
	pthread_mutex_lock(&hashes.mu);
	for (size_t i = 0; i < sizeof hashes.c / sizeof hashes.c[0]; i++)
		if (!strcmp(hashes.c[i].path, path) && hashes.c[i].dev == st.st_dev &&
		    hashes.c[i].ino == st.st_ino && hashes.c[i].size == st.st_size &&
		    hashes.c[i].mtime.tv_sec == st.st_mtim.tv_sec &&
		    hashes.c[i].mtime.tv_nsec == st.st_mtim.tv_nsec) {
			*h = hashes.c[i].h;
			pthread_mutex_unlock(&hashes.mu);
			close(fd);
			return 0;
		}
	pthread_mutex_unlock(&hashes.mu);
	if ((rc = dlh_hash_fd(fd, h, NULL))) {
		snprintf(why, len, "\"%s\": %s", path, strerror(-rc));
		close(fd);
		return -1;
	}
	close(fd);
	pthread_mutex_lock(&hashes.mu);
	size_t i = hashes.next++ % (sizeof hashes.c / sizeof hashes.c[0]);
	snprintf(hashes.c[i].path, sizeof hashes.c[i].path, "%s", path);
	hashes.c[i].dev = st.st_dev;
	hashes.c[i].ino = st.st_ino;
	hashes.c[i].size = st.st_size;
	hashes.c[i].mtime = st.st_mtim;
	hashes.c[i].h = *h;
	pthread_mutex_unlock(&hashes.mu);
	return 0;
}

/* The number of the first of s's files whose hash the node's answer r
 * gives otherwise than this machine's, or -1 when all agree. */
static int differs(const struct seer *s, const struct dlh_probe_result *r)
{
	const char *h = r->hashes;
	for (int i = 0; s->see[i]; i++) {
		char want[20];
		snprintf(want, sizeof want, "%016llx", (unsigned long long)s->hash[i]);
		if (strncmp(h, want, 16))
			return i;
		h += 16;
		h += *h == ',';
	}
	return -1;
}

static void *seer_main(void *arg)
{
	struct seer *s = arg;
	struct dlh_engine *e = s->e;
	struct dlh_job *j = s->job;
	char token_path[4200], token[40];
	int have_token = !make_token(e, token_path, sizeof token_path, token, sizeof token);
	/* this machine's copies, read with the owner's rights (the paths are
	 * theirs): root opens nothing a user names */
	struct dlh_files_saved saved = { 0 };
	long long bytes = 0, size;
	int as = s->as_owner && dlh_files_as(&s->cred, &saved) == 0;
	for (int i = 0; s->see[i] && !s->hash_why[0]; i++)
		if (!local_hash(s->see[i], &s->hash[i], &size, s->hash_why, sizeof s->hash_why))
			bytes += size;
	if (as)
		dlh_files_back(&saved);
	/* a node reads and hashes them all: time for that besides the answer */
	double timeout = DLH_PROBE_TIMEOUT + (double)bytes / DLH_PROBE_READ_BW;
	for (int i = 0; i < s->n; i++) {   /* one after the other: a few, and each is quick */
		struct node_probe *p = &s->p[i];
		struct dlh_probe_ask a = {
			.agent = p->agent, .host = p->host, .probe = p->probe, .state = p->state,
			.token_path = have_token ? token_path : NULL, .token = token,
			.see = s->see[0] ? s->see : NULL, .cred = s->as_owner ? &s->cred : NULL,
			.timeout = s->see[0] ? timeout : DLH_PROBE_TIMEOUT,
		};
		dlh_probe_ask(&a, &p->r);
		s->differs[i] = s->see[0] && p->r.up && p->r.seen && !s->hash_why[0] ?
				differs(s, &p->r) : -1;
		if (s->differs[i] >= 0) {
			/* the owner's answer says its copy is another: the owner's
			 * shell could say anything, so dlhfs asks for itself before
			 * it takes the node down for everyone */
			struct dlh_probe_result mine;
			a.cred = NULL;
			if (s->as_owner)
				dlh_probe_ask(&a, &mine);
			s->confirmed[i] = !s->as_owner || (mine.up && mine.seen && differs(s, &mine) >= 0);
			continue;
		}
		if (p->r.up || !s->as_owner || p->r.timed_out)
			continue;
		/* the owner's try failed: the node's fault, or the owner's access? */
		struct dlh_probe_result mine;
		a.cred = NULL;
		a.see = NULL;
		a.timeout = DLH_PROBE_TIMEOUT;
		dlh_probe_ask(&a, &mine);
		if (mine.up)
			s->access[i] = 1;   /* p->r.why: what the agent said to the owner */
		else
			p->r = mine;
	}
	if (have_token)
		unlink(token_path);
	pthread_mutex_lock(&e->mu);
	char why[DLH_REASON_MAX - 64] = "", pub[160] = "";
	for (int i = 0; i < s->n; i++) {
		int k = s->node[i], f = s->differs[i];
		struct dlh_probe_result *r = &s->p[i].r;
		const char *name = e->pool.nodes[k].name;
		if (s->access[i]) {
			if (!why[0]) {
				snprintf(why, sizeof why, "user %s cannot reach node %s through \"%s\" "
					 "(dlhfs can): %s", s->cred.user, name,
					 s->p[i].agent[0] ? s->p[i].agent : DLH_AGENT_DEFAULT, r->why);
				snprintf(pub, sizeof pub, "user %s cannot reach node %s", s->cred.user, name);
			}
		} else if (!r->up && r->timed_out && s->see[0]) {
			if (!why[0]) {   /* slow to read the data: the job's problem, not the node's */
				snprintf(why, sizeof why, "node %s did not finish reading the job's data "
					 "within the check's time: %s", name, r->why);
				snprintf(pub, sizeof pub, "node %s did not finish reading the job's data",
					 name);
			}
		} else if (!r->up) {   /* not answering, or not sharing: down, the job placed again */
			apply(e, k, r);
		} else if (s->see[0] && !r->seen) {
			if (!why[0]) {
				snprintf(why, sizeof why, "node %s cannot read the job's data: %s (the data "
					 "must be on a filesystem every node shares)", name, r->unseen);
				snprintf(pub, sizeof pub, "node %s cannot read the job's data", name);
			}
		} else if (f >= 0 && !s->confirmed[i]) {
			if (!why[0]) {   /* the owner's answer alone: this job's fault, not the node's */
				snprintf(why, sizeof why, "node %s: the job's owner reads another copy of "
					 "\"%.300s\" there than dlhfs does", name, s->see[f]);
				snprintf(pub, sizeof pub, "node %s gave another copy of the job's data", name);
			}
		} else if (f >= 0) {
			r->up = 0;   /* its copy is another: no job of this data there */
			snprintf(r->why, sizeof r->why, "its copy of \"%.300s\" differs from this "
				 "machine's (the same path, other bytes): a job's data must be one "
				 "file every node shares", s->see[f]);
			eng_job_log(e, j, "node %s: %s", name, r->why);
			apply(e, k, r);
		} else {
			j->seen[k] = 1;
			/* rank 0's MASTER_PORT, should it run there: from dlhfs's own
			 * probe only (an owner's answer is theirs to make up) */
			if (r->free_port > 0 && !s->as_owner)
				e->pool.nodes[k].free_port = r->free_port;
		}
	}
	j->seeing = 0;
	if (why[0] && j->status == DLH_QUEUED) {
		j->status = DLH_FAILED;
		j->finished = eng_stamp();
		dlh_job_reason(j, why, "%s", pub);
		eng_job_log(e, j, "failed: %s", why);
		eng_job_save(e, j);
	} else if (!why[0]) {
		int all = 1;
		for (int i = 0; i < s->n; i++)
			all &= j->seen[s->node[i]];
		if (all)
			eng_job_log(e, j, "its nodes %s", s->see[0] ? "read its data" : "answer");
	}
	if (e->reschedule && !e->stopping)
		e->reschedule(e);   /* the queue: it may start now (or be placed again) */
	e->waiters--;
	pthread_cond_broadcast(&e->changed);
	pthread_mutex_unlock(&e->mu);
	free(s);
	return NULL;
}

int eng_nodes_see(struct dlh_engine *e, struct dlh_job *j, const struct dlh_plan *plan)
{
	if (e->no_probe || !e->probe_path[0] || dlh_pool_is_slurm(&e->pool))
		return 1;   /* without probes, as the pool file says; Slurm's nodes share its files */
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
	char err[256];
	if (s->n == 0 || (geteuid() == 0 && j->uid != 0 &&
			  dlh_cred_of(j->uid, &s->cred, err, sizeof err))) {
		free(s);
		return 1;   /* nothing to ask; or no such user: the launch says */
	}
	s->as_owner = geteuid() == 0 && j->uid != 0;
	/* a command's files are its own: only its owner's access is asked */
	const char *files[4] = { j->spec.train, j->spec.train_labels, j->spec.test, j->spec.test_labels };
	int m = 0;
	for (int i = 0; i < 4 && !j->spec.command[0]; i++)
		if (files[i][0] && (i % 2 == 0 || strcmp(j->spec.format, "csv"))) {
			snprintf(s->paths[m], sizeof s->paths[m], "%s", files[i]);
			s->see[m] = s->paths[m];
			m++;
		}
	s->see[m] = NULL;
	s->e = e;
	s->job = j;
	int rc = dlh_thread_detached(seer_main, s);
	if (rc) {
		free(s);
		return 1;
	}
	j->seeing = 1;
	e->waiters++;
	eng_job_log(e, j, "asking %d node%s whether they %s%s", s->n, s->n == 1 ? "" : "s",
		    m ? "read its data" : "answer", s->as_owner ? " (as its owner)" : "");
	return 0;
}

/* The mount's round, then one every e->probe_every seconds (a node whose
 * sshd died is found down within that; one that came back, up) until the
 * engine closes. A round a refresh runs meanwhile counts as one. */
static void *probe_thread(void *arg)
{
	struct dlh_engine *e = arg;
	probe_round(e);
	pthread_mutex_lock(&e->mu);
	double next = dlh_mono() + e->probe_every;
	while (e->probe_every > 0 && !atomic_load(&e->closing)) {
		if (e->probing) {   /* a refresh's round */
			pthread_cond_wait(&e->changed, &e->mu);
			next = dlh_mono() + e->probe_every;
			continue;
		}
		if (dlh_mono() < next) {
			struct timespec ts;
			dlh_mono_ts(next, &ts);
			pthread_cond_timedwait(&e->changed, &e->mu, &ts);
			continue;
		}
		e->probing = 1;
		pthread_mutex_unlock(&e->mu);
		probe_round(e);
		pthread_mutex_lock(&e->mu);
		next = dlh_mono() + e->probe_every;
	}
	pthread_mutex_unlock(&e->mu);
	return NULL;
}

void eng_nodes_down_text(const struct dlh_engine *e, char *out, size_t len)
{
	size_t used = 0;
	out[0] = '\0';
	for (int k = 0; k < e->pool.nnodes && used < len; k++) {
		const struct dlh_pool_node *nd = &e->pool.nodes[k];
		if (nd->probe != DLH_PROBE_DOWN || k == e->pool.local || nd->removed)
			continue;
		char when[16] = "";
		time_t t = (time_t)nd->down_since;
		struct tm tm;
		if (t > 0 && localtime_r(&t, &tm))
			strftime(when, sizeof when, "%H:%M:%S", &tm);
		/* a Slurm node: Slurm's word (drained, down, ...) */
		int n = snprintf(out + used, len - used, "%snode %s %s%s%s%s", used ? ", " : "",
				 nd->name, nd->slurm_state[0] ? nd->slurm_state : "down",
				 nd->slurm_state[0] ? " in Slurm" : "", when[0] ? " since " : "", when);
		used += n > 0 ? (size_t)n : 0;
	}
}

void eng_nodes_probe_start(struct dlh_engine *e)
{
	if ((e->pool.nnodes - (e->pool.local >= 0) < 1 && !dlh_pool_is_slurm(&e->pool)) ||
	    e->no_probe)
		return;   /* no other node (a Slurm pool's come with its first round) */
	pthread_mutex_lock(&e->mu);
	if (e->probe_started) {   /* one thread probes for the mount's life */
		pthread_mutex_unlock(&e->mu);
		return;
	}
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
	if (busy) {   /* a round under way (the mount's, a periodic one): then ours */
		pthread_mutex_lock(&e->mu);
		while (e->probing && !atomic_load(&e->closing))
			pthread_cond_wait(&e->changed, &e->mu);
		e->probing = 1;
		pthread_mutex_unlock(&e->mu);
	}
	probe_round(e);
	return 0;
}

/* Whether node k holds a slot or a GPU of some job. e->mu held. */
static int node_busy(const struct dlh_engine *e, int k)
{
	if (e->node_used[k] > 0)
		return 1;
	for (int i = 0; i < e->gholder_len[k]; i++)
		if (e->gholder[k][i])
			return 1;
	return 0;
}

void eng_nodes_gone(struct dlh_engine *e)
{
	for (int k = 0; k < e->pool.nnodes; k++)
		if (e->pool.nodes[k].leaving && !node_busy(e, k)) {
			e->pool.nodes[k].leaving = 0;
			e->pool.nodes[k].removed = 1;
		}
}

int eng_nodes_reload(struct dlh_engine *e, char *err, size_t errlen)
{
	char why[DLH_ERR_MAX];
	if (!e->pool_file[0]) {
		snprintf(err, errlen, "pool ctl: \"reload\": this mount has no pool file (-o pool=FILE): "
			 "its pool is this machine");
		return -EINVAL;
	}
	struct dlh_pool *next = malloc(sizeof *next);
	enum dlh_pool_change *change = calloc(DLH_POOL_NODES, sizeof *change);
	int busy[DLH_POOL_NODES] = { 0 }, rc = next && change ? 0 : -ENOMEM;
	if (!rc && (rc = dlh_pool_load(next, e->pool_file, e->cpus_override, why, sizeof why)))
		snprintf(err, errlen, "pool ctl: \"reload\": %s", why);
	if (!rc && (dlh_pool_is_slurm(next) != dlh_pool_is_slurm(&e->pool) ||
		    strcmp(next->partition, e->pool.partition) || strcmp(next->account, e->pool.account))) {
		snprintf(err, errlen, "pool ctl: \"reload\": the file changes the backend, the "
			 "partition or the account: remount to change them");
		rc = -EINVAL;
	}
	if (!rc && dlh_pool_is_slurm(next)) {   /* [env] now; its nodes: a round (below) */
		pthread_mutex_lock(&e->mu);
		snprintf(e->pool.env, sizeof e->pool.env, "%s", next->env);
		pthread_mutex_unlock(&e->mu);
		free(next);
		free(change);
		return e->no_probe ? 0 : eng_nodes_refresh(e, err, errlen);
	}
	if (!rc) {
		pthread_mutex_lock(&e->mu);
		for (int k = 0; k < e->pool.nnodes; k++)
			busy[k] = node_busy(e, k);
		if ((rc = dlh_pool_merge(&e->pool, next, busy, change, why, sizeof why))) {
			snprintf(err, errlen, "pool ctl: \"reload\": %s", why);
		} else if ((rc = eng_slots_fit(e))) {
			snprintf(err, errlen, "pool ctl: \"reload\": out of memory growing the slots");
		}
		for (int k = 0; !rc && k < e->pool.nnodes; k++) {
			if (change[k] != DLH_NODE_NEW && change[k] != DLH_NODE_CHANGED)
				continue;
			/* not usable until probed; no job's check of it holds any more */
			if (!e->no_probe && k != e->pool.local &&
			    e->pool.nodes[k].probe == DLH_PROBE_NONE)
				e->pool.nodes[k].probe = DLH_PROBE_RUNNING;
			for (size_t i = 0; i < e->njobs; i++)
				e->jobs[i]->seen[k] = 0;
		}
		if (e->reschedule && !e->stopping)
			e->reschedule(e);   /* the queue: slots may have come */
		pthread_cond_broadcast(&e->changed);
		pthread_mutex_unlock(&e->mu);
	}
	free(next);
	free(change);
	if (rc || e->no_probe)
		return rc;
	rc = eng_nodes_refresh(e, err, errlen);   /* the new and changed nodes: what they have */
	if (!rc && !e->probe_started)   /* a pool that had no other node: probed from now on */
		eng_nodes_probe_start(e);
	return rc;
}

void eng_nodes_stop(struct dlh_engine *e)
{
	if (e->probe_started)
		pthread_join(e->probe_thread, NULL);
	e->probe_started = 0;
}
