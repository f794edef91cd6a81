/* calib.h - what this machine's devices measure: GEMM throughput, memory
 * bandwidth, allreduce latency and bandwidth (alpha-beta), measured by
 * microbenchmarks on first mount and cached in the state dir with the date
 *
 * Contract between the engine (caller), fs/ (pool/ctl recalibrate, the
 * pool/calibration file) and the estimator. */
#ifndef DLH_CALIB_H
#define DLH_CALIB_H

#include <stdatomic.h>
#include <stddef.h>

#include "engine/run/backend.h"
#include "engine/util/util.h"

#define DLH_CALIB_DEVS 8          /* most device types calibrated */
#define DLH_CALIB_TYPE_NAME 32    /* bytes of a type name, NUL included */
#define DLH_CALIB_FILE "calibration"   /* STATE/calibration */

/* GEMM shapes calibrated: every m, n, k in DLH_CALIB_GEMM_DIMS (a log4
 * grid); the estimator interpolates the throughput of other shapes in log
 * space. A CPU's grid is its first DLH_CALIB_CPU_GEMM_N values (from the
 * MLP's smallest layers to its widest); a GPU's all of them, to the
 * convolutions' products, whose N is the batch's rows times the image's
 * pixels (100352 for the CNN's first at batch 128): a GPU's rate there is
 * not its rate at 2048, where such a product is a small one. */
#define DLH_CALIB_GEMM_N 8
#define DLH_CALIB_GEMM_DIMS { 8, 32, 128, 512, 2048, 8192, 32768, 131072 }
#define DLH_CALIB_CPU_GEMM_N 5
#define DLH_CALIB_GEMM_TR 2         /* transposed forms with a grid of their own */
#define DLH_CALIB_GEMM_TR_NAMES { "nt", "tn" }   /* cache keys TYPE.gemmnt_MxN... */

/* Copy bandwidth is measured over these working sets (bytes read plus
 * written), from inside L2 to well past the last-level cache. */
#define DLH_CALIB_BW_N 5
#define DLH_CALIB_BW_SIZES { 64L << 10, 512L << 10, 4L << 20, 32L << 20, \
			     256L << 20 }

/* Optimizer updates and the shared-memory gradient sum are timed at these
 * model sizes (parameters); the estimator interpolates linearly between
 * them and extends the end segments. */
#define DLH_CALIB_OPT_N 3
#define DLH_CALIB_OPT_SIZES { 1L << 16, 1L << 20, 1L << 23 }

/* One device type's measured speeds (a "cpu" device is one core). The
 * estimator owns which shapes and terms are measured: fields may grow. */
