/* csv.c - CSV data sets (Kaggle Fashion-MNIST layout, gzip or plain): count, shard loading */
#include "engine/train/csv.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "engine/train/files.h"

#define DLT_CSV_CHUNK 65536            /* bytes per gzgets call */

/* A line reader over a gzip or plain file. */
struct reader {
	gzFile gz;         /* the open file */
	const char *path;  /* its name, for messages */
	char *buf;         /* the current line, NUL-terminated, no newline */
	size_t cap;        /* bytes allocated at buf */
	long lineno;       /* 1-based number of the current line */
};

/* Opens path. Returns 0, or -errno with a message. */
static int reader_open(struct reader *r, const char *path, char *err, size_t errlen)
{
	memset(r, 0, sizeof *r);
	r->path = path;
	int fd = dlt_open_regular(path, err, errlen);

	if (fd < 0)
		return fd;
	r->gz = gzdopen(fd, "rb");
	if (!r->gz) {
		close(fd);
		snprintf(err, errlen, "cannot open \"%s\": %s", path, strerror(ENOMEM));
		return -ENOMEM;
	}
	gzbuffer(r->gz, DLT_CSV_CHUNK * 2);
	r->cap = DLT_CSV_CHUNK;
	r->buf = malloc(r->cap);
	if (!r->buf) {
		gzclose(r->gz);
		snprintf(err, errlen, "\"%s\": cannot allocate a line buffer", path);
		return -ENOMEM;
	}
	return 0;
}

/* Closes r and frees its buffer. */
static void reader_close(struct reader *r)
{
	if (r->gz)
		gzclose(r->gz);
	free(r->buf);
	memset(r, 0, sizeof *r);
}

/* Reads the next line into r->buf. Returns 1, 0 at end of file, or -errno
 * with a message (-EIO: not valid gzip, -E2BIG: line too long). */
static int reader_next(struct reader *r, char *err, size_t errlen)
{
	size_t len = 0;

	for (;;) {
		if (r->cap - len < 2) {
			if (r->cap >= (size_t)DLT_CSV_MAX_LINE) {
				snprintf(err, errlen, "\"%s\":%ld: line longer than %ld bytes",
					 r->path, r->lineno + 1, DLT_CSV_MAX_LINE);
				return -E2BIG;
			}
			char *nb = realloc(r->buf, r->cap * 2);

			if (!nb) {
				snprintf(err, errlen, "\"%s\": cannot allocate a line buffer", r->path);
				return -ENOMEM;
			}
			r->buf = nb;
			r->cap *= 2;
		}
		if (!gzgets(r->gz, r->buf + len, (int)(r->cap - len > INT32_MAX ?
							  INT32_MAX : r->cap - len))) {
			int zerr;

			gzerror(r->gz, &zerr);
			if (zerr != Z_OK && zerr != Z_BUF_ERROR) {
				snprintf(err, errlen, "\"%s\":%ld: read error (corrupt gzip?)",
					 r->path, r->lineno + 1);
				return -EIO;
			}
			if (len == 0)
				return 0;
			break;   /* a last line without newline */
		}
		len += strlen(r->buf + len);
		if (len > 0 && r->buf[len - 1] == '\n')
			break;
		if (gzeof(r->gz))
			break;
	}
	while (len > 0 && (r->buf[len - 1] == '\n' || r->buf[len - 1] == '\r'))
		r->buf[--len] = '\0';
	r->lineno++;
	return 1;
}

/* Is line s a data line (starts with a digit, maybe after blanks)? */
static int is_data(const char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return *s >= '0' && *s <= '9';
}

/* Parses a value 0..255 at *s, then skips a following comma. Returns the
 * value, or -1 when the field is not such an integer. */
