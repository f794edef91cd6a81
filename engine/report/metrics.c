/* metrics.c - reading what rank 0 appends: metrics.csv, run.info, result */
#include "engine/report/metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/contract/contract.h"
#include "engine/util/util.h"

#define CHUNK (64 * 1024)

/* Where the backward scan stands in the window of the recent step rate. */
struct rate_scan {
	int rows;              /* train rows seen past the newest */
	int done;              /* the window is closed */
	long step;             /* the step and time of the last row taken */
	double time_s;
};

/* Parses one complete row into m (rows come newest first); returns 1 when
 * it filled something new. */
static int take_row(const char *line, size_t len, struct dlh_metrics *m, struct rate_scan *w)
{
	struct dlh_metrics_row r;
	if (dlh_metrics_row_parse(line, len, &r))
		return 0;
	if (m->have_train && r.kind == DLH_ROW_TRAIN && !w->done) {
		if (r.step >= w->step || r.time_s >= w->time_s) {
			w->done = 1;   /* out of order: another run's rows */
			return 0;
		}
		m->rate_step = w->step = r.step;
		m->rate_time_s = w->time_s = r.time_s;
		w->done = ++w->rows >= DLH_METRICS_RATE_ROWS;
		return 1;
	}
	if (!m->have_train && r.kind == DLH_ROW_TRAIN) {
		w->step = r.step;
		w->time_s = r.time_s;
		m->have_train = 1;
		m->step = r.step;
		m->epoch = r.epoch;
		m->time_s = r.time_s;
		m->loss = r.loss;
		m->accuracy = r.accuracy;
		m->lr = r.lr;
		m->samples_per_s = r.samples_per_s;
		m->train_nextra = r.nextra;
		memcpy(m->train_extra, r.extra, sizeof r.extra);
		return 1;
	}
	if (!m->have_eval && r.kind == DLH_ROW_EVAL) {
		m->have_eval = 1;
		m->eval_step = r.step;
		m->eval_epoch = r.epoch;
		m->eval_time_s = r.time_s;
		m->test_loss = r.loss;
		m->test_accuracy = r.accuracy;
		m->eval_nextra = r.nextra;
		memcpy(m->eval_extra, r.extra, sizeof r.extra);
		return 1;
	}
	return 0;
}

/* Opens csv_path for reading as the run's owner cannot trick us into: no
 * link, no FIFO, never waiting. Returns the descriptor with its stat in
 * *st, -ENODATA when there are no rows to read (missing, a link, a special
 * file), or -errno. */
static int open_csv(const char *csv_path, struct stat *st)
{
	/* the run's owner writes there: no link, no FIFO */
	int fd = open(csv_path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)   /* none yet, or a link: no rows */
		return errno == ENOENT || errno == ELOOP ? -ENODATA : -errno;
	if (fstat(fd, st)) {
		int e = -errno;
		close(fd);
		return e;
	}
	if (!S_ISREG(st->st_mode)) {   /* a FIFO or the like: no rows */
		close(fd);
		return -ENODATA;
	}
	return fd;
}

/* Where the newest eval row of a file was, as an earlier read found it: a
 * read looks for eval rows only in the lines appended since (a run that
 * writes few or none would otherwise be read far back at every look: a
 * command's progress, each tick of fs/kcache.c). The row is checked still
 * there (a resume cuts metrics.csv back) before it is used. */
#define EVAL_SEEN_SLOTS 64

struct eval_seen {
	dev_t dev;
	ino_t ino;                 /* 0: empty */
	off_t scanned;             /* the lines before this offset were looked at */
	off_t last_at;             /* the last of them: its offset, length and hash (a file
				      cut back and written again no longer has it) */
	size_t last_len;
	uint64_t last_sum;
	int have;                  /* an eval row is among them */
	off_t at;                  /* the newest: its offset, length and hash */
	size_t len;
	uint64_t sum;
	struct dlh_metrics m;      /* its fields (the eval ones) */
};

static struct eval_seen eval_seen[EVAL_SEEN_SLOTS];   /* guarded by eval_mu */
static unsigned eval_next;
static pthread_mutex_t eval_mu = PTHREAD_MUTEX_INITIALIZER;

/* 1 when len bytes at at in fd hash to sum. */
static int line_still(int fd, off_t at, size_t len, uint64_t sum)
{
	char line[512];
	return len <= sizeof line && pread(fd, line, len, at) == (ssize_t)len &&
	       dlh_hash(line, len) == sum;
}

