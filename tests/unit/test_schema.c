/* test_schema.c - the spec language: golden corpus (tests/spec), defaults, round trip, error reporting */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema/keys.h"
#include "schema/spec.h"
#include "tests/unit/check.h"

static const char *corpus = "tests/spec";   /* argv[1] overrides */

#define FMT_MAX 16384   /* room for any formatted spec */

/* Reads a whole file into a malloc'd, NUL-terminated buffer. Returns it
 * (length in *len), or NULL when it cannot be read. */
static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap + 1);
	size_t got;
	while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
		n += got;
		if (n == cap) {
			char *nb = realloc(buf, cap * 2 + 1);
			if (!nb) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
			cap *= 2;
		}
	}
	fclose(f);
	if (!buf)
		return NULL;
	buf[n] = '\0';
	*len = n;
	return buf;
}

/* 1 when every field of a and b holds the same value. */
static int spec_equal(const struct dlh_spec *a, const struct dlh_spec *b)
{
	if (a->nlayers != b->nlayers ||
	    memcmp(a->layers, b->layers, (size_t)a->nlayers * sizeof a->layers[0]))
		return 0;
	return !strcmp(a->name, b->name) && !strcmp(a->command, b->command) &&
	       a->restart == b->restart && a->max_restarts == b->max_restarts &&
	       !strcmp(a->train, b->train) && !strcmp(a->train_labels, b->train_labels) &&
	       !strcmp(a->test, b->test) && !strcmp(a->test_labels, b->test_labels) &&
	       !strcmp(a->format, b->format) && a->train_limit == b->train_limit &&
	       a->test_limit == b->test_limit && !strcmp(a->model_type, b->model_type) &&
	       a->epochs == b->epochs && a->batch_size == b->batch_size && a->lr == b->lr &&
	       !strcmp(a->optimizer, b->optimizer) && a->momentum == b->momentum &&
	       a->weight_decay == b->weight_decay && a->seed == b->seed &&
	       a->checkpoint_every == b->checkpoint_every && a->ranks == b->ranks &&
	       a->device == b->device;
}

/* Parses a NUL-terminated spec. */
static int parse(const char *text, struct dlh_spec *s, char *err, size_t errlen)
{
	return dlh_spec_parse(text, strlen(text), s, err, errlen);
}

/* text with newlines shown as "\\n", so a FAIL stays one line; a static
 * buffer, one of two in turn. */
static const char *oneline(const char *text)
{
	static char bufs[2][DLH_ERR_MAX * 2];
	static int which;
	char *b = bufs[which ^= 1];
	size_t o = 0;
	for (; *text && o + 3 < sizeof bufs[0]; text++) {
		if (*text == '\n') {
			b[o++] = '\\';
			b[o++] = 'n';
		} else {
			b[o++] = *text;
		}
	}
	b[o] = '\0';
	return b;
}

/* Copies the first line of text (without its newline, trailing blanks
 * trimmed) into out. */
static void first_line(const char *text, char *out, size_t n)
{
	size_t l = strcspn(text, "\n");
	while (l && (text[l - 1] == ' ' || text[l - 1] == '\t' || text[l - 1] == '\r'))
		l--;
	if (l >= n)
		l = n - 1;
	memcpy(out, text, l);
	out[l] = '\0';
}

/* Lines in text (each ends in a newline). */
static int count_lines(const char *text)
{
	int n = 0;
	for (; *text; text++)
		n += *text == '\n';
	return n;
}

/* qsort order for file names. */
static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The sorted names of the *.ini files in dir, without ".ini"; their count
 * in *n. Returns NULL (n = 0) when dir cannot be read. */
static char **list_cases(const char *dir, int *n)
{
	DIR *d = opendir(dir);
	char **names = NULL;
	int cap = 0;
	*n = 0;
	if (!d)
		return NULL;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);
		if (l <= 4 || strcmp(e->d_name + l - 4, ".ini"))
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 64;
			names = realloc(names, (size_t)cap * sizeof *names);
		}
		names[*n] = strndup(e->d_name, l - 4);
		(*n)++;
	}
	closedir(d);
	qsort(names, (size_t)*n, sizeof *names, by_name);
	return names;
}

