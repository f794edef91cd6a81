/* queue.c - the engine's queue: order, conservative backfill, preemption, estimates
 *
 * The arithmetic is sched.c's; this file feeds it the jobs (e->mu held) and
 * acts on its answer: launches, wait reasons, victims. */
#include "engine/jobs/queue.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/live/slots.h"
#include "engine/table/advise.h"
#include "engine/live/nodes.h"
#include "engine/supervise/supervise.h"
#include "engine/table/table.h"
#include "engine/sched/sched.h"
#include "engine/util/util.h"

/* The wall-clock time t as "HH:MM:SS" (local time), for progress lines. */
static void clock_text(double t, char *out, size_t len)
{
	time_t tt = (time_t)ceil(t);
	struct tm tm;
	localtime_r(&tt, &tm);
	strftime(out, len, "%H:%M:%S", &tm);
}

int eng_ranks_per_user(const struct dlh_engine *e)
{
	if (e->ranks_per_user)
		return e->ranks_per_user > 0 ? e->ranks_per_user : 0;
	int usable = eng_slots_usable(e);
	return usable > 1 ? (usable + 1) / 2 : 1;
}

/* What the rank cap looks at, counted once a pass: each user's rank slots
 * held by its runs, and its queued jobs that fit the pool. */
struct user_share {
	unsigned uid;
	int held;                    /* rank slots its runs hold */
	int waiting;                 /* its queued jobs that fit the pool */
};
struct shares {
	int cap;                     /* eng_ranks_per_user; 0 = none */
	size_t n;
	struct user_share *u;        /* malloc'd, a user an entry (NULL: none counted) */
};

/* The entry of uid (added when absent; NULL only when out of room). */
static struct user_share *share_of(struct shares *s, unsigned uid, size_t room)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->u[i].uid == uid)
			return &s->u[i];
	if (s->n >= room)
		return NULL;
	s->u[s->n] = (struct user_share){ .uid = uid };
	return &s->u[s->n++];
}

/* Counts s for the jobs of e (s->u NULL when out of memory or no cap:
 * nobody is capped then). e->mu held. */
static void shares_count(const struct dlh_engine *e, struct shares *s)
{
	*s = (struct shares){ .cap = eng_ranks_per_user(e) };
	if (s->cap <= 0 || !(s->u = malloc((e->njobs ? e->njobs : 1) * sizeof *s->u)))
		return;
	int usable = eng_slots_usable(e);
	for (size_t i = 0; i < e->njobs; i++) {
		const struct dlh_job *j = e->jobs[i];
		struct user_share *u = share_of(s, j->uid, e->njobs);
		if (j->run.pid)
			u->held += j->ranks;
		else if (j->status == DLH_QUEUED && eng_job_slots(e, j) <= usable)
			u->waiting++;
	}
}

/* Whether uid is at the mount's ranks_per_user while a job of another user
 * under it waits (two users at their share do not hold each other back):
 * then uid's jobs wait too, with no reservation, so the slots its runs free
 * go to the others. The cap is soft, as a team expects: a user alone has
 * the whole pool, no run is stopped for it, and a user under the cap may
 * start a job that takes it past. *held: the slots uid's runs hold. */
static int capped(struct shares *s, unsigned uid, int *held)
{
	struct user_share *me = s->u ? share_of(s, uid, s->n) : NULL;
	*held = me ? me->held : 0;
	if (!me || me->held < s->cap)
		return 0;
	for (size_t i = 0; i < s->n; i++)
		if (s->u[i].uid != uid && s->u[i].waiting > 0 && s->u[i].held < s->cap)
			return 1;
	return 0;
}

/* j waits for its user's share: its progress says so. */
static void say_capped(struct dlh_job *j, int held, int cap)
{
	j->est_start = INFINITY;
	snprintf(j->wait, sizeof j->wait, "waiting: uid %u's runs hold %d rank slot%s, its share "
		 "(ranks_per_user=%d) while other users' jobs wait; est. start unknown", j->uid,
		 held, held == 1 ? "" : "s", cap);
}

/* When running job j is expected to end (epoch seconds, INFINITY =
 * unknown): at its launch plus its [job] time_limit, else by the rate of
 * its own rows (eta.c), else at its launch plus its estimate; the rows and
 * the estimate with ENG_EST_MARGIN more. A run past its estimate ends at
 * an unknown time. */
