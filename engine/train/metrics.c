/* metrics.c - the job directory's text files: metrics.csv, run.info, result */
#include "engine/train/metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/train/files.h"

#define DLT_RUNINFO_MAX (64 * 1024)    /* run.info text, room for 1024 ranks */

/* Returns the step of a metrics row of len bytes, or -1 when the line is
 * not one. */
static long row_step(const char *line, size_t len)
{
	struct dlh_metrics_row r;

	return dlh_metrics_row_parse(line, len, &r) ? -1 : r.step;
}

/* Returns the offset just after the last line to keep: the header and
 * the complete rows with step <= keep_step, up to the first other line. */
static size_t keep_length(const char *text, size_t len, long keep_step)
{
	size_t pos = 0;

	while (pos < len) {
		const char *nl = memchr(text + pos, '\n', len - pos);

		if (!nl)
			break;   /* a partial last line goes */
		size_t n = (size_t)(nl - (text + pos));
		int header = pos == 0 && n + 1 == strlen(DLH_METRICS_HEADER) &&
			     memcmp(text, DLH_METRICS_HEADER, n) == 0;

		if (!header) {
			long step = row_step(text + pos, n);

			if (step < 0 || step > keep_step)
				break;
		}
		pos += n + 1;
	}
	return pos;
}

int dlt_metrics_open(const char *dir, long keep_step, int *fd,
		     char *err, size_t errlen)
{
	char path[DLT_PATH_MAX];
	struct stat st;
	char *text = NULL;
	size_t keep = 0;
	int rc = 0, f;

	if (dlt_path_join(path, sizeof path, dir, DLH_FILE_METRICS) < 0) {
		snprintf(err, errlen, "path \"%s/%s\" too long", dir, DLH_FILE_METRICS);
		return -ENAMETOOLONG;
	}
	f = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (f < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot open \"%s\": %s", path, strerror(-rc));
		return rc;
	}
	if (fstat(f, &st) < 0) {
		rc = -errno;
		goto fail;
	}
	if (st.st_size > 0) {
		size_t len = (size_t)st.st_size, got = 0;

		text = malloc(len);
		if (!text) {
			rc = -ENOMEM;
			goto fail;
		}
		while (got < len) {
			ssize_t k = pread(f, text + got, len - got, (off_t)got);

			if (k < 0 && errno == EINTR)
				continue;
			if (k < 0) {
				rc = -errno;
				goto fail;
			}
			if (k == 0)
				break;
			got += (size_t)k;
		}
		keep = keep_length(text, got, keep_step);
		if (keep < (size_t)st.st_size && ftruncate(f, (off_t)keep) < 0) {
			rc = -errno;
			goto fail;
		}
	}
	if (keep == 0) {
		rc = dlt_write_all(f, DLH_METRICS_HEADER, strlen(DLH_METRICS_HEADER));
		if (rc < 0)
			goto fail;
	}
	free(text);
	*fd = f;
	return 0;
fail:
	snprintf(err, errlen, "cannot update \"%s\": %s", path, strerror(-rc));
	free(text);
	close(f);
	return rc;
}

/* Writes one formatted line with one write(2). Returns 0, or -errno. */
static int put_line(int fd, const char *line, int n)
{
	ssize_t k;

	if (n < 0 || n >= DLH_METRICS_LINE_MAX)
		return -EOVERFLOW;
	do
		k = write(fd, line, (size_t)n);
	while (k < 0 && errno == EINTR);
	if (k < 0)
		return -errno;
	return k == n ? 0 : -EIO;
}

int dlt_metrics_train(int fd, long step, int epoch, double time_s,
		      double loss, double acc, double lr, double samples_per_s)
{
	char line[DLH_METRICS_LINE_MAX];
	struct dlh_metrics_row r = {
		.kind = DLH_ROW_TRAIN, .step = step, .epoch = epoch, .time_s = time_s,
		.loss = loss, .accuracy = acc, .lr = lr, .samples_per_s = samples_per_s,
	};

	return put_line(fd, line, dlh_metrics_row_format(&r, line, sizeof line));
}

int dlt_metrics_eval(int fd, long step, int epoch, double time_s,
		     double loss, double acc)
{
	char line[DLH_METRICS_LINE_MAX];
	struct dlh_metrics_row r = {
		.kind = DLH_ROW_EVAL, .step = step, .epoch = epoch, .time_s = time_s,
		.loss = loss, .accuracy = acc,
	};

	return put_line(fd, line, dlh_metrics_row_format(&r, line, sizeof line));
}

void dlt_rows_init(struct dlt_rows *w, int fd, double every, double now)
{
	w->fd = fd;
	w->every = every;
	w->last = now;
	w->err = 0;
	w->len = 0;
}

