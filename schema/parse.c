/* parse.c - dlh_spec_parse: a line-counting reader feeding inih, the key handler, whole-spec checks */
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "schema/keys.h"

#define SEC_NONE (-1)     /* no section header seen yet */
#define SEC_BAD (-2)      /* the last header was bad (and reported): skip its keys */
#define SHOW_MAX 40       /* bytes of a bad line or name shown in a message */

/* The state of one parse, shared by the reader and the handler. */
struct ctx {
	struct dlh_spec spec;                   /* being filled; defaults first */
	struct dlh_spec_errors errs;            /* problems found so far */
	const char *p, *end;                    /* text not yet handed to inih */
	int lineno;                             /* line last handed to inih */
	int stopped;                            /* binary data seen: hand no more lines */
	int content;                            /* lines that are not blank or comments */
	int section;                            /* index of the current section, or SEC_* */
	char cur[DLH_SPEC_LINE_MAX + 1];        /* the current line, whole (inih may get its key
						   part alone: long) */
	int long_line;                          /* inih got cur's key part alone */
	int line_of[DLH_SPEC_KEYS_CAP];         /* line each key was given on, 0 = not given */
	unsigned flags;                         /* DLH_SPEC_* */
	unsigned char bad[DLH_SPEC_KEYS_CAP];   /* 1 = the key's value did not parse */
};

/* inih's scan for the first of chars, or an inline comment (';' after
 * whitespace), or the end: the same rule ini_parse_stream applies, so the
 * reader classifies each line exactly as inih will. */
static const char *find_chars_or_comment(const char *s, const char *chars)
{
	int was_space = 0;
	while (*s && (!chars || !strchr(chars, *s)) && !(was_space && *s == ';')) {
		was_space = *s == ' ' || *s == '\t';
		s++;
	}
	return s;
}

/* Records the generic syntax error for line, showing its text. */
static void syntax_error(struct ctx *c, int line, const char *text)
{
	char trimmed[DLH_SPEC_LINE_MAX + 1], q[SHOW_MAX * 4 + 8];
	size_t len = strlen(text);
	while (len && (text[len - 1] == ' ' || text[len - 1] == '\t'))
		len--;
	memcpy(trimmed, text, len);
	trimmed[len] = '\0';
	dlh_spec_quote(q, sizeof q, trimmed, SHOW_MAX);
	dlh_spec_error_add(&c->errs, line,
			   "syntax error: expected \"[section]\" or \"key = value\", got %s", q);
}

/* A "[name]" line: known section, unknown one (with a suggestion), or
 * malformed. Sets c->section. */
static void section_line(struct ctx *c, const char *s)
{
	const char *close = find_chars_or_comment(s + 1, "]");
	const char *rest = close + (*close == ']');
	while (*rest == ' ' || *rest == '\t')
		rest++;
	if (*close != ']' || (*rest && *rest != ';' && *rest != '#')) {
		syntax_error(c, c->lineno, s);
		c->section = SEC_BAD;
		return;
	}
	char name[DLH_SPEC_LINE_MAX + 1];
	size_t len = (size_t)(close - s - 1);
	memcpy(name, s + 1, len);
	name[len] = '\0';
	c->section = dlh_spec_section_find(name);
	if (c->section >= 0)
		return;
	c->section = SEC_BAD;
	int n = 0;
	while (dlh_spec_sections[n])
		n++;
	const char *hint = dlh_spec_suggest(name, dlh_spec_sections, n);
	if (hint)
		dlh_spec_error_add(&c->errs, c->lineno,
				   "[%.*s]: unknown section (did you mean \"[%s]\"?)", SHOW_MAX, name, hint);
	else
		dlh_spec_error_add(&c->errs, c->lineno, "[%.*s]: unknown section", SHOW_MAX, name);
}

/* Classifies a line (leading blanks already gone) the way inih will:
 * blank or comment, section header, key line, or a syntax error, which
 * inih itself would only report for the first such line. */
static void classify(struct ctx *c, const char *s)
{
	if (!*s || *s == ';' || *s == '#')
		return;
	c->content++;
	if (*s == '[') {
		section_line(c, s);
		return;
	}
	const char *sep = find_chars_or_comment(s, "=:");
	if (*sep != '=' && *sep != ':')
		syntax_error(c, c->lineno, s);
}

