/* spec.h - the job spec language: parse, defaults, validation, normalized text */
#ifndef DLH_SPEC_H
#define DLH_SPEC_H

#include <stddef.h>
#include <stdint.h>

#define DLH_SPEC_MAX (64 * 1024)   /* largest spec accepted, in bytes */
#define DLH_NAME_MAX 64            /* longest [job] name */
#define DLH_PATH_MAX 1024          /* longest data path */
#define DLH_COMMAND_MAX 1024       /* longest [job] command */
#define DLH_ENV_MAX 4096           /* bytes of all [job] env entries together */
#define DLH_ENV_ENTRIES_MAX 32     /* most [job] env entries */
#define DLH_LAYERS_MAX 16          /* most hidden layers in an MLP or a CNN's dense part */
#define DLH_CONV_MAX 8             /* most convolution layers in a CNN */
#define DLH_ERR_MAX 4096           /* room for a parse error report */
#define DLH_PRIORITY_MIN (-1000)   /* lowest [job] priority */
#define DLH_PRIORITY_MAX 1000      /* highest [job] priority */
#define DLH_TIME_LIMIT_MAX (366L * 24 * 3600)   /* longest [job] time_limit, seconds */
#define DLH_STEPS_MAX 1000000000000L            /* largest [job] steps */
#define DLH_GRACE_AUTO_MAX 300L   /* most seconds of the automatic time_limit_grace */
#define DLH_MEMORY_MIN (1LL << 20)              /* smallest [resources] memory but 0 */
#define DLH_MEMORY_MAX (1LL << 50)              /* largest [resources] memory */

enum dlh_restart {
	DLH_RESTART_NEVER = 0,      /* a failed run stays failed */
	DLH_RESTART_ON_FAILURE,     /* relaunch from the newest checkpoint */
};

/* Who besides its owner and root may read a job's files (spec, plan, log,
 * metrics, checkpoints, result). */
enum dlh_share {
	DLH_SHARE_OWNER = 0,        /* nobody else */
	DLH_SHARE_GROUP,            /* the members of the owner's primary group */
	DLH_SHARE_ALL,              /* every user of the mount */
};

enum dlh_device {
	DLH_DEVICE_CPU = 0,         /* one rank per CPU slot */
	DLH_DEVICE_GPU,             /* one rank per GPU */
};

/* [train] precision: the arithmetic of the trainer's matrix products */
enum dlh_precision {
	DLH_PRECISION_FP32 = 0,     /* FP32 throughout (the CPU trainer's only one) */
	DLH_PRECISION_TF32,         /* GPU: GEMMs (dense and conv) on tensor cores in TF32 */
	DLH_PRECISION_BF16,         /* GPU: GEMM operands in BF16, FP32 accumulate, FP32
				       master weights and optimizer state */
};

/* A validated job spec. Every field holds a value: the parser fills
 * defaults for what the text leaves out. */
/* [job] profile: whether a [job] command is measured in short runs before
 * its run (engine/plan/profile.h), the source of its estimate */
enum dlh_profile {
	DLH_PROFILE_AUTO = 0,   /* when no earlier run of the same program is on record */
	DLH_PROFILE_OFF,        /* never: no estimate */
	DLH_PROFILE_ON,         /* always, the record notwithstanding */
};

struct dlh_spec {
	/* [job] */
	char name[DLH_NAME_MAX + 1];        /* "" = none; else [A-Za-z0-9._-], not all digits */
	char command[DLH_COMMAND_MAX + 1];  /* "" = built-in trainer; else argv, split on blanks */
	long steps;                         /* a command's total train steps, for progress and
					       ETA; 0 = unknown (dlh-train counts its own) */
	enum dlh_restart restart;           /* never | on-failure */
	int max_restarts;                   /* 0..100, used with on-failure */
	int priority;                       /* DLH_PRIORITY_MIN..MAX; higher starts first */
	int preemptible;                    /* 1: a waiting job of higher priority may suspend it */
	long time_limit;                    /* seconds one run may take (and the scheduler's
					       estimate); 0 = none */
	long time_limit_grace;              /* seconds before time_limit at which the run is
					       told to checkpoint and stop; 0 = a tenth of
					       time_limit, at most DLH_GRACE_AUTO_MAX
					       (dlh_spec_grace) */
	long hang_timeout;                  /* seconds without a step after which a run is
					       hung: stopped, and its restart policy applies;
					       0 = ten estimated steps, at least a minute */
	long deadline;                      /* seconds the run must finish in: the planner picks
					       the fewest joules that meet it; 0 = none (fastest) */
	int dry_run;                        /* 1: estimate and plan, never launch */
	enum dlh_profile profile;           /* a [job] command: measured before its run? */
	enum dlh_share readable_by;         /* owner | group | all: who reads its files */
	char env[DLH_ENV_MAX + 1];          /* [job] env: "NAME=VALUE\n" per entry, in spec
					       order; every rank's environment */

	/* [data] */
	char train[DLH_PATH_MAX + 1];        /* absolute path, readable */
	char train_labels[DLH_PATH_MAX + 1]; /* absolute path, readable */
	char test[DLH_PATH_MAX + 1];         /* absolute path, readable */
	char test_labels[DLH_PATH_MAX + 1];  /* absolute path, readable */
	char format[8];                      /* "idx" | "csv" (label, then pixels, per line) */
	long train_limit;                    /* use the first N training images; 0 = all */
	long test_limit;                     /* use the first N test images; 0 = all */

