/* estimate_tool.c - bench-estimate: leave-one-out refits of a state dir's
 * history, for bench/estimate's second column
 *
 *   bench-estimate loo STATE
 *
 * For each run of STATE/history (one line each, in order) fits the
 * correction factors on all the other runs (dlh_history_fit, as the daemon
 * does after every run) and prints "RUN PREDICTED" with the run's total
 * time as the refitted model predicts it: the figure the estimator would
 * have given had it learnt from every run but this one. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/plan/estimate.h"
#include "engine/util/util.h"

#define HISTORY_MAX_BYTES (16 << 20)

/* Reads " key=NUMBER" from a history line (NUL-terminated). Returns 0, or -1. */
static int field(const char *line, const char *key, double *v)
{
	char k[64];
	snprintf(k, sizeof k, " %s=", key);
	const char *p = strstr(line, k);
	return p && sscanf(p + strlen(k), "%lf", v) == 1 ? 0 : -1;
}

int main(int argc, char **argv)
{
	char path[4096], tmp[] = "/tmp/dlh-loo.XXXXXX", tpath[4096], *text = NULL;
	size_t len;

	if (argc != 3 || strcmp(argv[1], "loo")) {
		fprintf(stderr, "usage: bench-estimate loo STATE\n");
		return 2;
	}
	snprintf(path, sizeof path, "%s/history", argv[2]);
	if (dlh_read_file(path, HISTORY_MAX_BYTES, &text, &len) < 0 || !mkdtemp(tmp)) {
		fprintf(stderr, "bench-estimate: cannot read \"%s\"\n", path);
		return 1;
	}
	snprintf(tpath, sizeof tpath, "%s/history", tmp);
	int runs = 0;
	for (char *l = text; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l))
		runs++;
	for (int i = 0; i < runs; i++) {
		struct dlh_buf others = { 0 };
		struct dlh_correction k;
		double c = 0, m = 0, s = 0;
		int n = 0;
		for (char *l = text; *l; n++) {
			char *eol = strchr(l, '\n');
			size_t ll = eol ? (size_t)(eol - l) + 1 : strlen(l);
			char line[1024];
			snprintf(line, sizeof line, "%.*s", (int)(ll < sizeof line ? ll : sizeof line - 1), l);
			if (n != i)
				dlh_buf_append(&others, l, ll);
			else if (field(line, "compute", &c) || field(line, "comm", &m) ||
				 field(line, "startup", &s))
				fprintf(stderr, "bench-estimate: run %d: a bad history line\n", i + 1);
			l += ll;
		}
		if (dlh_write_atomic(tpath, others.data ? others.data : "", others.len) < 0 ||
		    dlh_history_fit(tmp, &k) < 0) {
			fprintf(stderr, "bench-estimate: cannot refit in \"%s\"\n", tmp);
			return 1;
		}
		dlh_buf_free(&others);
		printf("%d %.4f\n", i + 1, k.compute * c + k.comm * m + k.startup * s);
	}
	unlink(tpath);
	rmdir(tmp);
	free(text);
	return 0;
}