/* What was seen of st's file: *out, when its last line looked at and its
 * eval row (if any) are still where they were. Returns 1 then. */
static int eval_seen_get(int fd, const struct stat *st, struct eval_seen *out)
{
	int found = 0;
	pthread_mutex_lock(&eval_mu);
	for (unsigned k = 0; k < EVAL_SEEN_SLOTS && !found; k++)
		if (eval_seen[k].ino == st->st_ino && eval_seen[k].dev == st->st_dev) {
			*out = eval_seen[k];
			found = out->scanned <= st->st_size;
		}
	pthread_mutex_unlock(&eval_mu);
	return found && line_still(fd, out->last_at, out->last_len, out->last_sum) &&
	       (!out->have || line_still(fd, out->at, out->len, out->sum));
}

static void eval_seen_put(const struct stat *st, const struct eval_seen *x)
{
	pthread_mutex_lock(&eval_mu);
	unsigned k = 0;
	while (k < EVAL_SEEN_SLOTS && !(eval_seen[k].ino == st->st_ino && eval_seen[k].dev == st->st_dev))
		k++;
	if (k == EVAL_SEEN_SLOTS)
		k = eval_next++ % EVAL_SEEN_SLOTS;
	eval_seen[k] = *x;
	eval_seen[k].dev = st->st_dev;
	eval_seen[k].ino = st->st_ino;
	pthread_mutex_unlock(&eval_mu);
}

/* The extra columns of fd's header line (its first), into c. Returns 0
 * (none when the first line is not a whole header), or -errno. */
static int header_columns(int fd, struct dlh_metrics_columns *c)
{
	char line[DLH_METRICS_LINE_MAX];
	memset(c, 0, sizeof *c);
	ssize_t got = pread(fd, line, sizeof line, 0);
	if (got < 0)
		return -errno;
	char *nl = memchr(line, '\n', (size_t)got);
	if (nl && dlh_metrics_header_parse(line, (size_t)(nl - line), c))
		memset(c, 0, sizeof *c);
	return 0;
}

int dlh_metrics_columns_read(const char *csv_path, struct dlh_metrics_columns *c)
{
	struct stat st;
	memset(c, 0, sizeof *c);
	int fd = open_csv(csv_path, &st);
	if (fd < 0)
		return fd == -ENODATA ? 0 : fd;
	int rc = header_columns(fd, c);
	close(fd);
	return rc;
}

