/* table.h - private to the engine (table/): struct dlh_engine, the job table and the job records in the state dir
 *
 * The bottom of the engine's job side: table.c calls nothing above it but
 * the record (job.c); jobs/, supervise/ and live/ call down into it. Every
 * function here is called with e->mu held unless it says
 * otherwise.
 *
 * Locking: one mutex (e->mu) guards the job table, the slot count and every
 * job's fields. It is never held while waiting for a run (waiters block in
 * the backend's wait without it) or removing a run's cgroup. No other lock
 * nests inside it. */
#ifndef DLH_ENGINE_TABLE_H
#define DLH_ENGINE_TABLE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "engine/engine.h"
#include "engine/plan/calib.h"
#include "engine/plan/plan.h"
#include "engine/run/backend.h"
#include "engine/run/cgroup.h"

struct dlh_engine {
	pthread_mutex_t mu;          /* guards everything below */
	pthread_cond_t changed;      /* a job changed state or a waiter ended */
	pthread_cond_t timer_cv;     /* wakes the timer thread */
	pthread_t timer;             /* sends SIGKILL when a grace period ends */
	char state[2048];            /* state directory */
	char pool_file[4096];        /* the pool file (-o pool=FILE), read again on reload;
					"" = the pool is this machine, detected */
	int cpus_override;           /* -o cpus=N of the local node; 0 = none */
	struct dlh_tools tools;      /* dlh-train */
	struct dlh_backend backend;  /* how runs are launched (engine/run/backend.h) */
	struct dlh_pool pool;        /* the machines */
	double grace;                /* seconds from SIGTERM to SIGKILL */
	double suspend_grace;        /* seconds from a suspend to a terminate */
	struct dlh_job **jobs;       /* ascending ids */
	size_t njobs, cap;           /* used and allocated entries */
	long next_id;                /* next id to hand out */
	int slots_used;              /* CPU slots held by running jobs, every node */
	int node_used[DLH_POOL_NODES];   /* of which on each node */
	long *holder[DLH_POOL_NODES];    /* per node, holder_len entries: the job holding
					    each slot, 0 = free (slots.c) */
	int holder_len[DLH_POOL_NODES];
	long *gholder[DLH_POOL_NODES];   /* per node, gholder_len entries: the job holding
					    each GPU (numbered in type order), 0 = free */
	int gholder_len[DLH_POOL_NODES];
	int max_queued;              /* most jobs queued at once */
	int max_queued_per_user;     /* most jobs of one uid queued at once; 0 = no limit */
	int ranks_per_user;          /* rank slots one uid's runs may hold while another uid's
					job waits (queue.c); 0 = half the usable slots, < 0 = none */
	long long mem_per_rank;      /* memory limit per local rank of a job whose spec sets
					none, bytes; 0 = none */
	long pids_per_rank;          /* a run's task limit per local rank (+1); 0 = none */
	long long reserve;           /* bytes kept in STATE/.reserve for the daemon's records */
	int reserve_held;            /* the reserve file holds them now */
	int reserve_busy;            /* the timer writes it, e->mu released */
	double disk_at;              /* CLOCK_MONOTONIC time of the next look at the disk */
	unsigned long timer_gen;     /* bumped by whatever releases e->mu inside the timer
					thread's loop (disk.c, the expiry) */
	long long disk_per_job;      /* a job's disk limit when its spec sets none; 0 = none */
	long long disk_max;          /* the largest [resources] disk a spec may ask; 0 = any */
	double expire;               /* ended jobs are purged this long after their end;
					0 = never (the timer thread, supervise.c) */
	int data_timeout_ms;         /* how long a submission's data may take to answer */
	char probe_path[1024];       /* dlh-probe, run on each node (nodes.c); "" = not found */
	char agent_path[1024];       /* dlh-agent: one launch over nodes with different agents;
					"" = not found (such nodes are not combined) */
	pthread_t probe_thread;      /* the mount's probing of the nodes */
	int probe_started;           /* probe_thread is to be joined */
	int probing;                 /* a round of probes is under way */
	int no_probe;                /* -o probe=off: the pool file is taken as it is */
	int slurm_unheard;           /* a Slurm pool whose sinfo has not answered since the
					mount: no node is known; jobs are taken and wait
					(queued) unplanned until it answers (nodes.c) */
	char slurm_why[200];         /* then: sinfo's words */
	double probe_every;          /* seconds between rounds of probes; 0 = none after
					the mount's */
	struct dlh_cgroup_sys cg;    /* how runs are isolated */
	unsigned long launches;      /* runs launched, to name their cgroups */
	int cg_nodes;                /* 1: runs get a cgroup on other nodes too (a root
					daemon, isolation not turned off: nodecg.c) */
	int waiters;                 /* live waiter threads */
	int stopping;                /* dlh_engine_close in progress */
	atomic_int closing;          /* dlh_engine_closing: measurements stop (read
					without e->mu) */
	int lock_fd;                 /* STATE/lock, locked while the engine is open */
	struct dlh_calib cal;        /* the devices' measured speeds; when == 0: none yet */
	struct dlh_correction corr;  /* the estimator's factors, refitted on the history */
	int calibrating;             /* a measurement runs (first mount or recalibrate) */
	int calib_thread_live;       /* calib_thread must be joined */
	pthread_t calib_thread;      /* the first mount's measurement */
	char calib_err[256];         /* why the last measurement failed, "" if it did not */
	char calib_prog[1024];       /* dlh-calib (-o calib), else beside dlh-train */
	char calib_gpu_err[512];     /* why a GPU type was not measured at the last
				        calibration, "" if every one was */
	/* called with e->mu held (not while stopping) when the queue should
	 * look again: a run ended and its slots were freed, nodes came up, a
	 * running job's expected end moved (eta.c). dlh_engine_open sets it
	 * to eng_schedule, so the queue launches and the supervisor
	 * reschedules without supervise.c and queue.c including each other */
	void (*reschedule)(struct dlh_engine *e);
};

