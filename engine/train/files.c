/* files.c - file helpers of the trainer: full writes, atomic replace, mkdir -p */
#include "engine/train/files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int dlt_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
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
	char buf[DLT_PATH_MAX];
	size_t len = strlen(path);

	if (len == 0 || len >= sizeof buf) {
		snprintf(err, errlen, "cannot create \"%s\": %s", path,
			 strerror(len ? ENAMETOOLONG : ENOENT));
		return len ? -ENAMETOOLONG : -ENOENT;
	}
	memcpy(buf, path, len + 1);
	for (size_t i = 1; i <= len; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		char c = buf[i];

		buf[i] = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST) {
			int e = errno;

			snprintf(err, errlen, "cannot create \"%s\": %s", buf, strerror(e));
			return -e;
		}
		buf[i] = c;
	}
	struct stat st;
	int e = 0;

	if (stat(path, &st) < 0)
		e = errno;
	else if (!S_ISDIR(st.st_mode))
		e = ENOTDIR;
	if (e) {
		snprintf(err, errlen, "cannot create \"%s\": %s", path, strerror(e));
		return -e;
	}
	return 0;
}

/* Splits path into its directory (into dir) and the temporary name
 * DIR/.BASE.tmp (into tmp). Returns 0, or -ENAMETOOLONG. */
static int tmp_name(const char *path, char *dir, char *tmp, size_t len)
{
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	size_t dlen = slash ? (size_t)(slash - path) : 1;
	int n;

	if (dlen >= len)
		return -ENAMETOOLONG;
	if (slash) {
		memcpy(dir, path, dlen);
		dir[dlen] = '\0';
		if (dlen == 0)
			strcpy(dir, "/");
	} else {
		strcpy(dir, ".");
	}
	n = snprintf(tmp, len, "%.*s.%s.tmp", (int)(base - path), path, base);
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

int dlt_write_atomic(const char *path, const struct iovec *iov, int niov,
		     char *err, size_t errlen)
{
	char dir[DLT_PATH_MAX], tmp[DLT_PATH_MAX];
	int fd, rc;

	if (tmp_name(path, dir, tmp, sizeof tmp) < 0) {
		snprintf(err, errlen, "cannot write \"%s\": %s", path, strerror(ENAMETOOLONG));
		return -ENAMETOOLONG;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot create \"%s\": %s", tmp, strerror(-rc));
		return rc;
	}
	rc = 0;
	for (int i = 0; i < niov && rc == 0; i++)
		rc = dlt_write_all(fd, iov[i].iov_base, iov[i].iov_len);
	if (rc == 0 && fsync(fd) < 0)
		rc = -errno;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -errno;
	if (rc < 0) {
		snprintf(err, errlen, "cannot write \"%s\": %s", path, strerror(-rc));
		unlink(tmp);
		return rc;
	}
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {   /* makes the rename durable; best effort */
		fsync(fd);
		close(fd);
	}
	return 0;
}

int dlt_write_atomic_str(const char *path, const char *text,
			 char *err, size_t errlen)
{
	struct iovec iov = { .iov_base = (void *)text, .iov_len = strlen(text) };

	return dlt_write_atomic(path, &iov, 1, err, errlen);
}
