/* test_metrics.c - reading what a run appends (engine/report/metrics.c): metrics.csv */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/report/metrics.h"
#include "tests/unit/check.h"
#include "tests/unit/tmpdir.h"

TEST(metrics_read_newest_rows_and_ignore_partial_line)
{
	char dir[512], path[600];
	fresh_dir(dir, sizeof dir, "metrics");
	snprintf(path, sizeof path, "%s/metrics.csv", dir);
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	fprintf(f, "kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s\n");
	for (int s = 1; s <= 3000; s++) {
		fprintf(f, "train,%d,%d,%.3f,%.4f,0.5,0.05,1000\n", s, (s - 1) / 1000 + 1, s * 0.01, 3.0 / s);
		if (s == 1000)
			fprintf(f, "eval,1000,1,10.5,0.61,0.777,,\n");
	}
	fprintf(f, "train,3001,4,30.01,0.1"); /* being written */
	fclose(f);
	struct dlh_metrics m;
	CHECK(dlh_metrics_read(path, &m) == 0);
	CHECK(m.have_train && m.step == 3000 && m.epoch == 3);
	CHECK(m.have_eval && m.eval_step == 1000 && m.test_accuracy > 0.776 && m.test_accuracy < 0.778);
}

TEST(metrics_missing_file_is_empty)
{
	struct dlh_metrics m;
	CHECK(dlh_metrics_read("/nonexistent/metrics.csv", &m) == 0);
	CHECK(!m.have_train && !m.have_eval);
}

/* the recent step rate: the train row DLH_METRICS_RATE_ROWS before the
 * newest, eval rows skipped; rows of an earlier run (time_s starting over)
 * close the window; a [job] command's total is its [job] steps */
TEST(metrics_step_rate_over_the_newest_rows)
{
	char dir[512], path[600];
	fresh_dir(dir, sizeof dir, "rate");
	snprintf(path, sizeof path, "%s/metrics.csv", dir);
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	fprintf(f, "kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s\n");
	for (int s = 1; s <= 100; s++) {   /* 1 s a step, then 0.5 s from step 60 */
		fprintf(f, "train,%d,1,%.3f,0.5,0.5,0.1,10\n", s, s <= 60 ? s : 60 + (s - 60) * 0.5);
		if (s % 30 == 0)
			fprintf(f, "eval,%d,1,%.3f,0.6,0.7,,\n", s, s <= 60 ? s : 60 + (s - 60) * 0.5);
	}
	fclose(f);
	struct dlh_metrics m;
	CHECK(dlh_metrics_read(path, &m) == 0);
	CHECK(m.have_train && m.step == 100 && m.have_eval && m.eval_step == 90);
	CHECK_MSG(m.rate_step == 100 - DLH_METRICS_RATE_ROWS, "rate_step %ld", m.rate_step);
	double r = dlh_metrics_step_rate(&m);
	CHECK_MSG(r > 1.99 && r < 2.01, "rate %g", r);

	/* a run that started its clock over at step 91: the window stops there */
	f = fopen(path, "w");
	CHECK(f != NULL);
	for (int s = 1; s <= 100; s++)
		fprintf(f, "train,%d,1,%.3f,0.5,0.5,0.1,10\n", s, s <= 90 ? s * 1.0 : (s - 90) * 0.25);
	fclose(f);
	CHECK(dlh_metrics_read(path, &m) == 0);
	CHECK_MSG(m.rate_step == 91, "rate_step %ld", m.rate_step);
	r = dlh_metrics_step_rate(&m);
	CHECK_MSG(r > 3.99 && r < 4.01, "rate %g", r);

	/* one row: no rate */
	f = fopen(path, "w");
	CHECK(f != NULL);
	fprintf(f, "train,1,1,3.5,0.5,0.5,0.1,10\n");
	fclose(f);
	CHECK(dlh_metrics_read(path, &m) == 0);
	CHECK(m.have_train && m.rate_step == 0 && dlh_metrics_step_rate(&m) == 0);
}

TEST(total_steps_from_run_info_else_a_commands_spec)
{
	struct dlh_spec s;
	struct dlh_run_info ri = { .valid = 1, .total_steps = 9090 };
	dlh_spec_defaults(&s);
	s.steps = 120;                          /* ignored without a command */
	CHECK(dlh_total_steps(&ri, &s) == 9090);
	ri.valid = 0;
	CHECK(dlh_total_steps(&ri, &s) == 0);
	snprintf(s.command, sizeof s.command, "python3 train.py");
	CHECK(dlh_total_steps(&ri, &s) == 120);
	s.steps = 0;
	CHECK(dlh_total_steps(&ri, &s) == 0);
}