#define ENG_PURGED_PREFIX ".purged-"   /* STATE/jobs/.purged-ID: a job being removed */

/* Takes ended job j out of the table and its directory out of the jobs
 * (renamed to STATE/jobs/.purged-ID, whose path goes to gone: the caller
 * removes it with dlh_remove_tree once e->mu is released, a removal being
 * slow); frees j. Its id stays spent. e->mu held. Returns 0, or -EBUSY for
 * a job that has not ended, or -errno of the rename (j kept). */
int eng_purge(struct dlh_engine *e, struct dlh_job *j, char *gone, size_t len);

/* Now, rounded to the millisecond (records store %.3f). Any lock state. */
double eng_stamp(void);

/* STATE/jobs/ID, and a file in it. Any lock state (e->state never changes). */
void eng_job_dir(const struct dlh_engine *e, long id, char *buf, size_t len);
void eng_job_file(const struct dlh_engine *e, long id, const char *name, char *buf, size_t len);

/* What the launcher says of job id's run whose program has not started
 * (the backend's note op: Slurm's pending and why) into out, "" when
 * nothing. Returns 1 when the launcher holds the run pending, else 0.
 * Reads the job's directory only, never asks the launcher: any lock state. */
int eng_run_note(const struct dlh_engine *e, long id, char *out, size_t len);

