/* csv.h - CSV data sets (Kaggle Fashion-MNIST layout, gzip or plain): count, shard loading */
#ifndef DLT_CSV_H
#define DLT_CSV_H

#include <stddef.h>

#include "engine/train/idx.h"

#define DLT_CSV_MAX_LINE (64L << 20)   /* longest line accepted, bytes */

/* A CSV data set is one item per line: the label (0..255), then dim pixel
 * values 0..255, comma-separated; an optional first line that starts with
 * something other than a digit is a header and is skipped. Pixels are
 * normalized as the IDX loader does. Line numbers in messages are 1-based
 * physical lines, the header included. */

/* Counts the data lines of path into *count and the largest label into
 * *max_label (labels are parsed, pixels are not). Returns 0, or -errno
 * with a message naming the file (and line) in err. */
int dlt_csv_probe(const char *path, long *count, int *max_label,
		  char *err, size_t errlen);

/* Loads data lines [lo, hi) (0-based, header not counted) of path into d
 * (zeroed first), each of which must hold exactly 1 + dim values. Returns
 * 0, or -errno with a message in err, e.g. `"/x.csv":3: expected 785
 * values, got 784`; d then holds nothing. */
int dlt_csv_load(struct dlt_dataset *d, const char *path, int dim, long lo, long hi,
		 char *err, size_t errlen);

#endif
