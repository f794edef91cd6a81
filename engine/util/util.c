/* util.c - small file and text helpers shared by the engine */
/* O_PATH, for dlh_open_here: Linux's, as openat2 is */
#define _GNU_SOURCE
#include "engine/util/util.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <linux/openat2.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int buf_reserve(struct dlh_buf *b, size_t extra)
{
	if (b->len + extra + 1 <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + extra + 1)
		cap *= 2;
	char *p = realloc(b->data, cap);
	if (!p)
		return -ENOMEM;
	b->data = p;
	b->cap = cap;
	return 0;
}

int dlh_buf_append(struct dlh_buf *b, const void *p, size_t n)
{
	if (buf_reserve(b, n))
		return -ENOMEM;
	memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int dlh_buf_printf(struct dlh_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	if (buf_reserve(b, (size_t)n))
		return -ENOMEM;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

void dlh_buf_free(struct dlh_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

int dlh_write_all(int fd, const void *buf, size_t len)
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

/* Splits path into its directory (into dir) and the temporary name
 * DIR/.BASE.tmp (into tmp). Returns 0, or -ENAMETOOLONG. */
static int tmp_name(const char *path, char *dir, char *tmp, size_t len)
{
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	size_t dlen = slash ? (size_t)(slash - path) : 1;
	if (dlen >= len)
		return -ENAMETOOLONG;
	if (!slash)
		snprintf(dir, len, ".");
	else if (dlen == 0)
		snprintf(dir, len, "/");
	else
		snprintf(dir, len, "%.*s", (int)dlen, path);
	int n = snprintf(tmp, len, "%.*s.%s.tmp", (int)(base - path), path, base);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int dlh_write_atomic_iov(const char *path, const struct iovec *iov, int niov)
{
	char dir[4096], tmp[4096];
	if (tmp_name(path, dir, tmp, sizeof tmp) < 0)
		return -ENAMETOOLONG;
	/* a new file of its own: whatever stands at tmp (a link) is not followed */
	unlink(tmp);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	int rc = 0;
	for (int i = 0; i < niov && rc == 0; i++)
		rc = dlh_write_all(fd, iov[i].iov_base, iov[i].iov_len);
	if (rc == 0 && fsync(fd) < 0)
		rc = -errno;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -errno;
	if (rc < 0) {
		unlink(tmp);
		return rc;
	}
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) { /* makes the rename durable; best effort */
		fsync(fd);
		close(fd);
	}
	return 0;
}

int dlh_write_atomic(const char *path, const void *data, size_t len)
{
	struct iovec iov = { .iov_base = (void *)data, .iov_len = len };
	return dlh_write_atomic_iov(path, &iov, 1);
}

/* The status of a path that is there but not a regular file. */
static int not_regular(mode_t mode)
{
	return S_ISDIR(mode) ? -EISDIR : S_ISLNK(mode) ? -ELOOP : -EINVAL;
}

int dlh_open_regular(const char *path, int nofollow)
{
	struct stat st;
	/* stat first: a device or FIFO is never opened (an open may act on it) */
	if ((nofollow ? lstat(path, &st) : stat(path, &st)) == 0 && !S_ISREG(st.st_mode))
		return not_regular(st.st_mode);
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0));
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {   /* what was opened, if it changed */
		int e = errno;
		close(fd);
		return S_ISREG(st.st_mode) ? -e : not_regular(st.st_mode);
	}
	return fd;
}

static int read_fd(int fd, size_t max, char **out, size_t *len);

int dlh_read_file(const char *path, size_t max, char **out, size_t *len)
{
	int fd = dlh_open_regular(path, 0);
	return fd < 0 ? fd : read_fd(fd, max, out, len);
}

int dlh_read_file_nofollow(const char *path, size_t max, char **out, size_t *len)
{
	int fd = dlh_open_regular(path, 1);
	return fd < 0 ? fd : read_fd(fd, max, out, len);
}

/* Reads all of fd (closing it) into *out. Returns 0, or -errno. */
static int read_fd(int fd, size_t max, char **out, size_t *len)
{
	struct dlh_buf b = {0};
	char chunk[8192];
	for (;;) {
		ssize_t n = read(fd, chunk, sizeof chunk);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int e = -errno;
			close(fd);
			dlh_buf_free(&b);
			return e;
		}
		if (n == 0)
			break;
		if (b.len + (size_t)n > max) {
			close(fd);
			dlh_buf_free(&b);
			return -EFBIG;
		}
		if (dlh_buf_append(&b, chunk, (size_t)n)) {
			close(fd);
			dlh_buf_free(&b);
			return -ENOMEM;
		}
	}
	close(fd);
	if (!b.data && dlh_buf_append(&b, "", 0))
		return -ENOMEM;
	*out = b.data;
	if (len)
		*len = b.len;
	return 0;
}

/* dlh_append_line creating path with mode, and narrowing it to mode when
 * private. */
