/* ops.c - the FUSE callbacks: attributes, listing, open/read/write/flush */
#include "fs/ops.h"

#include <errno.h>
#include <poll.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fs/kcache.h"
#include "fs/poll.h"
#include "fs/render.h"
#include "fs/tree.h"

/* Per-open state, kept in fi->fh. */
struct fs_handle {
	struct fs_node node;     /* what was opened */
	struct dlh_buf buf;      /* snapshot (generated), spec text or answer (new) */
	int fd;                  /* real file (passthrough), -1 otherwise */
	int writable;            /* opened for writing */
	uid_t uid;               /* who opened it */
	pthread_mutex_t mu;      /* the handle may be used by several threads */
	int committed;           /* jobs/new: the spec was submitted (or refused) */
	int verdict;             /* jobs/new: 0, or -errno of the commit */
	int wrote;               /* jobs/new: a write reached this handle */
	size_t attempted;        /* jobs/new: highest offset a write reached */
	off_t seen;              /* growing files: the end of what reads returned (poll) */
	double shown_at;         /* generated, read directly: the mtime stat gave for its
				    snapshot (the same from open to close: tar compares) */
	int read_once;           /* generated: a read came, the next from 0 renders anew */
	char *paged;             /* generated, read through the kernel's pages: the path
				    (fs_kcache_close at release), else NULL */
	char *opened;            /* read only: the path it is recorded under (stat of it
				    by the process that opened it), else NULL */
	double read_at;          /* when it was opened or a read last came (dlh_mono) */
	int polled;              /* poll(2) asked about it */
};

/* ---- when a generated file's content last changed ----
 *
 * Files the kernel does not keep (the Prometheus file, jobs/index, the
 * plots, report.html: kcache.c) are rendered at each stat; their mtime is
 * when the content a reader sees last changed, remembered here for the
 * CLOCK_SLOTS newest (path, reader) pairs: node_exporter reports a textfile's
 * mtime as when its data last changed. */

#define CLOCK_SLOTS 64

static struct {
	uint64_t key;          /* hash of the path and the reader; 0 = free */
	uint64_t sum;          /* hash of the content */
	size_t len;
	double changed;        /* epoch seconds the content was first seen */
	double used;           /* last asked, to reuse the oldest slot */
} clocks[CLOCK_SLOTS];
static pthread_mutex_t clock_mu = PTHREAD_MUTEX_INITIALIZER;

/* When content b of path, as uid reads it, first looked as it does now. */
static double content_changed(const char *path, uid_t uid, const struct dlh_buf *b)
{
	char who[32];
	snprintf(who, sizeof who, "\n%u", (unsigned)uid);
	uint64_t key = dlh_hash(path, strlen(path)) ^ (dlh_hash(who, strlen(who)) * 31);
	uint64_t sum = dlh_hash(b->data, b->len);
	double now = dlh_now(), changed;
	key += !key;
	pthread_mutex_lock(&clock_mu);
	int at = -1, old = 0;
	for (int i = 0; i < CLOCK_SLOTS && at < 0; i++) {
		if (clocks[i].key == key)
			at = i;
		else if (clocks[i].used < clocks[old].used)
			old = i;
	}
	if (at < 0 || clocks[at].sum != sum || clocks[at].len != b->len) {
		at = at < 0 ? old : at;
		clocks[at].key = key;
		clocks[at].sum = sum;
		clocks[at].len = b->len;
		clocks[at].changed = now;
	}
	clocks[at].used = now;
	changed = clocks[at].changed;
	pthread_mutex_unlock(&clock_mu);
	return changed;
}

/* ---- what a process last saw of a file it stat-ed ----
 *
 * tar and cp stat a file, then open it, read it and fstat it, and compare:
 * a generated file read directly that changed in between looked "changed
 * as we read it". The content a stat showed a process (MEMO_SLOTS of the
 * newest, for MEMO_S) is the snapshot its next open of that path takes. */

#define MEMO_SLOTS 32
#define MEMO_S 2.0

static struct {
	char *path;             /* NULL = free */
	pid_t pid;              /* the thread that asked */
	struct dlh_buf content;
	double at;              /* dlh_mono when the stat showed it */
} memos[MEMO_SLOTS];
static pthread_mutex_t memo_mu = PTHREAD_MUTEX_INITIALIZER;

