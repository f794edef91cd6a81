/* engine.h - jobs, the queue, launching and supervising runs: the daemon's core
 *
 * Every function here is callable from plain C without a mount: fs/ is one
 * client, the unit tests are another. All functions are thread-safe. */
#ifndef DLH_ENGINE_H
#define DLH_ENGINE_H

#include <stddef.h>
#include <sys/types.h>

#include "engine/contract/contract.h"
#include "engine/table/job.h"
#include "engine/util/util.h"
#include "engine/pool/pool.h"

#define DLH_STATE_DEFAULT "/var/lib/dlh"
#define DLH_KILL_GRACE 3.0     /* seconds from SIGTERM to SIGKILL on cancel */
#define DLH_ERRORS_KEEP 200    /* rejection lines kept in state/errors */
#define DLH_ERRORS_DIR "errors.d"   /* in the state dir: each user's own rejections */
#define DLH_SUSPEND_GRACE 30.0 /* seconds from a suspend request to SIGTERM */
#define DLH_MAX_QUEUED 1000    /* default most jobs queued at once */
#define DLH_PROBE_EVERY 60.0   /* default seconds between probes of the pool's nodes */
#define DLH_MAX_QUEUED_PER_USER 100   /* default most jobs of one user queued at once */
#define DLH_PIDS_PER_RANK 512  /* default tasks (processes, threads) a job may have per
				  local rank, plus one rank's worth for its launcher */
#define DLH_DATA_TIMEOUT 5.0   /* seconds a submission's data may take to answer */

struct dlh_engine;

struct dlh_engine_opts {
	const char *state_dir;  /* where jobs live; created if missing */
	const char *trainer;    /* dlh-train; NULL = beside the running program */
	const char *calib;      /* dlh-calib, the calibration's microbenchmarks; NULL =
				   beside the trainer */
	const char *launcher;   /* the local backend's MPI launcher (the mount's launcher option); NULL = found
				   on PATH (engine/run/local.c) */
	const char *shepherd;   /* dlh-shepherd, which holds each run (engine/run/backend.h);
				   NULL = beside this program, else beside the trainer;
				   "" = none: runs end with the engine (tests of the engine alone) */
	const char *pool_file;  /* the pool file (engine/pool/pool.h); NULL = detect this machine */
	int cpus;               /* CPU slots; 0 = the online cores */
	double kill_grace;      /* seconds; 0 = DLH_KILL_GRACE */
	double suspend_grace;   /* seconds; 0 = DLH_SUSPEND_GRACE */
	int max_queued;         /* most jobs queued at once; 0 = DLH_MAX_QUEUED */
	int max_queued_per_user; /* most jobs of one user queued at once; 0 =
				   DLH_MAX_QUEUED_PER_USER, < 0 = no limit */
	int ranks_per_user;     /* rank slots one user's running jobs may hold while another
				   user's job waits (their queued jobs wait meanwhile); 0 =
				   half the pool's slots, < 0 = no limit */
	long long mem_per_rank; /* memory a rank of a job whose spec says none may use,
				   bytes; 0 = this machine's memory over its cores, < 0 =
				   no limit */
	long pids_per_rank;     /* tasks a job may have per local rank (+1 rank's worth
				   for its launcher); 0 = DLH_PIDS_PER_RANK, < 0 = none */
	double data_timeout;    /* seconds a submission's data may take to answer; 0 =
				   DLH_DATA_TIMEOUT */
	int no_isolation;       /* 1: no cgroups (cpusets, memory limits) for runs */
	double probe_every;     /* seconds between probes of the other nodes after the
				   mount's; 0 = DLH_PROBE_EVERY, < 0 = never again */
	int no_probe;           /* 1: never probe the pool's other nodes (they show
				   unprobed and count as the pool file says) */
	int no_calibrate;       /* 1: never measure the devices (jobs without a cached
				   calibration run unestimated); for tests */
	long long reserve;      /* bytes the state dir keeps for the daemon's own records
				   (STATE/.reserve, given up when a job fills the disk);
				   0 = ENG_RESERVE_DEFAULT (at most 5% of the filesystem),
				   < 0 = none */
	long long disk_per_job; /* disk limit of a job whose spec sets no [resources] disk,
				   bytes; 0 = none */
	long long disk_max;     /* the largest [resources] disk allowed; 0 = any */
	double expire;          /* seconds after its end an ended job is purged (its
				   files removed, as ctl `purge`); 0 = kept for ever */
};

/* One waiting job of the queue, in queue order (see dlh_engine_queue). */
struct dlh_queue_entry {
	long id;                /* the job */
	int priority;           /* its priority */
	int cpus;               /* CPU slots it needs */
	double submitted;       /* epoch seconds */
	double time_limit;      /* seconds, its [job] time_limit; 0 = none */
	double duration;        /* the run time the scheduler plans it with: its time_limit,
				   else its estimate with a margin; INFINITY = unknown */
	double est_start;       /* estimated start, epoch seconds; INFINITY = unknown */
	char name[DLH_NAME_MAX + 1]; /* [job] name, "" if none */
};