static int append_line(const char *path, const char *line, mode_t mode, int private)
{
	/* never through a link, never to anything but a regular file of one name */
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 ||
	    (private && (st.st_mode & 077) && fchmod(fd, mode) < 0)) {
		close(fd);
		return -EPERM;
	}
	size_t n = strlen(line);
	char stack[1024];
	char *p = n + 2 <= sizeof stack ? stack : malloc(n + 2);
	if (!p) {
		close(fd);
		return -ENOMEM;
	}
	memcpy(p, line, n);
	if (n == 0 || line[n - 1] != '\n')
		p[n++] = '\n';
	ssize_t w = write(fd, p, n);
	int rc = w < 0 ? -errno : (size_t)w != n ? -EIO : 0;
	if (p != stack)
		free(p);
	close(fd);
	return rc;
}

int dlh_append_line(const char *path, const char *line)
{
	return append_line(path, line, 0644, 0);
}

int dlh_append_line_private(const char *path, const char *line)
{
	return append_line(path, line, 0600, 1);
}

int dlh_fd_onto(int fd, int to)
{
	if (fd != to)
		return dup2(fd, to);
	return fcntl(fd, F_SETFD, 0) < 0 ? -1 : to;
}

void dlh_child_as_from_shell(void)
{
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	sigaction(SIGPIPE, &dfl, NULL);
	setpgid(0, 0);
}

int dlh_mkdir_p(const char *dir, mode_t mode)
{
	char p[4096];
	if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p)
		return -ENAMETOOLONG;
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, mode) && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	if (mkdir(p, mode) && errno != EEXIST)
		return -errno;
	return 0;
}

int dlh_kv_get(const char *text, const char *key, char *out, size_t outlen)
{
	size_t klen = strlen(key);
	for (const char *line = text; line && *line;) {
		const char *eol = strchr(line, '\n');
		size_t llen = eol ? (size_t)(eol - line) : strlen(line);
		if (llen > klen && !strncmp(line, key, klen) && line[klen] == '=') {
			size_t vlen = llen - klen - 1;
			if (vlen >= outlen)
				vlen = outlen - 1;
			memcpy(out, line + klen + 1, vlen);
			out[vlen] = '\0';
			return 0;
		}
		line = eol ? eol + 1 : NULL;
	}
	return -ENOENT;
}

