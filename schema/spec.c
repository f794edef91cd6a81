/* spec.c - the table of spec keys (section, name, type, bounds, field, default) and the defaults */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema/keys.h"

/* The enum fields are written through an int (see value.c). */
_Static_assert(sizeof(enum dlh_restart) == sizeof(int), "enum dlh_restart is int-sized");
_Static_assert(sizeof(enum dlh_device) == sizeof(int), "enum dlh_device is int-sized");
_Static_assert(sizeof(enum dlh_share) == sizeof(int), "enum dlh_share is int-sized");
_Static_assert(sizeof(enum dlh_profile) == sizeof(int), "enum dlh_profile is int-sized");
_Static_assert(sizeof(enum dlh_precision) == sizeof(int), "enum dlh_precision is int-sized");

#define FIELD(f) offsetof(struct dlh_spec, f), sizeof(((struct dlh_spec *)0)->f)
#define DATA_DIR "/usr/share/datasets/fashion-mnist/"

static const char *const restart_words[] = { "never", "on-failure", NULL };
static const char *const device_words[] = { "cpu", "gpu", NULL };
static const char *const bool_words[] = { "false", "true", NULL };
static const char *const precision_words[] = { "fp32", "tf32", "bf16", NULL };   /* enum dlh_precision */
static const char *const share_words[] = { "owner", "group", "all", NULL };
static const char *const profile_words[] = { "auto", "false", "true", NULL };   /* enum dlh_profile */
static const char *const format_words[] = { "idx", "csv", NULL };
static const char *const format_later[] = { "npy", "npz", "png", "jpeg", "tfrecord", "parquet", NULL };
static const char *const model_words[] = { "mlp", "cnn", NULL };
static const char *const model_later[] = { "rnn", "lstm", "transformer", "resnet", NULL };
static const char *const optim_words[] = { "sgd", "nesterov", "adam", NULL };
static const char *const optim_later[] = { "adamw", "rmsprop", "adagrad", "lamb", "lion", NULL };
static const char *const schedule_words[] = { "constant", "step", "cosine", NULL };
static const char *const schedule_later[] = { "exponential", "linear", "onecycle", "plateau", NULL };

const char *const dlh_spec_sections[] = { "job", "data", "model", "train", "resources", NULL };

