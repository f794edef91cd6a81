/* opts.c - the dlh-train command line */
#include "engine/train/opts.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/train/lrfind.h"
#include "engine/train/optim.h"

const char dlt_opts_usage[] =
	"usage: dlh-train --job-dir DIR\n"
	"                 --train-images F --train-labels F --test-images F --test-labels F\n"
	"                 --layers W1,W2,...  --epochs N --batch GLOBAL --lr X|auto\n"
	"                 [--model mlp|cnn] [--conv F:K,...] [--pool K] [--dense W1,...]\n"
	"                 [--dropout P] [--optimizer sgd|nesterov|adam] [--momentum X]\n"
	"                 [--beta1 X] [--beta2 X] [--eps X] [--weight-decay X]\n"
	"                 [--schedule constant|step|cosine] [--gamma X] [--step-epochs N]\n"
	"                 [--warmup-steps N] [--allreduce auto|mpi|shm] [--bucket-mb X]\n"
	"                 [--format idx|csv] [--image-size N] [--seed N] [--device cpu|gpu]\n"
	"                 [--precision fp32|tf32|bf16] [--cuda-graph on|off]\n"
	"                 [--device-data on|off] [--step-ahead on|off] [--gpu-profile on|off]\n"
	"                 [--lr-find-steps N] [--rank-batches B0,B1,..] [--rebalance STEPS]\n"
	"                 [--cpus C0,C1,..] [--gpus G0,G1,..]\n"
	"                 [--checkpoint-every STEPS] [--train-limit N] [--test-limit N] [--help]\n"
	"       dlh-train --same-params A.ckpt B.ckpt   (exit 0 when the payloads match)\n"
	"       dlh-train --params-diff A.ckpt B.ckpt   (the largest difference of their floats)\n"
	"Data-parallel training under mpirun. --model mlp (default): --layers are\n"
	"the hidden widths; --model cnn: conv blocks --conv (default 32:5,64:5; each\n"
	"conv -> ReLU -> max-pool --pool, default 2), then hidden dense layers --dense\n"
	"(default 1024; each -> ReLU -> dropout), then the classes. --dropout (default 0)\n"
	"follows every hidden dense layer of either model. --optimizer sgd (default),\n"
	"nesterov or adam (--beta1 0.9 --beta2 0.999 --eps 1e-8); --schedule constant\n"
	"(default), step (x --gamma 0.1 every --step-epochs 1) or cosine (to 0 at the\n"
	"last step), after --warmup-steps 0 of linear warm-up. --allreduce auto (default):\n"
	"the ranks of a node sum gradients in shared memory, each rank updating its slice of\n"
	"the node's one copy of the model (shm); ranks on several nodes (shm+leaders): each\n"
	"node's leader sums its node's buckets (--bucket-mb 1) as backward produces them and\n"
	"allreduces them with the other leaders while backward goes on; mpi: every rank's\n"
	"gradient buckets allreduced while backward goes on (0 = one allreduce after it).\n"
	"--format idx (default) or csv (label then pixels per line, --image-size 28;\n"
	"the --*-labels options are then not used). --batch is the global batch, split\n"
	"over the ranks evenly, or as --rank-batches says (one per rank, summing to --batch:\n"
	"ranks on devices of different speeds; each rank's data shard follows its batch,\n"
	"and gradients are weighted by batch, so the update is the global batch's);\n"
	"--rebalance STEPS (0 = never, the default; else >= 10): every rank holds the whole\n"
	"training set, each step's global batch is the same rows however it is split, and\n"
	"every STEPS steps the split follows the ranks' measured samples/s (each rank at most\n"
	"twice its first batch; the log shows each change; a rerun is then not bit-identical);\n"
	"--cpus pins rank r (and its batch thread) to CPU Cr of its node (one per rank;\n"
	"when any rank cannot have its CPU, none is pinned and the log says why);\n"
	"--checkpoint-every 0 saves only the final model; the limits use\n"
	"the first N images (0 = all). --lr auto: a range test first (--lr-find-steps\n"
	"200 steps, the rate growing from 1e-6 to 10) picks the rate, written with the\n"
	"sweep to DIR/lr_finder; the weights then start again from their initial values.\n"
	"--device gpu: one GPU per rank (its node rank, or with --gpus GPU Gr of its node,\n"
	"given to the rank as CUDA_VISIBLE_DEVICES=Gr), cuBLAS, gradients\n"
	"averaged with ncclAllReduce (needs a build with CUDA: make GPU=1).\n"
	"--precision (GPU only but fp32, the default): tf32, GEMMs on tensor cores with TF32\n"
	"inputs; bf16, GEMM operands in BF16 with FP32 sums, FP32 master weights,\n"
	"gradients and optimizer state (checkpoints are FP32 either way).\n"
	"--cuda-graph on (default; GPU only): from its second step, a training step of the\n"
	"same shape is captured in a CUDA graph and replayed by one launch; off: every\n"
	"kernel launched one by one (the same numbers, bit for bit).\n"
	"--device-data on (default; GPU only): the rank's training rows are copied to the\n"
	"GPU once and each step sends only its rows' numbers (the step's first kernel\n"
	"gathers the batch); off, or where they do not fit: each step's batch is copied.\n"
	"--step-ahead on (default; GPU only): a training step is queued before the host\n"
	"waits for the one before it, so the GPU never waits while the host reads a loss,\n"
	"writes rows or gets the next batch (not past an epoch's end, a checkpoint or a\n"
	"re-split); off: the host waits for each step before it queues the next. The\n"
	"same numbers either way, bit for bit.\n"
	"--gpu-profile on (GPU only; default off): the log ends with the GPU time of each\n"
	"layer's forward and backward, the loss, the allreduce and the update in a graphed\n"
	"step (CUDA events between the graph's parts); the steps are not queued ahead.\n"
	"Files in DIR: run.info, metrics.csv, checkpoints/, result.\n";