/* Remembers that pid's stat of path showed content b. */
static void memo_put(const char *path, pid_t pid, const struct dlh_buf *b)
{
	double now = dlh_mono();
	pthread_mutex_lock(&memo_mu);
	int at = 0;
	for (int i = 0; i < MEMO_SLOTS; i++) {
		if (memos[i].path && memos[i].pid == pid && !strcmp(memos[i].path, path)) {
			at = i;
			break;
		}
		if (!memos[i].path || (memos[at].path && memos[i].at < memos[at].at))
			at = i;
	}
	free(memos[at].path);
	dlh_buf_free(&memos[at].content);
	memos[at].path = strdup(path);
	memos[at].pid = pid;
	memos[at].at = now;
	if (memos[at].path && b->len && dlh_buf_append(&memos[at].content, b->data, b->len)) {
		free(memos[at].path);
		memos[at].path = NULL;
	}
	pthread_mutex_unlock(&memo_mu);
}

/* What pid's stat of path showed within MEMO_S, moved into out (and
 * forgotten: one open takes it). Returns 1 when there was one, else 0. */
static int memo_take(const char *path, pid_t pid, struct dlh_buf *out)
{
	int found = 0;
	double now = dlh_mono();
	pthread_mutex_lock(&memo_mu);
	for (int i = 0; i < MEMO_SLOTS; i++)
		if (memos[i].path && memos[i].pid == pid && !strcmp(memos[i].path, path)) {
			if (now - memos[i].at <= MEMO_S) {
				dlh_buf_free(out);
				*out = memos[i].content;
				memset(&memos[i].content, 0, sizeof memos[i].content);
				found = 1;
			}
			free(memos[i].path);
			dlh_buf_free(&memos[i].content);
			memos[i].path = NULL;
			break;
		}
	pthread_mutex_unlock(&memo_mu);
	return found;
}

/* ---- the handles a process has open, by path ----
 *
 * The kernel asks a stat, and an fstat too, by path: it does not say which
 * open file it is for. A process that reads a generated file it has open
 * (cp, tar, tail: open, fstat, read to the end) is told the size of its
 * own snapshot, so that what stat says matches what its reads give from
 * open to close; through the kernel's pages, for a moment after each read
 * (handle_attr).
 * Locks nest open_mu, then a handle's mu, then clock_mu; never otherwise. */

#define OPEN_BUCKETS 256

struct open_ref {
	struct fs_handle *h;
	char *path;
	pid_t pid;                 /* the thread that opened it */
	struct open_ref *next;
};

static pthread_mutex_t open_mu = PTHREAD_MUTEX_INITIALIZER;
static struct open_ref *open_refs[OPEN_BUCKETS];   /* guarded by open_mu */

static unsigned open_bucket(const char *path)
{
	return (unsigned)(dlh_hash(path, strlen(path)) % OPEN_BUCKETS);
}

/* Records h, open on path by pid. Returns 0, or -ENOMEM. */
static int open_add(struct fs_handle *h, const char *path, pid_t pid)
{
	struct open_ref *r = malloc(sizeof *r);
	if (!r || !(r->path = strdup(path))) {
		free(r);
		return -ENOMEM;
	}
	r->h = h;
	r->pid = pid;
	pthread_mutex_lock(&open_mu);
	unsigned b = open_bucket(path);
	r->next = open_refs[b];
	open_refs[b] = r;
	pthread_mutex_unlock(&open_mu);
	return 0;
}

static void open_remove(struct fs_handle *h, const char *path)
{
	pthread_mutex_lock(&open_mu);
	for (struct open_ref **p = &open_refs[open_bucket(path)]; *p; p = &(*p)->next)
		if ((*p)->h == h) {
			struct open_ref *r = *p;
			*p = r->next;
			free(r->path);
			free(r);
			break;
		}
	pthread_mutex_unlock(&open_mu);
}

static int handle_attr(struct fs_handle *h, const char *path, struct stat *st,
		       struct dlh_buf *copy);

