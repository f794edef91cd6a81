/* backend.h - the launch seam: how a planned run is started on its ranks,
 * signalled, watched, and found again after the daemon restarts
 *
 * The engine decides what runs (the program each rank runs, its ranks, its
 * environment); a backend decides how: mpirun here and over ssh (local.c),
 * or a Slurm job submitted with sbatch as the job's owner (slurm.c). Nothing outside engine/run/ names the launcher,
 * or signals or waits for a run's processes: the engine holds a struct
 * dlh_run and calls these functions.
 *
 * A backend writes what it needs to find a run again (its ids, host, start
 * times) into the job's directory, DLH_RUN_HANDLE_FILE, when the run starts,
 * and removes it once the run has ended; dlh_run_load reads it back. A run
 * outlives the daemon: the local backend starts it under dlh-shepherd
 * (shepherd.c), which waits for the launcher and writes how it ended to
 * DLH_RUN_EXIT_FILE, so a daemon mounted again finds the run going on (or
 * how it ended) and takes it back. */
#ifndef DLH_BACKEND_H
#define DLH_BACKEND_H

#include <stdatomic.h>
#include <stddef.h>
#include <sys/types.h>

#include "engine/run/owner.h"
#include "engine/util/util.h"

#define DLH_RUN_HANDLE_FILE "run.handle"   /* in the job dir, while a run lives */
#define DLH_RUN_EXIT_FILE "run.exit"       /* in the job dir: how the run ended
					      (dlh-shepherd writes it) */
#define DLH_RUN_HOSTFILE "hostfile"    /* in the job dir: mpirun's hosts of a run on
					      several nodes */
#define DLH_RUN_AGENTS "agents"        /* in the job dir: each node's agent, for dlh-agent,
					   where a run's nodes have different ones */
#define DLH_RUN_HOST_MAX 64
#define DLH_AGENT_DEFAULT "ssh -o BatchMode=yes -o ConnectTimeout=5"   /* how other
					      nodes are reached unless the pool says */
#define DLH_LAUNCH_ARGV_MAX 200            /* launcher and program argv entries */
#define DLH_ARGV_STORE (20 * 1024)         /* bytes behind them */

/* What the engine asks of a run (engine/contract/contract.h says what the
 * program does on each). */
enum dlh_verb {
	DLH_VERB_CHECKPOINT = 0,  /* checkpoint at the next step, keep going */
	DLH_VERB_SUSPEND,         /* checkpoint at the next step, then exit DLH_EXIT_SUSPENDED */
	DLH_VERB_TERMINATE,       /* stop now (SIGTERM to every process of the run) */
	DLH_VERB_KILL,            /* stop at once (SIGKILL to every process of the run) */
};

enum dlh_run_state {
	DLH_RUN_RUNNING = 0,      /* its processes are there */
	DLH_RUN_EXITED,           /* it ended; exit_code says how */
	DLH_RUN_LOST,             /* nothing of it is left and nobody saw how it ended */
};

/* A started run, as its backend recorded it (also in DLH_RUN_HANDLE_FILE). */
struct dlh_run {
	char backend[16];             /* the backend's name, "" = no run */
	pid_t pid;                    /* local: dlh-shepherd (or the launcher without
				         one), leader of the run's session */
	unsigned long long pid_start; /* its start time (clock ticks since boot), to know it again */
	char host[DLH_RUN_HOST_MAX + 1]; /* where the launcher runs */
	double started;               /* epoch seconds */
};

/* Who ended a run, where the launcher says it was not the run itself nor
 * the engine (a verb). */
enum dlh_end_cause {
	DLH_END_OWN = 0,              /* the run ended by itself, or as the engine asked */
	DLH_END_TIME_LIMIT,           /* the launcher's time limit (be->keeps_limit): the
					 run stopped at a checkpoint on DLH_SIG_LIMIT before
					 it, or was stopped at it */
	DLH_END_PREEMPTED,            /* the launcher stopped it for another job */
	DLH_END_NODE_FAIL,            /* the launcher lost the run's nodes */
};

/* How a run ended. */
struct dlh_run_end {
	enum dlh_run_state state;     /* DLH_RUN_EXITED or DLH_RUN_LOST */
	enum dlh_end_cause cause;     /* who ended it */
	char said[192];               /* the launcher's words on the cause, a phrase for the
					 job's reason ("Slurm's time limit of job 7
					 (00:01:00)"); "" = none */
	int exit_code;                /* exited: >= 0 its status, < 0 minus the signal */
	int leftover;                 /* processes of the run still there after, killed */
	int holder_died;              /* the run's holder (dlh-shepherd) died without saying
					 how the launcher ended: exit_code is the holder's */
	double ended_at;              /* when the launcher ended, epoch s, as its holder
					 recorded it (a run that ended while dlhfs was away);
					 0 = now */
	double cpu_s;                 /* CPU seconds of the launcher and the processes it
					 reaped on its node; -1 = unknown */
	long long max_rss;            /* the largest resident set among them, bytes; 0 =
					 unknown */
};