#define DLT_MAX_COUNT_OPT 1e15   /* bound of --checkpoint-every and the limits */

enum opt_kind { K_STR, K_LAYERS, K_INT, K_LONG, K_DOUBLE, K_U64, K_CHOICE, K_CONV, K_DENSE,
		K_BATCHES, K_CPUS, K_GPUS };

/* Words of the K_CHOICE options, NULL-terminated; the value stored is the
 * matching entry of the parallel *_val array. */
static const char *const model_words[] = { "mlp", "cnn", NULL };
static const int model_vals[] = { DLT_MODEL_MLP, DLT_MODEL_CNN };
static const char *const optim_words[] = { "sgd", "nesterov", "adam", NULL };
static const int optim_vals[] = { DLT_OPTIM_SGD, DLT_OPTIM_NESTEROV, DLT_OPTIM_ADAM };
static const char *const sched_words[] = { "constant", "step", "cosine", NULL };
static const int sched_vals[] = { DLT_SCHED_CONSTANT, DLT_SCHED_STEP, DLT_SCHED_COSINE };
static const char *const allreduce_words[] = { "auto", "mpi", "shm", NULL };
static const int allreduce_vals[] = { DLT_ALLREDUCE_AUTO, DLT_ALLREDUCE_MPI, DLT_ALLREDUCE_SHM };
static const char *const format_words[] = { "idx", "csv", NULL };
static const int format_vals[] = { DLT_FORMAT_IDX, DLT_FORMAT_CSV };
static const char *const device_words[] = { "cpu", "gpu", NULL };
static const int device_vals[] = { DLT_DEVICE_CPU, DLT_DEVICE_GPU };
static const char *const precision_words[] = { "fp32", "tf32", "bf16", NULL };
static const int precision_vals[] = { DLT_PRECISION_FP32, DLT_PRECISION_TF32, DLT_PRECISION_BF16 };
static const char *const onoff_words[] = { "on", "off", NULL };
static const int onoff_vals[] = { 1, 0 };

struct opt_def {
	const char *name;      /* without the leading "--" */
	enum opt_kind kind;    /* how the value parses */
	int required;          /* 1 = must be given */
	double min, max;       /* range for numbers, inclusive */
	int max_open;          /* 1 = max is exclusive */
	size_t off;            /* field in struct dlt_opts */
	const char *const *words;  /* K_CHOICE: the accepted words */
	const int *vals;           /* K_CHOICE: the value of each word */
};

