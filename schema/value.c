/* value.c - parses one key's value text by its kind (strict numbers, words, names, paths, layer lists) */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema/keys.h"

#define QUOTE_MAX 60   /* bytes of a bad value shown in a message */

/* Writes text as "text" into out, cut to max bytes (plus "..."), with
 * control characters written as \t or \xNN. NUL-terminates when n > 0. */
void dlh_spec_quote(char *out, size_t n, const char *text, size_t max)
{
	size_t o = 0, i;
	if (n == 0)
		return;
#define PUT(c) do { if (o + 1 < n) out[o++] = (c); } while (0)
	PUT('"');
	for (i = 0; text[i] && i < max; i++) {
		unsigned char c = (unsigned char)text[i];
		if (c == '\t') {
			PUT('\\'); PUT('t');
		} else if (c < 0x20 || c == 0x7f) {
			char hex[5];
			snprintf(hex, sizeof hex, "\\x%02x", c);
			for (int j = 0; hex[j]; j++)
				PUT(hex[j]);
		} else {
			PUT((char)c);
		}
	}
	if (text[i]) {
		PUT('.'); PUT('.'); PUT('.');
	}
	PUT('"');
#undef PUT
	out[o] = '\0';
}

/* printf into msg followed by the quoted value: `<fmt>, got "value"`.
 * Returns -1 so callers can `return fail(...)`. */
static int fail(char *msg, size_t n, const char *value, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail(char *msg, size_t n, const char *value, const char *fmt, ...)
{
	char q[QUOTE_MAX * 4 + 8];
	va_list ap;
	va_start(ap, fmt);
	int len = vsnprintf(msg, n, fmt, ap);
	va_end(ap);
	if (len >= 0 && value && (size_t)len < n) {
		dlh_spec_quote(q, sizeof q, value, QUOTE_MAX);
		snprintf(msg + len, n - (size_t)len, ", got %s", q);
	}
	return -1;
}

/* Parses a whole base-10 integer: optional sign, then digits only.
 * Returns 0, -1 when v is not an integer, or -2 when it overflows. */
static int parse_ll(const char *v, long long *out)
{
	const char *d = (*v == '+' || *v == '-') ? v + 1 : v;
	if (*d < '0' || *d > '9')
		return -1;
	char *end;
	errno = 0;
	long long x = strtoll(v, &end, 10);
	if (*end)
		return -1;
	if (errno == ERANGE)
		return -2;
	*out = x;
	return 0;
}

/* Parses a whole uint64_t: optional '+', digits; "-0" (any zeros) is 0.
 * Returns 0, or -1 when v is not one or does not fit. */
static int parse_u64(const char *v, uint64_t *out)
{
	if (*v == '-') {
		if (!v[1])
			return -1;
		for (const char *p = v + 1; *p; p++)
			if (*p != '0')
				return -1;
		*out = 0;
		return 0;
	}
	const char *d = (*v == '+') ? v + 1 : v;
	if (*d < '0' || *d > '9')
		return -1;
	char *end;
	errno = 0;
	unsigned long long x = strtoull(v, &end, 10);
	if (*end || errno == ERANGE || x > UINT64_MAX)
		return -1;
	*out = (uint64_t)x;
	return 0;
}

/* Parses a finite decimal number (digits, '.', exponent; no hex, nan or
 * inf). Returns 0, -1 when v is not a number, or -2 when out of double
 * range (overflow or underflow). */
static int parse_double(const char *v, double *out)
{
	int digits = 0;
	if (!*v)
		return -1;
	for (const char *p = v; *p; p++) {
		if (*p >= '0' && *p <= '9')
			digits = 1;
		else if (!strchr("+-.eE", *p))
			return -1;
	}
	if (!digits)
		return -1;
	char *end;
	errno = 0;
	double x = strtod(v, &end);
	if (*end)
		return -1;
	if (errno == ERANGE)
		return -2;
	*out = x == 0 ? 0.0 : x;   /* "-0" is 0 */
	return 0;
}

/* Writes `"a", "b" or "c"` for a NULL-terminated word list into buf. */
static void word_list(char *buf, size_t n, const char *const *words)
{
	size_t o = 0;
	buf[0] = '\0';
	for (int i = 0; words[i] && o < n; i++) {
		const char *sep = i == 0 ? "" : words[i + 1] ? ", " : " or ";
		int w = snprintf(buf + o, n - o, "%s\"%s\"", sep, words[i]);
		if (w < 0)
			break;
		o += (size_t)w;
	}
}

/* Index of v in a NULL-terminated list, or -1 (also for a NULL list). */
static int word_index(const char *const *words, const char *v)
{
	for (int i = 0; words && words[i]; i++)
		if (!strcmp(words[i], v))
			return i;
	return -1;
}

/* The longest string value of k: its field, the key's own bound, and the
 * normalized line "name = value" fitting in DLH_SPEC_LINE_MAX. */
static size_t string_max(const struct dlh_key *k)
{
	size_t m = k->size - 1;
	size_t line = DLH_SPEC_LINE_MAX - strlen(k->name) - 3;
	if (k->hi > 0 && (size_t)k->hi < m)
		m = (size_t)k->hi;
	return line < m ? line : m;
}

/* [job] name: "" or 1..DLH_NAME_MAX of [A-Za-z0-9._-], not all digits,
 * not starting with ".", not a name the jobs directory uses itself. */
static int set_name(const char *v, char *field, char *msg, size_t n)
{
	size_t len = strlen(v), digits = 0;
	if (len > DLH_NAME_MAX)
		return fail(msg, n, v, "expected at most %d characters", DLH_NAME_MAX);
	for (size_t i = 0; i < len; i++) {
		char c = v[i];
		if (c >= '0' && c <= '9')
			digits++;
		else if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			   c == '.' || c == '_' || c == '-'))
			return fail(msg, n, v, "expected letters, digits, \".\", \"_\" or \"-\"");
	}
	if (len > 0 && digits == len)
		return fail(msg, n, v, "expected a name that is not all digits (those are job ids)");
	if (v[0] == '.')
		return fail(msg, n, v, "expected a name that does not start with \".\"");
	if (!strcmp(v, "new") || !strcmp(v, "errors") || !strcmp(v, "index"))
		return fail(msg, n, v, "expected a name other than \"new\", \"errors\" and \"index\" (reserved)");
	memcpy(field, v, len + 1);
	return 0;
}