/* The size of pid's newest handle open on path into st (its content into
 * copy, for a generated file). Returns 1 when it has one, else 0. Its
 * handle's lock nests inside open_mu (release takes them one after the
 * other). */
static int opened_attr(const char *path, pid_t pid, uid_t uid, struct stat *st,
		       struct dlh_buf *copy)
{
	int found = 0;
	pthread_mutex_lock(&open_mu);
	for (struct open_ref *r = open_refs[open_bucket(path)]; r && !found; r = r->next)
		if (r->pid == pid && r->h->uid == uid && !strcmp(r->path, path))
			found = handle_attr(r->h, path, st, copy);
	pthread_mutex_unlock(&open_mu);
	return found;
}

static struct dlh_engine *engine(void)
{
	return ((struct dlh_fs *)fuse_get_context()->private_data)->engine;
}

static struct dlh_fs *fs(void)
{
	return fuse_get_context()->private_data;
}

static mode_t mode_of(enum fs_kind k)
{
	switch (fs_source_of(k)) {
	case FS_DIR: return S_IFDIR | 0555;
	case FS_TRANSACTION: return S_IFREG | 0666;
	case FS_CONTROL: return S_IFREG | 0644;
	case FS_SYMLINK: return S_IFLNK | 0777;
	default: return S_IFREG | 0444;
	}
}

/* Whether the caller of this FUSE request may read n (fs_private). Returns
 * 0, -EACCES, or -ENOENT. */
static int may_read(const struct fs_node *n)
{
	if (!fs_private(n->kind))
		return 0;
	int rc = fs_caller_may_read(engine(), n->id);
	return rc == -ENOENT ? -ENOENT : rc ? -EACCES : 0;
}

/* The size (and blocks) of an open handle's file: what its reads give
 * (and, copy not NULL, a generated file's content into copy). Returns 1
 * when h answers for it (st set), 0 when the path does. */
static int handle_attr(struct fs_handle *h, const char *path, struct stat *st,
		       struct dlh_buf *copy)
{
	int rc = 0;
	pthread_mutex_lock(&h->mu);
	switch (fs_source_of(h->node.kind)) {
	case FS_GENERATED:
		/* its snapshot; through the pages, what its reads took of what
		 * the kernel was told, for as long as the kernel might have kept
		 * that size anyway after its last read (tar's fstat after its
		 * reads, when a tick told the kernel of newer content meanwhile;
		 * counted from the read, not the open: on a loaded machine the
		 * open, the read and the fstat may be seconds apart), unless
		 * poll said it changed: then by path (the reads after a wake-up
		 * see it). A handle kept open and read again (a dashboard) gets
		 * the path's size once a second passed without a read to here,
		 * as the kernel's pages it reads from are kept no longer. */
		if (!h->paged || (!h->polled && dlh_mono() - h->read_at < FS_ATTR_TIMEOUT)) {
			st->st_size = (off_t)h->buf.len;
			if (copy && h->buf.len)
				dlh_buf_append(copy, h->buf.data, h->buf.len);
			/* the snapshot's time, once: another reader's newer content
			 * must not move it while this one reads (tar compares) */
			if (!h->shown_at)
				h->shown_at = content_changed(path, h->uid, &h->buf);
			double t = h->shown_at;
			st->st_mtim.tv_sec = (time_t)t;
			st->st_mtim.tv_nsec = (long)((t - (double)(time_t)t) * 1e9);
			rc = 1;
		}
		break;
	case FS_PASSTHROUGH: {   /* the file it has open */
		struct stat rs;
		if (h->fd >= 0 && !fstat(h->fd, &rs)) {
			st->st_size = rs.st_size;
			st->st_blocks = rs.st_blocks;
			st->st_mtim = rs.st_mtim;
			rc = 2;
		}
		break;
	}
	default:
		break;
	}
	pthread_mutex_unlock(&h->mu);
	if (rc == 1)
		st->st_blocks = (st->st_size + 511) / 512;
	return rc != 0;
}

