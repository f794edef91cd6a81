/* poolfile.c - dlh_pool_parse: the pool file (-o pool=FILE), its sections,
 * keys and values, and the whole-file checks (see pool.h for the format) */
#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/pool/pool.h"
#include "engine/util/util.h"
#include "schema/keys.h"

#define SHOW_MAX 40          /* bytes of a bad name or value shown in a message */
#define ERRORS_MAX 20        /* problems reported; more end with "too many" */
#define NAME_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"
#define GPUS_PER_NODE_MAX 4096
#define CPUS_PER_NODE_MAX (1 << 20)

enum section { SEC_NONE, SEC_BAD, SEC_TYPE, SEC_NODE, SEC_ENV };

static const char *const section_kinds[] = { "type", "node", "env" };
static const char *const type_keys[] = {
	"flops", "memory", "bandwidth", "watts_idle", "watts_busy", "gpu", "link", "link_bandwidth",
};
static const char *const node_keys[] = { "host", "cpus", "cpu_type", "memory", "gpus", "agent" };
static const char *const top_keys[] = { "backend", "partition", "account" };   /* before any section */
#define NTOP_KEYS (int)(sizeof top_keys / sizeof top_keys[0])
enum { K_BACKEND, K_PARTITION, K_ACCOUNT };
#define NTYPE_KEYS (int)(sizeof type_keys / sizeof type_keys[0])
#define NNODE_KEYS (int)(sizeof node_keys / sizeof node_keys[0])
enum { K_FLOPS, K_TMEM, K_BW, K_IDLE, K_BUSY, K_GPU, K_LINK, K_LINK_BW };
enum { K_HOST, K_CPUS, K_CPU_TYPE, K_NMEM, K_GPUS, K_AGENT };

/* One problem of the file. */
struct pf_problem {
	int line;                            /* 1-based; 0 = the whole file */
	int seq;                             /* order found, to sort stably */
	char msg[320];                       /* without the "FILE:LINE: " prefix */
};

/* The state of one parse, shared by the line reader and the key handler. */
struct pf {
	struct dlh_pool *p;                  /* being filled */
	const char *fname;                   /* the file's name in messages */
	const char *s, *end;                 /* text not yet handed to inih */
	int lineno;                          /* line last handed to inih */
	enum section sec;                    /* the section keys now go to */
	int idx;                             /* its type or node index */
	char label[DLH_HOST_MAX + 16];       /* "[node gpu01]", for messages */
	int type_line[DLH_POOL_TYPES];       /* header line of each type */
	int tkey_line[DLH_POOL_TYPES][NTYPE_KEYS];   /* line each key was given on */
	int node_line[DLH_POOL_NODES];       /* header line of each node */
	int nkey_line[DLH_POOL_NODES][NNODE_KEYS];
	int top_line[NTOP_KEYS];             /* line each key before any section was given on */
	char cpu_type[DLH_POOL_NODES][DLH_POOL_TYPE_NAME];  /* cpu_type, resolved at the end */
	char gpus[DLH_POOL_NODES][INI_MAX_LINE];            /* gpus, resolved at the end */
	struct pf_problem errs[ERRORS_MAX];  /* the first problems found */
	int nerr;                            /* problems found */
};

/* Orders problems by line (the whole file's last), then as found. */
static int by_line(const void *a, const void *b)
{
	const struct pf_problem *x = a, *y = b;
	int lx = x->line ? x->line : INT_MAX, ly = y->line ? y->line : INT_MAX;
	return lx != ly ? (lx > ly) - (lx < ly) : x->seq - y->seq;
}

/* Records a problem on line (0: the whole file). Past ERRORS_MAX, the
 * first lines are kept: a problem found late (a node's unknown type, seen
 * once every type is known) replaces the last-placed one after it. */
