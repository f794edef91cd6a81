/* util.h - small file and text helpers shared by the engine */
#ifndef DLH_UTIL_H
#define DLH_UTIL_H

#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

/* A growable text buffer. len excludes the NUL that always follows data. */
struct dlh_buf {
	char *data;   /* NUL-terminated, or NULL before the first append */
	size_t len;   /* bytes used */
	size_t cap;   /* bytes allocated */
};

/* Appends printf-formatted text. Returns 0, or -ENOMEM. */
int dlh_buf_printf(struct dlh_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Appends n bytes. Returns 0, or -ENOMEM. */
int dlh_buf_append(struct dlh_buf *b, const void *p, size_t n);
/* Frees the data and zeroes the buffer. */
void dlh_buf_free(struct dlh_buf *b);

/* Writes all len bytes of buf to fd, retrying short writes and EINTR.
 * Returns 0, or -errno. */
int dlh_write_all(int fd, const void *buf, size_t len);

/* Replaces path atomically with the concatenation of the niov buffers:
 * writes DIR/.NAME.tmp (a new file: a link standing there is not followed),
 * fsyncs it, renames it over path and fsyncs DIR, so a reader sees the old
 * file or the whole new one. Returns 0, or -errno (the temporary file is
 * removed on failure). */
int dlh_write_atomic_iov(const char *path, const struct iovec *iov, int niov);

/* dlh_write_atomic_iov of one buffer. Returns 0, or -errno. */
int dlh_write_atomic(const char *path, const void *data, size_t len);

/* Opens path for reading when it is a regular file, never waiting on it or
 * opening anything else (it is looked at first: a FIFO or device is
 * refused by its type). nofollow: a symbolic link as the last component is
 * refused too. Returns the descriptor, or -errno (-EISDIR a directory,
 * -ELOOP a link, -EINVAL anything else that is not a regular file). */
int dlh_open_regular(const char *path, int nofollow);

/* Reads a whole regular file of at most max bytes into a NUL-terminated
 * malloc'd buffer (*out, *len), never waiting on it (a FIFO or device is
 * -EINVAL). Returns 0, -errno, or -EFBIG when larger than max. */
int dlh_read_file(const char *path, size_t max, char **out, size_t *len);

/* dlh_read_file of a file inside a job's directory, where its owner may put
 * anything: a symbolic link as the last component is refused (-ELOOP). */
int dlh_read_file_nofollow(const char *path, size_t max, char **out, size_t *len);

/* Inside a job's directory dir (trusted: the daemon made it) its owner may
 * put anything; these reach rel ("NAME" or "SUB/NAME") without following a
 * symbolic link at any component, and without waiting on a FIFO or device.
 * dlh_open_beneath opens a regular file for reading: the descriptor, or
 * -errno (-ELOOP a link, -EINVAL not a regular file, -ENOENT). */
int dlh_open_beneath(const char *dir, const char *rel);

/* lstat of rel beneath dir: 0 for a regular file or a directory (st filled),
 * or -errno (-EINVAL anything else, -ELOOP a link on the way). */
int dlh_stat_beneath(const char *dir, const char *rel, struct stat *st);

/* opendir of rel beneath dir, links refused. NULL with errno on failure. */
DIR *dlh_opendir_beneath(const char *dir, const char *rel);

/* Opens name in directory dirfd with flags, never through a link nor into
 * another mount (openat2, RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV): a mount
 * an owner made in their directory (a FUSE filesystem that never answers)
 * is refused (-EXDEV) before anything asks it. Returns the descriptor, or
 * -errno. */
int dlh_open_here(int dirfd, const char *name, int flags);

/* fstatat of name in dirfd as dlh_open_here opens it (O_PATH): a link is
 * stat-ed as itself; a mount point is -EXDEV. Returns 0, or -errno. */
int dlh_stat_here(int dirfd, const char *name, struct stat *st);

/* Removes the directory path and everything beneath it, one name at a time
 * from descriptors of the directories (openat, unlinkat): a link is removed,
 * never followed, and a directory swapped for a link meanwhile is not
 * entered; it enters no other mount (dlh_open_here) and DLH_TREE_DEPTH
 * levels. Returns
 * 0, or the first -errno (removing what it can). */
#define DLH_TREE_DEPTH 64
int dlh_remove_tree(const char *path);

/* Bytes the directory path holds, everything beneath it counted once, by
 * the same walk as dlh_remove_tree (no link followed, no other mount
 * entered, DLH_TREE_DEPTH levels); 0 when it cannot be read. */
long long dlh_tree_usage(const char *path);

/* Appends one line (a newline is added when missing) with O_APPEND, so
 * concurrent appenders never interleave within a line. Only to a regular
 * file with one name, never through a symbolic link (-ELOOP, -EPERM).
 * Returns 0, or -errno. */
int dlh_append_line(const char *path, const char *line);

/* dlh_append_line to a file only its owner reads (0600, made so when it
 * was wider). */
int dlh_append_line_private(const char *path, const char *line);

/* In a child about to exec: fd as descriptor to, open across the exec
 * (dup2 of a descriptor onto itself would leave it close-on-exec).
 * Async-signal-safe. Returns to, or -1 with errno. */
int dlh_fd_onto(int fd, int to);

/* Starts fn(arg) in a detached thread (nobody joins it). Returns 0, or
 * the error number of pthread_create. */
int dlh_thread_detached(void *(*fn)(void *), void *arg);

/* In a child about to exec an agent or a Slurm command: takes signals as
 * if started from a shell (every signal unblocked: FUSE threads block them;
 * SIGPIPE default: libfuse ignores it) in a process group of its own (what
 * it starts is killed with it). Async-signal-safe. */
void dlh_child_as_from_shell(void);

/* Creates dir and its parents with mode. Returns 0 (also when it exists), or -errno. */
int dlh_mkdir_p(const char *dir, mode_t mode);

/* Finds key in "key=value\n" text; copies the value (to end of line) into
 * out. Returns 0, or -ENOENT when the key is absent. */
int dlh_kv_get(const char *text, const char *key, char *out, size_t outlen);

/* Formats t (seconds since the epoch) as UTC ISO 8601 "2026-11-21T15:04:05Z". */
void dlh_time_iso(double t, char *out, size_t outlen);

/* Formats seconds as "H:MM:SS" (or "M:SS" under an hour). */
void dlh_duration(double seconds, char *out, size_t outlen);

/* Writes a byte count the way specs write sizes: the largest of K, M, G, T
 * (powers of 1024) that divides it ("64M", "1536K", "100"). */
void dlh_size_text(long long bytes, char *out, size_t len);

/* A TCP port free on this machine now (the kernel's choice), or 0: where
 * rank 0 of a run may listen (torch.distributed's MASTER_PORT). */
int dlh_free_port(void);

/* FNV-1a of len bytes: a cheap hash to tell contents apart. */
uint64_t dlh_hash(const void *data, size_t len);

#define DLH_HASH_BASIS 14695981039346656037ULL   /* FNV-1a's offset basis */

/* FNV-1a of h's bytes so far followed by len more. */
uint64_t dlh_hash_more(uint64_t h, const void *data, size_t len);

/* FNV-1a of what fd reads from where it is to its end into *out, the bytes
 * read into *size (NULL: not wanted). Returns 0, or -errno. */
int dlh_hash_fd(int fd, uint64_t *out, long long *size);

/* Seconds since the epoch, with sub-second precision. */
double dlh_now(void);

/* Seconds on CLOCK_MONOTONIC: for deadlines, immune to clock changes. */
double dlh_mono(void);

/* Fills ts with the absolute CLOCK_MONOTONIC time t (seconds). */
void dlh_mono_ts(double t, struct timespec *ts);

#endif
