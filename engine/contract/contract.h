/* contract.h - what crosses the process boundary between dlhfs and the
 * programs it runs (dlh-train, a user's [job] command): one header that both
 * sides include, so that neither spells a name, a column or a status alone.
 * dlhfs.py beside it is the same contract for a Python program (a [job]
 * command); a change here is a change there.
 *
 * The job directory (STATE/jobs/<id>, DLH_JOB_DIR in the environment):
 *   metrics.csv   appended by rank 0, one row per step and per evaluation
 *                 (DLH_METRICS_HEADER, then rows that dlh_metrics_row_format
 *                 writes and dlh_metrics_row_parse reads), each write(2) whole
 *                 lines (dlh-train: several rows a write, at most 0.5 s apart)
 *   run.info      key=value, written once before the first step
 *   result        key=value, written atomically when the run has finished;
 *                 its presence is what "succeeded" means for dlh-train
 *   rank_times    CSV per rank after the run (compute, wait, peak RSS)
 *   checkpoints/  the program's checkpoints; `latest` names the newest
 *   log           the harness's events and every rank's output (dlhfs writes it)
 *   heartbeat     one record per rank, rewritten in place after a step, at
 *                 most every 0.5 s (dlh_heartbeat_format): what dlhfs
 *                 watches for a hung run;
 *                 a [job] command's rows in metrics.csv do as well (each
 *                 write is a step: the file's modification time)
 *
 * Signals dlhfs sends to a run (the launcher forwards them to every rank):
 *   DLH_SIG_CHECKPOINT  write a checkpoint at the next step, keep training
 *   DLH_SIG_SUSPEND     write a checkpoint at the next step, then exit with
 *                       DLH_EXIT_SUSPENDED
 *   SIGTERM, then SIGKILL after a grace period: stop (cancel, time limit)
 *
 * Exit statuses: 0 = done (with a result for dlh-train); DLH_EXIT_SUSPENDED
 * = stopped at a checkpoint, resumable (a user's command may use it too);
 * anything else is a failure.
 *
 * The environment every rank gets: DLH_ENV_* below, plus
 * OPENBLAS_NUM_THREADS=1 and OMP_NUM_THREADS=1 (one core per rank). */
#ifndef DLH_CONTRACT_H
#define DLH_CONTRACT_H

#include <signal.h>
#include <stddef.h>

/* file and directory names inside a job directory */
#define DLH_FILE_METRICS "metrics.csv"
#define DLH_FILE_RUNINFO "run.info"
#define DLH_FILE_RESULT "result"
#define DLH_FILE_RANK_TIMES "rank_times"
#define DLH_FILE_LOG "log"
#define DLH_FILE_HEARTBEAT "heartbeat"    /* rank R's record at offset R * DLH_HEARTBEAT_REC */
#define DLH_HEARTBEAT_REC 128             /* bytes of one record, its newline included */
#define DLH_FILE_READY "run.ready"        /* rank 0 makes it once every rank takes the
					     verbs' signals; earlier verbs are held */
#define DLH_DIR_CHECKPOINTS "checkpoints"
#define DLH_DIR_OUTPUT "output"           /* what a program writes freely: jobs/<id>/output/ */
#define DLH_DIR_LOGS "logs"                /* rank.N: each rank's output (also in log, as
					      "[rank N] ...") */
#define DLH_FILE_LATEST "latest"          /* in checkpoints/: the newest file's name */

/* exit statuses and signals */
#define DLH_EXIT_SUSPENDED 75             /* EX_TEMPFAIL: stopped at a checkpoint, resumable */
#define DLH_SIG_CHECKPOINT SIGUSR1        /* checkpoint at the next step, keep training */
#define DLH_SIG_SUSPEND SIGUSR2           /* checkpoint at the next step, exit DLH_EXIT_SUSPENDED */
#define DLH_SIG_LIMIT SIGXCPU             /* to dlh-shepherd alone (Slurm's --signal): the
					     scheduler's time limit is near; passed on to
					     the run as DLH_SIG_SUSPEND, and the exit file
					     says time_limit=1 */

/* the environment of every rank */
#define DLH_ENV_JOB_ID "DLH_JOB_ID"               /* the job's numeric id */
#define DLH_ENV_JOB_DIR "DLH_JOB_DIR"             /* its directory (absolute) */
#define DLH_ENV_METRICS_CSV "DLH_METRICS_CSV"     /* DLH_JOB_DIR/metrics.csv */
#define DLH_ENV_CHECKPOINT_DIR "DLH_CHECKPOINT_DIR" /* DLH_JOB_DIR/checkpoints */
#define DLH_ENV_OUTPUT_DIR "DLH_OUTPUT_DIR"       /* DLH_JOB_DIR/output */
#define DLH_ENV_RANKS "DLH_RANKS"                 /* ranks of the run */
/* a [job] command's: the node number (0.. in rank order) and, on GPUs, the
 * GPU of every rank, comma-separated in rank order; dlh-rank makes them
 * NODE_RANK, GROUP_RANK and CUDA_VISIBLE_DEVICES */
#define DLH_ENV_RANK_NODES "DLH_RANK_NODES"
#define DLH_ENV_RANK_GPUS "DLH_RANK_GPUS"
/* The run's cgroup helper on other nodes (engine/run/join.h): the name of
 * its abstract unix socket there, and the node numbers (as in
 * DLH_RANK_NODES) whose ranks join their node's group through it. */
