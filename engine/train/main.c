/* main.c - dlh-train: the MPI driver (argv, data shards, train loop, job files) */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/contract/contract.h"
#include "engine/run/join.h"
#include "engine/train/beat.h"
#include "engine/train/bind.h"
#include "engine/train/ckpt.h"
#include "engine/train/csv.h"
#include "engine/train/ctl.h"
#include "engine/train/files.h"
#include "engine/train/gpu.h"
#include "engine/train/idx.h"
#include "engine/train/lrfind.h"
#include "engine/train/metrics.h"
#include "engine/train/net.h"
#include "engine/train/optim.h"
#include "engine/train/opts.h"
#include "engine/train/plan.h"
#include "engine/train/prefetch.h"
#include "engine/train/rng.h"
#include "engine/train/shm.h"

#define DLT_EXIT_USAGE 2          /* exit status for a bad command line */
#define DLT_EVAL_ROWS 512         /* fewest rows per evaluation batch */
#define DLT_RATE_WINDOW 20        /* train rows in the samples/s window (wall clock) */
#define DLT_CKPT_DIR DLH_DIR_CHECKPOINTS   /* engine/contract/contract.h */
#define DLT_CNN_EVAL_ROWS 64      /* fewest rows per evaluation batch of a conv model */
#define DLT_MAX_BUCKETS DLT_NET_MAX_LAYERS   /* one bucket per layer at most */
#define DLT_MB (1024.0 * 1024.0)  /* bytes in --bucket-mb's unit */

/* A gradient bucket: floats [lo, hi) of the gradient array, allreduced as
 * soon as backward has finished layer trigger (its lowest layer). */
struct bucket {
	size_t lo, hi;                    /* float range in grads */
	int trigger;                      /* layer whose completion starts it */
};

enum resume { RESUME_NONE, RESUME_STEP, RESUME_DONE };

/* Everything one rank holds. */
struct run {
	int rank, ranks;                  /* this rank, MPI_COMM_WORLD size */
	struct dlt_opts o;                /* command line */
	struct dlt_plan plan;             /* shards, batches, steps */
	struct dlt_dataset train, test;   /* this rank's shards */
	struct dlt_net net;               /* model layout and workspace */
	struct dlt_optim optim;           /* optimizer constants */
	int nstate;                       /* optimizer state arrays */
	struct dlt_sched sched;           /* learning-rate schedule */
	struct bucket bucket[DLT_MAX_BUCKETS];    /* in launch order: last layers first */
	int nbuckets;                     /* 0 = one blocking allreduce after backward */
	MPI_Request req[DLT_MAX_BUCKETS]; /* outstanding Iallreduce of each bucket */
	int launched;                     /* buckets started in this step */
	double t_comm_wait;               /* seconds waiting for allreduce after backward */
	double t_compute;                 /* seconds of training forward + backward */
	int gpu_rows;                     /* 1: the GPU holds the training rows (--device-data) */
	long queued;                      /* --step-ahead: the step queued on the GPU before
					     the one before it was waited for (0: none) */
	enum dlt_ctl_request deferred;    /* a request the ranks agreed while the next step
					     was queued: taken after that step */
	double t_opt;                     /* seconds in the optimizer */
	float *params;                    /* nparams (in shm when shm_on) */
	float *mom;                       /* nstate x nparams optimizer state (idem) */
	float *grads;                     /* nparams + DLT_GRAD_EXTRA: loss sum, correct
					     count, requests (shm.h) (idem) */
	enum dlt_ctl_request agreed;      /* the ranks' requests summed with the last step */
	int shm_on;                       /* 1 = gradients summed through shm */
	int multi;                        /* 1 = the ranks span several nodes */
	struct dlt_shm shm;               /* the node's shared model, when shm_on */
	struct dlt_prefetch pf;           /* batches, gathered by a helper thread */
	int split[DLT_MAX_RANKS];         /* --rebalance: the ranks' batches as last re-split
					     (the plan's until then) */
	double rows_done;                 /* rows this rank trained on in this process */
	double mark_rows, mark_s;         /* rows_done and t_compute at the last re-split */
	long mark_step;                   /* the step after which they were taken */
	char ckdir[DLT_PATH_MAX];         /* JOB/checkpoints */
	struct dlt_rows rows;             /* metrics.csv's rows not yet written (rank 0;
					     rows.fd -1 on the others) */
	struct dlt_beat beat;             /* this rank's heartbeat record */
	double t_origin;                  /* monotonic time of the run's first start */
	struct dlt_ckpt_meta st;          /* progress, as a checkpoint records it */
	int suspended;                    /* stopped at a checkpoint on request (SIGUSR2) */
	struct dlt_gpu *gpu;              /* --device gpu: the CUDA backend, else NULL */
};

static int g_rank;                    /* for die() */
static struct dlt_rows *g_rows;       /* rank 0's rows, written by die() before it aborts */