struct dlh_calib_dev {
	char type[DLH_CALIB_TYPE_NAME];   /* "cpu", or a GPU model */
	double gemm_flops;                /* sustained sgemm FLOP/s, large shapes */
	double mem_bw;                    /* bytes/s one device streams */
	double mem_bw_all;                /* bytes/s each device streams while all do */
	double bw[DLH_CALIB_BW_N];        /* bytes/s of a copy of each working set
					     (0: not measured; mem_bw serves) */
	double gemm_all;                  /* GEMM speed with every device busy, as a
					     fraction of gemm_flops' (shared caches) */
	double gemm_nt, gemm_tn, gemm_tt; /* speed of sgemm with B, A, both transposed,
					     as a fraction of the untransposed (0: 1) */
	double sgd_s[DLH_CALIB_OPT_N];    /* seconds of one SGD-momentum update of
					     each size (0: not measured) */
	double adam_s[DLH_CALIB_OPT_N];   /* and of one Adam update */
	double relu_bwd_s;                /* seconds per element of dlh-train's ReLU
					     backward (it branches on each sign: no
					     memory speed; 0: not measured) */
	double dropout_s;                 /* and of a dropout pass (a hash per element) */
	double gather_bw;                 /* bytes/s (read + written) of the trainer's
					     gather of a batch's random rows from a
					     shard past L2 (0: the copy bandwidth) */
	int grid;                         /* 1: gemm[][][] was measured */
	int grid_n;                       /* the grids' first grid_n dims were measured
					     (DLH_CALIB_CPU_GEMM_N on a CPU, all on a GPU;
					     0: all, dlh_calib_grid_n) */
	float gemm[DLH_CALIB_GEMM_N][DLH_CALIB_GEMM_N][DLH_CALIB_GEMM_N];
					  /* sgemm FLOP/s at [m][n][k] of the grid */
	int grid_tr[DLH_CALIB_GEMM_TR];   /* 1: gemm_tr[t] was measured */
	int grid_tf32;                    /* 1: gemm_tf32 was measured (GPUs) */
	/* the untransposed form with TF32 math (the tensor cores): the
	 * trainer's tf32 and bf16 precisions (TYPE.gemmtf32_MxN) */
	float gemm_tf32[DLH_CALIB_GEMM_N][DLH_CALIB_GEMM_N][DLH_CALIB_GEMM_N];
	float gemm_tr[DLH_CALIB_GEMM_TR][DLH_CALIB_GEMM_N][DLH_CALIB_GEMM_N][DLH_CALIB_GEMM_N];
					  /* the same with B transposed (t = 0, "nt":
					     dense forward, conv dW) and with A (t = 1,
					     "tn": dense dW, conv dX): how fast a form
					     runs depends on the shape, the skinny
					     batch-sized sides most of all */
	/* A GPU type (dlh-calib --phase gpu, through the trainer's CUDA code;
	 * all 0 for a CPU type). Its GEMM grids are cuBLAS's, called back to
	 * back (forms nn, nt, tn), bw[] an elementwise kernel's (launch
	 * included), mem_bw the largest of them. */
	double gpu;                       /* 1: measured on a GPU */
	double kernel_s;                  /* one kernel launch, back to back (host side) */
	double node_s;                    /* an empty kernel's node in a replayed CUDA graph
					     (0: measured before graphs were; measured again) */
	double direct_s;                  /* seconds per output and tap of a conv's direct
					     product (engine/train/gpu.h's
					     dlt_gpu_conv_direct) with its bias, ReLU and
					     pool, a node of a graph (0: measured before it
					     was; priced at gemm_flops) */
	double direct_dw_s;               /* seconds per pooled output and tap (and bias)
					     of its direct weight gradient
					     (dlt_gpu_conv_dw_direct), likewise */
	double sync_s;                    /* one cudaStreamSynchronize after a kernel */
	double h2d_s;                     /* a small host-to-device copy (pageable) */
	double h2d_bw;                    /* bytes/s of a large one */
	double ctx_s;                     /* making the CUDA context (a rank's first call) */
	double blas_s;                    /* cublasCreate and the first sgemm */
	double nccl_s;                    /* making a rank's NCCL communicator */
	double ctx_bytes;                 /* device memory of the context */
	double blas_bytes;                /* of the cuBLAS handle (workspace, kernels) */
	double nccl_bytes;                /* of the NCCL communicator */
	double total_bytes;               /* the device's memory */
	double nccl_alpha, nccl_beta;     /* ncclAllReduce over nccl_gpus of them: seconds =
					     nccl_alpha + nccl_beta bytes (0: not measured) */
	double nccl_gpus;                 /* GPUs it was measured over (0: fewer than 2) */
	int peak;                         /* 1: not measured: the pool file's peak figures
					     stand in (choose.c; never in the cache) */
};

/* Everything measured, and when. */
struct dlh_calib {
	double when;                      /* epoch seconds of the measurement; 0 = none */
	int ndev;
	struct dlh_calib_dev dev[DLH_CALIB_DEVS];
	double ar_alpha;                  /* allreduce latency, seconds */
	double ar_beta;                   /* allreduce seconds per byte */
	double sync_s;                    /* one barrier of the node's ranks, seconds */
	double net_alpha, net_beta;       /* allreduce between two nodes (one rank each):
					     latency and seconds per byte on the slowest
					     link measured (0: none measured) */
	double launch_s;                  /* launcher start to MPI_Init returned, 1 rank */
	double launch_rank_s;             /* and per rank more */
	double finalize_s;                /* MPI_Finalize to the launcher's exit */
	double decode_bw;                 /* IDX bytes/s the trainer's loader decodes
					     (gzip, to floats) */
	double init_rate;                 /* parameters/s the trainer initialises */
	double write_s;                   /* an atomic small-file write (fsync, rename) */
	double write_bw;                  /* bytes/s of a large atomic write */
	double base_rss;                  /* bytes a rank holds after MPI_Init */
	double metrics_s;                 /* rank 0's metrics.csv line after each step
					     (the trainer's own append; 0: none) */
	double shm_s[DLH_CALIB_OPT_N];    /* seconds of dlh-train's shared-memory step
					     (barriers, gradient sum, SGD update of its
					     slice) of each size on shm_ranks ranks */
	double shm_ranks;                 /* ranks shm_s was measured on (0: none) */
	double fence_a_s, fence_b;        /* a rank's wait at a shared-memory fence
					     after the same work as the others' of
					     t seconds: fence_a_s + fence_b t (the
					     ranks' jitter; the slowest sets the pace) */
};