/* Appends a timestamped harness event to the job's log. */
void eng_job_log(const struct dlh_engine *e, const struct dlh_job *j, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Writes the job's record; a failure is reported on stderr. */
void eng_job_save(const struct dlh_engine *e, const struct dlh_job *j);

/* The job with that id, or NULL. */
struct dlh_job *eng_find(const struct dlh_engine *e, long id);

/* Inserts j (malloc'd; the table owns it on success) keeping ids
 * ascending. Returns 0, or -ENOMEM. */
int eng_insert(struct dlh_engine *e, struct dlh_job *j);

/* Spends id: writes STATE/next_id as id + 1 and hands out ids after it
 * from now on. Once on disk the id is spent, whatever follows. Returns 0,
 * or -errno (nothing spent). */
int eng_spend_id(struct dlh_engine *e, long id);

/* Reads STATE/next_id and loads every job record of STATE/jobs into the
 * table (unreadable ones are skipped with a line on stderr, their ids
 * spent). At open, before any thread. Returns 0, or -errno with err. */
int eng_table_load(struct dlh_engine *e, char *err, size_t errlen);

/* Frees every job of the table and the table. At close or a failed open. */
void eng_table_free(struct dlh_engine *e);

/* The environment every rank of a run gets (engine/contract/contract.h). */
struct eng_env {
	char *v[24 + 2 * DLH_ENV_ENTRIES_MAX];   /* NULL-terminated, into the buffers below */
	char id[64];                 /* DLH_ENV_JOB_ID=... */
	char dir[4200];              /* DLH_ENV_JOB_DIR=... */
	char csv[4200];              /* DLH_ENV_METRICS_CSV=... */
	char ckpt[4200];             /* DLH_ENV_CHECKPOINT_DIR=... */
	char out[4200];              /* DLH_ENV_OUTPUT_DIR=... */
	char ranks[32];              /* DLH_ENV_RANKS=... */
	char master_addr[128];       /* DLH_MASTER_ADDR=... (eng_run_env) */
	char master_port[40];        /* DLH_MASTER_PORT=... */
	char resume[4400];           /* DLH_RESUME_FROM=... (a command run again) */
	char start[48];              /* DLH_START_STEP=... */
	char nodes[DLH_RANKS_MAX * 4 + 32];   /* DLH_RANK_NODES=0,0,1,... (eng_run_env) */
	char gpus[DLH_RANKS_MAX * 5 + 32];    /* DLH_RANK_GPUS=0,1,0,... */
	char global[48];             /* DLH_GLOBAL_BATCH=... (a command given batch_size) */
	char batches[DLH_RANKS_MAX * 8 + 32];   /* DLH_RANK_BATCHES=32,32,16,... */
	char lr[64];                 /* DLH_LR=... (a command given lr) */
	char nodecg[160];            /* DLH_NODECG=... (ranks on other nodes: eng_run_env) */
	char nodecg_nodes[DLH_RANKS_MAX * 4 + 32];   /* DLH_NODECG_NODES=1,2 */
	char job[2 * DLH_ENV_MAX + 2];   /* the pool's [env] and the job's [job] env, entries
					    NUL-ended (eng_run_env) */
};

/* uid's primary group (the password database), or (gid_t)-1 when it lacks
 * uid: the group a job of uid with readable_by = group is shared with. */
gid_t eng_primary_gid(uid_t uid);

/* Keeps job j's directory, its checkpoints and its output from everyone but its owner
 * (who may write there when the daemon is root: engine/run/owner.h), root,
 * and its [job] readable_by readers, on disk as through the mount. Returns
 * 0, or -errno with err. */
int eng_job_protect(const struct dlh_engine *e, const struct dlh_job *j, char *err,
		    size_t errlen);

/* Marks the nodes named in STATE/drained drained (pool/ctl drain). */
void eng_drained_load(struct dlh_engine *e);

/* Writes the drained nodes' names to STATE/drained. Returns 0, or -errno. */
int eng_drained_save(const struct dlh_engine *e);

/* The name of job id's run number seq on other nodes (DLH_NODECG: its
 * group and its helper's socket there): dlhfs-HOST-PID-ID-SEQ. */
void eng_nodecg_name(long id, unsigned seq, char *out, size_t len);

/* Fills env for job j's run of plan, nhosts other hosts than this one:
 * - the contract's variables (names in its directory) and one thread per
 *   rank for the math libraries;
 * - DLH_MASTER_ADDR and DLH_MASTER_PORT (dlh-rank makes them torchrun's):
 *   rank 0's host (127.0.0.1 when every rank runs here; this machine's name
 *   when some run elsewhere; else rank 0's node's host) and a port: one free
 *   here at this moment when rank 0 runs here, else the one rank 0's node
 *   said was free when it was last asked (its probe, the job's nodes' check
 *   before its first run there), else 29500 + id % 500;
 * - DLH_RANK_NODES and, on GPUs, DLH_RANK_GPUS (dlh-rank makes them
 *   NODE_RANK, GROUP_RANK and CUDA_VISIBLE_DEVICES);
 * - DLH_NODECG and DLH_NODECG_NODES when ranks run on other nodes and
 *   dlhfs isolates them there (e->cg_nodes): the run's name on those nodes
 *   (eng_nodecg_name, by j->nodecg_seq) and their node numbers,
 *   as DLH_RANK_NODES numbers them (engine/run/join.h);
 * - a command's batches and rate when its spec gives them: DLH_GLOBAL_BATCH,
 *   DLH_RANK_BATCHES (dlh-rank makes its rank's DLH_BATCH) and DLH_LR;
 * - the pool file's [env] entries the job's [job] env does not name, then
 *   the job's. e->mu held. */
void eng_run_env(const struct dlh_engine *e, const struct dlh_job *j, const struct dlh_plan *plan,
		 int nhosts, struct eng_env *env);

/* Appends kv ("K=V", one of env's own buffers) to env->v. */
void eng_env_add(struct eng_env *env, char *kv);

#endif
