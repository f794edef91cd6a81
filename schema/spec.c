/* spec.c - the table of spec keys (section, name, type, bounds, field, default) and the defaults */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema/keys.h"

/* The enum fields are written through an int (see value.c). */
_Static_assert(sizeof(enum dlh_restart) == sizeof(int), "enum dlh_restart is int-sized");
_Static_assert(sizeof(enum dlh_device) == sizeof(int), "enum dlh_device is int-sized");

#define FIELD(f) offsetof(struct dlh_spec, f), sizeof(((struct dlh_spec *)0)->f)
#define DATA_DIR "/usr/share/datasets/fashion-mnist/"

static const char *const restart_words[] = { "never", "on-failure", NULL };
static const char *const device_words[] = { "cpu", "gpu", NULL };
static const char *const format_words[] = { "idx", NULL };
static const char *const format_later[] = { "csv", "npy", "npz", "png", "jpeg", "tfrecord", "parquet", NULL };
static const char *const model_words[] = { "mlp", NULL };
static const char *const model_later[] = { "cnn", "rnn", "lstm", "transformer", "resnet", NULL };
static const char *const optim_words[] = { "sgd", NULL };
static const char *const optim_later[] = { "adam", "adamw", "rmsprop", "adagrad", "lamb", "lion", NULL };

const char *const dlh_spec_sections[] = { "job", "data", "model", "train", "resources", NULL };

const struct dlh_key dlh_spec_keys[] = {
	{ "job", "name", DLH_KIND_NAME, FIELD(name), .def = "" },
	{ "job", "command", DLH_KIND_COMMAND, FIELD(command), .hi = DLH_COMMAND_MAX, .def = "" },
	{ "job", "restart", DLH_KIND_ENUM, FIELD(restart), .words = restart_words, .def = "never" },
	{ "job", "max_restarts", DLH_KIND_INT, FIELD(max_restarts), .lo = 0, .hi = 100, .def = "3" },

	{ "data", "train", DLH_KIND_PATH, FIELD(train), .hi = DLH_PATH_MAX, .def = DATA_DIR "train-images-idx3-ubyte.gz" },
	{ "data", "train_labels", DLH_KIND_PATH, FIELD(train_labels), .hi = DLH_PATH_MAX, .def = DATA_DIR "train-labels-idx1-ubyte.gz" },
	{ "data", "test", DLH_KIND_PATH, FIELD(test), .hi = DLH_PATH_MAX, .def = DATA_DIR "t10k-images-idx3-ubyte.gz" },
	{ "data", "test_labels", DLH_KIND_PATH, FIELD(test_labels), .hi = DLH_PATH_MAX, .def = DATA_DIR "t10k-labels-idx1-ubyte.gz" },
	{ "data", "format", DLH_KIND_WORD, FIELD(format), .words = format_words, .later = format_later, .def = "idx" },
	{ "data", "train_limit", DLH_KIND_LONG, FIELD(train_limit), .lo = 0, .hi = 2147483647, .def = "0" },
	{ "data", "test_limit", DLH_KIND_LONG, FIELD(test_limit), .lo = 0, .hi = 2147483647, .def = "0" },

	{ "model", "type", DLH_KIND_WORD, FIELD(model_type), .words = model_words, .later = model_later, .def = "mlp" },
	{ "model", "layers", DLH_KIND_LAYERS, FIELD(layers), .lo = 1, .hi = 65536, .def = "256, 128, 100" },

	{ "train", "epochs", DLH_KIND_INT, FIELD(epochs), .lo = 1, .hi = 10000, .def = "10" },
	{ "train", "batch_size", DLH_KIND_INT, FIELD(batch_size), .lo = 1, .hi = 1048576, .def = "64" },
	{ "train", "lr", DLH_KIND_DOUBLE, FIELD(lr), .dlo = 0, .lo_open = 1, .dhi = 100, .def = "0.01" },
	{ "train", "optimizer", DLH_KIND_WORD, FIELD(optimizer), .words = optim_words, .later = optim_later, .def = "sgd" },
	{ "train", "momentum", DLH_KIND_DOUBLE, FIELD(momentum), .dlo = 0, .dhi = 1, .hi_open = 1, .def = "0.9" },
	{ "train", "weight_decay", DLH_KIND_DOUBLE, FIELD(weight_decay), .dlo = 0, .dhi = 1, .hi_open = 1, .def = "0" },
	{ "train", "seed", DLH_KIND_U64, FIELD(seed), .def = "1" },
	{ "train", "checkpoint_every", DLH_KIND_INT, FIELD(checkpoint_every), .lo = 0, .hi = 100000000, .def = "500" },

	{ "resources", "ranks", DLH_KIND_RANKS, FIELD(ranks), .lo = 1, .hi = 1024, .def = "auto" },
	{ "resources", "device", DLH_KIND_ENUM, FIELD(device), .words = device_words, .def = "cpu" },
};

const int dlh_spec_nkeys = (int)(sizeof dlh_spec_keys / sizeof dlh_spec_keys[0]);

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
