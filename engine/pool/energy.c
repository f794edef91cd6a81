/* energy.c - this machine's energy meter: the CPU packages' RAPL counters
 * (Linux powercap), where the machine has them */
#include "engine/pool/pool.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The number in the file dir/name/file, or -1. */
static double read_number(const char *dir, const char *name, const char *file)
{
	char path[1024], text[64];
	snprintf(path, sizeof path, "%s/%s/%s", dir, name, file);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	double v = fgets(text, sizeof text, f) ? strtod(text, NULL) : -1;
	fclose(f);
	return v;
}

int dlh_energy_read(double *joules, double *range)
{
	const char *dir = getenv("DLH_POWERCAP");   /* tests point it at a tree of their own */
	DIR *d = opendir(dir && dir[0] ? dir : "/sys/class/powercap");
	if (!d)
		return -1;
	struct dirent *de;
	int n = 0;
	*joules = *range = 0;
	while ((de = readdir(d))) {
		/* the packages ("intel-rapl:0"), not their parts ("intel-rapl:0:0") */
		const char *colon = strchr(de->d_name, ':');
		if (strncmp(de->d_name, "intel-rapl:", 11) || !colon || strchr(colon + 1, ':'))
			continue;
		double uj = read_number(dir && dir[0] ? dir : "/sys/class/powercap", de->d_name, "energy_uj");
		double max = read_number(dir && dir[0] ? dir : "/sys/class/powercap", de->d_name,
					 "max_energy_range_uj");
		if (uj < 0)
			continue;
		*joules += uj * 1e-6;
		*range += max > 0 ? max * 1e-6 : 0;
		n++;
	}
	closedir(d);
	return n > 0 ? 0 : -1;
}
