/* report.c - collects parse errors and writes them, in line order, into the caller's buffer */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema/keys.h"

#define TOO_MANY "spec: too many errors\n"

/* See keys.h: keeps the error, or counts it as dropped when full. */
void dlh_spec_error_add(struct dlh_spec_errors *es, int line, const char *fmt, ...)
{
	if (es->n >= DLH_SPEC_ERRORS_MAX) {
		es->dropped++;
		return;
	}
	struct dlh_spec_error *e = &es->e[es->n];
	e->line = line;
	e->seq = es->n;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof e->msg, fmt, ap);
	va_end(ap);
	es->n++;
}

/* See keys.h: 1 when some kept error is on line. */
int dlh_spec_error_on_line(const struct dlh_spec_errors *es, int line)
{
	for (int i = 0; i < es->n; i++)
		if (es->e[i].line == line)
			return 1;
	return 0;
}

/* qsort order: by line, then by discovery. */
static int by_line(const void *a, const void *b)
{
	const struct dlh_spec_error *x = a, *y = b;
	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Copies as much of s as fits at err + *pos (keeping a NUL), advancing *pos. */
static void put(char *err, size_t errlen, size_t *pos, const char *s)
{
	size_t len = strlen(s), room = errlen - 1 - *pos;
	if (len > room)
		len = room;
	memcpy(err + *pos, s, len);
	*pos += len;
	err[*pos] = '\0';
}

/* See keys.h: sorted lines, then the tail line when short of room. */
void dlh_spec_errors_render(struct dlh_spec_errors *es, char *err, size_t errlen)
{
	char line[DLH_SPEC_MSG_MAX + 32];
	size_t pos = 0, tail = strlen(TOO_MANY);
	if (!err || errlen == 0)
		return;
	err[0] = '\0';
	qsort(es->e, (size_t)es->n, sizeof es->e[0], by_line);
	for (int i = 0; i < es->n; i++) {
		const struct dlh_spec_error *e = &es->e[i];
		if (e->line > 0)
			snprintf(line, sizeof line, "spec:%d: %s\n", e->line, e->msg);
		else
			snprintf(line, sizeof line, "spec: %s\n", e->msg);
		size_t len = strlen(line);
		int last = i == es->n - 1 && !es->dropped;
		/* Room for this line, and for the tail line unless it is the last. */
		if (pos + len + (last ? 0 : tail) >= errlen) {
			/* The first error is worth more than the tail line. */
			if (pos == 0)
				put(err, errlen, &pos, line);
			put(err, errlen, &pos, TOO_MANY);
			return;
		}
		put(err, errlen, &pos, line);
	}
	if (es->dropped)
		put(err, errlen, &pos, TOO_MANY);
}