static void problem(struct pf *c, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void problem(struct pf *c, int line, const char *fmt, ...)
{
	struct pf_problem e = { .line = line, .seq = ++c->nerr }, *slot;
	if (c->nerr <= ERRORS_MAX) {
		slot = &c->errs[c->nerr - 1];
	} else {
		slot = &c->errs[0];
		for (int i = 1; i < ERRORS_MAX; i++)
			if (by_line(&c->errs[i], slot) > 0)
				slot = &c->errs[i];
		if (by_line(&e, slot) > 0)
			return;
	}
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e.msg, sizeof e.msg, fmt, ap);
	va_end(ap);
	*slot = e;
}

/* Writes the problems into err, "FILE:LINE: problem" per line, in line order. */
static void report(struct pf *c, char *err, size_t errlen)
{
	int n = c->nerr < ERRORS_MAX ? c->nerr : ERRORS_MAX;
	size_t used = 0;
	qsort(c->errs, (size_t)n, sizeof c->errs[0], by_line);
	for (int i = 0; i < n && used + 1 < errlen; i++) {
		const struct pf_problem *e = &c->errs[i];
		int w = e->line ? snprintf(err + used, errlen - used, "%s%s:%d: %s", i ? "\n" : "", c->fname, e->line, e->msg)
				: snprintf(err + used, errlen - used, "%s%s: %s", i ? "\n" : "", c->fname, e->msg);
		used += w > 0 && (size_t)w < errlen - used ? (size_t)w : errlen - used - 1;
	}
	if (c->nerr > ERRORS_MAX && used + 1 < errlen)
		snprintf(err + used, errlen - used, "\n%s: %d more problems not shown", c->fname,
			 c->nerr - ERRORS_MAX);
}

/* 1 when name is 1..max bytes of letters, digits, '.', '_', '-'. */
static int good_name(const char *name, size_t max)
{
	size_t len = strlen(name);
	return len && len <= max && strspn(name, NAME_CHARS) == len && strcmp(name, ".") &&
	       strcmp(name, "..");
}

/* Quotes text for a message, cut to SHOW_MAX bytes. */
static const char *quoted(const char *text, char *buf, size_t len)
{
	dlh_spec_quote(buf, len, text, SHOW_MAX);
	return buf;
}

/* Opens the section [type NAME] (is_type) or [node NAME]: a new entry of
 * the pool, unless it has one of that name or is full. Returns its index,
 * or -1 after reporting why not. */
static int new_section(struct pf *c, int is_type, const char *name)
{
	struct dlh_pool *p = c->p;
	const char *kind = is_type ? "type" : "node";
	int found = is_type ? dlh_pool_find_type(p, name) : dlh_pool_find_node(p, name);
	int *count = is_type ? &p->ntypes : &p->nnodes;
	int *lines = is_type ? c->type_line : c->node_line;
	int max = is_type ? DLH_POOL_TYPES : DLH_POOL_NODES;
	if (found >= 0) {
		problem(c, c->lineno, "[%s %s]: defined again (first on line %d)", kind, name, lines[found]);
		return -1;
	}
	if (*count >= max) {
		problem(c, c->lineno, "[%s %s]: more than %d %s", kind, name, max,
			is_type ? "device types" : "nodes");
		return -1;
	}
	lines[*count] = c->lineno;
	c->sec = is_type ? SEC_TYPE : SEC_NODE;
	return c->idx = (*count)++;
}

/* Starts the section [type NAME] or [node NAME], a node's host and
 * cpu_type at their defaults. */
static void start_section(struct pf *c, int is_type, const char *name)
{
	int i = new_section(c, is_type, name);
	if (i < 0)
		return;
	if (is_type) {
		snprintf(c->p->type[i].name, sizeof c->p->type[i].name, "%s", name);
		return;
	}
	struct dlh_pool_node *nd = &c->p->nodes[i];
	snprintf(nd->name, sizeof nd->name, "%s", name);
	snprintf(nd->host, sizeof nd->host, "%s", name);
	snprintf(c->cpu_type[i], sizeof c->cpu_type[i], "%s", DLH_POOL_CPU_TYPE);
}