/* Frees what list_cases returned. */
static void free_cases(char **names, int n)
{
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* Where text a and b first differ: copies that line of each into ea, eb. */
static void first_diff(const char *a, const char *b, char *ea, char *eb, size_t n)
{
	while (*a && *a == *b) {
		const char *na = strchr(a, '\n'), *nb = strchr(b, '\n');
		if (!na || !nb || na - a != nb - b || memcmp(a, b, (size_t)(na - a)))
			break;
		a = na + 1;
		b = nb + 1;
	}
	first_line(a, ea, n);
	first_line(b, eb, n);
}

/* good/NAME.ini parses, formats to exactly good/NAME.out, and that text
 * parses back to an equal spec and formats the same. One FAIL per file. */
TEST(golden_good)
{
	char dir[512], path[1024], err[DLH_ERR_MAX], out[FMT_MAX], out2[FMT_MAX];
	int n;
	snprintf(dir, sizeof dir, "%s/good", corpus);
	char **names = list_cases(dir, &n);
	for (int i = 0; i < n; i++) {
		size_t len, olen;
		struct dlh_spec s, s2;
		snprintf(path, sizeof path, "%s/%s.ini", dir, names[i]);
		char *text = slurp(path, &len);
		snprintf(path, sizeof path, "%s/%s.out", dir, names[i]);
		char *want = slurp(path, &olen);
		char ea[256], eb[256];
		int rc = text ? dlh_spec_parse(text, len, &s, err, sizeof err) : -ENOENT;
		if (!text || !want) {
			printf("FAIL %s: %s/%s: missing .ini or .out\n", check_name_, dir, names[i]);
			check_failed_ = 1;
		} else if (rc) {
			first_line(err, ea, sizeof ea);
			printf("FAIL %s: %s/%s.ini: expected it to parse, got %d: %s\n",
			       check_name_, dir, names[i], rc, ea);
			check_failed_ = 1;
		} else if (dlh_spec_format(&s, out, sizeof out) < 0 || strcmp(out, want)) {
			first_diff(want, out, ea, eb, sizeof ea);
			printf("FAIL %s: %s/%s.out: expected \"%s\", got \"%s\"\n",
			       check_name_, dir, names[i], ea, eb);
			check_failed_ = 1;
		} else if (parse(out, &s2, err, sizeof err) || !spec_equal(&s, &s2) ||
			   dlh_spec_format(&s2, out2, sizeof out2) < 0 || strcmp(out, out2)) {
			printf("FAIL %s: %s/%s: the normalized text does not parse back equal\n",
			       check_name_, dir, names[i]);
			check_failed_ = 1;
		}
		free(text);
		free(want);
	}
	free_cases(names, n);
	CHECK_MSG(n >= 10, "%s: expected at least 10 good cases, found %d", dir, n);
}

/* bad/NAME.ini fails with -EINVAL and exactly one error line, which equals
 * bad/NAME.err (trimmed). One FAIL per file. */
TEST(golden_bad)
{
	char dir[512], path[1024], err[DLH_ERR_MAX];
	int n;
	snprintf(dir, sizeof dir, "%s/bad", corpus);
	char **names = list_cases(dir, &n);
	for (int i = 0; i < n; i++) {
		size_t len, elen;
		struct dlh_spec s;
		snprintf(path, sizeof path, "%s/%s.ini", dir, names[i]);
		char *text = slurp(path, &len);
		snprintf(path, sizeof path, "%s/%s.err", dir, names[i]);
		char *want = slurp(path, &elen);
		char ew[512], eg[512];
		if (!text || !want) {
			printf("FAIL %s: %s/%s: missing .ini or .err\n", check_name_, dir, names[i]);
			check_failed_ = 1;
			free(text);
			free(want);
			continue;
		}
		strcpy(err, "(nothing)");
		int rc = dlh_spec_parse(text, len, &s, err, sizeof err);
		first_line(want, ew, sizeof ew);
		first_line(err, eg, sizeof eg);
		if (rc != -EINVAL || strcmp(ew, eg)) {
			printf("FAIL %s: %s/%s.ini: expected %d \"%s\", got %d \"%s\"\n",
			       check_name_, dir, names[i], -EINVAL, ew, rc, eg);
			check_failed_ = 1;
		} else if (count_lines(err) != 1) {
			printf("FAIL %s: %s/%s.ini: expected one problem, got %d lines: %s\n",
			       check_name_, dir, names[i], count_lines(err), oneline(err));
			check_failed_ = 1;
		}
		free(text);
		free(want);
	}
	free_cases(names, n);
	CHECK_MSG(n >= 35, "%s: expected at least 35 bad cases, found %d", dir, n);
}

/* dlh_spec_defaults gives the documented value of every key. */
TEST(defaults)
{
	struct dlh_spec s;
	memset(&s, 0x5a, sizeof s);
	dlh_spec_defaults(&s);
	CHECK(!strcmp(s.name, "") && !strcmp(s.command, ""));
	CHECK(s.restart == DLH_RESTART_NEVER && s.max_restarts == 3);
	CHECK(!strcmp(s.train, "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"));
	CHECK(!strcmp(s.train_labels, "/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz"));
	CHECK(!strcmp(s.test, "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"));
	CHECK(!strcmp(s.test_labels, "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz"));
	CHECK(!strcmp(s.format, "idx") && s.train_limit == 0 && s.test_limit == 0);
	CHECK(!strcmp(s.model_type, "mlp"));
	CHECK(s.nlayers == 3 && s.layers[0] == 256 && s.layers[1] == 128 && s.layers[2] == 100);
	CHECK(s.epochs == 10 && s.batch_size == 64 && s.lr == 0.01);
	CHECK(!strcmp(s.optimizer, "sgd") && s.momentum == 0.9 && s.weight_decay == 0);
	CHECK(s.seed == 1 && s.checkpoint_every == 500);
	CHECK(s.ranks == 0 && s.device == DLH_DEVICE_CPU);

	/* A spec naming only a section is the defaults; err is emptied. */
	struct dlh_spec p;
	char err[DLH_ERR_MAX] = "stale";
	CHECK(parse("[job]\n", &p, err, sizeof err) == 0);
	CHECK(err[0] == '\0');
	CHECK(spec_equal(&s, &p));
}

/* format -> parse gives an equal spec, for the defaults and for a spec
 * with every key changed, including numbers that need 17 digits. */
TEST(format_round_trip)
{
	static const char *text =
		"[job]\nname = rt\nrestart = on-failure\nmax_restarts = 0\n"
		"[data]\ntrain_limit = 100\ntest_limit = 7\n"
		"[model]\nlayers = 3,1,4,1,5,9,2,6,5,3,5,8,9,7,9,3\n"
		"[train]\nepochs = 9999\nbatch_size = 100\nlr = 0.30000000000000004\n"
		"momentum = 0.123456789012345678\nweight_decay = 1e-17\nseed = 18446744073709551615\n"
		"checkpoint_every = 1\n[resources]\nranks = 100\ndevice = gpu\n";
	struct dlh_spec a, b, d;
	char err[DLH_ERR_MAX], out[FMT_MAX], out2[FMT_MAX];
	CHECK_MSG(parse(text, &a, err, sizeof err) == 0, "%s", oneline(err));
	CHECK(a.lr == 0.30000000000000004 && a.momentum == 0.123456789012345678);
	CHECK(a.nlayers == 16 && a.layers[15] == 3);
	int len = dlh_spec_format(&a, out, sizeof out);
	CHECK(len > 0 && (size_t)len == strlen(out));
	CHECK(strstr(out, "\nlr = 0.30000000000000004\n"));
	CHECK(strstr(out, "\nweight_decay = 1e-17\n"));
	CHECK(strstr(out, "\nranks = 100\n"));
	CHECK_MSG(parse(out, &b, err, sizeof err) == 0, "%s", oneline(err));
	CHECK(spec_equal(&a, &b));
	CHECK(dlh_spec_format(&b, out2, sizeof out2) == len && !strcmp(out, out2));

	/* a command's spec: its keys only */
	static const char *command =
		"[job]\nname = rt\ncommand = ./run --x=1 a;b\nrestart = on-failure\nmax_restarts = 0\n"
		"[resources]\nranks = 100\ndevice = gpu\n";
	CHECK_MSG(parse(command, &a, err, sizeof err) == 0, "%s", oneline(err));
	len = dlh_spec_format(&a, out, sizeof out);
	CHECK(len > 0 && strstr(out, "\ncommand = ./run --x=1 a;b\n") && strstr(out, "\nranks = 100\n"));
	CHECK_MSG(parse(out, &b, err, sizeof err) == 0, "%s", oneline(err));
	CHECK(spec_equal(&a, &b));
	CHECK(dlh_spec_format(&b, out2, sizeof out2) == len && !strcmp(out, out2));

	dlh_spec_defaults(&d);
	CHECK(dlh_spec_format(&d, out, sizeof out) > 0);
	CHECK(strstr(out, "[job]\nname =\ncommand =\nrestart = never\n") == out);
	CHECK(strstr(out, "\nranks = auto\n") && strstr(out, "\nlayers = 256, 128, 100\n"));
	CHECK(strstr(out, "\n\n[data]\n") && strstr(out, "\n\n[resources]\n"));
	CHECK_MSG(parse(out, &b, err, sizeof err) == 0, "%s", oneline(err));
	CHECK(spec_equal(&d, &b));
}

/* Values that begin with a comment character survive format -> parse:
 * "command =;x /bin/true" was stored as "command = ;x /bin/true", which
 * parses back as an empty command. */
TEST(format_round_trip_of_values_that_start_like_comments)
{
	static const char *const texts[] = {
		"[job]\ncommand =;x /bin/true\n", "[job]\ncommand =#y /bin/true\n",
	};
	struct dlh_spec a, b;
	char err[DLH_ERR_MAX], out[FMT_MAX];
	for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
		CHECK_MSG(dlh_spec_parse_flags(texts[i], strlen(texts[i]), &a, err, sizeof err,
					       DLH_SPEC_STORED) == 0, "%s", oneline(err));
		CHECK(a.command[0] == ';' || a.command[0] == '#');
		CHECK(dlh_spec_format(&a, out, sizeof out) > 0);
		CHECK_MSG(dlh_spec_parse_flags(out, strlen(out), &b, err, sizeof err,
					       DLH_SPEC_STORED) == 0, "%s", oneline(err));
		CHECK_MSG(spec_equal(&a, &b), "%s: command \"%s\" came back \"%s\"", texts[i],
			  a.command, b.command);
	}
}

