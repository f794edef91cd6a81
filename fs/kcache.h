/* kcache.h - what the kernel caches of the mount (attributes, entries, the
 * pages of generated files) and telling it when that changes (kcache.c) */
#ifndef DLH_FS_KCACHE_H
#define DLH_FS_KCACHE_H

#include <fuse.h>
#include <stdint.h>
#include <sys/types.h>

#include "engine/engine.h"
#include "engine/util/util.h"
#include "fs/tree.h"

#define FS_ATTR_TIMEOUT 1.0          /* seconds the kernel keeps attributes and names */
#define FS_KCACHE_TICK_NS 50000000L  /* how often what the kernel holds is looked at */
#define FS_KCACHE_PATH_MAX 512       /* longer paths are never cached (direct io) */
#define FS_KCACHE_TEXT_MAX 16384     /* larger generated content is read directly */
#define FS_KCACHE_SYNC_NS 200000000L /* fs_kcache_sync waits this long at most */
#define FS_KCACHE_DROP_S 0.02        /* a file that differs by reader, told for an open
					file: dropped this long after */
#define FS_KCACHE_GRACE_S 0.05       /* what the kernel was told of a file is still
					served this long after it let go of it (an
					open after a stat it answered just before),
					unless a write or poll needs the change seen */

/* 1 when the kernel may keep what it learns of a file of kind k (its
 * attributes; a generated file's pages between opens): the file is the
 * same for every reader and cheap enough for kcache's thread to look at
 * each tick. 0 for jobs/index, jobs/errors and the Prometheus file (they
 * differ by reader) and for the plots and report.html (each renders all of
 * metrics.csv): the kernel is told to drop their attributes as soon as it
 * has them. */
int fs_kcache_kept(enum fs_kind k);

/* A getattr (or lookup) of path told the kernel n's attributes with size
 * size, kept for FS_ATTR_TIMEOUT; content is a generated file's content
 * (NULL for others), and uid asked. The thread tells the kernel to drop
 * them once n's content or size differs. how: FS_TOLD_FOR_HANDLE, the
 * kernel asked for an open file (lseek to its end, a read past its size):
 * a file that differs by reader is dropped a moment later
 * (FS_KCACHE_DROP_S), not at once, so that the reply is the size that
 * lseek then takes; FS_TOLD_SNAPSHOT, the answer was an open handle's own
 * snapshot (what its reads give), which may be older than what the kernel
 * was last told or told to drop: the kernel is then told to drop it at
 * once, and the grace an open is served told content in after the kernel
 * let go of it is not renewed (a reader that stats and opens again and
 * again would otherwise be shown the old content for ever). Nodes whose attributes never
 * change are not recorded (a no-op for them). Returns, for a generated
 * file read through the kernel's pages, when its content was first told
 * (epoch seconds: its modification time, which the kernel compares to drop
 * pages of older content), else 0. */
#define FS_TOLD_FOR_HANDLE 1
#define FS_TOLD_SNAPSHOT 2
double fs_kcache_told(const char *path, const struct fs_node *n, uid_t uid, off_t size,
		      const struct dlh_buf *content, int how);

/* An open of generated path whose content is now content. While the
 * kernel may still hold the size of other content told before (its stat
 * of the file may have been answered with it), content becomes that told
 * content, read directly, and the kernel is told of the change: an open
 * never reads another length than the stat just before it showed; unless
 * an open has read newer content since it was told, which later opens
 * read too (content that went back would take a reader back). Returns
 * 1 when its reads may go through the kernel's pages (the kernel was told
 * this very content's size, and no other handle reads other content that
 * way), *keep set when the pages already hold it; the caller passes the
 * same path to fs_kcache_close when the handle is released. Returns 0
 * when its reads must reach dlhfs each time (direct io). */
int fs_kcache_open(const char *path, const struct fs_node *n, struct dlh_buf *content,
		   int *keep);
void fs_kcache_close(const char *path);

/* Appends to out the content the kernel was last told of path (with its
 * size): what a read through the pages returns, so that it is never cut
 * or padded to another size. Returns 0, -ENOENT (nothing told: the caller
 * reads its snapshot), or -ENOMEM. */
int fs_kcache_text(const char *path, struct dlh_buf *out);

/* What path shows changed: the kernel is told to drop its attributes and
 * pages now. Called by threads that answer no FUSE request (poll's). */
void fs_kcache_changed(const char *path);

/* path is opened to be read directly: the kernel is told to drop whatever
 * it holds of it, recorded or not (a drop of a kind it may not keep can
 * reach it before the attributes it drops), so that the fstat that
 * follows asks the handle. From the open itself: only for files that are
 * never read through pages (a real file, a generated one the kernel does
 * not keep), whose invalidation waits on no page a reader holds. */
void fs_kcache_opened(const char *path, const struct fs_node *n);

/* Has the thread look at everything the kernel may hold now and tell it of
 * what changed, and waits for that (FS_KCACHE_SYNC_NS at most): after a
 * write that changed files (a spec refused or accepted, a ctl verb), so
 * that a stat after it returned never shows an older size. */
void fs_kcache_sync(void);

/* Starts the thread that looks at what the kernel holds every
 * FS_KCACHE_TICK_NS and tells it (fuse_invalidate_path, holding no lock a
 * FUSE request needs) of what changed. Returns 0, or -errno. */
int fs_kcache_start(struct dlh_engine *e, struct fuse *f);

/* Stops it and forgets everything recorded. */
void fs_kcache_stop(void);

#endif
