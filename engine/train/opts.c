/* opts.c - the dlh-train command line */
#include "engine/train/opts.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char dlt_opts_usage[] =
	"usage: dlh-train --job-dir DIR\n"
	"                 --train-images F --train-labels F --test-images F --test-labels F\n"
	"                 --layers W1,W2,...  --epochs N --batch GLOBAL --lr X\n"
	"                 [--momentum X] [--weight-decay X] [--seed N]\n"
	"                 [--checkpoint-every STEPS] [--train-limit N] [--test-limit N] [--help]\n"
	"Data-parallel MLP training under mpirun. --layers are the hidden widths;\n"
	"--batch is the global batch, split over the ranks; --checkpoint-every 0\n"
	"saves only the final model; the limits use the first N images (0 = all).\n"
	"Files in DIR: run.info, metrics.csv, checkpoints/, result.\n";

#define DLT_MAX_COUNT_OPT 1e15   /* bound of --checkpoint-every and the limits */

enum opt_kind { K_STR, K_LAYERS, K_INT, K_LONG, K_DOUBLE, K_U64 };

struct opt_def {
	const char *name;      /* without the leading "--" */
	enum opt_kind kind;    /* how the value parses */
	int required;          /* 1 = must be given */
	double min, max;       /* range for numbers, inclusive */
	int max_open;          /* 1 = max is exclusive */
	size_t off;            /* field in struct dlt_opts */
};

#define OFF(f) offsetof(struct dlt_opts, f)

static const struct opt_def defs[] = {
	{ "job-dir", K_STR, 1, 0, 0, 0, OFF(job_dir) },
	{ "train-images", K_STR, 1, 0, 0, 0, OFF(train_images) },
	{ "train-labels", K_STR, 1, 0, 0, 0, OFF(train_labels) },
	{ "test-images", K_STR, 1, 0, 0, 0, OFF(test_images) },
	{ "test-labels", K_STR, 1, 0, 0, 0, OFF(test_labels) },
	{ "layers", K_LAYERS, 1, 0, 0, 0, OFF(hidden) },
	{ "epochs", K_INT, 1, 1, DLT_MAX_EPOCHS, 0, OFF(epochs) },
	{ "batch", K_INT, 1, 1, DLT_MAX_BATCH, 0, OFF(batch) },
	{ "lr", K_DOUBLE, 1, 0, DLT_MAX_LR, 0, OFF(lr) },
	{ "momentum", K_DOUBLE, 0, 0, 1, 1, OFF(momentum) },
	{ "weight-decay", K_DOUBLE, 0, 0, 1, 1, OFF(weight_decay) },
	{ "seed", K_U64, 0, 0, 0, 0, OFF(seed) },
	{ "checkpoint-every", K_LONG, 0, 0, DLT_MAX_COUNT_OPT, 0, OFF(checkpoint_every) },
	{ "train-limit", K_LONG, 0, 0, DLT_MAX_COUNT_OPT, 0, OFF(train_limit) },
	{ "test-limit", K_LONG, 0, 0, DLT_MAX_COUNT_OPT, 0, OFF(test_limit) },
};

#define NDEFS (sizeof defs / sizeof defs[0])

int dlt_opts_layers(const char *s, int *hidden)
{
	int n = 0;

	for (;;) {
		char *end;
		long w;

		if (*s < '0' || *s > '9')
			return -EINVAL;
		errno = 0;
		w = strtol(s, &end, 10);
		if (errno || w < 1 || w > DLT_MLP_MAX_WIDTH || n == DLT_MLP_MAX_HIDDEN)
			return -EINVAL;
		hidden[n++] = (int)w;
		if (*end == '\0')
			return n;
		if (*end != ',')
			return -EINVAL;
		s = end + 1;
	}
}

/* Stores value v of option d into o. Returns 0, or -EINVAL with a message. */
static int set_value(struct dlt_opts *o, const struct opt_def *d, const char *v,
		     char *err, size_t errlen)
{
	char *base = (char *)o + d->off, *end;
	double x;
	long l;

	if (d->kind == K_STR) {
		if (*v == '\0')
			goto bad;
		*(const char **)(void *)base = v;
		return 0;
	}
	if (d->kind == K_LAYERS) {
		int n = dlt_opts_layers(v, o->hidden);

		if (n < 0) {
			snprintf(err, errlen, "--layers \"%s\": expected 1..%d comma-separated widths of 1..%d",
				 v, DLT_MLP_MAX_HIDDEN, DLT_MLP_MAX_WIDTH);
			return -EINVAL;
		}
		o->nhidden = n;
		return 0;
	}
	if (d->kind == K_U64) {
		unsigned long long u;

		if (*v < '0' || *v > '9')
			goto bad;
		errno = 0;
		u = strtoull(v, &end, 10);
		if (errno || *end)
			goto bad;
		*(uint64_t *)(void *)base = (uint64_t)u;
		return 0;
	}
	if (d->kind == K_DOUBLE) {
		errno = 0;
		x = strtod(v, &end);
		if (errno || end == v || *end || !isfinite(x))
			goto bad;
		if (x < d->min || x > d->max || (d->max_open && x >= d->max) ||
		    (d->off == OFF(lr) && x <= 0))
			goto range;
		*(double *)(void *)base = x;
		return 0;
	}
	if ((*v < '0' || *v > '9') && *v != '-')
		goto bad;
	errno = 0;
	l = strtol(v, &end, 10);

	if (errno || *end)
		goto bad;
	if (l < d->min || l > d->max)
		goto range;
	if (d->kind == K_INT)
		*(int *)(void *)base = (int)l;
	else
		*(long *)(void *)base = l;
	return 0;
bad:
	snprintf(err, errlen, "--%s \"%s\": malformed value", d->name, v);
	return -EINVAL;
range:
	if (d->off == OFF(lr))
		snprintf(err, errlen, "--lr \"%s\": out of range (0, %g]", v, d->max);
	else
		snprintf(err, errlen, "--%s \"%s\": out of range [%g, %g%c", d->name, v,
			 d->min, d->max, d->max_open ? ')' : ']');
	return -EINVAL;
}

int dlt_opts_parse(int argc, char **argv, struct dlt_opts *o,
		   char *err, size_t errlen)
{
	int seen[NDEFS] = { 0 };

	memset(o, 0, sizeof *o);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val = NULL;
		const struct opt_def *d = NULL;
		size_t len;

		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
			return 1;
		if (strncmp(a, "--", 2) != 0) {
			snprintf(err, errlen, "unexpected argument \"%s\"", a);
			return -EINVAL;
		}
		a += 2;
		len = strcspn(a, "=");
		for (size_t k = 0; k < NDEFS; k++)
			if (strlen(defs[k].name) == len && strncmp(defs[k].name, a, len) == 0)
				d = &defs[k];
		if (!d) {
			snprintf(err, errlen, "unknown option \"%s\"", argv[i]);
			return -EINVAL;
		}
		if (a[len] == '=')
			val = a + len + 1;
		else if (i + 1 < argc)
			val = argv[++i];
		else {
			snprintf(err, errlen, "option \"--%s\" needs a value", d->name);
			return -EINVAL;
		}
		if (set_value(o, d, val, err, errlen) < 0)
			return -EINVAL;
		seen[d - defs] = 1;
	}
	for (size_t k = 0; k < NDEFS; k++)
		if (defs[k].required && !seen[k]) {
			snprintf(err, errlen, "missing option \"--%s\"", defs[k].name);
			return -EINVAL;
		}
	return 0;
}
