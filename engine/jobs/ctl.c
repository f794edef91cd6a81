/* ctl.c - the verbs of jobs/<id>/ctl (cancel, suspend, resume, checkpoint, priority N, purge)
 * and of pool/ctl (recalibrate, drain, undrain), with who may send them */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/live/nodes.h"
#include "engine/jobs/queue.h"
#include "engine/supervise/supervise.h"
#include "engine/table/table.h"
#include "engine/run/owner.h"
#include "engine/util/util.h"

/* ---- ctl verbs: each is called with e->mu held, the job found and the
 * caller allowed; returns 0, or -EBUSY with err saying why ---- */

#define CTL_VERBS "cancel, suspend, resume, checkpoint, priority N, purge"
#define POOL_CTL_VERBS "recalibrate, refresh, reload, drain NODE, undrain NODE"

/* The state a verb saw, for its refusal: "running", "being suspended"... */
static const char *state_words(const struct dlh_job *j)
{
	if (j->cancelling)
		return "being cancelled";
	if (j->suspending)
		return "being suspended";
	return dlh_status_name(j->status);
}

static int ctl_cancel(struct dlh_engine *e, struct dlh_job *j, uid_t uid, char *err, size_t errlen)
{
	if (dlh_status_terminal(j->status)) {
		snprintf(err, errlen, "ctl: \"cancel\": job %ld is already %s", j->id,
			 dlh_status_name(j->status));
		return -EBUSY;
	}
	if (j->run.pid) {
		if (!j->cancelling) { /* cancel wins over a suspend in progress */
			j->cancelling = 1;
			j->suspending = 0;
			j->preempted_by = 0;
			j->term_at = 0;
			dlh_job_reason(j, NULL, "cancelled by uid %u", (unsigned)uid);
			eng_job_log(e, j, "cancel requested by uid %u: SIGTERM to the run", (unsigned)uid);
			eng_job_terminate(e, j);
		}
		return 0;
	}
	j->status = DLH_CANCELLED;
	j->finished = eng_stamp();
	dlh_job_reason(j, NULL, "cancelled by uid %u %s", (unsigned)uid,
		 j->started ? "while it waited" : "before it ran");
	eng_job_log(e, j, "%s", j->reason);
	eng_job_save(e, j);
	pthread_cond_broadcast(&e->changed);
	eng_schedule(e);
	return 0;
}

static int ctl_suspend(struct dlh_engine *e, struct dlh_job *j, uid_t uid, char *err, size_t errlen)
{
	if (j->status == DLH_QUEUED) { /* held: it waits until resumed */
		j->status = DLH_SUSPENDED;
		dlh_job_reason(j, NULL, "suspended by uid %u while queued", (unsigned)uid);
		eng_job_log(e, j, "%s", j->reason);
		eng_job_save(e, j);
		pthread_cond_broadcast(&e->changed);
		eng_schedule(e);
		return 0;
	}
	if (j->status != DLH_RUNNING || !j->run.pid || j->cancelling || j->suspending) {
		snprintf(err, errlen, "ctl: \"suspend\": job %ld is %s (suspend applies to a running "
			 "or queued job)", j->id, state_words(j));
		return -EBUSY;
	}
	char note[256];
	if (eng_run_note(e, j->id, note, sizeof note) == 1) {
		/* its launcher (Slurm) holds it pending: nothing runs that could
		 * checkpoint; it leaves the launcher's queue now */
		dlh_job_reason(j, NULL, "suspended by uid %u while %.180s: `resume` submits it again",
			       (unsigned)uid, note);
		eng_job_log(e, j, "suspend requested by uid %u while %s: taken out of that queue",
			    (unsigned)uid, note);
		j->suspending = 1;
		j->unqueued = 1;
		eng_job_terminate(e, j);
		return 0;
	}
	dlh_job_reason(j, NULL, "suspended by uid %u", (unsigned)uid);
	eng_job_log(e, j, "suspend requested by uid %u: SIGUSR2 to the run (checkpoint, then stop)",
		(unsigned)uid);
	eng_job_suspend(e, j);
	return 0;
}

