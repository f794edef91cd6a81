/* stallfs.c - a filesystem that never answers a read: a dead NFS server in
 * a test. It serves one regular file, /slow, whose reads block until the
 * process is killed (the kernel then fails them with ENOTCONN).
 *   stallfs [-o allow_other] MOUNTPOINT   (runs in the foreground) */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fuse.h>

#define SLOW_SIZE (47L << 20)   /* as large as a real training file */

static int stall_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	(void)fi;
	memset(st, 0, sizeof *st);
	if (!strcmp(path, "/")) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
	} else if (!strcmp(path, "/slow")) {
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
		st->st_size = SLOW_SIZE;
	} else {
		return -ENOENT;
	}
	return 0;
}

static int stall_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
			 struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	(void)off, (void)fi, (void)flags;
	if (strcmp(path, "/"))
		return -ENOENT;
	fill(buf, ".", NULL, 0, 0);
	fill(buf, "..", NULL, 0, 0);
	fill(buf, "slow", NULL, 0, 0);
	return 0;
}

static int stall_open(const char *path, struct fuse_file_info *fi)
{
	if (strcmp(path, "/slow"))
		return -ENOENT;
	fi->direct_io = 1;   /* every read reaches stall_read */
	return 0;
}

/* Never answers: blocks this thread until the process dies. */
static int stall_read(const char *path, char *buf, size_t size, off_t off,
		      struct fuse_file_info *fi)
{
	(void)path, (void)buf, (void)size, (void)off, (void)fi;
	for (;;)
		pause();
	return 0;
}

static const struct fuse_operations stall_ops = {
	.getattr = stall_getattr,
	.readdir = stall_readdir,
	.open = stall_open,
	.read = stall_read,
};

int main(int argc, char **argv)
{
	return fuse_main(argc, argv, &stall_ops, NULL);
}
