/* resume.c - a [job] command run again (a restart, a resume): where its
 * program takes up
 *
 * dlh-train finds its own checkpoint; a user's program gets told: the
 * newest file of its checkpoints/ (the one `latest` names, else the newest
 * by modification time) as DLH_RESUME_FROM, and the step it was taken at
 * (the last number in its name, `step-40.pt` -> 40; else the program's last
 * train row) as DLH_START_STEP. metrics.csv is cut back to that step, so
 * that the rows the program writes again are not there twice. After every
 * run dlhfs points `latest` at the newest checkpoint when the program did
 * not. Everything in the job's directory is its owner's: read and written
 * without following links, regular files only. */
#include "engine/run/resume.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/contract/contract.h"
#include "engine/report/metrics.h"
#include "engine/util/util.h"

/* 1 when name is one of the program's checkpoints (not latest, not hidden,
 * not a temporary). */
static int is_ckpt(const char *name)
{
	return name[0] != '.' && strcmp(name, DLH_FILE_LATEST) && !strstr(name, ".tmp");
}

/* The newest checkpoint in job_dir's checkpoints/ by modification time
 * into name. Returns 0, or -ENOENT. */
static int newest_by_time(const char *job_dir, char *name, size_t len)
{
	DIR *d = dlh_opendir_beneath(job_dir, DLH_DIR_CHECKPOINTS);
	struct timespec best = { 0, 0 };
	int found = -ENOENT;
	if (!d)
		return -ENOENT;
	for (struct dirent *de; (de = readdir(d));) {
		struct stat st;
		if (!is_ckpt(de->d_name) ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		if (found || st.st_mtim.tv_sec > best.tv_sec ||
		    (st.st_mtim.tv_sec == best.tv_sec && st.st_mtim.tv_nsec > best.tv_nsec)) {
			best = st.st_mtim;
			snprintf(name, len, "%s", de->d_name);
			found = 0;
		}
	}
	closedir(d);
	return found;
}

/* The checkpoint `latest` names, when it names one that is there, into
 * name. Returns 0, or -ENOENT. */
static int named_latest(const char *job_dir, char *name, size_t len)
{
	char rel[600], text[300] = "";
	struct stat st;
	int fd = dlh_open_beneath(job_dir, DLH_DIR_CHECKPOINTS "/" DLH_FILE_LATEST);
	if (fd < 0)
		return -ENOENT;
	ssize_t n = read(fd, text, sizeof text - 1);
	close(fd);
	text[n > 0 ? n : 0] = '\0';
	text[strcspn(text, "\n")] = '\0';
	snprintf(rel, sizeof rel, DLH_DIR_CHECKPOINTS "/%s", text);
	if (!text[0] || strchr(text, '/') || !is_ckpt(text) ||
	    dlh_stat_beneath(job_dir, rel, &st) || !S_ISREG(st.st_mode))
		return -ENOENT;
	snprintf(name, len, "%s", text);
	return 0;
}

int eng_ckpt_newest(const char *job_dir, char *name, size_t len)
{
	return named_latest(job_dir, name, len) ? newest_by_time(job_dir, name, len) : 0;
}

long eng_ckpt_step(const char *name)
{
	long step = -1;
	for (const char *s = name; *s; s++)
		if (*s >= '0' && *s <= '9' && (s == name || s[-1] < '0' || s[-1] > '9'))
			step = strtol(s, NULL, 10);
	return step;
}

int eng_metrics_keep(const char *csv, long step)
{
	char *text = NULL;
	size_t len = 0;
	int rc = dlh_read_file_nofollow(csv, 64 << 20, &text, &len);
	if (rc)
		return rc == -ENOENT ? 0 : rc;
	size_t keep = 0;
	for (size_t at = 0; at < len;) {
		char *nl = memchr(text + at, '\n', len - at);
		if (!nl)
			break;   /* a cut last row: not kept */
		size_t n = (size_t)(nl - (text + at)) + 1;
		struct dlh_metrics_row r;
		if (!dlh_metrics_row_parse(text + at, n, &r) && r.step > step)
			break;
		at += n;
		keep = at;
	}
	free(text);
	if (keep == len)
		return 0;
	int fd = open(csv, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	rc = fd < 0 ? -errno : fstat(fd, &st) < 0 ? -errno :
	     !S_ISREG(st.st_mode) || st.st_nlink != 1 ? -EPERM :
	     ftruncate(fd, (off_t)keep) < 0 ? -errno : 0;
	if (fd >= 0)
		close(fd);
	return rc;
}

int eng_resume_point(const char *job_dir, char *path, size_t len, long *step)
{
	char name[256], csv[4200];
	if (eng_ckpt_newest(job_dir, name, sizeof name))
		return -ENOENT;
	snprintf(path, len, "%s/" DLH_DIR_CHECKPOINTS "/%s", job_dir, name);
	*step = eng_ckpt_step(name);
	if (*step < 0) {   /* a name without a number: the program's last train row */
		struct dlh_metrics m;
		snprintf(csv, sizeof csv, "%s/" DLH_FILE_METRICS, job_dir);
		*step = !dlh_metrics_read(csv, &m) && m.have_train ? m.step : 0;
	}
	return 0;
}

void eng_latest_update(const char *job_dir, uid_t uid, gid_t gid)
{
	char name[256], now[256], line[300];
	if (newest_by_time(job_dir, name, sizeof name))
		return;
	if (!named_latest(job_dir, now, sizeof now) && !strcmp(now, name))
		return;   /* latest names it already */
	/* through a descriptor of the real directory: a link the owner put in
	 * its place is never followed */
	DIR *d = dlh_opendir_beneath(job_dir, DLH_DIR_CHECKPOINTS);
	if (!d)
		return;
	int n = snprintf(line, sizeof line, "%s\n", name);
	int dfd = dirfd(d);
	unlinkat(dfd, DLH_FILE_LATEST ".tmp", 0);
	int fd = openat(dfd, DLH_FILE_LATEST ".tmp", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
			O_CLOEXEC, 0644);
	if (fd >= 0) {
		int ok = write(fd, line, (size_t)n) == n && fsync(fd) == 0;
		if (geteuid() == 0 && fchown(fd, uid, gid) < 0)
			ok = 0;
		close(fd);
		if (!ok || renameat(dfd, DLH_FILE_LATEST ".tmp", dfd, DLH_FILE_LATEST) < 0)
			unlinkat(dfd, DLH_FILE_LATEST ".tmp", 0);
	}
	closedir(d);
}

int eng_take_up(const char *job_dir, uid_t uid, gid_t gid, char *path, size_t len, long *step,
		char *why, size_t whylen)
{
	char csv[4200];
	why[0] = '\0';
	eng_latest_update(job_dir, uid, gid);
	if (eng_resume_point(job_dir, path, len, step))
		return -ENOENT;
	snprintf(csv, sizeof csv, "%s/" DLH_FILE_METRICS, job_dir);
	int rc = eng_metrics_keep(csv, *step);
	if (rc)
		snprintf(why, whylen, "cannot cut %s back to step %ld: %s", DLH_FILE_METRICS, *step,
			 strerror(-rc));
	return 0;
}
