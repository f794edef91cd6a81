/* dataset.c - what a spec's data holds, read before a run */
#include "engine/plan/dataset.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/train/csv.h"
#include "engine/train/idx.h"

#define CSV_IMAGE_SIZE 28    /* dlh-train's --image-size, which the plan leaves at its default */

static long limited(long n, long limit)
{
	return limit > 0 && limit < n ? limit : n;
}

/* The largest of the first n labels of an IDX labels file, or -errno. */
static int max_label(const char *path, long n, char *err, size_t errlen)
{
	uint8_t *y;
	int rc = dlt_idx_load_labels(path, 0, n, &y, err, errlen), mx = 0;

	if (rc < 0)
		return rc;
	for (long i = 0; i < n; i++)
		if (y[i] > mx)
			mx = y[i];
	free(y);
	return mx;
}

/* One IDX split: images used and their shape, and the largest label. */
static int idx_split(const char *images, const char *labels, long limit, long *n,
		     struct dlh_dataset_shape *s, int *mx, char *err, size_t errlen)
{
	struct dlt_idx_header hi, hl;
	int rc = dlt_idx_probe(images, DLT_IDX_MAGIC_IMAGES, &hi, err, errlen);

	if (rc < 0 || (rc = dlt_idx_probe(labels, DLT_IDX_MAGIC_LABELS, &hl, err, errlen)) < 0)
		return rc;
	if (hi.count != hl.count) {   /* a pair that does not belong together */
		snprintf(err, errlen, "\"%s\" holds %ld images but \"%s\" %ld labels", images,
			 (long)hi.count, labels, (long)hl.count);
		return -EINVAL;
	}
	*n = limited(hi.count, limit);
	s->c = 1;
	s->h = hi.rows;
	s->w = hi.cols;
	*mx = max_label(labels, *n, err, errlen);
	return *mx < 0 ? *mx : 0;
}

int dlh_dataset_shape(const struct dlh_spec *spec, struct dlh_dataset_shape *out,
		      char *err, size_t errlen)
{
	int mtrain, mtest, rc;

	memset(out, 0, sizeof *out);
	if (!strcmp(spec->format, "csv")) {
		rc = dlt_csv_probe(spec->train, &out->train_n, &mtrain, err, errlen);
		if (rc < 0 || (rc = dlt_csv_probe(spec->test, &out->test_n, &mtest, err, errlen)) < 0)
			return rc;
		out->train_n = limited(out->train_n, spec->train_limit);
		out->test_n = limited(out->test_n, spec->test_limit);
		out->c = 1;
		out->h = out->w = CSV_IMAGE_SIZE;
	} else {
		struct dlh_dataset_shape t;

		rc = idx_split(spec->train, spec->train_labels, spec->train_limit, &out->train_n,
			       out, &mtrain, err, errlen);
		if (rc < 0 || (rc = idx_split(spec->test, spec->test_labels, spec->test_limit,
					      &out->test_n, &t, &mtest, err, errlen)) < 0)
			return rc;
	}
	out->classes = 1 + (mtrain > mtest ? mtrain : mtest);
	return 0;
}
