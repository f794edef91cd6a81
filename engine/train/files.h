/* files.h - file helpers of the trainer: full writes, atomic replace, mkdir -p */
#ifndef DLT_FILES_H
#define DLT_FILES_H

#include <stddef.h>
#include <sys/uio.h>

#define DLT_PATH_MAX 4096   /* longest path the trainer builds */
#define DLT_ERR_MAX 512     /* room for one error message */

/* Writes all len bytes of buf to fd, retrying short writes and EINTR.
 * Returns 0, or -errno. */
int dlt_write_all(int fd, const void *buf, size_t len);

/* Creates directory path and its missing parents (mode 0755); an existing
 * directory is fine. Returns 0, or -errno with a message in err. */
int dlt_mkdirs(const char *path, char *err, size_t errlen);

/* Replaces path atomically with the concatenation of the niov buffers:
 * writes DIR/.NAME.tmp, fsyncs it, renames it over path and fsyncs DIR, so
 * a reader sees the old file or the whole new one. Returns 0, or -errno
 * with a message in err (the temporary file is removed on failure). */
int dlt_write_atomic(const char *path, const struct iovec *iov, int niov,
		     char *err, size_t errlen);

/* dlt_write_atomic of one NUL-terminated string. Returns 0, or -errno. */
int dlt_write_atomic_str(const char *path, const char *text,
			 char *err, size_t errlen);

/* Opens path for reading when it is a regular file, without ever waiting
 * on it (O_NONBLOCK: a FIFO or a device is refused, not read). Returns the
 * descriptor, or -errno with a message in err ("not a regular file": -EINVAL). */
int dlt_open_regular(const char *path, char *err, size_t errlen);

/* Joins dir and name with one '/' into out. Returns 0, or -ENAMETOOLONG
 * (out untouched beyond a NUL) when it does not fit in len bytes. */
int dlt_path_join(char *out, size_t len, const char *dir, const char *name);

#endif
