/* contract.c - the one formatter and the one parser of a metrics.csv row and
 * of a heartbeat record */
#include "engine/contract/contract.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int dlh_metrics_row_format(const struct dlh_metrics_row *r, char *buf, size_t len)
{
	int n;

	if (r->kind == DLH_ROW_TRAIN)
		n = snprintf(buf, len, "train,%ld,%d,%.3f,%.6g,%.6g,%.6g,%.1f", r->step, r->epoch,
			     r->time_s, r->loss, r->accuracy, r->lr, r->samples_per_s);
	else
		n = snprintf(buf, len, "eval,%ld,%d,%.3f,%.6g,%.6g,,", r->step, r->epoch,
			     r->time_s, r->loss, r->accuracy);
	for (int i = 0; i < r->nextra && i < DLH_METRICS_EXTRA_MAX && n >= 0 && (size_t)n < len; i++)
		n += isnan(r->extra[i]) ? snprintf(buf + n, len - (size_t)n, ",") :
					  snprintf(buf + n, len - (size_t)n, ",%.6g", r->extra[i]);
	if (n >= 0 && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, "\n");
	return n < 0 || (size_t)n >= len ? -EOVERFLOW : n;
}

#define ROW_COLS (8 + DLH_METRICS_EXTRA_MAX)   /* most columns a row has */

/* Splits row (modified) at commas into col[]. Returns the number of columns,
 * or -1 when there are more than ROW_COLS. */
static int split(char *row, char *col[ROW_COLS])
{
	int n = 0;

	for (char *p = row;; p++) {
		if (n == ROW_COLS)
			return -1;
		col[n++] = p;
		p = strchr(p, ',');
		if (!p)
			return n;
		*p = '\0';
	}
}

/* A whole column as a number. Returns 0, or -EINVAL. */
static int num(const char *s, double *out)
{
	char *end;

	if (!*s)
		return -EINVAL;
	*out = strtod(s, &end);
	return *end ? -EINVAL : 0;
}

static int whole(const char *s, long *out)
{
	char *end;

	if (!*s)
		return -EINVAL;
	errno = 0;
	*out = strtol(s, &end, 10);
	return *end || errno ? -EINVAL : 0;
}

int dlh_metrics_row_parse(const char *line, size_t len, struct dlh_metrics_row *r)
{
	char row[DLH_METRICS_LINE_MAX], *col[ROW_COLS];
	long step, epoch;

	while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
		len--;
	if (len >= sizeof row || memchr(line, '\n', len))
		return -EINVAL;
	memcpy(row, line, len);
	row[len] = '\0';
	int n = split(row, col);
	if (n < 6)
		return -EINVAL;
	memset(r, 0, sizeof *r);
	if (!strcmp(col[0], "train")) {
		if (n < 8 || num(col[6], &r->lr) || num(col[7], &r->samples_per_s))
			return -EINVAL;
		r->kind = DLH_ROW_TRAIN;
	} else if (!strcmp(col[0], "eval")) {
		for (int i = 6; i < n && i < 8; i++)   /* empty in the rows dlh-train writes */
			if (*col[i] && num(col[i], i == 6 ? &r->lr : &r->samples_per_s))
				return -EINVAL;
		r->kind = DLH_ROW_EVAL;
	} else {
		return -EINVAL;
	}
	if (whole(col[1], &step) || step < 0 || whole(col[2], &epoch) || epoch < 0 ||
	    epoch > 1000000000L || num(col[3], &r->time_s) || num(col[4], &r->loss) ||
	    num(col[5], &r->accuracy))
		return -EINVAL;
	r->step = step;
	r->epoch = (int)epoch;
	for (int i = 8; i < n; i++) {
		double *v = &r->extra[r->nextra++];
		if (!*col[i])
			*v = NAN;
		else if (num(col[i], v))
			return -EINVAL;
	}
	return 0;
}

/* 1 when name may be an extra column's: [A-Za-z][A-Za-z0-9_]*, short
 * enough, not one of the eight. */
static int extra_name_ok(const char *name)
{
	static const char *const eight[] = { "kind", "step", "epoch", "time_s", "loss",
					     "accuracy", "lr", "samples_per_s" };
	size_t len = strlen(name);
	if (!len || len >= DLH_METRICS_NAME_MAX ||
	    !((*name >= 'a' && *name <= 'z') || (*name >= 'A' && *name <= 'Z')) ||
	    strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != len)
		return 0;
	for (size_t i = 0; i < sizeof eight / sizeof eight[0]; i++)
		if (!strcmp(name, eight[i]))
			return 0;
	return 1;
}

int dlh_metrics_header_parse(const char *line, size_t len, struct dlh_metrics_columns *c)
{
	char row[DLH_METRICS_LINE_MAX], *col[ROW_COLS];
	size_t base = strlen(DLH_METRICS_HEADER) - 1;   /* the eight names, no newline */

	memset(c, 0, sizeof *c);
	while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
		len--;
	if (len < base || memcmp(line, DLH_METRICS_HEADER, base) || len >= sizeof row ||
	    memchr(line, '\n', len))
		return -EINVAL;
	if (len == base)
		return 0;
	if (line[base] != ',')
		return -EINVAL;
	memcpy(row, line + base + 1, len - base - 1);
	row[len - base - 1] = '\0';
	int n = split(row, col);
	if (n < 0 || n > DLH_METRICS_EXTRA_MAX)
		return -EINVAL;
	for (int i = 0; i < n; i++) {
		if (!extra_name_ok(col[i]))
			return -EINVAL;
		for (int k = 0; k < i; k++)
			if (!strcmp(col[k], col[i]))
				return -EINVAL;
		snprintf(c->extra[i], sizeof c->extra[i], "%s", col[i]);
	}
	c->nextra = n;
	return 0;
}

int dlh_heartbeat_format(const struct dlh_heartbeat *h, char *buf, size_t len)
{
	if (len < DLH_HEARTBEAT_REC)
		return -EOVERFLOW;
	int n = snprintf(buf, len, "rank=%ld step=%ld time=%.3f pid=%ld host=%.63s", h->rank,
			 h->step, h->time, h->pid, h->host);
	if (n < 0 || n >= DLH_HEARTBEAT_REC)
		return -EOVERFLOW;
	memset(buf + n, ' ', (size_t)(DLH_HEARTBEAT_REC - 1 - n));
	buf[DLH_HEARTBEAT_REC - 1] = '\n';
	return DLH_HEARTBEAT_REC;
}

int dlh_heartbeat_parse(const char *rec, size_t len, struct dlh_heartbeat *h)
{
	char line[DLH_HEARTBEAT_REC + 1];
	int at = 0;
	if (len < DLH_HEARTBEAT_REC || rec[DLH_HEARTBEAT_REC - 1] != '\n')
		return -EINVAL;
	memcpy(line, rec, DLH_HEARTBEAT_REC);
	line[DLH_HEARTBEAT_REC] = '\0';
	memset(h, 0, sizeof *h);
	if (sscanf(line, "rank=%ld step=%ld time=%lf pid=%ld host=%63s%n", &h->rank, &h->step,
		   &h->time, &h->pid, h->host, &at) != 5 || at <= 0 || h->rank < 0 || h->pid <= 0)
		return -EINVAL;
	return 0;
}