int dlh_metrics_read(const char *csv_path, struct dlh_metrics *m)
{
	struct stat st;
	memset(m, 0, sizeof *m);
	int fd = open_csv(csv_path, &st);
	if (fd < 0)
		return fd == -ENODATA ? 0 : fd;
	char *buf = malloc(CHUNK + 512);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	/* Walk back in chunks; carry the partial first line of each chunk into
	 * the next read by overlapping reads at line boundaries. */
	off_t end = st.st_size;
	int partial_tail = 1; /* the very last line may still be being written */
	int rc = 0;
	struct rate_scan w = { 0, 0, 0, 0 };
	/* rows older than DLH_METRICS_BACK_MAX are not looked for: a run with
	 * no eval row (a command's) would be read whole at every look */
	off_t floor_at = st.st_size > DLH_METRICS_BACK_MAX ? st.st_size - DLH_METRICS_BACK_MAX : 0;
	/* eval rows are looked for only past what an earlier read looked at */
	struct eval_seen was = { 0 }, now = { 0 };
	int known = eval_seen_get(fd, &st, &was);
	off_t eval_floor = known ? was.scanned : 0;
	int tail_known = 0;   /* now.scanned set: the end of the last whole line */
	int complete = 0;     /* every line an eval row is looked for in was looked at */
	while (end > floor_at &&
	       !(m->have_train && w.done && (m->have_eval || end <= eval_floor))) {
		off_t start = end > CHUNK ? end - CHUNK : 0;
		size_t n = (size_t)(end - start);
		ssize_t got = pread(fd, buf, n, start);
		if (got < 0) {
			rc = -errno;
			break;
		}
		if ((size_t)got < n)
			partial_tail = 1; /* truncated under us (a resume): last line may be cut */
		n = (size_t)got;
		size_t stop = n;
		if (partial_tail) {
			while (stop > 0 && buf[stop - 1] != '\n')
				stop--;
			partial_tail = 0;
		}
		if (end == st.st_size && stop > 0) {   /* the last whole line, to know the file again */
			size_t l = stop - 1;
			while (l > 0 && buf[l - 1] != '\n')
				l--;
			now.scanned = start + (off_t)stop;
			now.last_at = start + (off_t)l;
			now.last_len = stop - l;
			now.last_sum = dlh_hash(buf + l, now.last_len);
			tail_known = l > 0 || start == 0;   /* the line began in this chunk */
		}
		/* lines in buf[first..stop), scanned newest first */
		size_t first = 0;
		if (start > 0) {
			while (first < stop && buf[first] != '\n')
				first++;
			first++;
		}
		size_t e = stop;
		while (e > first) {
			size_t s = e - 1; /* e-1 is the newline ending this line */
			while (s > first && buf[s - 1] != '\n')
				s--;
			int had_eval = m->have_eval;
			take_row(buf + s, e - 1 - s, m, &w);
			if (!had_eval && m->have_eval) {   /* where it is, to check next time */
				now.have = 1;
				now.at = start + (off_t)s;
				now.len = e - 1 - s;
				now.sum = dlh_hash(buf + s, now.len);
			}
			if (m->have_train && w.done && (m->have_eval || start + (off_t)s <= eval_floor)) {
				complete = 1;
				break;
			}
			e = s;
		}
		if (start == 0) {
			complete = 1;
			break;
		}
		/* re-read the cut first line as part of the previous chunk */
		if (start + (off_t)first >= end)
			break; /* a single line longer than a chunk: not ours */
		end = start + (off_t)first;
	}
	if (!rc) {
		/* none appended since: the one an earlier read found */
		if (!m->have_eval && known && was.have) {
			m->have_eval = 1;
			m->eval_step = was.m.eval_step;
			m->eval_epoch = was.m.eval_epoch;
			m->eval_time_s = was.m.eval_time_s;
			m->test_loss = was.m.test_loss;
			m->test_accuracy = was.m.test_accuracy;
			m->eval_nextra = was.m.eval_nextra;
			memcpy(m->eval_extra, was.m.eval_extra, sizeof m->eval_extra);
			now.have = 1;
			now.at = was.at;
			now.len = was.len;
			now.sum = was.sum;
		}
		if (now.have)
			now.m = *m;
		if (m->have_train || m->have_eval)
			rc = header_columns(fd, &m->cols);
		/* kept when the scan found the newest eval row or went past the
		 * earlier mark (or to the start, or as far back as it looks) */
		if (tail_known && (complete || end <= eval_floor || end <= floor_at))
			eval_seen_put(&st, &now);
	}
	free(buf);
	close(fd);
	return rc;
}

double dlh_metrics_step_rate(const struct dlh_metrics *m)
{
	if (!m->have_train || !m->rate_step || m->time_s <= m->rate_time_s)
		return 0;
	return (double)(m->step - m->rate_step) / (m->time_s - m->rate_time_s);
}

double dlh_metrics_eta(const struct dlh_metrics *m, long total, long global_batch)
{
	double left = (double)(total - m->step), rate;
	if (!m->have_train || left <= 0)
		return 0;
	/* the current rate, not the average: start-up would skew an average */
	if (global_batch > 0 && m->samples_per_s > 0 && isfinite(m->samples_per_s))
		return left * (double)global_batch / m->samples_per_s;
	rate = dlh_metrics_step_rate(m);
	if (rate > 0)
		return left / rate;
	return m->step > 0 && m->time_s > 0 ? m->time_s * left / (double)m->step : 0;
}

long dlh_total_steps(const struct dlh_run_info *ri, const struct dlh_spec *s)
{
	if (ri->valid)
		return ri->total_steps;
	return s->command[0] && s->steps > 0 ? s->steps : 0;
}

int dlh_run_info_read(const char *dir, struct dlh_run_info *ri)
{
	char path[4096], v[64];
	char *text;
	memset(ri, 0, sizeof *ri);
	snprintf(path, sizeof path, "%s/%s", dir, DLH_FILE_RUNINFO);
	int rc = dlh_read_file_nofollow(path, 64 * 1024, &text, NULL);
	if (rc)
		return rc;
	if (!dlh_kv_get(text, "steps_per_epoch", v, sizeof v))
		ri->steps_per_epoch = strtol(v, NULL, 10);
	if (!dlh_kv_get(text, "total_steps", v, sizeof v))
		ri->total_steps = strtol(v, NULL, 10);
	if (!dlh_kv_get(text, "train_samples", v, sizeof v))
		ri->train_samples = strtol(v, NULL, 10);
	if (!dlh_kv_get(text, "test_samples", v, sizeof v))
		ri->test_samples = strtol(v, NULL, 10);
	ri->valid = ri->total_steps > 0;
	free(text);
	return 0;
}

