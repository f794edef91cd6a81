/* reason.h - why a run failed, from its log */
#ifndef DLH_JOBS_REASON_H
#define DLH_JOBS_REASON_H

#include <stddef.h>

#include "engine/table/table.h"

/* The first real error of j's last run into out (one line): the launcher
 * killed by a signal; else the first error line of the built-in trainer or
 * a sanitizer; else the last lines of the first rank that failed (a [job]
 * command's traceback); else the launcher's exit status. Into pub the
 * same in words anyone may read: which process failed and how, none of
 * its output ("rank 1 exited with status 1"). Both "" when the log tells
 * nothing. */
void eng_failure_reason(const struct dlh_engine *e, const struct dlh_job *j, char *pub,
			size_t publen, char *out, size_t len);

#endif
