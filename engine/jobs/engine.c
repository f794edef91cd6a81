/* engine.c - opening and closing the engine (setup, the state-dir lock, calibration) and the queries of engine.h
 *
 * The job table and records are table.c, starting and watching runs
 * supervise.c, the queue (order, backfill, preemption) queue.c, submit
 * submit.c, the ctl verbs ctl.c. Locking: table.h. */
#include "engine/engine.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "engine/live/slots.h"
#include "engine/table/advise.h"
#include "engine/table/disk.h"
#include "engine/jobs/queue.h"
#include "engine/supervise/supervise.h"
#include "engine/live/nodes.h"
#include "engine/table/table.h"
#include "engine/util/util.h"

#define LOCK_WAIT 5.0            /* seconds to wait for a state directory in use */

/* ---- opening and closing ---- */

/* The program name in the directory of the program at path, into out.
 * Returns 0 when it is executable, or -errno. */
static int beside(const char *path, const char *name, char *out, size_t len)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return -ENOENT;
	snprintf(out, len, "%.*s/%s", (int)(slash - path), path, name);
	return access(out, X_OK) ? -errno : 0;
}

/* The program name beside the running program, else (also not NULL)
 * beside the program also, into out. Returns 0, or -errno of the first
 * place looked at. */
static int find_tool(const char *name, const char *also, char *out, size_t len)
{
	char self[2048];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	int rc = n < 0 ? -errno : 0;
	if (n >= 0) {
		self[n] = '\0';
		rc = beside(self, name, out, len);
	}
	return rc && also && !beside(also, name, out, len) ? 0 : rc;
}

/* dlh-shepherd, which holds every run (engine/run/shepherd.c): given, or
 * beside the running program, else beside the trainer. Returns 0, or -errno
 * with err. */
static int find_shepherd(struct dlh_engine *e, const char *given, char *err, size_t errlen)
{
	char *out = e->backend.shepherd;
	size_t len = sizeof e->backend.shepherd;
	if (given) {
		snprintf(out, len, "%s", given);
		if (!given[0] || !access(out, X_OK))
			return 0;
		snprintf(err, errlen, "cannot execute \"%s\": %s", given, strerror(errno));
		return -errno;
	}
	if (!find_tool("dlh-shepherd", e->tools.trainer, out, len))
		return 0;
	snprintf(err, errlen, "cannot find dlh-shepherd beside this program or beside \"%s\" "
		 "(it holds each run; it is built with dlhfs)", e->tools.trainer);
	out[0] = '\0';
	return -ENOENT;
}

/* Resolves the state directory and the tools of o into e, loads the pool
 * file when o names one, and creates STATE/jobs. Returns 0, or -errno with
 * err filled. */
static int setup(struct dlh_engine *e, const struct dlh_engine_opts *o, char *err, size_t errlen)
{
	int rc;
	const char *state = o->state_dir ? o->state_dir : DLH_STATE_DEFAULT;
	if (state[0] != '/') {
		snprintf(err, errlen, "state directory must be an absolute path, got \"%s\"", state);
		return -EINVAL;
	}
	if (strlen(state) >= sizeof e->state - 64 ||
	    (o->trainer && strlen(o->trainer) >= sizeof e->tools.trainer)) {
		snprintf(err, errlen, "a path given is too long");
		return -ENAMETOOLONG;
	}
	snprintf(e->state, sizeof e->state, "%s", state);
	if (o->calib && strlen(o->calib) >= sizeof e->calib_prog) {
		snprintf(err, errlen, "a path given is too long");
		return -ENAMETOOLONG;
	}
	if (o->calib)   /* else beside the trainer (eng_calib_open) */
		snprintf(e->calib_prog, sizeof e->calib_prog, "%s", o->calib);
	if (o->trainer)
		snprintf(e->tools.trainer, sizeof e->tools.trainer, "%s", o->trainer);
	else if ((rc = find_tool("dlh-train", NULL, e->tools.trainer, sizeof e->tools.trainer))) {
		snprintf(err, errlen, "cannot find dlh-train beside this program: %s", strerror(-rc));
		return rc;
	}
	if (access(e->tools.trainer, X_OK)) {
		snprintf(err, errlen, "cannot execute \"%s\": %s", e->tools.trainer, strerror(errno));
		return -errno;
	}
	if (o->pool_file && (rc = dlh_pool_load(&e->pool, o->pool_file, o->cpus, err, errlen)))
		return rc;
	/* the pool file says how runs are launched: mpirun here, or Slurm */
	if ((rc = o->pool_file && dlh_pool_is_slurm(&e->pool) ?
		  dlh_backend_slurm(&e->backend, o->launcher, e->pool.partition, e->pool.account,
				    err, errlen) :
		  dlh_backend_local(&e->backend, o->launcher, err, errlen)) ||
	    (rc = find_shepherd(e, o->shepherd, err, errlen)))
		return rc;
	/* dlh-probe, for the pool's other nodes: a node shows its absence */
	if (find_tool("dlh-probe", e->tools.trainer, e->probe_path, sizeof e->probe_path))
		e->probe_path[0] = '\0';
	if (find_tool("dlh-agent", e->tools.trainer, e->agent_path, sizeof e->agent_path))
		e->agent_path[0] = '\0';
	/* dlh-rank, but for bare runs (shepherd ""; the unit tests): their commands run as they are */
	if (!o->shepherd || o->shepherd[0])
		if (find_tool("dlh-rank", e->tools.trainer, e->tools.rank, sizeof e->tools.rank))
			e->tools.rank[0] = '\0';
	if (o->pool_file && realpath(o->pool_file, e->pool_file) == NULL)   /* the mount may chdir */
		snprintf(e->pool_file, sizeof e->pool_file, "%s", o->pool_file);
	e->cpus_override = o->cpus;
	char dir[4096];
	snprintf(dir, sizeof dir, "%s/jobs", e->state);
	if ((rc = dlh_mkdir_p(dir, 0755)) || (access(dir, W_OK) && (rc = -errno))) {
		snprintf(err, errlen, "cannot use state directory \"%s\": %s", e->state, strerror(-rc));
		return rc;
	}
	return 0;
}

