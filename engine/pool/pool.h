/* pool.h - the resource pool: device types, nodes and their devices, from a
 * pool file (-o pool=FILE) or detected on the local machine
 *
 * The pool file is INI:
 *
 *   [type NAME]      a kind of device; a CPU type is one core
 *   flops = 67T      peak FLOP/s of one device (FP32: what dlh-train computes in)
 *   memory = 80G     memory one device offers a rank
 *   bandwidth = 3.35T  memory bandwidth of one device, bytes/s
 *   watts_idle = 70  power of one device, waiting
 *   watts_busy = 700 power of one device, training
 *   gpu = true       a GPU (default false: a CPU core)
 *   link = nvlink    a GPU type: how a node's GPUs reach each other, nvlink or
 *                    pcie (default); NCCL's allreduce over them is estimated at
 *   link_bandwidth = 250G  this bus bandwidth (default: nvlink 250G, pcie 12G)
 *
 *   [node NAME]      a machine
 *   host = gpu01     where it is reached (default NAME)
 *   cpus = 32        CPU cores = devices of its CPU type (required)
 *   cpu_type = cpu   the type of its cores (default "cpu")
 *   memory = 512G    its memory (default 0 = unknown)
 *   gpus = H100:8    GPUs by type: TYPE:COUNT, ... (TYPE alone = 1)
 *   agent = /usr/bin/ssh -F /etc/dlh/ssh_config
 *                    how the node is reached: a program and its options, split on
 *                    blanks, given the host and a command (default: ssh in BatchMode)
 *
 *   [env]            variables every job's ranks get, on every node
 *   GLOO_SOCKET_IFNAME = eth0     (a job's own [job] env wins)
 *
 * Before any section, how runs are launched:
 *
 *   backend = slurm  local (default: mpirun here, over the agents) or slurm:
 *                    the nodes are Slurm's (sinfo, no [node] section), jobs
 *                    are submitted with sbatch as their owners (run/slurm.c)
 *   partition = gpu  slurm: the partition (default: Slurm's default one)
 *   account = proj1  slurm: the account jobs are charged to (default: the
 *                    user's own)
 *
 * Rates (flops, bandwidth) take K M G T P as powers of 1000; sizes (memory)
 * as powers of 1024; watts are plain numbers. A type's figures default to
 * 0 = unknown, except a CPU type's memory: the smallest share of a node's
 * memory among the nodes with cores of that type. A node may use the type
 * "cpu" without defining it: the built-in defaults below apply.
 *
 * The local node is the node that is this machine: its host is this
 * machine's hostname (or short name), localhost, or one of its addresses
 * (no name is resolved). Where no node is, this machine is a head node
 * outside the pool: the launcher runs here and no rank does (local = -1).
 * Ranks go to any usable node: the others are reached through their agent
 * (mpirun's launch agent; the state dir and the data must be on a
 * filesystem every node shares). */
#ifndef DLH_POOL_H
#define DLH_POOL_H

#include <stddef.h>

#include "engine/plan/planner.h"
#include "schema/spec.h"

#define DLH_HOST_MAX 64
#define DLH_POOL_TYPES DLH_PLANNER_TYPES          /* most device types */
#define DLH_POOL_NODES DLH_PLANNER_NODES          /* most nodes */
#define DLH_POOL_TYPE_NAME DLH_PLANNER_TYPE_NAME  /* bytes of a type name, NUL included */
#define DLH_POOL_FILE_MAX (1024 * 1024)           /* largest pool file read */
#define DLH_POOL_CPU_TYPE "cpu"                   /* the default CPU type's name */

/* Built-in figures of the default "cpu" type (one core), where neither the
 * pool file nor the machine says better: a server core of a ~150 W, 16-core
 * part, idling at about a fifth of that; a core streams about 10 GB/s. */
#define DLH_CPU_WATTS_IDLE 2.0
#define DLH_CPU_WATTS_BUSY 9.0
#define DLH_CPU_BANDWIDTH 10e9
/* A GPU's idle power as a share of its power limit (NVML gives the limit). */
#define DLH_GPU_IDLE_SHARE 0.1

/* This machine, where the launcher runs: the local node, or a head node
 * outside the pool (then its own figures; gpus 0). */
struct dlh_node {
	char host[DLH_HOST_MAX + 1]; /* hostname */
	int cpus;                    /* CPU slots (cores) */
	long long mem_bytes;         /* physical memory, 0 = unknown */
	char cpu_model[128];         /* from /proc/cpuinfo, "" if unknown */
	int gpus;                    /* GPUs, all types together */
};