/* One node of a run: its ranks are consecutive, in the order of hosts. */
struct dlh_launch_host {
	char host[DLH_RUN_HOST_MAX + 1];  /* where: this machine's hostname for the
					     local node, else as the agent reaches it */
	int ranks;                        /* ranks there */
};

/* What to start. */
struct dlh_launch {
	char *const *argv;            /* what every rank runs (absolute program path first),
				         NULL-terminated */
	int ranks;                    /* ranks to start */
	char *const *env;             /* "K=V" for every rank beyond the daemon's own,
				         NULL-terminated; NULL = none */
	const char *job_dir;          /* where the handle is written */
	const char *log_path;         /* every rank's output, appended */
	const int *join;              /* cgroup.procs descriptors the run joins, -1-terminated;
				         NULL = none */
	const struct dlh_cred *cred;  /* run every process as this user (engine/run/owner.h);
				         NULL = as the daemon */
	const struct dlh_launch_host *hosts;   /* the nodes, in rank order; NULL (or
				         nhosts 0) = every rank on this machine */
	int nhosts;
	const char *agent;            /* how the other nodes are reached: a program and
				         its options, split on blanks (mpirun's launch
				         agent); NULL or "" = DLH_AGENT_DEFAULT */
	const char *ready_path;       /* the file the program creates once every rank takes
				         the verbs' signals (DLH_FILE_READY); verbs sent
				         before are held until then. NULL = the program
				         takes them from its start */
	double est_s;                 /* the estimate of its run time, seconds; 0 = none
				         (a scheduler's time limit is made from it) */
	double time_limit;            /* the spec's time_limit, seconds; 0 = none */
	int grace;                    /* seconds a run needs to checkpoint and stop */
	long long memory;             /* memory of all ranks together, bytes; 0 = not said */
	int gpu;                      /* 1: each rank takes a GPU of its node (a scheduler
					 is asked for them: Slurm's --gres) */
	const char *gpu_type;         /* their type as the pool names it (Slurm: the GRES
					 type, gpu:TYPE:N); NULL or "" = any */
	int take_up;                  /* 1: the program is told where to take up
					 (DLH_RESUME_FROM: a [job] command); a run the
					 launcher starts again by itself (Slurm's requeue)
					 takes up from its newest checkpoint so */
};

/* A run its launcher holds pending in a queue of its own (Slurm's), as
 * the launcher last said (dlh_backend_ops.pending). */
struct dlh_run_pending {
	long job;                     /* the launcher's id of it (Slurm's job id) */
	double start;                 /* the launcher's estimated start, epoch s;
					 INFINITY = it has none yet */
	long priority;                /* its priority there (Slurm's), -1 = not known */
	char reason[128];             /* why it waits (Slurm's reason), "" = not said */
};

struct dlh_backend;

struct dlh_backend_ops {
	/* The launcher's argv for l (the launcher, its options, then l->argv),
	 * into out (max entries, NULL-terminated) backed by store. Returns the
	 * entries used, or -E2BIG. */
	int (*argv)(const struct dlh_backend *be, const struct dlh_launch *l, char **out,
		    size_t max, char *store, size_t storelen);
	/* Starts l; fills *run and writes the handle. Returns 0, or -errno with
	 * err saying what failed (nothing is left running then). */
	int (*start)(const struct dlh_backend *be, const struct dlh_launch *l, struct dlh_run *run,
		     char *err, size_t errlen);
	/* Asks the run for verb v. Returns the processes signalled (0: none
	 * left), or -errno. Never blocks. */
	int (*signal)(const struct dlh_backend *be, const struct dlh_run *run, enum dlh_verb v);
	/* Learns whether a run has ended, one started by this process or one
	 * found after a restart (state() not DLH_RUN_LOST): blocks until it has
	 * (block 1) or looks once (block 0). When it has ended, stops what is
	 * left of it, removes the handle and fills *end. Returns 0 (ended),
	 * -EAGAIN (block 0: still running), -ESHUTDOWN (be->leaving is set and
	 * the launcher does not answer: the run is left as it is, its handle
	 * kept for the next mount), or -errno. */
	int (*wait)(const struct dlh_backend *be, const struct dlh_run *run, const char *job_dir,
		    int block, struct dlh_run_end *end);
	/* A run found in job_dir (dlh_run_load) after a restart: RUNNING (it
	 * goes on: wait() for it), EXITED (it ended while nobody watched, and
	 * how is known: wait() says), or LOST. Never blocks. */
	enum dlh_run_state (*state)(const struct dlh_backend *be, const struct dlh_run *run,
				    const char *job_dir);
	/* Stops what is left of a run found after a restart (TERMINATE, then
	 * KILL after grace seconds) and removes its handle; blocks up to grace.
	 * Returns the processes that had to be killed. */
	int (*stop)(const struct dlh_backend *be, const struct dlh_run *run, const char *job_dir,
		    double grace);
	/* Which rank of a failed run failed first, from the run's output (its
	 * part of the job's log) as the launcher reports it; *code gets its exit
	 * status (< 0: minus the signal; 0: not said). Returns the rank, or -1. */
	int (*failed_rank)(const struct dlh_backend *be, const char *log, int *code);
	/* Appends how l would be launched, for jobs/<id>/plan: "launcher ..."
	 * and "env ..." lines and the exact "argv ..." line. Returns 0, or -errno. */
	int (*describe)(const struct dlh_backend *be, const struct dlh_launch *l,
			struct dlh_buf *out);
	/* What the launcher says of a run of job_dir whose program has not
	 * started yet (Slurm: the job is pending, and why), as one line into
	 * out; "" when it says nothing. Reads only the job dir (never asks
	 * the launcher: a reader of progress must not wait). Returns 1 when
	 * the launcher holds the run waiting to start (the line then begins
	 * "pending"), else 0. NULL = never. */
	int (*note)(const struct dlh_backend *be, const char *job_dir, char *out, size_t len);
	/* The same run's place in the launcher's queue into *p: its id, its
	 * estimated start and priority as the launcher last said them while
	 * wait() watched it (Slurm: squeue --start). Reads only the job dir.
	 * Returns 1 when the launcher holds the run pending, else 0. NULL =
	 * never. */
	int (*pending)(const struct dlh_backend *be, const char *job_dir, struct dlh_run_pending *p);
	/* The run's priority became prio (DLH_PRIORITY_MIN..MAX, higher
	 * first): the launcher's own queue is told (Slurm: nice -prio), as
	 * cred (NULL: as the daemon). Blocks while the launcher answers (the
	 * engine calls it without e->mu).
	 * Returns 0, or -errno with err (the launcher's words). NULL = the
	 * launcher has no queue of its own. */
	int (*priority)(const struct dlh_backend *be, const struct dlh_run *run, int prio,
			const struct dlh_cred *cred, char *err, size_t errlen);
};

