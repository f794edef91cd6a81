/* ckpt.c - checkpoints: the binary format, atomic save, `latest`, pruning */
#include "engine/train/ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <zlib.h>

#include "engine/train/files.h"

#define CRC_AT (DLT_CKPT_HEADER - 4)   /* offset of the checksum */
#define CRC_CHUNK (1u << 30)           /* most bytes per crc32() call */

/* Little-endian stores and loads of the header fields. */
static void put32(unsigned char *b, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		b[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *b, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(v >> (8 * i));
}

static void putf64(unsigned char *b, double d)
{
	uint64_t v;

	memcpy(&v, &d, sizeof v);
	put64(b, v);
}

static uint32_t get32(const unsigned char *b)
{
	uint32_t v = 0;

	for (int i = 3; i >= 0; i--)
		v = v << 8 | b[i];
	return v;
}

static uint64_t get64(const unsigned char *b)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | b[i];
	return v;
}

static double getf64(const unsigned char *b)
{
	uint64_t v = get64(b);
	double d;

	memcpy(&d, &v, sizeof d);
	return d;
}

/* Returns crc continued over len bytes (any size, crc32 takes uInt). */
static uLong crc_more(uLong crc, const void *buf, size_t len)
{
	const Bytef *p = buf;

	while (len > 0) {
		uInt k = len > CRC_CHUNK ? CRC_CHUNK : (uInt)len;

		crc = crc32(crc, p, k);
		p += k;
		len -= k;
	}
	return crc;
}

/* Returns the checksum of a header's first CRC_AT bytes and the payload. */
static uint32_t ckpt_crc(const unsigned char *hdr, const float *params,
			 const float *state, size_t n, size_t nstate)
{
	uLong crc = crc32(0L, Z_NULL, 0);

	crc = crc_more(crc, hdr, CRC_AT);
	crc = crc_more(crc, params, n * sizeof *params);
	crc = crc_more(crc, state, nstate * n * sizeof *state);
	return (uint32_t)crc;
}

int dlt_ckpt_write(const char *path, const struct dlt_ckpt_meta *m,
		   const float *params, const float *state,
		   char *err, size_t errlen)
{
	unsigned char h[DLT_CKPT_HEADER];
	size_t n = (size_t)m->nparams, ns = m->nstate ? m->nstate : 1;

	if (ns > DLT_CKPT_MAX_STATE) {
		snprintf(err, errlen, "\"%s\": %zu optimizer state arrays (at most %d)", path,
			 ns, DLT_CKPT_MAX_STATE);
		return -EINVAL;
	}

	memset(h, 0, sizeof h);
	memcpy(h, DLT_CKPT_MAGIC, sizeof DLT_CKPT_MAGIC);
	put32(h + 8, DLT_CKPT_VERSION);
	put32(h + 12, DLT_CKPT_HEADER);
	put64(h + 16, m->nparams);
	put64(h + 24, m->step);
	put64(h + 32, m->epoch);
	put64(h + 40, m->seed);
	putf64(h + 48, m->elapsed_s);
	putf64(h + 56, m->train_s);
	putf64(h + 64, m->epoch_loss_sum);
	put64(h + 72, m->epoch_steps);
	putf64(h + 80, m->test_loss);
	putf64(h + 88, m->test_acc);
	put64(h + 96, m->eval_step);
	put32(h + 104, m->optimizer);
	put32(h + 108, (uint32_t)ns);
	put32(h + CRC_AT, ckpt_crc(h, params, state, n, ns));

	struct iovec iov[3] = {
		{ .iov_base = h, .iov_len = sizeof h },
		{ .iov_base = (void *)params, .iov_len = n * sizeof *params },
		{ .iov_base = (void *)state, .iov_len = ns * n * sizeof *state },
	};
	return dlt_write_atomic(path, iov, 3, err, errlen);
}

/* Reads exactly len bytes from fd. Returns 0, -EIO at end of file, or -errno. */
static int read_all(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len > 0) {
		ssize_t k = read(fd, p, len);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			return -EIO;
		p += k;
		len -= (size_t)k;
	}
	return 0;
}