#define OFF(f) offsetof(struct dlt_opts, f)

static const struct opt_def defs[] = {
	{ "job-dir", K_STR, 1, 0, 0, 0, OFF(job_dir), NULL, NULL },
	{ "train-images", K_STR, 1, 0, 0, 0, OFF(train_images), NULL, NULL },
	{ "train-labels", K_STR, 0, 0, 0, 0, OFF(train_labels), NULL, NULL },
	{ "test-images", K_STR, 1, 0, 0, 0, OFF(test_images), NULL, NULL },
	{ "test-labels", K_STR, 0, 0, 0, 0, OFF(test_labels), NULL, NULL },
	{ "layers", K_LAYERS, 0, 0, 0, 0, OFF(hidden), NULL, NULL },
	{ "model", K_CHOICE, 0, 0, 0, 0, OFF(model), model_words, model_vals },
	{ "conv", K_CONV, 0, 0, 0, 0, OFF(conv_filters), NULL, NULL },
	{ "pool", K_INT, 0, 1, DLT_LAYER_MAX_KERNEL, 0, OFF(pool), NULL, NULL },
	{ "dense", K_DENSE, 0, 0, 0, 0, OFF(dense), NULL, NULL },
	{ "dropout", K_DOUBLE, 0, 0, 1, 1, OFF(dropout), NULL, NULL },
	{ "optimizer", K_CHOICE, 0, 0, 0, 0, OFF(optimizer), optim_words, optim_vals },
	{ "beta1", K_DOUBLE, 0, 0, 1, 1, OFF(beta1), NULL, NULL },
	{ "beta2", K_DOUBLE, 0, 0, 1, 1, OFF(beta2), NULL, NULL },
	{ "eps", K_DOUBLE, 0, 0, 1, 0, OFF(eps), NULL, NULL },
	{ "schedule", K_CHOICE, 0, 0, 0, 0, OFF(schedule), sched_words, sched_vals },
	{ "gamma", K_DOUBLE, 0, 0, 1, 0, OFF(gamma), NULL, NULL },
	{ "step-epochs", K_LONG, 0, 1, DLT_MAX_EPOCHS, 0, OFF(step_epochs), NULL, NULL },
	{ "warmup-steps", K_LONG, 0, 0, DLT_MAX_COUNT_OPT, 0, OFF(warmup_steps), NULL, NULL },
	{ "bucket-mb", K_DOUBLE, 0, 0, DLT_MAX_BUCKET_MB, 0, OFF(bucket_mb), NULL, NULL },
	{ "allreduce", K_CHOICE, 0, 0, 0, 0, OFF(allreduce), allreduce_words, allreduce_vals },
	{ "format", K_CHOICE, 0, 0, 0, 0, OFF(format), format_words, format_vals },
	{ "image-size", K_INT, 0, 1, DLT_MAX_IMAGE_SIZE, 0, OFF(image_size), NULL, NULL },
	{ "epochs", K_INT, 1, 1, DLT_MAX_EPOCHS, 0, OFF(epochs), NULL, NULL },
	{ "batch", K_INT, 1, 1, DLT_MAX_BATCH, 0, OFF(batch), NULL, NULL },
	{ "rank-batches", K_BATCHES, 0, 0, 0, 0, OFF(rank_batches), NULL, NULL },
	{ "rebalance", K_INT, 0, 0, DLT_REBALANCE_MAX, 0, OFF(rebalance), NULL, NULL },
	{ "cpus", K_CPUS, 0, 0, 0, 0, OFF(cpus), NULL, NULL },
	{ "gpus", K_GPUS, 0, 0, 0, 0, OFF(gpus), NULL, NULL },
	{ "lr", K_DOUBLE, 1, 0, DLT_MAX_LR, 0, OFF(lr), NULL, NULL },
	{ "momentum", K_DOUBLE, 0, 0, 1, 1, OFF(momentum), NULL, NULL },
	{ "weight-decay", K_DOUBLE, 0, 0, 1, 1, OFF(weight_decay), NULL, NULL },
	{ "seed", K_U64, 0, 0, 0, 0, OFF(seed), NULL, NULL },
	{ "lr-find-steps", K_INT, 0, 10, 100000, 0, OFF(lr_find_steps), NULL, NULL },
	{ "checkpoint-every", K_LONG, 0, 0, DLT_MAX_COUNT_OPT, 0, OFF(checkpoint_every), NULL, NULL },
	{ "train-limit", K_LONG, 0, 0, DLT_MAX_COUNT_OPT, 0, OFF(train_limit), NULL, NULL },
	{ "test-limit", K_LONG, 0, 0, DLT_MAX_COUNT_OPT, 0, OFF(test_limit), NULL, NULL },
	{ "device", K_CHOICE, 0, 0, 0, 0, OFF(device), device_words, device_vals },
	{ "precision", K_CHOICE, 0, 0, 0, 0, OFF(precision), precision_words, precision_vals },
	{ "cuda-graph", K_CHOICE, 0, 0, 0, 0, OFF(cuda_graph), onoff_words, onoff_vals },
	{ "device-data", K_CHOICE, 0, 0, 0, 0, OFF(device_data), onoff_words, onoff_vals },
	{ "step-ahead", K_CHOICE, 0, 0, 0, 0, OFF(step_ahead), onoff_words, onoff_vals },
	{ "gpu-profile", K_CHOICE, 0, 0, 0, 0, OFF(gpu_profile), onoff_words, onoff_vals },
};