int dlh_fs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	struct dlh_engine *e = engine();
	struct fs_node n;
	int rc = fs_resolve(e, path, &n);
	if (rc)
		return rc;
	memset(st, 0, sizeof *st);
	st->st_mode = mode_of(n.kind);
	st->st_nlink = S_ISDIR(st->st_mode) ? 2 : 1;
	st->st_uid = getuid();
	st->st_gid = getgid();
	time_t t = (time_t)fs()->mounted_at;
	st->st_atime = st->st_mtime = st->st_ctime = t;

	struct dlh_job_brief job;
	if (n.kind >= FS_JOB_LINK && !dlh_engine_job_brief(e, n.id, &job)) {
		st->st_uid = job.uid;
		st->st_mtime = st->st_ctime = (time_t)job.submitted;
		if (fs_private(n.kind)) {   /* who may read it, as ls -l shows */
			mode_t keep = job.readable_by == DLH_SHARE_ALL ? 0777 :
				      job.readable_by == DLH_SHARE_GROUP ? 0770 : 0700;
			st->st_mode = (st->st_mode & ~(mode_t)0777) | (st->st_mode & keep);
		}
	}
	/* fstat of an open file: its handle's size, what its reads give (cp
	 * and tar trust it; a render now may be longer or shorter) */
	struct dlh_buf told = { 0 };
	if ((fi && fi->fh && handle_attr((struct fs_handle *)(uintptr_t)fi->fh, path, st, &told)) ||
	    ((fs_source_of(n.kind) == FS_GENERATED || fs_source_of(n.kind) == FS_PASSTHROUGH) &&
	     opened_attr(path, fuse_get_context()->pid, fuse_get_context()->uid, st, &told))) {
		/* the kernel keeps this size too: kcache must know what it told
		 * (a file that differs by reader is dropped at once) */
		fs_kcache_told(path, &n, fuse_get_context()->uid, st->st_size,
			       fs_source_of(n.kind) == FS_GENERATED ? &told : NULL,
			       FS_TOLD_SNAPSHOT | (fi ? FS_TOLD_FOR_HANDLE : 0));
		dlh_buf_free(&told);
		return 0;
	}
	switch (fs_source_of(n.kind)) {
	case FS_SYMLINK: {
		char target[32];
		st->st_size = snprintf(target, sizeof target, "%ld", n.id);
		break;
	}
	case FS_PASSTHROUGH: {
		struct stat rs;
		/* a file not written yet (or not a plain file) reads as empty */
		if (!fs_real_stat(e, &n, fuse_get_context()->uid, &rs)) {
			st->st_size = rs.st_size;
			st->st_blocks = rs.st_blocks;   /* du counts the real disk */
			st->st_mtim = rs.st_mtim;
		}
		fs_kcache_told(path, &n, fuse_get_context()->uid, st->st_size, NULL,
			       fi ? FS_TOLD_FOR_HANDLE : 0);
		break;
	}
	case FS_GENERATED: {
		/* a private file that the caller may not read is not rendered
		 * for it (the plots read all of metrics.csv): it shows as empty */
		struct dlh_buf b = {0};
		if (!may_read(&n) && (rc = fs_render(e, &n, &b))) {
			dlh_buf_free(&b);
			return rc;
		}
		st->st_size = (off_t)b.len;
		/* blocks for its bytes: with none, cp and tar take a file for
		 * sparse and copy holes */
		st->st_blocks = (st->st_size + 511) / 512;
		/* the time is when the content last changed, as far as the kernel
		 * was told: it drops pages of older content when it changes */
		double changed = fs_kcache_told(path, &n, fuse_get_context()->uid, st->st_size, &b,
						fi ? FS_TOLD_FOR_HANDLE : 0);
		if (!changed && !fs_kcache_kept(n.kind))
			changed = content_changed(path, fuse_get_context()->uid, &b);
		if (changed > 0) {
			st->st_mtim.tv_sec = (time_t)changed;
			st->st_mtim.tv_nsec = (long)((changed - (double)(time_t)changed) * 1e9);
		}
		/* read directly, its open takes what this stat showed */
		if (!fs_kcache_kept(n.kind) || b.len > FS_KCACHE_TEXT_MAX)
			memo_put(path, fuse_get_context()->pid, &b);
		dlh_buf_free(&b);
		break;
	}
	case FS_CONTROL:
		st->st_size = (off_t)strlen(fs_ctl_help(n.kind));
		break;
	default:
		break;
	}
	return 0;
}