static int ctl_resume(struct dlh_engine *e, struct dlh_job *j, uid_t uid, char *err, size_t errlen)
{
	if (j->status != DLH_SUSPENDED && !(j->status == DLH_FAILED && j->resumable)) {
		snprintf(err, errlen, "ctl: \"resume\": job %ld is %s (resume applies to a suspended "
			 "job, or one stopped by its time limit)", j->id, state_words(j));
		return -EBUSY;
	}
	if (j->status == DLH_FAILED) {   /* a new run, with a time limit of its own */
		j->resumable = 0;
		j->finished = 0;
	}
	j->status = DLH_QUEUED;
	dlh_job_reason(j, NULL, "resumed by uid %u", (unsigned)uid);
	eng_job_log(e, j, "resume requested by uid %u: queued; it restarts from its newest checkpoint",
		(unsigned)uid);
	eng_job_save(e, j);
	pthread_cond_broadcast(&e->changed);
	eng_schedule(e);
	return 0;
}

/* 1 when dlh-train of j's current run has written run.info (it does so
 * after setting up, before its first step, its signal handlers long in
 * place). e->mu is held: the job's owner may have put a link there (to a
 * path of this mount, whose lookup would wait on e->mu; to a hung
 * filesystem), so it is looked at, never followed. */
static int trainer_started(const struct dlh_engine *e, const struct dlh_job *j)
{
	char dir[4096];
	struct stat st;
	eng_job_dir(e, j->id, dir, sizeof dir);
	if (dlh_stat_beneath(dir, DLH_FILE_RUNINFO, &st) || !S_ISREG(st.st_mode))
		return 0;
	double t = (double)st.st_mtim.tv_sec + 1e-9 * (double)st.st_mtim.tv_nsec;
	return t + 0.002 >= j->run_started;
}

static int ctl_checkpoint(struct dlh_engine *e, struct dlh_job *j, uid_t uid, char *err, size_t errlen)
{
	if (j->status != DLH_RUNNING || !j->run.pid || j->cancelling || j->suspending) {
		snprintf(err, errlen, "ctl: \"checkpoint\": job %ld is %s (checkpoint applies to a "
			 "running job)", j->id, state_words(j));
		return -EBUSY;
	}
	if (!j->spec.command[0] && !trainer_started(e, j)) {
		/* before its handlers are in place the signal would kill the run */
		snprintf(err, errlen, "ctl: \"checkpoint\": job %ld is starting (no training step "
			 "yet); checkpoint applies once it trains", j->id);
		return -EBUSY;
	}
	eng_job_log(e, j, "checkpoint requested by uid %u: SIGUSR1 to the run", (unsigned)uid);
	eng_job_signal(e, j, DLH_VERB_CHECKPOINT);
	return 0;
}

/* The priority verb. A run its launcher queues itself (Slurm) has its
 * place there changed too, with e->mu released while the launcher answers
 * (a Slurm command may take seconds: nobody else waits for it); *jp is
 * found again after (NULL when it went meanwhile). e->mu held. */
static int ctl_priority(struct dlh_engine *e, struct dlh_job **jp, uid_t uid, int prio,
			char *err, size_t errlen)
{
	struct dlh_job *j = *jp;
	long id = j->id;
	if (dlh_status_terminal(j->status)) {
		snprintf(err, errlen, "ctl: \"priority\": job %ld is already %s", j->id,
			 dlh_status_name(j->status));
		return -EBUSY;
	}
	if (prio > j->priority && !dlh_uid_privileged(uid)) {   /* as Slurm's nice */
		snprintf(err, errlen, "ctl: \"priority\": job %ld has priority %d: only root and the "
			 "mounting user may raise it; its owner may only lower it", j->id, j->priority);
		return -EPERM;
	}
	if (j->run.pid && e->backend.ops->priority) {
		/* the launcher's queue too (Slurm: scontrol update nice): as the
		 * job's owner where Slurm lets a user do it (nice >= 0: lower);
		 * a negative nice is Slurm's operators', and dlhfs's rule above
		 * allowed it: as the daemon */
		struct dlh_cred cred, *as = NULL;
		struct dlh_run run = j->run;
		char why[512];
		int rc = 0;
		if (geteuid() == 0 && j->uid != 0 && prio <= 0) {
			rc = dlh_cred_of(j->uid, &cred, why, sizeof why);
			as = &cred;
		}
		if (!rc) {
			pthread_mutex_unlock(&e->mu);
			rc = e->backend.ops->priority(&e->backend, &run, prio, as, why, sizeof why);
			pthread_mutex_lock(&e->mu);
			if (!(j = *jp = eng_find(e, id))) {
				snprintf(err, errlen, "no job %ld", id);
				return -ENOENT;
			}
		}
		if (rc) {
			snprintf(err, errlen, "ctl: \"priority\": job %ld: %s", j->id, why);
			return rc;
		}
	}
	eng_job_log(e, j, "priority %d -> %d by uid %u", j->priority, prio, (unsigned)uid);
	j->priority = prio;
	eng_job_save(e, j);
	pthread_cond_broadcast(&e->changed);
	eng_schedule(e);
	return 0;
}