int dlt_ckpt_read(const char *path, struct dlt_ckpt_meta *m, size_t nparams,
		  int nstate, float *params, float *state, char *err, size_t errlen)
{
	unsigned char h[DLT_CKPT_HEADER];
	struct stat st;
	int rc = 0, fd = open(path, O_RDONLY | O_CLOEXEC);
	off_t want;

	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot open \"%s\": %s", path, strerror(-rc));
		return rc;
	}
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot stat \"%s\": %s", path, strerror(-rc));
		goto out;
	}
	if (st.st_size < DLT_CKPT_HEADER || read_all(fd, h, sizeof h) < 0 ||
	    memcmp(h, DLT_CKPT_MAGIC, sizeof DLT_CKPT_MAGIC) != 0) {
		snprintf(err, errlen, "\"%s\": not a dlh-train checkpoint (bad magic)", path);
		rc = -EINVAL;
		goto out;
	}
	if (get32(h + 8) != DLT_CKPT_VERSION || get32(h + 12) != DLT_CKPT_HEADER) {
		snprintf(err, errlen, "\"%s\": checkpoint version %u, this trainer reads %u "
			 "(start the job again in a new --job-dir)",
			 path, (unsigned)get32(h + 8), DLT_CKPT_VERSION);
		rc = -EINVAL;
		goto out;
	}
	m->nparams = get64(h + 16);
	if (m->nparams != (uint64_t)nparams) {
		snprintf(err, errlen, "\"%s\": checkpoint has %" PRIu64
			 " parameters, the model has %zu (different --layers or data?)",
			 path, m->nparams, nparams);
		rc = -EINVAL;
		goto out;
	}
	m->optimizer = get32(h + 104);
	m->nstate = get32(h + 108);
	if (m->nstate != (uint32_t)nstate) {
		snprintf(err, errlen, "\"%s\": checkpoint has %u optimizer state arrays, "
			 "this run's optimizer keeps %d (different --optimizer?)",
			 path, (unsigned)m->nstate, nstate);
		rc = -EINVAL;
		goto out;
	}
	want = (off_t)(DLT_CKPT_HEADER + (1 + (size_t)nstate) * nparams * sizeof(float));
	if (st.st_size != want) {
		snprintf(err, errlen, "\"%s\": %s checkpoint (%lld bytes, expected %lld)", path,
			 st.st_size < want ? "truncated" : "oversized",
			 (long long)st.st_size, (long long)want);
		rc = -EINVAL;
		goto out;
	}
	rc = read_all(fd, params, nparams * sizeof *params);
	if (rc == 0)
		rc = read_all(fd, state, (size_t)nstate * nparams * sizeof *state);
	if (rc < 0) {
		snprintf(err, errlen, "cannot read \"%s\": %s", path, strerror(-rc));
		goto out;
	}
	if (get32(h + CRC_AT) != ckpt_crc(h, params, state, nparams, (size_t)nstate)) {
		snprintf(err, errlen, "\"%s\": checksum mismatch (corrupt checkpoint)", path);
		rc = -EINVAL;
		goto out;
	}
	m->step = get64(h + 24);
	m->epoch = get64(h + 32);
	m->seed = get64(h + 40);
	m->elapsed_s = getf64(h + 48);
	m->train_s = getf64(h + 56);
	m->epoch_loss_sum = getf64(h + 64);
	m->epoch_steps = get64(h + 72);
	m->test_loss = getf64(h + 80);
	m->test_acc = getf64(h + 88);
	m->eval_step = get64(h + 96);
out:
	close(fd);
	return rc;
}

int dlt_ckpt_same_payload(const char *a, const char *b, char *err, size_t errlen)
{
	const char *path[2] = { a, b };
	unsigned char buf[2][DLT_CKPT_HEADER];
	int fd[2] = { -1, -1 }, rc = 1;
	long long off = DLT_CKPT_HEADER;

	for (int i = 0; i < 2; i++) {
		fd[i] = open(path[i], O_RDONLY | O_CLOEXEC);
		if (fd[i] < 0 || read_all(fd[i], buf[i], DLT_CKPT_HEADER) < 0 ||
		    memcmp(buf[i], DLT_CKPT_MAGIC, sizeof DLT_CKPT_MAGIC) != 0) {
			rc = fd[i] < 0 ? -errno : -EINVAL;
			snprintf(err, errlen, "\"%s\": %s", path[i],
				 fd[i] < 0 ? strerror(-rc) : "not a dlh-train checkpoint");
			goto out;
		}
	}
	for (;;) {
		ssize_t n[2];

		for (int i = 0; i < 2; i++) {
			do
				n[i] = read(fd[i], buf[i], sizeof buf[i]);
			while (n[i] < 0 && errno == EINTR);
			if (n[i] < 0) {
				rc = -errno;
				snprintf(err, errlen, "cannot read \"%s\": %s", path[i], strerror(-rc));
				goto out;
			}
		}
		if (n[0] != n[1] || memcmp(buf[0], buf[1], (size_t)n[0]) != 0) {
			ssize_t k = 0;

			while (k < n[0] && k < n[1] && buf[0][k] == buf[1][k])
				k++;
			snprintf(err, errlen, "\"%s\" and \"%s\" differ at payload float %lld%s",
				 a, b, (off + k - DLT_CKPT_HEADER) / (long long)sizeof(float),
				 n[0] != n[1] ? " (sizes differ)" : "");
			rc = 0;
			goto out;
		}
		if (n[0] == 0)
			break;
		off += n[0];
	}
out:
	for (int i = 0; i < 2; i++)
		if (fd[i] >= 0)
			close(fd[i]);
	return rc;
}