int dlh_fs_readlink(const char *path, char *buf, size_t size)
{
	struct fs_node n;
	int rc = fs_resolve(engine(), path, &n);
	if (rc)
		return rc;
	if (n.kind != FS_JOB_LINK)
		return -EINVAL;
	snprintf(buf, size, "%ld", n.id);
	return 0;
}

struct fill_ctx {
	void *buf;                   /* libfuse's buffer */
	fuse_fill_dir_t filler;      /* libfuse's filler */
};

static int fill_one(void *ctx, const char *name)
{
	struct fill_ctx *c = ctx;
	return c->filler(c->buf, name, NULL, 0, 0);
}

int dlh_fs_readdir(const char *path, void *buf, fuse_fill_dir_t filler, off_t off,
		   struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	(void)off;
	(void)fi;
	(void)flags;
	struct fs_node n;
	int rc = fs_resolve(engine(), path, &n);
	if (rc)
		return rc;
	if (fs_source_of(n.kind) != FS_DIR)
		return -ENOTDIR;
	if ((rc = may_read(&n)))
		return rc;
	struct fill_ctx c = { buf, filler };
	return fs_list(engine(), &n, fill_one, &c);
}

static void handle_free(struct fs_handle *h)
{
	if (!h)
		return;
	if (h->fd >= 0)
		close(h->fd);
	if (h->paged) {
		fs_kcache_close(h->paged);
		free(h->paged);
	}
	if (h->opened) {
		open_remove(h, h->opened);
		free(h->opened);
	}
	dlh_buf_free(&h->buf);
	pthread_mutex_destroy(&h->mu);
	free(h);
}

int dlh_fs_open(const char *path, struct fuse_file_info *fi)
{
	struct dlh_engine *e = engine();
	struct fs_node n;
	int rc = fs_resolve(e, path, &n);
	if (rc)
		return rc;
	enum fs_source src = fs_source_of(n.kind);
	int acc = fi->flags & O_ACCMODE;
	if (src == FS_DIR)
		return -EISDIR;
	if (acc != O_RDONLY && src != FS_TRANSACTION && src != FS_CONTROL)
		return -EACCES;
	if ((rc = may_read(&n)))
		return rc;
	struct fs_handle *h = calloc(1, sizeof *h);
	if (!h)
		return -ENOMEM;
	h->node = n;
	h->fd = -1;
	h->writable = acc != O_RDONLY;
	h->uid = fuse_get_context()->uid;
	h->read_at = dlh_mono();
	pthread_mutex_init(&h->mu, NULL);
	/* growing files (and generated ones, unless kcache.c says the kernel's
	 * pages may serve them): every read comes here, sizes never truncate */
	fi->direct_io = 1;
	/* only a spec written to jobs/new has something to say at close */
	fi->noflush = !(src == FS_TRANSACTION && h->writable);
	switch (src) {
	case FS_GENERATED: {
		int keep;
		/* what this process's stat showed a moment ago, else now */
		if (!memo_take(path, fuse_get_context()->pid, &h->buf) &&
		    (rc = fs_render(e, &n, &h->buf)))
			break;
		if (fs_kcache_open(path, &n, &h->buf, &keep)) {
			if ((h->paged = strdup(path))) {
				fi->direct_io = 0;
				fi->keep_cache = (unsigned)keep;
			} else {
				fs_kcache_close(path);
			}
		}
		break;
	}
	case FS_PASSTHROUGH: {
		h->fd = fs_real_open(e, &n, h->uid);
		/* files a run has not written yet read as empty; a checkpoint
		 * rotated away since lookup is gone; a link or a special file
		 * the job's owner put there is not served */
		if (h->fd < 0) {
			rc = h->fd == -ENOENT && n.kind != FS_JOB_CKPT &&
			     n.kind != FS_JOB_RANKLOG && n.kind != FS_JOB_OUTFILE ? 0 :
			     h->fd == -ENOENT ? -ENOENT : -EACCES;
			h->fd = -1;
		}
		break;
	}
	case FS_CONTROL:
		if (acc != O_WRONLY)
			rc = dlh_buf_append(&h->buf, fs_ctl_help(n.kind), strlen(fs_ctl_help(n.kind)));
		break;
	default:
		break;
	}
	if (rc) {
		handle_free(h);
		return rc;
	}
	fi->fh = (uint64_t)(uintptr_t)h;
	/* read directly: the attributes the kernel may hold from a stat before
	 * this open are dropped, so that the fstat that follows (tail, cp)
	 * asks this handle (from a FUSE thread: open is no operation the
	 * kernel holds this inode's locks for) */
	if ((fi->direct_io || h->paged) && (src == FS_GENERATED || src == FS_PASSTHROUGH) &&
	    !h->writable) {
		if ((h->opened = strdup(path)) &&
		    open_add(h, path, fuse_get_context()->pid)) {
			free(h->opened);
			h->opened = NULL;
		}
		/* through the pages: what the kernel holds is what its reads
		 * give; a tick that drops it while this process reads (tar's
		 * fstat after its read) finds this handle (handle_attr) */
		if (fi->direct_io)
			fs_kcache_opened(path, &n);
	}
	return 0;
}