int dlt_rows_flush(struct dlt_rows *w, double now)
{
	ssize_t k;

	if (w->err)
		return w->err;
	if (w->len == 0) {
		w->last = now;
		return 0;
	}
	do
		k = write(w->fd, w->buf, w->len);
	while (k < 0 && errno == EINTR);
	if (k < 0)
		w->err = -errno;
	else if ((size_t)k < w->len)   /* a full disk, a limit: end the line at least */
		w->err = dlt_write_all(w->fd, w->buf + k, w->len - (size_t)k);
	if (w->err)
		return w->err;
	w->len = 0;
	w->last = now;
	return 0;
}

int dlt_rows_add(struct dlt_rows *w, const struct dlh_metrics_row *r, double now)
{
	char line[DLH_METRICS_LINE_MAX];
	int n = dlh_metrics_row_format(r, line, sizeof line), rc;

	if (w->err)
		return w->err;
	if (n < 0 || n >= DLH_METRICS_LINE_MAX)
		return -EOVERFLOW;
	if (w->len + (size_t)n > sizeof w->buf && (rc = dlt_rows_flush(w, now)) < 0)
		return rc;
	memcpy(w->buf + w->len, line, (size_t)n);
	w->len += (size_t)n;
	return now - w->last >= w->every ? dlt_rows_flush(w, now) : 0;
}

int dlt_runinfo_write(const char *dir, const struct dlt_runinfo *ri,
		      char *err, size_t errlen)
{
	char path[DLT_PATH_MAX];
	char *text = malloc(DLT_RUNINFO_MAX);
	size_t n = 0;
	int rc;

	if (!text) {
		snprintf(err, errlen, "cannot write \"%s/%s\": %s", dir, DLH_FILE_RUNINFO,
			 strerror(ENOMEM));
		return -ENOMEM;
	}
	n += (size_t)snprintf(text + n, DLT_RUNINFO_MAX - n, "ranks=%d\nbatch_per_rank=", ri->ranks);
	for (int r = 0; r < ri->ranks && n < DLT_RUNINFO_MAX; r++)
		n += (size_t)snprintf(text + n, DLT_RUNINFO_MAX - n, "%s%d", r ? "," : "", ri->batch[r]);
	if (n < DLT_RUNINFO_MAX)
		n += (size_t)snprintf(text + n, DLT_RUNINFO_MAX - n,
				      "\ntrain_samples=%ld\ntest_samples=%ld\n"
				      "steps_per_epoch=%ld\ntotal_steps=%ld\nparams=%zu\n"
				      "start_step=%ld\n",
				      ri->train_samples, ri->test_samples,
				      ri->steps_per_epoch, ri->total_steps,
				      ri->params, ri->start_step);
	if (n < DLT_RUNINFO_MAX && ri->model)
		n += (size_t)snprintf(text + n, DLT_RUNINFO_MAX - n,
				      "model=%s\noptimizer=%s\ngradient_buckets=%d\nallreduce=%s\n",
				      ri->model, ri->optimizer ? ri->optimizer : "", ri->buckets,
				      ri->allreduce ? ri->allreduce : "");
	if (n >= DLT_RUNINFO_MAX || dlt_path_join(path, sizeof path, dir, DLH_FILE_RUNINFO) < 0) {
		snprintf(err, errlen, "cannot write \"%s/%s\": %s", dir, DLH_FILE_RUNINFO,
			 strerror(EOVERFLOW));
		free(text);
		return -EOVERFLOW;
	}
	rc = dlt_write_atomic_str(path, text, err, errlen);
	free(text);
	return rc;
}

int dlt_result_write(const char *dir, const struct dlt_result *r,
		     char *err, size_t errlen)
{
	char path[DLT_PATH_MAX], text[1024 + DLT_PATH_MAX];
	int n = snprintf(text, sizeof text,
			 "test_accuracy=%.6g\ntest_loss=%.6g\ntrain_loss=%.6g\n"
			 "epochs=%d\nsteps=%ld\nsamples_per_s=%.1f\n"
			 "train_time_s=%.3f\nmodel=%s\n",
			 r->test_accuracy, r->test_loss, r->train_loss, r->epochs,
			 r->steps, r->samples_per_s, r->train_time_s, r->model);

	if (n < 0 || (size_t)n >= sizeof text ||
	    dlt_path_join(path, sizeof path, dir, DLH_FILE_RESULT) < 0) {
		snprintf(err, errlen, "cannot write \"%s/%s\": %s", dir, DLH_FILE_RESULT,
			 strerror(EOVERFLOW));
		return -EOVERFLOW;
	}
	return dlt_write_atomic_str(path, text, err, errlen);
}
