/* idx.c - IDX data sets (gzip or plain): header checks, shard loading, batch gather */
#include "engine/train/idx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "engine/train/files.h"

#define DLT_IDX_GZBUF (256 * 1024)   /* zlib input buffer */
#define DLT_IDX_CHUNK (64 * 1024)    /* bytes decoded per read */

/* Reads exactly len bytes; what names the data for the message.
 * Returns 0, or -EIO with a message in err. */
static int read_exact(gzFile gz, const char *path, void *buf, size_t len,
		      const char *what, char *err, size_t errlen)
{
	unsigned char *p = buf;

	while (len > 0) {
		unsigned want = len > (1u << 30) ? (1u << 30) : (unsigned)len;
		int n = gzread(gz, p, want);

		if (n <= 0) {
			int code;
			const char *msg = gzerror(gz, &code);

			if (code == Z_ERRNO)
				snprintf(err, errlen, "cannot read \"%s\": %s", path, strerror(errno));
			else if (code == Z_OK || code == Z_BUF_ERROR)
				snprintf(err, errlen, "\"%s\": truncated: file ends inside the %s", path, what);
			else
				snprintf(err, errlen, "\"%s\": corrupt gzip data: %s", path, msg);
			return -EIO;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Returns the big-endian 32-bit number at b. */
static uint32_t be32(const unsigned char *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* Opens path and reads and checks its header. Returns 0 with *gz open
 * after the header, or -errno with a message in err. */
static int open_idx(const char *path, uint32_t magic, struct dlt_idx_header *h,
		    gzFile *gz, char *err, size_t errlen)
{
	unsigned char b[16];
	int images = magic == DLT_IDX_MAGIC_IMAGES;
	const char *what = images ? "IDX3 uint8 images" : "IDX1 uint8 labels";
	int rc;

	int fd = dlt_open_regular(path, err, errlen);

	if (fd < 0)
		return fd;
	*gz = gzdopen(fd, "rb");
	if (!*gz) {
		close(fd);
		snprintf(err, errlen, "cannot open \"%s\": %s", path, strerror(ENOMEM));
		return -ENOMEM;
	}
	gzbuffer(*gz, DLT_IDX_GZBUF);
	rc = read_exact(*gz, path, b, images ? 16 : 8, "header", err, errlen);
	if (rc < 0)
		goto fail;
	h->magic = be32(b);
	if (h->magic != magic) {
		snprintf(err, errlen, "\"%s\": bad magic 0x%08x (expected 0x%08x, %s)",
			 path, (unsigned)h->magic, (unsigned)magic, what);
		rc = -EINVAL;
		goto fail;
	}
	h->count = (long)be32(b + 4);
	h->rows = images ? (int)(be32(b + 8) & 0x7fffffff) : 1;
	h->cols = images ? (int)(be32(b + 12) & 0x7fffffff) : 1;
	if (h->count < 1 || h->count > DLT_IDX_MAX_COUNT) {
		snprintf(err, errlen, "\"%s\": bad item count %ld (must be 1..%ld)",
			 path, h->count, DLT_IDX_MAX_COUNT);
		rc = -EINVAL;
		goto fail;
	}
	if (h->rows < 1 || h->cols < 1 || (long)h->rows * h->cols > DLT_IDX_MAX_DIM) {
		snprintf(err, errlen, "\"%s\": bad image size %d x %d (at most %d pixels)",
			 path, h->rows, h->cols, DLT_IDX_MAX_DIM);
		rc = -EINVAL;
		goto fail;
	}
	return 0;
fail:
	gzclose(*gz);
	*gz = NULL;
	return rc;
}

int dlt_idx_probe(const char *path, uint32_t magic, struct dlt_idx_header *h,
		  char *err, size_t errlen)
{
	gzFile gz;
	int rc = open_idx(path, magic, h, &gz, err, errlen);

	if (rc == 0)
		gzclose(gz);
	return rc;
}

/* Checks 0 <= lo <= hi <= count. Returns 0, or -EINVAL with a message. */
static int check_range(const char *path, const struct dlt_idx_header *h,
		       long lo, long hi, char *err, size_t errlen)
{
	if (lo < 0 || lo > hi || hi > h->count) {
		snprintf(err, errlen, "\"%s\": items %ld..%ld requested, the file has %ld",
			 path, lo, hi, h->count);
		return -EINVAL;
	}
	return 0;
}

/* Skips n bytes of the decoded stream. Returns 0, or -EIO with a message. */
static int skip(gzFile gz, const char *path, size_t n, const char *what,
		char *err, size_t errlen)
{
	static unsigned char sink[DLT_IDX_CHUNK];   /* contents never read */

	while (n > 0) {
		size_t k = n < sizeof sink ? n : sizeof sink;
		int rc = read_exact(gz, path, sink, k, what, err, errlen);

		if (rc < 0)
			return rc;
		n -= k;
	}
	return 0;
}

int dlt_idx_load_images(const char *path, long lo, long hi, float **out,
			int *dim, char *err, size_t errlen)
{
	struct dlt_idx_header h;
	unsigned char buf[DLT_IDX_CHUNK];
	float lut[256];
	gzFile gz;
	float *x;
	size_t total, done;
	int rc = open_idx(path, DLT_IDX_MAGIC_IMAGES, &h, &gz, err, errlen);

	if (rc < 0)
		return rc;
	rc = check_range(path, &h, lo, hi, err, errlen);
	if (rc < 0)
		goto out;
	*dim = h.rows * h.cols;
	total = (size_t)(hi - lo) * (size_t)*dim;
	x = malloc(total ? total * sizeof *x : 1);
	if (!x) {
		snprintf(err, errlen, "\"%s\": cannot allocate %zu bytes", path, total * sizeof *x);
		rc = -ENOMEM;
		goto out;
	}
	for (int v = 0; v < 256; v++)
		lut[v] = ((float)v / 255.0f - DLT_IDX_MEAN) / DLT_IDX_STD;
	rc = skip(gz, path, (size_t)lo * (size_t)*dim, "images", err, errlen);
	for (done = 0; rc == 0 && done < total; ) {
		size_t k = total - done < sizeof buf ? total - done : sizeof buf;

		rc = read_exact(gz, path, buf, k, "images", err, errlen);
		for (size_t i = 0; rc == 0 && i < k; i++)
			x[done + i] = lut[buf[i]];
		done += k;
	}
	if (rc < 0)
		free(x);
	else
		*out = x;
out:
	gzclose(gz);
	return rc;
}

int dlt_idx_load_labels(const char *path, long lo, long hi, uint8_t **out,
			char *err, size_t errlen)
{
	struct dlt_idx_header h;
	gzFile gz;
	uint8_t *y;
	int rc = open_idx(path, DLT_IDX_MAGIC_LABELS, &h, &gz, err, errlen);

	if (rc < 0)
		return rc;
	rc = check_range(path, &h, lo, hi, err, errlen);
	if (rc < 0)
		goto out;
	y = malloc(hi > lo ? (size_t)(hi - lo) : 1);
	if (!y) {
		snprintf(err, errlen, "\"%s\": cannot allocate %ld bytes", path, hi - lo);
		rc = -ENOMEM;
		goto out;
	}
	rc = skip(gz, path, (size_t)lo, "labels", err, errlen);
	if (rc == 0)
		rc = read_exact(gz, path, y, (size_t)(hi - lo), "labels", err, errlen);
	if (rc < 0)
		free(y);
	else
		*out = y;
out:
	gzclose(gz);
	return rc;
}

int dlt_dataset_load(struct dlt_dataset *d, const char *images,
		     const char *labels, long lo, long hi,
		     char *err, size_t errlen)
{
	int rc;

	memset(d, 0, sizeof *d);
	rc = dlt_idx_load_images(images, lo, hi, &d->x, &d->dim, err, errlen);
	if (rc < 0)
		return rc;
	rc = dlt_idx_load_labels(labels, lo, hi, &d->y, err, errlen);
	if (rc < 0) {
		dlt_dataset_free(d);
		return rc;
	}
	d->n = hi - lo;
	return 0;
}

void dlt_dataset_free(struct dlt_dataset *d)
{
	free(d->x);
	free(d->y);
	memset(d, 0, sizeof *d);
}

void dlt_dataset_gather(const struct dlt_dataset *d, const uint32_t *idx,
			int n, float *x, uint8_t *y)
{
	size_t dim = (size_t)d->dim;

	for (int i = 0; i < n; i++) {
		memcpy(x + (size_t)i * dim, d->x + (size_t)idx[i] * dim, dim * sizeof *x);
		y[i] = d->y[idx[i]];
	}
}