/* Submits the spec written to a jobs/new handle, once. h->mu held. */
static void commit(struct fs_handle *h)
{
	if (h->committed)
		return;
	h->committed = 1;
	char err[DLH_ERR_MAX];
	long id = 0;
	if (h->attempted > DLH_SPEC_MAX) {
		snprintf(err, sizeof err, "spec: larger than %d bytes (got at least %zu)\n",
			 DLH_SPEC_MAX, h->attempted);
		dlh_engine_reject(engine(), h->uid, err);
		h->verdict = -EFBIG;
	} else {
		h->verdict = dlh_engine_submit(engine(), h->buf.data ? h->buf.data : "", h->buf.len,
					       h->uid, &id, err, sizeof err);
	}
	dlh_buf_free(&h->buf);
	if (h->verdict == 0)
		dlh_buf_printf(&h->buf, "%ld\n", id);
	else
		dlh_buf_printf(&h->buf, "%s", err);
	fs_kcache_sync();   /* jobs/errors, index, queue: new sizes before close returns */
}

static int read_buf(const struct dlh_buf *b, char *out, size_t size, off_t off)
{
	if (off < 0 || (size_t)off >= b->len)
		return 0;
	size_t n = b->len - (size_t)off;
	if (n > size)
		n = size;
	memcpy(out, b->data + off, n);
	return (int)n;
}

int dlh_fs_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)path;
	struct fs_handle *h = (struct fs_handle *)(uintptr_t)fi->fh;
	int rc;
	pthread_mutex_lock(&h->mu);
	switch (fs_source_of(h->node.kind)) {
	case FS_PASSTHROUGH:
		if (h->fd < 0) { /* opened before the file existed: it may now */
			int fd = fs_real_open(engine(), &h->node, h->uid);
			h->fd = fd < 0 ? -1 : fd;
		}
		if (h->fd < 0) {
			rc = 0;
			break;
		}
		rc = (int)pread(h->fd, buf, size, off);
		if (rc < 0)
			rc = -errno;
		else   /* poll: ready once the file is no longer this long */
			h->seen = off + rc;
		break;
	case FS_TRANSACTION:
		if (h->writable)
			commit(h);
		else
			dlh_buf_free(&h->buf);
		/* the answer starts at 0 and again just past the spec written, so
		 * both pread(fd, .., 0) and a plain read() after the writes see it */
		if (off >= (off_t)h->attempted)
			off -= (off_t)h->attempted;
		rc = read_buf(&h->buf, buf, size, off);
		break;
	case FS_GENERATED: {
		/* through the kernel's pages: the content whose size the kernel
		 * holds (what it was last told), never cut or padded; else a
		 * read from the start sees the content now (lseek(0) after a
		 * poll, as with sysfs), the rest of it comes from that snapshot */
		struct dlh_buf now = { 0 };
		int fresh = h->paged ? fs_kcache_text(h->paged, &now) :
			    off == 0 && h->read_once && fs_poll_kind(h->node.kind) ?
			    fs_render(engine(), &h->node, &now) : -EAGAIN;
		if (!fresh) {
			dlh_buf_free(&h->buf);
			h->buf = now;
		} else {
			dlh_buf_free(&now);
		}
		h->read_once = 1;
		h->read_at = dlh_mono();
		rc = read_buf(&h->buf, buf, size, off);
		break;
	}
	default:
		rc = read_buf(&h->buf, buf, size, off);
		break;
	}
	pthread_mutex_unlock(&h->mu);
	return rc;
}