static int field(const char **s)
{
	const char *p = *s;
	int v = 0, digits = 0;

	while (*p == ' ' || *p == '\t')
		p++;
	while (*p >= '0' && *p <= '9' && digits < 4) {
		v = v * 10 + (*p++ - '0');
		digits++;
	}
	while (*p == ' ' || *p == '\t')
		p++;
	if (!digits || v > 255 || (*p != ',' && *p != '\0'))
		return -1;
	*s = *p == ',' ? p + 1 : p;
	return v;
}

/* Counts the comma-separated fields of line s. */
static long count_fields(const char *s)
{
	long n = 1;

	for (; *s; s++)
		n += *s == ',';
	return n;
}

int dlt_csv_probe(const char *path, long *count, int *max_label,
		  char *err, size_t errlen)
{
	struct reader r;
	int rc = reader_open(&r, path, err, errlen), mx = 0;
	long n = 0;

	if (rc < 0)
		return rc;
	while ((rc = reader_next(&r, err, errlen)) > 0) {
		const char *s = r.buf;
		int y;

		if (r.lineno == 1 && !is_data(s))
			continue;   /* the header */
		y = field(&s);
		if (y < 0) {
			snprintf(err, errlen, "\"%s\":%ld: label is not an integer 0..255",
				 path, r.lineno);
			rc = -EINVAL;
			break;
		}
		if (y > mx)
			mx = y;
		n++;
	}
	reader_close(&r);
	if (rc < 0)
		return rc;
	if (n == 0) {
		snprintf(err, errlen, "\"%s\": no data lines", path);
		return -EINVAL;
	}
	*count = n;
	*max_label = mx;
	return 0;
}

int dlt_csv_load(struct dlt_dataset *d, const char *path, int dim, long lo, long hi,
		 char *err, size_t errlen)
{
	struct reader r;
	float lut[256];
	long row = 0;
	int rc;

	memset(d, 0, sizeof *d);
	if (dim < 1 || lo < 0 || hi < lo) {
		snprintf(err, errlen, "\"%s\": bad range [%ld, %ld) of %d pixels", path, lo, hi, dim);
		return -EINVAL;
	}
	rc = reader_open(&r, path, err, errlen);
	if (rc < 0)
		return rc;
	d->x = malloc((size_t)(hi - lo) * (size_t)dim * sizeof *d->x + 1);
	d->y = malloc((size_t)(hi - lo) + 1);
	if (!d->x || !d->y) {
		snprintf(err, errlen, "\"%s\": cannot allocate %ld images", path, hi - lo);
		rc = -ENOMEM;
		goto out;
	}
	for (int v = 0; v < 256; v++)
		lut[v] = ((float)v / 255.0f - DLT_IDX_MEAN) / DLT_IDX_STD;
	while (row < hi && (rc = reader_next(&r, err, errlen)) > 0) {
		const char *s = r.buf;
		float *x;
		long nf;

		if (r.lineno == 1 && !is_data(s))
			continue;
		if (row++ < lo)
			continue;
		nf = count_fields(s);
		if (nf != (long)dim + 1) {
			snprintf(err, errlen, "\"%s\":%ld: expected %ld values, got %ld",
				 path, r.lineno, (long)dim + 1, nf);
			rc = -EINVAL;
			goto out;
		}
		x = d->x + (size_t)(row - 1 - lo) * (size_t)dim;
		for (long k = 0; k <= dim; k++) {
			int v = field(&s);

			if (v < 0) {
				snprintf(err, errlen, "\"%s\":%ld: value %ld is not an integer 0..255",
					 path, r.lineno, k + 1);
				rc = -EINVAL;
				goto out;
			}
			if (k == 0)
				d->y[row - 1 - lo] = (uint8_t)v;
			else
				x[k - 1] = lut[v];
		}
	}
	if (rc >= 0 && row < hi) {
		snprintf(err, errlen, "\"%s\": %ld data lines, expected at least %ld", path, row, hi);
		rc = -EINVAL;
	}
out:
	reader_close(&r);
	if (rc < 0) {
		dlt_dataset_free(d);
		return rc;
	}
	d->n = hi - lo;
	d->dim = dim;
	return 0;
}