/* What inih gets of the line s (num bytes of room), when s is longer than
 * that: a section header as "[name]" (with no comment after it), a key line
 * as its key and "=" (on_key takes the value from c->cur); "" when even
 * that does not fit: such a section or key is unknown, and said so here. */
static void key_part(struct ctx *c, const char *s, char *str, size_t num)
{
	const char *end = *s == '[' ? find_chars_or_comment(s + 1, "]") : find_chars_or_comment(s, "=:");
	size_t n = (size_t)(end - s) + 1;   /* with the ']' or the '=' */
	str[0] = '\0';
	if (!*end || n >= num) {
		if (*end && *s != '[')
			dlh_spec_error_add(&c->errs, c->lineno, "\"%.*s...\": unknown key", SHOW_MAX, s);
		return;   /* classify() said what is wrong with a section */
	}
	memcpy(str, s, n);
	str[n] = '\0';
}

/* The ini_reader: hands inih the next line of the len-bounded text without
 * its line ending, with leading blanks (and a UTF-8 BOM on line 1)
 * removed so inih never sees a continuation line. A line with a control
 * character stops the parse; a line over DLH_SPEC_LINE_MAX is reported and
 * handed over empty; a line longer than inih's buffer goes to it as its
 * key part (key_part). Returns str, or NULL at the end. */
static char *read_line(char *str, int num, void *stream)
{
	struct ctx *c = stream;
	if (c->stopped || c->p >= c->end || num < 2)
		return NULL;
	const char *s = c->p;
	const char *nl = memchr(s, '\n', (size_t)(c->end - s));
	size_t len = (size_t)((nl ? nl : c->end) - s);
	c->p = nl ? nl + 1 : c->end;
	c->lineno++;
	str[0] = '\0';
	c->cur[0] = '\0';
	if (len && s[len - 1] == '\r')
		len--;
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];
		if ((ch < 0x20 && ch != '\t') || ch == 0x7f) {
			dlh_spec_error_add(&c->errs, c->lineno,
					   "binary data (byte 0x%02x at column %zu)", ch, i + 1);
			c->stopped = 1;
			c->content++;
			return str;
		}
	}
	c->long_line = 0;
	if (len > DLH_SPEC_LINE_MAX) {
		dlh_spec_error_add(&c->errs, c->lineno, "line longer than %d characters",
				   DLH_SPEC_LINE_MAX);
		c->content++;
		return str;
	}
	if (c->lineno == 1 && len >= 3 && !memcmp(s, "\xEF\xBB\xBF", 3))
		s += 3, len -= 3;
	while (len && (*s == ' ' || *s == '\t'))
		s++, len--;
	memcpy(c->cur, s, len);
	c->cur[len] = '\0';
	classify(c, c->cur);
	if (len < (size_t)num) {
		memcpy(str, c->cur, len + 1);
	} else if (*c->cur != ';' && *c->cur != '#') {
		key_part(c, c->cur, str, (size_t)num);
		c->long_line = str[0] != '\0';
	}
	return str;
}

/* The value of key line `line` as written: everything after its first
 * '=' or ':', blanks trimmed at both ends, into out; with comment 1, up to
 * an inline comment (" ;"), as inih reads it. Returns out. */
static const char *raw_value(const char *line, int comment, char *out, size_t len)
{
	const char *v = line + strcspn(line, "=:");
	v += *v != '\0';
	while (*v == ' ' || *v == '\t')
		v++;
	size_t n = comment ? (size_t)(find_chars_or_comment(v, NULL) - v) : strlen(v);
	while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
		n--;
	snprintf(out, len, "%.*s", (int)n, v);
	return out;
}

/* The ini_handler for each key line. Problems are recorded, never
 * returned, so inih's own error line is always a syntax error. */
