/* files.c - file helpers of the trainer: full writes, atomic replace, mkdir -p */
#include "engine/train/files.h"

#include "engine/util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int dlt_write_all(int fd, const void *buf, size_t len)
{
	return dlh_write_all(fd, buf, len);
}

int dlt_path_join(char *out, size_t len, const char *dir, const char *name)
{
	int n = snprintf(out, len, "%s/%s", dir, name);

	if (n < 0 || (size_t)n >= len) {
		if (len)
			out[0] = '\0';
		return -ENAMETOOLONG;
	}
	return 0;
}

int dlt_mkdirs(const char *path, char *err, size_t errlen)
{
	int rc = strlen(path) ? dlh_mkdir_p(path, 0755) : -ENOENT;
	struct stat st;
	if (!rc && (stat(path, &st) < 0 || !S_ISDIR(st.st_mode)))
		rc = stat(path, &st) < 0 ? -errno : -ENOTDIR;
	if (rc)
		snprintf(err, errlen, "cannot create \"%s\": %s", path, strerror(-rc));
	return rc;
}

int dlt_write_atomic(const char *path, const struct iovec *iov, int niov,
		     char *err, size_t errlen)
{
	int rc = dlh_write_atomic_iov(path, iov, niov);
	if (rc)
		snprintf(err, errlen, "cannot write \"%s\": %s", path, strerror(-rc));
	return rc;
}

int dlt_write_atomic_str(const char *path, const char *text,
			 char *err, size_t errlen)
{
	struct iovec iov = { .iov_base = (void *)text, .iov_len = strlen(text) };

	return dlt_write_atomic(path, &iov, 1, err, errlen);
}

int dlt_open_regular(const char *path, char *err, size_t errlen)
{
	int fd = dlh_open_regular(path, 0);   /* engine/util: the one such open */

	if (fd == -EINVAL)
		snprintf(err, errlen, "\"%s\": not a regular file", path);
	else if (fd < 0)
		snprintf(err, errlen, "cannot open \"%s\": %s", path, strerror(-fd));
	return fd;
}
