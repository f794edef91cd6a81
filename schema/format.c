/* format.c - dlh_spec_format: a spec as normalized INI text, every key in table order */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema/keys.h"

/* Output position in the caller's buffer. */
struct out {
	char *buf;      /* the caller's buffer */
	size_t len;     /* its size */
	size_t pos;     /* bytes written so far */
	int full;       /* 1 once something did not fit */
};

/* Appends printf-formatted text, or marks the output full. */
static void emit(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(struct out *o, const char *fmt, ...)
{
	if (o->full)
		return;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(o->buf + o->pos, o->len - o->pos, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= o->len - o->pos)
		o->full = 1;
	else
		o->pos += (size_t)n;
}

/* Writes x as "%g" when that reads back as x (the plain form for up to
 * six digits: 100, 0.05, 1e-06), else with the fewest digits beyond six
 * that strtod reads back as x. */
static void shortest(char *buf, size_t n, double x)
{
	snprintf(buf, n, "%g", x);
	for (int prec = 7; prec <= 17 && strtod(buf, NULL) != x; prec++)
		snprintf(buf, n, "%.*g", prec, x);
}

/* Writes the normalized text of k's value in s into v (n bytes). */
static void value_text(const struct dlh_key *k, const struct dlh_spec *s, char *v, size_t n)
{
	const char *field = (const char *)s + k->off;
	int i;
	long l;
	uint64_t u;
	double d;
	v[0] = '\0';
	switch (k->kind) {
	case DLH_KIND_NAME:
	case DLH_KIND_COMMAND:
	case DLH_KIND_PATH:
	case DLH_KIND_WORD:
		snprintf(v, n, "%.*s", (int)k->size, field);
		break;
	case DLH_KIND_ENV:   /* none: the entries have a line each (dlh_spec_format) */
		break;
	case DLH_KIND_ENUM:
		memcpy(&i, field, sizeof i);
		for (int w = 0; k->words[w]; w++)
			if (w == i)
				snprintf(v, n, "%s", k->words[w]);
		break;
	case DLH_KIND_INT:
		memcpy(&i, field, sizeof i);
		snprintf(v, n, "%d", i);
		break;
	case DLH_KIND_RANKS:
		memcpy(&i, field, sizeof i);
		if (i == 0)
			snprintf(v, n, "auto");
		else
			snprintf(v, n, "%d", i);
		break;
	case DLH_KIND_LONG:
		memcpy(&l, field, sizeof l);
		snprintf(v, n, "%ld", l);
		break;
	case DLH_KIND_U64:
		memcpy(&u, field, sizeof u);
		snprintf(v, n, "%" PRIu64, u);
		break;
	case DLH_KIND_DOUBLE:
		memcpy(&d, field, sizeof d);
		shortest(v, n, d);
		break;
	case DLH_KIND_RATE:
		memcpy(&d, field, sizeof d);
		if (d == 0.0)
			snprintf(v, n, "auto");
		else
			shortest(v, n, d);
		break;
	case DLH_KIND_LAYERS: {
		int count, w[DLH_LAYERS_MAX];
		memcpy(&count, (const char *)s + k->count_off, sizeof count);
		memcpy(w, field, sizeof w);
		size_t o = 0;
		for (int j = 0; j < count && j < DLH_LAYERS_MAX && o < n; j++) {
			int m = snprintf(v + o, n - o, "%s%d", j ? ", " : "", w[j]);
			if (m < 0)
				break;
			o += (size_t)m;
		}
		break;
	}
	case DLH_KIND_DURATION:
		memcpy(&l, field, sizeof l);
		if (l == 0)
			snprintf(v, n, "0");
		else
			snprintf(v, n, "%ld:%02ld:%02ld", l / 3600, l / 60 % 60, l % 60);
		break;
	case DLH_KIND_SIZE: {
		long long b;
		int u = 0;
		memcpy(&b, field, sizeof b);
		while (b && b % 1024 == 0 && u < 4) {
			b /= 1024;
			u++;
		}
		snprintf(v, n, "%lld%s", b, u ? (const char *[]){ "", "K", "M", "G", "T" }[u] : "");
		break;
	}
	case DLH_KIND_CONV: {
		size_t o = 0;
		for (int j = 0; j < s->nconv && j < DLH_CONV_MAX && o < n; j++) {
			int m = snprintf(v + o, n - o, "%s%d:%d", j ? ", " : "", s->conv_filters[j],
					 s->conv_kernel[j]);
			if (m < 0)
				break;
			o += (size_t)m;
		}
		break;
	}
	}
}

/* 1 when key k's field in s is all zero bytes. */
static int zero(const struct dlh_spec *s, const struct dlh_key *k)
{
	const unsigned char *f = (const unsigned char *)s + k->off;
	for (size_t i = 0; i < k->size; i++)
		if (f[i])
			return 0;
	return 1;
}

/* Writes s as normalized INI: "[section]" headers in table order, a blank
 * line between sections, "key = value" (or "key =" for an empty value, and
 * "key =;value" for one that starts with a comment character); [job] env
 * as a line per entry, none when it has none.
 * The spec should come from dlh_spec_parse or dlh_spec_defaults; then
 * parsing the text gives back an equal spec. Returns the length written
 * (without the NUL), or -ENOSPC when len is too small. */
int dlh_spec_format(const struct dlh_spec *s, char *buf, size_t len)
{
	struct out o = { buf, len, 0, len == 0 };
	const char *section = NULL;
	char v[DLH_PATH_MAX + DLH_COMMAND_MAX + 2];
	for (int i = 0; i < dlh_spec_nkeys; i++) {
		const struct dlh_key *k = &dlh_spec_keys[i];
		if (dlh_spec_applies(s, i))
			continue; /* e.g. conv of an mlp: not part of this spec */
		if (k->command_own && s->command[0] && zero(s, k))
			continue; /* a program's own batch or rate: not given */
		if (!section || strcmp(section, k->section))
			emit(&o, "%s[%s]\n", section ? "\n" : "", k->section);
		section = k->section;
		if (k->kind == DLH_KIND_ENV) {   /* one line an entry; none without */
			for (const char *e = s->env; *e; e = strchr(e, '\n') + 1)
				emit(&o, "%s = %.*s\n", k->name, (int)strcspn(e, "\n"), e);
			continue;
		}
		value_text(k, s, v, sizeof v);
		/* a value that starts with ';' or '#' follows '=' directly: after
		 * a blank, inih would read it as a comment (and the value as empty) */
		emit(&o, "%s =%s%s\n", k->name, v[0] && v[0] != ';' && v[0] != '#' ? " " : "", v);
	}
	if (o.full) {
		if (len)
			buf[0] = '\0';
		return -ENOSPC;
	}
	return (int)o.pos;
}