#define NDEFS (sizeof defs / sizeof defs[0])

/* Parses a comma list of 1..max_count integers of min_value..max_value
 * into out. Returns the count, or -EINVAL. */
static int int_list(const char *s, int *out, int max_count, long min_value, long max_value)
{
	int n = 0;

	for (;;) {
		char *end;
		long w;

		if (*s < '0' || *s > '9')
			return -EINVAL;
		errno = 0;
		w = strtol(s, &end, 10);
		if (errno || w < min_value || w > max_value || n == max_count)
			return -EINVAL;
		out[n++] = (int)w;
		if (*end == '\0')
			return n;
		if (*end != ',')
			return -EINVAL;
		s = end + 1;
	}
}

int dlt_opts_layers(const char *s, int *hidden)
{
	return int_list(s, hidden, DLT_NET_MAX_DENSE, 1, DLT_NET_MAX_WIDTH);
}

int dlt_opts_conv(const char *s, int *filters, int *kernel)
{
	int n = 0;

	for (;;) {
		char *end;
		long f, k;

		if (*s < '0' || *s > '9')
			return -EINVAL;
		errno = 0;
		f = strtol(s, &end, 10);
		if (errno || f < 1 || f > DLT_LAYER_MAX_CHANNELS || *end != ':' ||
		    n == DLT_NET_MAX_CONV)
			return -EINVAL;
		s = end + 1;
		if (*s < '0' || *s > '9')
			return -EINVAL;
		k = strtol(s, &end, 10);
		if (errno || k < 1 || k > DLT_LAYER_MAX_KERNEL || k % 2 == 0)
			return -EINVAL;
		filters[n] = (int)f;
		kernel[n++] = (int)k;
		if (*end == '\0')
			return n;
		if (*end != ',')
			return -EINVAL;
		s = end + 1;
	}
}

/* Parses --NAME's value v, one integer of min..max per rank, into out and
 * *count. Returns 0, or -EINVAL with a message naming the option (WHAT the
 * integers are). */