int dlh_fs_poll(const char *path, struct fuse_file_info *fi, struct fuse_pollhandle *ph,
		unsigned *reventsp)
{
	struct fs_handle *h = (struct fs_handle *)(uintptr_t)fi->fh;
	if (!fs_poll_kind(h->node.kind)) {   /* as a regular file: always ready */
		*reventsp = POLLIN | POLLRDNORM | (h->writable ? POLLOUT | POLLWRNORM : 0);
		if (ph)
			fuse_pollhandle_destroy(ph);
		return 0;
	}
	pthread_mutex_lock(&h->mu);
	h->polled = 1;
	struct fs_poll_want w = {
		.fh = fi->fh, .node = h->node, .uid = h->uid, .seen = h->seen,
		.sum = dlh_hash(h->buf.data, h->buf.len),
	};
	pthread_mutex_unlock(&h->mu);
	if (path && strlen(path) < sizeof w.path)
		strcpy(w.path, path);
	int passthrough = fs_source_of(w.node.kind) == FS_PASSTHROUGH;
	if (fs_poll_changed(engine(), &w)) {
		*reventsp = passthrough ? POLLIN | POLLRDNORM : POLLIN | POLLRDNORM | POLLPRI;
		if (ph)
			fuse_pollhandle_destroy(ph);
		return 0;
	}
	*reventsp = 0;
	if (ph)
		return fs_poll_wait(&w, ph);
	return 0;
}

/* Runs each verb line of a ctl write. Returns size, or -errno of the first
 * verb that failed. */
static int ctl_write(struct fs_handle *h, const char *data, size_t size)
{
	char line[256];
	size_t pos = 0;
	int verbs = 0;
	while (pos < size) {
		size_t n = 0;
		while (pos + n < size && data[pos + n] != '\n')
			n++;
		if (n >= sizeof line)
			return -EINVAL;
		memcpy(line, data + pos, n);
		line[n] = '\0';
		pos += n + 1;
		char *s = line;
		while (*s == ' ' || *s == '\t')
			s++;
		size_t l = strlen(s);
		while (l && (s[l - 1] == ' ' || s[l - 1] == '\t' || s[l - 1] == '\r'))
			s[--l] = '\0';
		if (!*s)
			continue;
		char err[512];
		int rc = h->node.kind == FS_POOL_CTL ?
			 dlh_engine_pool_ctl(engine(), h->uid, s, err, sizeof err) :
			 dlh_engine_ctl(engine(), h->node.id, h->uid, s, err, sizeof err);
		if (rc && h->node.kind == FS_POOL_CTL)   /* why, where the writer reads it */
			dlh_engine_reject(engine(), h->uid, err);
		if (rc)
			return rc;
		verbs++;
	}
	return verbs ? (int)size : -EINVAL;
}

int dlh_fs_write(const char *path, const char *data, size_t size, off_t off,
		 struct fuse_file_info *fi)
{
	(void)path;
	struct fs_handle *h = (struct fs_handle *)(uintptr_t)fi->fh;
	int rc;
	pthread_mutex_lock(&h->mu);
	if (fs_source_of(h->node.kind) == FS_CONTROL) {
		rc = ctl_write(h, data, size);
		fs_kcache_sync();   /* status, progress, queue: new sizes before write returns */
	} else if (h->committed) {
		rc = -EINVAL; /* one spec per open: it was already submitted */
	} else {
		/* the kernel's append position is our reported size (0): use ours */
		if (fi->flags & O_APPEND)
			off = (off_t)h->buf.len;
		h->wrote = 1;
		size_t end = (size_t)off + size;
		if (end > h->attempted)
			h->attempted = end;
		if (end > DLH_SPEC_MAX) {
			rc = -EFBIG;
		} else {
			if (h->buf.len < end) {
				size_t grow = end - h->buf.len;
				char zero[512] = {0};
				rc = 0;
				while (grow && !rc) {
					size_t k = grow < sizeof zero ? grow : sizeof zero;
					rc = dlh_buf_append(&h->buf, zero, k);
					grow -= k;
				}
				if (rc) {
					pthread_mutex_unlock(&h->mu);
					return rc;
				}
			}
			memcpy(h->buf.data + off, data, size);
			rc = (int)size;
		}
	}
	pthread_mutex_unlock(&h->mu);
	return rc;
}