/* A kind of device. */
struct dlh_pool_type {
	char name[DLH_POOL_TYPE_NAME]; /* "cpu", "H100", ... (letters, digits, . _ -) */
	double flops;                  /* peak FLOP/s of one device, 0 = unknown */
	long long mem_bytes;           /* memory one device offers a rank, 0 = unknown */
	double bandwidth;              /* memory bandwidth of one device, bytes/s, 0 = unknown */
	double watts_idle;             /* power of one device waiting, 0 = unknown */
	double watts_busy;             /* power of one device training, 0 = unknown */
	int gpu;                       /* 1: a GPU; 0: a CPU core */
	char link[8];                  /* a GPU type: "nvlink" or "pcie" (default), how
					  the GPUs of one node reach each other */
	double link_bw;                /* NCCL's allreduce bus bandwidth between them,
					  bytes/s (default by link) */
	double link_alpha;             /* and its latency per ring step, seconds (by link) */
};

/* A machine of the pool. */
struct dlh_pool_node {
	char name[DLH_HOST_MAX + 1];   /* pool/nodes/<name> */
	char host[DLH_HOST_MAX + 1];   /* where it is reached */
	int cpus;                      /* cores */
	long long mem_bytes;           /* memory, 0 = unknown */
	char cpu_model[128];           /* its CPU model (detected or probed), "" = unknown */
	int cpu_type;                  /* type of its cores (index into type[]) */
	int devices[DLH_POOL_TYPES];   /* devices per type; [cpu_type] = cpus */
	int drained;                   /* 1: no new ranks go there (pool/ctl drain) */
	char agent[512];               /* how it is reached ("" = ssh); see the pool file */
	int probe;                     /* enum dlh_probe_state: what its probe found */
	char probe_what[256];          /* up: what it has; down: why */
	double down_since;             /* epoch seconds it was found down (0: it is not) */
	int free_port;                 /* a TCP port free there at its last probe, for a run's
					  rank 0 (taken by the next launch; 0: none) */
	int leaving;                   /* 1: no longer in the pool file, but jobs run there:
					  no new ranks; it goes when they end (dlh_pool_merge) */
	int removed;                   /* 1: gone from the pool (an index is never reused by
					  another node: runs name nodes by index) */
	double link_alpha, link_beta;  /* allreduce with the local node: seconds, seconds
					  per byte (dlh-calib --phase link); 0 = unmeasured */
	char link_why[160];            /* why its link could not be measured ("" = it was) */
	char isolation[200];           /* how its probe said it isolates a run's ranks
					  ("cgroup v2", "cgroup v1", "none: why"; "" =
					  not said yet) */
	char slurm_state[24];          /* a Slurm node: its state as Slurm says it (idle,
					  mixed, allocated, drained, draining, down, ...);
					  "" = not a Slurm node */
};

/* What probing a node found (engine/run/probe.c). */
enum dlh_probe_state {
	DLH_PROBE_NONE = 0,            /* not probed (the local node: detected) */
	DLH_PROBE_RUNNING,             /* being probed */
	DLH_PROBE_UP,                  /* answered, sees the state dir */
	DLH_PROBE_DOWN,                /* cannot be reached or cannot see the state dir */
};

struct dlh_pool {
	struct dlh_node node;                     /* the local node (= nodes[local]) */
	int ntypes;                               /* entries of type[] */
	struct dlh_pool_type type[DLH_POOL_TYPES]; /* in file order, detected: cpu, then GPUs */
	int nnodes;                               /* entries of nodes[] */
	struct dlh_pool_node nodes[DLH_POOL_NODES]; /* in file order */
	char env[DLH_ENV_MAX + 1];                /* [env]: "NAME=VALUE\n" an entry, every
						     job's ranks get (a job's own win) */
	int local;                                /* index of the local node in nodes[];
						     -1: this machine is no node of the pool */
	char source[256];                         /* the pool file, or "detected" */
	char backend[16];                         /* "local" (default) or "slurm" */
	char partition[DLH_HOST_MAX + 1];         /* slurm: its partition, "" = the default */
	char account[DLH_HOST_MAX + 1];           /* slurm: the account, "" = the user's own */
};

#define DLH_BACKEND_SLURM "slurm"

/* 1 when p's nodes and runs are Slurm's (backend = slurm). */
int dlh_pool_is_slurm(const struct dlh_pool *p);

/* 0 when n's probe found no way to isolate a run's ranks there ("none:
 * ..."), else 1 (cgroups found, or nothing said yet: a helper tries). */