/* Returns the monotonic clock in seconds. */
static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Prints `dlh-train: rank R: MESSAGE` on stderr and aborts every rank. */
static _Noreturn void die(const char *fmt, ...)
{
	char msg[DLT_ERR_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	fprintf(stderr, "dlh-train: rank %d: %s\n", g_rank, msg);
	fflush(stderr);
	if (g_rows)   /* the rows up to the failure (a failed write keeps failing) */
		dlt_rows_flush(g_rows, 0.0);
	MPI_Abort(MPI_COMM_WORLD, 1);
	exit(1);
}

/* Prints one human log line on stdout (rank 0 only). */
static void logline(const struct run *R, const char *fmt, ...)
{
	va_list ap;

	if (R->rank != 0)
		return;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

/* Writes n batches as "b0,b1,..." into buf (cut short when it is full). */
static void batch_list(const int *b, int n, char *buf, size_t len)
{
	size_t k = 0;

	buf[0] = '\0';
	for (int r = 0; r < n && k + 16 < len; r++)
		k += (size_t)snprintf(buf + k, len - k, "%s%d", r ? "," : "", b[r]);
}

/* Returns n bytes from malloc; dies when there are none. */
static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		die("cannot allocate %zu bytes", n);
	return p;
}

/* Checks the headers of an images/labels pair (dies on a bad one) and
 * returns how many items to use: limit, or all when limit is 0 or larger;
 * sets the image size. */
static long probe_pair(const char *images, const char *labels, long limit, int *dim,
		       int *rows, int *cols)
{
	struct dlt_idx_header hi, hl;
	char err[DLT_ERR_MAX];

	if (dlt_idx_probe(images, DLT_IDX_MAGIC_IMAGES, &hi, err, sizeof err) < 0 ||
	    dlt_idx_probe(labels, DLT_IDX_MAGIC_LABELS, &hl, err, sizeof err) < 0)
		die("%s", err);
	if (hi.count != hl.count)
		die("\"%s\" has %ld images but \"%s\" has %ld labels",
		    images, hi.count, labels, hl.count);
	*dim = hi.rows * hi.cols;
	*rows = hi.rows;
	*cols = hi.cols;
	return limit > 0 && limit < hi.count ? limit : hi.count;
}

/* Counts the data lines of a CSV file (dies on a bad one) and returns how
 * many to use, as probe_pair; sets *ymax to the largest label of the file. */
static long probe_csv(const char *path, long limit, int *ymax)
{
	char err[DLT_ERR_MAX];
	long n;

	if (dlt_csv_probe(path, &n, ymax, err, sizeof err) < 0)
		die("%s", err);
	return limit > 0 && limit < n ? limit : n;
}

/* Returns the largest label among the first n of a labels file; dies when
 * it cannot be read. */
static int max_label(const char *labels, long n)
{
	char err[DLT_ERR_MAX];
	uint8_t *y;
	int mx = 0;

	if (dlt_idx_load_labels(labels, 0, n, &y, err, sizeof err) < 0)
		die("%s", err);
	for (long i = 0; i < n; i++)
		if (y[i] > mx)
			mx = y[i];
	free(y);
	return mx;
}

/* Splits the gradients (and the extra floats after them) into buckets of
 * about --bucket-mb, last layer first, each ending on a layer boundary;
 * none (one blocking allreduce) for --bucket-mb 0 or a single bucket. */
static void make_buckets(struct run *R)
{
	const struct dlt_net *n = &R->net;
	const double limit = R->o.bucket_mb * DLT_MB / sizeof(float);
	/* on GPUs the loss and correct count follow the gradients; requests
	 * are agreed apart (dlt_ctl_poll) */
	size_t hi = n->nparams + (R->o.device == DLT_DEVICE_GPU ? 2 : DLT_GRAD_EXTRA);
	int last = -1;

	R->nbuckets = 0;
	if (R->o.bucket_mb <= 0.0)
		return;
	for (int i = n->nlayers - 1; i >= 0; i--) {
		const struct dlt_layer *l = &n->layer[i];

		if (!l->nparams)
			continue;
		last = i;
		if ((double)(hi - l->off) >= limit || l->off == 0) {
			R->bucket[R->nbuckets++] = (struct bucket){ l->off, hi, i };
			hi = l->off;
		}
	}
	if (hi > 0 && last >= 0)   /* cannot happen: the first layer has off 0 */
		R->bucket[R->nbuckets++] = (struct bucket){ 0, hi, last };
	/* one bucket starts after the whole backward: nothing to overlap, and a
	 * blocking MPI_Allreduce is cheaper than MPI_Iallreduce + wait */
	if (R->nbuckets == 1)
		R->nbuckets = 0;
}

/* Fills spec with the model of the command line for rows x cols images. */
static void model_spec(const struct dlt_opts *o, int rows, int cols, int classes,
		       struct dlt_net_spec *spec)
{
	memset(spec, 0, sizeof *spec);
	spec->in = (struct dlt_shape){ 1, rows, cols };
	spec->classes = classes;
	spec->dropout = (float)o->dropout;
	spec->pool = o->pool;
	if (o->model == DLT_MODEL_CNN) {
		spec->nconv = o->nconv;
		memcpy(spec->filters, o->conv_filters, sizeof spec->filters);
		memcpy(spec->kernel, o->conv_kernel, sizeof spec->kernel);
		spec->ndense = o->ndense;
		memcpy(spec->dense, o->dense, sizeof spec->dense);
	} else {
		spec->ndense = o->nhidden;
		memcpy(spec->dense, o->hidden, (size_t)o->nhidden * sizeof *o->hidden);
	}
}

/* Loads this rank's shards, lays out the model, allocates every buffer
 * (the only allocations of the run) and initialises the weights; dies on
 * any error. */
static void setup(struct run *R)
{
	const struct dlt_opts *o = &R->o;
	char err[DLT_ERR_MAX];
	int dim, tdim, classes, rows, ih, iw, th, tw;
	long ntrain, ntest, lo, hi;
	struct dlt_net_spec spec;

	if (o->format == DLT_FORMAT_CSV) {
		int ytrain, ytest;

		ntrain = probe_csv(o->train_images, o->train_limit, &ytrain);
		ntest = probe_csv(o->test_images, o->test_limit, &ytest);
		ih = iw = o->image_size;
		dim = ih * iw;
		classes = 1 + (ytest > ytrain ? ytest : ytrain);
	} else {
		ntrain = probe_pair(o->train_images, o->train_labels, o->train_limit, &dim, &ih, &iw);
		ntest = probe_pair(o->test_images, o->test_labels, o->test_limit, &tdim, &th, &tw);
		if (dim != tdim || ih != th)
			die("training images are %dx%d, test images %dx%d", ih, iw, th, tw);
		classes = max_label(o->train_labels, ntrain);
		tdim = max_label(o->test_labels, ntest);
		classes = 1 + (tdim > classes ? tdim : classes);
	}
	if (o->nrank_batches && o->nrank_batches != R->ranks)
		die("--rank-batches gives %d batches for %d ranks", o->nrank_batches, R->ranks);
	if (dlt_plan_make(&R->plan, ntrain, ntest, R->ranks, o->batch, o->epochs,
			  o->nrank_batches ? o->rank_batches : NULL, err, sizeof err) < 0)
		die("%s", err);

	dlt_plan_range(&R->plan, ntrain, R->rank, &lo, &hi);
	if (o->rebalance) {   /* any rank may be given any rows */
		lo = 0;
		hi = ntrain;
		if (dlt_plan_pool(&R->plan, err, sizeof err) < 0)
			die("%s", err);
	}
	memcpy(R->split, R->plan.batch, (size_t)R->ranks * sizeof R->split[0]);
	if ((o->format == DLT_FORMAT_CSV ?
	     dlt_csv_load(&R->train, o->train_images, dim, lo, hi, err, sizeof err) :
	     dlt_dataset_load(&R->train, o->train_images, o->train_labels, lo, hi,
			      err, sizeof err)) < 0)
		die("%s", err);
	dlt_plan_range(&R->plan, ntest, R->rank, &lo, &hi);
	if ((o->format == DLT_FORMAT_CSV ?
	     dlt_csv_load(&R->test, o->test_images, dim, lo, hi, err, sizeof err) :
	     dlt_dataset_load(&R->test, o->test_images, o->test_labels, lo, hi,
			      err, sizeof err)) < 0)
		die("%s", err);

	rows = o->rebalance ? dlt_plan_cap(&R->plan, R->rank) : R->plan.batch[R->rank];
	if (o->model == DLT_MODEL_CNN ? rows < DLT_CNN_EVAL_ROWS : rows < DLT_EVAL_ROWS)
		rows = o->model == DLT_MODEL_CNN ? DLT_CNN_EVAL_ROWS : DLT_EVAL_ROWS;
	model_spec(o, ih, iw, classes, &spec);
	if (dlt_net_create(&R->net, &spec, rows, o->seed, R->rank, err, sizeof err) < 0)
		die("model: %s", err);
	make_buckets(R);

	size_t np = R->net.nparams;

	R->optim = (struct dlt_optim){
		.kind = (enum dlt_optim_kind)o->optimizer, .momentum = (float)o->momentum,
		.weight_decay = (float)o->weight_decay, .beta1 = (float)o->beta1,
		.beta2 = (float)o->beta2, .eps = (float)o->eps,
	};
	R->nstate = dlt_optim_nstate(R->optim.kind);
	R->sched = (struct dlt_sched){
		.kind = (enum dlt_sched_kind)o->schedule, .lr = o->lr, .gamma = o->gamma,
		.step_epochs = o->step_epochs, .warmup_steps = o->warmup_steps,
		.steps_per_epoch = R->plan.steps_per_epoch, .total_steps = R->plan.total_steps,
	};
	/* collective: every rank has the same --allreduce; the node's ranks
	 * share memory, and with several nodes their leaders sum across them */
	MPI_Comm node;
	int nsize, most = 0;
	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, R->rank, MPI_INFO_NULL, &node);
	MPI_Comm_size(node, &nsize);
	MPI_Allreduce(&nsize, &most, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	R->multi = nsize < R->ranks;   /* the same on every rank: one node has them all, or none */
	R->shm_on = o->device != DLT_DEVICE_GPU && o->allreduce != DLT_ALLREDUCE_MPI &&
		    R->ranks > 1 && most <= DLT_SHM_MAX_RANKS;
	if (o->allreduce == DLT_ALLREDUCE_SHM && o->device == DLT_DEVICE_GPU)
		die("--allreduce shm: ranks on GPUs sum gradients with ncclAllReduce");
	if (o->allreduce == DLT_ALLREDUCE_SHM && !R->shm_on && R->ranks > 1)
		die("--allreduce shm: more than %d ranks on a node", DLT_SHM_MAX_RANKS);
	if (R->shm_on) {
		static int weight[DLT_MAX_RANKS];
		size_t lo[DLT_MAX_BUCKETS], hi[DLT_MAX_BUCKETS];

		/* one node: slices by batch (the plan's ranks are the node's) */
		dlt_shm_update_weights(R->plan.batch, R->ranks, weight);
		if (dlt_shm_create(&R->shm, node, np, R->nstate, R->multi ? NULL : weight,
				   err, sizeof err) < 0)
			die("%s", err);
		for (int b = 0; b < R->nbuckets; b++) {
			lo[b] = R->bucket[b].lo;
			hi[b] = R->bucket[b].hi;
		}
		if (!R->multi)
			R->nbuckets = 0;
		else if (dlt_shm_multi(&R->shm, MPI_COMM_WORLD, lo, hi, R->nbuckets, err, sizeof err) < 0)
			die("%s", err);
		R->params = R->shm.params;
		R->mom = R->shm.state;
		R->grads = R->shm.slot[R->shm.rank];
		if (R->shm.rank == 0)   /* each node's one copy */
			dlt_net_init_params(&R->net, R->params, o->seed);
		dlt_shm_fence(&R->shm);
		return;
	}
	MPI_Comm_free(&node);
	R->params = xmalloc(np * sizeof(float));
	R->mom = xmalloc((size_t)R->nstate * np * sizeof(float));
	R->grads = xmalloc((np + DLT_GRAD_EXTRA) * sizeof(float));
	memset(R->mom, 0, (size_t)R->nstate * np * sizeof(float));
	dlt_net_init_params(&R->net, R->params, o->seed);
}

/* Rank 0 looks for checkpoints/latest and loads it; every rank then gets
 * its state. Returns what kind of start this is. */
/* Reads checkpoint name of R->ckdir (its path into path) into R->st,
 * R->params and R->mom; when it is damaged (a checksum, size or header
 * that is wrong), says so and falls back to the previous checkpoint, and
 * so on (name then holds the one read). Dies when none can be read. */
static void read_usable(struct run *R, char *name, size_t namelen, char *path, size_t pathlen)
{
	char err[DLT_ERR_MAX], first[DLT_ERR_MAX] = "", prev[DLT_CKPT_NAME_MAX];
	for (;;) {
		if (dlt_path_join(path, pathlen, R->ckdir, name) < 0)
			die("checkpoint path \"%s/%s\" too long", R->ckdir, name);
		int rc = dlt_ckpt_read(path, &R->st, R->net.nparams, R->nstate, R->params, R->mom,
				       err, sizeof err);
		if (rc == 0)
			return;
		if (!first[0])
			snprintf(first, sizeof first, "%s", err);
		if (rc != -EINVAL ||
		    dlt_ckpt_previous(R->ckdir, name, prev, sizeof prev, err, sizeof err) < 0)
			die("%s", first);
		fprintf(stderr, "dlh-train: rank 0: warning: checkpoint \"%s\" cannot be used (%s); "
			"resuming from the previous one, \"%s\"\n", name, err, prev);
		snprintf(name, namelen, "%s", prev);
	}
}

static enum resume load_latest(struct run *R)
{
	char err[DLT_ERR_MAX], name[DLT_CKPT_NAME_MAX], path[DLT_PATH_MAX];
	int kind = RESUME_NONE;
	size_t np = R->net.nparams;

	if (R->rank == 0) {
		int rc = dlt_ckpt_latest(R->ckdir, name, sizeof name, err, sizeof err);

		if (rc < 0 && rc != -ENOENT)
			die("%s", err);
		if (rc == 0) {
			read_usable(R, name, sizeof name, path, sizeof path);
			if (R->st.optimizer != (uint32_t)R->optim.kind)
				die("\"%s\" holds the state of --optimizer %s, this run has %s",
				    path, dlt_optim_name((enum dlt_optim_kind)R->st.optimizer),
				    dlt_optim_name(R->optim.kind));
			if (R->st.seed != R->o.seed)
				fprintf(stderr, "dlh-train: rank 0: warning: \"%s\" was made with "
					"--seed %" PRIu64 ", this run has %" PRIu64 "\n",
					path, R->st.seed, R->o.seed);
			kind = strcmp(name, DLT_CKPT_FINAL) == 0 ? RESUME_DONE : RESUME_STEP;
			R->st.seed = R->o.seed;   /* later checkpoints record this run's seed */
		}
	}
	MPI_Bcast(&kind, 1, MPI_INT, 0, MPI_COMM_WORLD);
	if (kind == RESUME_NONE)
		return RESUME_NONE;
	MPI_Bcast(&R->st, (int)sizeof R->st, MPI_BYTE, 0, MPI_COMM_WORLD);
	if (R->shm_on) {   /* rank 0 read it into its node's shared copy */
		if (R->multi && R->shm.rank == 0) {   /* and the other nodes' leaders get it */
			MPI_Bcast(R->params, (int)np, MPI_FLOAT, 0, R->shm.leaders);
			for (int k = 0; k < R->nstate; k++)
				MPI_Bcast(R->mom + (size_t)k * np, (int)np, MPI_FLOAT, 0, R->shm.leaders);
		}
		dlt_shm_fence(&R->shm);
		return (enum resume)kind;
	}
	MPI_Bcast(R->params, (int)np, MPI_FLOAT, 0, MPI_COMM_WORLD);
	for (int k = 0; k < R->nstate; k++)
		MPI_Bcast(R->mom + (size_t)k * np, (int)np, MPI_FLOAT, 0, MPI_COMM_WORLD);
	return (enum resume)kind;
}

/* Evaluates the model on every rank's test shard; all ranks get the
 * global mean loss and accuracy. */
static void evaluate(struct run *R, double *loss, double *acc)
{
	const struct dlt_dataset *t = &R->test;
	double loss_sum = 0.0, s[3];
	long correct = 0;

	for (long i = 0; i < t->n; i += R->net.max_batch) {
		long n = t->n - i < R->net.max_batch ? t->n - i : R->net.max_batch;

		const float *x = t->x + (size_t)i * (size_t)t->dim;
		char err[DLT_ERR_MAX];

		if (!R->gpu)
			dlt_net_eval_batch(&R->net, R->params, x, t->y + i, (int)n, &loss_sum, &correct);
		else if (dlt_gpu_eval_batch(R->gpu, x, t->y + i, (int)n, &loss_sum, &correct,
					    err, sizeof err) < 0)
			die("%s", err);
	}
	s[0] = loss_sum;
	s[1] = (double)correct;
	s[2] = (double)t->n;
	MPI_Allreduce(MPI_IN_PLACE, s, 3, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	*loss = s[0] / s[2];
	*acc = s[1] / s[2];
}

/* Dies when rc, the result of holding or writing metrics.csv rows, is an error. */
static void append_check(const struct run *R, int rc)
{
	if (rc < 0)
		die("cannot append to \"%s/%s\": %s", R->o.job_dir, DLH_FILE_METRICS,
		    strerror(-rc));
}

/* Rewrites this rank's record of the job's heartbeat file (beat.h) as
 * `step` steps done: with force, else at most every DLT_BEAT_EVERY seconds.
 * The file is opened on the first call; a rank that cannot write it says so
 * once and trains on (dlhfs then sees no heartbeat of it). */
static void heartbeat(struct run *R, long step, int force)
{
	static int opened;
	char err[DLT_ERR_MAX];
	int rc;

	if (!opened) {
		opened = 1;
		if (dlt_beat_open(&R->beat, R->o.job_dir, R->rank, DLT_BEAT_EVERY,
				  err, sizeof err) < 0)
			fprintf(stderr, "dlh-train: rank %d: warning: %s\n", R->rank, err);
	}
	rc = dlt_beat(&R->beat, step, dlt_beat_now(), force);
	if (rc < 0)
		fprintf(stderr, "dlh-train: rank %d: warning: cannot write its heartbeat: %s\n",
			R->rank, strerror(-rc));
}

/* Rank 0 writes checkpoint name from the current state. */
static void save(struct run *R, const char *name)
{
	char err[DLT_ERR_MAX];

	if (R->rank != 0)
		return;
	/* every row up to this step is on disk before the checkpoint is: a
	 * resume cuts metrics.csv back to the checkpoint's step, never below */
	append_check(R, dlt_rows_flush(&R->rows, now()));
	heartbeat(R, (long)R->st.step, 1);
	R->st.elapsed_s = now() - R->t_origin;
	if (R->gpu && dlt_gpu_download(R->gpu, R->params, R->mom, err, sizeof err) < 0)
		die("%s", err);
	if (dlt_ckpt_save(R->ckdir, name, &R->st, R->params, R->mom, err, sizeof err) < 0)
		die("%s", err);
}

/* Rank 0 writes the result file from the current state. */
static void write_result(struct run *R)
{
	char err[DLT_ERR_MAX];
	struct dlt_result res = {
		.test_accuracy = R->st.test_acc,
		.test_loss = R->st.test_loss,
		.train_loss = R->st.epoch_steps ?
			R->st.epoch_loss_sum / (double)R->st.epoch_steps : NAN,
		.epochs = (int)R->st.epoch,
		.steps = (long)R->st.step,
		.samples_per_s = R->st.train_s > 0 ?
			(double)R->st.step * R->plan.global_batch / R->st.train_s : 0.0,
		.train_time_s = R->st.elapsed_s,
		.model = DLT_CKPT_DIR "/" DLT_CKPT_FINAL,
	};

	if (R->rank == 0 && dlt_result_write(R->o.job_dir, &res, err, sizeof err) < 0)
		die("%s", err);
}

/* Rank 0 opens metrics.csv (cut back to start_step) for its rows and
 * writes run.info. */
static void open_files(struct run *R)
{
	char err[DLT_ERR_MAX], list[DLT_ERR_MAX];
	const struct dlt_plan *p = &R->plan;
	int fd;

	if (R->rank != 0)
		return;
	if (dlt_metrics_open(R->o.job_dir, (long)R->st.step, &fd, err, sizeof err) < 0)
		die("%s", err);
	dlt_rows_init(&R->rows, fd, DLT_ROWS_EVERY, now());
	g_rows = &R->rows;
	char desc[DLT_ERR_MAX];

	dlt_net_describe(&R->net, desc, sizeof desc);
	struct dlt_runinfo ri = {
		.ranks = p->ranks, .batch = p->batch, .train_samples = p->train_n,
		.test_samples = p->test_n, .steps_per_epoch = p->steps_per_epoch,
		.total_steps = p->total_steps, .params = R->net.nparams,
		.start_step = (long)R->st.step, .model = desc,
		.optimizer = dlt_optim_name(R->optim.kind), .buckets = R->nbuckets,
		.allreduce = R->shm_on ? (R->multi ? "shm+leaders" : "shm") : R->ranks > 1 ? "mpi" : "none",
	};
	if (dlt_runinfo_write(R->o.job_dir, &ri, err, sizeof err) < 0)
		die("%s", err);
	batch_list(p->batch, p->ranks, list, sizeof list);
	logline(R, "dlh-train: %d ranks, batch %d (%s per rank), %ld train / %ld test images, "
		"%ld steps/epoch x %d epochs = %ld steps, %zu params, start step %" PRIu64,
		p->ranks, p->global_batch, list, p->train_n, p->test_n,
		p->steps_per_epoch, p->epochs, p->total_steps, R->net.nparams, R->st.step);
	if (R->shm_on && R->multi)
		logline(R, "dlh-train: model %s, optimizer %s, gradients summed in each node's "
			"shared memory, then across the %d nodes by their leaders in %d bucket%s "
			"(--bucket-mb %g) as backward produces them", desc,
			dlt_optim_name(R->optim.kind), R->shm.nodes, R->shm.nb,
			R->shm.nb == 1 ? "" : "s", R->o.bucket_mb);
	else if (R->shm_on)
		logline(R, "dlh-train: model %s, optimizer %s, gradients summed in shared memory "
			"(each rank updates 1/%d of the model)", desc,
			dlt_optim_name(R->optim.kind), R->ranks);
	else
		logline(R, "dlh-train: model %s, optimizer %s, %d gradient bucket%s (--bucket-mb %g)",
			desc, dlt_optim_name(R->optim.kind), R->nbuckets,
			R->nbuckets == 1 ? "" : "s", R->o.bucket_mb);
}

/* Rank 0 holds row r for metrics.csv and, with now_too, writes it and
 * every row held at once; dies when it cannot. */
static void append_row(struct run *R, const struct dlh_metrics_row *r, int now_too)
{
	double t = now();

	append_check(R, dlt_rows_add(&R->rows, r, t));
	if (now_too)
		append_check(R, dlt_rows_flush(&R->rows, t));
}

/* Evaluates at the end of an epoch and records it (the epoch's samples/s
 * by wall clock: ep_time the seconds from the end of the step before its
 * first to the end of its last). */
static void end_epoch(struct run *R, long step, int epoch, double ep_samples, double ep_time)
{
	double loss, acc, t;

	/* an evaluation may be long: the epoch's rows and a fresh heartbeat first */
	if (R->rank == 0)
		append_check(R, dlt_rows_flush(&R->rows, now()));
	heartbeat(R, step, 1);
	evaluate(R, &loss, &acc);
	R->st.test_loss = loss;
	R->st.test_acc = acc;
	R->st.eval_step = (uint64_t)step;
	if (R->rank != 0)
		return;
	t = now() - R->t_origin;
	append_row(R, &(struct dlh_metrics_row){ .kind = DLH_ROW_EVAL, .step = step,
		   .epoch = epoch, .time_s = t, .loss = loss, .accuracy = acc }, 1);
	logline(R, "epoch %d/%d step %ld: train loss %.4f, test loss %.4f, "
		"test accuracy %.4f, %.0f samples/s, elapsed %.1f s",
		epoch, R->plan.epochs, step,
		R->st.epoch_steps ? R->st.epoch_loss_sum / (double)R->st.epoch_steps : NAN,
		loss, acc, ep_time > 0 ? ep_samples / ep_time : 0.0, t);
}

/* samples/s by wall clock over the last DLT_RATE_WINDOW train rows: from
 * the end of the step DLT_RATE_WINDOW rows back (or the loop's start) to
 * the end of this one, everything between included (rows, heartbeats,
 * evaluations, checkpoints), as a clock on the wall sees the run. */
struct rate {
	double t[DLT_RATE_WINDOW + 1];   /* monotonic ends of the last steps, a ring;
					    the loop's start first */
	long n;                          /* times pushed so far, the start included */
};

/* Starts the window at t, the loop's start. */
static void rate_start(struct rate *w, double t)
{
	w->t[0] = t;
	w->n = 1;
}

/* Adds a step that ended at t and trained batch samples. Returns samples/s
 * over the window. */
static double rate_push(struct rate *w, double t, int batch)
{
	long k = w->n <= DLT_RATE_WINDOW ? w->n : DLT_RATE_WINDOW;   /* steps in it */
	double t0 = w->t[(w->n - k) % (DLT_RATE_WINDOW + 1)];

	w->t[w->n++ % (DLT_RATE_WINDOW + 1)] = t;
	return t > t0 ? (double)k * batch / (t - t0) : 0.0;
}

/* Backward hook: starts the allreduce of every bucket whose last layer
 * is l, then lets MPI progress the outstanding ones. */
static void on_layer(void *ctx, int l)
{
	struct run *R = ctx;
	int flag;

	if (R->shm_on) {   /* several nodes: the node's leader sums and starts it */
		while (R->launched < R->nbuckets && R->bucket[R->launched].trigger == l)
			dlt_shm_mark(&R->shm, R->launched++);
		return;
	}
	while (R->launched < R->nbuckets && R->bucket[R->launched].trigger == l) {
		const struct bucket *b = &R->bucket[R->launched];

		MPI_Iallreduce(MPI_IN_PLACE, R->grads + b->lo, (int)(b->hi - b->lo), MPI_FLOAT,
			       MPI_SUM, MPI_COMM_WORLD, &R->req[R->launched]);
		R->launched++;
	}
	if (R->launched)
		MPI_Testall(R->launched, R->req, &flag, MPI_STATUSES_IGNORE);
}

/* --device gpu: puts this rank on a GPU (its rank among the ranks of its
 * node), gives it the gradient buckets (--bucket-mb), joins the NCCL
 * communicator whose id rank 0 makes and broadcasts through MPI, and
 * uploads the parameters and optimizer state (after load_latest, so a
 * resumed run goes on from its checkpoint). Dies on any error, naming it. */
static void gpu_start(struct run *R)
{
	char err[DLT_ERR_MAX], name[DLT_ERR_MAX];
	unsigned char id[DLT_GPU_ID_BYTES];
	MPI_Comm node;
	int local, count;

	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, R->rank, MPI_INFO_NULL, &node);
	MPI_Comm_rank(node, &local);
	MPI_Comm_free(&node);
	if (R->o.ngpus)   /* main set CUDA_VISIBLE_DEVICES: the one GPU this rank sees */
		local = 0;
	count = dlt_gpu_count(err, sizeof err);
	if (count < 0)
		die("--device gpu: %s", err);
	if (local >= count)
		die("--device gpu: node rank %d has no GPU of its own (%d GPUs): one rank per GPU",
		    local, count);
	if (dlt_gpu_create(&R->gpu, &R->net, R->nstate, local, R->o.seed, R->rank,
			   err, sizeof err) < 0 ||
	    dlt_gpu_set_precision(R->gpu, (enum dlt_precision)R->o.precision, err, sizeof err) < 0 ||
	    dlt_gpu_set_graph(R->gpu, R->o.cuda_graph, err, sizeof err) < 0 ||
	    (R->o.gpu_profile && dlt_gpu_set_profile(R->gpu, 1, err, sizeof err) < 0))
		die("--device gpu: %s", err);
	if (R->o.gpu_profile)   /* one graph's events cannot tell two steps in flight apart */
		R->o.step_ahead = 0;
	for (int k = 0; k < R->nbuckets; k++)   /* the same buckets, allreduced by NCCL */
		if (dlt_gpu_add_bucket(R->gpu, R->bucket[k].lo, R->bucket[k].hi, R->bucket[k].trigger,
				       err, sizeof err) < 0)
			die("--device gpu: %s", err);
	if (R->rank == 0 && dlt_gpu_nccl_id(id, err, sizeof err) < 0)
		die("--device gpu: %s", err);
	MPI_Bcast(id, DLT_GPU_ID_BYTES, MPI_BYTE, 0, MPI_COMM_WORLD);
	if (dlt_gpu_nccl_init(R->gpu, id, R->rank, R->ranks, err, sizeof err) < 0 ||
	    dlt_gpu_upload(R->gpu, R->params, R->mom, err, sizeof err) < 0)
		die("--device gpu: %s", err);
	/* the training rows on the GPU: a step then sends their numbers, not pixels */
	if (R->o.device_data) {
		if (dlt_gpu_set_data(R->gpu, R->train.x, R->train.y, R->train.n, err, sizeof err) == 0)
			R->gpu_rows = 1;
		else
			logline(R, "dlh-train: --device-data: %s; each step's batch is copied instead", err);
	}
	dlt_gpu_describe(R->gpu, name, sizeof name);
	logline(R, "dlh-train: device gpu: rank 0 on %s; %d rank%s, %s; "
		"precision %s; %s; %s; %s", name, R->ranks, R->ranks == 1 ? "" : "s",
		R->ranks == 1 ? "no allreduce (one rank)" : "gradients by ncclAllReduce",
		R->o.precision == DLT_PRECISION_BF16 ? "bf16 (FP32 master weights)" :
		R->o.precision == DLT_PRECISION_TF32 ? "tf32" : "fp32",
		R->o.cuda_graph ? "steps in a CUDA graph" : "no CUDA graph (--cuda-graph off)",
		R->gpu_rows ? "training rows on the device" : "batches copied each step",
		R->o.step_ahead ? "each step queued before the last one is waited for" :
		R->o.gpu_profile ? "no step queued ahead (--gpu-profile on)" :
		"no step queued ahead (--step-ahead off)");
}

/* Queues global step `step` at rate lr on the GPU (the backend's forward,
 * backward, ncclAllReduce and optimizer): its rows as numbers of the rows
 * the GPU holds (--device-data), else its batch (the prefetcher's). */
static void gpu_queue(struct run *R, long step, float lr)
{
	const int global = R->plan.global_batch;
	char err[DLT_ERR_MAX];
	int b, rc;

	if (R->gpu_rows) {
		const uint32_t *idx;

		b = dlt_prefetch_rows(&R->pf, step, &idx);
		rc = dlt_gpu_queue_rows(R->gpu, idx, b, (float)b / (float)global, (uint64_t)step,
					&R->optim, lr, (unsigned long)step, err, sizeof err);
	} else {
		const float *bx;
		const uint8_t *by;

		b = dlt_prefetch_get(&R->pf, step, &bx, &by);
		rc = dlt_gpu_queue(R->gpu, bx, by, b, (float)b / (float)global, (uint64_t)step,
				   &R->optim, lr, (unsigned long)step, err, sizeof err);
	}
	if (rc < 0)
		die("%s", err);
}

/* step_once on the GPU (started at t0): queues the step unless it was
 * queued already, then with next_lr >= 0 the step after it at that rate
 * (--step-ahead: the GPU has it to run while this host reads the loss and
 * writes its rows), then waits for the step. */
static double gpu_step(struct run *R, long step, float lr, double next_lr, double t0,
		       double *loss, double *acc)
{
	const int global = R->plan.global_batch;
	char err[DLT_ERR_MAX];
	float sums[2];

	if (R->queued && R->queued != step)
		die("dlh-train: internal error: step %ld queued, step %ld asked for", R->queued, step);
	if (!R->queued)
		gpu_queue(R, step, lr);
	R->queued = 0;
	if (next_lr >= 0.0) {
		gpu_queue(R, step + 1, (float)next_lr);
		R->queued = step + 1;
	}
	if (dlt_gpu_wait(R->gpu, sums, err, sizeof err) < 0)
		die("%s", err);
	*loss = sums[0] / (double)global;
	*acc = sums[1] / (double)global;
	return now() - t0;
}

/* One synchronous data-parallel step (global step `step`, 1-based) on
 * its batch (from the prefetcher) at learning rate lr: forward and
 * backward, the allreduce of gradients + loss sum + correct count (one
 * blocking call, or bucket by bucket during backward), the optimizer.
 * Sets *loss and *acc to the global batch's mean loss and accuracy. With
 * take_ctl the harness's pending request of this rank rides along and
 * R->agreed is what the ranks agreed (the GPU path: dlt_ctl_poll after).
 * On a GPU, next_lr >= 0 queues the next step at that rate before this
 * one is waited for (gpu_step). Returns the seconds it took. */
static double step_once(struct run *R, long step, float lr, int take_ctl, double next_lr,
			double *loss, double *acc)
{
	const int global = R->plan.global_batch;
	const size_t np = R->net.nparams;
	double t0 = now(), t1, loss_sum = 0.0;
	long correct = 0;
	const float *bx;
	const uint8_t *by;

	if (R->gpu)
		return gpu_step(R, step, lr, next_lr, t0, loss, acc);
	const int b = dlt_prefetch_get(&R->pf, step, &bx, &by);
	/* weight b / global: the sum over ranks is the global batch's mean gradient */
	dlt_net_forward_loss(&R->net, R->params, bx, by, b, (float)b / (float)global,
			     (uint64_t)step, &loss_sum, &correct);
	R->grads[np] = (float)loss_sum;
	R->grads[np + 1] = (float)correct;
	dlt_ctl_encode(take_ctl ? dlt_ctl_take() : DLT_CTL_NONE, R->grads + np + 2);
	R->launched = 0;
	dlt_net_backward(&R->net, R->params, bx, b, R->grads,
			 R->nbuckets ? on_layer : NULL, R);
	t1 = now();
	R->t_compute += t1 - t0;
	R->rows_done += b;
	if (R->shm_on) {   /* the sum and this rank's slice of the update */
		double sums[DLT_GRAD_EXTRA];

		dlt_shm_step(&R->shm, &R->optim, lr, (unsigned long)step, sums);
		R->t_comm_wait += now() - t1;
		*loss = sums[0] / (double)global;
		*acc = sums[1] / (double)global;
		R->agreed = dlt_ctl_decode(sums + 2);
		return now() - t0;
	}
	if (R->nbuckets)
		MPI_Waitall(R->launched, R->req, MPI_STATUSES_IGNORE);
	else
		MPI_Allreduce(MPI_IN_PLACE, R->grads, (int)(np + DLT_GRAD_EXTRA), MPI_FLOAT, MPI_SUM,
			      MPI_COMM_WORLD);
	R->t_comm_wait += now() - t1;
	t1 = now();
	dlt_optim_step(&R->optim, lr, (unsigned long)step, R->params, R->mom, R->grads, np);
	R->t_opt += now() - t1;
	*loss = R->grads[np] / (double)global;
	*acc = R->grads[np + 1] / (double)global;
	R->agreed = dlt_ctl_decode((const double[2]){ R->grads[np + 2], R->grads[np + 3] });
	return now() - t0;
}

/* The rows this rank's steps take (prefetch.h): its own shard, or with
 * --rebalance the whole set, cut at the split of the plan. */
static struct dlt_feed feed(const struct run *R)
{
	const struct dlt_plan *p = &R->plan;
	struct dlt_feed f = { .batch = p->batch[R->rank], .cap = p->batch[R->rank],
			      .rows_only = R->gpu_rows };

	if (R->o.rebalance) {
		f.global = 1;
		f.cap = dlt_plan_cap(p, R->rank);
		f.stride = p->global_batch;
		for (int r = 0; r < R->rank; r++)
			f.off += p->batch[r];
	}
	return f;
}

/* --lr auto: the range test. Trains the sweep's steps from the initial
 * weights with the rate growing from 1e-6 to 10 (the same batches the run
 * then starts with), picks the rate (lrfind.h), writes DIR/lr_finder, puts
 * the weights and optimizer state back as they were, and sets the
 * schedule's base rate. A run that restarts reuses the recorded choice.
 * Dies when the loss never fell. */
static void lr_find(struct run *R)
{
	const size_t np = R->net.nparams, ns = (size_t)R->nstate * np;
	const int owner = !R->shm_on || R->shm.rank == 0;   /* keeps and restores the copy */
	const int steps = R->o.lr_find_steps;
	char err[DLT_ERR_MAX], path[DLT_PATH_MAX], num[32];
	struct dlt_lrfind f;
	const char *why;
	float *keep = NULL;
	double lr = 0.0, steepest, t0 = now();

	if (dlt_path_join(path, sizeof path, R->o.job_dir, DLT_LRFIND_FILE) < 0)
		die("--job-dir \"%s\" too long", R->o.job_dir);
	if (R->rank == 0)
		lr = dlt_lrfind_read_choice(path);
	MPI_Bcast(&lr, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
	if (lr > 0.0) {
		logline(R, "dlh-train: --lr auto: %g, as the range test of an earlier start "
			"chose (%s)", lr, path);
		R->sched.lr = lr;
		return;
	}
	if (dlt_lrfind_init(&f, steps) < 0)
		die("cannot allocate the range test of %d steps", steps);
	if (owner) {
		keep = xmalloc((np + ns) * sizeof(float));
		memcpy(keep, R->params, np * sizeof(float));
		memcpy(keep + np, R->mom, ns * sizeof(float));
	}
	struct dlt_feed f0 = feed(R);

	if (dlt_prefetch_start(&R->pf, &R->train, &f0, R->plan.steps_per_epoch, R->o.seed,
			       R->rank, 1, steps, err, sizeof err) < 0)
		die("%s", err);
	for (int i = 0;; i++) {   /* every rank sees the same global loss: same stop */
		double loss, acc;

		/* requests wait for the training steps */
		step_once(R, i + 1, (float)dlt_lrfind_rate(i, steps), 0, -1.0, &loss, &acc);
		heartbeat(R, 0, 0);   /* no training step done yet, but alive */
		if (!dlt_lrfind_push(&f, loss))
			break;
	}
	dlt_prefetch_stop(&R->pf);
	if (owner) {
		memcpy(R->params, keep, np * sizeof(float));
		memcpy(R->mom, keep + np, ns * sizeof(float));
		free(keep);
	}
	/* on a GPU the sweep moved the device's copy */
	if (R->gpu && dlt_gpu_upload(R->gpu, R->params, R->mom, err, sizeof err) < 0)
		die("--device gpu: %s", err);
	if (R->shm_on)
		dlt_shm_fence(&R->shm);
	lr = dlt_lrfind_pick(&f, &steepest, &why);
	if (lr > DLT_MAX_LR)
		lr = DLT_MAX_LR;
	/* the rate to the 6 digits lr_finder shows: --lr with that number is this run */
	snprintf(num, sizeof num, "%.6g", lr);
	lr = strtod(num, NULL);
	if (R->rank == 0 && dlt_lrfind_write(&f, path, lr, steepest, why, err, sizeof err) < 0)
		die("%s", err);
	if (lr <= 0.0)
		die("--lr auto: the range test found no rate at which the loss falls (%s; "
		    "%d steps, see %s); give --lr", why, f.n, path);
	logline(R, "dlh-train: --lr auto: range test of %d steps (%.1f s) chose %g: %s",
		f.n, now() - t0, lr, why);
	R->sched.lr = lr;
	dlt_lrfind_free(&f);
}

/* This process's peak resident memory (VmHWM), in bytes; 0 when unknown.
 * A GPU rank's memory is its device's (rank_memory). */
static double peak_rss(void)
{
	char line[256];
	double kb = 0.0;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof line, f))
		if (!strncmp(line, "VmHWM:", 6))
			kb = strtod(line + 6, NULL);
	if (f)
		fclose(f);
	return kb * 1024.0;
}