/* an eval row far back is found again without reading back to it (only
 * what was appended since is looked at), a newer one replaces it, and a
 * file cut back and written again is read anew */
TEST(metrics_eval_row_found_once_then_only_new_lines_are_read)
{
	char dir[512], path[600];
	fresh_dir(dir, sizeof dir, "evalseen");
	snprintf(path, sizeof path, "%s/metrics.csv", dir);
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	fprintf(f, "kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s\n");
	fprintf(f, "train,1,1,0.010,2.0,0.1,0.1,100\n");
	fprintf(f, "eval,1,1,0.020,1.5,0.42,,\n");
	for (int s = 2; s <= 20000; s++)   /* some 600 KB past it */
		fprintf(f, "train,%d,1,%.3f,1.0,0.5,0.1,100\n", s, s * 0.01);
	fclose(f);
	struct dlh_metrics m;
	CHECK(dlh_metrics_read(path, &m) == 0);
	CHECK(m.have_train && m.step == 20000 && m.have_eval && m.eval_step == 1);

	f = fopen(path, "a");
	CHECK(f != NULL);
	fprintf(f, "train,20001,1,200.010,1.0,0.5,0.1,100\n");
	fclose(f);
	CHECK(dlh_metrics_read(path, &m) == 0);
	CHECK(m.step == 20001 && m.have_eval && m.eval_step == 1 && m.test_accuracy > 0.41 &&
	      m.test_accuracy < 0.43);
	CHECK(dlh_metrics_read(path, &m) == 0);   /* nothing new */
	CHECK(m.step == 20001 && m.have_eval && m.eval_step == 1);

	f = fopen(path, "a");
	CHECK(f != NULL);
	fprintf(f, "eval,20001,1,200.020,0.9,0.66,,\ntrain,20002,2,200.030,1.0,0.5,0.1,100\n");
	fclose(f);
	CHECK(dlh_metrics_read(path, &m) == 0);
	CHECK(m.step == 20002 && m.have_eval && m.eval_step == 20001);

	/* cut back (as a resume does) and written again past where it was read:
	 * the eval rows are gone */
	f = fopen(path, "w");
	CHECK(f != NULL);
	fprintf(f, "kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s\n");
	for (int s = 1; s <= 30000; s++)
		fprintf(f, "train,%d,1,%.3f,1.5,0.5,0.1,100\n", s, s * 0.02);
	fclose(f);
	CHECK(dlh_metrics_read(path, &m) == 0);
	CHECK_MSG(m.step == 30000 && !m.have_eval, "step %ld, eval %d at %ld", m.step, m.have_eval,
		  m.eval_step);
}

/* What a scan fed: the steps of its rows, in order. */
struct fed {
	long step[400];
	int n;
};

static void feed_row(void *ctx, const struct dlh_metrics_row *r)
{
	struct fed *f = ctx;
	if (f->n < 400)
		f->step[f->n] = r->kind == DLH_ROW_EVAL ? -r->step : r->step;
	f->n++;
}

static int append(const char *path, const char *mode, long from, long to, double dt,
		  const char *tail)
{
	FILE *f = fopen(path, mode);
	if (!f)
		return -1;
	if (from == 1)
		fprintf(f, "kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s\n");
	for (long s = from; s <= to; s++) {
		fprintf(f, "train,%ld,1,%.3f,0.5,0.5,0.1,10\n", s, s * dt);
		if (s % 50 == 0)
			fprintf(f, "eval,%ld,1,%.3f,0.6,0.7,,\n", s, s * dt);
	}
	fputs(tail, f);
	return fclose(f);
}

/* 1 when fed holds the rows of steps from..to in file order, evals after every 50th. */
static int fed_steps(const struct fed *f, long from, long to)
{
	int i = 0;
	for (long s = from; s <= to; s++) {
		if (i >= f->n || f->step[i++] != s)
			return 0;
		if (s % 50 == 0 && (i >= f->n || f->step[i++] != -s))
			return 0;
	}
	return i == f->n;
}

/* a running job's plots parse only what was appended since the last look:
 * the scan goes on from its mark (a partial last line waits for its
 * newline), and refuses to when the file was cut back and written again
 * or replaced */
