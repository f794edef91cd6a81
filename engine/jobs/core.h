/* core.h - private to engine/: the engine's state and the helpers its files share
 *
 * engine.c opens, launches and supervises runs; queue.c schedules (order,
 * backfill, preemption); ctl.c applies ctl verbs. Every function here is
 * called with e->mu held unless it says otherwise. */
#ifndef DLH_ENGINE_CORE_H
#define DLH_ENGINE_CORE_H

#include <pthread.h>
#include <stddef.h>

#include "engine/plan/calib.h"
#include "engine/run/backend.h"
#include "engine/run/cgroup.h"
#include "engine/engine.h"
#include "engine/plan/plan.h"

struct dlh_engine {
	pthread_mutex_t mu;          /* guards everything below */
	pthread_cond_t changed;      /* a job changed state or a waiter ended */
	pthread_cond_t timer_cv;     /* wakes the timer thread */
	pthread_t timer;             /* sends SIGKILL when a grace period ends */
	char state[2048];            /* state directory */
	struct dlh_tools tools;      /* dlh-train */
	struct dlh_backend backend;  /* how runs are launched (engine/run/backend.h) */
	struct dlh_pool pool;        /* the machines */
	double grace;                /* seconds from SIGTERM to SIGKILL */
	double suspend_grace;        /* seconds from a suspend to a terminate */
	struct dlh_job **jobs;       /* ascending ids */
	size_t njobs, cap;           /* used and allocated entries */
	long next_id;                /* next id to hand out */
	int slots_used;              /* CPU slots held by running jobs */
	long *holder;                /* pool.node.cpus entries: the job holding each slot, 0 = free */
	int max_queued;              /* most jobs queued at once */
	struct dlh_cgroup_sys cg;    /* how runs are isolated */
	unsigned long launches;      /* runs launched, to name their cgroups */
	int waiters;                 /* live waiter threads */
	int stopping;                /* dlh_engine_close in progress */
	int lock_fd;                 /* STATE/lock, locked while the engine is open */
	struct dlh_calib cal;        /* the devices' measured speeds; when == 0: none yet */
	struct dlh_correction corr;  /* the estimator's factors, refitted on the history */
	int calibrating;             /* a measurement runs (first mount or recalibrate) */
	int calib_thread_live;       /* calib_thread must be joined */
	pthread_t calib_thread;      /* the first mount's measurement */
	char calib_err[256];         /* why the last measurement failed, "" if it did not */
	char calib_prog[1024];       /* dlh-calib, beside dlh-train */
};

/* Now, rounded to the millisecond (records store %.3f). */
double eng_stamp(void);

/* STATE/jobs/ID, and a file in it. */
void eng_job_dir(const struct dlh_engine *e, long id, char *buf, size_t len);
void eng_job_file(const struct dlh_engine *e, long id, const char *name, char *buf, size_t len);

/* Appends a timestamped harness event to the job's log. */
void eng_job_log(const struct dlh_engine *e, const struct dlh_job *j, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Writes the job's record; a failure is reported on stderr. */
void eng_job_save(const struct dlh_engine *e, const struct dlh_job *j);

/* The job with that id, or NULL. */
struct dlh_job *eng_find(const struct dlh_engine *e, long id);

/* Plans and starts job j on free slots. Returns 0, or -errno after marking
 * the job failed with the reason. */
int eng_job_launch(struct dlh_engine *e, struct dlh_job *j);

/* Stops j's run (DLH_VERB_TERMINATE), killing it after the grace period. */
void eng_job_terminate(struct dlh_engine *e, struct dlh_job *j);

/* Asks j's run to checkpoint and stop (DLH_VERB_SUSPEND); terminates it
 * after the suspend grace. */
void eng_job_suspend(struct dlh_engine *e, struct dlh_job *j);

/* Sends verb v to j's run through the backend. Returns the processes
 * signalled, or -errno. */
int eng_job_signal(struct dlh_engine *e, struct dlh_job *j, enum dlh_verb v);

/* The environment every rank of a run gets (engine/contract/contract.h). */
struct eng_env {
	char *v[8];                  /* NULL-terminated, into the buffers below */
	char id[64], dir[4200], csv[4200], ckpt[4200], ranks[32];
};

/* Fills env for job id's run of ranks ranks. */
void eng_run_env(const struct dlh_engine *e, long id, int ranks, struct eng_env *env);

/* Starts what may start, preempts where a waiting job needs it, and tells
 * the others why they wait (queue.c). */
void eng_schedule(struct dlh_engine *e);

#endif