	/* [model] */
	char model_type[8];                  /* "mlp" | "cnn" */
	int layers[DLH_LAYERS_MAX];          /* mlp: hidden layer widths */
	int nlayers;                         /* how many of layers[] are used, >= 1 */
	int conv_filters[DLH_CONV_MAX];      /* cnn: output channels of each convolution */
	int conv_kernel[DLH_CONV_MAX];       /* cnn: its odd square kernel size ("same" padding) */
	int nconv;                           /* convolutions used, >= 1 */
	int pool;                            /* cnn: max-pool size and stride after each conv; 1 = none */
	int dense[DLH_LAYERS_MAX];           /* cnn: hidden dense widths after the convolutions */
	int ndense;                          /* how many of dense[] are used, >= 0 */
	double dropout;                      /* after each hidden dense layer, 0 <= p < 1 */

	/* [train] */
	int epochs;                          /* 1..10000 */
	int batch_size;                      /* global batch, 1..1048576 */
	int scale_batch;                     /* 1: batch_size and lr are one device's; the global
						batch is batch_size x ranks, lr scaled linearly
						(Goyal et al. 2017) with warmup */
	double lr;                           /* > 0, <= 100; 0 = auto (the range test) */
	char optimizer[16];                  /* "sgd" | "nesterov" | "adam" */
	double momentum;                     /* sgd, nesterov: 0 <= m < 1 */
	double beta1;                        /* adam: 0 <= b1 < 1 */
	double beta2;                        /* adam: 0 <= b2 < 1 */
	double weight_decay;                 /* 0 <= wd < 1, added to the gradient */
	char schedule[16];                   /* "constant" | "step" | "cosine" */
	int step_epochs;                     /* step: epochs between lr drops */
	double gamma;                        /* step: factor of each drop, 0 < g <= 1 */
	int warmup_steps;                    /* linear warmup over this many steps; 0 = none */
	uint64_t seed;                       /* initial weights and shuffles */
	int checkpoint_every;                /* steps between checkpoints; 0 = only at the end */
	double bucket_mb;                    /* gradient allreduce bucket; 0 = no overlap */
	int rebalance;                       /* 1: unequal per-rank batches follow the ranks'
						measured speed during the run */
	enum dlh_precision precision;        /* fp32 | tf32 | bf16 (tf32, bf16: device = gpu) */

	/* [resources] */
	int ranks;                           /* 1..1024; 0 = auto (decided by the planner) */
	int nodes;                           /* nodes the ranks spread over, as evenly as they
						divide; 0 = auto (the planner's choice) */
	enum dlh_device device;              /* cpu | gpu */
	long long memory;                    /* bytes all ranks together may use; 0 = the
						mount's default per rank */
	long long disk;                      /* bytes its job directory may hold (checkpoints,
						logs, what it writes); 0 = the mount's default */
};

/* Fills s with the defaults of every key. */
void dlh_spec_defaults(struct dlh_spec *s);

/* Parses and validates spec text of len bytes (need not be NUL-terminated).
 * Returns 0 with *s filled, or -EINVAL (any error in the text) or -EFBIG
 * (len > DLH_SPEC_MAX) with err holding one line per problem, each of the
 * form `spec:LINE: [section] key: message` and ending in a newline. */
/* The seconds before s's time_limit at which its run is told to checkpoint
 * and stop: time_limit_grace, or a tenth of time_limit (at most
 * DLH_GRACE_AUTO_MAX) when that is 0; 0 when there is no time limit. */
long dlh_spec_grace(const struct dlh_spec *s);

/* The spec's word for precision p ("fp32", "tf32", "bf16"), as dlh-train's
 * --precision takes it; "fp32" for a value out of range. */
const char *dlh_spec_precision_name(enum dlh_precision p);

int dlh_spec_parse(const char *text, size_t len, struct dlh_spec *s,
		   char *err, size_t errlen);

/* A duration as the spec writes one ("90s", "15m", "2h", "30d", "1:30:00";
 * "0" = none), for options outside a spec. Returns 0 with *seconds, or -1
 * with msg saying why. */
int dlh_spec_duration(const char *v, long *seconds, char *msg, size_t n);

/* A size as [resources] memory writes one ("512M", "4G"; "0" = none).
 * Returns 0 with *bytes, or -1 with msg saying why. */
int dlh_spec_size(const char *v, long long *bytes, char *msg, size_t n);

/* Flags of dlh_spec_parse_flags. */
#define DLH_SPEC_STORED 0x1  /* a spec accepted earlier: skip the data-file checks */
#define DLH_SPEC_USER 0x2    /* from an ordinary user (not root, not the mounting user):
				[job] priority may only lower the default, as Slurm's nice */

/* dlh_spec_parse with flags; DLH_SPEC_STORED reloads a job whose data
 * files may have gone since it ran. */
int dlh_spec_parse_flags(const char *text, size_t len, struct dlh_spec *s,
			 char *err, size_t errlen, unsigned flags);

/* Writes s as normalized INI text (every key, defaults included) into buf.
 * Parsing that text gives back an equal spec. Returns the length written
 * (without the NUL), or -ENOSPC when len is too small. */
int dlh_spec_format(const struct dlh_spec *s, char *buf, size_t len);

/* Appends the environment entry v ("NAME=VALUE") to list ("NAME=VALUE\n"
 * per entry, at most cap bytes in all, DLH_ENV_ENTRIES_MAX entries); ""
 * adds none. NAME is letters, digits and _ (not a digit first), given once,
 * not one dlhfs or Open MPI sets for every rank; VALUE any text without
 * control characters. Returns 0, or -1 with why in msg (list unchanged). */
int dlh_env_add(char *list, size_t cap, const char *v, char *msg, size_t n);

/* Whether list ("NAME=VALUE\n" entries) has an entry of entry's NAME
 * (entry: "NAME=VALUE", its end or a newline ending it). */
int dlh_env_names(const char *list, const char *entry);

#endif