static double run_end(const struct dlh_job *j, double now)
{
	if (j->spec.time_limit > 0 && j->run_started > 0)
		return j->run_started + (double)j->spec.time_limit;
	if (j->eta_end > now)
		return now + (j->eta_end - now) * ENG_EST_MARGIN;
	if (j->est_total > 0 && j->run_started > 0 &&
	    j->run_started + j->est_total * ENG_EST_MARGIN > now)
		return j->run_started + j->est_total * ENG_EST_MARGIN;
	return INFINITY;
}

/* How long queued job j is expected to run (seconds, INFINITY = unknown):
 * its [job] time_limit, else its estimate with ENG_EST_MARGIN more. */
static double wait_duration(const struct dlh_job *j)
{
	if (j->spec.time_limit > 0)
		return (double)j->spec.time_limit;
	return j->est_total > 0 ? j->est_total * ENG_EST_MARGIN : INFINITY;
}

/* The queued jobs as scheduler input: first the *nplan jobs planned, in
 * queue order, with their estimated starts planned against the running
 * jobs; then those of users at their ranks_per_user (capped() by sh), in
 * queue order, unplanned (start INFINITY). e->mu held. Returns the count,
 * with *wout malloc'd (NULL and 0 when out of memory). */
static size_t plan_queue(struct dlh_engine *e, double now, struct shares *sh,
			 struct dlh_sched_wait **wout, size_t *nplan)
{
	size_t nw = 0, nr = 0, nc = 0, n = e->njobs ? e->njobs : 1;
	struct dlh_sched_wait *w = malloc(n * sizeof *w), *c = malloc(n * sizeof *c);
	struct dlh_sched_run *r = malloc(n * sizeof *r);
	*wout = NULL;
	*nplan = 0;
	if (!w || !r || !c) {
		free(w);
		free(r);
		free(c);
		return 0;
	}
	for (size_t i = 0; i < e->njobs; i++) {
		struct dlh_job *j = e->jobs[i];
		int held;
		if (j->run.pid) {
			r[nr].cpus = j->ranks;
			r[nr].end = run_end(j, now);
			nr++;
		} else if (j->status == DLH_QUEUED) {
			struct dlh_sched_wait one = {
				.id = j->id, .priority = j->priority, .submitted = j->submitted,
				.cpus = eng_job_slots(e, j),
				.duration = wait_duration(j),
				.start = INFINITY,
			};
			if (capped(sh, j->uid, &held))
				c[nc++] = one;
			else
				w[nw++] = one;
		}
	}
	dlh_sched_order(w, nw);
	dlh_sched_plan(eng_slots_usable(e), now, r, nr, w, nw);
	dlh_sched_order(c, nc);
	for (size_t k = 0; k < nc; k++)
		w[nw + k] = c[k];
	free(r);
	free(c);
	*wout = w;
	*nplan = nw;
	return nw + nc;
}

static int cmp_victims(const void *pa, const void *pb)
{
	const struct dlh_job *a = *(struct dlh_job *const *)pa, *b = *(struct dlh_job *const *)pb;
	if (a->priority != b->priority)
		return a->priority < b->priority ? -1 : 1;
	/* the youngest run loses the least work */
	return (a->run_started < b->run_started) - (a->run_started > b->run_started);
}

/* Preemption: walks the waiting jobs in queue order; one that cannot start
 * now and needs more slots than are free (or being freed by suspends under
 * way) suspends the lowest-priority preemptible running jobs of lower
 * priority than its own, youngest first, until enough would be free. It
 * preempts nobody when even all of them would not be enough. The victims
 * checkpoint, stop, and wait in the queue (see job_exited in supervise.c).
 * e->mu held. */