/* A job whose run its launcher holds pending in a queue of its own
 * (Slurm's), for the queue file (see dlh_engine_launcher_queue). */
struct dlh_launcher_wait {
	struct dlh_queue_entry q;   /* as a queued job's; est_start: when dlhfs planned it
				       to start (it submitted it then: the pool, as dlhfs
				       sees it, had room) */
	long job;                   /* the launcher's id of it (Slurm's job id) */
	double start;               /* the launcher's estimated start, epoch s; INFINITY =
				       none yet */
	long priority;              /* its priority there, -1 = not known */
	char reason[64];            /* why it waits there, "" = not said */
};

/* What the pool is doing right now. */
struct dlh_usage {
	int slots_used;         /* CPU slots held by running jobs */
	int node_cpus[DLH_POOL_NODES];   /* of which on each node */
	int node_gpus[DLH_POOL_NODES];   /* GPUs held on each node (a GPU job's ranks) */
	int running;            /* running jobs */
	int queued;             /* queued jobs */
	int suspended;          /* suspended jobs */
};

/* Checks o without starting anything: the tools exist and the state
 * directory can be created and written. Returns 0, or -errno with err filled. */
int dlh_engine_check(const struct dlh_engine_opts *o, char *err, size_t errlen);

/* Opens the state directory, loads every job in it, requeues jobs that were
 * running when a previous daemon stopped, and starts the supervisor.
 * Returns 0 with *out set, or -errno with err filled. */
int dlh_engine_open(struct dlh_engine **out, const struct dlh_engine_opts *o,
		    char *err, size_t errlen);

/* Says the engine is about to close: a calibration or a link measurement
 * under way stops (its run killed) rather than run to its end, and nothing
 * waits for one any longer. Async-signal-safe (one atomic store): a SIGTERM
 * handler calls it. dlh_engine_close does too. */
void dlh_engine_closing(struct dlh_engine *e);

/* Stops running jobs (they are requeued and resume from their newest
 * checkpoint on the next open), waits for them, and frees the engine. */
void dlh_engine_close(struct dlh_engine *e);

/* Validates spec text and creates a job (queued, or running at once when
 * the pool has room). Returns 0 with *id set, or -EINVAL/-EFBIG with err
 * holding the reasons (`spec:LINE: ...` lines), or -EAGAIN when max_queued
 * jobs are queued already; a rejection is also appended to the errors log
 * with time and uid. */
int dlh_engine_submit(struct dlh_engine *e, const char *text, size_t len,
		      uid_t uid, long *id, char *err, size_t errlen);

/* Records a rejection that never reached dlh_engine_submit (a spec too
 * large to buffer): each line of err goes to the errors log. */
void dlh_engine_reject(struct dlh_engine *e, uid_t uid, const char *err);

/* Applies one ctl line ("cancel", "suspend", "resume", "checkpoint",
 * "priority N", "purge") to job id:
 *   cancel      queued, suspended: cancelled now; running: SIGTERM, then cancelled
 *   suspend     running: SIGUSR2 to the run (checkpoint, exit DLH_EXIT_SUSPENDED),
 *               then suspended, its devices free; queued: suspended (held) now
 *   resume      suspended: queued again; the run restarts from its newest checkpoint
 *   checkpoint  running: SIGUSR1 to the run (a checkpoint at the next step)
 *   priority N  any state but an ended one: N in DLH_PRIORITY_MIN..MAX; only
 *               root and the mounting user may raise it (-EPERM)
 *   purge       ended (succeeded, failed, cancelled, a dry run): the job and
 *               all its files are removed; its id is never used again
 * Returns 0, -ENOENT (no such job), -EINVAL (unknown verb or bad argument),
 * -EBUSY (the verb does not apply in the job's state; nothing changes),
 * -EPERM (not the owner); err says why and the job's log gets the same line. */
int dlh_engine_ctl(struct dlh_engine *e, long id, uid_t uid, const char *line,
		   char *err, size_t errlen);

/* Applies one line of pool/ctl: "recalibrate" measures the devices again
 * (blocking: seconds). Root and the user the daemon runs as (who mounted)
 * may. Returns 0, -EINVAL (unknown verb), -EPERM, -EBUSY (a measurement
 * runs), or -errno; err says why. */
int dlh_engine_pool_ctl(struct dlh_engine *e, uid_t uid, const char *line, char *err,
			size_t errlen);

/* Whether uid (with groups, ngroups of them) may read job id's files: its
 * spec, plan, log, metrics, checkpoints, result. Its owner and root may;
 * others as its [job] readable_by says (group: members of the owner's
 * primary group; all). Returns 0, -EACCES, or -ENOENT. */
int dlh_engine_may_read(struct dlh_engine *e, long id, uid_t uid, const gid_t *groups,
			int ngroups);

/* Copies job id into *out. Returns 0, or -ENOENT. */
int dlh_engine_job(struct dlh_engine *e, long id, struct dlh_job *out);