int dlh_pool_node_isolates(const struct dlh_pool_node *n);

/* The nodes Slurm lists, as sinfo prints them with DLH_SINFO_FORMAT, one
 * line a node: NAME|CPUS|MEMORY_MB|GRES|STATE|REASON. */
#define DLH_SINFO_FORMAT "%N|%c|%m|%G|%T|%E"

/* next becomes base (its types, env and settings) with the nodes of text
 * (sinfo's lines, DLH_SINFO_FORMAT) instead of base's: each with its cores
 * (type "cpu"), memory and GRES GPUs ("gpu:TYPE:N", a type of that name
 * added where base has none; "gpu:N" the type "gpu"), slurm_state set and
 * host = name. A node listed twice (in two partitions) counts once. The
 * nodes' probe fields are the caller's. Returns 0, or -EINVAL with err
 * naming the line that does not parse (next then holds the lines before). */
int dlh_pool_slurm_parse(const struct dlh_pool *base, const char *text, struct dlh_pool *next,
			 char *err, size_t errlen);

/* 1 when Slurm's state word (sinfo %T, its flags such as '*' included)
 * lets new jobs start on the node: idle, mixed, allocated, completing,
 * planned, reserved, without '*' (not responding) or '~' (powered off). */
int dlh_pool_slurm_usable(const char *state);

/* Where detection looks; tests point it elsewhere. */
struct dlh_pool_probe {
	const char *nvml;            /* NVML library to dlopen; NULL = do not try */
	const char *dev_dir;         /* where /dev/nvidiaN are counted without NVML */
};

/* Detects the local machine: cores (sysconf), memory (/proc/meminfo), CPU
 * model and peak FLOP/s (/proc/cpuinfo), NVIDIA GPUs through NVML loaded at
 * run time, else by counting /dev/nvidiaN. One node, a "cpu" type and a type
 * per GPU model. cpus_override > 0 replaces the core count. Returns 0. */
int dlh_pool_detect(struct dlh_pool *p, int cpus_override);

/* dlh_pool_detect with the NVML library and device directory of probe. */
int dlh_pool_probe(struct dlh_pool *p, const struct dlh_pool_probe *probe, int cpus_override);

/* Loads the pool file at path; the local node is the one that is this
 * machine (dlh_pool_host_is_self), else none (local -1). cpus_override > 0
 * replaces the local node's core count. Returns 0, or -errno with err holding one
 * "PATH:LINE: problem" line per problem (-EINVAL), or why the file cannot
 * be read. */
int dlh_pool_load(struct dlh_pool *p, const char *path, int cpus_override,
		  char *err, size_t errlen);

/* dlh_pool_load of text (len bytes) named fname in messages, with
 * local_host as this machine's hostname. */
int dlh_pool_parse(struct dlh_pool *p, const char *text, size_t len, const char *fname,
		   const char *local_host, int cpus_override, char *err, size_t errlen);

/* Index of the node called name, or -ENOENT. */
int dlh_pool_find_node(const struct dlh_pool *p, const char *name);

/* Index of the type called name, or -ENOENT. */
int dlh_pool_find_type(const struct dlh_pool *p, const char *name);

/* GPUs of node k, all types together. */
int dlh_pool_node_gpus(const struct dlh_pool *p, int k);

/* The type of node k's GPU number i (GPUs numbered in type order), or -ENOENT. */
int dlh_pool_gpu_type(const struct dlh_pool *p, int k, int i);

/* 1 when new ranks may go to node k: in the pool (not removed, not leaving),
 * not drained, and not found down (or still being probed). */
int dlh_pool_node_usable(const struct dlh_pool *p, int k);

/* CPU slots (gpu 0) or GPUs (gpu 1) of every node together, or (usable 1)
 * of the usable nodes. */
int dlh_pool_devices(const struct dlh_pool *p, int gpu, int usable);

/* The planner's view: every type (same indices as p->type) and node (same
 * indices as p->nodes) with the devices not in use: used_cpus[k] CPU slots
 * and used_gpus[k] GPUs of node k are (GPUs taken in type order; NULL =
 * none). A node that is not usable has nothing free. */
void dlh_pool_free_view_nodes(const struct dlh_pool *p, const int *used_cpus, const int *used_gpus,
			      struct dlh_pool_free *f);

