/* kcache.c - what the kernel caches of the mount, and telling it when that
 * changes
 *
 * The kernel keeps a file's attributes (its size above all) and names for
 * FS_ATTR_TIMEOUT, and the pages of a generated file between opens, so
 * that stat, a second cat, or a dashboard reading the same status ten
 * times a second cost dlhfs nothing. Every getattr that told the kernel a
 * size is recorded here with what it was told (the size, and for generated
 * files the hash of the content behind it). One thread looks at the
 * recorded files every FS_KCACHE_TICK_NS while the kernel may still hold
 * what it was told, renders or stats each again, and for those that
 * changed calls fuse_invalidate_path, which drops the kernel's attributes
 * and pages: a stat after a change shows it within a tick.
 *
 * An open of a generated file renders it anyway. It reads through the
 * kernel's pages only when the size the kernel holds is the length of what
 * the open rendered (reads through pages stop at that size), and keeps the
 * pages (FOPEN_KEEP_CACHE) only when they hold that very content; otherwise
 * its reads reach dlhfs each time (direct io), as before. So a read never
 * returns older content than its open saw. While the kernel may still hold
 * the size of older content (and for FS_KCACHE_GRACE_S after it let go of
 * it), an open is served that older content, which its stat may have
 * shown; but not once an open has read newer content: no reader is taken
 * back from what another already read.
 *
 * Locks: mu guards the table for short spells and is never held across a
 * render, a stat or a call into libfuse; the thread holds nothing a FUSE
 * request needs when it calls fuse_invalidate_path, as libfuse asks. */
#include "fs/kcache.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/util/util.h"
#include "fs/poll.h"
#include "fs/render.h"
#include "fs/ticker.h"

#define BUCKETS 4096

struct entry {
	char path[FS_KCACHE_PATH_MAX];
	struct fs_node node;
	uid_t uid;            /* who asked (passthrough files are stat-ed as them) */
	off_t size;           /* the size the kernel was told */
	uint64_t sum;         /* generated: the hash of the content of that size */
	char *text;           /* generated, kept: that content (what reads through the
				 pages get, so that they match the kernel's size); or NULL */
	size_t text_len;
	double changed;       /* when that content was first told (its mtime) */
	double until;         /* the kernel keeps the attributes until then (dlh_mono);
				 0: dropped */
	int pages;            /* the kernel's pages may hold content of hash page_sum */
	uint64_t page_sum;
	int readers;          /* handles open that read through the pages */
	int stale;            /* an open saw other content: tell the kernel */
	double drop_at;       /* drop it then (dlh_mono; 0 = not due): a file that
				 differs by reader, a moment after it was told */
	unsigned version;     /* bumped whenever what the kernel was told changes */
	int graced;           /* the kernel let go of it; text is still served to
				 opens until `until` (FS_KCACHE_GRACE_S) */
	int newer_read;       /* an open read content other than text (newer: its
				 render): text is not served to opens again, which
				 would take a reader back (a status read `running`
				 after `succeeded`) */
	double let_go_at;     /* when the kernel first let go of that text (dlh_mono;
				 0 = not yet): the grace counts from then, however
				 often a handle's snapshot tells it again */
	struct entry *next;   /* hash chain */
};

