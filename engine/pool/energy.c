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

int dlh_energy_read(struct dlh_energy *m)
{
	const char *env = getenv("DLH_POWERCAP");   /* tests point it at a tree of their own */
	const char *dir = env && env[0] ? env : "/sys/class/powercap";
	char names[DLH_ENERGY_PACKAGES][64];
	DIR *d = opendir(dir);
	if (!d)
		return -1;
	struct dirent *de;
	int n = 0;
	while ((de = readdir(d)) && n < DLH_ENERGY_PACKAGES) {
		/* the packages ("intel-rapl:0"), not their parts ("intel-rapl:0:0") */
		const char *colon = strchr(de->d_name, ':');
		if (strncmp(de->d_name, "intel-rapl:", 11) || !colon || strchr(colon + 1, ':') ||
		    strlen(de->d_name) >= sizeof names[0])
			continue;
		snprintf(names[n++], sizeof names[0], "%s", de->d_name);
	}
	closedir(d);
	/* in name order: the same package at the same place each time */
	qsort(names, (size_t)n, sizeof names[0], (int (*)(const void *, const void *))strcmp);
	m->n = 0;
	for (int i = 0; i < n; i++) {
		double uj = read_number(dir, names[i], "energy_uj");
		double max = read_number(dir, names[i], "max_energy_range_uj");
		if (uj < 0)
			continue;
		m->joules[m->n] = uj * 1e-6;
		m->range[m->n] = max > 0 ? max * 1e-6 : 0;
		m->n++;
	}
	return m->n > 0 ? 0 : -1;
}

double dlh_energy_since(const struct dlh_energy *start, const struct dlh_energy *now)
{
	double used = 0;
	if (start->n != now->n)
		return -1;   /* a package came or went: no figure */
	for (int i = 0; i < now->n; i++) {
		double d = now->joules[i] - start->joules[i];
		if (d < 0 && start->range[i] > 0)   /* this package's counter wrapped (once) */
			d += start->range[i];
		if (d < 0)
			return -1;
		used += d;
	}
	return used;
}