#define DLH_ENV_NODECG "DLH_NODECG"
#define DLH_ENV_NODECG_NODES "DLH_NODECG_NODES"
/* a [job] command whose spec gives [train] batch_size or lr: what the
 * planner decided of them. The global batch, each rank's share in rank order
 * (by its device's speed; dlh-rank makes this rank's DLH_BATCH), and the
 * rate (with scale_batch, scaled by the ranks: the linear scaling rule);
 * absent when the spec leaves them to the program */
#define DLH_ENV_GLOBAL_BATCH "DLH_GLOBAL_BATCH"
#define DLH_ENV_RANK_BATCHES "DLH_RANK_BATCHES"
#define DLH_ENV_BATCH "DLH_BATCH"
#define DLH_ENV_LR "DLH_LR"
/* a [job] command run again (restart, resume): its newest checkpoint and the
 * step it was taken at (metrics.csv holds no row past it); absent on a first run */
#define DLH_ENV_RESUME_FROM "DLH_RESUME_FROM"
#define DLH_ENV_START_STEP "DLH_START_STEP"

/* rank_times: this header, then one row per rank (the rank, its last batch,
 * steps of the process, seconds of forward + backward, seconds waiting for
 * the other ranks, peak resident bytes) */
#define DLH_RANK_TIMES_HEADER "rank,batch,steps,compute_s,wait_s,peak_rss_bytes\n"

/* metrics.csv: the header, then rows of these columns. A program may name
 * further columns after the eight in its header line (",grad_norm,bleu"):
 * its own metrics, a number or empty in each row, which readers of the
 * eight ignore. */
#define DLH_METRICS_HEADER "kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s\n"
#define DLH_METRICS_LINE_MAX 512          /* longest row or header, newline included */
#define DLH_METRICS_EXTRA_MAX 8           /* columns after the eight, at most */
#define DLH_METRICS_NAME_MAX 32           /* an extra column's name: [A-Za-z][A-Za-z0-9_]*,
					     at most 31 characters (plots/NAME.svg) */

/* The extra columns a header line names, in order. */
struct dlh_metrics_columns {
	int nextra;
	char extra[DLH_METRICS_EXTRA_MAX][DLH_METRICS_NAME_MAX];
};

enum dlh_row_kind {
	DLH_ROW_TRAIN = 0,        /* one optimizer step: loss and accuracy of its batch */
	DLH_ROW_EVAL,             /* an evaluation on the test set (lr, samples_per_s empty) */
};

/* One row of metrics.csv. */
struct dlh_metrics_row {
	enum dlh_row_kind kind;   /* train or eval */
	long step;                /* global step, 1-based (eval: the step it follows) */
	int epoch;                /* 1-based */
	double time_s;            /* seconds since the run first started (resumes included) */
	double loss;              /* train: the batch's loss; eval: mean test loss */
	double accuracy;          /* train: the batch's accuracy; eval: test accuracy */
	double lr;                /* train: the step's learning rate; eval: unused */
	double samples_per_s;     /* train: global throughput; eval: unused */
	int nextra;               /* columns after the eight in this row */
	double extra[DLH_METRICS_EXTRA_MAX];   /* their values (NaN: empty) */
};

/* Writes row r, newline included, into buf (len bytes, at least
 * DLH_METRICS_LINE_MAX is always enough):
 *   train,STEP,EPOCH,TIME_S,LOSS,ACC,LR,SAMPLES_PER_S
 *   eval,STEP,EPOCH,TIME_S,TEST_LOSS,TEST_ACC,,
 * Returns the row's length, or -EOVERFLOW when it does not fit. */
int dlh_metrics_row_format(const struct dlh_metrics_row *r, char *buf, size_t len);

/* Parses the len bytes of a header line (a trailing newline allowed):
 * DLH_METRICS_HEADER's eight names, then any extra columns into c.
 * Returns 0, or -EINVAL when the line is not such a header (a bad, repeated
 * or reserved name, more than DLH_METRICS_EXTRA_MAX of them). */
int dlh_metrics_header_parse(const char *line, size_t len, struct dlh_metrics_columns *c);

/* One rank's heartbeat: where it is and since when. */
struct dlh_heartbeat {
	long rank;
	long step;                    /* steps done (0: none yet, the run is starting) */
	double time;                  /* epoch seconds of the record */
	long pid;                     /* the rank's process */
	char host[64];                /* where it runs */
};

/* Writes h as one DLH_HEARTBEAT_REC-byte record (blank-padded, ending in
 * '\n') into buf (at least DLH_HEARTBEAT_REC bytes):
 *   rank=R step=S time=T pid=P host=H
 * Returns DLH_HEARTBEAT_REC, or -EOVERFLOW. */
int dlh_heartbeat_format(const struct dlh_heartbeat *h, char *buf, size_t len);

/* Parses one record (len bytes) into h. Returns 0, or -EINVAL (an unwritten
 * or torn record). */
int dlh_heartbeat_parse(const char *rec, size_t len, struct dlh_heartbeat *h);

/* Parses the len bytes of one row (no newline needed; a trailing '\n' or
 * "\r\n" is allowed) into r. A train row needs all eight columns; an eval
 * row its first six (empty or missing lr and samples_per_s read as 0).
 * Columns after the eight are the extra metrics (nextra, extra[]: a number,
 * or NaN when empty), at most DLH_METRICS_EXTRA_MAX.
 * Numbers as strtod reads them, with nothing after them in their column.
 * Returns 0, or -EINVAL for the header, a blank line or anything else. */
int dlh_metrics_row_parse(const char *line, size_t len, struct dlh_metrics_row *r);

#endif
