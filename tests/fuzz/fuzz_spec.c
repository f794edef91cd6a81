/* fuzz_spec.c - libFuzzer target: the spec parser, with the property that a
 * spec it accepts formats to text that parses back to the same spec */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema/spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct dlh_spec a, b;
	static char err[DLH_ERR_MAX], out[2 * DLH_SPEC_MAX], again[2 * DLH_SPEC_MAX];

	/* stored: the data-file checks read the filesystem, not the text */
	if (dlh_spec_parse_flags((const char *)data, size, &a, err, sizeof err, DLH_SPEC_STORED))
		return 0;
	int n = dlh_spec_format(&a, out, sizeof out);
	if (n < 0) {
		fprintf(stderr, "an accepted spec does not format\n");
		abort();
	}
	if (dlh_spec_parse_flags(out, (size_t)n, &b, err, sizeof err, DLH_SPEC_STORED)) {
		fprintf(stderr, "the formatted spec does not parse back:\n%s---\n%s", out, err);
		abort();
	}
	int m = dlh_spec_format(&b, again, sizeof again);
	if (m != n || memcmp(out, again, (size_t)n)) {
		fprintf(stderr, "parse -> format -> parse changed the spec:\n%s---\n%s", out, again);
		abort();
	}
	return 0;
}