static int on_key(void *user, const char *section, const char *name, const char *value)
{
	struct ctx *c = user;
	int line = c->lineno;
	if (!name || !value || c->section == SEC_BAD)
		return 1;
	if (!*name) {
		syntax_error(c, line, c->cur);
		return 1;
	}
	if (c->section == SEC_NONE) {
		int k = dlh_spec_key_find(NULL, name);
		if (k >= 0)
			dlh_spec_error_add(&c->errs, line,
					   "\"%s\": key outside any section (put it under [%s])",
					   name, dlh_spec_keys[k].section);
		else
			dlh_spec_error_add(&c->errs, line, "\"%.*s\": key outside any section",
					   SHOW_MAX, name);
		return 1;
	}
	int k = dlh_spec_key_find(section, name);
	if (k < 0) {
		const char *cands[DLH_SPEC_KEYS_CAP];
		int n = 0, other = dlh_spec_key_find(NULL, name);
		for (int i = 0; i < dlh_spec_nkeys; i++)
			if (!strcmp(dlh_spec_keys[i].section, section))
				cands[n++] = dlh_spec_keys[i].name;
		const char *hint = dlh_spec_suggest(name, cands, n);
		if (other >= 0)
			dlh_spec_error_add(&c->errs, line, "[%s] %s: unknown key (it belongs under [%s])",
					   section, name, dlh_spec_keys[other].section);
		else if (hint)
			dlh_spec_error_add(&c->errs, line, "[%s] %.*s: unknown key (did you mean \"%s\"?)",
					   section, SHOW_MAX, name, hint);
		else
			dlh_spec_error_add(&c->errs, line, "[%s] %.*s: unknown key",
					   section, SHOW_MAX, name);
		return 1;
	}
	if (c->line_of[k] && dlh_spec_keys[k].kind != DLH_KIND_ENV) {   /* env: one a line */
		dlh_spec_error_add(&c->errs, line, "[%s] %s: given twice (first on line %d)",
				   section, name, c->line_of[k]);
		return 1;
	}
	if (!c->line_of[k])
		c->line_of[k] = line;
	char msg[DLH_SPEC_MSG_MAX], raw[DLH_SPEC_LINE_MAX + 1];
	/* a command is a program's words: inih's inline comment (" ;") would cut
	 * `command = /bin/echo a ; id` short without a word, so its value is
	 * the whole rest of the line (no shell sees it: ";" is an argument);
	 * an environment value likewise. A line longer than inih's buffer gave
	 * it the key alone: the value is read from the whole line. */
	int whole = dlh_spec_keys[k].kind == DLH_KIND_COMMAND || dlh_spec_keys[k].kind == DLH_KIND_ENV;
	if (whole || c->long_line)
		value = raw_value(c->cur, !whole, raw, sizeof raw);
	if (dlh_spec_set(&dlh_spec_keys[k], value, &c->spec, msg, sizeof msg)) {
		c->bad[k] = 1;
		dlh_spec_error_add(&c->errs, line, "[%s] %s: %s", section, name, msg);
	}
	return 1;
}

/* Copies line number lineno (1-based) of text into out, without its ending. */
static void line_text(const char *text, size_t len, int lineno, char *out, size_t n)
{
	const char *p = text, *end = text + len;
	for (int i = 1; i < lineno && p < end; i++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		p = nl ? nl + 1 : end;
	}
	size_t l = 0;
	while (p + l < end && p[l] != '\n' && p[l] != '\r' && l + 1 < n)
		l++;
	memcpy(out, p, l);
	out[l] = '\0';
}

/* Index of a key the whole-spec checks use (they exist in the table). */
static int key(const char *section, const char *name)
{
	int k = dlh_spec_key_find(section, name);
	if (k < 0)
		abort();
	return k;
}

/* Every data path, given or default, must be a readable regular file.
 * Nothing here opens it: a FIFO or a device is refused by its type, never
 * waited on. */