/* What a rank's memory is for the estimator: a GPU rank's the device
 * memory in use at the run's end (the context, cuBLAS, NCCL, the buffers
 * and the step's graph, as the estimate models it, all held until the
 * backend is destroyed; its host memory is not the device's), a CPU rank's
 * its peak resident memory. */
static double rank_memory(struct run *R)
{
	double m = R->gpu ? dlt_gpu_mem_used(R->gpu) : -1.0;
	return m > 0 ? m : peak_rss();
}

/* Rank 0 writes DIR/rank_times: per rank its batch, the seconds of
 * training forward + backward, the seconds it waited for the other
 * ranks (shm: at the barrier before the sum; mpi: in the allreduce, its
 * transfer included; a node's leader also for the leaders' sums), over steps steps of this process, and its
 * memory (rank_memory: what the estimator predicts per device). */
static void write_rank_times(struct run *R, long steps)
{
	double mine[3] = { R->t_compute,
			   R->shm_on ? R->shm.t_wait + R->shm.t_leaders : R->t_comm_wait, rank_memory(R) };
	double *all = R->rank == 0 ? xmalloc((size_t)R->ranks * sizeof mine) : NULL;
	char err[DLT_ERR_MAX], path[DLT_PATH_MAX];
	size_t cap = 64 + (size_t)R->ranks * 96, n = 0;
	char *text;

	MPI_Gather(mine, 3, MPI_DOUBLE, all, 3, MPI_DOUBLE, 0, MPI_COMM_WORLD);
	if (R->rank != 0)
		return;
	text = xmalloc(cap);
	n += (size_t)snprintf(text, cap, "%s", DLH_RANK_TIMES_HEADER);
	for (int r = 0; r < R->ranks && n < cap; r++)
		n += (size_t)snprintf(text + n, cap - n, "%d,%d,%ld,%.4f,%.4f,%.0f\n", r,
				      R->split[r], steps, all[3 * r], all[3 * r + 1],
				      all[3 * r + 2]);
	if (dlt_path_join(path, sizeof path, R->o.job_dir, DLH_FILE_RANK_TIMES) < 0 ||
	    dlt_write_atomic_str(path, text, err, sizeof err) < 0)
		fprintf(stderr, "dlh-train: rank 0: cannot write " DLH_FILE_RANK_TIMES " in \"%s\"\n",
			R->o.job_dir);
	free(text);
	free(all);
}