/* [job] command and [data] paths: text without control characters (paths
 * absolute), short enough for the field and a normalized line. */
static int set_text(const struct dlh_key *k, const char *v, char *field, char *msg, size_t n)
{
	size_t len = strlen(v), max = string_max(k);
	if (k->kind == DLH_KIND_PATH && v[0] != '/')
		return fail(msg, n, v, "expected an absolute path");
	if (len > max)
		return fail(msg, n, v, "expected at most %zu characters", max);
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f)
			return fail(msg, n, v, "expected no tabs or control characters");
	memcpy(field, v, len + 1);
	return 0;
}

/* Integers of kinds INT, LONG and RANKS into their field. */
static int set_integer(const struct dlh_key *k, const char *v, void *field, char *msg, size_t n)
{
	long long x = 0;
	int rc;
	if (k->kind == DLH_KIND_RANKS && !strcmp(v, "auto")) {
		rc = 0;
	} else {
		rc = parse_ll(v, &x);
		if (!rc && (x < k->lo || x > k->hi))
			rc = -2;
	}
	if (rc && k->kind == DLH_KIND_RANKS)
		return fail(msg, n, v, "expected an integer from %lld to %lld or \"auto\"", k->lo, k->hi);
	if (rc == -1)
		return fail(msg, n, v, "expected a %s integer", k->lo > 0 ? "positive" : "non-negative");
	if (rc == -2)
		return fail(msg, n, v, "expected an integer from %lld to %lld", k->lo, k->hi);
	if (k->kind == DLH_KIND_LONG) {
		long l = (long)x;
		memcpy(field, &l, sizeof l);
	} else {
		int i = (int)x;
		memcpy(field, &i, sizeof i);
	}
	return 0;
}

/* A finite double within the key's bounds. */
static int set_double(const struct dlh_key *k, const char *v, double *field, char *msg, size_t n)
{
	double x = 0;
	int rc = parse_double(v, &x);
	const char *or_auto = k->kind == DLH_KIND_RATE ? " or \"auto\"" : "";
	if (k->kind == DLH_KIND_RATE && !strcmp(v, "auto")) {
		*field = 0.0;   /* the range test picks it */
		return 0;
	}
	if (rc == -1)
		return fail(msg, n, v, "expected a number%s", or_auto);
	if (rc == -2 || (k->lo_open ? x <= k->dlo : x < k->dlo) ||
	    (k->hi_open ? x >= k->dhi : x > k->dhi))
		return fail(msg, n, v, "expected a number %s %g and %s %g%s",
			    k->lo_open ? ">" : ">=", k->dlo, k->hi_open ? "<" : "<=", k->dhi, or_auto);
	*field = x;
	return 0;
}