static void preempt(struct dlh_engine *e, const struct dlh_sched_wait *w, size_t nw, double now)
{
	int avail = eng_slots_free(e);
	struct dlh_job **cand = malloc((e->njobs ? e->njobs : 1) * sizeof *cand);
	if (!cand)
		return;
	for (size_t i = 0; i < e->njobs; i++)
		if (e->jobs[i]->run.pid && e->jobs[i]->suspending)
			avail += e->jobs[i]->ranks;
	for (size_t k = 0; k < nw; k++) {
		struct dlh_job *h = eng_find(e, w[k].id);
		if (!h || h->status != DLH_QUEUED || w[k].cpus > eng_slots_usable(e))
			continue;
		if (w[k].start <= now || w[k].cpus <= avail) {
			avail -= w[k].cpus < avail ? w[k].cpus : avail;
			continue;
		}
		size_t nc = 0;
		int could = avail;
		for (size_t i = 0; i < e->njobs; i++) {
			struct dlh_job *r = e->jobs[i];
			if (r->run.pid && r->status == DLH_RUNNING && !r->suspending && !r->cancelling &&
			    r->spec.preemptible && r->priority < h->priority &&
			    /* an ordinary user's job (priority 0 at most) yields
			     * only to that user's own: only a priority raised by
			     * root reaches across users */
			    (h->priority > 0 || r->uid == h->uid)) {
				cand[nc++] = r;
				could += r->ranks;
			}
		}
		if (could < w[k].cpus)
			continue;
		qsort(cand, nc, sizeof *cand, cmp_victims);
		for (size_t c = 0; c < nc && avail < w[k].cpus; c++) {
			struct dlh_job *v = cand[c];
			v->preempted_by = h->id;
			dlh_job_reason(v, NULL, "preempted by job %ld (priority %d)", h->id,
				 h->priority);
			eng_job_log(e, v, "preempted by job %ld (priority %d > %d): SIGUSR2 to the run "
				"(checkpoint, then stop); it resumes when slots free", h->id, h->priority,
				v->priority);
			eng_job_log(e, h, "preempting job %ld (priority %d) for %d cpu slot%s", v->id,
				v->priority, v->ranks, v->ranks == 1 ? "" : "s");
			eng_job_suspend(e, v);
			avail += v->ranks;
		}
		avail -= w[k].cpus;
	}
	free(cand);
}

/* Starts the queued jobs whose reservation is now (conservative backfill
 * in priority order, see sched.h), and tells the others why they wait and
 * when they are estimated to start. A job that could never fit (more
 * slots than the pool has) fails with the reason. e->mu held. */
void eng_slurm_unheard_wait(struct dlh_engine *e, struct dlh_job *j)
{
	snprintf(j->wait, sizeof j->wait, "Slurm has not answered sinfo yet (%.120s): no node is "
		 "known; the job is planned and submitted once it answers",
		 e->slurm_why[0] ? e->slurm_why : "no answer");
}

void eng_schedule(struct dlh_engine *e)
{
	double now = dlh_now();
	struct dlh_sched_wait *w;
	struct shares sh;
	if (e->slurm_unheard) {   /* nothing can be planned: every queued job waits for Slurm */
		for (size_t i = 0; i < e->njobs; i++)
			if (e->jobs[i]->status == DLH_QUEUED)
				eng_slurm_unheard_wait(e, e->jobs[i]);
		return;
	}
	eng_nodes_gone(e);   /* nodes a reload took out, once idle */
	shares_count(e, &sh);
	size_t nplan, nw = plan_queue(e, now, &sh, &w, &nplan);
	for (size_t k = nplan; k < nw; k++) {
		struct dlh_job *j = eng_find(e, w[k].id);
		int held;
		if (j && j->status == DLH_QUEUED && capped(&sh, j->uid, &held))
			say_capped(j, held, sh.cap);
	}
	for (size_t k = 0; k < nplan; k++) {
		struct dlh_job *j = eng_find(e, w[k].id);
		if (!j || j->status != DLH_QUEUED)
			continue;
		int need = w[k].cpus, free_slots = eng_slots_free(e);
		if (need > eng_slots_usable(e)) {
			eng_job_launch(e, j); /* planning refuses it, with the reason */
			continue;
		}
		int held, tried = w[k].start <= now && need <= free_slots;
		if (tried && capped(&sh, j->uid, &held)) {   /* this pass's launches took its share */
			say_capped(j, held, sh.cap);
			continue;
		}
		int rc = tried ? eng_job_launch(e, j) : -EAGAIN;
		if (rc == 0 && sh.u && j->run.pid) {   /* its user holds more now, and waits for one job less */
			struct user_share *u = share_of(&sh, j->uid, sh.n);
			u->held += j->ranks;
			u->waiting--;
		}
		if (rc != -EAGAIN)
			continue;   /* launched, or failed with the reason */
		char when[96];
		j->est_start = w[k].start;
		if (isinf(w[k].start))
			snprintf(when, sizeof when, "est. start unknown (jobs ahead have no time_limit or estimate)");
		else {
			char hms[16];
			clock_text(w[k].start, hms, sizeof hms);
			snprintf(when, sizeof when, "est. start %s", hms);
		}
		if (tried)
			;   /* the launch said why: the ranks do not fit the nodes' room */
		else if (need <= free_slots)
			snprintf(j->wait, sizeof j->wait, "waiting for %d cpu slot%s; %d free but held "
				 "for jobs ahead in the queue; %s", need, need == 1 ? "" : "s",
				 free_slots, when);
		else
			snprintf(j->wait, sizeof j->wait, "waiting for %d cpu slot%s; %d free; %s",
				 need, need == 1 ? "" : "s", free_slots, when);
	}
	preempt(e, w, nplan, now);
	free(w);
	free(sh.u);
}

