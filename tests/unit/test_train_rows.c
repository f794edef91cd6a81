/* test_train_rows.c - the trainer's rows and heartbeat off the step's path
 * (engine/train/metrics.c: struct dlt_rows; engine/train/beat.c) */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/contract/contract.h"
#include "engine/train/beat.h"
#include "engine/train/files.h"
#include "engine/train/metrics.h"
#include "tests/unit/check.h"
#include "tests/unit/tmpdir.h"

/* A train row of step s at time_s s / 100. */
static struct dlh_metrics_row train_row(long s)
{
	return (struct dlh_metrics_row){ .kind = DLH_ROW_TRAIN, .step = s, .epoch = 1,
					 .time_s = (double)s / 100, .loss = 1.5, .accuracy = 0.5,
					 .lr = 0.05, .samples_per_s = 1000 };
}

/* The size of the file at path, or -1. */
static long size_of(const char *path)
{
	struct stat st;

	return stat(path, &st) < 0 ? -1 : (long)st.st_size;
}

/* Reads path into a malloc'd string (*len its length). Returns it, or NULL. */
static char *slurp(const char *path, size_t *len)
{
	long n = size_of(path);
	char *buf = n < 0 ? NULL : malloc((size_t)n + 1);
	int fd = buf ? open(path, O_RDONLY) : -1;

	if (fd < 0 || read(fd, buf, (size_t)n) != n) {
		free(buf);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	close(fd);
	buf[n] = '\0';
	*len = (size_t)n;
	return buf;
}

/* Checks that text is the header, then train rows of steps 1..last, each
 * once, in order, every line whole; an eval row may follow any. Returns
 * the train rows seen, or -1 at the first line that is not so. */
static long rows_in_order(const char *text, size_t len)
{
	size_t h = strlen(DLH_METRICS_HEADER), at = h;
	long want = 1;

	if (len < h || memcmp(text, DLH_METRICS_HEADER, h) || text[len - 1] != '\n')
		return -1;
	while (at < len) {
		const char *nl = memchr(text + at, '\n', len - at);
		struct dlh_metrics_row r;

		if (!nl || dlh_metrics_row_parse(text + at, (size_t)(nl - text - at), &r))
			return -1;
		if (r.kind == DLH_ROW_TRAIN && r.step != want++)
			return -1;
		at = (size_t)(nl - text) + 1;
	}
	return want - 1;
}

/* dir/metrics.csv opened as the trainer opens it, cut to keep rows. */
static int open_rows(const char *dir, long keep, struct dlt_rows *w, double now)
{
	char err[DLT_ERR_MAX];
	int fd;

	if (dlt_metrics_open(dir, keep, &fd, err, sizeof err) < 0)
		return -1;
	dlt_rows_init(w, fd, DLT_ROWS_EVERY, now);
	return 0;
}

TEST(rows_wait_for_the_cadence_then_go_in_one_write)
{
	char dir[512], path[600], *text;
	static struct dlt_rows w;
	size_t len;

	fresh_dir(dir, sizeof dir, "cadence");
	snprintf(path, sizeof path, "%s/%s", dir, DLH_FILE_METRICS);
	CHECK(open_rows(dir, 0, &w, 10.0) == 0);
	const long header = size_of(path);
	struct dlh_metrics_row r1 = train_row(1), r2 = train_row(2), r3 = train_row(3);

	CHECK(dlt_rows_add(&w, &r1, 10.1) == 0 && dlt_rows_add(&w, &r2, 10.49) == 0);
	CHECK_MSG(size_of(path) == header, "held rows written early: %ld bytes", size_of(path));
	CHECK(dlt_rows_add(&w, &r3, 10.5) == 0);   /* DLT_ROWS_EVERY after the open */
	CHECK(w.len == 0);
	text = slurp(path, &len);
	CHECK(text != NULL);
	CHECK_MSG(strcmp(text, DLH_METRICS_HEADER
			 "train,1,1,0.010,1.5,0.5,0.05,1000.0\n"
			 "train,2,1,0.020,1.5,0.5,0.05,1000.0\n"
			 "train,3,1,0.030,1.5,0.5,0.05,1000.0\n") == 0, "got:\n%s", text);
	free(text);
	/* the wait starts again at that write */
	struct dlh_metrics_row r4 = train_row(4);
	CHECK(dlt_rows_add(&w, &r4, 10.9) == 0 && w.len > 0);
	close(w.fd);
}

/* Each write(2) carries whole lines: through a pipe every read returns
 * what one write wrote, and it ends in a newline. */
TEST(rows_every_write_is_whole_lines)
{
	static struct dlt_rows w;
	static char got[DLT_ROWS_BUF + DLH_METRICS_LINE_MAX];
	int p[2];
	long writes = 0, rows = 0;

	CHECK(pipe(p) == 0);
	CHECK(fcntl(p[0], F_SETFL, O_NONBLOCK) == 0);
	dlt_rows_init(&w, p[1], DLT_ROWS_EVERY, 0.0);
	for (long s = 1; s <= 6000; s++) {   /* about 3 buffers at one instant */
		struct dlh_metrics_row r = train_row(s);

		CHECK(dlt_rows_add(&w, &r, 0.1) == 0);
		ssize_t n = read(p[0], got, sizeof got);

		if (n > 0) {
			writes++;
			CHECK_MSG(got[n - 1] == '\n', "a write of %zd bytes ends mid-line", n);
			CHECK((size_t)n <= DLT_ROWS_BUF);
			for (ssize_t i = 0; i < n; i++)
				rows += got[i] == '\n';
		}
	}
	CHECK(dlt_rows_flush(&w, 0.2) == 0);
	ssize_t n = read(p[0], got, sizeof got);
	CHECK(n > 0 && got[n - 1] == '\n');
	for (ssize_t i = 0; i < n; i++)
		rows += got[i] == '\n';
	CHECK_MSG(writes >= 2 && rows == 6000, "%ld writes before the flush, %ld rows", writes, rows);
	close(p[0]);
	close(p[1]);
}

/* A full buffer goes before the row that does not fit; a flush writes
 * what is held once: no row lost, none twice. */
TEST(rows_full_buffer_and_flush_lose_and_repeat_nothing)
{
	char dir[512], path[600], *text;
	static struct dlt_rows w;
	size_t len;

	fresh_dir(dir, sizeof dir, "full");
	snprintf(path, sizeof path, "%s/%s", dir, DLH_FILE_METRICS);
	CHECK(open_rows(dir, 0, &w, 0.0) == 0);
	for (long s = 1; s <= 2500; s++) {
		struct dlh_metrics_row r = train_row(s);

		CHECK(dlt_rows_add(&w, &r, 0.0) == 0);
		CHECK(w.len <= sizeof w.buf);
	}
	CHECK(size_of(path) > (long)strlen(DLH_METRICS_HEADER) && w.len > 0);
	CHECK(dlt_rows_flush(&w, 0.0) == 0 && w.len == 0);
	CHECK(dlt_rows_flush(&w, 0.0) == 0);   /* nothing held: nothing written */
	text = slurp(path, &len);
	CHECK(text != NULL);
	long n = rows_in_order(text, len);
	free(text);
	CHECK_MSG(n == 2500, "%ld rows in order", n);
	close(w.fd);
}

/* A checkpoint at step 6 flushes first; a crash then loses only rows after
 * it, held or written, and a resume cut back to step 6 records every step
 * once. */
TEST(rows_after_a_crash_resume_once_each)
{
	char dir[512], path[600], *text;
	static struct dlt_rows w;
	size_t len;

	fresh_dir(dir, sizeof dir, "crash");
	snprintf(path, sizeof path, "%s/%s", dir, DLH_FILE_METRICS);
	CHECK(open_rows(dir, 0, &w, 0.0) == 0);
	for (long s = 1; s <= 9; s++) {
		struct dlh_metrics_row r = train_row(s);

		CHECK(dlt_rows_add(&w, &r, 0.01 * (double)s) == 0);
		if (s == 6)   /* what save() does before the checkpoint */
			CHECK(dlt_rows_flush(&w, 0.06) == 0);
		if (s == 8) {   /* an eval row, written at once */
			struct dlh_metrics_row e = { .kind = DLH_ROW_EVAL, .step = 8, .epoch = 1,
						     .time_s = 0.085, .loss = 1, .accuracy = 0.5 };
			CHECK(dlt_rows_add(&w, &e, 0.085) == 0 && dlt_rows_flush(&w, 0.085) == 0);
		}
	}
	CHECK(w.len > 0);   /* row 9 held: lost with the process */
	close(w.fd);
	CHECK(open_rows(dir, 6, &w, 1.0) == 0);   /* the resume from step 6 */
	for (long s = 7; s <= 12; s++) {
		struct dlh_metrics_row r = train_row(s);

		CHECK(dlt_rows_add(&w, &r, 1.0) == 0);
	}
	CHECK(dlt_rows_flush(&w, 1.0) == 0);   /* the exit */
	close(w.fd);
	text = slurp(path, &len);
	CHECK(text != NULL);
	long n = rows_in_order(text, len);
	int evals = strstr(text, "\neval,") != NULL;
	free(text);
	CHECK_MSG(n == 12 && !evals, "%ld rows in order, %d eval rows past the checkpoint", n, evals);
}

TEST(rows_a_failed_write_is_kept_and_said)
{
	char dir[512], path[600];
	static struct dlt_rows w;
	struct dlh_metrics_row r = train_row(1);
	int fd;

	fresh_dir(dir, sizeof dir, "fail");
	snprintf(path, sizeof path, "%s/x", dir);
	fd = open(path, O_RDONLY | O_CREAT, 0644);
	CHECK(fd >= 0);
	dlt_rows_init(&w, fd, DLT_ROWS_EVERY, 0.0);
	CHECK(dlt_rows_add(&w, &r, 0.1) == 0);
	CHECK(dlt_rows_flush(&w, 0.2) == -EBADF);
	CHECK(dlt_rows_add(&w, &r, 0.3) == -EBADF && dlt_rows_flush(&w, 0.4) == -EBADF);
	close(fd);
}

/* Reads rank's record of dir/heartbeat into h. Returns 0, or -1. */
static int record(const char *dir, int rank, struct dlh_heartbeat *h)
{
	char path[600], rec[DLH_HEARTBEAT_REC];
	int fd;
	ssize_t n;

	snprintf(path, sizeof path, "%s/%s", dir, DLH_FILE_HEARTBEAT);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	n = pread(fd, rec, sizeof rec, (off_t)rank * DLH_HEARTBEAT_REC);
	close(fd);
	return n == (ssize_t)sizeof rec ? dlh_heartbeat_parse(rec, sizeof rec, h) : -1;
}

TEST(heartbeat_is_rewritten_at_most_every_half_second_unless_forced)
{
	char dir[512], err[DLT_ERR_MAX];
	struct dlt_beat b;
	struct dlh_heartbeat h;

	fresh_dir(dir, sizeof dir, "beat");
	CHECK_MSG(dlt_beat_open(&b, dir, 2, DLT_BEAT_EVERY, err, sizeof err) == 0, "%s", err);
	CHECK(dlt_beat(&b, 0, 100.0, 0) == 1);   /* the first always */
	CHECK(record(dir, 2, &h) == 0 && h.rank == 2 && h.step == 0 && h.pid == (long)getpid());
	CHECK(dlt_beat(&b, 1, 100.2, 0) == 0 && dlt_beat(&b, 2, 100.49, 0) == 0);
	CHECK(record(dir, 2, &h) == 0 && h.step == 0 && h.time == 100.0);
	CHECK(dlt_beat(&b, 3, 100.5, 0) == 1);
	CHECK(record(dir, 2, &h) == 0 && h.step == 3 && h.time == 100.5);
	CHECK(dlt_beat(&b, 4, 100.6, 1) == 1);   /* before an evaluation, a checkpoint, the end */
	CHECK(record(dir, 2, &h) == 0 && h.step == 4);
	CHECK(record(dir, 0, &h) != 0);   /* the other ranks' records are theirs */
	/* a step longer than the cadence rewrites it after every step */
	for (long s = 5; s <= 8; s++)
		CHECK(dlt_beat(&b, s, 100.6 + (double)(s - 4), 0) == 1);
	CHECK(record(dir, 2, &h) == 0 && h.step == 8);
	dlt_beat_close(&b);
	CHECK(b.fd == -1);
}

TEST(heartbeat_unwritable_is_said_and_skipped)
{
	char err[DLT_ERR_MAX];
	struct dlt_beat b;

	CHECK(dlt_beat_open(&b, "/nonexistent/job", 0, DLT_BEAT_EVERY, err, sizeof err) == -ENOENT);
	CHECK_MSG(strstr(err, "/nonexistent/job/heartbeat") != NULL, "%s", err);
	CHECK(dlt_beat(&b, 1, 1.0, 1) == 0);
	dlt_beat_close(&b);
}

int main(void)
{
	if (tmp_root_make() < 0)
		return 1;
	RUN(rows_wait_for_the_cadence_then_go_in_one_write);
	RUN(rows_every_write_is_whole_lines);
	RUN(rows_full_buffer_and_flush_lose_and_repeat_nothing);
	RUN(rows_after_a_crash_resume_once_each);
	RUN(rows_a_failed_write_is_kept_and_said);
	RUN(heartbeat_is_rewritten_at_most_every_half_second_unless_forced);
	RUN(heartbeat_unwritable_is_said_and_skipped);
	tmp_root_remove();
	return CHECK_EXIT();
}