/* Parses one trimmed item of a comma list into out (a decimal integer).
 * Returns 0, -1 (not a number) or -2 (out of range of long long). */
static int list_item(const char *p, size_t len, long long *out)
{
	char item[DLH_SPEC_LINE_MAX + 1];
	while (len && (*p == ' ' || *p == '\t'))
		p++, len--;
	while (len && (p[len - 1] == ' ' || p[len - 1] == '\t'))
		len--;
	if (!len || len >= sizeof item)
		return -1;
	memcpy(item, p, len);
	item[len] = '\0';
	return parse_ll(item, out);
}

/* A list of comma-separated integers in lo..hi, min_count..max_count of
 * them, into the int array at k->off with the count at k->count_off. An
 * empty value is the empty list (allowed when min_count is 0). */
static int set_layers(const struct dlh_key *k, const char *v, struct dlh_spec *s, char *msg, size_t n)
{
	int w[DLH_LAYERS_MAX], count = 0, range = 0;
	const char *p = v;
	while (*v && *p) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		long long x;
		int rc = list_item(p, len, &x);
		if (rc == -1)
			return fail(msg, n, v, "expected a comma-separated list of positive integers");
		if (rc == -2 || x < k->lo || x > k->hi)
			range = 1;
		else if (count < DLH_LAYERS_MAX)
			w[count] = (int)x;
		count++;
		if (!comma)
			break;
		p = comma + 1;
		if (!*p)
			return fail(msg, n, v, "expected a comma-separated list of positive integers");
	}
	if (range)
		return fail(msg, n, v, "expected each width from %lld to %lld", k->lo, k->hi);
	if (count < k->min_count)
		return fail(msg, n, v, "expected a comma-separated list of positive integers");
	if (count > k->max_count) {
		char q[QUOTE_MAX * 4 + 8];
		dlh_spec_quote(q, sizeof q, v, QUOTE_MAX);
		snprintf(msg, n, "expected at most %d layers, got %d in %s", k->max_count, count, q);
		return -1;
	}
	memcpy((char *)s + k->off, w, (size_t)count * sizeof w[0]);
	memcpy((char *)s + k->count_off, &count, sizeof count);
	return 0;
}

static int set_duration(const struct dlh_key *k, const char *v, long *field, char *msg, size_t n);

static int set_size(const struct dlh_key *k, const char *v, long long *field, char *msg, size_t n);

int dlh_spec_size(const char *v, long long *bytes, char *msg, size_t n)
{
	static const struct dlh_key any = { .kind = DLH_KIND_SIZE, .lo = DLH_MEMORY_MIN,
					    .hi = DLH_MEMORY_MAX };
	return set_size(&any, v, bytes, msg, n) ? -1 : 0;
}

int dlh_spec_duration(const char *v, long *seconds, char *msg, size_t n)
{
	static const struct dlh_key any = { .kind = DLH_KIND_DURATION, .hi = 100L * 366 * 86400 };
	return set_duration(&any, v, seconds, msg, n) ? -1 : 0;
}

/* [model] conv: 1..DLH_CONV_MAX "FILTERS:KERNEL" items, filters in lo..hi,
 * kernels odd from 1 to DLH_CONV_KERNEL_MAX. */
#define DLH_CONV_KERNEL_MAX 15
static int set_conv(const struct dlh_key *k, const char *v, struct dlh_spec *s, char *msg, size_t n)
{
	int f[DLH_CONV_MAX], kern[DLH_CONV_MAX], count = 0;
	const char *p = v;
	for (;;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		const char *colon = memchr(p, ':', len);
		long long x, y;
		if (!colon || list_item(p, (size_t)(colon - p), &x) ||
		    list_item(colon + 1, len - (size_t)(colon + 1 - p), &y))
			return fail(msg, n, v, "expected a comma-separated list of FILTERS:KERNEL, e.g. \"32:5, 64:5\"");
		if (x < k->lo || x > k->hi)
			return fail(msg, n, v, "expected filters from %lld to %lld", k->lo, k->hi);
		if (y < 1 || y > DLH_CONV_KERNEL_MAX || y % 2 == 0)
			return fail(msg, n, v, "expected an odd kernel size from 1 to %d", DLH_CONV_KERNEL_MAX);
		if (count < DLH_CONV_MAX) {
			f[count] = (int)x;
			kern[count] = (int)y;
		}
		count++;
		if (!comma)
			break;
		p = comma + 1;
	}
	if (count > DLH_CONV_MAX) {
		char q[QUOTE_MAX * 4 + 8];
		dlh_spec_quote(q, sizeof q, v, QUOTE_MAX);
		snprintf(msg, n, "expected at most %d convolutions, got %d in %s", DLH_CONV_MAX, count, q);
		return -1;
	}
	memcpy(s->conv_filters, f, (size_t)count * sizeof f[0]);
	memcpy(s->conv_kernel, kern, (size_t)count * sizeof kern[0]);
	s->nconv = count;
	return 0;
}