/* --rebalance: after step `step`, the ranks share what each trained on
 * (rows, and seconds of their steps less the waits for the other ranks:
 * the batch gather is the rank's work too) since the last re-split and
 * move the split halfway to the one in proportion to their samples/s,
 * from DLT_PREFETCH_MAX_DEPTH + 1 steps on (what the batch threads may
 * have gathered already stays as it was). Every rank computes the same
 * split from the same numbers. A move under 1% of the global batch for
 * every rank is not made, and the measuring goes on: a rank's samples/s
 * over 20 steps of a throttled CPU wobbles by 5-8%, so a longer window and
 * half steps keep the split from chasing that. */
static void rebalance(struct run *R, long step)
{
	static double all[2 * DLT_MAX_RANKS];
	static double speed[DLT_MAX_RANKS], half[DLT_MAX_RANKS];
	static int cap[DLT_MAX_RANKS], next[DLT_MAX_RANKS];
	const struct dlt_plan *p = &R->plan;
	double mine[2] = { R->rows_done - R->mark_rows, R->t_compute - R->mark_s };
	int moved = 0, off = 0;
	char err[DLT_ERR_MAX], list[DLT_ERR_MAX], was[DLT_ERR_MAX];

	if (step - R->mark_step < R->o.rebalance / 2)
		return;   /* too few steps measured (a resume just before): the same on every rank */
	MPI_Allgather(mine, 2, MPI_DOUBLE, all, 2, MPI_DOUBLE, MPI_COMM_WORLD);
	for (int r = 0; r < R->ranks; r++) {
		if (all[2 * r] <= 0.0 || all[2 * r + 1] <= 0.0)
			return;   /* a rank with nothing measured yet */
		speed[r] = all[2 * r] / all[2 * r + 1];
		cap[r] = dlt_plan_cap(p, r);
	}
	if (dlt_plan_split(speed, cap, R->ranks, p->global_batch, next) < 0)
		return;
	for (int r = 0; r < R->ranks; r++)   /* halfway: in proportion to the batches */
		half[r] = R->split[r] + 0.5 * (next[r] - R->split[r]) + 1e-9;
	if (dlt_plan_split(half, cap, R->ranks, p->global_batch, next) < 0)
		return;
	for (int r = 0; r < R->ranks; r++)
		if (abs(next[r] - R->split[r]) * 100 >= p->global_batch)
			moved = 1;
	if (!moved)
		return;
	R->mark_rows = R->rows_done;
	R->mark_s = R->t_compute;
	R->mark_step = step;
	for (int r = 0; r < R->rank; r++)
		off += next[r];
	if (dlt_prefetch_resplit(&R->pf, step + DLT_PREFETCH_MAX_DEPTH + 1, off, next[R->rank],
				 err, sizeof err) < 0)
		die("%s", err);
	batch_list(R->split, R->ranks, was, sizeof was);
	batch_list(next, R->ranks, list, sizeof list);
	memcpy(R->split, next, (size_t)R->ranks * sizeof next[0]);
	logline(R, "dlh-train: rebalance at step %ld: batches %s -> %s from step %ld "
		"(rank 0 %.0f samples/s, rank %d %.0f)", step, was, list,
		step + DLT_PREFETCH_MAX_DEPTH + 1, speed[0], R->ranks - 1, speed[R->ranks - 1]);
}