/* Parses a priority argument: an integer in DLH_PRIORITY_MIN..MAX. */
static int parse_priority(const char *arg, int *out)
{
	char *end;
	errno = 0;
	long v = strtol(arg, &end, 10);
	if (!*arg || *end || errno || v < DLH_PRIORITY_MIN || v > DLH_PRIORITY_MAX)
		return -EINVAL;
	*out = (int)v;
	return 0;
}

int dlh_engine_ctl(struct dlh_engine *e, long id, uid_t uid, const char *line,
		   char *err, size_t errlen)
{
	char word[64], arg[64];
	while (*line == ' ' || *line == '\t')
		line++;
	size_t n = strcspn(line, " \t\n");
	snprintf(word, sizeof word, "%.*s", (int)(n < sizeof word ? n : sizeof word - 1), line);
	const char *a = line + n;
	while (*a == ' ' || *a == '\t')
		a++;
	size_t m = strcspn(a, "\n");
	while (m && (a[m - 1] == ' ' || a[m - 1] == '\t' || a[m - 1] == '\r'))
		m--;
	int arg_long = m >= sizeof arg;
	snprintf(arg, sizeof arg, "%.*s", (int)(arg_long ? sizeof arg - 1 : m), a);
	int takes_arg = !strcmp(word, "priority");
	int known = takes_arg || !strcmp(word, "cancel") || !strcmp(word, "suspend") ||
		    !strcmp(word, "resume") || !strcmp(word, "checkpoint") || !strcmp(word, "purge");
	char gone[4200] = "";
	int prio = 0;

	pthread_mutex_lock(&e->mu);
	struct dlh_job *j = eng_find(e, id);
	int rc = 0;
	if (!j) {
		snprintf(err, errlen, "no job %ld", id);
		rc = -ENOENT;
	} else if (!dlh_uid_privileged(uid) && uid != j->uid) {
		snprintf(err, errlen, "ctl: \"%s\": only uid %u or root may control job %ld",
			 word, (unsigned)j->uid, id);
		rc = -EPERM;
	} else if (!known) {
		snprintf(err, errlen, "ctl: unknown verb \"%s\" (expected: " CTL_VERBS ")", word);
		rc = -EINVAL;
	} else if (!takes_arg && arg[0]) {
		snprintf(err, errlen, "ctl: \"%s\" takes no argument, got \"%s\"", word, arg);
		rc = -EINVAL;
	} else if (takes_arg && (arg_long || parse_priority(arg, &prio))) {
		snprintf(err, errlen, "ctl: \"priority\": expected an integer from %d to %d, got \"%s\"",
			 DLH_PRIORITY_MIN, DLH_PRIORITY_MAX, arg);
		rc = -EINVAL;
	} else if (!strcmp(word, "cancel")) {
		rc = ctl_cancel(e, j, uid, err, errlen);
	} else if (!strcmp(word, "suspend")) {
		rc = ctl_suspend(e, j, uid, err, errlen);
	} else if (!strcmp(word, "resume")) {
		rc = ctl_resume(e, j, uid, err, errlen);
	} else if (!strcmp(word, "checkpoint")) {
		rc = ctl_checkpoint(e, j, uid, err, errlen);
	} else if (!strcmp(word, "purge")) {
		rc = eng_purge(e, j, gone, sizeof gone);
		if (rc == -EBUSY)
			snprintf(err, errlen, "ctl: \"purge\": job %ld is %s (purge removes an ended "
				 "job: cancel it first)", j->id, state_words(j));
		else if (rc)
			snprintf(err, errlen, "ctl: \"purge\": cannot remove job %ld: %s", j->id,
				 strerror(-rc));
		else
			j = NULL;   /* freed */
	} else {
		rc = ctl_priority(e, &j, uid, prio, err, errlen);
	}
	if (rc && j)
		eng_job_log(e, j, "%s", err);
	if (!rc && gone[0])
		pthread_cond_broadcast(&e->changed);
	pthread_mutex_unlock(&e->mu);
	if (!rc && gone[0])   /* its files go without e->mu: a removal takes a while */
		dlh_remove_tree(gone);
	return rc;
}