/* Takes the lock on STATE/lock, waiting up to wait seconds for another
 * daemon to let go of it (an unmount returns before the old daemon has
 * stopped its jobs). One daemon per state directory: ids and records
 * must have one writer. Returns the locked descriptor, or -errno with err. */
static int lock_state(const char *state, double wait, char *err, size_t errlen)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/lock", state);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		snprintf(err, errlen, "cannot open \"%s\": %s", path, strerror(errno));
		return -errno;
	}
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	double until = dlh_mono() + wait;
	while (fcntl(fd, F_SETLK, &fl) < 0) {
		if ((errno != EAGAIN && errno != EACCES) || dlh_mono() >= until) {
			struct flock who = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
			if (fcntl(fd, F_GETLK, &who) == 0 && who.l_type != F_UNLCK)
				snprintf(err, errlen, "state directory \"%s\" is in use by another dlhfs (pid %ld)",
					 state, (long)who.l_pid);
			else
				snprintf(err, errlen, "cannot lock \"%s\": %s", path, strerror(errno));
			close(fd);
			return -EBUSY;
		}
		struct timespec ts = { 0, 50 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	return fd;
}

int dlh_engine_check(const struct dlh_engine_opts *o, char *err, size_t errlen)
{
	struct dlh_engine *e = calloc(1, sizeof *e);
	if (!e)
		return -ENOMEM;
	int rc = setup(e, o, err, errlen);
	if (!rc) {
		int fd = lock_state(e->state, LOCK_WAIT, err, errlen);
		if (fd < 0)
			rc = fd;
		else
			close(fd); /* released: open takes it again after daemonizing */
	}
	free(e);
	return rc;
}

int dlh_engine_calibrate(const struct dlh_engine_opts *o, struct dlh_buf *out,
			 char *err, size_t errlen)
{
	struct dlh_engine *e = calloc(1, sizeof *e);
	if (!e)
		return -ENOMEM;
	int rc = setup(e, o, err, errlen);
	if (!rc && (e->lock_fd = lock_state(e->state, 0, err, errlen)) < 0)
		rc = e->lock_fd;
	if (rc) {
		free(e);
		return rc;
	}
	if (!o->pool_file)   /* else setup() loaded it */
		dlh_pool_detect(&e->pool, o->cpus);
	pthread_mutex_init(&e->mu, NULL);
	pthread_cond_init(&e->changed, NULL);
	rc = eng_calibrate_now(e, out, err, errlen);
	pthread_cond_destroy(&e->changed);
	pthread_mutex_destroy(&e->mu);
	close(e->lock_fd);
	free(e);
	return rc;
}

int dlh_engine_open(struct dlh_engine **out, const struct dlh_engine_opts *o,
		    char *err, size_t errlen)
{
	struct dlh_engine *e = calloc(1, sizeof *e);
	if (!e)
		return -ENOMEM;
	int rc = setup(e, o, err, errlen);
	if (!rc && (e->lock_fd = lock_state(e->state, LOCK_WAIT, err, errlen)) < 0)
		rc = e->lock_fd;
	if (rc) {
		free(e);
		return rc;
	}
	e->grace = o->kill_grace > 0 ? o->kill_grace : DLH_KILL_GRACE;
	e->suspend_grace = o->suspend_grace > 0 ? o->suspend_grace : DLH_SUSPEND_GRACE;
	e->max_queued = o->max_queued > 0 ? o->max_queued : DLH_MAX_QUEUED;
	e->max_queued_per_user = o->max_queued_per_user > 0 ? o->max_queued_per_user :
				 o->max_queued_per_user == 0 ? DLH_MAX_QUEUED_PER_USER : 0;
	e->ranks_per_user = o->ranks_per_user;
	if (o->mem_per_rank > 0) {
		e->mem_per_rank = o->mem_per_rank;
	} else if (o->mem_per_rank == 0) {   /* a core's share of this machine's memory */
		long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
		long cores = sysconf(_SC_NPROCESSORS_ONLN);
		e->mem_per_rank = pages > 0 && size > 0 && cores > 0 ?
				  (long long)pages * size / cores : 0;
	}
	e->pids_per_rank = o->pids_per_rank > 0 ? o->pids_per_rank :
			   o->pids_per_rank == 0 ? DLH_PIDS_PER_RANK : 0;
	e->expire = o->expire > 0 ? o->expire : 0;
	e->disk_per_job = o->disk_per_job > 0 ? o->disk_per_job : 0;
	e->disk_max = o->disk_max > 0 ? o->disk_max : 0;
	if (o->reserve > 0) {
		e->reserve = o->reserve;
	} else if (o->reserve == 0) {   /* 64 MiB, at most 5% of the filesystem */
		struct statvfs v;
		e->reserve = ENG_RESERVE_DEFAULT;
		if (!statvfs(e->state, &v) && (long long)v.f_blocks * (long long)v.f_frsize / 20 < e->reserve)
			e->reserve = (long long)v.f_blocks * (long long)v.f_frsize / 20;
	}
	e->no_probe = o->no_probe;
	e->probe_every = o->probe_every > 0 ? o->probe_every : o->probe_every == 0 ? DLH_PROBE_EVERY : 0;
	e->data_timeout_ms = (int)(1000 * (o->data_timeout > 0 ? o->data_timeout : DLH_DATA_TIMEOUT));
	e->next_id = 1;
	if (!o->pool_file)   /* else setup() loaded it */
		dlh_pool_detect(&e->pool, o->cpus);
	if (!o->no_isolation)
		dlh_cgroup_setup(&e->cg);
	/* Slurm's nodes: Slurm's own cgroups (task/cgroup), not ours */
	e->cg_nodes = !o->no_isolation && geteuid() == 0 && !dlh_pool_is_slurm(&e->pool);
	if (o->no_isolation)
		snprintf(e->cg.why, sizeof e->cg.why, "turned off (-o isolation=off)");
	if ((rc = eng_slots_fit(e)))
		goto no_table;
	if ((rc = eng_table_load(e, err, errlen)))
		goto fail;
	eng_drained_load(e);
	eng_disk_open(e);
	pthread_mutex_init(&e->mu, NULL);
	pthread_condattr_t ca; /* deadlines on the monotonic clock */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&e->changed, &ca);
	pthread_cond_init(&e->timer_cv, &ca);
	pthread_condattr_destroy(&ca);
	e->reschedule = eng_schedule;
	if ((rc = eng_supervise_start(e, err, errlen)))
		goto fail;
	eng_calib_open(e, o->no_calibrate);
	eng_nodes_first(e);   /* a Slurm pool's nodes, before its runs are taken back */
	pthread_mutex_lock(&e->mu);
	for (size_t i = 0; i < e->njobs; i++) {
		struct dlh_job *j = e->jobs[i];
		if (j->status == DLH_RUNNING || j->status == DLH_PLANNING)
			eng_job_recover(e, j);
		eng_job_take_up(e, j);   /* before the mount serves anyone */
	}
	eng_schedule(e);
	pthread_mutex_unlock(&e->mu);
	eng_nodes_probe_start(e);
	*out = e;
	return 0;
fail:
	eng_table_free(e);
no_table:
	eng_slots_close(e);
	dlh_cgroup_teardown(&e->cg);
	close(e->lock_fd);
	free(e);
	return rc;
}

