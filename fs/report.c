/* report.c - a job's plots/ and report.html: its metrics.csv drawn, its key files on one page */
#include "fs/report.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/report/metrics.h"
#include "engine/report/chart.h"
#include "engine/report/plots.h"

/* The plot a plots/ file kind shows. */
static enum dlh_plot plot_of(enum fs_kind kind)
{
	switch (kind) {
	case FS_JOB_PLOT_LOSS: return DLH_PLOT_LOSS;
	case FS_JOB_PLOT_ACCURACY: return DLH_PLOT_ACCURACY;
	case FS_JOB_PLOT_THROUGHPUT: return DLH_PLOT_THROUGHPUT;
	case FS_JOB_PLOT_PROGRESS: return DLH_PLOT_PROGRESS;
	default: return DLH_PLOTS;
	}
}

/* Appends at most max bytes of job id's real file of kind (spec, plan,
 * estimate) to out, opened as fs_real_open opens it (no link, never
 * waiting). Returns 0 (*cut = 1 when there was more), or -errno (-ENOENT:
 * not written). */
static int read_job_file(struct dlh_engine *e, long id, enum fs_kind kind, size_t max,
			 struct dlh_buf *out, int *cut)
{
	struct fs_node n = { .kind = kind, .id = id };
	char chunk[8192];
	int fd = fs_real_open(e, &n, 0), rc = 0;
	size_t got = 0;
	*cut = 0;
	if (fd < 0)
		return fd;
	while (!rc) {
		ssize_t k = read(fd, chunk, sizeof chunk);
		if (k < 0) {
			rc = errno == EINTR ? 0 : -errno;
			continue;
		}
		if (k == 0)
			break;
		if (got + (size_t)k > max) {
			k = (ssize_t)(max - got);
			*cut = 1;
		}
		rc = dlh_buf_append(out, chunk, (size_t)k);
		got += (size_t)k;
		if (*cut)
			break;
	}
	close(fd);
	return rc;
}

static void feed(void *ctx, const struct dlh_metrics_row *r)
{
	dlh_plots_feed(ctx, r);
}

/* The rows of the jobs drawn last, parsed: a stat (ls -l plots/) and the
 * reads that follow, or a finished job's report read again, do not parse
 * its metrics.csv each time, and a running job's plots parse only the rows
 * appended since they were last drawn. A slot holds one job's series and
 * where its scan stopped; the series are as they are while the file is the
 * same one of the same size and time. */
#define PARSED_SLOTS 8

struct parsed {
	long id;                   /* 0: empty */
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	struct dlh_metrics_mark mark;
	struct dlh_plots *p;       /* the series (about 100 KB) */
};

static struct parsed parsed[PARSED_SLOTS];   /* guarded by parsed_mu */
static unsigned parsed_next;
static pthread_mutex_t parsed_mu = PTHREAD_MUTEX_INITIALIZER;

