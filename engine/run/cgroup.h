/* cgroup.h - isolating a job's ranks: a cpuset of its CPU slots and a memory limit
 *
 * Detected at run time: cgroup v2 (one unified hierarchy with cpuset and
 * memory) where the host has it, else v1 (separate cpuset and memory
 * hierarchies under /sys/fs/cgroup), else none (jobs run unisolated and
 * their logs say why). The daemon makes one parent group per hierarchy,
 * dlhfs-PID, inside its own cgroup (v1) or at the root (v2), and one group
 * per run below it; the launcher joins the run's first process before exec,
 * so mpirun and every rank are inside. */
#ifndef DLH_CGROUP_H
#define DLH_CGROUP_H

#include <stddef.h>

#define DLH_CG_PATH_MAX 1024
#define DLH_CG_CPUS_MAX 1024   /* CPUs of the host we map slots onto */

enum dlh_cg_mode {
	DLH_CG_NONE = 0,          /* no isolation */
	DLH_CG_V1,                /* legacy hierarchies: cpuset/ and memory/ */
	DLH_CG_V2,                /* the unified hierarchy */
};

/* What the host offers, found by dlh_cgroup_setup. */
struct dlh_cgroup_sys {
	enum dlh_cg_mode mode;              /* how jobs are isolated */
	char cpuset[DLH_CG_PATH_MAX];       /* parent group for cpusets (v2: the only one) */
	char memory[DLH_CG_PATH_MAX];       /* parent group for memory (v2: = cpuset) */
	char pids[DLH_CG_PATH_MAX];         /* parent group for the process limit (v2: =
					       cpuset); "" = no pids controller: none */
	char mems[64];                      /* memory nodes for cpuset.mems */
	int cpu[DLH_CG_CPUS_MAX];           /* the CPUs we may use; slot i runs on cpu[i % ncpu] */
	int ncpu;                           /* entries of cpu */
	char why[256];                      /* mode NONE: the reason, for job logs */
};

/* One run's groups. */
struct dlh_cgroup {
	char cpuset[DLH_CG_PATH_MAX];       /* its cpuset group ("" = none) */
	char memory[DLH_CG_PATH_MAX];       /* its memory group (v2: = cpuset; "" = none) */
	char pids[DLH_CG_PATH_MAX];         /* its pids group (v2: = cpuset; "" = none) */
	long long limit;                    /* memory limit in bytes, 0 = none */
	long pids_max;                      /* most tasks (processes and threads), 0 = none */
};

/* Detects the cgroup version and makes the daemon's parent groups
 * (dlhfs-PID); removes those of dlhfs daemons that are gone. Always
 * succeeds: on any problem s->mode is DLH_CG_NONE and s->why says why. */
void dlh_cgroup_setup(struct dlh_cgroup_sys *s);

/* Removes the parent groups (they must be empty by then). */
void dlh_cgroup_teardown(struct dlh_cgroup_sys *s);

/* Makes the group of one run, `name` below the parents: cpuset.cpus = the
 * CPUs of the nslots slots, the memory limit (0 = none), no swap, and at
 * most pids_max tasks (0 = none; where the host has the pids controller).
 * Returns 0, or -errno with err filled (nothing is left behind). */
int dlh_cgroup_create(const struct dlh_cgroup_sys *s, const char *name, const int *slots,
		      int nslots, long long limit, long pids_max, struct dlh_cgroup *cg, char *err,
		      size_t errlen);

/* Opens the cgroup.procs files a launched child writes its pid to, into
 * fds (up to 3, then -1). Returns 0, or -errno (fds closed). */
int dlh_cgroup_join_fds(const struct dlh_cgroup *cg, int fds[4]);

/* How often a fork or clone in the group failed at its process limit (0
 * when never or unknown). */
long dlh_cgroup_pids_hits(const struct dlh_cgroup *cg);

/* How many processes the kernel's OOM killer killed in the group (0 when
 * unknown). */
int dlh_cgroup_oom_kills(const struct dlh_cgroup *cg);

/* The most memory the group's processes used at once, bytes (v1
 * memory.max_usage_in_bytes, v2 memory.peak); 0 when unknown. */
long long dlh_cgroup_peak(const struct dlh_cgroup *cg);

/* SIGKILLs what is left in the group, waits up to 2 s for it to empty and
 * removes it. */
void dlh_cgroup_destroy(struct dlh_cgroup *cg);

#endif