int dlh_fs_flush(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	struct fs_handle *h = (struct fs_handle *)(uintptr_t)fi->fh;
	if (fs_source_of(h->node.kind) != FS_TRANSACTION || !h->writable)
		return 0;
	pthread_mutex_lock(&h->mu);
	int rc;
	if (h->wrote || h->committed) {
		commit(h);
		rc = h->verdict;
	} else {
		/* Nothing written yet. Either the spec is empty (cp of an empty
		 * file: close() must fail) or a shell is closing a duplicate
		 * before it writes (`cat x > new` dups, then closes, the first
		 * descriptor). Fail this close without submitting; a later write
		 * still counts, and release submits what is there at the end. */
		rc = -EINVAL;
	}
	pthread_mutex_unlock(&h->mu);
	return rc;
}

int dlh_fs_release(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	struct fs_handle *h = (struct fs_handle *)(uintptr_t)fi->fh;
	if (fs_source_of(h->node.kind) == FS_TRANSACTION && h->writable)
		commit(h); /* an empty spec that nobody read back: record the refusal */
	fs_poll_forget(fi->fh);
	handle_free(h);
	return 0;
}

int dlh_fs_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	struct fs_node n;
	int rc = fs_resolve(engine(), path, &n);
	if (rc)
		return rc;
	enum fs_source src = fs_source_of(n.kind);
	if (src == FS_DIR)
		return -EISDIR;
	if (src != FS_TRANSACTION && src != FS_CONTROL)
		return -EACCES;
	if (size != 0)
		return -EINVAL;
	if (fi && src == FS_TRANSACTION) {
		struct fs_handle *h = (struct fs_handle *)(uintptr_t)fi->fh;
		pthread_mutex_lock(&h->mu);
		if (!h->committed) {
			h->buf.len = 0;
			h->attempted = 0;
		}
		pthread_mutex_unlock(&h->mu);
	}
	return 0;
}

int dlh_fs_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi)
{
	(void)tv;
	(void)fi;
	struct fs_node n;
	int rc = fs_resolve(engine(), path, &n);
	if (rc)
		return rc;
	enum fs_source src = fs_source_of(n.kind);
	return src == FS_TRANSACTION || src == FS_CONTROL ? 0 : -EACCES;
}

int dlh_fs_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	(void)mode;
	(void)fi;
	struct fs_node n;
	int rc = fs_resolve(engine(), path, &n);
	/* the kernel creates only what lookup did not find: nothing new may appear */
	return rc == -ENOTDIR ? -ENOTDIR : -EACCES;
}

int dlh_fs_refuse(const char *path)
{
	struct fs_node n;
	int rc = fs_resolve(engine(), path, &n);
	return rc ? rc : -EACCES;
}

int dlh_fs_refuse_mkdir(const char *path, mode_t mode)
{
	(void)mode;
	struct fs_node n;
	int rc = fs_resolve(engine(), path, &n);
	return rc == 0 ? -EEXIST : rc == -ENOTDIR ? rc : -EACCES;
}

int dlh_fs_refuse_rename(const char *from, const char *to, unsigned int flags)
{
	(void)to;
	(void)flags;
	return dlh_fs_refuse(from);
}

int dlh_fs_refuse_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	(void)mode;
	(void)fi;
	return dlh_fs_refuse(path);
}

int dlh_fs_refuse_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi)
{
	(void)uid;
	(void)gid;
	(void)fi;
	return dlh_fs_refuse(path);
}

int dlh_fs_refuse_link(const char *from, const char *to)
{
	(void)from;
	return dlh_fs_refuse_mkdir(to, 0);
}
