/* render.h - the text of generated files, rendered from engine state */
#ifndef DLH_FS_RENDER_H
#define DLH_FS_RENDER_H

#include "engine/engine.h"
#include "engine/util/util.h"
#include "fs/tree.h"

/* Appends the content of generated node n to out. Returns 0, or -errno
 * (-ENOENT when the job is gone). */
int fs_render(struct dlh_engine *e, const struct fs_node *n, struct dlh_buf *out);

#define FS_GROUPS_MAX 64   /* a reader's groups looked at for readable_by = group */

/* Whether the caller of this FUSE request may read job id's private files
 * (its owner, root, whom its readable_by names). Returns 0, -EACCES, or
 * -ENOENT (no such job). Only in a FUSE request. */
int fs_caller_may_read(struct dlh_engine *e, long id);

/* The text a read of a ctl file (kind FS_JOB_CTL or FS_POOL_CTL) returns:
 * the verbs it takes. */
const char *fs_ctl_help(enum fs_kind kind);

#endif