const struct dlh_key dlh_spec_keys[] = {
	{ "job", "name", DLH_KIND_NAME, FIELD(name), .def = "" },
	{ "job", "command", DLH_KIND_COMMAND, FIELD(command), .hi = DLH_COMMAND_MAX, .def = "" },
	{ "job", "env", DLH_KIND_ENV, FIELD(env), .hi = DLH_ENV_MAX, .def = "" },
	{ "job", "steps", DLH_KIND_LONG, FIELD(steps), .lo = 0, .hi = DLH_STEPS_MAX, .def = "0" },
	{ "job", "restart", DLH_KIND_ENUM, FIELD(restart), .words = restart_words, .def = "never" },
	{ "job", "max_restarts", DLH_KIND_INT, FIELD(max_restarts), .lo = 0, .hi = 100, .def = "3" },
	{ "job", "priority", DLH_KIND_INT, FIELD(priority), .lo = DLH_PRIORITY_MIN, .hi = DLH_PRIORITY_MAX, .def = "0" },
	{ "job", "preemptible", DLH_KIND_ENUM, FIELD(preemptible), .words = bool_words, .def = "true" },
	{ "job", "time_limit", DLH_KIND_DURATION, FIELD(time_limit), .lo = 0, .hi = DLH_TIME_LIMIT_MAX, .def = "0" },
	{ "job", "time_limit_grace", DLH_KIND_DURATION, FIELD(time_limit_grace), .lo = 0, .hi = DLH_TIME_LIMIT_MAX, .def = "0" },
	{ "job", "hang_timeout", DLH_KIND_DURATION, FIELD(hang_timeout), .lo = 0, .hi = DLH_TIME_LIMIT_MAX, .def = "0" },
	{ "job", "deadline", DLH_KIND_DURATION, FIELD(deadline), .lo = 0, .hi = DLH_TIME_LIMIT_MAX, .def = "0" },
	{ "job", "dry_run", DLH_KIND_ENUM, FIELD(dry_run), .words = bool_words, .def = "false" },
	{ "job", "profile", DLH_KIND_ENUM, FIELD(profile), .words = profile_words, .def = "auto" },
	{ "job", "readable_by", DLH_KIND_ENUM, FIELD(readable_by), .words = share_words, .def = "owner" },

	{ "data", "train", DLH_KIND_PATH, FIELD(train), .hi = DLH_PATH_MAX, .def = DATA_DIR "train-images-idx3-ubyte.gz" },
	{ "data", "train_labels", DLH_KIND_PATH, FIELD(train_labels), .hi = DLH_PATH_MAX, .def = DATA_DIR "train-labels-idx1-ubyte.gz" },
	{ "data", "test", DLH_KIND_PATH, FIELD(test), .hi = DLH_PATH_MAX, .def = DATA_DIR "t10k-images-idx3-ubyte.gz" },
	{ "data", "test_labels", DLH_KIND_PATH, FIELD(test_labels), .hi = DLH_PATH_MAX, .def = DATA_DIR "t10k-labels-idx1-ubyte.gz" },
	{ "data", "format", DLH_KIND_WORD, FIELD(format), .words = format_words, .later = format_later, .def = "idx" },
	{ "data", "train_limit", DLH_KIND_LONG, FIELD(train_limit), .lo = 0, .hi = 2147483647, .def = "0" },
	{ "data", "test_limit", DLH_KIND_LONG, FIELD(test_limit), .lo = 0, .hi = 2147483647, .def = "0" },

	{ "model", "type", DLH_KIND_WORD, FIELD(model_type), .words = model_words, .later = model_later, .def = "mlp" },
	{ "model", "layers", DLH_KIND_LAYERS, FIELD(layers), .lo = 1, .hi = 65536, .def = "256, 128, 100",
	  .count_off = offsetof(struct dlh_spec, nlayers), .min_count = 1, .max_count = DLH_LAYERS_MAX },
	{ "model", "conv", DLH_KIND_CONV, FIELD(conv_filters), .lo = 1, .hi = 4096, .def = "32:5, 64:5" },
	{ "model", "pool", DLH_KIND_INT, FIELD(pool), .lo = 1, .hi = 8, .def = "2" },
	{ "model", "dense", DLH_KIND_LAYERS, FIELD(dense), .lo = 1, .hi = 65536, .def = "1024",
	  .count_off = offsetof(struct dlh_spec, ndense), .min_count = 0, .max_count = DLH_LAYERS_MAX },
	{ "model", "dropout", DLH_KIND_DOUBLE, FIELD(dropout), .dlo = 0, .dhi = 1, .hi_open = 1, .def = "0" },

	{ "train", "epochs", DLH_KIND_INT, FIELD(epochs), .lo = 1, .hi = 10000, .def = "10" },
	{ "train", "batch_size", DLH_KIND_INT, FIELD(batch_size), .lo = 1, .hi = 1048576, .def = "64",
	  .command_own = 1 },
	{ "train", "scale_batch", DLH_KIND_ENUM, FIELD(scale_batch), .words = bool_words, .def = "false",
	  .command_own = 1 },
	{ "train", "lr", DLH_KIND_RATE, FIELD(lr), .dlo = 0, .lo_open = 1, .dhi = 100, .def = "0.01",
	  .command_own = 1 },
	{ "train", "optimizer", DLH_KIND_WORD, FIELD(optimizer), .words = optim_words, .later = optim_later, .def = "sgd" },
	{ "train", "momentum", DLH_KIND_DOUBLE, FIELD(momentum), .dlo = 0, .dhi = 1, .hi_open = 1, .def = "0.9" },
	{ "train", "beta1", DLH_KIND_DOUBLE, FIELD(beta1), .dlo = 0, .dhi = 1, .hi_open = 1, .def = "0.9" },
	{ "train", "beta2", DLH_KIND_DOUBLE, FIELD(beta2), .dlo = 0, .dhi = 1, .hi_open = 1, .def = "0.999" },
	{ "train", "weight_decay", DLH_KIND_DOUBLE, FIELD(weight_decay), .dlo = 0, .dhi = 1, .hi_open = 1, .def = "0" },
	{ "train", "schedule", DLH_KIND_WORD, FIELD(schedule), .words = schedule_words, .later = schedule_later, .def = "constant" },
	{ "train", "step_epochs", DLH_KIND_INT, FIELD(step_epochs), .lo = 1, .hi = 10000, .def = "10" },
	{ "train", "gamma", DLH_KIND_DOUBLE, FIELD(gamma), .dlo = 0, .lo_open = 1, .dhi = 1, .def = "0.1" },
	{ "train", "warmup_steps", DLH_KIND_INT, FIELD(warmup_steps), .lo = 0, .hi = 100000000, .def = "0" },
	{ "train", "seed", DLH_KIND_U64, FIELD(seed), .def = "1" },
	{ "train", "checkpoint_every", DLH_KIND_INT, FIELD(checkpoint_every), .lo = 0, .hi = 100000000, .def = "500" },
	{ "train", "bucket_mb", DLH_KIND_DOUBLE, FIELD(bucket_mb), .dlo = 0, .dhi = 1024, .def = "1" },
	{ "train", "rebalance", DLH_KIND_ENUM, FIELD(rebalance), .words = bool_words, .def = "true" },
	{ "train", "precision", DLH_KIND_ENUM, FIELD(precision), .words = precision_words, .def = "fp32" },

	/* a program runs once unless told more: it need not be an MPI one, and
	 * there is no estimate of it to choose a number by */
	{ "resources", "ranks", DLH_KIND_RANKS, FIELD(ranks), .lo = 1, .hi = 1024, .def = "auto",
	  .def_command = "1" },
	{ "resources", "nodes", DLH_KIND_RANKS, FIELD(nodes), .lo = 1, .hi = 256, .def = "auto" },
	{ "resources", "device", DLH_KIND_ENUM, FIELD(device), .words = device_words, .def = "cpu" },
	{ "resources", "memory", DLH_KIND_SIZE, FIELD(memory), .lo = DLH_MEMORY_MIN, .hi = DLH_MEMORY_MAX, .def = "0" },
	{ "resources", "disk", DLH_KIND_SIZE, FIELD(disk), .lo = DLH_MEMORY_MIN, .hi = DLH_MEMORY_MAX, .def = "0" },
};

