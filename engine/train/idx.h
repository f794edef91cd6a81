/* idx.h - IDX data sets (gzip or plain): header checks, shard loading, batch gather */
#ifndef DLT_IDX_H
#define DLT_IDX_H

#include <stddef.h>
#include <stdint.h>

#define DLT_IDX_MAGIC_IMAGES 0x00000803u  /* IDX3, unsigned bytes: count x rows x cols */
#define DLT_IDX_MAGIC_LABELS 0x00000801u  /* IDX1, unsigned bytes: count */
#define DLT_IDX_MAX_COUNT 100000000L      /* most items one file may declare */
#define DLT_IDX_MAX_DIM (1 << 20)         /* most pixels per image */

/* Pixels become (p / 255 - MEAN) / STD. These are Fashion-MNIST's training
 * mean and standard deviation. They are fixed, not measured on the data: a
 * rank sees only its shard, and constants keep every rank, any --train-limit,
 * and a resumed run on exactly the same inputs. */
#define DLT_IDX_MEAN 0.2860f
#define DLT_IDX_STD 0.3530f

struct dlt_idx_header {
	uint32_t magic;     /* DLT_IDX_MAGIC_IMAGES or DLT_IDX_MAGIC_LABELS */
	long count;         /* images or labels the file declares */
	int rows, cols;     /* image size; 1 x 1 for labels */
};

/* An in-memory slice of a data set. */
struct dlt_dataset {
	float *x;           /* n x dim normalized pixels, row-major */
	uint8_t *y;         /* n labels */
	long n;             /* items */
	int dim;            /* pixels per item (rows * cols) */
};

/* Reads and checks the header of an IDX file of the given magic.
 * Returns 0 with *h filled, or -errno (-ENOENT etc. when it cannot be
 * opened, -EINVAL for a bad magic or size, -EIO when it is truncated or
 * not valid gzip) with a message naming the file in err. */
int dlt_idx_probe(const char *path, uint32_t magic, struct dlt_idx_header *h,
		  char *err, size_t errlen);

/* Loads images [lo, hi) of an IDX3 file as normalized floats into a new
 * malloc'd array *out of (hi - lo) * *dim floats. Requires 0 <= lo <= hi.
 * Returns 0, or -errno with a message in err (-EINVAL also when hi is
 * beyond the declared count, -EIO when the file ends early). */
int dlt_idx_load_images(const char *path, long lo, long hi, float **out,
			int *dim, char *err, size_t errlen);

/* Loads labels [lo, hi) of an IDX1 file into a new malloc'd array *out.
 * Returns 0, or -errno with a message in err, as dlt_idx_load_images. */
int dlt_idx_load_labels(const char *path, long lo, long hi, uint8_t **out,
			char *err, size_t errlen);

/* Loads items [lo, hi) of an images/labels pair into d (zeroed first).
 * Returns 0, or -errno with a message in err; d then holds nothing. */
int dlt_dataset_load(struct dlt_dataset *d, const char *images,
		     const char *labels, long lo, long hi,
		     char *err, size_t errlen);

/* Frees what d holds and zeroes it. */
void dlt_dataset_free(struct dlt_dataset *d);

/* Copies items idx[0..n) of d into the batch buffers x (n x dim) and y.
 * Every idx[i] must be < d->n. Cannot fail. */
void dlt_dataset_gather(const struct dlt_dataset *d, const uint32_t *idx,
			int n, float *x, uint8_t *y);

#endif
