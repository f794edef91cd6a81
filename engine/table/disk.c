/* disk.c - the state directory's room: a reserve for the daemon's own
 * records, and each running job's disk limit
 *
 * Every job writes into the state directory (checkpoints, logs, what its
 * program puts in its directory), and so does the daemon (records, specs,
 * the errors log). One user's job that fills the filesystem must not lock
 * the others out: the daemon keeps STATE/.reserve, a file of e->reserve
 * bytes no job can take, and gives it up the moment it needs room (a
 * submission or a record that met ENOSPC), once the job filling the disk
 * has been stopped. The timer thread looks at the running jobs every
 * ENG_DISK_LOOK seconds: a job whose directory holds more than its limit
 * is stopped with that reason; when the filesystem is full, the running
 * job that holds the most is. Directories are measured without e->mu (a
 * walk of what an owner wrote may take a while), by descriptors, never
 * following a link.
 *
 * Locking: table.h. */
/* fallocate: Linux's */
#define _GNU_SOURCE
#include "engine/table/disk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "engine/util/util.h"

#define RESERVE_FILE ".reserve"
#define RESERVE_CHUNK (1 << 20)

/* Bytes the filesystem of the state dir has free for a user's files. */
static long long avail_bytes(const struct dlh_engine *e)
{
	struct statvfs v;
	if (statvfs(e->state, &v) < 0)
		return -1;
	return (long long)v.f_bavail * (long long)v.f_frsize;
}

/* Makes the reserve file, its blocks allocated (a hole would hold
 * nothing). Returns 0, or -errno (nothing kept). */
static int hold_reserve(struct dlh_engine *e)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/" RESERVE_FILE, e->state);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	/* blocks allocated, nothing written (a mount of each test wrote and
	 * synced 64 MiB: the suite's disk was busy with nothing else); where
	 * the filesystem cannot, zeros written */
	static const char zero[RESERVE_CHUNK];
	long long left = e->reserve;
	int rc = fallocate(fd, 0, 0, (off_t)e->reserve) < 0 ? -errno : 0;
	if (rc == -EOPNOTSUPP) {
		rc = 0;
		while (left > 0 && !rc) {
			size_t n = left < RESERVE_CHUNK ? (size_t)left : RESERVE_CHUNK;
			ssize_t w = write(fd, zero, n);
			if (w < 0)
				rc = -errno;
			else
				left -= w;
		}
	}
	if (rc && ftruncate(fd, 0) < 0)
		rc = rc ? rc : -errno;
	close(fd);
	e->reserve_held = !rc;
	return rc;
}

void eng_disk_open(struct dlh_engine *e)
{
	/* what a calibration cut short left behind (dlh-calib removes its own
	 * files however it fails, but not when killed) */
	DIR *d = opendir(e->state);
	struct dirent *de;
	while (d && (de = readdir(d)))
		if (!strncmp(de->d_name, ".calib-", 7))
			unlinkat(dirfd(d), de->d_name, 0);
	if (d)
		closedir(d);
	if (e->reserve > 0 && avail_bytes(e) > 2 * e->reserve)
		hold_reserve(e);
}

int eng_disk_release(struct dlh_engine *e)
{
	char path[4200];
	if (!e->reserve_held)
		return 0;
	snprintf(path, sizeof path, "%s/" RESERVE_FILE, e->state);
	int fd = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
	int freed = fd >= 0 && !ftruncate(fd, 0);
	if (fd >= 0)
		close(fd);
	e->reserve_held = 0;
	return freed;
}

/* What one look found of a running job. */
struct look {
	long id;
	pid_t pid;               /* its run, to know it is still the same */
	long long limit;         /* its disk limit, 0 = none */
	long long used;          /* what its directory holds */
	char dir[4096];
};

/* Stops j's run now (SIGKILL: a disk being filled does not wait for a
 * grace) with reason why. e->mu held. */
static void stop_for_disk(struct dlh_engine *e, struct dlh_job *j, const char *why)
{
	eng_job_log(e, j, "%s: stopping the run", why);
	snprintf(j->disk_why, sizeof j->disk_why, "%s", why);
	e->backend.ops->signal(&e->backend, &j->run, DLH_VERB_KILL);
}