void dlh_engine_closing(struct dlh_engine *e)
{
	if (e)
		atomic_store(&e->closing, 1);
}

void dlh_engine_close(struct dlh_engine *e)
{
	if (!e)
		return;
	dlh_engine_closing(e);   /* the probe round's link measurements, a calibration */
	pthread_mutex_lock(&e->mu);
	pthread_cond_broadcast(&e->changed);   /* whoever waits for a calibration */
	pthread_mutex_unlock(&e->mu);
	eng_nodes_stop(e);
	eng_supervise_stop(e);
	eng_calib_close(e);
	eng_table_free(e);
	eng_slots_close(e);
	dlh_cgroup_teardown(&e->cg);
	pthread_cond_destroy(&e->changed);
	pthread_cond_destroy(&e->timer_cv);
	pthread_mutex_destroy(&e->mu);
	close(e->lock_fd); /* the next daemon may have the directory now */
	free(e);
}

/* ---- queries ---- */

int dlh_engine_job(struct dlh_engine *e, long id, struct dlh_job *out)
{
	pthread_mutex_lock(&e->mu);
	struct dlh_job *j = eng_find(e, id);
	if (j)
		*out = *j;
	pthread_mutex_unlock(&e->mu);
	return j ? 0 : -ENOENT;
}

int dlh_engine_job_brief(struct dlh_engine *e, long id, struct dlh_job_brief *out)
{
	pthread_mutex_lock(&e->mu);
	struct dlh_job *j = eng_find(e, id);
	if (j)
		*out = (struct dlh_job_brief){ .uid = j->uid, .status = j->status,
					       .submitted = j->submitted,
					       .readable_by = j->spec.readable_by };
	pthread_mutex_unlock(&e->mu);
	return j ? 0 : -ENOENT;
}