/* dlh_spec_format says -ENOSPC, rather than overflowing, when short. */
TEST(format_enospc)
{
	struct dlh_spec s;
	char out[FMT_MAX];
	dlh_spec_defaults(&s);
	int len = dlh_spec_format(&s, out, sizeof out);
	CHECK(len > 0);
	char *exact = malloc((size_t)len + 1);
	CHECK(dlh_spec_format(&s, exact, (size_t)len + 1) == len && !strcmp(exact, out));
	CHECK(dlh_spec_format(&s, exact, (size_t)len) == -ENOSPC);
	CHECK(dlh_spec_format(&s, exact, 10) == -ENOSPC);
	CHECK(dlh_spec_format(&s, NULL, 0) == -ENOSPC);
	free(exact);
}

/* Every problem is reported, one line each, sorted by line even when found
 * out of order (the batch/ranks check runs last). */
TEST(all_errors_in_line_order)
{
	static const char *text =
		"[resources]\n"
		"ranks = 4\n"
		"[train]\n"
		"batch_size = 3\n"
		"colour = red\n"
		"epochs\n";
	struct dlh_spec s;
	char err[DLH_ERR_MAX];
	CHECK(parse(text, &s, err, sizeof err) == -EINVAL);
	CHECK_MSG(!strcmp(err,
		"spec:4: [train] batch_size: 3 is smaller than [resources] ranks (4)\n"
		"spec:5: [train] colour: unknown key\n"
		"spec:6: syntax error: expected \"[section]\" or \"key = value\", got \"epochs\"\n"),
		"got: %s", oneline(err));

	/* Several syntax errors, not only inih's first one; keys under a bad
	 * header are skipped rather than misreported. */
	CHECK(parse("[train\nepochs = x\n[train]\nlr\nlr = 0.1\n}\n", &s, err, sizeof err) == -EINVAL);
	CHECK_MSG(count_lines(err) == 3 && !strncmp(err, "spec:1: syntax", 14) &&
		  strstr(err, "\nspec:4: syntax") && strstr(err, "\nspec:6: syntax"), "got: %s", oneline(err));
}