/* What dlh_pool_merge did to a node. */
enum dlh_pool_change {
	DLH_NODE_SAME = 0,             /* as it was */
	DLH_NODE_NEW,                  /* added (or back after it was removed): to probe */
	DLH_NODE_CHANGED,              /* its host or agent changed (to probe again) or what
					  it has */
	DLH_NODE_LEAVING,              /* gone from the file; busy[k]: it goes once idle */
	DLH_NODE_REMOVED,              /* gone from the file and from the pool */
};

/* A reload: p becomes next (a pool file read again) without moving a node
 * or a type of p: nodes and types are matched by name; new ones are
 * appended; a node the file no longer has is removed, or leaving while
 * busy[k] (jobs run there); a type it no longer has stays (nodes may have
 * used it). A node's runtime state (its probe, drain, link) stays unless
 * its host or agent changed. next must make the same node this machine's
 * (or none, as p), read with the same -o cpus. p's env becomes next's.
 * change[k] (DLH_POOL_NODES entries) says what happened to node k. Returns
 * 0, or -EINVAL (next moves this machine's node) or -ENOSPC (too many
 * nodes or types over time) with err, p unchanged. */
int dlh_pool_merge(struct dlh_pool *p, const struct dlh_pool *next, const int *busy,
		   enum dlh_pool_change *change, char *err, size_t errlen);

/* Writes a rate the way pool files write it: "67T", "3.35T", "90G", "0". */
void dlh_pool_rate_text(double v, char *out, size_t len);

/* The pool module's own plumbing (pool.c, poolfile.c) and the tests'. */
struct dlh_nvml;

/* Adds the GPUs NVML n reports to node k as devices of one type per model
 * (known models get peak FLOP/s and bandwidth from a table; watts from the
 * power limit). Returns the GPUs added, -ENODEV when NVML does not
 * initialize, or -EIO/-ENOSPC (p then holds part of them). */
int dlh_pool_add_nvml(struct dlh_pool *p, int k, const struct dlh_nvml *n);

/* Makes node k the local node: copies it into p->node with this machine's
 * CPU model and the node's GPU count. */
void dlh_pool_set_local(struct dlh_pool *p, int k);

/* Makes this machine a head node outside the pool (local -1): p->node is
 * this machine as detected (hostname, cores, memory, CPU model). */
void dlh_pool_set_head(struct dlh_pool *p);

/* 1 when host (a pool file's host) names this machine, whose hostname is
 * hostname: that name or its short name, localhost, or a numeric address of
 * one of its interfaces or loopback. Resolves no name. */
int dlh_pool_host_is_self(const char *host, const char *hostname);

/* NCCL's allreduce between the GPUs of one node, where the pool file and no
 * measurement say better: bus bandwidth and latency per ring step by link
 * (nccl-tests' all_reduce_perf on 8 GPUs: NVLink 3/4 parts reach 230-480
 * GB/s at large sizes, less at a model's tens of MB; PCIe 4 x16 about 20) */
#define DLH_NVLINK_BW 250e9
#define DLH_NVLINK_ALPHA 1.5e-6
#define DLH_PCIE_BW 12e9
#define DLH_PCIE_ALPHA 3e-6
/* and between nodes, where no link was measured (dlh-calib --phase link):
 * a 100 Gb/s network */
#define DLH_NET_BW 10e9
#define DLH_NET_ALPHA 25e-6

/* Fills a GPU type's link figures from its link (pcie when none) where the
 * pool file gave none. */
void dlh_pool_link_defaults(struct dlh_pool_type *t);

#define DLH_ENERGY_PACKAGES 8

/* This machine's energy meter: its CPU packages' RAPL counters. */
struct dlh_energy {
	int n;                                 /* packages read */
	double joules[DLH_ENERGY_PACKAGES];    /* each one's counter */
	double range[DLH_ENERGY_PACKAGES];     /* where it wraps (0: unknown) */
};

/* Reads the meter (/sys/class/powercap/intel-rapl:N/energy_uj and
 * max_energy_range_uj, packages only; $DLH_POWERCAP names another tree).
 * Returns 0, or -1 where there is none (a VM, a machine without RAPL). */
int dlh_energy_read(struct dlh_energy *m);

/* Joules the packages counted from start to now, each package's wrap
 * undone (one wrap each: a longer run is undercounted by whole ranges);
 * -1 when the two readings do not match. */
double dlh_energy_since(const struct dlh_energy *start, const struct dlh_energy *now);

/* Fills t with the built-in "cpu" type: bandwidth and watts of the
 * DLH_CPU_* defaults, flops and memory unknown. */
void dlh_pool_default_cpu(struct dlh_pool_type *t);

#endif