int dlh_engine_pool_ctl(struct dlh_engine *e, uid_t uid, const char *line, char *err,
			size_t errlen)
{
	char word[64], arg[DLH_HOST_MAX + 2] = "";
	while (*line == ' ' || *line == '\t')
		line++;
	size_t n = strcspn(line, "\n");
	while (n && (line[n - 1] == ' ' || line[n - 1] == '\t' || line[n - 1] == '\r'))
		n--;
	size_t w = strcspn(line, " \t\n");
	w = w < n ? w : n;
	snprintf(word, sizeof word, "%.*s", (int)(w < sizeof word ? w : sizeof word - 1), line);
	const char *a = line + w;
	while (a < line + n && (*a == ' ' || *a == '\t'))
		a++;
	size_t al = (size_t)(line + n - a);
	snprintf(arg, sizeof arg, "%.*s", (int)(al < sizeof arg ? al : sizeof arg - 1), a);
	int drain = !strcmp(word, "drain"), undrain = !strcmp(word, "undrain");
	int refresh = !strcmp(word, "refresh"), reload = !strcmp(word, "reload");
	if (w >= sizeof word || (strcmp(word, "recalibrate") && !refresh && !reload && !drain &&
				 !undrain)) {
		snprintf(err, errlen, "pool ctl: unknown verb \"%s\" (expected: " POOL_CTL_VERBS ")",
			 word);
		return -EINVAL;
	}
	if ((drain || undrain) != (al > 0) || al >= sizeof arg - 1) {
		snprintf(err, errlen, drain || undrain ? "pool ctl: \"%s\" takes a node's name" :
			 "pool ctl: \"%s\" takes no argument", word);
		return -EINVAL;
	}
	/* the mounting user runs the daemon */
	if (uid != 0 && uid != getuid()) {
		snprintf(err, errlen, "pool ctl: \"%s\": only uid %u or root may control the pool",
			 word, (unsigned)getuid());
		return -EPERM;
	}
	if (refresh)
		return eng_nodes_refresh(e, err, errlen);
	if (reload)
		return eng_nodes_reload(e, err, errlen);
	if (!drain && !undrain)
		return dlh_engine_recalibrate(e, err, errlen);
	pthread_mutex_lock(&e->mu);
	int k = dlh_pool_find_node(&e->pool, arg), rc = 0;
	if (k < 0) {
		snprintf(err, errlen, "pool ctl: \"%s\": no node \"%s\" in the pool (see pool/nodes)",
			 word, arg);
		rc = -EINVAL;
	} else {
		e->pool.nodes[k].drained = drain;
		if ((rc = eng_drained_save(e)))
			snprintf(err, errlen, "pool ctl: cannot record the drained nodes: %s",
				 strerror(-rc));
		if (undrain)
			eng_schedule(e);   /* its slots are there again */
		pthread_cond_broadcast(&e->changed);
	}
	pthread_mutex_unlock(&e->mu);
	return rc;
}

int dlh_engine_may_read(struct dlh_engine *e, long id, uid_t uid, const gid_t *groups,
			int ngroups)
{
	pthread_mutex_lock(&e->mu);
	struct dlh_job *j = eng_find(e, id);
	uid_t owner = j ? j->uid : 0;
	enum dlh_share share = j ? j->spec.readable_by : DLH_SHARE_OWNER;
	pthread_mutex_unlock(&e->mu);
	if (!j)
		return -ENOENT;
	if (uid == 0 || uid == owner || share == DLH_SHARE_ALL)
		return 0;
	if (share == DLH_SHARE_GROUP) {
		gid_t shared = eng_primary_gid(owner);
		for (int i = 0; i < ngroups && shared != (gid_t)-1; i++)
			if (groups[i] == shared)
				return 0;
	}
	return -EACCES;
}
