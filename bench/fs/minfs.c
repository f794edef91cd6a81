/* minfs.c - the floor bench/fs measures dlhfs against: a minimal libfuse
 * (high-level API) filesystem with the kernel caching libfuse gives by
 * default (attributes and entries for 1 s) plus kernel_cache (pages kept
 * across opens). It serves jobs/<i>/status for i = 1..N, each holding a
 * fixed line, and nothing else: no state, no locks, no rendering.
 *   minfs MOUNTPOINT -o jobs=N,line=TEXT [fuse options]     */
#include <errno.h>
#include <fuse.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct minfs_opts {
	long jobs;      /* -o jobs=N */
	char *line;     /* -o line=TEXT (a newline is added) */
};

static struct minfs_opts opts = { 1000, NULL };
static char content[256];
static size_t content_len;

static const struct fuse_opt option_spec[] = {
	{ "jobs=%ld", offsetof(struct minfs_opts, jobs), 0 },
	{ "line=%s", offsetof(struct minfs_opts, line), 0 },
	FUSE_OPT_END
};

enum what { NONE, ROOT, JOBS, JOB, STATUS };

/* What path names: "/", "/jobs", "/jobs/<i>" or "/jobs/<i>/status". */
static enum what resolve(const char *path)
{
	if (!strcmp(path, "/"))
		return ROOT;
	if (strncmp(path, "/jobs", 5))
		return NONE;
	if (!path[5])
		return JOBS;
	if (path[5] != '/')
		return NONE;
	char *end;
	long i = strtol(path + 6, &end, 10);
	if (end == path + 6 || i < 1 || i > opts.jobs)
		return NONE;
	if (!*end)
		return JOB;
	return strcmp(end, "/status") ? NONE : STATUS;
}

static void *minfs_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	(void)conn;
	cfg->kernel_cache = 1;
	return NULL;
}

static int minfs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	(void)fi;
	memset(st, 0, sizeof *st);
	switch (resolve(path)) {
	case ROOT: case JOBS: case JOB:
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
		return 0;
	case STATUS:
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
		st->st_size = (off_t)content_len;
		return 0;
	default:
		return -ENOENT;
	}
}

static int minfs_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
			 struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	(void)off;
	(void)fi;
	(void)flags;
	enum what w = resolve(path);
	fill(buf, ".", NULL, 0, 0);
	fill(buf, "..", NULL, 0, 0);
	if (w == ROOT)
		return fill(buf, "jobs", NULL, 0, 0), 0;
	if (w == JOB)
		return fill(buf, "status", NULL, 0, 0), 0;
	if (w != JOBS)
		return -ENOTDIR;
	for (long i = 1; i <= opts.jobs; i++) {
		char name[32];
		snprintf(name, sizeof name, "%ld", i);
		if (fill(buf, name, NULL, 0, 0))
			break;
	}
	return 0;
}

static int minfs_open(const char *path, struct fuse_file_info *fi)
{
	if (resolve(path) != STATUS)
		return -ENOENT;
	return (fi->flags & O_ACCMODE) == O_RDONLY ? 0 : -EACCES;
}

static int minfs_read(const char *path, char *buf, size_t size, off_t off,
		      struct fuse_file_info *fi)
{
	(void)path;
	(void)fi;
	if (off < 0 || (size_t)off >= content_len)
		return 0;
	size_t n = content_len - (size_t)off;
	if (n > size)
		n = size;
	memcpy(buf, content + off, n);
	return (int)n;
}

static const struct fuse_operations minfs_ops = {
	.init = minfs_init,
	.getattr = minfs_getattr,
	.readdir = minfs_readdir,
	.open = minfs_open,
	.read = minfs_read,
};

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	if (fuse_opt_parse(&args, &opts, option_spec, NULL) == -1)
		return 1;
	content_len = (size_t)snprintf(content, sizeof content, "%s\n",
				       opts.line ? opts.line : "running");
	if (content_len >= sizeof content)
		content_len = sizeof content - 1;
	int rc = fuse_main(args.argc, args.argv, &minfs_ops, NULL);
	fuse_opt_free_args(&args);
	free(opts.line);
	return rc;
}