long *dlh_engine_job_ids(struct dlh_engine *e, size_t *n)
{
	pthread_mutex_lock(&e->mu);
	long *ids = malloc((e->njobs + 1) * sizeof *ids);
	*n = ids ? e->njobs : 0;
	for (size_t i = 0; i < *n; i++)
		ids[i] = e->jobs[i]->id;
	pthread_mutex_unlock(&e->mu);
	return ids;
}

size_t dlh_engine_jobs(struct dlh_engine *e, long *ids, size_t max)
{
	pthread_mutex_lock(&e->mu);
	size_t n = e->njobs;
	for (size_t i = 0; i < n && i < max; i++)
		ids[i] = e->jobs[i]->id;
	pthread_mutex_unlock(&e->mu);
	return n;
}

long dlh_engine_find_name(struct dlh_engine *e, const char *name)
{
	long id = -ENOENT;
	pthread_mutex_lock(&e->mu);
	for (size_t i = e->njobs; i-- > 0;)
		if (!strcmp(e->jobs[i]->spec.name, name)) {
			id = e->jobs[i]->id;
			break;
		}
	pthread_mutex_unlock(&e->mu);
	return id;
}

void dlh_engine_job_dir(struct dlh_engine *e, long id, char *buf, size_t len)
{
	eng_job_dir(e, id, buf, len);
}

int dlh_engine_run_note(struct dlh_engine *e, long id, char *out, size_t len)
{
	return eng_run_note(e, id, out, len);
}

void dlh_engine_errors_path(struct dlh_engine *e, uid_t reader, char *buf, size_t len)
{
	if (reader == 0 || reader == getuid())
		snprintf(buf, len, "%s/errors", e->state);
	else
		snprintf(buf, len, "%s/%s/%u", e->state, DLH_ERRORS_DIR, (unsigned)reader);
}

void dlh_engine_pool(struct dlh_engine *e, struct dlh_pool *pool, struct dlh_usage *use)
{
	pthread_mutex_lock(&e->mu);
	if (pool)
		*pool = e->pool;
	if (use) {
		memset(use, 0, sizeof *use);
		use->slots_used = e->slots_used;
		for (int k = 0; k < e->pool.nnodes; k++) {
			use->node_cpus[k] = e->node_used[k];
			for (int g = 0; g < e->gholder_len[k]; g++)
				use->node_gpus[k] += e->gholder[k][g] != 0;
		}
		for (size_t i = 0; i < e->njobs; i++) {
			use->running += e->jobs[i]->status == DLH_RUNNING;
			use->queued += e->jobs[i]->status == DLH_QUEUED;
			use->suspended += e->jobs[i]->status == DLH_SUSPENDED;
		}
	}
	pthread_mutex_unlock(&e->mu);
}

