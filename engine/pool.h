/* pool.h - the resource pool: nodes, their CPUs, memory and GPUs */
#ifndef DLH_POOL_H
#define DLH_POOL_H

#define DLH_HOST_MAX 64

/* One node of the pool. Today the pool is the local machine. */
struct dlh_node {
	char host[DLH_HOST_MAX + 1]; /* hostname */
	int cpus;                    /* CPU slots (online cores) */
	long long mem_bytes;         /* physical memory */
	char cpu_model[128];         /* from /proc/cpuinfo, "" if unknown */
	int gpus;                    /* NVIDIA GPUs (/dev/nvidiaN); 0 without the driver */
};

struct dlh_pool {
	struct dlh_node node;        /* the only node for now */
};

/* Detects the local machine from sysconf, /proc/meminfo and /proc/cpuinfo.
 * cpus_override > 0 replaces the detected slot count. Returns 0, or -errno. */
int dlh_pool_detect(struct dlh_pool *p, int cpus_override);

#endif