/* 1 when the GPU may have step+1 queued before step is waited for
 * (--step-ahead): the host does nothing after step that needs its weights
 * (an evaluation, a checkpoint, a re-split) or a wait (a request taken
 * after it), and step+1 is not the last (a request agreed at step would be
 * taken after step+1, where none is: the run would end, not suspend). The
 * same on every rank. */
static int may_queue_next(const struct run *R, long step)
{
	const struct dlt_plan *p = &R->plan;

	return R->gpu && R->o.step_ahead && step + 1 < p->total_steps &&
	       step % p->steps_per_epoch != 0 &&
	       !(R->o.checkpoint_every > 0 && step % R->o.checkpoint_every == 0) &&
	       !(R->o.rebalance && step % R->o.rebalance == 0) && R->deferred == DLT_CTL_NONE;
}

/* --gpu-profile: rank 0's log gets the mean GPU time of each part of a
 * graphed step, one line for the step and one per layer. */
static void log_profile(struct run *R)
{
	struct dlt_gpu_profile p;
	double total;

	dlt_gpu_profile(R->gpu, &p);
	if (p.steps <= 0) {
		logline(R, "dlh-train: rank 0 GPU step profile: no graphed step was profiled");
		return;
	}
	const double k = 1e6 / (double)p.steps;   /* seconds summed -> us a step */

	total = p.gather_s + p.loss_s + p.sum_s + p.update_s;
	for (int i = 0; i < R->net.nlayers; i++)
		total += p.fwd_s[i] + p.bwd_s[i];
	logline(R, "dlh-train: rank 0 GPU step profile (CUDA events between the parts of the "
		"step's graph, mean of %ld steps): %.1f us a step: gather %.1f us, loss %.1f us, "
		"allreduce wait %.1f us, update %.1f us", p.steps, total * k, p.gather_s * k,
		p.loss_s * k, p.sum_s * k, p.update_s * k);
	for (int i = 0; i < R->net.nlayers; i++) {
		const struct dlt_layer *l = &R->net.layer[i];

		char fused[48] = "";

		if (p.fused[i])
			snprintf(fused, sizeof fused, " (fused into layer %d)", p.fused[i]);
		logline(R, "dlh-train: rank 0 GPU step profile: layer %d %s %dx%dx%d -> %dx%dx%d: "
			"forward %.1f us, backward %.1f us%s", i + 1, l->ops->name, l->in.c, l->in.h,
			l->in.w, l->out.c, l->out.h, l->out.w, p.fwd_s[i] * k, p.bwd_s[i] * k, fused);
	}
	if (p.nodes[0])
		logline(R, "dlh-train: rank 0 GPU step graph (profiled: the events are nodes too): %s",
			p.nodes);
	if (p.convs[0])
		logline(R, "dlh-train: rank 0 GPU convolutions through cuDNN (the algorithms Find chose, "
			"and its times): %s", p.convs);
}

