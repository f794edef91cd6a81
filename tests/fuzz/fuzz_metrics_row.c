/* fuzz_metrics_row.c - libFuzzer target: the metrics.csv row parser, with
 * the property that a row it accepts formats to a row that parses back to
 * the same kind, step, epoch and extra columns; and the header parser,
 * whose names are all usable as file names */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/contract/contract.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dlh_metrics_row r, back;
	struct dlh_metrics_columns c;
	char line[DLH_METRICS_LINE_MAX];

	if (!dlh_metrics_header_parse((const char *)data, size, &c))
		for (int i = 0; i < c.nextra; i++)
			if (!c.extra[i][0] || strchr(c.extra[i], '/') || c.extra[i][0] == '.' ||
			    strchr(c.extra[i], ','))
				abort();

	if (dlh_metrics_row_parse((const char *)data, size, &r))
		return 0;
	int n = dlh_metrics_row_format(&r, line, sizeof line);
	if (n < 0)
		return 0;   /* numbers too long for a row dlh-train would write: refused, not cut */
	if (dlh_metrics_row_parse(line, (size_t)n, &back) || back.kind != r.kind ||
	    back.step != r.step || back.epoch != r.epoch || back.nextra != r.nextra) {
		fprintf(stderr, "a row did not survive format -> parse: %s", line);
		abort();
	}
	return 0;
}