/* What a lookup, a stat or its status file needs of a job: a few fields,
 * not the whole job (dlh_engine_job copies some 18 KB). */
struct dlh_job_brief {
	uid_t uid;                   /* its owner */
	enum dlh_status status;
	double submitted;            /* epoch seconds */
	enum dlh_share readable_by;  /* its [job] readable_by */
};

/* Fills *out from job id. Returns 0, or -ENOENT. */
int dlh_engine_job_brief(struct dlh_engine *e, long id, struct dlh_job_brief *out);

/* Writes up to max job ids, ascending, into ids. Returns how many jobs exist. */
size_t dlh_engine_jobs(struct dlh_engine *e, long *ids, size_t max);

/* Every job's id, ascending, in an array the caller frees; *n how many.
 * Returns NULL when out of memory. */
long *dlh_engine_job_ids(struct dlh_engine *e, size_t *n);

/* The id of the newest job named name, or -ENOENT. */
long dlh_engine_find_name(struct dlh_engine *e, const char *name);

/* The job's state directory (STATE/jobs/ID). */
void dlh_engine_job_dir(struct dlh_engine *e, long id, char *buf, size_t len);

/* What the launcher says of job id's run that has not started its program
 * yet (Slurm: "pending in Slurm (job N): Resources") into out, "" when
 * nothing. Reads the job dir only. Returns 1 when the launcher holds the
 * run waiting to start (its status file says "pending"), else 0. */
int dlh_engine_run_note(struct dlh_engine *e, long id, char *out, size_t len);

/* The file of recent rejections that reader may see: everyone's
 * (STATE/errors) for root and the user the daemon runs as, else reader's
 * own (STATE/errors.d/UID; it may not exist yet: none so far). */
void dlh_engine_errors_path(struct dlh_engine *e, uid_t reader, char *buf, size_t len);

/* The pool and its current use. */
void dlh_engine_pool(struct dlh_engine *e, struct dlh_pool *pool, struct dlh_usage *use);

/* Ids of the running jobs (up to max) and their ranks, for pool views.
 * Returns how many are running. */
size_t dlh_engine_running(struct dlh_engine *e, long *ids, int *ranks, size_t max);

/* The waiting jobs in queue order (priority, then submission) with the
 * scheduler's estimated starts: up to max into out. Returns how many wait. */
size_t dlh_engine_queue(struct dlh_engine *e, struct dlh_queue_entry *out, size_t max);

/* The jobs whose runs the launcher holds pending (Slurm), in its order:
 * by its estimated start (unknown last), then its priority (higher first),
 * then its id; as the launcher last said while dlhfs watched each run
 * (never asks it: e->mu is held only to list the jobs). Returns the count
 * with *out malloc'd (the caller frees it; NULL when 0), or -ENOMEM. */
long dlh_engine_launcher_queue(struct dlh_engine *e, struct dlh_launcher_wait **out);

/* The holder of each CPU slot of node k: up to max job ids into out, 0
 * for a free slot. Returns the number of slots. */
int dlh_engine_holders(struct dlh_engine *e, int k, long *out, int max);

/* The same for node k's GPUs (numbered in type order). */
int dlh_engine_gpu_holders(struct dlh_engine *e, int k, long *out, int max);

/* How the ranks of runs on node k are isolated: "cgroup v1", "cgroup v2"
 * or "none: WHY" (another node: as its probe found, when dlhfs makes
 * groups there). */
void dlh_engine_isolation(struct dlh_engine *e, int k, char *buf, size_t len);

/* The mount's limits, a `key value` line each (pool/limits): max_queued,
 * max_queued_per_user, mem_per_rank, pids_per_rank, expire ("none" where
 * there is none). Returns 0, or -ENOMEM. */
int dlh_engine_limits(struct dlh_engine *e, struct dlh_buf *out);

/* Measures the devices of o's pool without mounting (dlhfs --calibrate):
 * writes STATE/calibration and appends its text to out. Refused (-EBUSY)
 * while a daemon holds the state dir. Returns 0, or -errno with err. */
int dlh_engine_calibrate(const struct dlh_engine_opts *o, struct dlh_buf *out,
			 char *err, size_t errlen);

/* Reruns the calibration microbenchmarks (seconds; blocking) and caches the
 * result in the state dir; later submissions are estimated with it.
 * Returns 0, -EBUSY (one runs already), or -errno with err saying why. */
int dlh_engine_recalibrate(struct dlh_engine *e, char *err, size_t errlen);

/* Appends the text of the cached calibration (date first), or one line
 * saying it is being measured or why it is not. Returns 0, or -ENOMEM. */
int dlh_engine_calibration(struct dlh_engine *e, struct dlh_buf *out);

/* Blocks until job id is in a terminal state or timeout seconds pass.
 * Returns 0 when terminal, -ETIMEDOUT, or -ENOENT. For tests and tools. */
int dlh_engine_wait(struct dlh_engine *e, long id, double timeout);

#endif
