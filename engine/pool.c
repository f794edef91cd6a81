/* pool.c - the resource pool: nodes, their CPUs, memory and GPUs */
#include "engine/pool.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Reads the first line of /proc/cpuinfo that starts with "model name". */
static void read_cpu_model(char *out, size_t len)
{
	out[0] = '\0';
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (!f)
		return;
	char line[512];
	while (fgets(line, sizeof line, f)) {
		if (strncmp(line, "model name", 10))
			continue;
		char *colon = strchr(line, ':');
		if (!colon)
			break;
		colon++;
		while (*colon == ' ' || *colon == '\t')
			colon++;
		colon[strcspn(colon, "\n")] = '\0';
		snprintf(out, len, "%s", colon);
		break;
	}
	fclose(f);
}

static long long read_mem_total(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	if (!f)
		return 0;
	char line[256];
	long long kb = 0;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "MemTotal: %lld kB", &kb) == 1)
			break;
	fclose(f);
	return kb * 1024;
}

/* Counts the NVIDIA GPUs of this machine: the driver's /dev/nvidiaN
 * device files (N a number; nvidiactl and nvidia-uvm are not GPUs).
 * Returns 0 without the driver. */
static int count_gpus(void)
{
	DIR *d = opendir("/dev");
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, "nvidia", 6) && e->d_name[6] &&
		    strspn(e->d_name + 6, "0123456789") == strlen(e->d_name + 6))
			n++;
	closedir(d);
	return n;
}

int dlh_pool_detect(struct dlh_pool *p, int cpus_override)
{
	memset(p, 0, sizeof *p);
	if (gethostname(p->node.host, sizeof p->node.host - 1))
		snprintf(p->node.host, sizeof p->node.host, "localhost");
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	p->node.cpus = cpus_override > 0 ? cpus_override : n > 0 ? (int)n : 1;
	p->node.mem_bytes = read_mem_total();
	read_cpu_model(p->node.cpu_model, sizeof p->node.cpu_model);
	p->node.gpus = count_gpus();
	return 0;
}