/* Cuts s at its trailing blanks. */
static void trim_end(char *s)
{
	size_t len = strlen(s);
	while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
		s[--len] = '\0';
}

/* A "[KIND NAME]" line (s starts at '['): sets the section, or SEC_BAD
 * after reporting what is wrong with it. */
static void section_line(struct pf *c, const char *s)
{
	char inner[INI_MAX_LINE], whole[INI_MAX_LINE], q[SHOW_MAX * 4 + 8];
	const char *close = strchr(s, ']');
	c->sec = SEC_BAD;
	const char *after = close ? close + 1 + strspn(close + 1, " \t") : NULL;
	if (!close || (*after && *after != ';' && *after != '#')) {
		problem(c, c->lineno, "syntax error: expected \"[type NAME]\" or \"[node NAME]\", got %s",
			quoted(s, q, sizeof q));
		return;
	}
	snprintf(inner, sizeof inner, "%.*s", (int)(close - s - 1), s + 1);
	trim_end(inner);
	snprintf(whole, sizeof whole, "%s", inner + strspn(inner, " \t"));
	char *kind = inner + strspn(inner, " \t");
	char *name = kind + strcspn(kind, " \t");
	if (*name)
		*name++ = '\0';
	name += strspn(name, " \t");
	int is_type = !strcmp(kind, "type"), is_node = !strcmp(kind, "node");
	if (!strcmp(kind, "env") && !*name) {   /* every job's environment */
		snprintf(c->label, sizeof c->label, "[env]");
		c->sec = SEC_ENV;
		return;
	}
	if (!is_type && !is_node) {
		const char *hint = dlh_spec_suggest(kind, section_kinds, 3);
		if (hint)
			problem(c, c->lineno, "[%.*s]: unknown section (did you mean \"[%s %.*s]\"?)",
				SHOW_MAX, whole, hint, SHOW_MAX, name);
		else
			problem(c, c->lineno, "[%.*s]: unknown section (expected \"[type NAME]\", \"[node NAME]\" or \"[env]\")",
				SHOW_MAX, whole);
		return;
	}
	size_t max = is_type ? DLH_POOL_TYPE_NAME - 1 : DLH_HOST_MAX;
	if (!good_name(name, max)) {
		problem(c, c->lineno, "[%s]: expected \"[%s NAME]\", NAME 1 to %zu letters, digits, '.', '_' or '-', got %s",
			kind, kind, max, quoted(name, q, sizeof q));
		return;
	}
	snprintf(c->label, sizeof c->label, "[%s %s]", kind, name);
	start_section(c, is_type, name);
}

/* The ini_reader: hands inih the next line without its line ending and
 * leading blanks (so inih never sees a continuation line), reporting
 * syntax errors and starting sections on the way. Returns str, or NULL at
 * the end of the text. */
static char *read_line(char *str, int num, void *stream)
{
	struct pf *c = stream;
	if (c->s >= c->end || num < 2)
		return NULL;
	const char *s = c->s, *nl = memchr(s, '\n', (size_t)(c->end - s));
	size_t len = (size_t)((nl ? nl : c->end) - s);
	c->s = nl ? nl + 1 : c->end;
	c->lineno++;
	str[0] = '\0';
	if (len && s[len - 1] == '\r')
		len--;
	if (c->lineno == 1 && len >= 3 && !memcmp(s, "\xEF\xBB\xBF", 3))
		s += 3, len -= 3;
	while (len && (*s == ' ' || *s == '\t'))
		s++, len--;
	if (len >= (size_t)num - 1) {
		problem(c, c->lineno, "line longer than %d characters", num - 2);
		return str;
	}
	for (size_t i = 0; i < len; i++) {
		if (((unsigned char)s[i] < 0x20 && s[i] != '\t') || s[i] == 0x7f) {
			problem(c, c->lineno, "binary data (byte 0x%02x at column %zu)", (unsigned char)s[i], i + 1);
			return str;
		}
	}
	memcpy(str, s, len);
	str[len] = '\0';
	if (*str == '[')
		section_line(c, str);
	else if (*str && *str != ';' && *str != '#' && !str[strcspn(str, "=:")])
		problem(c, c->lineno, "syntax error: expected \"[section]\" or \"key = value\", got \"%.*s\"",
			SHOW_MAX, str);
	return str;
}

