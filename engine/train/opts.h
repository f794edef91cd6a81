/* opts.h - the dlh-train command line */
#ifndef DLT_OPTS_H
#define DLT_OPTS_H

#include <stddef.h>
#include <stdint.h>

#include "engine/train/mlp.h"

#define DLT_MAX_EPOCHS 100000         /* most --epochs */
#define DLT_MAX_BATCH 1048576         /* largest --batch */
#define DLT_MAX_LR 100.0              /* largest --lr */

/* The parsed command line. Strings point into argv. */
struct dlt_opts {
	const char *job_dir;                   /* --job-dir, created if missing */
	const char *train_images;              /* --train-images, IDX3 (.gz or plain) */
	const char *train_labels;              /* --train-labels, IDX1 */
	const char *test_images;               /* --test-images */
	const char *test_labels;               /* --test-labels */
	int hidden[DLT_MLP_MAX_HIDDEN];        /* --layers, hidden widths */
	int nhidden;                           /* entries of hidden used, >= 1 */
	int epochs;                            /* --epochs, 1..DLT_MAX_EPOCHS */
	int batch;                             /* --batch, global, 1..DLT_MAX_BATCH */
	double lr;                             /* --lr, (0, DLT_MAX_LR] */
	double momentum;                       /* --momentum, [0, 1), default 0 */
	double weight_decay;                   /* --weight-decay, [0, 1), default 0 */
	uint64_t seed;                         /* --seed, default 0 */
	long checkpoint_every;                 /* --checkpoint-every steps, 0 = final only */
	long train_limit;                      /* --train-limit, 0 = all */
	long test_limit;                       /* --test-limit, 0 = all */
};

/* The usage text printed by --help. */
extern const char dlt_opts_usage[];

/* Parses argv (argv[0] is skipped) into *o. Options take their value as
 * the next word or after '=' (--lr=0.1). Returns 0, 1 when --help was
 * given, or -EINVAL with a one-line message in err (an unknown option, a
 * malformed or out-of-range value, a missing required option). */
int dlt_opts_parse(int argc, char **argv, struct dlt_opts *o,
		   char *err, size_t errlen);

/* Parses a comma list of hidden widths ("256,128,100") into hidden.
 * Returns the count (1..DLT_MLP_MAX_HIDDEN), or -EINVAL. */
int dlt_opts_layers(const char *s, int *hidden);

#endif
