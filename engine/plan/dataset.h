/* dataset.h - what a spec's data holds, read before a run: images per
 * split, image shape and classes (the estimator's inputs) */
#ifndef DLH_DATASET_H
#define DLH_DATASET_H

#include <stddef.h>

#include "schema/spec.h"

struct dlh_dataset_shape {
	long train_n, test_n;     /* images used (train_limit / test_limit applied) */
	int c, h, w;              /* one image: channels, rows, columns */
	int classes;              /* 1 + the largest label of either split */
};

/* Reads the headers (IDX) or lines (CSV) of spec's data files, and the
 * labels for the class count, as dlh-train will. Returns 0, or -errno with
 * err naming the file and problem. */
int dlh_dataset_shape(const struct dlh_spec *spec, struct dlh_dataset_shape *out,
		      char *err, size_t errlen);

#endif
