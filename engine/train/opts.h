/* opts.h - the dlh-train command line */
#ifndef DLT_OPTS_H
#define DLT_OPTS_H

#include <stddef.h>
#include <stdint.h>

#include "engine/train/gpu.h"
#include "engine/train/net.h"
#include "engine/train/plan.h"

#define DLT_MAX_EPOCHS 100000         /* most --epochs */
#define DLT_MAX_BATCH 1048576         /* largest --batch */
#define DLT_MAX_LR 100.0              /* largest --lr */
#define DLT_MAX_BUCKET_MB 1024.0      /* largest --bucket-mb */
#define DLT_MAX_IMAGE_SIZE 4096       /* largest --image-size */
#define DLT_MAX_CPU 65535             /* largest CPU number in --cpus */
#define DLT_MAX_GPU 1023              /* largest GPU number in --gpus */
#define DLT_REBALANCE_MIN 10          /* fewest steps between re-splits (> the prefetch ring) */
#define DLT_REBALANCE_MAX 1000000     /* most */

enum dlt_model_kind { DLT_MODEL_MLP = 0, DLT_MODEL_CNN = 1 };
enum dlt_format { DLT_FORMAT_IDX = 0, DLT_FORMAT_CSV = 1 };
/* How the ranks sum gradients: shared memory when they are all on one
 * node (auto), or MPI allreduce in buckets (mpi), or insist on shm. */
enum dlt_allreduce { DLT_ALLREDUCE_AUTO = 0, DLT_ALLREDUCE_MPI = 1, DLT_ALLREDUCE_SHM = 2 };
enum dlt_device { DLT_DEVICE_CPU = 0, DLT_DEVICE_GPU = 1 };

/* The parsed command line. Strings point into argv. */
struct dlt_opts {
	const char *job_dir;                   /* --job-dir, created if missing */
	const char *train_images;              /* --train-images, IDX3 (.gz or plain) */
	const char *train_labels;              /* --train-labels, IDX1 (idx format only) */
	const char *test_images;               /* --test-images */
	const char *test_labels;               /* --test-labels (idx format only) */
	int hidden[DLT_NET_MAX_DENSE];         /* --layers, hidden widths (mlp) */
	int nhidden;                           /* entries of hidden used, >= 1 for mlp */
	int model;                             /* --model, enum dlt_model_kind, default mlp */
	int conv_filters[DLT_NET_MAX_CONV];    /* --conv F:K,..., default 32:5,64:5 */
	int conv_kernel[DLT_NET_MAX_CONV];     /* kernel of each conv */
	int nconv;                             /* conv layers (cnn) */
	int pool;                              /* --pool, default 2, 1 = none */
	int dense[DLT_NET_MAX_DENSE];          /* --dense, hidden widths after the convs, default 1024 */
	int ndense;                            /* entries of dense used */
	double dropout;                        /* --dropout, [0, 1), default 0 */
	int optimizer;                         /* --optimizer, enum dlt_optim_kind, default sgd */
	double beta1, beta2, eps;              /* --beta1 0.9 --beta2 0.999 --eps 1e-8 */
	int schedule;                          /* --schedule, enum dlt_sched_kind, default constant */
	double gamma;                          /* --gamma, default 0.1 */
	long step_epochs;                      /* --step-epochs, default 1 */
	long warmup_steps;                     /* --warmup-steps, default 0 */
	double bucket_mb;                      /* --bucket-mb, default 1, 0 = one blocking allreduce */
	int allreduce;                         /* --allreduce, enum dlt_allreduce, default auto */
	int format;                            /* --format, enum dlt_format, default idx */
	int image_size;                        /* --image-size, side of CSV images, default 28 */
	int epochs;                            /* --epochs, 1..DLT_MAX_EPOCHS */
	int batch;                             /* --batch, global, 1..DLT_MAX_BATCH */
	int rank_batches[DLT_MAX_RANKS];       /* --rank-batches, per-rank batches */
	int nrank_batches;                     /* entries given, 0 = split evenly */
	int rebalance;                         /* --rebalance STEPS between re-splits, 0 = none */
	int cpus[DLT_MAX_RANKS];               /* --cpus, rank r's CPU on its node */
	int ncpus;                             /* entries given, 0 = not pinned */
	int gpus[DLT_MAX_RANKS];               /* --gpus, rank r's GPU on its node */
	int ngpus;                             /* entries given, 0 = by node rank */
	double lr;                             /* --lr, (0, DLT_MAX_LR]; 0 with lr_auto */
	int lr_auto;                           /* --lr auto: the range test picks it */
	int lr_find_steps;                     /* --lr-find-steps, default DLT_LRFIND_STEPS */
	double momentum;                       /* --momentum, [0, 1), default 0 */
	double weight_decay;                   /* --weight-decay, [0, 1), default 0 */
	uint64_t seed;                         /* --seed, default 0 */
	long checkpoint_every;                 /* --checkpoint-every steps, 0 = final only */
	long train_limit;                      /* --train-limit, 0 = all */
	long test_limit;                       /* --test-limit, 0 = all */
	int device;                            /* --device, enum dlt_device, default cpu */
	int precision;                         /* --precision, enum dlt_precision, default fp32 */
	int cuda_graph;                        /* --cuda-graph on (1, the default) | off (0) */
	int device_data;                       /* --device-data on (1, the default) | off (0) */
	int step_ahead;                        /* --step-ahead on (1, the default) | off (0) */
	int gpu_profile;                       /* --gpu-profile on (1) | off (0, the default) */
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
 * Returns the count (1..DLT_NET_MAX_DENSE), or -EINVAL. */
int dlt_opts_layers(const char *s, int *hidden);

/* Parses a comma list of FILTERS:KERNEL pairs ("32:5,64:5"). Returns the
 * count (1..DLT_NET_MAX_CONV), or -EINVAL (kernels must be odd). */
int dlt_opts_conv(const char *s, int *filters, int *kernel);

#endif