double eng_disk_check(struct dlh_engine *e, double now)
{
	size_t n = 0;
	if (e->disk_at > now) {   /* looked lately: the timer woke for something else */
		for (size_t i = 0; i < e->njobs; i++)
			n += e->jobs[i]->status == DLH_RUNNING && e->jobs[i]->run.pid;
		return n ? e->disk_at : 0;
	}
	for (size_t i = 0; i < e->njobs; i++)
		n += e->jobs[i]->status == DLH_RUNNING && e->jobs[i]->run.pid && !e->jobs[i]->disk_why[0];
	if (!n) {   /* nothing writes: the reserve is made again where there is room,
		     * without e->mu (a write of up to 64 MiB) */
		if (e->reserve > 0 && !e->reserve_held && !e->reserve_busy && avail_bytes(e) > 2 * e->reserve) {
			e->reserve_busy = 1;
			pthread_mutex_unlock(&e->mu);
			hold_reserve(e);
			pthread_mutex_lock(&e->mu);
			e->reserve_busy = 0;
			e->timer_gen++;
		}
		return 0;
	}
	struct look *L = calloc(n, sizeof *L);
	if (!L)
		return now + ENG_DISK_LOOK;
	size_t k = 0;
	for (size_t i = 0; i < e->njobs && k < n; i++) {
		struct dlh_job *j = e->jobs[i];
		if (j->status != DLH_RUNNING || !j->run.pid || j->disk_why[0])
			continue;
		L[k].id = j->id;
		L[k].pid = j->run.pid;
		L[k].limit = j->spec.disk > 0 ? j->spec.disk : e->disk_per_job;
		eng_job_dir(e, j->id, L[k].dir, sizeof L[k].dir);
		k++;
	}
	pthread_mutex_unlock(&e->mu);
	for (size_t i = 0; i < k; i++)
		L[i].used = dlh_tree_usage(L[i].dir);
	long long avail = avail_bytes(e);
	pthread_mutex_lock(&e->mu);
	e->timer_gen++;
	struct dlh_job *hog = NULL;
	long long most = 0;
	int near = avail >= 0 && avail < 4 * (e->reserve > 0 ? e->reserve : ENG_DISK_FULL);
	for (size_t i = 0; i < k; i++) {
		struct dlh_job *j = eng_find(e, L[i].id);
		if (!j || j->status != DLH_RUNNING || j->run.pid != L[i].pid || j->disk_why[0])
			continue;   /* ended or stopped meanwhile */
		char used[32], lim[32], why[160];
		if (L[i].limit > 0 && L[i].used > L[i].limit) {
			dlh_size_text(L[i].limit, lim, sizeof lim);
			dlh_size_text(L[i].used, used, sizeof used);
			snprintf(why, sizeof why, "disk limit %s reached: its directory holds %s", lim, used);
			stop_for_disk(e, j, why);
		} else {
			near |= L[i].limit > 0;   /* a limit holds only as often as it is looked at */
			/* the filler is one that grew since the last look, the most:
			 * not one that merely holds much (something else may fill it) */
			long long grew = j->disk_used > 0 ? L[i].used - j->disk_used : 0;
			if (grew > most) {
				most = grew;
				hog = j;
			}
		}
		j->disk_used = L[i].used;
	}
	/* the filesystem is full (the reserve aside): the job that holds the
	 * most goes, then the daemon has its reserve to write with */
	if (hog && avail >= 0 && avail < ENG_DISK_FULL) {
		char used[32], grew[32], why[200];
		dlh_size_text(hog->disk_used, used, sizeof used);
		dlh_size_text(most, grew, sizeof grew);
		snprintf(why, sizeof why, "disk full: the state directory's filesystem has no room "
			 "left, and this job's directory grew the most (%s in a look, %s in all)", grew, used);
		stop_for_disk(e, hog, why);
		eng_disk_release(e);
	}
	free(L);
	e->disk_at = now + (near ? ENG_DISK_LOOK_NEAR : ENG_DISK_LOOK);
	return e->disk_at;
}
