/* owner.c - running a job as its owner: who that is and the right to write
 * its job directory (a POSIX ACL entry on a sticky directory) */
#include "engine/run/owner.h"

#include <endian.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

int dlh_cred_of(uid_t uid, struct dlh_cred *c, char *err, size_t errlen)
{
	struct passwd pw, *found = NULL;
	char buf[4096];
	memset(c, 0, sizeof *c);
	int rc = getpwuid_r(uid, &pw, buf, sizeof buf, &found);
	if (rc || !found) {
		snprintf(err, errlen, "uid %u has no entry in the password database: a run cannot "
			 "be started as it", (unsigned)uid);
		return rc ? -rc : -ENOENT;
	}
	c->uid = uid;
	c->gid = pw.pw_gid;
	snprintf(c->user, sizeof c->user, "%s", pw.pw_name);
	snprintf(c->home, sizeof c->home, "%s", pw.pw_dir && pw.pw_dir[0] ? pw.pw_dir : "/");
	int n = DLH_CRED_GROUPS_MAX;
	if (getgrouplist(pw.pw_name, pw.pw_gid, c->groups, &n) < 0) {
		/* more than we keep: the primary group and the first ones */
		n = DLH_CRED_GROUPS_MAX;
	}
	c->ngroups = n;
	return 0;
}

/* The binary form of a POSIX access ACL (linux/posix_acl_xattr.h). */
#define ACL_XATTR_VERSION 2
#define ACL_TAG_USER_OBJ 0x01
#define ACL_TAG_USER 0x02
#define ACL_TAG_GROUP_OBJ 0x04
#define ACL_TAG_GROUP 0x08
#define ACL_TAG_MASK 0x10
#define ACL_TAG_OTHER 0x20
#define ACL_UNDEFINED_ID 0xffffffffu

struct acl_entry {
	uint16_t tag, perm;
	uint32_t id;
};

int dlh_uid_privileged(uid_t uid)
{
	return uid == 0 || uid == getuid();
}

int dlh_grant_dir(const char *dir, uid_t uid, const struct dlh_readers *r, char *err,
		  size_t errlen)
{
	struct stat st;
	if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "cannot use \"%s\": %s", dir, strerror(errno ? errno : ENOTDIR));
		return -(errno ? errno : ENOTDIR);
	}
	/* sticky: nobody but a file's owner (and root) removes or renames it */
	if (chmod(dir, S_ISVTX | (r->all ? 0755 : 0700)) < 0) {
		snprintf(err, errlen, "cannot chmod \"%s\": %s", dir, strerror(errno));
		return -errno;
	}
	/* entries in the kernel's order: user_obj, user, group_obj, group, mask, other */
	struct {
		uint32_t version;
		struct acl_entry e[6];
	} __attribute__((packed)) acl = { ACL_XATTR_VERSION, { { 0 } } };
	size_t n = 0;
	acl.e[n++] = (struct acl_entry){ ACL_TAG_USER_OBJ, 7, ACL_UNDEFINED_ID };
	acl.e[n++] = (struct acl_entry){ ACL_TAG_USER, 7, (uint32_t)uid };
	acl.e[n++] = (struct acl_entry){ ACL_TAG_GROUP_OBJ, 0, ACL_UNDEFINED_ID };
	if (r->group != (gid_t)-1)
		acl.e[n++] = (struct acl_entry){ ACL_TAG_GROUP, 5, (uint32_t)r->group };
	acl.e[n++] = (struct acl_entry){ ACL_TAG_MASK, 7, ACL_UNDEFINED_ID };
	acl.e[n++] = (struct acl_entry){ ACL_TAG_OTHER, r->all ? 5 : 0, ACL_UNDEFINED_ID };
	acl.version = htole32(acl.version);   /* the kernel's format is little-endian */
	for (size_t i = 0; i < n; i++) {
		acl.e[i].tag = htole16(acl.e[i].tag);
		acl.e[i].perm = htole16(acl.e[i].perm);
		acl.e[i].id = htole32(acl.e[i].id);
	}
	size_t size = sizeof acl.version + n * sizeof acl.e[0];
	if (setxattr(dir, "system.posix_acl_access", &acl, size, 0) < 0) {
		int e = errno;
		snprintf(err, errlen, "cannot let uid %u write \"%s\" (a POSIX ACL): %s%s",
			 (unsigned)uid, dir, strerror(e),
			 e == EOPNOTSUPP ? " (the state dir's filesystem keeps no ACLs)" : "");
		return -e;
	}
	return 0;
}

/* The raw calls: glibc's setgroups and setfsuid wrappers would (for
 * setgroups) change every thread of the process. */
static long sys_setgroups(size_t n, const gid_t *g) { return syscall(SYS_setgroups, n, g); }
static long sys_setfsuid(uid_t u) { return syscall(SYS_setfsuid, u); }
static long sys_setfsgid(gid_t g) { return syscall(SYS_setfsgid, g); }

int dlh_files_as(const struct dlh_cred *c, struct dlh_files_saved *saved)
{
	memset(saved, 0, sizeof *saved);
	if (geteuid() != 0 || c->uid == 0)
		return 0;
	int n = getgroups(DLH_CRED_GROUPS_MAX, saved->groups);
	if (n < 0)
		return -errno;
	saved->ngroups = n;
	if (sys_setgroups((size_t)c->ngroups, c->groups) < 0)
		return -errno;
	saved->active = 1;
	sys_setfsgid(c->gid);
	sys_setfsuid(c->uid);
	/* setfsuid reports the previous id, not errors: ask again */
	if ((uid_t)sys_setfsuid((uid_t)-1) != c->uid || (gid_t)sys_setfsgid((gid_t)-1) != c->gid) {
		dlh_files_back(saved);
		return -EPERM;
	}
	return 0;
}

void dlh_files_back(struct dlh_files_saved *saved)
{
	if (!saved->active)
		return;
	sys_setfsuid(geteuid());
	sys_setfsgid(getegid());
	if (sys_setgroups((size_t)saved->ngroups, saved->groups) < 0 ||
	    (uid_t)sys_setfsuid((uid_t)-1) != geteuid()) {
		fprintf(stderr, "dlhfs: cannot take back root's file rights: %s\n", strerror(errno));
		abort();
	}
	saved->active = 0;
}
