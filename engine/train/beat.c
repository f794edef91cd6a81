/* beat.c - a rank's record of the job's heartbeat file, rewritten at a cadence */
#include "engine/train/beat.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "engine/contract/contract.h"
#include "engine/train/files.h"

int dlt_beat_open(struct dlt_beat *b, const char *dir, int rank, double every,
		  char *err, size_t errlen)
{
	char path[DLT_PATH_MAX];
	int rc;

	memset(b, 0, sizeof *b);
	b->fd = -1;
	b->rank = rank;
	b->pid = (long)getpid();
	b->every = every;
	b->step = -1;
	if (gethostname(b->host, sizeof b->host) < 0)
		snprintf(b->host, sizeof b->host, "localhost");
	b->host[sizeof b->host - 1] = '\0';
	if (dlt_path_join(path, sizeof path, dir, DLH_FILE_HEARTBEAT) < 0) {
		snprintf(err, errlen, "path \"%s/%s\" too long", dir, DLH_FILE_HEARTBEAT);
		return -ENAMETOOLONG;
	}
	b->fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (b->fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot write \"%s\": %s", path, strerror(-rc));
		return rc;
	}
	return 0;
}

int dlt_beat(struct dlt_beat *b, long step, double now, int force)
{
	char rec[DLH_HEARTBEAT_REC];
	struct dlh_heartbeat h = { .rank = b->rank, .step = step, .time = now, .pid = b->pid };

	if (b->fd < 0 || (!force && b->step >= 0 && now - b->last < b->every))
		return 0;
	snprintf(h.host, sizeof h.host, "%s", b->host);
	if (dlh_heartbeat_format(&h, rec, sizeof rec) != DLH_HEARTBEAT_REC)
		return -EOVERFLOW;
	ssize_t k = pwrite(b->fd, rec, sizeof rec, (off_t)b->rank * DLH_HEARTBEAT_REC);

	if (k != (ssize_t)sizeof rec) {
		int rc = k < 0 ? -errno : -EIO;

		close(b->fd);
		b->fd = -1;
		return rc;
	}
	b->last = now;
	b->step = step;
	return 1;
}

double dlt_beat_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void dlt_beat_close(struct dlt_beat *b)
{
	if (b->fd >= 0)
		close(b->fd);
	b->fd = -1;
}
