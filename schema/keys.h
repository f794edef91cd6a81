/* keys.h - private to schema/: the table of spec keys and the helpers its files share */
#ifndef DLH_SCHEMA_KEYS_H
#define DLH_SCHEMA_KEYS_H

#include <ini.h>
#include <stddef.h>

#include "schema/spec.h"

/* Longest line of a spec. inih's own buffer is smaller (INI_MAX_LINE): a
 * longer key line reaches it as its key alone, and the value is taken from
 * the whole line (parse.c). A normalized "key = value" line must fit too,
 * so string values are capped to keep dlh_spec_format's output parseable. */
#define DLH_SPEC_LINE_MAX 4095

/* Room for one error message (without the "spec:N: " prefix). */
#define DLH_SPEC_MSG_MAX 320

/* Most keys the table may hold (parse.c keeps per-key state in arrays). */
#define DLH_SPEC_KEYS_CAP 96

/* Most errors kept for one parse; more end the report with "too many". */
#define DLH_SPEC_ERRORS_MAX 64

enum dlh_kind {
	DLH_KIND_NAME,     /* [job] name: "" or a file-name-safe word */
	DLH_KIND_COMMAND,  /* free text without control characters */
	DLH_KIND_ENV,      /* NAME=VALUE, one a line; the key may repeat: entries append */
	DLH_KIND_ENUM,     /* one of words[], stored as its index in an enum field */
	DLH_KIND_WORD,     /* one of words[], stored as text; later[] known but unsupported */
	DLH_KIND_INT,      /* int within lo..hi */
	DLH_KIND_LONG,     /* long within lo..hi */
	DLH_KIND_U64,      /* any uint64_t */
	DLH_KIND_DOUBLE,   /* finite double within dlo..dhi (ends open per flags) */
	DLH_KIND_RATE,     /* DOUBLE with an open lower bound of 0, or "auto" stored as 0 */
	DLH_KIND_PATH,     /* absolute path; readability is checked after parsing */
	DLH_KIND_LAYERS,   /* comma-separated ints within lo..hi; count at count_off */
	DLH_KIND_CONV,     /* "FILTERS:KERNEL, ..." into the conv_* fields */
	DLH_KIND_RANKS,    /* int within lo..hi, or "auto" stored as 0 */
	DLH_KIND_DURATION, /* long seconds: "0" (none), "90s", "15m", "2h", "1d", "M:SS", "H:MM:SS" */
	DLH_KIND_SIZE,     /* long long bytes: "0" (none), or an integer with K, M, G or T (x1024) */
};

/* One key of the language: where it lives, how it parses, its default. */
struct dlh_key {
	const char *section;            /* section name, without brackets */
	const char *name;               /* key name */
	enum dlh_kind kind;             /* how the value is parsed and printed */
	size_t off;                     /* offsetof the field in struct dlh_spec */
	size_t size;                    /* sizeof that field */
	long long lo, hi;               /* integer bounds, inclusive */
	double dlo, dhi;                /* number bounds */
	unsigned char lo_open, hi_open; /* 1 = that bound itself is excluded */
	const char *const *words;       /* accepted words, NULL-terminated */
	const char *const *later;       /* words known but not supported yet, NULL-terminated */
	const char *def;                /* the default, as normalized text */
	const char *def_command;        /* the default beside a [job] command, or NULL
					   (the same as def) */
	unsigned char command_own;      /* 1: a [job] command may be given it too (the
					   planner hands it on: DLH_BATCH, DLH_LR); not
					   given there, the field is 0 (the program's own)
					   and the normalized text leaves it out */
	size_t count_off;               /* LAYERS: offsetof the int holding the count */
	int min_count, max_count;       /* LAYERS: how many items are allowed */
};

extern const struct dlh_key dlh_spec_keys[];    /* in normalized order */
extern const int dlh_spec_nkeys;                /* entries in dlh_spec_keys */
extern const char *const dlh_spec_sections[];   /* in order, NULL-terminated */

/* A key that only means something beside another key's value (conv for a
 * cnn, beta1 for adam), beside any value of it (steps beside a command), or
 * beside none (the built-in trainer's sections, not beside a command). Given
 * where it does not apply it is an error (in a stored spec it is dropped),
 * and the normalized text leaves it out. */
struct dlh_applies {
	const char *section, *name;     /* the key; name NULL: every key of the section */
	const char *on_section, *on;    /* the WORD (or COMMAND) key it depends on */
	const char *const values[4];    /* the values of that key it applies to; none:
					   any value but empty (steps beside a command);
					   "": only beside none (no command) */
	const char *why;                /* the message in place of "only used with ...",
					   or NULL */
	const char *hint;               /* what to use instead, or NULL */
	unsigned char except_own;       /* 1: keys marked command_own are exempt */
};

/* The first rule that key k breaks in s (it does not apply there), or NULL
 * when k applies (or has no rule). */
const struct dlh_applies *dlh_spec_applies(const struct dlh_spec *s, int k);

/* Index of section in dlh_spec_sections, or -1 when unknown. */
int dlh_spec_section_find(const char *section);

/* Index of the key in dlh_spec_keys; section NULL matches any section.
 * Returns -1 when there is none. */
int dlh_spec_key_find(const char *section, const char *name);

/* Parses value (NUL-terminated, trimmed) for key k and stores it into s.
 * Does not check that paths are readable. Returns 0, or -1 with a
 * one-line reason (no key prefix, no newline) in msg (n bytes). */
int dlh_spec_set(const struct dlh_key *k, const char *value, struct dlh_spec *s,
		 char *msg, size_t n);

/* Writes text as "text" into out (n bytes), cut to max bytes with "..."
 * appended when longer. Always NUL-terminates when n > 0. */
void dlh_spec_quote(char *out, size_t n, const char *text, size_t max);

/* The candidate closest to given: a case-insensitive match, else the
 * smallest edit distance (Damerau-Levenshtein) when it is at most 2 and
 * below the length of given, else one that given is a prefix of (given at
 * least 2 characters long). Ties go to the earliest candidate. Returns
 * NULL when none is close. */
const char *dlh_spec_suggest(const char *given, const char *const *cands, int n);

/* One problem found in a spec. */
struct dlh_spec_error {
	int line;                        /* 1-based line, 0 = not tied to a line */
	int seq;                         /* order of discovery, to sort stably */
	char msg[DLH_SPEC_MSG_MAX];      /* `[section] key: what`, no newline */
};

/* The problems found so far. */
struct dlh_spec_errors {
	struct dlh_spec_error e[DLH_SPEC_ERRORS_MAX];  /* kept errors, in discovery order */
	int n;                                         /* how many of e[] are used */
	int dropped;                                   /* errors that did not fit in e[] */
};

/* Records a printf-formatted error for line (0 = none); counts it as
 * dropped when the list is full. */
void dlh_spec_error_add(struct dlh_spec_errors *es, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* 1 when an error is recorded for line, else 0. */
int dlh_spec_error_on_line(const struct dlh_spec_errors *es, int line);

/* Sorts the errors by line and writes them to err (errlen bytes), one
 * `spec:LINE: msg` (or `spec: msg`) line each. When they do not all fit,
 * or some were dropped, the last line is `spec: too many errors`; a buffer
 * too small even for that gets a cut, NUL-terminated prefix. Writes
 * nothing when err is NULL or errlen is 0. */
void dlh_spec_errors_render(struct dlh_spec_errors *es, char *err, size_t errlen);

#endif
