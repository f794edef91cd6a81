/* owner.h - running a job as its owner: who that is (the password and group
 * databases) and the right to write its job directory */
#ifndef DLH_OWNER_H
#define DLH_OWNER_H

#include <sys/types.h>

#define DLH_CRED_GROUPS_MAX 64   /* supplementary groups kept for a run */

/* Who a launched program runs as. */
struct dlh_cred {
	uid_t uid;                       /* the user */
	gid_t gid;                       /* their primary group */
	int ngroups;                     /* entries of groups */
	gid_t groups[DLH_CRED_GROUPS_MAX]; /* their groups, the primary one included */
	char user[64];                   /* USER and LOGNAME */
	char home[512];                  /* HOME */
};

/* Fills c for uid from the password and group databases (getpwuid_r,
 * getgrouplist). Returns 0, or -ENOENT (no such user, with err
 * saying so) or -errno. */
/* 1 when uid acts for everyone on this mount: root, and the user the
 * daemon runs as (who mounted it). Only they may raise a job's priority
 * or act on another user's job. */
int dlh_uid_privileged(uid_t uid);

int dlh_cred_of(uid_t uid, struct dlh_cred *c, char *err, size_t errlen);

/* Who besides a job's owner may read its directory on disk. */
struct dlh_readers {
	gid_t group;                  /* this group too; (gid_t)-1 = none */
	int all;                      /* 1: every user */
};

/* Lets uid create files in dir while the daemon's own files there stay
 * the daemon's, and keeps dir from everyone else but r's readers: dir gets
 * the sticky bit and a POSIX ACL giving uid rwx (the owner may add files
 * and remove their own, never the daemon's), r->group r-x, others r-x only
 * when r->all (the daemon's group: nothing). Idempotent. Returns 0, or
 * -errno with err (-EOPNOTSUPP: the filesystem keeps no ACLs). */
int dlh_grant_dir(const char *dir, uid_t uid, const struct dlh_readers *r, char *err,
		  size_t errlen);

/* What dlh_files_as changed in the calling thread, to put back. */
struct dlh_files_saved {
	int active;                        /* something was changed */
	int ngroups;                       /* the thread's groups before */
	gid_t groups[DLH_CRED_GROUPS_MAX];
};

/* Makes the calling thread, and only it, reach files as c's user (its
 * filesystem uid and gid and its groups, by the raw system calls: the rest
 * of the daemon keeps root's rights), so that a spec's data paths are
 * checked with the submitter's rights. Does nothing unless this process is
 * root and c is not. dlh_files_back undoes it; call it on every path out.
 * Returns 0, or -errno (nothing changed then). */
int dlh_files_as(const struct dlh_cred *c, struct dlh_files_saved *saved);

/* Puts back what dlh_files_as changed. Aborts the daemon when that fails:
 * a FUSE thread must not go on with a user's rights. */
void dlh_files_back(struct dlh_files_saved *saved);

#endif
