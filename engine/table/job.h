/* job.h - one job's record: status, times, its run; stored as key=value */
#ifndef DLH_JOB_H
#define DLH_JOB_H

#include <pthread.h>
#include <sys/types.h>

#include "engine/run/backend.h"
#include "engine/run/cgroup.h"
#include "engine/run/nodecg.h"
#include "engine/plan/profile.h"
#include "engine/pool/pool.h"
#include "engine/report/metrics.h"
#include "schema/spec.h"

#define DLH_REASON_MAX 512
#define DLH_JOB_RANKS 1024    /* most ranks a job's plan records (DLH_RANKS_MAX) */

enum dlh_status {
	DLH_QUEUED = 0,   /* waiting for free slots */
	DLH_PLANNING,     /* being placed; transient */
	DLH_RUNNING,      /* its run is alive */
	DLH_SUCCEEDED,    /* the run ended with a result */
	DLH_FAILED,       /* the run ended without one; reason says why */
	DLH_CANCELLED,    /* stopped by a cancel verb */
	DLH_SUSPENDED,    /* stopped at a checkpoint; ctl `resume` requeues it */
	DLH_PLANNED,      /* [job] dry_run: estimated and planned, never launched */
};

/* The persistent part of a job (the file `job` in its directory) plus the
 * daemon's bookkeeping while it runs. */
struct dlh_job {
	long id;                     /* numeric id, never reused */
	uid_t uid;                   /* who submitted it */
	enum dlh_status status;      /* where it is in its life */
	char reason[DLH_REASON_MAX]; /* why it is queued/failed/cancelled, in words anyone may
					read (status and progress are public, as squeue is):
					never the run's output nor a value of the spec; "" if none */
	char detail[DLH_REASON_MAX]; /* the same reason in full, for the job's readers only
					(result, report.html): the failed rank's last lines, a
					path; "" when reason says it all */
	double submitted;            /* epoch seconds */
	double started;              /* first launch, 0 if never */
	double finished;             /* end of the last run, 0 while not ended */
	int ranks;                   /* ranks of the current plan, 0 before planning */
	int restarts;                /* relaunches done under restart = on-failure */
	int exit_code;               /* last exit: >= 0 status, < 0 minus the signal */
	int priority;                /* higher starts first; [job] priority or ctl `priority N` */
	int suspends;                /* times the job was suspended (by ctl or preemption) */
	int resumable;               /* failed at its time limit: `resume` continues it */
	struct dlh_spec spec;        /* the validated spec */
	/* what the planner decided at submission (engine/choose) */
	int plan_ranks;              /* ranks; 0 = not decided (the spec's own) */
	int plan_batch[DLH_JOB_RANKS];   /* per-rank batches (a [job] command's: 0) */
	double plan_lr;              /* lr to train with; 0 = auto (or a [job] command) */
	int plan_warmup;             /* warmup steps */
	int plan_nodes;              /* nodes the ranks spread over; 0 = fewest */
	char plan_parts[96];         /* GPU ranks by type, in rank order: "A100:1,H100:3"
					("" = any GPU) */
	double est_total;            /* estimated run time, seconds; 0 = no estimate */
	/* a [job] command measured before its run (supervise/profile.c) */
	int profile_phase;           /* k in 1..profile_n: profile run k is next (or runs);
					0 = none (or all done) */
	int profile_n;               /* its profile runs */
	int profile_counts[DLH_PROFILE_RUNS];   /* the ranks of each */
	double cpu_s;                /* CPU seconds its runs used (the launcher and the
					ranks it reaped, on its node), every run added */
	long long peak_mem;          /* the most memory one of its runs used at once (its
					memory cgroup's peak, else the largest rank), bytes */