static void check_paths(struct ctx *c)
{
	for (int k = 0; k < dlh_spec_nkeys; k++) {
		const struct dlh_key *d = &dlh_spec_keys[k];
		if (d->kind != DLH_KIND_PATH || c->bad[k] || dlh_spec_applies(&c->spec, k))
			continue;   /* a command's: dlhfs never reads them */
		const char *path = (const char *)&c->spec + d->off;
		struct stat st;
		int e = 0, odd = 0, fd;
		/* stat, and open only a regular file: both as the calling thread's
		 * file rights (the engine lends it the submitter's), not access(),
		 * which would ask with the process's real uid */
		if (stat(path, &st) != 0)
			e = errno;
		else if (S_ISDIR(st.st_mode))
			e = EISDIR;
		else if (!S_ISREG(st.st_mode))
			odd = 1;
		else if ((fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0)
			e = errno;
		else
			close(fd);
		if (!e && !odd)
			continue;
		char q[DLH_SPEC_LINE_MAX + 8], why[128];
		dlh_spec_quote(q, sizeof q, path, DLH_SPEC_LINE_MAX);
		if (odd)
			snprintf(why, sizeof why, "not a regular file (a %s)",
				 S_ISFIFO(st.st_mode) ? "FIFO" : S_ISCHR(st.st_mode) ? "character device" :
				 S_ISBLK(st.st_mode) ? "block device" : S_ISSOCK(st.st_mode) ? "socket" :
				 "special file");
		else if (strerror_r(e, why, sizeof why))
			snprintf(why, sizeof why, "error %d", e);
		dlh_spec_error_add(&c->errs, c->line_of[k], "[%s] %s: cannot read %s: %s",
				   d->section, d->name, q, why);
	}
}

/* The later of two keys' lines (0 when neither was given). */
static int later(const struct ctx *c, int a, int b)
{
	return c->line_of[a] > c->line_of[b] ? c->line_of[a] : c->line_of[b];
}

/* Sets key k back to its default, as if it had not been given. */
static void unset(struct ctx *c, int k)
{
	char msg[DLH_SPEC_MSG_MAX];
	if (dlh_spec_set(&dlh_spec_keys[k], dlh_spec_keys[k].def, &c->spec, msg, sizeof msg))
		abort();   /* dlh_spec_defaults parses every default */
	c->line_of[k] = 0;
}

/* Reports keys given where they do not apply (see dlh_spec_applies), each
 * hint once (a command's spec may give the trainer's keys by the dozen). A
 * stored spec drops them instead: the dlhfs that accepted it may have
 * written them (a [job] command's spec listed the trainer's defaults), and
 * a job once accepted must load again. */
static void check_applies(struct ctx *c)
{
	const char *told[DLH_SPEC_KEYS_CAP];   /* hints given so far */
	int ntold = 0, older = 0;
	for (int k = 0; k < dlh_spec_nkeys; k++) {
		if (!c->line_of[k] || c->bad[k])
			continue;
		const struct dlh_applies *a = dlh_spec_applies(&c->spec, k);
		if (!a || c->bad[key(a->on_section, a->on)])
			continue;
		if (c->flags & DLH_SPEC_STORED) {
			older |= a->except_own;
			unset(c, k);
			continue;
		}
		const struct dlh_key *d = &dlh_spec_keys[k];
		const char *value = (const char *)&c->spec + dlh_spec_keys[key(a->on_section, a->on)].off;
		int again = 0;
		for (int i = 0; i < ntold && a->hint && !again; i++)
			again = !strcmp(told[i], a->hint);
		if (a->hint && !again)
			told[ntold++] = a->hint;
		const char *open = a->hint && !again ? " (" : "", *close = a->hint && !again ? ")" : "";
		const char *hint = a->hint && !again ? a->hint : "";
		if (a->why) {
			dlh_spec_error_add(&c->errs, c->line_of[k], "[%s] %s: %s%s%s%s", d->section,
					   d->name, a->why, open, hint, close);
			continue;
		}
		if (!a->values[0]) {   /* beside any value: it was given none */
			dlh_spec_error_add(&c->errs, c->line_of[k], "[%s] %s: only used with a [%s] %s%s%s%s",
					   d->section, d->name, a->on_section, a->on, open, hint, close);
			continue;
		}
		char list[96] = "";
		size_t used = 0;
		for (int v = 0; v < 4 && a->values[v]; v++)
			used += (size_t)snprintf(list + used, sizeof list - used, "%s%s = %s",
						 v ? " or " : "", a->on, a->values[v]);
		dlh_spec_error_add(&c->errs, c->line_of[k], "[%s] %s: only used with %s, not %s = %s%s%s%s",
				   d->section, d->name, list, a->on, value, open, hint, close);
	}
	/* A command's spec stored by a dlhfs that listed the trainer's keys
	 * beside it (all of them, defaults too) had none handed to the
	 * program: its batch_size and lr were the trainer's, not given. */
	for (int k = 0; older && k < dlh_spec_nkeys; k++)
		if (dlh_spec_keys[k].command_own) {
			memset((char *)&c->spec + dlh_spec_keys[k].off, 0, dlh_spec_keys[k].size);
			c->line_of[k] = 0;
		}
}

/* The defaults that differ beside a [job] command (dlh_key.def_command) for
 * the keys the text leaves out; the trainer's keys a command may be given
 * (dlh_key.command_own) are 0 there when not given: the program's own. */
static void command_defaults(struct ctx *c)
{
	char msg[DLH_SPEC_MSG_MAX];
	if (!c->spec.command[0])
		return;
	for (int k = 0; k < dlh_spec_nkeys; k++) {
		const struct dlh_key *d = &dlh_spec_keys[k];
		if (d->command_own && !c->line_of[k])
			memset((char *)&c->spec + d->off, 0, d->size);
		else if (d->def_command && !c->line_of[k] &&
			 dlh_spec_set(d, d->def_command, &c->spec, msg, sizeof msg))
			abort();   /* a bug in the table */
	}
}

/* The trainer's keys a [job] command is given: what the planner can hand
 * on (its global batch split over the ranks, a rate to scale). */
static void check_command_own(struct ctx *c)
{
	const struct dlh_spec *s = &c->spec;
	int lr = key("train", "lr"), batch = key("train", "batch_size");
	int scale = key("train", "scale_batch");
	if (!s->command[0])
		return;
	if (c->line_of[lr] && !c->bad[lr] && s->lr <= 0.0)
		dlh_spec_error_add(&c->errs, c->line_of[lr],
				   "[train] lr: auto is the built-in trainer's range test; a program "
				   "is given a rate (DLH_LR) or keeps its own");
	if (c->line_of[scale] && !c->bad[scale] && s->scale_batch && !c->line_of[batch] &&
	    !c->line_of[lr])
		dlh_spec_error_add(&c->errs, c->line_of[scale],
				   "[train] scale_batch: nothing to scale beside a [job] command "
				   "without [train] batch_size or lr");
}

/* Checks between keys, skipped where a value involved did not parse. */
static void check_cross(struct ctx *c)
{
	const struct dlh_spec *s = &c->spec;
	int batch = key("train", "batch_size"), ranks = key("resources", "ranks");
	int nodes = key("resources", "nodes"), trainer = !s->command[0];
	if (!c->bad[nodes] && !c->bad[ranks] && s->ranks > 0 && s->nodes > s->ranks)
		dlh_spec_error_add(&c->errs, later(c, nodes, ranks),
				   "[resources] nodes: %d nodes for %d ranks: each node needs a rank%s",
				   s->nodes, s->ranks, !trainer && !c->line_of[ranks] ?
				   " (a [job] command runs 1 rank unless [resources] ranks says more)" : "");
	int limit = key("data", "train_limit");
	/* a program's batch is its own unless given (0: not given) */
	if (!c->bad[batch] && !c->bad[ranks] && s->ranks > 0 && s->batch_size > 0 &&
	    !(!trainer && s->scale_batch) && s->batch_size < s->ranks)
		dlh_spec_error_add(&c->errs, later(c, batch, ranks),
				   "[train] batch_size: %d is smaller than [resources] ranks (%d)",
				   s->batch_size, s->ranks);
	if (trainer && !c->bad[batch] && !c->bad[limit] && s->train_limit &&
	    s->train_limit < s->batch_size)
		dlh_spec_error_add(&c->errs, later(c, batch, limit),
				   "[data] train_limit: %ld is smaller than [train] batch_size (%d)",
				   s->train_limit, s->batch_size);
	/* tf32 and bf16 are tensor-core arithmetic: the CPU trainer has none */
	int prec = key("train", "precision"), device = key("resources", "device");
	if (trainer && !c->bad[prec] && !c->bad[device] && s->precision != DLH_PRECISION_FP32 &&
	    s->device != DLH_DEVICE_GPU)
		dlh_spec_error_add(&c->errs, c->line_of[prec],
				   "[train] precision: %s needs [resources] device = gpu "
				   "(the CPU trainer computes in fp32)", dlh_spec_precision_name(s->precision));
	int tl = key("job", "time_limit"), grace = key("job", "time_limit_grace");
	if (!c->bad[tl] && !c->bad[grace] && s->time_limit_grace &&
	    (!s->time_limit || s->time_limit_grace >= s->time_limit))
		dlh_spec_error_add(&c->errs, later(c, tl, grace),
				   s->time_limit ?
				   "[job] time_limit_grace: %ld s is not less than [job] time_limit (%ld s)" :
				   "[job] time_limit_grace: %ld s given without a [job] time_limit",
				   s->time_limit_grace, s->time_limit);
	int prio = key("job", "priority");
	if ((c->flags & DLH_SPEC_USER) && !c->bad[prio] && s->priority > 0)
		dlh_spec_error_add(&c->errs, c->line_of[prio],
				   "[job] priority: %d is above 0: only root and the mounting user may raise "
				   "a job's priority (an ordinary user may lower it, down to %d)",
				   s->priority, DLH_PRIORITY_MIN);
}

long dlh_spec_grace(const struct dlh_spec *s)
{
	if (s->time_limit <= 0)
		return 0;
	if (s->time_limit_grace > 0)
		return s->time_limit_grace;
	long g = s->time_limit / 10;
	return g > DLH_GRACE_AUTO_MAX ? DLH_GRACE_AUTO_MAX : g;
}

int dlh_spec_parse(const char *text, size_t len, struct dlh_spec *s,
		   char *err, size_t errlen)
{
	return dlh_spec_parse_flags(text, len, s, err, errlen, 0);
}

/* See spec.h. Parses into a private copy (defaults first), so *s changes
 * only on success. Returns 0, -EINVAL, -EFBIG, or -ENOMEM when the parse
 * state cannot be allocated. */
int dlh_spec_parse_flags(const char *text, size_t len, struct dlh_spec *s,
			 char *err, size_t errlen, unsigned flags)
{
	if (err && errlen)
		err[0] = '\0';
	if (!text) {
		text = "";
		len = 0;
	}
	if (dlh_spec_nkeys > DLH_SPEC_KEYS_CAP)
		abort();   /* raise DLH_SPEC_KEYS_CAP */
	struct ctx *c = calloc(1, sizeof *c);
	if (!c) {
		if (err && errlen)
			snprintf(err, errlen, "spec: out of memory\n");
		return -ENOMEM;
	}
	int rc = -EINVAL;
	if (len > DLH_SPEC_MAX) {
		dlh_spec_error_add(&c->errs, 0, "larger than %d bytes (got %zu)", DLH_SPEC_MAX, len);
		rc = -EFBIG;
		goto out;
	}
	dlh_spec_defaults(&c->spec);
	c->p = text;
	c->end = text + len;
	c->section = SEC_NONE;
	c->flags = flags;
	int first = ini_parse_stream(read_line, c, on_key, c);
	if (first > 0 && !dlh_spec_error_on_line(&c->errs, first)) {
		char t[DLH_SPEC_LINE_MAX + 1];
		line_text(text, len, first, t, sizeof t);
		syntax_error(c, first, t + strspn(t, " \t"));
	} else if (first < 0) {
		dlh_spec_error_add(&c->errs, 0, "cannot parse (inih error %d)", first);
	}
	if (c->stopped)
		goto out;   /* binary: the rest was not read */
	if (c->content == 0) {
		dlh_spec_error_add(&c->errs, 0, "empty spec (nothing to run)");
		goto out;
	}
	command_defaults(c);
	check_applies(c);
	check_command_own(c);
	if (!(flags & DLH_SPEC_STORED))
		check_paths(c);
	check_cross(c);
	if (c->errs.n == 0 && c->errs.dropped == 0) {
		*s = c->spec;
		rc = 0;
	}
out:
	if (rc)
		dlh_spec_errors_render(&c->errs, err, errlen);
	free(c);
	return rc;
}