/* More than DLH_SPEC_MAX bytes is -EFBIG; exactly DLH_SPEC_MAX is fine. */
TEST(size_limit)
{
	static const char *head = "[train]\nepochs = 3\n";
	char *buf = malloc(DLH_SPEC_MAX + 1);
	char err[DLH_ERR_MAX];
	struct dlh_spec s;
	size_t pos = strlen(head);
	memcpy(buf, head, pos);
	while (pos < DLH_SPEC_MAX) {   /* comment lines of up to 100 bytes */
		size_t l = DLH_SPEC_MAX - pos < 100 ? DLH_SPEC_MAX - pos : 100;
		memset(buf + pos, ' ', l);
		buf[pos] = '#';
		buf[pos + l - 1] = '\n';
		pos += l;
	}
	CHECK_MSG(dlh_spec_parse(buf, DLH_SPEC_MAX, &s, err, sizeof err) == 0, "%s", oneline(err));
	CHECK(s.epochs == 3);
	buf[DLH_SPEC_MAX] = '\n';
	CHECK(dlh_spec_parse(buf, DLH_SPEC_MAX + 1, &s, err, sizeof err) == -EFBIG);
	CHECK_MSG(!strcmp(err, "spec: larger than 65536 bytes (got 65537)\n"), "got: %s", oneline(err));
	free(buf);
}

/* The text is len-bounded: no NUL is needed, and bytes after len are not read. */
TEST(not_nul_terminated)
{
	static const char *text = "[train]\nepochs = 5\nepochs = 6\n";
	size_t cut = strlen("[train]\nepochs = 5\n");
	char *exact = malloc(cut);   /* no room for a NUL: ASan sees any overread */
	memcpy(exact, text, cut);
	struct dlh_spec s;
	char err[DLH_ERR_MAX];
	CHECK_MSG(dlh_spec_parse(exact, cut, &s, err, sizeof err) == 0, "%s", oneline(err));
	CHECK(s.epochs == 5);
	CHECK(dlh_spec_parse(exact, cut - 1, &s, err, sizeof err) == 0 && s.epochs == 5);
	CHECK(dlh_spec_parse(exact, cut - 2, &s, err, sizeof err) == -EINVAL);   /* "epochs = " */
	free(exact);
	CHECK(dlh_spec_parse(text, strlen(text), &s, err, sizeof err) == -EINVAL);
	CHECK(dlh_spec_parse(text, 0, &s, err, sizeof err) == -EINVAL);
	CHECK(!strcmp(err, "spec: empty spec (nothing to run)\n"));
}

/* A short err buffer is never overrun: the report ends with the
 * "too many errors" line, or is cut and NUL-terminated. */
TEST(small_err_buffer)
{
	char text[8192];
	size_t pos = (size_t)snprintf(text, sizeof text, "[train]\n");
	for (int i = 0; i < 200; i++)
		pos += (size_t)snprintf(text + pos, sizeof text - pos, "k%d = 1\n", i);
	struct dlh_spec s;
	char err[DLH_ERR_MAX];
	CHECK(dlh_spec_parse(text, pos, &s, err, sizeof err) == -EINVAL);
	size_t l = strlen(err);
	CHECK(l < sizeof err && l > 22);
	CHECK_MSG(!strcmp(err + l - 22, "spec: too many errors\n"), "ends: %s", oneline(err + l - 40));
	CHECK(!strncmp(err, "spec:2: [train] k0: unknown key\nspec:3: [train] k1:", 50));

	/* Fills up before the list does. */
	char mid[300];
	CHECK(dlh_spec_parse(text, pos, &s, mid, sizeof mid) == -EINVAL);
	l = strlen(mid);
	CHECK(l < sizeof mid && !strcmp(mid + l - 22, "spec: too many errors\n"));

	/* Tiny buffers, guarded on both sides. */
	for (size_t n = 1; n < 64; n++) {
		char guard[128];
		memset(guard, 'Z', sizeof guard);
		CHECK(dlh_spec_parse(text, pos, &s, guard + 8, n) == -EINVAL);
		CHECK(strlen(guard + 8) < n);
		for (size_t i = 0; i < 8; i++)
			CHECK(guard[i] == 'Z');
		for (size_t i = 8 + n; i < sizeof guard; i++)
			CHECK(guard[i] == 'Z');
	}
	CHECK(dlh_spec_parse(text, pos, &s, NULL, 0) == -EINVAL);

	/* One error that fits exactly has no tail line. */
	CHECK(parse("[train]\nepochs = 0\n", &s, err, sizeof err) == -EINVAL);
	CHECK(count_lines(err) == 1 && !strstr(err, "too many"));
}