/* Parses a number with an optional unit suffix among units, each unit
 * base times the one before it ("1.5T", "90G", "12"). Returns 0, or -1. */
static int parse_scaled(const char *v, double base, const char *units, double *out)
{
	if (!((*v >= '0' && *v <= '9') || *v == '.'))
		return -1;
	char *end;
	double x = strtod(v, &end);
	if (end == v || !isfinite(x))
		return -1;
	if (*end) {
		const char *u = units ? strchr(units, *end) : NULL;
		if (!u || end[1])
			return -1;
		for (const char *w = units; w <= u; w++)
			x *= base;
	}
	*out = x;
	return 0;
}

/* Parses a whole count from lo to hi (digits only). Returns 0, or -1. */
static int parse_count(const char *v, long lo, long hi, int *out)
{
	size_t len = strspn(v, "0123456789");
	if (!len || v[len] || len > 9)
		return -1;
	long x = strtol(v, NULL, 10);
	if (x < lo || x > hi)
		return -1;
	*out = (int)x;
	return 0;
}

static int parse_bool(const char *v, int *out)
{
	static const char *const yes[] = { "true", "yes", "on", "1" }, *const no[] = { "false", "no", "off", "0" };
	for (int i = 0; i < 4; i++) {
		if (!strcmp(v, yes[i]) || !strcmp(v, no[i])) {
			*out = !strcmp(v, yes[i]);
			return 0;
		}
	}
	return -1;
}

/* Sets a byte size (powers of 1024) into *field. Returns 0, or -1 with msg. */
static int set_size(const char *v, long long *field, char *msg, size_t n)
{
	double x;
	if (parse_scaled(v, 1024, "KMGTP", &x) || x >= 0x1p62) {
		snprintf(msg, n, "expected a size such as \"80G\" (K, M, G, T, P: powers of 1024)");
		return -1;
	}
	*field = llround(x);
	return 0;
}

/* Sets a rate (powers of 1000) into *field. Returns 0, or -1 with msg. */
static int set_rate(const char *v, double *field, char *msg, size_t n)
{
	if (parse_scaled(v, 1000, "KMGTP", field)) {
		snprintf(msg, n, "expected a rate such as \"90G\" or \"3.35T\" (K, M, G, T, P: powers of 1000)");
		return -1;
	}
	return 0;
}

/* Sets one key of the current type. Returns 0, or -1 with msg. */
static int type_key(struct pf *c, int k, const char *v, char *msg, size_t n)
{
	struct dlh_pool_type *t = &c->p->type[c->idx];
	switch (k) {
	case K_FLOPS:
		return set_rate(v, &t->flops, msg, n);
	case K_TMEM:
		return set_size(v, &t->mem_bytes, msg, n);
	case K_BW:
		return set_rate(v, &t->bandwidth, msg, n);
	case K_IDLE:
	case K_BUSY:
		if (parse_scaled(v, 1000, NULL, k == K_IDLE ? &t->watts_idle : &t->watts_busy)) {
			snprintf(msg, n, "expected watts, a number such as \"12\" or \"0.5\"");
			return -1;
		}
		return 0;
	case K_LINK:
		if (strcmp(v, "nvlink") && strcmp(v, "pcie")) {
			snprintf(msg, n, "expected nvlink or pcie");
			return -1;
		}
		snprintf(t->link, sizeof t->link, "%s", v);
		return 0;
	case K_LINK_BW:
		return set_rate(v, &t->link_bw, msg, n);
	default:
		if (parse_bool(v, &t->gpu)) {
			snprintf(msg, n, "expected true or false");
			return -1;
		}
		return 0;
	}
}

