/* tmpdir.h - a temp root per unit-test binary, fresh directories and small files in it
 *
 * main() calls tmp_root_make before its first case and tmp_root_remove after
 * its last; cases make their own directory with fresh_dir(name), a name no
 * other case of the binary uses. */
#ifndef DLH_TEST_TMPDIR_H
#define DLH_TEST_TMPDIR_H

#include <stdio.h>
#include <stdlib.h>

#include "engine/util/util.h"

static char tmp_root[256];   /* /tmp/dlh-unit-XXXXXX of this binary */

/* Makes tmp_root. Returns 0, or -1 (mkdtemp failed, said on stderr). */
static inline int tmp_root_make(void)
{
	snprintf(tmp_root, sizeof tmp_root, "/tmp/dlh-unit-XXXXXX");
	if (!mkdtemp(tmp_root)) {
		perror("mkdtemp");
		return -1;
	}
	return 0;
}

/* Removes tmp_root and everything in it; a failure is a comment line. */
static inline void tmp_root_remove(void)
{
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmp_root);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", tmp_root);
}

/* A fresh directory under the test's temp root. */
static inline void fresh_dir(char *out, size_t len, const char *name)
{
	snprintf(out, len, "%s/%s", tmp_root, name);
	dlh_mkdir_p(out, 0755);
}

/* Writes text to path, replacing it; a failure shows in the case's checks. */
static inline void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

#endif
