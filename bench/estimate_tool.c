/* estimate_tool.c - bench-estimate: the estimator's figures outside a mount
 *
 *   bench-estimate loo STATE
 *   bench-estimate parts CALIBRATION DEVICE SPEC
 *
 * loo: for each run of STATE/history (one line each, in order) fits the
 * correction factors on all the other runs (dlh_history_fit, as the daemon
 * does after every run) and prints "RUN PREDICTED" with the run's total
 * time as the refitted model predicts it: the figure the estimator would
 * have given had it learnt from every run but this one (bench/estimate's
 * second column).
 *
 * parts: a graphed training step of SPEC's model at its batch on one GPU of
 * type DEVICE, priced part by part from a calibration cache (a state dir's
 * calibration, or the one a bench/gpu-mount record keeps): the lines of
 * dlh-train --gpu-profile's step profile, to lay beside a GPU's (the input
 * is Fashion-MNIST's: 1 x 28 x 28, 10 classes). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/plan/calib.h"
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

#define SPEC_MAX_BYTES (64 << 10)
#define CALIB_MAX_BYTES (1 << 20)

/* bench-estimate parts CALIBRATION DEVICE SPEC. Returns the exit status. */
static int parts(const char *calib_path, const char *device, const char *spec_path)
{
	static struct dlh_calib cal;
	static struct dlh_spec spec;
	struct dlh_estimate_in in;
	struct dlh_estimate_parts p;
	char err[512], *text = NULL;
	size_t len;
	int rc;

	if (dlh_read_file(calib_path, CALIB_MAX_BYTES, &text, &len) < 0) {
		fprintf(stderr, "bench-estimate: cannot read \"%s\"\n", calib_path);
		return 1;
	}
	rc = dlh_calib_parse(text, &cal, err, sizeof err);
	free(text);
	if (rc < 0) {
		fprintf(stderr, "bench-estimate: %s: %s\n", calib_path, err);
		return 1;
	}
	if (dlh_read_file(spec_path, SPEC_MAX_BYTES, &text, &len) < 0) {
		fprintf(stderr, "bench-estimate: cannot read \"%s\"\n", spec_path);
		return 1;
	}
	rc = dlh_spec_parse_flags(text, len, &spec, err, sizeof err, DLH_SPEC_STORED);
	free(text);
	if (rc < 0) {
		fprintf(stderr, "bench-estimate: %s: %s\n", spec_path, err);
		return 1;
	}
	memset(&in, 0, sizeof in);
	in.spec = &spec;
	in.train_n = 60000;
	in.test_n = 10000;
	in.c = 1;
	in.h = in.w = 28;
	in.classes = 10;
	in.ranks = in.nodes = 1;
	in.batch[0] = spec.batch_size;
	if (!(in.dev[0] = dlh_calib_dev(&cal, device))) {
		fprintf(stderr, "bench-estimate: %s: no figures of device type \"%s\"\n", calib_path,
			device);
		return 1;
	}
	if (dlh_estimate_parts(&in, &cal, 0, &p, err, sizeof err) < 0) {
		fprintf(stderr, "bench-estimate: %s\n", err);
		return 1;
	}
	printf("estimate: %s step profile (%s, batch %d, %s; a graph of %ld nodes): %.1f us a step: "
	       "gather %.1f us, loss %.1f us, update %.1f us\n", device, calib_path, spec.batch_size,
	       dlh_spec_precision_name(spec.precision), p.nodes, p.step_s * 1e6, p.input_s * 1e6,
	       p.loss_s * 1e6, p.update_s * 1e6);
	for (int i = 0; i < p.nlayers; i++)
		printf("estimate: layer %d %s: forward %.1f us, backward %.1f us\n", i + 1, p.kind[i],
		       p.fwd_s[i] * 1e6, p.bwd_s[i] * 1e6);
	return 0;
}

int main(int argc, char **argv)
{
	char path[4096], tmp[] = "/tmp/dlh-loo.XXXXXX", tpath[4096], *text = NULL;
	size_t len;

	if (argc == 5 && !strcmp(argv[1], "parts"))
		return parts(argv[2], argv[3], argv[4]);
	if (argc != 3 || strcmp(argv[1], "loo")) {
		fprintf(stderr, "usage: bench-estimate loo STATE\n"
			"       bench-estimate parts CALIBRATION DEVICE SPEC\n");
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