/* Sets one key of the current node (cpu_type and gpus are kept as text
 * until every type is known). Returns 0, or -1 with msg. */
static int node_key(struct pf *c, int k, const char *v, char *msg, size_t n)
{
	struct dlh_pool_node *nd = &c->p->nodes[c->idx];
	switch (k) {
	case K_HOST:
		if (!good_name(v, DLH_HOST_MAX)) {
			snprintf(msg, n, "expected a host name (letters, digits, '.', '_', '-')");
			return -1;
		}
		snprintf(nd->host, sizeof nd->host, "%s", v);
		return 0;
	case K_CPUS:
		if (parse_count(v, 1, CPUS_PER_NODE_MAX, &nd->cpus)) {
			snprintf(msg, n, "expected a whole number of cores from 1 to %d", CPUS_PER_NODE_MAX);
			return -1;
		}
		return 0;
	case K_CPU_TYPE:
		snprintf(c->cpu_type[c->idx], sizeof c->cpu_type[c->idx], "%s", v);
		return 0;
	case K_NMEM:
		return set_size(v, &nd->mem_bytes, msg, n);
	case K_AGENT:
		if (!v[0] || v[0] != '/' || strlen(v) >= sizeof nd->agent) {
			snprintf(msg, n, "expected the absolute path of a program and its options "
				 "(split on blanks), at most %zu bytes", sizeof nd->agent - 1);
			return -1;
		}
		snprintf(nd->agent, sizeof nd->agent, "%s", v);
		return 0;
	default:
		snprintf(c->gpus[c->idx], sizeof c->gpus[c->idx], "%s", v);
		return 0;
	}
}

/* Index of name in keys (n of them), or -1. */
static int key_index(const char *const *keys, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(keys[i], name))
			return i;
	return -1;
}

/* A key before any section: how runs are launched (backend, partition,
 * account). Problems are recorded. */
static void top_key(struct pf *c, const char *name, const char *v)
{
	char q[SHOW_MAX * 4 + 8];
	struct dlh_pool *p = c->p;
	int k = key_index(top_keys, NTOP_KEYS, name);
	if (k < 0) {
		const char *hint = dlh_spec_suggest(name, top_keys, NTOP_KEYS);
		problem(c, c->lineno, "\"%.*s\": key outside any section (put it under [type NAME] or "
			"[node NAME]%s%s%s)", SHOW_MAX, name, hint ? "; did you mean \"" : "",
			hint ? hint : "", hint ? "\"?" : "");
		return;
	}
	if (c->top_line[k]) {
		problem(c, c->lineno, "%s: given twice (first on line %d)", name, c->top_line[k]);
		return;
	}
	c->top_line[k] = c->lineno;
	if (k == K_BACKEND) {
		if (strcmp(v, "local") && strcmp(v, DLH_BACKEND_SLURM))
			problem(c, c->lineno, "backend: expected local or slurm, got %s", quoted(v, q, sizeof q));
		else
			snprintf(p->backend, sizeof p->backend, "%s", v);
		return;
	}
	char *field = k == K_PARTITION ? p->partition : p->account;
	if (!good_name(v, DLH_HOST_MAX))
		problem(c, c->lineno, "%s: expected a Slurm %s name (1 to %d letters, digits, '.', "
			"'_' or '-'), got %s", name, name, DLH_HOST_MAX, quoted(v, q, sizeof q));
	else
		snprintf(field, DLH_HOST_MAX + 1, "%s", v);
}

/* The whole file's checks of the keys before any section: a slurm pool
 * takes its nodes from Slurm; partition and account are Slurm's. */
