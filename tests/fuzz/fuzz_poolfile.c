/* fuzz_poolfile.c - libFuzzer target: the pool file parser (-o pool=FILE) */
#include <stdint.h>
#include <stdlib.h>

#include "engine/pool/pool.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct dlh_pool p;
	static char err[8192];

	dlh_pool_parse(&p, (const char *)data, size, "fuzz.ini", "here", 0, err, sizeof err);
	return 0;
}