size_t dlh_engine_queue(struct dlh_engine *e, struct dlh_queue_entry *out, size_t max)
{
	pthread_mutex_lock(&e->mu);
	struct dlh_sched_wait *w;
	struct shares sh;
	shares_count(e, &sh);
	size_t nplan, nw = plan_queue(e, dlh_now(), &sh, &w, &nplan);
	free(sh.u);
	for (size_t k = 0; k < nw && k < max; k++) {
		const struct dlh_job *j = eng_find(e, w[k].id);
		out[k] = (struct dlh_queue_entry){
			.id = w[k].id, .priority = w[k].priority, .cpus = w[k].cpus,
			.submitted = w[k].submitted, .est_start = w[k].start,
			.time_limit = j ? (double)j->spec.time_limit : 0, .duration = w[k].duration,
		};
		if (j)
			snprintf(out[k].name, sizeof out[k].name, "%s", j->spec.name);
	}
	free(w);
	pthread_mutex_unlock(&e->mu);
	return nw;
}

/* The launcher's order: its start (unknown last), its priority (higher
 * first), its id. */
static int cmp_launcher(const void *pa, const void *pb)
{
	const struct dlh_launcher_wait *a = pa, *b = pb;
	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;   /* INFINITY last */
	if (a->priority != b->priority)
		return a->priority > b->priority ? -1 : 1;
	return (a->job > b->job) - (a->job < b->job);
}

long dlh_engine_launcher_queue(struct dlh_engine *e, struct dlh_launcher_wait **out)
{
	*out = NULL;
	if (!e->backend.ops->pending)
		return 0;
	pthread_mutex_lock(&e->mu);
	size_t n = 0;
	for (size_t i = 0; i < e->njobs; i++)
		n += e->jobs[i]->status == DLH_RUNNING && e->jobs[i]->run.pid > 0;
	struct dlh_launcher_wait *w = n ? calloc(n, sizeof *w) : NULL;
	if (n && !w) {
		pthread_mutex_unlock(&e->mu);
		return -ENOMEM;
	}
	size_t k = 0;
	for (size_t i = 0; i < e->njobs && k < n; i++) {
		const struct dlh_job *j = e->jobs[i];
		if (j->status != DLH_RUNNING || j->run.pid <= 0)
			continue;
		w[k].q = (struct dlh_queue_entry){
			.id = j->id, .priority = j->priority, .cpus = j->ranks,
			.submitted = j->submitted, .est_start = j->run_started > 0 ? j->run_started : INFINITY,
			.time_limit = (double)j->spec.time_limit, .duration = wait_duration(j),
		};
		snprintf(w[k].q.name, sizeof w[k].q.name, "%s", j->spec.name);
		k++;
	}
	pthread_mutex_unlock(&e->mu);
	/* the launcher's words are in each job's directory: read without e->mu */
	size_t m = 0;
	for (size_t i = 0; i < k; i++) {
		char dir[4096];
		struct dlh_run_pending p;
		eng_job_dir(e, w[i].q.id, dir, sizeof dir);
		if (e->backend.ops->pending(&e->backend, dir, &p) != 1)
			continue;
		w[m].q = w[i].q;
		w[m].job = p.job;
		w[m].start = p.start;
		w[m].priority = p.priority;
		snprintf(w[m].reason, sizeof w[m].reason, "%s", p.reason);
		m++;
	}
	if (!m) {
		free(w);
		return 0;
	}
	qsort(w, m, sizeof *w, cmp_launcher);
	*out = w;
	return (long)m;
}

/* Node k's row of a holder table (tab, lens: per node) into out, up to
 * max. Returns the row's length. */
static int copy_holders(struct dlh_engine *e, long *const *tab, const int *lens, int k,
			long *out, int max)
{
	pthread_mutex_lock(&e->mu);
	int n = k >= 0 && k < e->pool.nnodes ? lens[k] : 0;
	for (int i = 0; i < n && i < max; i++)
		out[i] = tab[k][i];
	pthread_mutex_unlock(&e->mu);
	return n;
}

int dlh_engine_gpu_holders(struct dlh_engine *e, int k, long *out, int max)
{
	return copy_holders(e, e->gholder, e->gholder_len, k, out, max);
}

int dlh_engine_holders(struct dlh_engine *e, int k, long *out, int max)
{
	return copy_holders(e, e->holder, e->holder_len, k, out, max);
}