int dlt_ckpt_step_name(uint64_t step, char *out, size_t len)
{
	int n = snprintf(out, len, "step-%08" PRIu64 ".ckpt", step);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* Parses a step-NNNN.ckpt name. Returns 1 with *step set, or 0. */
static int parse_step_name(const char *name, uint64_t *step)
{
	const char *p = name + 5;
	char *end;

	if (strncmp(name, "step-", 5) != 0 || *p < '0' || *p > '9')
		return 0;
	errno = 0;
	*step = strtoull(p, &end, 10);
	return errno == 0 && strcmp(end, ".ckpt") == 0;
}

/* qsort order of uint64_t: returns <0, 0 or >0. */
static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* The steps of dir's step-* checkpoints, ascending, into *steps (malloc'd,
 * NULL when none) and *n. Returns 0, or -errno with a message in err. */
static int list_steps(const char *dir, uint64_t **steps, size_t *n, char *err, size_t errlen)
{
	DIR *d = opendir(dir);
	uint64_t step;
	size_t cap = 0;
	struct dirent *e;
	int rc = 0;

	*steps = NULL;
	*n = 0;
	if (!d) {
		rc = -errno;
		snprintf(err, errlen, "cannot open \"%s\": %s", dir, strerror(-rc));
		return rc;
	}
	while ((e = readdir(d))) {
		if (!parse_step_name(e->d_name, &step))
			continue;
		if (*n == cap) {
			size_t ncap = cap ? 2 * cap : 16;
			uint64_t *s = realloc(*steps, ncap * sizeof *s);

			if (!s) {
				rc = -ENOMEM;
				snprintf(err, errlen, "cannot list \"%s\": %s", dir, strerror(ENOMEM));
				free(*steps);
				*steps = NULL;
				*n = 0;
				break;
			}
			*steps = s;
			cap = ncap;
		}
		(*steps)[(*n)++] = step;
	}
	closedir(d);
	if (*n > 1)   /* qsort(NULL, 0, ...) is undefined */
		qsort(*steps, *n, sizeof **steps, cmp_u64);
	return rc;
}

int dlt_ckpt_previous(const char *dir, const char *name, char *out, size_t len,
		      char *err, size_t errlen)
{
	uint64_t *steps, below = UINT64_MAX;
	size_t n;
	int rc = list_steps(dir, &steps, &n, err, errlen);

	if (rc < 0)
		return rc;
	if (!parse_step_name(name, &below))
		below = UINT64_MAX;   /* final.ckpt: any step is before it */
	rc = -ENOENT;
	for (size_t i = n; i-- > 0;)
		if (steps[i] < below) {
			rc = dlt_ckpt_step_name(steps[i], out, len);
			break;
		}
	free(steps);
	return rc;
}

/* Removes all but the keep newest step-* checkpoints of dir.
 * Returns 0, or -errno with a message in err. */
static int prune(const char *dir, int keep, char *err, size_t errlen)
{
	uint64_t *steps;
	size_t n;
	int rc = list_steps(dir, &steps, &n, err, errlen);

	if (rc < 0)
		return rc;
	for (size_t i = 0; i + (size_t)keep < n; i++) {
		char name[DLT_CKPT_NAME_MAX], path[DLT_PATH_MAX];

		dlt_ckpt_step_name(steps[i], name, sizeof name);
		if (dlt_path_join(path, sizeof path, dir, name) == 0 &&
		    unlink(path) < 0 && errno != ENOENT) {
			rc = -errno;
			snprintf(err, errlen, "cannot remove \"%s\": %s", path, strerror(-rc));
			break;
		}
	}
	free(steps);
	return rc;
}