/* A duration into a long of seconds: "0" (none), an integer with a unit
 * (s, m, h, d), "M:SS" or "H:MM:SS" (minutes and seconds below 60); at
 * most k->hi seconds. */
static int set_duration(const struct dlh_key *k, const char *v, long *field, char *msg, size_t n)
{
	long long t = 0, part[3];
	int parts = 0, ok = 1;
	const char *p = v;
	if (!strcmp(v, "0")) {
		*field = 0;
		return 0;
	}
	if (strchr(v, ':')) {
		int colons = 0;
		for (const char *c = v; *c; c++)
			colons += *c == ':';
		ok = colons <= 2;
		while (ok && parts < 3) {
			size_t len = strcspn(p, ":");
			if (!len || len > 9 || strspn(p, "0123456789") != len)
				ok = 0;
			else
				part[parts++] = strtoll(p, NULL, 10);
			if (p[len] != ':')
				break;
			p += len + 1;
		}
		if (!ok || parts < 2 || p[strcspn(p, ":")] == ':' ||
		    part[parts - 1] >= 60 || (parts == 3 && part[1] >= 60))
			ok = 0;
		for (int i = 0; ok && i < parts; i++)
			t = t * 60 + part[i];
	} else {
		size_t len = strspn(v, "0123456789");
		static const char units[] = "smhd";
		static const long long mult[] = { 1, 60, 3600, 86400 };
		const char *u = len ? strchr(units, v[len]) : NULL;
		if (!len || len > 9 || !u || !v[len] || v[len + 1])
			ok = 0;
		else
			t = strtoll(v, NULL, 10) * mult[u - units];
	}
	if (!ok)
		return fail(msg, n, v, "expected a duration such as \"90s\", \"15m\", \"2h\", \"1d\" "
			    "or \"1:30:00\" (0 = none)");
	if (t == 0 || t > k->hi)
		return fail(msg, n, v, "expected a duration from 1s to %lldd (or 0 = none)", k->hi / 86400);
	*field = (long)t;
	return 0;
}

/* A size into a long long of bytes: "0" (none), or an integer followed by
 * K, M, G or T (powers of 1024), from k->lo to k->hi. */
static int set_size(const struct dlh_key *k, const char *v, long long *field, char *msg, size_t n)
{
	if (!strcmp(v, "0")) {
		*field = 0;
		return 0;
	}
	size_t len = strspn(v, "0123456789");
	static const char units[] = "KMGT";
	const char *u = len ? strchr(units, v[len]) : NULL;
	if (!len || len > 12 || !u || !v[len] || v[len + 1])
		return fail(msg, n, v, "expected a size such as \"512M\" or \"2G\" (K, M, G, T; 0 = no limit)");
	long long x = strtoll(v, NULL, 10);
	for (const char *w = units; w <= u; w++)
		x = x > k->hi ? x : x * 1024;
	if (x < k->lo || x > k->hi)
		return fail(msg, n, v, "expected a size from 1M to %lldT (or 0 = no limit)", k->hi >> 40);
	*field = x;
	return 0;
}

/* Whether name is one the harness or Open MPI sets for every rank: a job
 * may not change it. */
static int env_reserved(const char *name, size_t len)
{
	static const char *const prefixes[] = { "DLH_", "OMPI_", "PMIX_", "OPAL_" };
	static const char *const names[] = {
		"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
		"NODE_RANK", "GROUP_RANK", "CUDA_VISIBLE_DEVICES",
	};
	for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
		if (!strncmp(name, prefixes[i], strlen(prefixes[i])))
			return 1;
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (strlen(names[i]) == len && !strncmp(name, names[i], len))
			return 1;
	return 0;
}

