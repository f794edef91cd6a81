/* poll.c - poll(2) on live files
 *
 * FUSE asks the filesystem whether a handle is ready and, when it is not,
 * hands it a poll handle to wake later. A growing file (metrics.csv, log,
 * logs/rank.N) is ready when it holds bytes past what the handle has read;
 * a generated one (status, progress, metrics, pool/summary, queue) when its
 * content differs from the one the handle read (POLLPRI, as sysfs_notify
 * does; a read from offset 0 then returns the new content). The waiters
 * are looked at by one thread every FS_POLL_TICK_NS: a reader that waits
 * costs it nothing but that look, and is woken within a tick of a change.
 * The thread calls fuse_notify_poll holding nothing a FUSE request needs
 * (the list is taken off under its mutex first). */
#include "fs/poll.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fs/render.h"
#include "fs/ticker.h"
#include "engine/util/util.h"

struct waiter {
	struct fs_poll_want want;
	struct fuse_pollhandle *ph;
	int dead;                  /* its handle was closed while a tick looked at it */
	struct waiter *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct waiter *waiters;   /* guarded by mu */
static struct waiter *checking;  /* the ones a tick looks at now (mu: their dead flags) */
static struct dlh_engine *the_engine;

/* Frees a list of waiters, their poll handles destroyed (unwoken). */
static void drop(struct waiter *list)
{
	while (list) {
		struct waiter *x = list;
		list = x->next;
		fuse_pollhandle_destroy(x->ph);
		free(x);
	}
}

int fs_poll_kind(enum fs_kind k)
{
	switch (k) {
	case FS_JOB_CSV: case FS_JOB_LOG: case FS_JOB_RANKLOG:
	case FS_JOB_STATUS: case FS_JOB_PROGRESS: case FS_JOB_METRICS:
	case FS_POOL_SUMMARY: case FS_QUEUE:
		return 1;
	default:
		return 0;
	}
}

int fs_poll_changed(struct dlh_engine *e, const struct fs_poll_want *w)
{
	if (fs_source_of(w->node.kind) == FS_PASSTHROUGH) {
		struct stat st;
		int fd = fs_real_open(e, &w->node, w->uid);
		if (fd < 0)
			return 0;   /* not there yet */
		/* grown past what the reader read, or cut back (a restart) */
		int moved = fstat(fd, &st) == 0 && st.st_size != w->seen;
		close(fd);
		return moved;
	}
	struct dlh_buf b = { 0 };
	int rc = fs_render(e, &w->node, &b);
	int changed = rc == -ENOENT || (!rc && dlh_hash(b.data, b.len) != w->sum);
	dlh_buf_free(&b);
	return changed;
}

int fs_poll_wait(const struct fs_poll_want *w, struct fuse_pollhandle *ph)
{
	struct fuse_pollhandle *old = NULL;
	pthread_mutex_lock(&mu);
	/* one waiter per handle: a poll again replaces it (a wake-up of the
	 * file wakes every poller of it), so a loop of timed polls holds one */
	for (struct waiter *x = waiters; x; x = x->next)
		if (x->want.fh == w->fh) {
			old = x->ph;
			x->want = *w;
			x->ph = ph;
			pthread_mutex_unlock(&mu);
			fuse_pollhandle_destroy(old);
			return 0;
		}
	pthread_mutex_unlock(&mu);
	struct waiter *x = calloc(1, sizeof *x);
	if (!x) {
		fuse_pollhandle_destroy(ph);
		return -ENOMEM;
	}
	x->want = *w;
	x->ph = ph;
	pthread_mutex_lock(&mu);
	x->next = waiters;
	waiters = x;
	pthread_cond_signal(&cv);
	pthread_mutex_unlock(&mu);
	return 0;
}

void fs_poll_forget(uint64_t fh)
{
	struct waiter *gone = NULL;
	pthread_mutex_lock(&mu);
	for (struct waiter *x = checking; x; x = x->next)
		if (x->want.fh == fh)
			x->dead = 1;   /* the tick drops it */
	for (struct waiter **p = &waiters; *p;) {
		struct waiter *x = *p;
		if (x->want.fh == fh) {
			*p = x->next;
			x->next = gone;
			gone = x;
		} else {
			p = &x->next;
		}
	}
	pthread_mutex_unlock(&mu);
	drop(gone);
}

/* One look at every waiter: those whose file changed are woken and dropped. */
static void tick(void)
{
	pthread_mutex_lock(&mu);
	checking = waiters;   /* looked at without mu: new ones queue apart */
	waiters = NULL;
	pthread_mutex_unlock(&mu);
	for (struct waiter *x = checking; x; x = x->next)
		if (fs_poll_changed(the_engine, &x->want)) {
			/* what the reader reads next is the new content and size */
			if (x->want.path[0])
				fs_kcache_changed(x->want.path);
			fuse_notify_poll(x->ph);
			x->dead = 1;
		}
	pthread_mutex_lock(&mu);
	struct waiter *all = checking, *gone = NULL;
	checking = NULL;
	while (all) {   /* back, beside those registered meanwhile; or gone */
		struct waiter *x = all;
		all = x->next;
		int again = 0;   /* a poll of the same handle came meanwhile */
		for (struct waiter *y = waiters; y && !again; y = y->next)
			again = y->want.fh == x->want.fh;
		x->next = x->dead || again ? gone : waiters;
		if (x->dead || again)
			gone = x;
		else
			waiters = x;
	}
	pthread_mutex_unlock(&mu);
	drop(gone);
}

/* mu held: someone waits */
static int busy(void)
{
	return waiters != NULL;
}

static struct fs_ticker ticker = {
	.mu = &mu, .cv = &cv, .busy = busy, .tick = tick, .period_ns = FS_POLL_TICK_NS,
};

int fs_poll_start(struct dlh_engine *e)
{
	the_engine = e;
	return fs_ticker_start(&ticker);
}

void fs_poll_stop(void)
{
	fs_ticker_stop(&ticker);
	pthread_mutex_lock(&mu);
	struct waiter *all = waiters;
	waiters = NULL;
	pthread_mutex_unlock(&mu);
	drop(all);
}
