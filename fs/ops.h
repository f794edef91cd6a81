/* ops.h - the FUSE callbacks of dlhfs and the state they share */
#ifndef DLH_FS_OPS_H
#define DLH_FS_OPS_H

#include <fuse.h>

#include "engine/engine.h"

/* What every callback reaches through fuse_get_context()->private_data. */
struct dlh_fs {
	struct dlh_engine *engine;   /* jobs and pool */
	double mounted_at;           /* times of the fixed nodes */
};

int dlh_fs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi);
int dlh_fs_readlink(const char *path, char *buf, size_t size);
int dlh_fs_readdir(const char *path, void *buf, fuse_fill_dir_t filler, off_t off,
		   struct fuse_file_info *fi, enum fuse_readdir_flags flags);
int dlh_fs_open(const char *path, struct fuse_file_info *fi);
int dlh_fs_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi);
int dlh_fs_write(const char *path, const char *data, size_t size, off_t off,
		 struct fuse_file_info *fi);
int dlh_fs_flush(const char *path, struct fuse_file_info *fi);
int dlh_fs_release(const char *path, struct fuse_file_info *fi);
int dlh_fs_poll(const char *path, struct fuse_file_info *fi, struct fuse_pollhandle *ph,
		unsigned *reventsp);
int dlh_fs_truncate(const char *path, off_t size, struct fuse_file_info *fi);
int dlh_fs_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi);
int dlh_fs_create(const char *path, mode_t mode, struct fuse_file_info *fi);

/* Refusals for calls that would change the tree: -EACCES on an existing
 * node, -EEXIST for mkdir of one, else the lookup's -ENOENT/-ENOTDIR. */
int dlh_fs_refuse(const char *path);
int dlh_fs_refuse_mkdir(const char *path, mode_t mode);
int dlh_fs_refuse_rename(const char *from, const char *to, unsigned int flags);
int dlh_fs_refuse_chmod(const char *path, mode_t mode, struct fuse_file_info *fi);
int dlh_fs_refuse_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi);
int dlh_fs_refuse_link(const char *from, const char *to);

#endif