/* The training loop, from the step after R->st.step to the last; dies
 * when the loss stops being finite or a file cannot be written. */
static void train(struct run *R)
{
	const struct dlt_plan *p = &R->plan;
	const long spe = p->steps_per_epoch;
	struct rate rate;
	char err[DLT_ERR_MAX];
	double ep_time = 0.0, ep_samples = 0.0, t_end;

	const long first = (long)R->st.step;
	struct dlt_feed f = feed(R);

	if ((long)R->st.step < p->total_steps &&
	    dlt_prefetch_start(&R->pf, &R->train, &f, spe, R->o.seed, R->rank,
			       (long)R->st.step + 1, p->total_steps, err, sizeof err) < 0)
		die("%s", err);
	R->t_compute = R->t_comm_wait = R->shm.t_wait = R->shm.t_leaders = 0.0;   /* not the range test's */
	R->rows_done = 0.0;
	heartbeat(R, (long)R->st.step, 1);
	t_end = now();
	rate_start(&rate, t_end);
	for (long step = (long)R->st.step + 1; step <= p->total_steps; step++) {
		long e0 = (step - 1) / spe, k = (step - 1) % spe;
		double dt, loss, acc, lr = dlt_sched_lr(&R->sched, step - 1), t_prev = t_end;

		if (k == 0) {
			R->st.epoch_loss_sum = 0.0;
			R->st.epoch_steps = 0;
		}
		step_once(R, step, (float)lr, 1,
			  may_queue_next(R, step) ? dlt_sched_lr(&R->sched, step) : -1.0, &loss, &acc);
		/* by wall clock: since the previous step's end, whatever came between */
		t_end = now();
		dt = t_end - t_prev;
		heartbeat(R, step, 0);
		if (!isfinite(loss))
			die("training diverged: loss %g at step %ld (try a smaller --lr)", loss, step);
		if (step == first + 1) {   /* the first step is cold: not measured for re-splits */
			R->mark_rows = R->rows_done;
			R->mark_s = R->t_compute;
			R->mark_step = step;
		}
		if (R->o.rebalance && step % R->o.rebalance == 0 && step > first + 1 &&
		    step + DLT_PREFETCH_MAX_DEPTH < p->total_steps)
			rebalance(R, step);
		R->st.step = (uint64_t)step;
		R->st.epoch = (uint64_t)e0 + 1;
		R->st.train_s += dt;
		R->st.epoch_loss_sum += loss;
		R->st.epoch_steps++;
		ep_time = k == 0 ? dt : ep_time + dt;
		ep_samples = k == 0 ? p->global_batch : ep_samples + p->global_batch;
		if (R->rank == 0)   /* held, written at most DLT_ROWS_EVERY apart */
			append_row(R, &(struct dlh_metrics_row){ .kind = DLH_ROW_TRAIN,
				   .step = step, .epoch = (int)e0 + 1, .time_s = t_end - R->t_origin,
				   .loss = loss, .accuracy = acc, .lr = lr,
				   .samples_per_s = rate_push(&rate, t_end, p->global_batch) }, 0);
		/* evaluation comes before the checkpoint of the same step, so a
		 * checkpoint at an epoch end always has its eval row on disk */
		if (k == spe - 1)
			end_epoch(R, step, (int)e0 + 1, ep_samples, ep_time);
		if (R->o.checkpoint_every > 0 && step % R->o.checkpoint_every == 0 &&
		    step < p->total_steps) {
			char name[DLT_CKPT_NAME_MAX];

			dlt_ckpt_step_name((uint64_t)step, name, sizeof name);
			save(R, name);
		}
		/* the harness's requests (ctl.h), agreed by every rank in the
		 * step's gradient sum (on GPUs, by a collective of their own;
		 * one agreed while the next step was queued is taken after it) */
		if (step < p->total_steps) {
			enum dlt_ctl_request req = R->gpu ? dlt_ctl_poll() : R->agreed;

			if (R->deferred > req)
				req = R->deferred;
			R->deferred = DLT_CTL_NONE;
			if (req != DLT_CTL_NONE && R->queued == step + 1) {
				R->deferred = req;
				req = DLT_CTL_NONE;
			}

			if (req != DLT_CTL_NONE) {
				char name[DLT_CKPT_NAME_MAX];

				dlt_ckpt_step_name((uint64_t)step, name, sizeof name);
				if (!(R->o.checkpoint_every > 0 && step % R->o.checkpoint_every == 0))
					save(R, name);
				logline(R, "dlh-train: checkpoint %s on request%s", name,
					req == DLT_CTL_SUSPEND ? ", suspending" : "");
				if (req == DLT_CTL_SUSPEND) {
					R->suspended = 1;
					break;
				}
			}
		}
	}
	/* the last evaluation and checkpoint count too; every row on disk, and
	 * the last step in the heartbeat */
	R->st.train_s += now() - t_end;
	if (R->rank == 0)
		append_check(R, dlt_rows_flush(&R->rows, now()));
	heartbeat(R, (long)R->st.step, 1);
	write_rank_times(R, (long)R->st.step - first);
}

