/* poll.h - poll(2) on live files: readers that wait are woken when what
 * they watch changes (poll.c) */
#ifndef DLH_FS_POLL_H
#define DLH_FS_POLL_H

#include <fuse.h>
#include <stdint.h>
#include <sys/types.h>

#include "engine/engine.h"
#include "fs/kcache.h"
#include "fs/tree.h"

#define FS_POLL_TICK_NS 50000000L   /* how often waiting readers' files are looked at */

/* 1 when n's kind can be waited for: a growing file (metrics.csv, log, a
 * rank's log: new bytes) or a generated one whose content changes (status,
 * progress, metrics, pool/summary, queue). */
int fs_poll_kind(enum fs_kind k);

/* What a reader waits for: node n (opened by uid as handle fh) past size
 * seen (growing files), or its content other than the one whose hash is
 * sum (generated files). */
struct fs_poll_want {
	char path[FS_KCACHE_PATH_MAX];   /* "" when longer: the kernel's copy is not told */
	uint64_t fh;
	struct fs_node node;
	uid_t uid;
	off_t seen;
	uint64_t sum;
};

/* 1 when w's file has changed now (a growing file past w->seen, a
 * generated one whose content's hash is no longer w->sum). */
int fs_poll_changed(struct dlh_engine *e, const struct fs_poll_want *w);

/* Registers ph to be woken (fuse_notify_poll) once w's file changes; ph is
 * owned from then on. Returns 0, or -ENOMEM (ph destroyed). */
int fs_poll_wait(const struct fs_poll_want *w, struct fuse_pollhandle *ph);

/* Forgets the waiters of handle fh (it was closed). */
void fs_poll_forget(uint64_t fh);

/* Starts the thread that looks at the waiters' files every FS_POLL_TICK_NS
 * (no FUSE request waits on it; it holds none of their locks while it
 * wakes a reader). Returns 0, or -errno. */
int fs_poll_start(struct dlh_engine *e);

/* Stops it and drops every waiter. */
void fs_poll_stop(void);

#endif
