/* check.c - a submission's spec and data, checked by a thread of its own
 *
 * Checking a spec reads files its submitter names: the paths of [data],
 * opened to see that they are regular files, and their headers and labels.
 * A FIFO or a device is refused by its type before it is opened
 * (engine/util's dlh_open_regular), but a regular file on a hung filesystem
 * (a dead NFS server, a FUSE server that never answers) can hold a read for
 * ever. So the FUSE thread that took the submission hands the check to a
 * thread of its own and waits for it no longer than the mount's data
 * timeout. A check that overruns it is abandoned: the spec is refused, and
 * the check's thread frees what it holds whenever its read returns.
 *
 * Bounds: a user (root aside) with an abandoned check, or with
 * ENG_CHECKS_PER_USER checks running, is refused at once (EAGAIN). No user
 * can hold more than that many FUSE threads, each for at most the timeout,
 * and a hung filesystem costs one stuck thread per user, not one per
 * submission.
 *
 * Locking: checks_mu guards the per-user counts and every check's done and
 * abandoned flags; the work itself runs unlocked. */
#include "engine/jobs/check.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/run/owner.h"
#include "engine/util/util.h"

#define CHECK_NOGROUP 65534   /* the group of a uid the password database lacks */
#define CHECK_USERS_MAX 256   /* users with checks running at once */
#define CHECK_ERR_MAX 4096

/* One user's checks: running (their threads have not returned) and, of
 * those, abandoned (their submitter stopped waiting). */
struct user_checks {
	uid_t uid;
	int running;
	int abandoned;
};

static pthread_mutex_t checks_mu = PTHREAD_MUTEX_INITIALIZER;
static struct user_checks users[CHECK_USERS_MAX];   /* running > 0, or free */

/* One check, shared by its waiter and its thread. */
struct check {
	pthread_cond_t done_cv;      /* signalled when done is set */
	int done;                    /* the thread has finished the work */
	int abandoned;               /* the waiter has gone: the thread frees */
	uid_t uid;
	char *text;                  /* a copy of the spec */
	size_t len;
	struct eng_checked out;
	int rc;
	char err[CHECK_ERR_MAX];
};

/* uid's entry, made when make is set and there is room; checks_mu held. */
static struct user_checks *user_of(uid_t uid, int make)
{
	struct user_checks *free_slot = NULL;
	for (size_t i = 0; i < CHECK_USERS_MAX; i++) {
		if (users[i].running && users[i].uid == uid)
			return &users[i];
		if (!users[i].running && !free_slot)
			free_slot = &users[i];
	}
	if (!make || !free_slot)
		return NULL;
	*free_slot = (struct user_checks){.uid = uid};
	return free_slot;
}

/* Lends this thread uid's file rights (dlh_files_as): its groups from the
 * password database, or none and nogroup for a uid without an entry. A
 * root daemon checks a spec's data as its submitter would read it. Returns
 * 0, or -EPERM with err. */
static int files_of(uid_t uid, struct dlh_files_saved *saved, char *err, size_t errlen)
{
	struct dlh_cred who;
	char why[256];
	memset(saved, 0, sizeof *saved);
	if (geteuid() != 0 || uid == 0)
		return 0;
	if (dlh_cred_of(uid, &who, why, sizeof why)) {
		memset(&who, 0, sizeof who);
		who.uid = uid;
		who.gid = CHECK_NOGROUP;
	}
	if (dlh_files_as(&who, saved)) {
		snprintf(err, errlen, "spec: cannot take uid %u's rights to check its data\n",
			 (unsigned)uid);
		return -EPERM;
	}
	return 0;
}

/* The built-in trainer's data as dlh-train will read it: headers (magic,
 * dimensions), counts, labels. A file that is not what its key says is
 * refused now, at close(), not by a run that fails later. Returns 0 (also
 * for a [job] command, whose data dlhfs does not read), or -EINVAL with err. */
static int read_data(struct eng_checked *c, char *err, size_t errlen)
{
	char why[1024];
	c->have = 0;
	if (c->spec.command[0])
		return 0;
	if (dlh_dataset_shape(&c->spec, &c->shape, why, sizeof why) < 0) {
		snprintf(err, errlen, "spec: [data]: %s\n", why);
		return -EINVAL;
	}
	c->have = 1;
	return 0;
}

/* The check itself, with the submitter's file rights. */
static void check_run(struct check *c)
{
	struct dlh_files_saved saved;
	c->rc = files_of(c->uid, &saved, c->err, sizeof c->err);
	if (!c->rc)
		c->rc = dlh_spec_parse_flags(c->text, c->len, &c->out.spec, c->err, sizeof c->err,
					     dlh_uid_privileged(c->uid) ? 0 : DLH_SPEC_USER);
	if (!c->rc)
		c->rc = read_data(&c->out, c->err, sizeof c->err);
	dlh_files_back(&saved);
}