/* Frees what setup() allocated: the prefetch thread first, which may still
 * be gathering from the training set (a suspend leaves the loop early). */
static void teardown(struct run *R)
{
	dlt_prefetch_stop(&R->pf);
	dlt_dataset_free(&R->train);
	dlt_dataset_free(&R->test);
	dlt_net_destroy(&R->net);
	dlt_gpu_destroy(R->gpu);
	if (R->shm_on) {
		dlt_shm_destroy(&R->shm);
	} else {
		free(R->params);
		free(R->mom);
		free(R->grads);
	}
	if (R->rows.fd >= 0) {   /* nothing is held by now: every exit path flushed */
		append_check(R, dlt_rows_flush(&R->rows, now()));
		g_rows = NULL;
		close(R->rows.fd);
		R->rows.fd = -1;
	}
	dlt_beat_close(&R->beat);
}

/* Makes DLH_FILE_READY in the job dir: every rank took the verbs' signals
 * before MPI_Init (dlt_ctl_install), and rank 0 is past it, so a verb held
 * by the run's shepherd can come now. */
static void say_ready(const struct run *R)
{
	char path[4096];
	if (dlt_path_join(path, sizeof path, R->o.job_dir, DLH_FILE_READY) < 0)
		return;
	int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd >= 0)
		close(fd);
	else
		fprintf(stderr, "dlh-train: cannot make \"%s\": %s (verbs may wait)\n", path,
			strerror(errno));
}