int dlt_ckpt_save(const char *dir, const char *name,
		  const struct dlt_ckpt_meta *m, const float *params,
		  const float *state, char *err, size_t errlen)
{
	char path[DLT_PATH_MAX], text[DLT_CKPT_NAME_MAX + 2];
	int rc;

	if (dlt_path_join(path, sizeof path, dir, name) < 0 ||
	    strlen(name) >= DLT_CKPT_NAME_MAX) {
		snprintf(err, errlen, "checkpoint path \"%s/%s\" too long", dir, name);
		return -ENAMETOOLONG;
	}
	rc = dlt_ckpt_write(path, m, params, state, err, errlen);
	if (rc < 0)
		return rc;
	snprintf(text, sizeof text, "%s\n", name);
	dlt_path_join(path, sizeof path, dir, DLT_CKPT_LATEST);
	rc = dlt_write_atomic_str(path, text, err, errlen);
	if (rc < 0)
		return rc;
	return prune(dir, DLT_CKPT_KEEP, err, errlen);
}

int dlt_ckpt_latest(const char *dir, char *name, size_t len,
		    char *err, size_t errlen)
{
	char path[DLT_PATH_MAX], buf[DLT_CKPT_NAME_MAX + 2];
	ssize_t n;
	int fd, rc = 0;

	if (dlt_path_join(path, sizeof path, dir, DLT_CKPT_LATEST) < 0) {
		snprintf(err, errlen, "path \"%s/%s\" too long", dir, DLT_CKPT_LATEST);
		return -ENAMETOOLONG;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		if (rc != -ENOENT)
			snprintf(err, errlen, "cannot open \"%s\": %s", path, strerror(-rc));
		return rc;
	}
	do
		n = read(fd, buf, sizeof buf - 1);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		rc = -errno;
	close(fd);
	if (rc < 0) {
		snprintf(err, errlen, "cannot read \"%s\": %s", path, strerror(-rc));
		return rc;
	}
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	if (buf[0] == '\0' || buf[0] == '.' || strchr(buf, '/') ||
	    strlen(buf) >= len || (size_t)n > DLT_CKPT_NAME_MAX) {
		snprintf(err, errlen, "\"%s\": does not hold a checkpoint file name", path);
		return -EINVAL;
	}
	strcpy(name, buf);
	return 0;
}

/* The payload floats of the checkpoint at path (malloc'd into *out, count
 * *n). Returns 0, or -errno with err. */
static int payload_floats(const char *path, float **out, long *n, char *err, size_t errlen)
{
	unsigned char hdr[DLT_CKPT_HEADER];
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;
	*out = NULL;
	if (fd < 0 || fstat(fd, &st) < 0 || read_all(fd, hdr, sizeof hdr) < 0 ||
	    memcmp(hdr, DLT_CKPT_MAGIC, sizeof DLT_CKPT_MAGIC) != 0) {
		rc = fd < 0 ? -errno : -EINVAL;
		snprintf(err, errlen, "\"%s\": %s", path, fd < 0 ? strerror(-rc) : "not a dlh-train checkpoint");
		goto out;
	}
	*n = (long)((st.st_size - DLT_CKPT_HEADER) / (off_t)sizeof(float));
	if (!(*out = malloc((size_t)*n * sizeof(float) + 1)) ||
	    read_all(fd, *out, (size_t)*n * sizeof(float)) < 0) {
		rc = *out ? -EIO : -ENOMEM;
		snprintf(err, errlen, "cannot read \"%s\": %s", path, strerror(-rc));
		free(*out);
		*out = NULL;
	}
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

int dlt_ckpt_payload_diff(const char *a, const char *b, double *diff, double *mag, long *n,
			  char *err, size_t errlen)
{
	float *x = NULL, *y = NULL;
	long na = 0, nb = 0;
	int rc = payload_floats(a, &x, &na, err, errlen);
	if (!rc)
		rc = payload_floats(b, &y, &nb, err, errlen);
	if (!rc && na != nb) {
		snprintf(err, errlen, "\"%s\" holds %ld floats, \"%s\" %ld", a, na, b, nb);
		rc = -EINVAL;
	}
	*diff = *mag = 0.0;
	*n = na;
	for (long i = 0; !rc && i < na; i++) {
		double d = fabs((double)x[i] - (double)y[i]);
		if (d > *diff || d != d)
			*diff = d;
		if (fabs((double)x[i]) > *mag)
			*mag = fabs((double)x[i]);
	}
	free(x);
	free(y);
	return rc;
}