static void check_free(struct check *c)
{
	pthread_cond_destroy(&c->done_cv);
	free(c->text);
	free(c);
}

/* The check's thread: the work, then hands the result to its waiter or,
 * when the waiter has gone, frees it. */
static void *check_thread(void *arg)
{
	struct check *c = arg;
	check_run(c);
	pthread_mutex_lock(&checks_mu);
	struct user_checks *u = user_of(c->uid, 0);
	if (u) {
		u->running--;
		u->abandoned -= c->abandoned;
	}
	c->done = 1;
	int gone = c->abandoned;
	if (!gone)
		pthread_cond_signal(&c->done_cv);
	pthread_mutex_unlock(&checks_mu);
	if (gone)
		check_free(c);
	return NULL;
}

/* Counts a check of uid as running, unless uid may not start another.
 * Returns 0, or -EAGAIN with err. */
static int admit(uid_t uid, char *err, size_t errlen)
{
	int rc = 0;
	pthread_mutex_lock(&checks_mu);
	struct user_checks *u = user_of(uid, 1);
	if (!u)
		rc = -EAGAIN;
	else if (uid != 0 && u->abandoned > 0)
		snprintf(err, errlen, "spec: [data]: an earlier submission of uid %u is still waiting "
			 "for its data (a hung filesystem?); submit again when that file answers\n",
			 (unsigned)uid), rc = -EAGAIN;
	else if (uid != 0 && u->running >= ENG_CHECKS_PER_USER)
		snprintf(err, errlen, "spec: uid %u has %d submissions being checked at once "
			 "(at most %d); submit again when they are done\n", (unsigned)uid,
			 u->running, ENG_CHECKS_PER_USER), rc = -EAGAIN;
	else
		u->running++;
	if (!u)
		snprintf(err, errlen, "spec: %d users' submissions are being checked at once; "
			 "submit again shortly\n", CHECK_USERS_MAX);
	pthread_mutex_unlock(&checks_mu);
	return rc;
}

/* Takes back admit's count for a check whose thread never started. */
static void unadmit(uid_t uid)
{
	pthread_mutex_lock(&checks_mu);
	struct user_checks *u = user_of(uid, 0);
	if (u)
		u->running--;
	pthread_mutex_unlock(&checks_mu);
}

static struct check *check_new(const char *text, size_t len, uid_t uid)
{
	struct check *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	int rc = pthread_cond_init(&c->done_cv, &ca);
	pthread_condattr_destroy(&ca);
	if (rc || !(c->text = malloc(len + 1))) {
		if (!rc)
			pthread_cond_destroy(&c->done_cv);
		free(c);
		return NULL;
	}
	memcpy(c->text, text, len);
	c->text[len] = '\0';
	c->len = len;
	c->uid = uid;
	return c;
}

/* Waits for c's thread until timeout_ms from now; abandons c when it does
 * not finish in time. Returns 1 when c is done (the caller frees it), 0
 * when abandoned (its thread frees it). */
static int await(struct check *c, int timeout_ms)
{
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += timeout_ms / 1000;
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&checks_mu);
	while (!c->done && pthread_cond_timedwait(&c->done_cv, &checks_mu, &until) != ETIMEDOUT)
		;
	int done = c->done;
	if (!done) {
		c->abandoned = 1;
		struct user_checks *u = user_of(c->uid, 0);
		if (u)
			u->abandoned++;
	}
	pthread_mutex_unlock(&checks_mu);
	return done;
}

int eng_check_spec(const char *text, size_t len, uid_t uid, int timeout_ms,
		   struct eng_checked *out, char *err, size_t errlen)
{
	int rc = admit(uid, err, errlen);
	if (rc)
		return rc;
	struct check *c = check_new(text, len, uid);
	if (!c) {
		unadmit(uid);
		snprintf(err, errlen, "spec: out of memory\n");
		return -ENOMEM;
	}
	if ((rc = dlh_thread_detached(check_thread, c))) {
		unadmit(uid);
		check_free(c);
		snprintf(err, errlen, "spec: cannot start a thread to check it: %s\n", strerror(rc));
		return -EAGAIN;
	}
	if (!await(c, timeout_ms)) {
		snprintf(err, errlen, "spec: [data]: the data files did not answer within %d.%d s "
			 "(a hung or very slow filesystem?); nothing was submitted\n",
			 timeout_ms / 1000, timeout_ms % 1000 / 100);
		return -EINVAL;
	}
	rc = c->rc;
	if (rc)
		snprintf(err, errlen, "%s", c->err);
	else
		*out = c->out;
	check_free(c);
	return rc;
}
