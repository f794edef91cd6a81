/* stale.c - a mount point left by a dlhfs that died, cleared at the next mount
 *
 * A dlhfs killed with SIGKILL leaves its mount point "Transport endpoint is
 * not connected" (ENOTCONN): libfuse cannot mount there again, and users
 * had to run fusermount3 -u by hand. The next dlhfs on that mount point
 * clears it itself, but only a mount the mount table says dlhfs made. */
#include "fs/stale.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

const char *dlh_mountpoint_arg(int argc, char *const argv[])
{
	const char *mp = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-o")) {
			i++;   /* its value */
			continue;
		}
		if (argv[i][0] != '-')
			mp = argv[i];
	}
	return mp;
}

/* The absolute path of mp without resolving its last part (which cannot be
 * stat'ed) into out. Returns 0, or -errno. */
static int absolute(const char *mp, char *out, size_t len)
{
	char dir[PATH_MAX], real[PATH_MAX];
	snprintf(dir, sizeof dir, "%s", mp);
	size_t n = strlen(dir);
	while (n > 1 && dir[n - 1] == '/')
		dir[--n] = '\0';
	char *slash = strrchr(dir, '/');
	const char *base = slash ? slash + 1 : dir;
	if (slash == dir)
		snprintf(real, sizeof real, "/");
	else if (!realpath(slash ? (*slash = '\0', dir) : ".", real))
		return -errno;
	if (snprintf(out, len, "%s/%s", strcmp(real, "/") ? real : "", base) >= (int)len)
		return -ENAMETOOLONG;
	return 0;
}

/* Undoes mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s)
{
	char *w = s;
	for (char *r = s; *r; r++) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '7' && r[2] && r[3]) {
			*w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
			r += 3;
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
}

/* 1 when /proc/self/mountinfo has a dlhfs mount at path. */
static int dlhfs_mounted_at(const char *path)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[8192];
	int found = 0;
	if (!f)
		return 0;
	while (!found && fgets(line, sizeof line, f)) {
		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS... - FSTYPE SOURCE ... */
		char point[4096], *sep = strstr(line, " - ");
		char fstype[256], source[256];
		if (!sep || sscanf(line, "%*s %*s %*s %*s %4095s", point) != 1 ||
		    sscanf(sep + 3, "%255s %255s", fstype, source) != 2)
			continue;
		unescape(point);
		found = !strcmp(point, path) &&
			(!strcmp(fstype, "fuse.dlhfs") || (!strncmp(fstype, "fuse", 4) &&
							   !strcmp(source, "dlhfs")));
	}
	fclose(f);
	return found;
}

/* fusermount3 -u -z path, as the calling user. Returns 0, or -errno. */
static int fusermount_lazy(const char *path)
{
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		char *const argv[] = { "fusermount3", "-u", "-z", (char *)path, NULL };
		execvp(argv[0], argv);
		_exit(127);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EPERM;
}

int dlh_clear_stale_mount(const char *mp, char *msg, size_t len)
{
	struct statfs sfs;
	char path[PATH_MAX];
	/* statfs, not stat: the kernel may answer a stat from the attributes
	 * it keeps (for a second) without asking the filesystem */
	if (!mp || statfs(mp, &sfs) == 0 || errno != ENOTCONN)
		return 0;
	int rc = absolute(mp, path, sizeof path);
	if (rc) {
		snprintf(msg, len, "%s: %s", mp, strerror(-rc));
		return rc;
	}
	if (!dlhfs_mounted_at(path)) {
		snprintf(msg, len, "%s is a mount whose filesystem is gone, not one of dlhfs: "
			 "unmount it first (fusermount3 -u %s)", path, path);
		return -ENOTCONN;
	}
	rc = geteuid() == 0 ? (umount2(path, MNT_DETACH) ? -errno : 0) : fusermount_lazy(path);
	if (rc) {
		snprintf(msg, len, "cannot clear the stale mount at %s (%s): fusermount3 -u %s",
			 path, strerror(-rc), path);
		return rc;
	}
	snprintf(msg, len, "cleared the stale mount at %s (a dlhfs there had ended without "
		 "unmounting)", path);
	return 1;
}