static void check_top(struct pf *c)
{
	struct dlh_pool *p = c->p;
	if (!dlh_pool_is_slurm(p)) {
		for (int k = K_PARTITION; k <= K_ACCOUNT; k++)
			if (c->top_line[k])
				problem(c, c->top_line[k], "%s: only a Slurm pool has one (backend = slurm)",
					top_keys[k]);
		return;
	}
	for (int k = 0; k < p->nnodes; k++)
		problem(c, c->node_line[k], "[node %s]: a Slurm pool's nodes are Slurm's (sinfo): "
			"leave out [node NAME] sections", p->nodes[k].name);
}

/* The ini_handler for each key line. Problems are recorded, never
 * returned: inih goes on and every problem of the file is reported. */
static int on_key(void *user, const char *section, const char *name, const char *value)
{
	struct pf *c = user;
	char msg[256], q[SHOW_MAX * 4 + 8];
	(void)section;
	if (!name || !value || c->sec == SEC_BAD)
		return 1;
	if (!*name) {
		problem(c, c->lineno, "syntax error: a key name is missing before \"=\"");
		return 1;
	}
	if (c->sec == SEC_NONE) {
		top_key(c, name, value);
		return 1;
	}
	if (c->sec == SEC_ENV) {   /* NAME = VALUE: a variable every job's ranks get */
		char entry[INI_MAX_LINE * 2];
		snprintf(entry, sizeof entry, "%s=%s", name, value);
		if (dlh_env_add(c->p->env, sizeof c->p->env - 1, entry, msg, sizeof msg))
			problem(c, c->lineno, "[env] %.*s: %s", SHOW_MAX, name, msg);
		return 1;
	}
	int is_type = c->sec == SEC_TYPE;
	const char *const *keys = is_type ? type_keys : node_keys;
	int nkeys = is_type ? NTYPE_KEYS : NNODE_KEYS;
	int k = key_index(keys, nkeys, name);
	if (k < 0) {
		const char *hint = dlh_spec_suggest(name, keys, nkeys);
		problem(c, c->lineno, "%s %.*s: unknown key%s%s%s", c->label, SHOW_MAX, name,
			hint ? " (did you mean \"" : "", hint ? hint : "", hint ? "\"?)" : "");
		return 1;
	}
	int *line = is_type ? &c->tkey_line[c->idx][k] : &c->nkey_line[c->idx][k];
	if (*line) {
		problem(c, c->lineno, "%s %s: given twice (first on line %d)", c->label, name, *line);
		return 1;
	}
	*line = c->lineno;
	if ((is_type ? type_key : node_key)(c, k, value, msg, sizeof msg))
		problem(c, c->lineno, "%s %s: %s, got %s", c->label, name, msg, quoted(value, q, sizeof q));
	return 1;
}

/* The index of type name for node k's key (cpu_type or gpus, on line),
 * adding the built-in "cpu" type when a node names it undefined. Returns
 * it, or -1 after reporting an unknown name. */
static int resolve_type(struct pf *c, int k, const char *key, int line, const char *name)
{
	struct dlh_pool *p = c->p;
	int t = dlh_pool_find_type(p, name);
	if (t >= 0)
		return t;
	if (!strcmp(name, DLH_POOL_CPU_TYPE) && p->ntypes < DLH_POOL_TYPES) {
		dlh_pool_default_cpu(&p->type[p->ntypes]);
		return p->ntypes++;
	}
	const char *cands[DLH_POOL_TYPES];
	for (int i = 0; i < p->ntypes; i++)
		cands[i] = p->type[i].name;
	const char *hint = dlh_spec_suggest(name, cands, p->ntypes);
	problem(c, line, "[node %s] %s: unknown device type \"%.*s\"%s%s%s", p->nodes[k].name, key,
		SHOW_MAX, name, hint ? " (did you mean \"" : " (define it with [type NAME])",
		hint ? hint : "", hint ? "\"?)" : "");
	return -1;
}

