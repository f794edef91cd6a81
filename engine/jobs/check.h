/* check.h - a submission's spec and data, checked by a thread of its own */
#ifndef DLH_JOBS_CHECK_H
#define DLH_JOBS_CHECK_H

#include <stddef.h>
#include <sys/types.h>

#include "engine/plan/dataset.h"
#include "schema/spec.h"

/* Most checks of one user (root aside) running at once. */
#define ENG_CHECKS_PER_USER 4

/* What a check found. */
struct eng_checked {
	struct dlh_spec spec;              /* as parsed */
	struct dlh_dataset_shape shape;    /* the data's shape, when have */
	int have;                          /* 0 for a [job] command: dlhfs reads no data */
};

/* Parses text as uid's spec and reads its data's headers with uid's file
 * rights (engine/run/owner.h), in a thread of its own that the caller waits
 * for at most timeout_ms. A check that overruns it is left to finish on its
 * own and the spec is refused: a file on a hung filesystem holds that
 * thread, never the caller. While uid has a check that overran, or
 * ENG_CHECKS_PER_USER checks running, uid's next spec is refused at once.
 * Returns 0 with *out, -EINVAL with err (the spec or its data is bad, or the
 * data did not answer in time), -EAGAIN with err (uid's checks are busy), or
 * -ENOMEM/-EPERM with err. */
int eng_check_spec(const char *text, size_t len, uid_t uid, int timeout_ms,
		   struct eng_checked *out, char *err, size_t errlen);

#endif