int dlh_metrics_scan(const char *csv_path, size_t max_bytes,
		     void (*row)(void *ctx, const struct dlh_metrics_row *r), void *ctx)
{
	struct dlh_metrics_mark mark = { 0 };
	return dlh_metrics_scan_on(csv_path, max_bytes, &mark, row, ctx);
}

/* 1 when fd still holds the bytes before m's end that m recorded. */
static int mark_holds(int fd, const struct dlh_metrics_mark *m)
{
	return !m->last_len || line_still(fd, m->last_at, m->last_len, m->last_sum);
}

/* The bytes before at (up to 512) of buf, whose first byte is at offset
 * base of the file, into m: what a later scan checks still there. */
static void mark_tail(struct dlh_metrics_mark *m, const char *buf, off_t base, size_t end)
{
	size_t len = end < 512 ? end : 512;
	m->at = base + (off_t)end;
	m->last_at = m->at - (off_t)len;
	m->last_len = len;
	m->last_sum = dlh_hash(buf + end - len, len);
}

int dlh_metrics_scan_on(const char *csv_path, size_t max_bytes, struct dlh_metrics_mark *mark,
			void (*row)(void *ctx, const struct dlh_metrics_row *r), void *ctx)
{
	struct stat st;
	int on = mark->ino != 0;
	int fd = open_csv(csv_path, &st);
	if (fd < 0) {
		if (fd != -ENODATA)
			return fd;
		if (on)
			return -ESTALE;   /* the rows kept are of a file gone */
		return 0;
	}
	/* the file the mark was taken from, still holding the bytes before it,
	 * whose rows still begin where they began */
	off_t window = (uintmax_t)st.st_size > (uintmax_t)max_bytes ? st.st_size - (off_t)max_bytes - 1 : 0;
	if (on && (mark->ino != st.st_ino || mark->dev != st.st_dev || mark->at > st.st_size ||
		   window > mark->from || !mark_holds(fd, mark))) {
		close(fd);
		return -ESTALE;
	}
	/* lines end in buf; carry holds the start of one a chunk cut */
	char *buf = malloc(CHUNK + DLH_METRICS_LINE_MAX);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	off_t end = st.st_size, at = on ? mark->at : window;
	int rc = !on && window > 0;   /* 1: only the newest rows */
	int skipping = rc;   /* inside a line not to parse: cut by the start, or too long */
	size_t carry = 0;
	struct dlh_metrics_mark now = *mark;
	if (!on)   /* from the byte before the newest max_bytes: a line that begins exactly there is whole */
		now = (struct dlh_metrics_mark){ .dev = st.st_dev, .ino = st.st_ino, .from = window, .at = window };
	struct dlh_metrics_row r;
	while (at < end) {
		size_t want = (size_t)(end - at) < CHUNK ? (size_t)(end - at) : CHUNK;
		off_t base = at - (off_t)carry;   /* the file offset of buf[0] */
		ssize_t got = pread(fd, buf + carry, want, at);
		if (got < 0) {
			rc = -errno;
			break;
		}
		if (got == 0)
			break;   /* cut back under us (a resume) */
		at += got;
		size_t n = carry + (size_t)got, s = 0;
		for (size_t i = 0; i < n; i++) {
			if (buf[i] != '\n')
				continue;
			if (!skipping && !dlh_metrics_row_parse(buf + s, i - s, &r))
				row(ctx, &r);
			skipping = 0;
			s = i + 1;
		}
		if (s > 0)
			mark_tail(&now, buf, base, s);
		carry = n - s;   /* a line not ended yet */
		if (skipping || carry >= DLH_METRICS_LINE_MAX) {
			skipping = 1;   /* longer than any row: not one */
			carry = 0;
		} else {
			memmove(buf, buf + s, carry);
		}
	}
	free(buf);
	/* cut back while it was read: what was fed may mix two runs' rows */
	struct stat after;
	if (rc >= 0 && (fstat(fd, &after) || after.st_size < now.at || (on && !mark_holds(fd, mark))))
		rc = -ESTALE;
	close(fd);
	if (rc >= 0)
		*mark = now;
	return rc;
}