/* Did-you-mean: close misspellings, prefixes, case; nothing for noise. */
TEST(did_you_mean)
{
	static const struct { const char *text, *want; } cases[] = {
		{ "[train]\nbatchsize = 1\n", "spec:2: [train] batchsize: unknown key (did you mean \"batch_size\"?)\n" },
		{ "[train]\nbatch = 1\n", "spec:2: [train] batch: unknown key (did you mean \"batch_size\"?)\n" },
		{ "[train]\nepoch = 1\n", "spec:2: [train] epoch: unknown key (did you mean \"epochs\"?)\n" },
		{ "[train]\nepcohs = 1\n", "spec:2: [train] epcohs: unknown key (did you mean \"epochs\"?)\n" },
		{ "[train]\nLR = 1\n", "spec:2: [train] LR: unknown key (did you mean \"lr\"?)\n" },
		{ "[train]\nmomentun = 1\n", "spec:2: [train] momentun: unknown key (did you mean \"momentum\"?)\n" },
		{ "[train]\nx = 1\n", "spec:2: [train] x: unknown key\n" },
		{ "[train]\nzzzzzz = 1\n", "spec:2: [train] zzzzzz: unknown key\n" },
		{ "[model]\nlayer = 1\n", "spec:2: [model] layer: unknown key (did you mean \"layers\"?)\n" },
		{ "[data]\ntrain_label = /x\n", "spec:2: [data] train_label: unknown key (did you mean \"train_labels\"?)\n" },
		{ "[data]\nlayers = 1\n", "spec:2: [data] layers: unknown key (it belongs under [model])\n" },
		{ "[trian]\n", "spec:1: [trian]: unknown section (did you mean \"[train]\"?)\n" },
		{ "[resource]\n", "spec:1: [resource]: unknown section (did you mean \"[resources]\"?)\n" },
		{ "[res]\n", "spec:1: [res]: unknown section (did you mean \"[resources]\"?)\n" },
		{ "[JOB]\n", "spec:1: [JOB]: unknown section (did you mean \"[job]\"?)\n" },
		{ "[hyperparameters]\n", "spec:1: [hyperparameters]: unknown section\n" },
		{ "lr = 1\n", "spec:1: \"lr\": key outside any section (put it under [train])\n" },
		{ "workers = 1\n", "spec:1: \"workers\": key outside any section\n" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct dlh_spec s;
		char err[DLH_ERR_MAX];
		CHECK(parse(cases[i].text, &s, err, sizeof err) == -EINVAL);
		CHECK_MSG(!strcmp(err, cases[i].want), "expected %s got %s", oneline(cases[i].want), oneline(err));
	}
}

/* Numbers are strict: whole value, no hex, exponent only for reals, no nan/inf. */
TEST(strict_numbers)
{
	static const struct { const char *line; int ok; } cases[] = {
		{ "[train]\nepochs = 12", 1 }, { "[train]\nepochs = +12", 1 },
		{ "[train]\nepochs = 12x", 0 }, { "[train]\nepochs = 1e3", 0 },
		{ "[train]\nepochs = 0x10", 0 }, { "[train]\nepochs = 1.0", 0 },
		{ "[train]\nepochs = - 1", 0 }, { "[train]\nepochs =", 0 },
		{ "[train]\ncheckpoint_every = -0", 1 }, { "[data]\ntest_limit = -0", 1 },
		{ "[train]\nlr = 1e-3", 1 }, { "[train]\nlr = .5", 1 }, { "[train]\nlr = 5.", 1 },
		{ "[train]\nlr = 100", 1 }, { "[train]\nlr = 100.00000000000001", 0 },
		{ "[train]\nlr = 0x1p-3", 0 }, { "[train]\nlr = nan", 0 }, { "[train]\nlr = -inf", 0 },
		{ "[train]\nlr = 1e-400", 0 }, { "[train]\nlr = .", 0 }, { "[train]\nlr = 1e", 0 },
		{ "[train]\nmomentum = -0", 1 }, { "[train]\nmomentum = 0.9999", 1 },
		{ "[train]\nseed = 18446744073709551615", 1 }, { "[train]\nseed = -0", 1 },
		{ "[train]\nseed = 18446744073709551616", 0 }, { "[train]\nseed = -1", 0 },
		{ "[train]\nseed = +", 0 }, { "[resources]\nranks = auto", 1 },
		{ "[resources]\nranks = AUTO", 0 }, { "[resources]\nranks = 64", 1 },
		{ "[model]\nlayers = 7", 1 }, { "[model]\nlayers = 7 , 8", 1 },
		{ "[model]\nlayers = 7 8", 0 }, { "[model]\nlayers = ,7", 0 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct dlh_spec s;
		char err[DLH_ERR_MAX];
		int rc = parse(cases[i].line, &s, err, sizeof err);
		CHECK_MSG((rc == 0) == cases[i].ok, "\"%s\": expected %s, got %d %s",
			  oneline(cases[i].line), cases[i].ok ? "ok" : "an error", rc, oneline(err));
	}
	struct dlh_spec s;
	char err[DLH_ERR_MAX];
	CHECK(parse("[train]\nmomentum = -0\n", &s, err, sizeof err) == 0);
	char out[FMT_MAX];
	CHECK(dlh_spec_format(&s, out, sizeof out) > 0 && strstr(out, "\nmomentum = 0\n"));
}

/* Lines: 4095 characters fit, 4096 do not; a line longer than inih's own
 * buffer keeps its whole value (a command's, an inline comment cut from
 * another's); CRLF, leading blanks and inline comments are fine; a NUL
 * byte stops the parse at its line. */
TEST(lines)
{
	static char text[8192];
	char err[DLH_ERR_MAX];
	struct dlh_spec s;
	int n = snprintf(text, sizeof text, "[job]\n;%04094d\ncommand = ok\n", 0);
	CHECK(n == 6 + 4096 + 13);
	CHECK_MSG(parse(text, &s, err, sizeof err) == 0, "%s", oneline(err));
	snprintf(text, sizeof text, "[job]\n;%04095d\r\ncommand = ok\n", 0);
	CHECK(parse(text, &s, err, sizeof err) == -EINVAL);
	CHECK_MSG(!strcmp(err, "spec:2: line longer than 4095 characters\n"), "%s", oneline(err));
	/* a 700-character command, its ';' kept */
	char cmd[800];
	memset(cmd, 'a', 700);
	memcpy(cmd, "/bin/echo ; ", 12);
	cmd[700] = '\0';
	snprintf(text, sizeof text, "[job]\ncommand = %s\nname = after\n", cmd);
	CHECK_MSG(parse(text, &s, err, sizeof err) == 0, "%s", oneline(err));
	CHECK(!strcmp(s.command, cmd) && !strcmp(s.name, "after"));
	/* a long line of another key: its inline comment is not its value */
	snprintf(text, sizeof text, "[train]\nepochs = 3 ; %0300d\n[job]\nname = x\n", 0);
	CHECK_MSG(parse(text, &s, err, sizeof err) == 0, "%s", oneline(err));
	CHECK(s.epochs == 3 && !strcmp(s.name, "x"));
	/* a long section header with its comment: its keys are its own */
	snprintf(text, sizeof text, "[train]  ; %0300d\nepochs = 5\n", 0);
	CHECK_MSG(parse(text, &s, err, sizeof err) == 0, "%s", oneline(err));
	CHECK(s.epochs == 5);
	/* an env entry as long as a line allows: its stored line must fit too */
	static char env[4200];
	memset(env, 'e', sizeof env);
	memcpy(env, "env=X=", 6);
	env[4095] = '\0';   /* a line of 4095: an entry of 4091 */
	snprintf(text, sizeof text, "[job]\n%s\n", env);
	CHECK(parse(text, &s, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "spec:2: [job] env: expected at most 4089 characters"), "%s", oneline(err));
	env[3000] = '\0';
	snprintf(text, sizeof text, "[job]\n%s\n", env);
	CHECK_MSG(parse(text, &s, err, sizeof err) == 0, "%s", oneline(err));
	static char out[16384];
	CHECK(dlh_spec_format(&s, out, sizeof out) > 0);
	struct dlh_spec back;
	CHECK_MSG(parse(out, &back, err, sizeof err) == 0, "the stored spec: %s", oneline(err));
	CHECK(!strcmp(back.env, s.env));
	/* a key name longer than inih's buffer is unknown, and said so */
	snprintf(text, sizeof text, "[train]\n%0300d = 1\n", 0);
	CHECK(parse(text, &s, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "spec:2: \"0000") && strstr(err, "...\": unknown key"), "%s", oneline(err));

	CHECK(parse("  [train]\r\n\tepochs = 4 ; four\r\n", &s, err, sizeof err) == 0);
	CHECK(s.epochs == 4);

	static const char nul[] = "[train]\nepochs = 4\nlr =\0 0.1\nbogus\n";
	CHECK(dlh_spec_parse(nul, sizeof nul - 1, &s, err, sizeof err) == -EINVAL);
	CHECK_MSG(!strcmp(err, "spec:3: binary data (byte 0x00 at column 5)\n"), "%s", oneline(err));
}

/* On failure the caller's spec is left as it was. */
TEST(untouched_on_error)
{
	struct dlh_spec s, before;
	char err[DLH_ERR_MAX];
	memset(&s, 0x33, sizeof s);
	before = s;
	CHECK(parse("[train]\nepochs = 3\nlr = 0\n", &s, err, sizeof err) == -EINVAL);
	CHECK(!memcmp(&s, &before, sizeof s));
}

/* A [job] command's normalized spec (jobs/<id>/spec) holds the keys a
 * program's job uses: [job] and [resources] (profile too); none of the
 * built-in trainer's [data], [model] and [train]. */
TEST(command_spec_holds_only_what_applies_to_a_command)
{
	struct dlh_spec s;
	char err[DLH_ERR_MAX], out[FMT_MAX];
	CHECK_MSG(parse("[job]\ncommand = /bin/true\n", &s, err, sizeof err) == 0, "%s", oneline(err));
	CHECK(dlh_spec_format(&s, out, sizeof out) > 0);
	CHECK_MSG(!strstr(out, "[data]") && !strstr(out, "[model]") && !strstr(out, "[train]"),
		  "%s", oneline(out));
	CHECK_MSG(!strstr(out, "epochs") && !strstr(out, "lr =") && strstr(out, "\nprofile = auto\n"),
		  "%s", oneline(out));
	CHECK_MSG(strstr(out, "\n[resources]\nranks = 1\nnodes = auto\ndevice = cpu\nmemory = 0\ndisk = 0\n"),
		  "%s", oneline(out));
	CHECK_MSG(strstr(out, "\nsteps = 0\n") && strstr(out, "\ntime_limit = 0\n") &&
		  strstr(out, "\nhang_timeout = 0\n"), "%s", oneline(out));
	/* the built-in trainer's spec keeps them all */
	CHECK(parse("[job]\nname = t\n", &s, err, sizeof err) == 0);
	CHECK(dlh_spec_format(&s, out, sizeof out) > 0);
	CHECK(strstr(out, "\ndeadline = 0\n") && strstr(out, "\n[train]\nepochs = 10\n") &&
	      strstr(out, "\n[data]\n") && strstr(out, "\n[model]\n") && strstr(out, "\nranks = auto\n"));
	/* but no profile: it is estimated from its model */
	CHECK(!strstr(out, "profile"));
	CHECK(parse("[job]\nprofile = true\n", &s, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "spec:2: [job] profile: "), "%s", oneline(err));
}

/* A key of the built-in trainer given beside a command is an error that
 * names its line, one a key, before any rule of its own section (conv of
 * an mlp) and before its value is looked at (a data file is not opened). */
TEST(trainer_key_beside_a_command_is_an_error_naming_its_line)
{
	static const struct { const char *text, *want; } cases[] = {
		{ "[job]\ncommand = python3 t.py\n[train]\nepochs = 3\n",
		  "spec:4: [train] epochs: applies to the built-in trainer, not to a [job] command "
		  "(a program takes its own options: on its command line, or from [job] env; of "
		  "[train] it is handed batch_size, lr and scale_batch)\n" },
		{ "[model]\nconv = 3:3\n[job]\ncommand = python3 t.py\n",
		  "spec:2: [model] conv: applies to the built-in trainer, not to a [job] command "
		  "(a program takes its own options: on its command line, or from [job] env)\n" },
		{ "[job]\ncommand = python3 t.py\n[data]\ntrain = /nonexistent/train.gz\n",
		  "spec:4: [data] train: applies to the built-in trainer, not to a [job] command "
		  "(a program takes its own options: on its command line, or from [job] env)\n" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct dlh_spec s;
		char err[DLH_ERR_MAX];
		CHECK(parse(cases[i].text, &s, err, sizeof err) == -EINVAL);
		CHECK_MSG(!strcmp(err, cases[i].want), "expected %s got %s", oneline(cases[i].want),
			  oneline(err));
	}
	/* every key of the three sections, one line each */
	char text[4096], err[DLH_ERR_MAX];
	struct dlh_spec s;
	size_t pos = (size_t)snprintf(text, sizeof text, "[job]\ncommand = /bin/true\n");
	int given = 0;
	for (int k = 0; k < dlh_spec_nkeys; k++) {
		const struct dlh_key *d = &dlh_spec_keys[k];
		if ((strcmp(d->section, "data") && strcmp(d->section, "model") && strcmp(d->section, "train")) ||
		    d->command_own)
			continue;
		pos += (size_t)snprintf(text + pos, sizeof text - pos, "[%s]\n%s = %s\n", d->section,
					d->name, d->def);
		given++;
	}
	CHECK(parse(text, &s, err, sizeof err) == -EINVAL);
	CHECK_MSG(count_lines(err) == given, "%d keys given, %d errors: %s", given, count_lines(err),
		  oneline(err));
	CHECK(!strstr(err, "only used with") && !strstr(err, "cannot read"));
	/* the hint once, on the first */
	CHECK_MSG(strstr(err, "spec:6: [data] train_labels: applies to the built-in trainer, not to a "
			 "[job] command\n"), "%s", oneline(err));
}

/* [job] deadline needs the planner's estimate; a command has none: refused
 * with its line, pointing to time_limit. The trainer's is taken. */
/* a command's deadline is the planner's (its profile estimates it) */
TEST(deadline_and_profile_beside_a_command)
{
	struct dlh_spec s;
	char err[DLH_ERR_MAX];
	CHECK_MSG(parse("[job]\ncommand = python3 t.py\ndeadline = 1m\nprofile = false\n", &s, err,
			sizeof err) == 0, "%s", oneline(err));
	CHECK(s.deadline == 60 && s.profile == DLH_PROFILE_OFF);
	CHECK(parse("[job]\ncommand = python3 t.py\nprofile = true\n", &s, err, sizeof err) == 0 &&
	      s.profile == DLH_PROFILE_ON);
	CHECK(parse("[job]\ncommand = python3 t.py\n", &s, err, sizeof err) == 0 &&
	      s.profile == DLH_PROFILE_AUTO);
	CHECK(parse("[job]\ncommand = python3 t.py\nprofile = maybe\n", &s, err, sizeof err) == -EINVAL);
	CHECK_MSG(parse("[job]\ndeadline = 1m\n", &s, err, sizeof err) == 0, "%s", oneline(err));
	CHECK(s.deadline == 60);
}

/* A command runs one rank unless the spec says more (or auto); the
 * trainer's batch_size does not bound a command's ranks. */
TEST(command_ranks_default_to_one)
{
	struct dlh_spec s;
	char err[DLH_ERR_MAX];
	CHECK(parse("[job]\ncommand = /bin/true\n", &s, err, sizeof err) == 0 && s.ranks == 1);
	CHECK(parse("[job]\ncommand = /bin/true\n[resources]\nranks = 3\n", &s, err, sizeof err) == 0 &&
	      s.ranks == 3);
	CHECK(parse("[job]\ncommand = /bin/true\n[resources]\nranks = auto\n", &s, err, sizeof err) == 0 &&
	      s.ranks == 0);
	CHECK(parse("[resources]\nranks = 2\n[job]\ncommand = /bin/true\n", &s, err, sizeof err) == 0 &&
	      s.ranks == 2);
	CHECK(parse("[job]\nname = t\n", &s, err, sizeof err) == 0 && s.ranks == 0);
	CHECK_MSG(parse("[job]\ncommand = /bin/true\n[resources]\nranks = 128\n", &s, err, sizeof err) == 0,
		  "%s", oneline(err));
	CHECK(parse("[job]\ncommand = /bin/true\n[resources]\nnodes = 2\n", &s, err, sizeof err) == -EINVAL);
	CHECK_MSG(!strcmp(err, "spec:4: [resources] nodes: 2 nodes for 1 ranks: each node needs a rank "
			  "(a [job] command runs 1 rank unless [resources] ranks says more)\n"), "%s",
		  oneline(err));
	CHECK(parse("[job]\ncommand = /bin/true\n[resources]\nnodes = 2\nranks = 2\n", &s, err,
		    sizeof err) == 0 && s.ranks == 2 && s.nodes == 2);
}

/* A command's spec as an older dlhfs stored it (jobs/<id>/spec.ini, every
 * key with the trainer's defaults, ranks = auto) loads at mount
 * (DLH_SPEC_STORED): what no longer applies is dropped, the rest is kept
 * (its deadline too: a command's deadline applies since it is profiled). */
TEST(stored_command_spec_of_an_older_dlhfs_still_loads)
{
	static const char *old =
		"[job]\nname = ddp\ncommand = python3 /opt/train.py\nsteps = 1200\nrestart = on-failure\n"
		"max_restarts = 3\npriority = 0\npreemptible = true\ntime_limit = 0\n"
		"time_limit_grace = 0\nhang_timeout = 0\ndeadline = 0:01:00\ndry_run = false\n"
		"readable_by = owner\n\n"
		"[data]\ntrain = /nonexistent/train-images-idx3-ubyte.gz\n"
		"train_labels = /usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz\n"
		"test = /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz\n"
		"test_labels = /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz\n"
		"format = idx\ntrain_limit = 0\ntest_limit = 0\n\n"
		"[model]\ntype = mlp\nlayers = 256, 128, 100\ndropout = 0\n\n"
		"[train]\nepochs = 10\nbatch_size = 3\nscale_batch = false\nlr = 0.01\noptimizer = sgd\n"
		"momentum = 0.9\nweight_decay = 0\nschedule = constant\nwarmup_steps = 0\nseed = 7\n"
		"checkpoint_every = 500\nbucket_mb = 1\nrebalance = true\n\n"
		"[resources]\nranks = 4\nnodes = auto\ndevice = cpu\nmemory = 0\ndisk = 0\n";
	static const char *now =
		"[job]\nname = ddp\ncommand = python3 /opt/train.py\nsteps = 1200\nrestart = on-failure\n"
		"max_restarts = 3\npriority = 0\npreemptible = true\ntime_limit = 0\n"
		"time_limit_grace = 0\nhang_timeout = 0\ndeadline = 0:01:00\ndry_run = false\nprofile = auto\n"
		"readable_by = owner\n\n"
		"[resources]\nranks = 4\nnodes = auto\ndevice = cpu\nmemory = 0\ndisk = 0\n";
	struct dlh_spec s, d, back;
	char err[DLH_ERR_MAX], out[FMT_MAX];
	CHECK_MSG(dlh_spec_parse_flags(old, strlen(old), &s, err, sizeof err, DLH_SPEC_STORED) == 0,
		  "%s", oneline(err));
	CHECK(!strcmp(s.command, "python3 /opt/train.py") && s.steps == 1200 &&
	      s.restart == DLH_RESTART_ON_FAILURE && s.ranks == 4);
	/* what no longer applies is back at its default */
	dlh_spec_defaults(&d);
	CHECK(s.deadline == 60 && s.seed == d.seed && !strcmp(s.train, d.train));
	/* its batch_size and lr were the trainer's then: none is handed on */
	CHECK(s.batch_size == 0 && s.lr == 0.0 && s.scale_batch == 0);
	CHECK(dlh_spec_format(&s, out, sizeof out) > 0);
	CHECK_MSG(!strcmp(out, now), "%s", oneline(out));
	CHECK_MSG(dlh_spec_parse_flags(out, strlen(out), &back, err, sizeof err, DLH_SPEC_STORED) == 0,
		  "%s", oneline(err));
	CHECK(spec_equal(&s, &back));
	/* a stored ranks = auto stays auto: the job was planned so */
	static const char *auto_old = "[job]\ncommand = /bin/true\n[train]\nepochs = 10\n"
				      "[resources]\nranks = auto\n";
	CHECK(dlh_spec_parse_flags(auto_old, strlen(auto_old), &s, err, sizeof err,
				   DLH_SPEC_STORED) == 0 && s.ranks == 0);
	/* submitted again (not stored), the same text is refused, key by key */
	CHECK(parse(old, &s, err, sizeof err) == -EINVAL);
	CHECK_MSG(count_lines(err) == 21 && !strncmp(err, "spec:17: [data] train: applies to the built-in", 46) &&
		  strstr(err, "spec:46: [train] batch_size: 3 is smaller than [resources] ranks (4)\n"),
		  "%d: %s", count_lines(err), oneline(err));
}

/* The spec's man page (schema/dlhfs-spec.5, installed by make install)
 * names every key of the schema, so that it cannot fall behind. */
TEST(man_page_names_every_key)
{
	FILE *f = fopen("schema/dlhfs-spec.5", "r");
	static char page[256 * 1024];
	size_t n = f ? fread(page, 1, sizeof page - 1, f) : 0;
	if (f)
		fclose(f);
	page[n] = '\0';
	CHECK_MSG(n > 0, "cannot read schema/dlhfs-spec.5");
	for (int k = 0; k < dlh_spec_nkeys; k++) {
		char want[96];
		snprintf(want, sizeof want, "\\fB%s\\fR", dlh_spec_keys[k].name);
		CHECK_MSG(strstr(page, want), "dlhfs-spec.5 does not name [%s] %s",
			  dlh_spec_keys[k].section, dlh_spec_keys[k].name);
	}
}

int main(int argc, char **argv)
{
	if (argc > 1)
		corpus = argv[1];
	RUN(golden_good);
	RUN(golden_bad);
	RUN(man_page_names_every_key);
	RUN(defaults);
	RUN(format_round_trip);
	RUN(format_round_trip_of_values_that_start_like_comments);
	RUN(format_enospc);
	RUN(all_errors_in_line_order);
	RUN(size_limit);
	RUN(not_nul_terminated);
	RUN(small_err_buffer);
	RUN(did_you_mean);
	RUN(strict_numbers);
	RUN(lines);
	RUN(untouched_on_error);
	RUN(command_spec_holds_only_what_applies_to_a_command);
	RUN(trainer_key_beside_a_command_is_an_error_naming_its_line);
	RUN(deadline_and_profile_beside_a_command);
	RUN(command_ranks_default_to_one);
	RUN(stored_command_spec_of_an_older_dlhfs_still_loads);
	return CHECK_EXIT();
}