size_t dlh_engine_running(struct dlh_engine *e, long *ids, int *ranks, size_t max)
{
	size_t n = 0;
	pthread_mutex_lock(&e->mu);
	for (size_t i = 0; i < e->njobs; i++) {
		if (e->jobs[i]->status != DLH_RUNNING)
			continue;
		if (n < max) {
			ids[n] = e->jobs[i]->id;
			ranks[n] = e->jobs[i]->ranks;
		}
		n++;
	}
	pthread_mutex_unlock(&e->mu);
	return n;
}

void dlh_engine_isolation(struct dlh_engine *e, int k, char *buf, size_t len)
{
	pthread_mutex_lock(&e->mu);
	const struct dlh_pool_node *nd = k >= 0 && k < e->pool.nnodes ? &e->pool.nodes[k] : NULL;
	if (nd && k != e->pool.local) {   /* another node: what its probe found, if it is used */
		if (dlh_pool_is_slurm(&e->pool))
			snprintf(buf, len, "none: ranks on a Slurm pool's nodes are isolated by "
				 "Slurm (its task/cgroup plugin, where configured), not by dlhfs");
		else if (!e->cg_nodes)   /* not root, or turned off: e->cg says which */
			snprintf(buf, len, "none: %s", e->cg.why);
		else if (nd->isolation[0])
			snprintf(buf, len, "%s", nd->isolation);
		else
			snprintf(buf, len, "none: not known yet (%s)", e->no_probe ?
				 "-o probe=off, and no run has been there" : "not probed as root yet");
	} else if (e->cg.mode == DLH_CG_NONE)
		snprintf(buf, len, "none: %s", e->cg.why);
	else
		snprintf(buf, len, "cgroup v%d", e->cg.mode == DLH_CG_V1 ? 1 : 2);
	pthread_mutex_unlock(&e->mu);
}

int dlh_engine_limits(struct dlh_engine *e, struct dlh_buf *out)
{
	char mem[32] = "none", pids[32] = "none", exp[32] = "none", perq[32] = "none", rpu[32] = "none",
	     res[32] = "none", dpj[32] = "none", dmax[32] = "none";
	pthread_mutex_lock(&e->mu);
	if (e->mem_per_rank > 0)
		dlh_size_text(e->mem_per_rank, mem, sizeof mem);
	if (e->pids_per_rank > 0 && e->cg.mode != DLH_CG_NONE && e->cg.pids[0])
		snprintf(pids, sizeof pids, "%ld", e->pids_per_rank);
	if (e->expire > 0)
		dlh_duration(e->expire, exp, sizeof exp);
	if (e->reserve > 0)
		dlh_size_text(e->reserve, res, sizeof res);
	if (e->disk_per_job > 0)
		dlh_size_text(e->disk_per_job, dpj, sizeof dpj);
	if (e->disk_max > 0)
		dlh_size_text(e->disk_max, dmax, sizeof dmax);
	if (e->max_queued_per_user > 0)
		snprintf(perq, sizeof perq, "%d", e->max_queued_per_user);
	if (eng_ranks_per_user(e) > 0)
		snprintf(rpu, sizeof rpu, "%d", eng_ranks_per_user(e));
	/* the memory limit needs a memory cgroup as much as the task limit */
	if (e->cg.mode == DLH_CG_NONE)
		snprintf(mem, sizeof mem, "none");
	int rc = dlh_buf_printf(out, "max_queued %d\nmax_queued_per_user %s\nranks_per_user %s\n"
				"mem_per_rank %s\npids_per_rank %s\ndisk_per_job %s\ndisk_max %s\n"
				"reserve %s\nexpire %s\n",
				e->max_queued, perq, rpu, mem, pids, dpj, dmax, res, exp);
	pthread_mutex_unlock(&e->mu);
	return rc ? -ENOMEM : 0;
}

int dlh_engine_wait(struct dlh_engine *e, long id, double timeout)
{
	double until = dlh_mono() + timeout;
	pthread_mutex_lock(&e->mu);
	struct dlh_job *j = eng_find(e, id);
	int rc = j ? 0 : -ENOENT;
	while (j && !dlh_status_terminal(j->status)) {
		struct timespec ts;
		dlh_mono_ts(until, &ts);
		int timed_out = pthread_cond_timedwait(&e->changed, &e->mu, &ts) == ETIMEDOUT;
		/* found again: a purge or an expiry may have freed it meanwhile */
		if (!(j = eng_find(e, id))) {
			rc = -ENOENT;
			break;
		}
		if (timed_out && !dlh_status_terminal(j->status)) {
			rc = -ETIMEDOUT;
			break;
		}
	}
	pthread_mutex_unlock(&e->mu);
	return rc;
}
