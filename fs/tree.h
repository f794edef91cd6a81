/* tree.h - the file tree of the mount: paths to nodes, and what each node is */
#ifndef DLH_FS_TREE_H
#define DLH_FS_TREE_H

#include <sys/stat.h>
#include <sys/types.h>

#include "engine/engine.h"

enum fs_kind {
	FS_ROOT,          /* / */
	FS_README,        /* /README */
	FS_POOL,          /* /pool */
	FS_PROM,          /* /prometheus: for node_exporter's textfile collector */
	FS_PROM_FILE,     /* /prometheus/dlhfs.prom: the text exposition format */
	FS_POOL_SUMMARY,  /* /pool/summary */
	FS_POOL_TYPES,    /* /pool/types: the device-type table */
	FS_POOL_CALIB,    /* /pool/calibration: the measured figures, date first */
	FS_POOL_LIMITS,   /* /pool/limits: the mount's per-user and per-job limits */
	FS_POOL_CTL,      /* /pool/ctl: write "recalibrate" */
	FS_POOL_NODES,    /* /pool/nodes */
	FS_NODE,          /* /pool/nodes/<node> (name = the node) */
	FS_NODE_HOST,     /* .../host: where the node is reached */
	FS_NODE_ROLE,     /* .../role: local (runs launch here) or remote */
	FS_NODE_STATE,    /* .../state: up, drained, or unprobed (a remote node) */
	FS_NODE_CPUS,     /* .../cpus */
	FS_NODE_USED,     /* .../cpus_used */
	FS_NODE_MEMORY,   /* .../memory */
	FS_NODE_MODEL,    /* .../cpu_model */
	FS_NODE_JOBS,     /* .../jobs */
	FS_NODE_GPUS,     /* .../gpus (a directory of GPUs) */
	FS_NODE_GPU,      /* .../gpus/<i> (a directory; id = the GPU) */
	FS_NODE_GPU_MODEL,  /* .../gpus/<i>/model: its device type */
	FS_NODE_GPU_MEMORY, /* .../gpus/<i>/memory: bytes */
	FS_NODE_GPU_STATE,  /* .../gpus/<i>/state: free or busy */
	FS_NODE_GPU_JOB,    /* .../gpus/<i>/job: the holder's id, or "-" */
	FS_NODE_DEVICES,  /* .../devices: one line per device and its holder */
	FS_NODE_ISOLATION,/* .../isolation: how runs are isolated (cgroup v1/v2, none) */
	FS_NODE_CPU_DIR,  /* .../cpu (a directory of slots) */
	FS_NODE_CPU,      /* .../cpu/<i> (a directory; id = the slot) */
	FS_NODE_CPU_JOB,  /* .../cpu/<i>/job: the holder's id, or "-" */
	FS_QUEUE,         /* /queue: the waiting jobs in order, with estimated starts */
	FS_JOBS,          /* /jobs */
	FS_JOBS_NEW,      /* /jobs/new */
	FS_JOBS_ERRORS,   /* /jobs/errors */
	FS_JOBS_INDEX,    /* /jobs/index: every job a line (the history) */
	FS_JOB_LINK,      /* /jobs/<name> -> <id> */
	FS_JOB,           /* /jobs/<id> */
	FS_JOB_SPEC,      /* spec */
	FS_JOB_STATUS,    /* status */
	FS_JOB_PROGRESS,  /* progress */
	FS_JOB_METRICS,   /* metrics */
	FS_JOB_CSV,       /* metrics.csv */
	FS_JOB_PLAN,      /* plan */
	FS_JOB_LOG,       /* log */
	FS_JOB_RESULT,    /* result (once the job has ended) */
	FS_JOB_LRFIND,    /* lr_finder (once lr = auto's range test has written it) */
	FS_JOB_ESTIMATE,  /* estimate (predicted before launch; actual after the run) */
	FS_JOB_CTL,       /* ctl */
	FS_JOB_CKPTS,     /* checkpoints/ */
	FS_JOB_CKPT,      /* checkpoints/<file> */
	FS_JOB_OUTPUT,    /* output/ */
	FS_JOB_OUTFILE,   /* output/<file> */
	FS_JOB_LOGS,      /* logs/ */
	FS_JOB_RANKLOG,   /* logs/<file> (rank.N) */
	FS_JOB_PLOTS,     /* plots/: SVG drawn from metrics.csv (and the estimate) */
	FS_JOB_PLOT_LOSS,       /* plots/loss.svg: train loss raw and smoothed, test loss */
	FS_JOB_PLOT_ACCURACY,   /* plots/accuracy.svg: test accuracy, train accuracy smoothed */
	FS_JOB_PLOT_THROUGHPUT, /* plots/throughput.svg: samples per second */
	FS_JOB_PLOT_PROGRESS,   /* plots/progress.svg: steps against time, and the estimate's */
	FS_JOB_PLOT_EXTRA,      /* plots/NAME.svg: a column a program added to metrics.csv (name) */
	FS_JOB_REPORT,    /* report.html: the plots and the key files on one page */
};

/* How a node's content comes to be. */
enum fs_source {
	FS_DIR,           /* a directory */
	FS_GENERATED,     /* text rendered at open (a snapshot) */
	FS_PASSTHROUGH,   /* a real file in the state directory, read as it grows */
	FS_TRANSACTION,   /* jobs/new: write a spec, read the answer */
	FS_CONTROL,       /* ctl (a job's, the pool's): write verbs */
	FS_SYMLINK,       /* jobs/<name> */
};

struct fs_node {
	enum fs_kind kind;     /* what it is */
	long id;               /* the job, for FS_JOB* kinds; the slot for FS_NODE_CPU*,
				  the GPU for FS_NODE_GPU* */
	char name[256];        /* a checkpoint file, the node for FS_NODE* kinds, the
				  metrics.csv column for FS_JOB_PLOT_EXTRA */
};

/* 1 for a job's private files (spec, metrics, metrics.csv, plan, log,
 * checkpoints and each checkpoint, result, estimate, lr_finder, plots and
 * each plot, report.html): read by
 * its owner, root, and whom its [job] readable_by names; 0 for the rest
 * (status, progress, ctl, the name link are everyone's, as squeue is). */
int fs_private(enum fs_kind k);

/* Maps path to a node. Returns 0, -ENOENT, -ENOTDIR (a file used as a
 * directory in the middle of the path), -ENAMETOOLONG (a name of 256 bytes
 * or more), or -ENOMEM. */
int fs_resolve(struct dlh_engine *e, const char *path, struct fs_node *n);

/* How the node's content is produced. */
enum fs_source fs_source_of(enum fs_kind k);

/* The real file behind a FS_PASSTHROUGH node. */
void fs_real_path(struct dlh_engine *e, const struct fs_node *n, uid_t reader, char *buf,
		  size_t len);

/* Opens n's real file for reading as reader sees it, never through a
 * symbolic link its job's owner put in the job directory, only a regular
 * file, never waiting on it. Returns the descriptor, or -errno (-ENOENT:
 * not written yet; -ELOOP, -EINVAL: a link or not a regular file). */
int fs_real_open(struct dlh_engine *e, const struct fs_node *n, uid_t reader);

/* lstat of n's real file, the same way. Returns 0 for a regular file, or -errno. */
int fs_real_stat(struct dlh_engine *e, const struct fs_node *n, uid_t reader, struct stat *st);

/* Calls fill(ctx, name) for each entry of a directory node. Returns 0, or -errno. */
int fs_list(struct dlh_engine *e, const struct fs_node *n,
	    int (*fill)(void *ctx, const char *name), void *ctx);

#endif