TEST(scan_on_feeds_only_the_rows_appended_since_its_mark)
{
	char dir[512], path[600], other[600];
	fresh_dir(dir, sizeof dir, "scan-on");
	snprintf(path, sizeof path, "%s/metrics.csv", dir);
	snprintf(other, sizeof other, "%s/other.csv", dir);
	struct dlh_metrics_mark mark = { 0 };
	struct fed f = { .n = 0 };
	CHECK(dlh_metrics_scan_on(path, 1 << 20, &mark, feed_row, &f) == 0 && f.n == 0 && !mark.ino);

	CHECK(append(path, "w", 1, 100, 0.1, "") == 0);
	CHECK(dlh_metrics_scan_on(path, 1 << 20, &mark, feed_row, &f) == 0);
	CHECK_MSG(fed_steps(&f, 1, 100), "%d rows fed", f.n);
	CHECK(mark.ino && mark.at > 0);

	f.n = 0;   /* nothing new: nothing fed */
	CHECK(dlh_metrics_scan_on(path, 1 << 20, &mark, feed_row, &f) == 0 && f.n == 0);

	CHECK(append(path, "a", 101, 150, 0.1, "train,151,1,15.1,0.") == 0);
	CHECK(dlh_metrics_scan_on(path, 1 << 20, &mark, feed_row, &f) == 0);
	CHECK_MSG(fed_steps(&f, 101, 150), "%d rows fed, the first step %ld", f.n, f.step[0]);

	f.n = 0;   /* the line being written, ended, and one more */
	FILE *a = fopen(path, "a");
	CHECK(a != NULL);
	fputs("5,0.5,0.1,10\ntrain,152,1,15.200,0.5,0.5,0.1,10\n", a);
	CHECK(fclose(a) == 0);
	CHECK(dlh_metrics_scan_on(path, 1 << 20, &mark, feed_row, &f) == 0);
	CHECK_MSG(fed_steps(&f, 151, 152), "%d rows fed, the first step %ld", f.n, f.step[0]);
	struct dlh_metrics_mark cut = mark;

	/* cut back by a resume and written again past the mark, other times */
	f.n = 0;
	CHECK(append(path, "w", 1, 200, 0.2, "") == 0);
	CHECK(dlh_metrics_scan_on(path, 1 << 20, &cut, feed_row, &f) == -ESTALE && f.n == 0);
	struct dlh_metrics_mark fresh = { 0 };
	CHECK(dlh_metrics_scan_on(path, 1 << 20, &fresh, feed_row, &f) == 0 && fed_steps(&f, 1, 200));

	/* replaced by another file (a rename over it) */
	f.n = 0;
	CHECK(append(other, "w", 1, 250, 0.2, "") == 0 && rename(other, path) == 0);
	CHECK(dlh_metrics_scan_on(path, 1 << 20, &fresh, feed_row, &f) == -ESTALE && f.n == 0);

	/* gone: the rows kept are of a file that is no more */
	CHECK(unlink(path) == 0);
	CHECK(dlh_metrics_scan_on(path, 1 << 20, &fresh, feed_row, &f) == -ESTALE && f.n == 0);
	struct dlh_metrics_mark none = { 0 };
	CHECK(dlh_metrics_scan_on(path, 1 << 20, &none, feed_row, &f) == 0 && f.n == 0);
}

/* Every row a scan feeds, as text: what two ways of reading compare. */
struct log {
	char *text;
	size_t len, cap;
};

static void log_row(void *ctx, const struct dlh_metrics_row *r)
{
	struct log *l = ctx;
	char line[DLH_METRICS_LINE_MAX];
	int n = dlh_metrics_row_format(r, line, sizeof line);
	if (n <= 0)
		return;
	if (l->len + (size_t)n + 1 > l->cap) {
		l->cap = (l->len + (size_t)n + 1) * 2;
		l->text = realloc(l->text, l->cap);
	}
	memcpy(l->text + l->len, line, (size_t)n);
	l->len += (size_t)n;
	l->text[l->len] = '\0';
}

/* What the plots do: go on from the mark, or start again when told to. */
static int look(const char *path, size_t max, struct dlh_metrics_mark *m, struct log *l,
		int *again)
{
	int rc = dlh_metrics_scan_on(path, max, m, log_row, l);
	if (rc != -ESTALE)
		return rc;
	(*again)++;
	l->len = 0;
	if (l->text)
		l->text[0] = '\0';
	memset(m, 0, sizeof *m);
	return dlh_metrics_scan_on(path, max, m, log_row, l);
}

static unsigned lcg(unsigned *x)
{
	*x = *x * 1103515245u + 12345u;
	return *x >> 8;
}