/* Correction factors the history refits (identity: all 1). */
#define DLH_CORR_DEVICE 64         /* bytes of a device key ("cpu", "A100+H100") */
#define DLH_CORR_DEVICES 8         /* device keys with factors of their own, at most */
struct dlh_correction {
	double compute, comm, startup;    /* multiply those terms of an estimate */
	int runs;                         /* history entries they were fitted on */
	int ndevices;                     /* device keys fitted on their own runs */
	struct dlh_correction_device {
		char device[DLH_CORR_DEVICE];   /* the estimate's device key */
		double compute, comm, startup;
		int runs;
	} device[DLH_CORR_DEVICES];       /* the keys with the most runs first */
};

/* The GPUs of one type on this node, as the pool numbers them (in type
 * order): CUDA devices first..first+count-1. */
struct dlh_calib_gpu {
	char type[DLH_CALIB_TYPE_NAME];   /* the pool's type name */
	int first;                        /* its first device's ordinal */
	int count;                        /* its devices here */
};

/* How to measure. */
struct dlh_calib_opts {
	const struct dlh_backend *backend; /* how the program's ranks are launched */
	const char *program;              /* absolute path of the microbenchmark program */
	int cpus;                         /* CPU slots (ranks for the allreduce test) */
	const char *dir;                  /* where to time atomic writes and keep the
					     output (the state dir); NULL = /tmp */
	const char *images, *labels;      /* an IDX pair to time decoding (the default
					     data set); NULL = a synthesized pair */
	const struct dlh_launch_host *hosts;   /* dlh_calib_link: this node and the other */
	int nhosts;
	const char *agent;                /* how the other is reached (NULL = ssh) */
	const atomic_int *cancel;         /* when it becomes nonzero, the run under way is
					     killed and the measurement ends (-ECANCELED);
					     NULL = never */
	const struct dlh_calib_gpu *gpus; /* this node's GPU types, each measured on its
					     first device (dlh-calib --phase gpu) */
	int ngpus;
};

/* Runs the microbenchmarks (blocking; seconds, not minutes). Returns 0, or
 * -errno with err naming what failed. */
int dlh_calib_measure(const struct dlh_calib_opts *o, struct dlh_calib *c,
		      char *err, size_t errlen);

/* Runs dlh-calib --phase gpu for each of o->gpus (blocking; seconds each),
 * replacing that type's figures in c (the CPU's and the others' stay;
 * dlh_calib_measure times the CPU alone). Returns 0, or -errno with err
 * naming what failed (the types measured before it are in c). */
int dlh_calib_measure_gpus(const struct dlh_calib_opts *o, struct dlh_calib *c,
			   char *err, size_t errlen);

/* Times the allreduce between this node and another (o->hosts: one rank
 * on each, reached through o->agent) into *alpha (seconds) and *beta
 * (seconds per byte). Blocks for seconds. Returns 0, or -errno with err. */
int dlh_calib_link(const struct dlh_calib_opts *o, double *alpha, double *beta,
		   char *err, size_t errlen);

/* Loads STATE/calibration. Returns 0, -ENOENT (never measured), or -EINVAL
 * with err naming the bad line. */
int dlh_calib_load(const char *state_dir, struct dlh_calib *c, char *err, size_t errlen);

/* Parses cache text into c (which the caller zeroed; keys add to it).
 * Lines starting with # are comments. Returns 0, or -EINVAL with err
 * naming the bad line ("calibration:LINE: ..."). */
int dlh_calib_parse(const char *text, struct dlh_calib *c, char *err, size_t errlen);

/* Writes STATE/calibration atomically. Returns 0, or -errno. */
int dlh_calib_save(const char *state_dir, const struct dlh_calib *c);

/* The dims of d's GEMM grids that were measured: the first grid_n of
 * DLH_CALIB_GEMM_DIMS (all of them where grid_n is 0). */
int dlh_calib_grid_n(const struct dlh_calib_dev *d);

/* Appends the text of the cache (and of /dlh/pool/calibration): key=value
 * lines, the date first. Returns 0, or -ENOMEM. */
int dlh_calib_format(const struct dlh_calib *c, struct dlh_buf *out);

/* The device of type name, or NULL when it was not calibrated. */
const struct dlh_calib_dev *dlh_calib_dev(const struct dlh_calib *c, const char *type);

#endif