	/* daemon-only, not stored */
	struct dlh_profile_run profile[DLH_PROFILE_RUNS];   /* what each profile run measured
					(a restart of dlhfs profiles again) */
	int profile_stopped;         /* dlhfs stopped the running profile run: no failure */
	struct dlh_profile_acc profile_acc;     /* the running profile run's rows so far */
	struct dlh_metrics_mark profile_mark;   /* where its metrics.csv was read to */
	int cancelling;              /* a cancel was sent; ends as cancelled */
	int suspending;              /* a suspend was sent (SIGUSR2); ends as suspended */
	int unqueued;                /* that suspend took a run its launcher held pending
					out of the launcher's queue (nothing ran to checkpoint) */
	long preempted_by;           /* the suspend was a preemption for that job: ends
					queued, to resume on its own; 0 = not */
	double term_at;              /* when to SIGTERM a run that ignores a suspend, 0 = not due */
	double kill_at;              /* when to SIGKILL the session, 0 = not due */
	double run_started;          /* when the current run was launched (epoch s), 0 = none */
	int energy_ok;               /* 1: energy_start was read at this run's launch (every
					rank here, CPU ranks; not kept across a restart) */
	struct dlh_energy energy_start;   /* this machine's meter then */
	double limit_at;             /* CLOCK_MONOTONIC end of [job] time_limit, 0 = none */
	double grace_at;             /* when to ask the run to checkpoint and stop before its
					time limit (dlh_spec_grace), 0 = not due */
	int timed_out;               /* the run was stopped at its time limit; ends as failed */
	double hang_after;           /* seconds without a step that make the run hung */
	double hang_pending;         /* when the hang watch last found the run held pending
					by its launcher (Slurm; a requeue), or first found it
					going again after, epoch s: no step is due before
					hang_after past it; 0 = never */
	int hang_held;               /* the hang watch's last look found it pending */
	int hung;                    /* the run was stopped as hung; hang_why says why */
	int holder_died;             /* the run's holder (dlh-shepherd) died: exit_code is its */
	char disk_why[160];          /* the run was stopped for its disk use: why (disk.c) */
	long long disk_used;         /* what its directory held at the last look (disk.c) */
	int taken_back;              /* the current run was found again after a restart of
					dlhfs: its time is not the run's alone (no history) */
	unsigned char seen[256];     /* seen[k]: node k can read the job's data (DLH_POOL_NODES) */
	int seeing;                  /* its nodes are being asked whether they see its data */
	int resume_ready;            /* a command's next run takes up from resume_from */
	long resume_step;            /* at this step (resume.c; found after its run ended) */
	char resume_from[4400];      /* its newest checkpoint */
	int nodes_lost;              /* a run lost a node: the next spreads over the nodes
					that remain ([resources] nodes at most those) */
	char hang_why[512];
	double eta_end;              /* running: when its steps should be done by the rate
					of its newest rows (epoch s; eta.c), 0 = unknown */
	double eta_looked;           /* when eta.c last looked (CLOCK_MONOTONIC), 0 = never */
	double est_start;            /* queued: the scheduler's estimated start (epoch s,
					INFINITY = unknown) */
	char wait[256];              /* queued: why it waits, from the scheduler */
	struct dlh_run run;          /* the current run as its backend started it (also in
					its handle file); run.pid 0 = no run */
	struct dlh_cgroup cg;        /* the current run's cgroups; empty paths = none */
	struct dlh_nodecg *nodecg;   /* the current run's groups on other nodes, held by their
					helpers (malloc'd; NULL = none) */
	int nnodecg;                 /* entries of nodecg */
	unsigned nodecg_seq;         /* its runs given groups on other nodes, to name each
					run's apart (a helper of the last may linger) */
};

/* The lowercase word for a status ("running"). */
const char *dlh_status_name(enum dlh_status s);

/* Sets j's public reason from fmt (NULL: no reason) and its private
 * detail (NULL: none, the reason says it all). */
void dlh_job_reason(struct dlh_job *j, const char *detail, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The reason as j's readers see it: the detail where there is one. */
const char *dlh_job_reason_full(const struct dlh_job *j);

/* 1 for succeeded, failed and cancelled (suspended is not: it can resume). */
int dlh_status_terminal(enum dlh_status s);

/* Writes the record to DIR/job atomically. Returns 0, or -errno. */
int dlh_job_save(const struct dlh_job *j, const char *dir);

/* Loads DIR/job and DIR/spec.ini into j. Returns 0, or -errno
 * (-EINVAL for a record or spec that does not parse). */
int dlh_job_load(struct dlh_job *j, const char *dir);

#endif