/* Resolves node k's cpu_type into its cpu devices. */
static void resolve_cpus(struct pf *c, int k)
{
	struct dlh_pool_node *nd = &c->p->nodes[k];
	int line = c->nkey_line[k][K_CPU_TYPE] ? c->nkey_line[k][K_CPU_TYPE] : c->node_line[k];
	int t = resolve_type(c, k, "cpu_type", line, c->cpu_type[k]);
	if (t < 0)
		return;
	if (c->p->type[t].gpu) {
		problem(c, line, "[node %s] cpu_type: \"%s\" is a GPU type (gpu = true); name a CPU type",
			nd->name, c->p->type[t].name);
		return;
	}
	nd->cpu_type = t;
	nd->devices[t] = nd->cpus;
}

/* Resolves node k's gpus ("TYPE:COUNT, ...", COUNT 1 when left out). */
static void resolve_gpus(struct pf *c, int k)
{
	struct dlh_pool_node *nd = &c->p->nodes[k];
	int line = c->nkey_line[k][K_GPUS];
	char list[INI_MAX_LINE], q[SHOW_MAX * 4 + 8];
	snprintf(list, sizeof list, "%s", c->gpus[k]);
	for (char *save = NULL, *item = strtok_r(list, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		item += strspn(item, " \t");
		item[strcspn(item, " \t")] = '\0';
		char *colon = strchr(item, ':');
		int count = 1;
		if (colon)
			*colon++ = '\0';
		if (colon && parse_count(colon, 1, GPUS_PER_NODE_MAX, &count)) {
			problem(c, line, "[node %s] gpus: \"%s\": expected TYPE:COUNT, COUNT from 1 to %d, got %s",
				nd->name, item, GPUS_PER_NODE_MAX, quoted(colon, q, sizeof q));
			continue;
		}
		int t = resolve_type(c, k, "gpus", line, item);
		if (t < 0)
			continue;
		if (!c->p->type[t].gpu)
			problem(c, line, "[node %s] gpus: \"%s\" is not a GPU type (give [type %s] gpu = true)",
				nd->name, item, item);
		else if (nd->devices[t])
			problem(c, line, "[node %s] gpus: \"%s\" listed twice", nd->name, item);
		else
			nd->devices[t] = count;
	}
}

/* Checks a type's figures against each other. */
static void check_type(struct pf *c, int t)
{
	struct dlh_pool_type *ty = &c->p->type[t];
	if (ty->watts_busy && ty->watts_busy < ty->watts_idle)
		problem(c, c->tkey_line[t][K_BUSY], "[type %s] watts_busy: %g is below watts_idle (%g)",
			ty->name, ty->watts_busy, ty->watts_idle);
	int given = c->tkey_line[t][K_LINK] ? c->tkey_line[t][K_LINK] : c->tkey_line[t][K_LINK_BW];
	if (given && !ty->gpu)
		problem(c, given, "[type %s] %s: only a GPU type has a link between its devices "
			"(gpu = true)", ty->name, c->tkey_line[t][K_LINK] ? "link" : "link_bandwidth");
	if (ty->gpu)
		dlh_pool_link_defaults(ty);
}

/* Checks node k and resolves its device types. */
static void check_node(struct pf *c, int k)
{
	struct dlh_pool *p = c->p;
	struct dlh_pool_node *nd = &p->nodes[k];
	if (!c->nkey_line[k][K_CPUS]) {
		problem(c, c->node_line[k], "[node %s]: cpus is required (its number of cores)", nd->name);
		return;
	}
	for (int j = 0; j < k; j++)
		if (!strcmp(p->nodes[j].host, nd->host))
			problem(c, c->nkey_line[k][K_HOST] ? c->nkey_line[k][K_HOST] : c->node_line[k],
				"[node %s] host: \"%s\" is already the host of [node %s] (line %d)",
				nd->name, nd->host, p->nodes[j].name, c->node_line[j]);
	resolve_cpus(c, k);
	if (c->nkey_line[k][K_GPUS])
		resolve_gpus(c, k);
}

/* A CPU type without memory offers a rank the smallest per-core share of
 * memory among the nodes with cores of that type. */
static void default_cpu_memory(struct dlh_pool *p)
{
	for (int t = 0; t < p->ntypes; t++) {
		if (p->type[t].gpu || p->type[t].mem_bytes)
			continue;
		for (int k = 0; k < p->nnodes; k++) {
			const struct dlh_pool_node *nd = &p->nodes[k];
			long long share = nd->mem_bytes / (nd->cpus ? nd->cpus : 1);
			if (nd->cpu_type == t && nd->devices[t] && share &&
			    (!p->type[t].mem_bytes || share < p->type[t].mem_bytes))
				p->type[t].mem_bytes = share;
		}
	}
}

/* The node that is this machine: its host is local_host, local_host's
 * short name, localhost, or one of this machine's addresses (the full name
 * first, over every node); -1 when none is: a head node outside the pool. */
static int local_node(const struct dlh_pool *p, const char *local_host)
{
	for (int k = 0; k < p->nnodes; k++)
		if (local_host[0] && !strcmp(p->nodes[k].host, local_host))
			return k;
	for (int k = 0; k < p->nnodes; k++)
		if (dlh_pool_host_is_self(p->nodes[k].host, local_host))
			return k;
	return -1;
}

int dlh_pool_parse(struct dlh_pool *p, const char *text, size_t len, const char *fname,
		   const char *local_host, int cpus_override, char *err, size_t errlen)
{
	struct pf *c = calloc(1, sizeof *c);
	if (!c)
		return -ENOMEM;
	memset(p, 0, sizeof *p);
	*c = (struct pf){ .p = p, .fname = fname, .s = text, .end = text + len };
	if (errlen)
		err[0] = '\0';
	ini_parse_stream(read_line, c, on_key, c);
	int ntypes_given = p->ntypes;
	for (int t = 0; t < ntypes_given; t++)
		check_type(c, t);
	check_top(c);
	for (int k = 0; k < p->nnodes && !dlh_pool_is_slurm(p); k++)
		check_node(c, k);
	if (dlh_pool_is_slurm(p) && !c->nerr && dlh_pool_find_type(p, DLH_POOL_CPU_TYPE) < 0 &&
	    p->ntypes < DLH_POOL_TYPES)   /* Slurm's nodes' cores */
		dlh_pool_default_cpu(&p->type[p->ntypes++]);
	if (!p->nnodes && !c->nerr && !dlh_pool_is_slurm(p))
		problem(c, 0, "no [node NAME] section: the pool needs at least one node");
	int rc = c->nerr ? -EINVAL : 0;
	if (rc)
		report(c, err, errlen);
	free(c);
	if (rc)
		return rc;
	snprintf(p->source, sizeof p->source, "%s", fname);
	if (!p->backend[0])
		snprintf(p->backend, sizeof p->backend, "local");
	default_cpu_memory(p);
	int k = local_node(p, local_host);
	if (k < 0) {   /* this machine runs mpirun, no rank */
		dlh_pool_set_head(p);
		return 0;
	}
	if (cpus_override > 0) {
		p->nodes[k].cpus = cpus_override;
		p->nodes[k].devices[p->nodes[k].cpu_type] = cpus_override;
	}
	dlh_pool_set_local(p, k);
	return 0;
}

int dlh_pool_load(struct dlh_pool *p, const char *path, int cpus_override,
		  char *err, size_t errlen)
{
	char *text, host[DLH_HOST_MAX + 1] = "";
	size_t len;
	int rc = dlh_read_file(path, DLH_POOL_FILE_MAX, &text, &len);
	if (rc == -EFBIG) {
		snprintf(err, errlen, "%s: larger than %d bytes: not a pool file", path, DLH_POOL_FILE_MAX);
		return rc;
	}
	if (rc) {
		snprintf(err, errlen, "cannot read pool file \"%s\": %s", path, strerror(-rc));
		return rc;
	}
	if (gethostname(host, sizeof host - 1))
		host[0] = '\0';
	rc = dlh_pool_parse(p, text, len, path, host, cpus_override, err, errlen);
	free(text);
	return rc;
}