int dlh_env_names(const char *list, const char *entry)
{
	size_t name = strcspn(entry, "=\n");
	for (const char *e = list; *e; e = strchr(e, '\n') + 1)
		if (!strncmp(e, entry, name) && e[name] == '=')
			return 1;
	return 0;
}

int dlh_env_add(char *field, size_t cap, const char *v, char *msg, size_t n)
{
	size_t name = 0, len = strlen(v), used = strlen(field), count = 0;
	if (!len)
		return 0;
	while ((v[name] >= 'A' && v[name] <= 'Z') || (v[name] >= 'a' && v[name] <= 'z') ||
	       v[name] == '_' || (name && v[name] >= '0' && v[name] <= '9'))
		name++;
	if (!name || v[name] != '=')
		return fail(msg, n, v, "expected NAME=VALUE (NAME: letters, digits and _, not "
			    "starting with a digit)");
	if (env_reserved(v, name))
		return fail(msg, n, v, "%.*s is set by dlhfs or Open MPI for every rank", (int)name, v);
	for (size_t i = name + 1; i < len; i++)
		if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f)
			return fail(msg, n, v, "expected no tabs or control characters");
	if (dlh_env_names(field, v))
		return fail(msg, n, v, "%.*s is given twice", (int)name, v);
	for (const char *e = field; *e; e = strchr(e, '\n') + 1)
		count++;
	if (count >= DLH_ENV_ENTRIES_MAX)
		return fail(msg, n, v, "more than %d entries", DLH_ENV_ENTRIES_MAX);
	if (len > DLH_SPEC_LINE_MAX - 6)   /* its line of the stored spec, "env = " first */
		return fail(msg, n, v, "expected at most %d characters", DLH_SPEC_LINE_MAX - 6);
	if (used + len + 1 > cap)
		return fail(msg, n, v, "the entries take more than %zu bytes together", cap);
	memcpy(field + used, v, len);
	field[used + len] = '\n';
	field[used + len + 1] = '\0';
	return 0;
}

/* See keys.h: dispatches on the key's kind. Returns 0, or -1 with msg. */
int dlh_spec_set(const struct dlh_key *k, const char *v, struct dlh_spec *s,
		 char *msg, size_t n)
{
	char *field = (char *)s + k->off;
	char words[128];
	int i;
	msg[0] = '\0';
	switch (k->kind) {
	case DLH_KIND_NAME:
		return set_name(v, field, msg, n);
	case DLH_KIND_COMMAND:
	case DLH_KIND_PATH:
		return set_text(k, v, field, msg, n);
	case DLH_KIND_ENV:
		return dlh_env_add(field, (size_t)k->hi, v, msg, n);
	case DLH_KIND_ENUM:
		if ((i = word_index(k->words, v)) < 0) {
			word_list(words, sizeof words, k->words);
			return fail(msg, n, v, "expected %s", words);
		}
		memcpy(field, &i, sizeof i);
		return 0;
	case DLH_KIND_WORD:
		if (word_index(k->words, v) >= 0) {
			snprintf(field, k->size, "%s", v);
			return 0;
		}
		word_list(words, sizeof words, k->words);
		if (word_index(k->later, v) >= 0) {
			snprintf(msg, n, "\"%s\" is not supported yet (expected %s)", v, words);
			return -1;
		}
		return fail(msg, n, v, "expected %s", words);
	case DLH_KIND_INT:
	case DLH_KIND_LONG:
	case DLH_KIND_RANKS:
		return set_integer(k, v, field, msg, n);
	case DLH_KIND_U64: {
		uint64_t u;
		if (parse_u64(v, &u))
			return fail(msg, n, v, "expected an integer from 0 to %" PRIu64, UINT64_MAX);
		memcpy(field, &u, sizeof u);
		return 0;
	}
	case DLH_KIND_DOUBLE:
	case DLH_KIND_RATE:
		return set_double(k, v, (double *)(void *)field, msg, n);
	case DLH_KIND_LAYERS:
		return set_layers(k, v, s, msg, n);
	case DLH_KIND_CONV:
		return set_conv(k, v, s, msg, n);
	case DLH_KIND_DURATION:
		return set_duration(k, v, (long *)(void *)field, msg, n);
	case DLH_KIND_SIZE:
		return set_size(k, v, (long long *)(void *)field, msg, n);
	}
	snprintf(msg, n, "internal error: unknown kind %d", (int)k->kind);
	return -1;
}