const int dlh_spec_nkeys = (int)(sizeof dlh_spec_keys / sizeof dlh_spec_keys[0]);

#define TRAINER_ONLY "applies to the built-in trainer, not to a [job] command"
#define TRAINER_HINT "a program takes its own options: on its command line, or from [job] env"

/* In order: a key breaking two rules is told of the first. */
static const struct dlh_applies applies_rules[] = {
	{ "data", NULL, "job", "command", { "" }, .why = TRAINER_ONLY, .hint = TRAINER_HINT },
	{ "model", NULL, "job", "command", { "" }, .why = TRAINER_ONLY, .hint = TRAINER_HINT },
	{ "train", NULL, "job", "command", { "" }, .why = TRAINER_ONLY,
	  .hint = "a program takes its own options: on its command line, or from [job] env; of "
		  "[train] it is handed batch_size, lr and scale_batch",
	  .except_own = 1 },
	{ "job", "steps", "job", "command", { NULL }, .hint = "the built-in trainer counts its own steps" },
	{ "job", "profile", "job", "command", { NULL }, .hint = "the built-in trainer is estimated from its model" },
	{ "model", "layers", "model", "type", { "mlp" }, .hint = "a cnn uses conv, pool and dense" },
	{ "model", "conv", "model", "type", { "cnn" }, .hint = "an mlp uses layers" },
	{ "model", "pool", "model", "type", { "cnn" }, .hint = "an mlp uses layers" },
	{ "model", "dense", "model", "type", { "cnn" }, .hint = "an mlp uses layers" },
	{ "train", "momentum", "train", "optimizer", { "sgd", "nesterov" }, .hint = "adam uses beta1 and beta2" },
	{ "train", "beta1", "train", "optimizer", { "adam" }, .hint = "sgd and nesterov use momentum" },
	{ "train", "beta2", "train", "optimizer", { "adam" }, .hint = "sgd and nesterov use momentum" },
	{ "train", "step_epochs", "train", "schedule", { "step" }, .hint = NULL },
	{ "train", "gamma", "train", "schedule", { "step" }, .hint = NULL },
};

/* 1 when s breaks rule a: its key's value is not one a applies beside. */
static int broken(const struct dlh_spec *s, const struct dlh_applies *a)
{
	int on = dlh_spec_key_find(a->on_section, a->on);
	const char *value = (const char *)s + dlh_spec_keys[on].off;
	if (!a->values[0])
		return !value[0];   /* applies beside any value but none */
	for (int v = 0; v < 4 && a->values[v]; v++)
		if (!strcmp(value, a->values[v]))
			return 0;
	return 1;
}

const struct dlh_applies *dlh_spec_applies(const struct dlh_spec *s, int k)
{
	const struct dlh_key *key = &dlh_spec_keys[k];
	for (size_t r = 0; r < sizeof applies_rules / sizeof applies_rules[0]; r++) {
		const struct dlh_applies *a = &applies_rules[r];
		if (strcmp(a->section, key->section) || (a->name && strcmp(a->name, key->name)) ||
		    (a->except_own && key->command_own))
			continue;
		if (broken(s, a))
			return a;
	}
	return NULL;
}

/* Index of section in dlh_spec_sections, or -1 when unknown. */
int dlh_spec_section_find(const char *section)
{
	for (int i = 0; dlh_spec_sections[i]; i++)
		if (!strcmp(dlh_spec_sections[i], section))
			return i;
	return -1;
}

/* Index of the key in dlh_spec_keys (section NULL = any), or -1. */
int dlh_spec_key_find(const char *section, const char *name)
{
	for (int i = 0; i < dlh_spec_nkeys; i++)
		if ((!section || !strcmp(dlh_spec_keys[i].section, section)) &&
		    !strcmp(dlh_spec_keys[i].name, name))
			return i;
	return -1;
}

const char *dlh_spec_precision_name(enum dlh_precision p)
{
	return p >= DLH_PRECISION_FP32 && p <= DLH_PRECISION_BF16 ? precision_words[p] : "fp32";
}

/* Fills s with the default of every key, parsed from the table's text so
 * the defaults and the parser cannot disagree. A default that does not
 * parse is a bug in the table: it aborts. */
void dlh_spec_defaults(struct dlh_spec *s)
{
	char msg[DLH_SPEC_MSG_MAX];
	memset(s, 0, sizeof *s);
	for (int i = 0; i < dlh_spec_nkeys; i++) {
		if (dlh_spec_set(&dlh_spec_keys[i], dlh_spec_keys[i].def, s, msg, sizeof msg)) {
			fprintf(stderr, "dlh_spec_defaults: [%s] %s: %s\n",
				dlh_spec_keys[i].section, dlh_spec_keys[i].name, msg);
			abort();
		}
	}
}