struct dlh_backend {
	const char *name;                  /* "local" */
	const char *launcher_name;         /* what the log calls the launcher */
	const struct dlh_backend_ops *ops; /* its functions */
	char launcher[1024];               /* the program that starts the ranks (absolute) */
	char shepherd[1024];               /* dlh-shepherd, which holds each run (absolute);
					      "" = runs are the daemon's children and end
					      with it */
	char partition[65];                /* slurm: the partition, "" = Slurm's default */
	char account[65];                  /* slurm: the account, "" = the user's own */
	char bin[512];                     /* slurm: the directory of sbatch, squeue, ... */
	int keeps_limit;                   /* 1: the launcher keeps a run's time limit itself
					      (from est_s and time_limit) and signals
					      DLH_SIG_LIMIT to its holder before it: the engine
					      arms no timer of its own (Slurm's pending time
					      does not count) */
	atomic_int leaving;                /* set by the engine as it stops: a wait() whose
					      launcher does not answer gives up (-ESHUTDOWN) */
};

/* The local backend (local.c): the MPI launcher at path (NULL: "mpirun"
 * found on PATH) on this machine, its ranks here or, by a hostfile, on the
 * run's nodes reached through their agent (ssh). Returns 0, or -errno with
 * err saying what is missing. */
int dlh_backend_local(struct dlh_backend *be, const char *path, char *err, size_t errlen);

/* The Slurm backend (slurm.c): each run a Slurm job that sbatch submits
 * as the run's owner, its batch script exec'ing dlh-shepherd (be->shepherd,
 * set by the caller) on the job's first node, which runs mpirun (at path;
 * NULL: found on PATH) over the allocation. partition and account may be
 * "". Returns 0, or -errno with err saying what is missing (sbatch). */
int dlh_backend_slurm(struct dlh_backend *be, const char *path, const char *partition,
		      const char *account, char *err, size_t errlen);

/* Slurm's nodes of partition ("" = every one) as sinfo lists them
 * (DLH_SINFO_FORMAT of engine/pool/pool.h, a line a node) into out.
 * Returns 0, or -errno with err (sinfo's own words where it said some). */
int dlh_slurm_sinfo(const char *partition, const char *format, struct dlh_buf *out, char *err,
		    size_t errlen);

/* Parses squeue --start's "ID|START|PRIORITY" lines (text) for Slurm job
 * id: its estimated start (epoch s; INFINITY: N/A, Unknown) into *start,
 * its priority (-1: not a number) into *prio. Returns 0, -ENOENT when no
 * line is the job's (it no longer waits), or -EINVAL (its line is cut). */
int dlh_slurm_parse_start(const char *text, long id, double *start, long *prio);

/* Which rank failed first by Open MPI's words in log (both backends run
 * mpirun): see dlh_backend_ops.failed_rank. */
int dlh_mpirun_failed_rank(const char *log, int *code);

/* Reads DLH_RUN_HANDLE_FILE of job_dir into *run. Returns 0, -ENOENT when
 * there is none (no run lives), or -EINVAL when it does not parse. */
int dlh_run_load(const char *job_dir, struct dlh_run *run);

/* Writes *run to DLH_RUN_HANDLE_FILE of job_dir atomically. Returns 0, or -errno. */
int dlh_run_save(const char *job_dir, const struct dlh_run *run);

/* Removes the handle of job_dir (no error when there is none). */
void dlh_run_forget(const char *job_dir);

#endif