/* A file written in pieces cut anywhere (rows across 64 KiB reads, junk
 * lines longer than a row), looked at after each piece: the rows fed over
 * all the looks are one fresh scan's, also once the file is longer than
 * max and its rows begin later, and after it is cut back and written again. */
TEST(scan_on_over_pieces_cut_anywhere_feeds_what_one_scan_feeds)
{
	char dir[512], path[600];
	fresh_dir(dir, sizeof dir, "scan-pieces");
	snprintf(path, sizeof path, "%s/metrics.csv", dir);
	/* the whole text: rows, an eval every 40, a junk line of 700 bytes every 500 */
	size_t cap = 1 << 20, len = 0;
	char *all = malloc(cap);
	CHECK(all != NULL);
	len += (size_t)snprintf(all, cap, "kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s\n");
	for (long s = 1; len + 1024 < cap && s <= 9000; s++) {
		len += (size_t)snprintf(all + len, cap - len, "train,%ld,1,%.3f,%.4f,0.5,0.1,1000\n", s,
					s * 0.01, 3.0 / (double)s);
		if (s % 40 == 0)
			len += (size_t)snprintf(all + len, cap - len, "eval,%ld,1,%.3f,0.6,0.7,,\n", s, s * 0.01);
		if (s % 500 == 0) {
			memset(all + len, 'x', 700);
			all[len + 699] = '\n';
			len += 700;
		}
	}
	CHECK_MSG(len > 300 * 1024, "%zu bytes", len);
	size_t maxes[2] = { 1 << 20, 120 * 1024 };   /* the whole file; only its newest rows */
	for (int k = 0; k < 2; k++) {
		struct dlh_metrics_mark m = { 0 };
		struct log l = { 0 }, one = { 0 };
		int again = 0, looks = 0;
		unsigned x = 7u + (unsigned)k;
		FILE *f = fopen(path, "w");
		CHECK(f != NULL);
		for (size_t put = 0; put < len; looks++) {
			size_t piece = 1 + lcg(&x) % 40000;
			if (piece > len - put)
				piece = len - put;
			CHECK(fwrite(all + put, 1, piece, f) == piece && fflush(f) == 0);
			put += piece;
			CHECK(look(path, maxes[k], &m, &l, &again) >= 0);
		}
		fclose(f);
		CHECK(dlh_metrics_scan(path, maxes[k], log_row, &one) == (k == 1));
		CHECK_MSG(l.len == one.len && !memcmp(l.text, one.text, l.len),
			  "max %zu: %zu bytes of rows over %d looks (%d anew), %zu in one scan", maxes[k],
			  l.len, looks, again, one.len);
		/* the whole file: never anew; the newest rows: anew as they move on */
		CHECK_MSG(k == 0 ? again == 0 : again > 0, "%d looks anew", again);

		/* cut back below the mark (a resume) and written again past it
		 * before the next look: the bytes before the mark are not the same */
		CHECK(truncate(path, (off_t)(len / 2)) == 0);
		f = fopen(path, "a");
		CHECK(f != NULL);
		fputs("\ntrain,1,1,0.100,9.9,0.1,0.1,1\n", f);
		CHECK(fwrite(all + len / 2, 1, len - len / 2, f) == len - len / 2);
		fclose(f);
		again = 0;
		CHECK(look(path, maxes[k], &m, &l, &again) >= 0);
		CHECK_MSG(again == 1, "%d looks anew after the cut", again);
		one.len = 0;
		CHECK(dlh_metrics_scan(path, maxes[k], log_row, &one) >= 0);
		CHECK_MSG(l.len == one.len && !memcmp(l.text, one.text, l.len),
			  "after the cut: %zu bytes of rows, %zu in one scan", l.len, one.len);
		free(l.text);
		free(one.text);
	}
	free(all);
}

int main(void)
{
	if (tmp_root_make())
		return 1;
	RUN(metrics_read_newest_rows_and_ignore_partial_line);
	RUN(metrics_missing_file_is_empty);
	RUN(metrics_step_rate_over_the_newest_rows);
	RUN(total_steps_from_run_info_else_a_commands_spec);
	RUN(metrics_eval_row_found_once_then_only_new_lines_are_read);
	RUN(scan_on_feeds_only_the_rows_appended_since_its_mark);
	RUN(scan_on_over_pieces_cut_anywhere_feeds_what_one_scan_feeds);
	tmp_root_remove();
	return CHECK_EXIT();
}