/* what the thread checks of one entry, copied out of the table */
struct check {
	char path[FS_KCACHE_PATH_MAX];
	struct fs_node node;
	uid_t uid;
	off_t size;
	uint64_t sum;
	unsigned version;
	int drop;             /* tell the kernel without looking */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static pthread_cond_t ticked = PTHREAD_COND_INITIALIZER;   /* a tick ended (fs_kcache_sync) */
static unsigned long ticks;            /* guarded by mu: ticks ended */
static struct entry *table[BUCKETS];   /* guarded by mu */
static size_t entries;                 /* guarded by mu */
static int hurry;                      /* guarded by mu: something is stale */
static int syncing;                    /* guarded by mu: fs_kcache_sync callers waiting:
					  what changed is dropped without grace */
static struct dlh_engine *the_engine;
static struct fuse *the_fuse;

static int busy(void);
static void tick(void);
/* the kernel holds nothing that can change: it sleeps */
static struct fs_ticker ticker = {
	.mu = &mu, .cv = &cv, .busy = busy, .tick = tick, .period_ns = FS_KCACHE_TICK_NS,
	.hurry = &hurry,
};

int fs_kcache_kept(enum fs_kind k)
{
	switch (k) {
	case FS_JOBS_INDEX: case FS_PROM_FILE: case FS_JOBS_ERRORS:   /* by reader */
	case FS_JOB_PLOT_LOSS: case FS_JOB_PLOT_ACCURACY: case FS_JOB_PLOT_THROUGHPUT:
	case FS_JOB_PLOT_PROGRESS: case FS_JOB_PLOT_EXTRA: case FS_JOB_REPORT:   /* all of metrics.csv each time */
		return 0;
	default:
		return 1;
	}
}

static unsigned bucket(const char *path)
{
	return (unsigned)(dlh_hash(path, strlen(path)) % BUCKETS);
}

/* The entry of path, or NULL. mu held. */
static struct entry *find(const char *path)
{
	for (struct entry *x = table[bucket(path)]; x; x = x->next)
		if (!strcmp(x->path, path))
			return x;
	return NULL;
}

/* Unlinks and frees x. mu held. */
static void forget(struct entry *x)
{
	for (struct entry **p = &table[bucket(x->path)]; *p; p = &(*p)->next)
		if (*p == x) {
			*p = x->next;
			free(x->text);
			free(x);
			entries--;
			return;
		}
}

/* The kernel is (about to be) told to drop what it holds of x: x is
 * forgotten unless handles still read through its pages. mu held. */
static void dropped(struct entry *x)
{
	x->until = 0;
	x->pages = 0;
	x->stale = 0;
	x->drop_at = 0;
	x->graced = 0;
	x->version++;
	if (!x->readers)
		forget(x);
}

/* The kernel has let go of x (told to drop it): x's content is still what
 * an open reads for FS_KCACHE_GRACE_S (the opener's stat may have been
 * answered just before), unless a writer waits in fs_kcache_sync or x is
 * not a kept generated file; else x is dropped. mu held. */
static void let_go(struct entry *x)
{
	double now = dlh_mono();
	if (!x->let_go_at)
		x->let_go_at = now;
	if (syncing || !x->text || !fs_kcache_kept(x->node.kind) ||
	    x->let_go_at + FS_KCACHE_GRACE_S <= now) {
		dropped(x);
		return;
	}
	x->until = x->let_go_at + FS_KCACHE_GRACE_S;
	x->pages = 0;
	x->stale = 0;
	x->drop_at = 0;
	x->graced = 1;
	x->version++;
}

double fs_kcache_told(const char *path, const struct fs_node *n, uid_t uid, off_t size,
		      const struct dlh_buf *content, int how)
{
	int for_handle = how & FS_TOLD_FOR_HANDLE, snapshot = how & FS_TOLD_SNAPSHOT;
	enum fs_source src = fs_source_of(n->kind);
	if ((src != FS_GENERATED && src != FS_PASSTHROUGH) || strlen(path) >= FS_KCACHE_PATH_MAX)
		return 0;
	const char *data = content && content->data ? content->data : "";
	size_t len = content ? content->len : 0;
	/* only a kept file's content small enough is read through the pages */
	int paged = src == FS_GENERATED && fs_kcache_kept(n->kind) && len <= FS_KCACHE_TEXT_MAX;
	double changed = 0;
	pthread_mutex_lock(&mu);
	if (!ticker.running) {
		pthread_mutex_unlock(&mu);
		return 0;
	}
	struct entry *x = find(path);
	if (!x && (x = calloc(1, sizeof *x))) {
		strcpy(x->path, path);
		unsigned b = bucket(path);
		x->next = table[b];
		table[b] = x;
		if (!entries++)
			pthread_cond_signal(&cv);   /* the thread sleeps while nothing is held */
	}
	if (x) {
		int same = x->text && x->text_len == len && !memcmp(x->text, data, len);
		/* a handle's snapshot when other content was told since, or the
		 * kernel let go of it, or was to be told to: old news. What was
		 * told stays what an open is served (the kernel holds the
		 * snapshot's size only until the thread tells it to drop it:
		 * stale keeps opens off the pages meanwhile) */
		int old = snapshot && x->text && (!same || x->graced || x->stale || x->let_go_at);
		if (!old)
			x->let_go_at = 0;
		else if (!same)
			x->let_go_at = dlh_mono();
		if (!same && !old) {
			x->newer_read = 0;
			free(x->text);
			x->text = paged ? malloc(len + 1) : NULL;
			if (x->text)
				memcpy(x->text, data, len);
			x->text_len = x->text ? len : 0;
			x->changed = dlh_now();
		}
		changed = x->changed;
		x->node = *n;
		x->uid = uid;
		x->size = size;
		x->sum = src == FS_GENERATED ? dlh_hash(data, len) : 0;
		/* the kernel keeps them FS_ATTR_TIMEOUT from when it has the
		 * reply, a moment after this: a grace beyond that */
		x->until = dlh_mono() + FS_ATTR_TIMEOUT + FS_KCACHE_GRACE_S;
		x->graced = 0;
		x->version++;
		/* what another reader sees differs, or it is too dear to look at
		 * each tick: the kernel is told to drop it at once (its reply is
		 * discarded if that comes first); asked for an open file, a
		 * moment after: a drop that beats the reply leaves the kernel
		 * the size before, which lseek(SEEK_END) then takes (tail -1
		 * read the rejection before the last) */
		x->drop_at = 0;
		if (old) {   /* dropped again at once; its grace is not renewed */
			x->stale = 1;
			hurry = 1;
			pthread_cond_signal(&cv);
		} else if (fs_kcache_kept(n->kind))
			;
		else if (for_handle) {
			x->drop_at = dlh_mono() + FS_KCACHE_DROP_S;
		} else {
			x->stale = 1;
			hurry = 1;
			pthread_cond_signal(&cv);
		}
	}
	pthread_mutex_unlock(&mu);
	return src == FS_GENERATED && paged ? changed : 0;
}

int fs_kcache_open(const char *path, const struct fs_node *n, struct dlh_buf *content,
		   int *keep)
{
	*keep = 0;
	if (!fs_kcache_kept(n->kind) || fs_source_of(n->kind) != FS_GENERATED ||
	    strlen(path) >= FS_KCACHE_PATH_MAX)
		return 0;
	const char *data = content->data ? content->data : "";
	uint64_t sum = dlh_hash(data, content->len);
	int paged = 0;
	pthread_mutex_lock(&mu);
	struct entry *x = find(path);
	const int differs = x && x->text &&
			    (x->text_len != content->len || memcmp(x->text, data, content->len));
	if (x && x->until > dlh_mono() && x->text && !x->newer_read && (x->graced || differs)) {
		/* the kernel holds another size, which the opener's stat may
		 * well have been answered with: it reads, directly, what was
		 * told (tar reads that many bytes, then compares with fstat),
		 * and the kernel is told of the change now */
		struct dlh_buf told = { 0 };
		if (!dlh_buf_append(&told, x->text, x->text_len)) {
			dlh_buf_free(content);
			*content = told;
		}
		if (!x->stale && !x->graced) {
			x->stale = 1;
			hurry = 1;
			pthread_cond_signal(&cv);
		}
	} else if (x && differs) {
		/* it reads its render, directly: newer than what was told,
		 * which no open is served after it (the kernel, which may hold
		 * the told size, is told of the change) */
		x->newer_read = 1;
		if (x->until > dlh_mono() && !x->stale && !x->graced) {
			x->stale = 1;
			hurry = 1;
			pthread_cond_signal(&cv);
		}
	} else if (x && x->until > dlh_mono() && !x->stale && x->text &&
		   (!x->readers || (x->pages && x->page_sum == sum))) {
		/* another handle reading other content through the pages
		 * would mix the two: this one reads directly then */
		*keep = x->pages && x->page_sum == sum;
		x->pages = 1;
		x->page_sum = sum;
		x->readers++;
		paged = 1;
	}
	pthread_mutex_unlock(&mu);
	return paged;
}

int fs_kcache_text(const char *path, struct dlh_buf *out)
{
	int rc = -ENOENT;
	pthread_mutex_lock(&mu);
	struct entry *x = find(path);
	if (x && x->text)
		rc = dlh_buf_append(out, x->text, x->text_len);
	pthread_mutex_unlock(&mu);
	return rc;
}

void fs_kcache_close(const char *path)
{
	pthread_mutex_lock(&mu);
	struct entry *x = find(path);
	if (x && x->readers > 0 && !--x->readers && !x->until)
		forget(x);
	pthread_mutex_unlock(&mu);
}

void fs_kcache_changed(const char *path)
{
	pthread_mutex_lock(&mu);
	struct entry *x = find(path);
	int told = x != NULL;
	unsigned version = x ? x->version : 0;
	struct fuse *f = ticker.running ? the_fuse : NULL;
	pthread_mutex_unlock(&mu);
	if (!told)
		return;
	if (f && !fuse_session_exited(fuse_get_session(f)))
		fuse_invalidate_path(f, path);
	/* then forgotten (as tick() does), unless told anew meanwhile */
	pthread_mutex_lock(&mu);
	if ((x = find(path)) && x->version == version)
		dropped(x);
	pthread_mutex_unlock(&mu);
}

void fs_kcache_opened(const char *path, const struct fs_node *n)
{
	/* a kept generated file may have pages: their invalidation could wait
	 * on a read that waits for a FUSE thread (this is one) */
	if (fs_source_of(n->kind) == FS_GENERATED && fs_kcache_kept(n->kind))
		return;
	pthread_mutex_lock(&mu);
	struct entry *x = find(path);
	if (x)
		dropped(x);
	struct fuse *f = ticker.running ? the_fuse : NULL;
	pthread_mutex_unlock(&mu);
	if (f && !fuse_session_exited(fuse_get_session(f)))
		fuse_invalidate_path(f, path);
}

/* 1 when what the kernel was told of c differs from c's file now. */
static int differs(const struct check *c)
{
	if (fs_source_of(c->node.kind) == FS_PASSTHROUGH) {
		struct stat st;
		off_t now = fs_real_stat(the_engine, &c->node, c->uid, &st) ? 0 : st.st_size;
		return now != c->size;
	}
	struct dlh_buf b = { 0 };
	int rc = fs_render(the_engine, &c->node, &b);
	int moved = rc == -ENOENT || (!rc && ((off_t)b.len != c->size ||
					      dlh_hash(b.data, b.len) != c->sum));
	dlh_buf_free(&b);
	return moved;
}

/* mu held: the kernel may hold something */
static int busy(void)
{
	return entries > 0;
}

/* One look at everything the kernel may hold: what changed is dropped,
 * here and then in the kernel. */
static void tick(void)
{
	pthread_mutex_lock(&mu);
	size_t n = 0, cap = entries;
	struct check *cs = cap ? malloc(cap * sizeof *cs) : NULL;
	double now = dlh_mono();
	for (unsigned b = 0; b < BUCKETS && cs; b++) {
		struct entry *x = table[b];
		while (x) {
			struct entry *next = x->next;
			if (x->graced) {   /* the kernel holds nothing of it */
				if (x->until <= now)
					dropped(x);
				x = next;
				continue;
			}
			int drop = x->stale || (x->drop_at && x->drop_at <= now);
			if (drop || x->until > now) {
				struct check *c = &cs[n++];
				strcpy(c->path, x->path);
				c->node = x->node;
				c->uid = x->uid;
				c->size = x->size;
				c->sum = x->sum;
				c->version = x->version;
				c->drop = drop;
			} else if (!x->readers) {
				forget(x);   /* the kernel has let go of it */
			}
			x = next;
		}
	}
	hurry = 0;
	pthread_mutex_unlock(&mu);
	for (size_t i = 0; i < n; i++) {
		struct check *c = &cs[i];
		if (!c->drop && !differs(c))
			continue;
		/* once the loop is ending no request may answer a read that an
		 * invalidation of pages would wait for */
		if (!fuse_session_exited(fuse_get_session(the_fuse)))
			fuse_invalidate_path(the_fuse, c->path);
		/* forgotten only now: until the kernel has let go of the size,
		 * an open after a stat it answered reads what it was told
		 * (fs_kcache_open); told anew meanwhile, it holds that instead */
		pthread_mutex_lock(&mu);
		struct entry *x = find(c->path);
		if (x && x->version == c->version)
			let_go(x);
		pthread_mutex_unlock(&mu);
	}
	free(cs);
	pthread_mutex_lock(&mu);
	ticks++;
	pthread_cond_broadcast(&ticked);
	pthread_mutex_unlock(&mu);
}

void fs_kcache_sync(void)
{
	/* the ticker tells the kernel, never this FUSE thread: an invalidation
	 * may wait for a page a read through the kernel holds, and that read
	 * for a FUSE thread */
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += FS_KCACHE_SYNC_NS;
	while (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&mu);
	unsigned long want = ticks + 2;   /* one that began after this call */
	if (ticker.running && entries > 0) {
		syncing++;
		/* what is served in grace goes now: the change must be seen */
		for (unsigned b = 0; b < BUCKETS; b++)
			for (struct entry *x = table[b], *next; x; x = next) {
				next = x->next;
				if (x->graced)
					dropped(x);
			}
		hurry = 1;
		pthread_cond_signal(&cv);
		while (ticker.running && entries > 0 && ticks < want &&
		       pthread_cond_timedwait(&ticked, &mu, &until) != ETIMEDOUT)
			;
		syncing--;
	}
	pthread_mutex_unlock(&mu);
}

int fs_kcache_start(struct dlh_engine *e, struct fuse *f)
{
	the_engine = e;
	the_fuse = f;
	return fs_ticker_start(&ticker);
}

void fs_kcache_stop(void)
{
	fs_ticker_stop(&ticker);
	pthread_mutex_lock(&mu);
	for (unsigned b = 0; b < BUCKETS; b++)
		while (table[b]) {
			struct entry *x = table[b];
			table[b] = x->next;
			free(x->text);
			free(x);
		}
	entries = 0;
	pthread_mutex_unlock(&mu);
}