static int rank_list(const char *name, const char *what, const char *v, int *out, int *count,
		     long min, long max, char *err, size_t errlen)
{
	int n = int_list(v, out, DLT_MAX_RANKS, min, max);

	if (n < 0) {
		snprintf(err, errlen, "--%s \"%s\": expected 1..%d comma-separated %s of %ld..%ld",
			 name, v, DLT_MAX_RANKS, what, min, max);
		return -EINVAL;
	}
	*count = n;
	return 0;
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
				 v, DLT_NET_MAX_DENSE, DLT_NET_MAX_WIDTH);
			return -EINVAL;
		}
		o->nhidden = n;
		return 0;
	}
	if (d->kind == K_BATCHES)
		return rank_list("rank-batches", "batches", v, o->rank_batches, &o->nrank_batches,
				 1, DLT_MAX_BATCH, err, errlen);
	if (d->kind == K_CPUS)
		return rank_list("cpus", "CPU numbers", v, o->cpus, &o->ncpus, 0, DLT_MAX_CPU,
				 err, errlen);
	if (d->kind == K_GPUS)
		return rank_list("gpus", "GPU numbers", v, o->gpus, &o->ngpus, 0, DLT_MAX_GPU,
				 err, errlen);
	if (d->kind == K_DENSE) {
		int n = v[0] ? dlt_opts_layers(v, o->dense) : 0;   /* "": the convs feed the output */

		if (n < 0 || n > DLT_NET_MAX_DENSE) {
			snprintf(err, errlen, "--dense \"%s\": expected \"\" (none) or 1..%d comma-separated widths of 1..%d",
				 v, DLT_NET_MAX_DENSE, DLT_NET_MAX_WIDTH);
			return -EINVAL;
		}
		o->ndense = n;
		return 0;
	}
	if (d->kind == K_CONV) {
		int n = dlt_opts_conv(v, o->conv_filters, o->conv_kernel);

		if (n < 0) {
			snprintf(err, errlen, "--conv \"%s\": expected 1..%d comma-separated "
				 "FILTERS:KERNEL pairs (odd kernel 1..%d)", v, DLT_NET_MAX_CONV,
				 DLT_LAYER_MAX_KERNEL);
			return -EINVAL;
		}
		o->nconv = n;
		return 0;
	}
	if (d->kind == K_CHOICE) {
		for (int k = 0; d->words[k]; k++)
			if (strcmp(v, d->words[k]) == 0) {
				*(int *)(void *)base = d->vals[k];
				return 0;
			}
		snprintf(err, errlen, "--%s \"%s\": unknown value", d->name, v);
		return -EINVAL;
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
	if (d->kind == K_DOUBLE && d->off == OFF(lr) && strcmp(v, "auto") == 0) {
		o->lr = 0.0;   /* chosen by the range test */
		o->lr_auto = 1;
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
		if (d->off == OFF(lr))
			o->lr_auto = 0;
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
	o->model = DLT_MODEL_MLP;
	o->nconv = dlt_opts_conv("32:5,64:5", o->conv_filters, o->conv_kernel);
	o->pool = 2;
	o->dense[0] = 1024;
	o->ndense = 1;
	o->optimizer = DLT_OPTIM_SGD;
	o->beta1 = 0.9;
	o->beta2 = 0.999;
	o->eps = 1e-8;
	o->schedule = DLT_SCHED_CONSTANT;
	o->gamma = 0.1;
	o->step_epochs = 1;
	o->bucket_mb = 1.0;
	o->cuda_graph = 1;
	o->device_data = 1;
	o->step_ahead = 1;
	o->lr_find_steps = DLT_LRFIND_STEPS;
	o->format = DLT_FORMAT_IDX;
	o->image_size = 28;
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
	if (o->model == DLT_MODEL_MLP && o->nhidden == 0) {
		snprintf(err, errlen, "missing option \"--layers\" (needed by --model mlp)");
		return -EINVAL;
	}
	if (o->rebalance > 0 && o->rebalance < DLT_REBALANCE_MIN) {
		snprintf(err, errlen, "--rebalance %d: at least %d steps between re-splits (0 = none)",
			 o->rebalance, DLT_REBALANCE_MIN);
		return -EINVAL;
	}
	if (o->rebalance > 0 && o->device == DLT_DEVICE_GPU) {
		snprintf(err, errlen, "--rebalance: ranks on CPUs only (a GPU rank's compute "
			 "time is not measured apart from its waits)");
		return -EINVAL;
	}
	if (o->precision != DLT_PRECISION_FP32 && o->device != DLT_DEVICE_GPU) {
		snprintf(err, errlen, "--precision %s: needs --device gpu (the CPU trainer computes "
			 "in fp32)", precision_words[o->precision]);
		return -EINVAL;
	}
	if (o->format == DLT_FORMAT_IDX && (!o->train_labels || !o->test_labels)) {
		snprintf(err, errlen, "missing option \"--%s\" (needed by --format idx)",
			 o->train_labels ? "test-labels" : "train-labels");
		return -EINVAL;
	}
	return 0;
}