static int same_file(const struct parsed *x, const struct stat *st)
{
	return x->dev == st->st_dev && x->ino == st->st_ino && x->size == st->st_size &&
	       x->mtime.tv_sec == st->st_mtim.tv_sec && x->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

/* Copies job id's series into p and where their scan stopped into *mark.
 * Returns 1 when they are those of the file st as it is, 2 when of an
 * earlier state of it (a scan on from *mark brings them up to date), 0
 * when job id has none kept. */
static int parsed_get(long id, const struct stat *st, struct dlh_plots *p,
		      struct dlh_metrics_mark *mark)
{
	int got = 0;
	pthread_mutex_lock(&parsed_mu);
	for (unsigned k = 0; k < PARSED_SLOTS && !got; k++)
		if (parsed[k].p && parsed[k].id == id) {
			*p = *parsed[k].p;
			*mark = parsed[k].mark;
			got = same_file(&parsed[k], st) ? 1 : 2;
		}
	pthread_mutex_unlock(&parsed_mu);
	return got;
}

/* Keeps p as job id's series parsed from the file st up to mark (its own
 * slot, else the oldest). */
static void parsed_put(long id, const struct stat *st, const struct dlh_metrics_mark *mark,
		       const struct dlh_plots *p)
{
	pthread_mutex_lock(&parsed_mu);
	unsigned k = 0;
	while (k < PARSED_SLOTS && parsed[k].id != id)
		k++;
	if (k == PARSED_SLOTS)
		k = parsed_next++ % PARSED_SLOTS;
	struct parsed *x = &parsed[k];
	if (!x->p)
		x->p = malloc(sizeof *x->p);
	if (x->p) {
		*x->p = *p;
		*x = (struct parsed){ .id = id, .dev = st->st_dev, .ino = st->st_ino,
				      .size = st->st_size, .mtime = st->st_mtim, .mark = *mark,
				      .p = x->p };
	}
	pthread_mutex_unlock(&parsed_mu);
}

/* The series of job j (*pp, malloc'd: the caller frees it) and what its
 * plots say besides (info, label): its rows, the estimate's seconds and
 * the run's steps. Returns 0, or -errno (*pp NULL). */
static int load(struct dlh_engine *e, const struct dlh_job *j, struct dlh_plots **pp,
		struct dlh_metrics_columns *cols, struct dlh_plot_info *info, char *label,
		size_t label_len)
{
	char dir[4096], csv[4200], v[64];
	struct dlh_run_info ri;
	struct stat st;
	struct dlh_plots *p = *pp = malloc(sizeof *p);
	if (!p)
		return -ENOMEM;
	dlh_plots_init(p);
	dlh_engine_job_dir(e, j->id, dir, sizeof dir);
	snprintf(csv, sizeof csv, "%s/" DLH_FILE_METRICS, dir);
	/* the file as it is now: a later change is parsed next time */
	struct dlh_metrics_mark mark = { 0 };
	int known = !lstat(csv, &st) && S_ISREG(st.st_mode);
	int kept = known ? parsed_get(j->id, &st, p, &mark) : 0;
	if (kept == 2 && !mark.ino)   /* kept while there was no file: nothing to go on from */
		kept = 0;
	if (kept != 1) {
		/* the rows appended since, else (none kept, or the file cut
		 * back by a resume) all of them again */
		int rc = kept == 2 ? dlh_metrics_scan_on(csv, FS_PLOT_CSV_MAX, &mark, feed, p) : -ESTALE;
		if (rc == -ESTALE) {
			dlh_plots_init(p);
			memset(&mark, 0, sizeof mark);
			rc = dlh_metrics_scan_on(csv, FS_PLOT_CSV_MAX, &mark, feed, p);
			p->partial = rc == 1;
		}
		if (rc < 0) {
			free(p);
			*pp = NULL;
			return rc;
		}
		if (known)
			parsed_put(j->id, &st, &mark, p);
	}
	if (dlh_metrics_columns_read(csv, cols))
		memset(cols, 0, sizeof *cols);
	snprintf(label, label_len, "job %ld%s%s%s", j->id, j->spec.name[0] ? " (" : "", j->spec.name,
		 j->spec.name[0] ? ")" : "");
	*info = (struct dlh_plot_info){ .job = label, .predicted_s = j->est_total };
	/* the steps of the run: what the trainer said (run.info) or a command's
	 * [job] steps, as progress has them; else the estimate's */
	if (dlh_run_info_read(dir, &ri))
		ri.valid = 0;
	info->total_steps = dlh_total_steps(&ri, &j->spec);
	if (!info->total_steps && j->est_total > 0) {
		struct dlh_buf est = { 0 };
		int cut;
		if (!read_job_file(e, j->id, FS_JOB_ESTIMATE, FS_REPORT_FILE_MAX, &est, &cut) && est.data &&
		    !dlh_kv_get(est.data, "steps", v, sizeof v))
			info->total_steps = strtol(v, NULL, 10);
		dlh_buf_free(&est);
	}
	return 0;
}

int fs_report_plot(struct dlh_engine *e, const struct dlh_job *j, enum fs_kind kind,
		   const char *name, struct dlh_buf *out)
{
	struct dlh_plots *p;
	struct dlh_metrics_columns cols;
	struct dlh_plot_info info;
	char label[320];
	int rc = load(e, j, &p, &cols, &info, label, sizeof label);
	if (!rc && kind == FS_JOB_PLOT_EXTRA) {
		int i = 0;
		while (i < cols.nextra && strcmp(cols.extra[i], name))
			i++;
		rc = i < cols.nextra ? dlh_plot_extra_svg(p, i, name, &info, out) : -ENOENT;
	} else if (!rc) {
		rc = dlh_plot_svg(p, plot_of(kind), &info, out);
	}
	free(p);
	return rc;
}

static int esc(struct dlh_buf *out, const char *s)
{
	return dlh_xml_escape(out, s, strlen(s));
}

/* One key file as a section: its name, then its text escaped (a note when
 * it is not there or was cut). */
static int section(struct dlh_buf *out, const char *name, const char *text, int cut)
{
	int rc = dlh_buf_printf(out, "<h2>%s</h2>\n", name);
	if (!text)
		return rc | dlh_buf_printf(out, "<p class=\"none\">not written yet</p>\n");
	rc |= dlh_buf_printf(out, "<pre>");
	rc |= esc(out, text);
	rc |= dlh_buf_printf(out, "</pre>\n");
	if (cut)
		rc |= dlh_buf_printf(out, "<p class=\"none\">(the first %d KiB)</p>\n",
				     FS_REPORT_FILE_MAX >> 10);
	return rc;
}

static const char report_style[] =
	"body{font-family:\"DejaVu Sans\",Arial,Helvetica,sans-serif;margin:16px;color:#222;"
	"background:#fff}\n"
	"h1{font-size:20px;margin:0 0 6px}h2{font-size:15px;margin:18px 0 4px}\n"
	".plots{display:grid;grid-template-columns:1fr 1fr;gap:10px;margin:12px 0}\n"
	".plots svg{width:100%;height:auto;border:1px solid #ddd}\n"
	"pre{background:#f6f6f6;padding:8px;font-size:12px;white-space:pre-wrap;"
	"overflow-wrap:anywhere}\n"
	".none{color:#777;font-size:12px}\n";

int fs_report_html(struct dlh_engine *e, const struct dlh_job *j, const struct fs_report_text *t,
		   struct dlh_buf *out)
{
	struct dlh_plots *p;
	struct dlh_metrics_columns cols;
	struct dlh_plot_info info;
	char label[320];
	int rc = load(e, j, &p, &cols, &info, label, sizeof label);
	if (rc)
		return rc;
	rc |= dlh_buf_printf(out, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
			     "<title>");
	rc |= esc(out, label);
	rc |= dlh_buf_printf(out, ": report</title>\n<style>\n%s</style>\n</head>\n<body>\n<h1>", report_style);
	rc |= esc(out, label);
	rc |= dlh_buf_printf(out, "</h1>\n<p class=\"status\">status: <b>%s</b>", dlh_status_name(j->status));
	if (j->reason[0]) {
		rc |= dlh_buf_printf(out, " (");
		rc |= esc(out, dlh_job_reason_full(j));   /* the page is private */
		rc |= dlh_buf_printf(out, ")");
	}
	rc |= dlh_buf_printf(out, "</p>\n<p class=\"progress\">");
	rc |= esc(out, t->progress ? t->progress : "");
	rc |= dlh_buf_printf(out, "</p>\n<div class=\"plots\">\n");
	for (int w = 0; w < DLH_PLOTS; w++)
		rc |= dlh_plot_svg(p, (enum dlh_plot)w, &info, out);
	for (int i = 0; i < cols.nextra; i++)
		rc |= dlh_plot_extra_svg(p, i, cols.extra[i], &info, out);
	rc |= dlh_buf_printf(out, "</div>\n");
	free(p);
	static const struct { const char *name; enum fs_kind kind; } files[] = {
		{ "spec", FS_JOB_SPEC }, { "plan", FS_JOB_PLAN }, { "estimate", FS_JOB_ESTIMATE },
	};
	for (size_t i = 0; i < sizeof files / sizeof files[0] && !rc; i++) {
		struct dlh_buf text = { 0 };
		int cut, got = read_job_file(e, j->id, files[i].kind, FS_REPORT_FILE_MAX, &text, &cut);
		rc = got == -ENOMEM ? got : section(out, files[i].name, got ? NULL : text.data ? text.data : "",
						   cut);
		dlh_buf_free(&text);
	}
	if (t->result)
		rc |= section(out, "result", t->result, 0);
	rc |= section(out, "metrics", t->metrics, 0);
	rc |= dlh_buf_printf(out, "</body>\n</html>\n");
	return rc ? -ENOMEM : 0;
}