/* --gpus before MPI_Init: a CUDA-aware MPI may load CUDA there, after which
 * CUDA_VISIBLE_DEVICES no longer counts. The rank is the launcher's
 * (OMPI_COMM_WORLD_RANK); where() checks the list once MPI is up. */
static void early_gpu(int argc, char **argv)
{
	const char *rank = getenv("OMPI_COMM_WORLD_RANK"), *list = NULL;
	for (int i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], "--gpus"))
			list = argv[i + 1];
	if (!rank || !list)
		return;
	long want = strtol(rank, NULL, 10);
	for (long r = 0; *list; r++) {
		size_t n = strcspn(list, ",");
		if (r == want && n > 0 && n < 16) {
			char v[16];
			snprintf(v, sizeof v, "%.*s", (int)n, list);
			setenv("CUDA_VISIBLE_DEVICES", v, 1);
			return;
		}
		list += n + (list[n] == ',');
	}
}

/* Every rank says where it runs (its lines reach the job's log as
 * "[rank R] ..."); with --gpus it takes its GPU by CUDA_VISIBLE_DEVICES,
 * set here before CUDA is loaded. */
static void where(struct run *R)
{
	char host[256] = "localhost", gpu[32] = "";
	if (R->o.ngpus && R->o.ngpus != R->ranks)
		die("--gpus gives %d GPUs for %d ranks", R->o.ngpus, R->ranks);
	if (R->o.ngpus) {
		snprintf(gpu, sizeof gpu, "%d", R->o.gpus[R->rank]);
		if (setenv("CUDA_VISIBLE_DEVICES", gpu, 1) < 0)
			die("cannot set CUDA_VISIBLE_DEVICES: %s", strerror(errno));
	}
	gethostname(host, sizeof host - 1);
	printf("dlh-train: host %s runs rank %d of %d%s%s\n", host, R->rank, R->ranks,
	       gpu[0] ? ", CUDA_VISIBLE_DEVICES=" : "", gpu);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	static struct run run;   /* the plan is large: keep it off the stack */
	struct run *R = &run;
	char err[DLT_ERR_MAX];
	enum resume kind;
	int rc;

	int provided;

	dlt_ctl_install();   /* before MPI_Init: an early request waits, it does not kill */
	/* on another node than dlhfs's: into the run's cgroup there before
	 * anything is allocated (engine/run/join.h) */
	char cg_why[600], cg_host[128] = "";
	if (dlh_nodecg_join(cg_why, sizeof cg_why) < 0) {
		gethostname(cg_host, sizeof cg_host - 1);
		fprintf(stderr, "dlh-train: isolation: none on %s: %s\n", cg_host, cg_why);
	}
	if (argc == 4 && strcmp(argv[1], "--same-params") == 0) {
		/* a check for the tests: payloads of two checkpoints, no MPI */
		rc = dlt_ckpt_same_payload(argv[2], argv[3], err, sizeof err);
		if (rc == 1)
			printf("dlh-train: \"%s\" and \"%s\" hold the same parameters and state\n",
			       argv[2], argv[3]);
		else
			fprintf(stderr, "dlh-train: %s\n", err);
		return rc == 1 ? 0 : 1;
	}
	if (argc == 4 && strcmp(argv[1], "--params-diff") == 0) {
		/* a check for the tests: how far two checkpoints' payloads are apart */
		double diff, mag;
		long n;
		if (dlt_ckpt_payload_diff(argv[2], argv[3], &diff, &mag, &n, err, sizeof err)) {
			fprintf(stderr, "dlh-train: %s\n", err);
			return 1;
		}
		printf("floats=%ld max_abs_diff=%.9g max_abs=%.9g\n", n, diff, mag);
		return 0;
	}
	early_gpu(argc, argv);
	/* only the main thread calls MPI; the prefetch thread never does */
	MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
	R->t_origin = now();
	R->rows.fd = -1;
	R->beat.fd = -1;
	MPI_Comm_rank(MPI_COMM_WORLD, &R->rank);
	MPI_Comm_size(MPI_COMM_WORLD, &R->ranks);
	g_rank = R->rank;

	rc = dlt_opts_parse(argc, argv, &R->o, err, sizeof err);
	if (rc != 0) {
		if (R->rank == 0 && rc > 0)
			fputs(dlt_opts_usage, stdout);
		else if (R->rank == 0)
			fprintf(stderr, "dlh-train: %s (see dlh-train --help)\n", err);
		MPI_Finalize();
		return rc > 0 ? 0 : DLT_EXIT_USAGE;
	}
	if (R->ranks > DLT_MAX_RANKS)
		die("%d ranks (at most %d)", R->ranks, DLT_MAX_RANKS);
	if (dlt_path_join(R->ckdir, sizeof R->ckdir, R->o.job_dir, DLT_CKPT_DIR) < 0)
		die("--job-dir \"%s\" too long", R->o.job_dir);
	if (R->rank == 0 && dlt_mkdirs(R->ckdir, err, sizeof err) < 0)
		die("%s", err);
	if (R->rank == 0)
		say_ready(R);

	where(R);
	if (R->o.ncpus) {   /* first: the buffers setup touches are then near the CPU */
		if (dlt_bind(MPI_COMM_WORLD, R->o.cpus, R->o.ncpus, err, sizeof err))
			logline(R, "dlh-train: each rank r pinned to CPU r of --cpus (%d ranks)", R->ranks);
		else if (err[0])
			fprintf(stderr, "dlh-train: rank %d: warning: ranks not pinned to CPUs: %s\n",
				R->rank, err);
	}
	setup(R);
	R->st.nparams = R->net.nparams;
	R->st.optimizer = (uint32_t)R->optim.kind;
	R->st.nstate = (uint32_t)R->nstate;
	R->st.seed = R->o.seed;
	R->st.test_loss = NAN;
	R->st.test_acc = NAN;
	kind = load_latest(R);
	R->t_origin -= R->st.elapsed_s;   /* the clock goes on across resumes */

	if (kind == RESUME_DONE) {
		write_result(R);
		logline(R, "dlh-train: run already complete (%s), result rewritten: "
			"test accuracy %.4f", DLT_CKPT_FINAL, R->st.test_acc);
	} else {
		if (R->o.device == DLT_DEVICE_GPU)
			gpu_start(R);
		if (R->o.lr_auto)
			lr_find(R);
		open_files(R);
		train(R);
		if (R->suspended) {
			teardown(R);
			MPI_Finalize();
			return DLH_EXIT_SUSPENDED;
		}
		if (R->st.eval_step != R->st.step) {   /* e.g. resumed past the end */
			double loss, acc;

			evaluate(R, &loss, &acc);
			R->st.test_loss = loss;
			R->st.test_acc = acc;
			R->st.eval_step = R->st.step;
			if (R->rank == 0)
				append_row(R, &(struct dlh_metrics_row){ .kind = DLH_ROW_EVAL,
					   .step = (long)R->st.step, .epoch = (int)R->st.epoch,
					   .time_s = now() - R->t_origin, .loss = loss,
					   .accuracy = acc }, 1);
		}
		save(R, DLT_CKPT_FINAL);
		write_result(R);
		logline(R, "dlh-train: done: %" PRIu64 " steps, test accuracy %.4f, "
			"test loss %.4f, %.0f samples/s, %.1f s",
			R->st.step, R->st.test_acc, R->st.test_loss,
			R->st.train_s > 0 ? (double)R->st.step * R->plan.global_batch /
				R->st.train_s : 0.0, R->st.elapsed_s);
		logline(R, "dlh-train: rank 0 time in this process: forward %.2f s (eval included), "
			"backward %.2f s, allreduce wait %.2f s (shm: with the optimizer), "
			"optimizer %.2f s; %ld batches gathered by the trainer, not the prefetch thread",
			R->net.t_fwd, R->net.t_bwd, R->t_comm_wait, R->t_opt, R->pf.stolen);
		if (R->gpu) {
			struct dlt_gpu_graph_stats gs;
			double t[4];

			dlt_gpu_times(R->gpu, t);
			dlt_gpu_graph_stats(R->gpu, &gs);
			logline(R, "dlh-train: rank 0 GPU time (CUDA events): %ld steps launch by "
				"launch: forward %.2f s, backward %.2f s, ncclAllReduce %.2f s, "
				"optimizer %.2f s; %ld steps as a CUDA graph (%ld captured, %ld nodes): "
				"%.2f s%s%s", gs.eager, t[0], t[1], t[2], t[3], gs.launches, gs.captures,
				gs.nodes, gs.graph_s, gs.off[0] ? "; graphs off: " : "", gs.off);
			if (R->o.gpu_profile)
				log_profile(R);
		}
	}
	teardown(R);
	MPI_Finalize();
	return 0;
}