void dlh_time_iso(double t, char *out, size_t outlen)
{
	time_t s = (time_t)t;
	struct tm tm;
	gmtime_r(&s, &tm);
	strftime(out, outlen, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void dlh_duration(double seconds, char *out, size_t outlen)
{
	if (!(seconds >= 0))   /* negative, or NaN */
		seconds = 0;
	if (seconds > 1e12)    /* beyond what a long holds in any case: shown as such */
		seconds = 1e12;
	long s = (long)(seconds + 0.5);
	if (s >= 3600)
		snprintf(out, outlen, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
	else
		snprintf(out, outlen, "%ld:%02ld", s / 60, s % 60);
}

int dlh_free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY) };
	socklen_t len = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = 0;
	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

uint64_t dlh_hash_more(uint64_t h, const void *data, size_t len)
{
	const unsigned char *p = data;
	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 1099511628211ULL;
	return h;
}

uint64_t dlh_hash(const void *data, size_t len)
{
	return dlh_hash_more(DLH_HASH_BASIS, data, len);
}

int dlh_hash_fd(int fd, uint64_t *out, long long *size)
{
	static __thread unsigned char buf[1 << 16];
	uint64_t h = DLH_HASH_BASIS;
	long long n = 0;
	for (;;) {
		ssize_t got = read(fd, buf, sizeof buf);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return -errno;
		if (got == 0)
			break;
		h = dlh_hash_more(h, buf, (size_t)got);
		n += got;
	}
	*out = h;
	if (size)
		*size = n;
	return 0;
}

double dlh_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

double dlh_mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

void dlh_mono_ts(double t, struct timespec *ts)
{
	ts->tv_sec = (time_t)t;
	ts->tv_nsec = (long)((t - (double)ts->tv_sec) * 1e9);
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

void dlh_size_text(long long bytes, char *out, size_t len)
{
	static const char *const unit[] = { "", "K", "M", "G", "T" };
	int u = 0;
	while (bytes && bytes % 1024 == 0 && u < 4) {
		bytes /= 1024;
		u++;
	}
	snprintf(out, len, "%lld%s", bytes, unit[u]);
}

/* Opens the directory of rel's components but the last beneath dir, never
 * through a symbolic link; *last points at the last component. Returns the
 * directory's descriptor, or -errno. */
static int walk_beneath(const char *dir, const char *rel, const char **last)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	const char *p = rel;
	for (;;) {
		size_t n = strcspn(p, "/");
		if (!p[n]) {
			*last = p;
			return fd;
		}
		char comp[256];
		if (n == 0 || n >= sizeof comp || (n == 2 && !strncmp(p, "..", 2))) {
			close(fd);
			return -EINVAL;
		}
		memcpy(comp, p, n);
		comp[n] = '\0';
		int sub = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		int e = errno;
		close(fd);
		if (sub < 0)
			return e == ENOTDIR ? -ENOENT : -e;
		fd = sub;
		p += n + 1;
	}
}

int dlh_open_beneath(const char *dir, const char *rel)
{
	const char *last;
	int d = walk_beneath(dir, rel, &last);
	if (d < 0)
		return d;
	if (!*last || !strcmp(last, "..")) {
		close(d);
		return -EINVAL;
	}
	int fd = openat(d, last, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
	int e = errno;
	close(d);
	if (fd < 0)
		return -e;
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	return fd;
}

int dlh_stat_beneath(const char *dir, const char *rel, struct stat *st)
{
	const char *last;
	int d = walk_beneath(dir, rel, &last);
	if (d < 0)
		return d;
	int rc = 0;
	if (!*last)
		rc = -EINVAL;
	else if (fstatat(d, last, st, AT_SYMLINK_NOFOLLOW) < 0)
		rc = -errno;
	else if (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode))
		rc = S_ISLNK(st->st_mode) ? -ELOOP : -EINVAL;
	close(d);
	return rc;
}

int dlh_open_here(int dirfd, const char *name, int flags)
{
	struct open_how how = {
		.flags = (unsigned long long)(flags | O_NOFOLLOW | O_CLOEXEC),
		.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV | RESOLVE_NO_MAGICLINKS,
	};
	long fd = syscall(SYS_openat2, dirfd, name, &how, sizeof how);
	if (fd < 0 && errno == ELOOP)   /* the entry itself is a link: as itself */
		fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : (int)fd;
}

int dlh_stat_here(int dirfd, const char *name, struct stat *st)
{
	int fd = dlh_open_here(dirfd, name, O_PATH);
	if (fd < 0)
		return fd;
	int rc = fstat(fd, st) < 0 ? -errno : 0;
	close(fd);
	return rc;
}

/* The subdirectory name of dirfd, which dlh_stat_here found as st, opened
 * to be walked: on device dev, depth levels left, and still that very
 * directory (not swapped since). Returns the descriptor, or -errno. */
static int open_subdir(int dirfd, const char *name, const struct stat *st, dev_t dev, int depth)
{
	int sub = depth <= 0 ? -ELOOP : st->st_dev != dev ? -EXDEV :
		  dlh_open_here(dirfd, name, O_RDONLY | O_DIRECTORY);
	struct stat now;
	if (sub >= 0 && (fstat(sub, &now) < 0 || now.st_dev != dev || now.st_ino != st->st_ino)) {
		close(sub);   /* swapped meanwhile */
		sub = -EXDEV;
	}
	return sub;
}

/* Bytes the tree under fd (device dev) holds, depth levels down; closes
 * fd. */
static long long usage_of(int fd, dev_t dev, int depth)
{
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return 0;
	}
	long long sum = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		struct stat st;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    dlh_stat_here(dirfd(d), de->d_name, &st))
			continue;
		sum += (long long)st.st_blocks * 512;
		int sub = S_ISDIR(st.st_mode) ? open_subdir(dirfd(d), de->d_name, &st, dev, depth) : -1;
		if (sub >= 0)
			sum += usage_of(sub, dev, depth - 1);
	}
	closedir(d);
	return sum;
}

long long dlh_tree_usage(const char *path)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return 0;
	if (fstat(fd, &st) < 0) {
		close(fd);
		return 0;
	}
	return (long long)st.st_blocks * 512 + usage_of(fd, st.st_dev, DLH_TREE_DEPTH);
}

/* Empties directory fd (of device dev), depth levels down at most, and
 * closes fd. Returns 0, or the first -errno. */
static int empty_dir(int fd, dev_t dev, int depth)
{
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	int rc = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		struct stat st;
		int r = dlh_stat_here(dirfd(d), de->d_name, &st);
		if (r) {
			rc = rc ? rc : r;
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			int sub = open_subdir(dirfd(d), de->d_name, &st, dev, depth);
			r = sub < 0 ? sub : empty_dir(sub, dev, depth - 1);
			if (!r && unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) < 0)
				r = -errno;
			rc = rc ? rc : r;
		} else if (unlinkat(dirfd(d), de->d_name, 0) < 0) {
			rc = rc ? rc : -errno;
		}
	}
	closedir(d);
	return rc;
}

int dlh_remove_tree(const char *path)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		close(fd);
		return -errno;
	}
	int rc = empty_dir(fd, st.st_dev, DLH_TREE_DEPTH);
	if (rmdir(path) < 0 && !rc)
		rc = -errno;
	return rc;
}

DIR *dlh_opendir_beneath(const char *dir, const char *rel)
{
	const char *last;
	int d = walk_beneath(dir, rel, &last);
	if (d < 0)
		return NULL;
	int fd = openat(d, last, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	close(d);
	if (fd < 0)
		return NULL;
	DIR *dp = fdopendir(fd);
	if (!dp)
		close(fd);
	return dp;
}

int dlh_thread_detached(void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	pthread_t t;
	int rc = pthread_attr_init(&attr);
	if (rc)
		return rc;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&t, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	return rc;
}
