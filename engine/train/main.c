/* main.c - dlh-train: the MPI driver (argv, data shards, train loop, job files) */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/train/ckpt.h"
#include "engine/train/files.h"
#include "engine/train/idx.h"
#include "engine/train/metrics.h"
#include "engine/train/mlp.h"
#include "engine/train/optim.h"
#include "engine/train/opts.h"
#include "engine/train/plan.h"
#include "engine/train/rng.h"

#define DLT_EXIT_USAGE 2          /* exit status for a bad command line */
#define DLT_EVAL_ROWS 512         /* fewest rows per evaluation batch */
#define DLT_RATE_WINDOW 20        /* steps in the samples/s moving window */
#define DLT_CKPT_DIR "checkpoints"

enum resume { RESUME_NONE, RESUME_STEP, RESUME_DONE };

/* Everything one rank holds. */
struct run {
	int rank, ranks;                  /* this rank, MPI_COMM_WORLD size */
	struct dlt_opts o;                /* command line */
	struct dlt_plan plan;             /* shards, batches, steps */
	struct dlt_dataset train, test;   /* this rank's shards */
	struct dlt_mlp mlp;               /* model layout and workspace */
	float *params;                    /* nparams */
	float *mom;                       /* nparams momentum buffers */
	float *grads;                     /* nparams + 2: loss sum, correct count */
	float *bx;                        /* batch images, batch x dim */
	uint8_t *by;                      /* batch labels */
	uint32_t *perm;                   /* shuffled shard indices, train.n */
	char ckdir[DLT_PATH_MAX];         /* JOB/checkpoints */
	int mfd;                          /* metrics.csv (rank 0), else -1 */
	double t_origin;                  /* monotonic time of the run's first start */
	struct dlt_ckpt_meta st;          /* progress, as a checkpoint records it */
};

static int g_rank;                    /* for die() */

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

/* Returns n bytes from malloc; dies when there are none. */
static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		die("cannot allocate %zu bytes", n);
	return p;
}

/* Checks the headers of an images/labels pair (dies on a bad one) and
 * returns how many items to use: limit, or all when limit is 0 or larger. */
static long probe_pair(const char *images, const char *labels, long limit, int *dim)
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
	return limit > 0 && limit < hi.count ? limit : hi.count;
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

/* Loads this rank's shards, lays out the model, allocates every buffer
 * (the only allocations of the run) and initialises the weights; dies on
 * any error. */
static void setup(struct run *R)
{
	const struct dlt_opts *o = &R->o;
	char err[DLT_ERR_MAX];
	int dim, tdim, classes, rows;
	long ntrain, ntest, lo, hi;

	ntrain = probe_pair(o->train_images, o->train_labels, o->train_limit, &dim);
	ntest = probe_pair(o->test_images, o->test_labels, o->test_limit, &tdim);
	if (dim != tdim)
		die("training images have %d pixels, test images %d", dim, tdim);
	classes = max_label(o->train_labels, ntrain);
	tdim = max_label(o->test_labels, ntest);
	classes = 1 + (tdim > classes ? tdim : classes);
	if (dlt_plan_make(&R->plan, ntrain, ntest, R->ranks, o->batch, o->epochs,
			  err, sizeof err) < 0)
		die("%s", err);

	dlt_plan_shard(ntrain, R->ranks, R->rank, &lo, &hi);
	if (dlt_dataset_load(&R->train, o->train_images, o->train_labels, lo, hi,
			     err, sizeof err) < 0)
		die("%s", err);
	dlt_plan_shard(ntest, R->ranks, R->rank, &lo, &hi);
	if (dlt_dataset_load(&R->test, o->test_images, o->test_labels, lo, hi,
			     err, sizeof err) < 0)
		die("%s", err);

	rows = R->plan.batch[R->rank];
	if (rows < DLT_EVAL_ROWS)
		rows = DLT_EVAL_ROWS;
	if (dlt_mlp_create(&R->mlp, dim, o->hidden, o->nhidden, classes, rows,
			   err, sizeof err) < 0)
		die("model: %s", err);

	size_t np = R->mlp.nparams;

	R->params = xmalloc(np * sizeof(float));
	R->mom = xmalloc(np * sizeof(float));
	R->grads = xmalloc((np + 2) * sizeof(float));
	R->bx = xmalloc((size_t)R->plan.batch[R->rank] * (size_t)dim * sizeof(float));
	R->by = xmalloc((size_t)R->plan.batch[R->rank]);
	R->perm = xmalloc((size_t)R->train.n * sizeof(uint32_t));
	memset(R->mom, 0, np * sizeof(float));
	dlt_mlp_init_params(&R->mlp, R->params, o->seed);
}

/* Rank 0 looks for checkpoints/latest and loads it; every rank then gets
 * its state. Returns what kind of start this is. */
static enum resume load_latest(struct run *R)
{
	char err[DLT_ERR_MAX], name[DLT_CKPT_NAME_MAX], path[DLT_PATH_MAX];
	int kind = RESUME_NONE;
	size_t np = R->mlp.nparams;

	if (R->rank == 0) {
		int rc = dlt_ckpt_latest(R->ckdir, name, sizeof name, err, sizeof err);

		if (rc < 0 && rc != -ENOENT)
			die("%s", err);
		if (rc == 0) {
			if (dlt_path_join(path, sizeof path, R->ckdir, name) < 0)
				die("checkpoint path \"%s/%s\" too long", R->ckdir, name);
			if (dlt_ckpt_read(path, &R->st, np, R->params, R->mom,
					  err, sizeof err) < 0)
				die("%s", err);
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
	MPI_Bcast(R->params, (int)np, MPI_FLOAT, 0, MPI_COMM_WORLD);
	MPI_Bcast(R->mom, (int)np, MPI_FLOAT, 0, MPI_COMM_WORLD);
	return (enum resume)kind;
}

/* Evaluates the model on every rank's test shard; all ranks get the
 * global mean loss and accuracy. */
static void evaluate(struct run *R, double *loss, double *acc)
{
	const struct dlt_dataset *t = &R->test;
	double loss_sum = 0.0, s[3];
	long correct = 0;

	for (long i = 0; i < t->n; i += R->mlp.max_batch) {
		long n = t->n - i < R->mlp.max_batch ? t->n - i : R->mlp.max_batch;

		dlt_mlp_eval_batch(&R->mlp, R->params, t->x + (size_t)i * (size_t)t->dim,
				   t->y + i, (int)n, &loss_sum, &correct);
	}
	s[0] = loss_sum;
	s[1] = (double)correct;
	s[2] = (double)t->n;
	MPI_Allreduce(MPI_IN_PLACE, s, 3, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	*loss = s[0] / s[2];
	*acc = s[1] / s[2];
}

/* Rank 0 writes checkpoint name from the current state. */
static void save(struct run *R, const char *name)
{
	char err[DLT_ERR_MAX];

	if (R->rank != 0)
		return;
	R->st.elapsed_s = now() - R->t_origin;
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

/* Rank 0 opens metrics.csv (cut back to start_step) and writes run.info. */
static void open_files(struct run *R)
{
	char err[DLT_ERR_MAX], list[DLT_ERR_MAX];
	const struct dlt_plan *p = &R->plan;
	size_t n = 0;

	if (R->rank != 0)
		return;
	if (dlt_metrics_open(R->o.job_dir, (long)R->st.step, &R->mfd, err, sizeof err) < 0)
		die("%s", err);
	struct dlt_runinfo ri = {
		.ranks = p->ranks, .batch = p->batch, .train_samples = p->train_n,
		.test_samples = p->test_n, .steps_per_epoch = p->steps_per_epoch,
		.total_steps = p->total_steps, .params = R->mlp.nparams,
		.start_step = (long)R->st.step,
	};
	if (dlt_runinfo_write(R->o.job_dir, &ri, err, sizeof err) < 0)
		die("%s", err);
	list[0] = '\0';
	for (int r = 0; r < p->ranks && n + 16 < sizeof list; r++)
		n += (size_t)snprintf(list + n, sizeof list - n, "%s%d", r ? "," : "", p->batch[r]);
	logline(R, "dlh-train: %d ranks, batch %d (%s per rank), %ld train / %ld test images, "
		"%ld steps/epoch x %d epochs = %ld steps, %zu params, start step %" PRIu64,
		p->ranks, p->global_batch, list, p->train_n, p->test_n,
		p->steps_per_epoch, p->epochs, p->total_steps, R->mlp.nparams, R->st.step);
}

/* Dies when rc, the result of a metrics.csv append, is an error. */
static void append_check(const struct run *R, int rc)
{
	if (rc < 0)
		die("cannot append to \"%s/%s\": %s", R->o.job_dir, DLT_METRICS_FILE,
		    strerror(-rc));
}

/* Evaluates at the end of an epoch and records it. */
static void end_epoch(struct run *R, long step, int epoch, double ep_samples, double ep_time)
{
	double loss, acc, t;

	evaluate(R, &loss, &acc);
	R->st.test_loss = loss;
	R->st.test_acc = acc;
	R->st.eval_step = (uint64_t)step;
	if (R->rank != 0)
		return;
	t = now() - R->t_origin;
	append_check(R, dlt_metrics_eval(R->mfd, step, epoch, t, loss, acc));
	logline(R, "epoch %d/%d step %ld: train loss %.4f, test loss %.4f, "
		"test accuracy %.4f, %.0f samples/s, elapsed %.1f s",
		epoch, R->plan.epochs, step,
		R->st.epoch_steps ? R->st.epoch_loss_sum / (double)R->st.epoch_steps : NAN,
		loss, acc, ep_time > 0 ? ep_samples / ep_time : 0.0, t);
}

/* samples/s over a moving window of the last DLT_RATE_WINDOW steps,
 * counting step time only (no evaluation or checkpoint time). */
struct rate {
	double dt[DLT_RATE_WINDOW];   /* durations of the last steps, a ring */
	long n;                       /* steps pushed so far */
};

/* Adds a step of dt seconds that trained batch samples. Returns samples/s
 * over the window. */
static double rate_push(struct rate *w, double dt, int batch)
{
	long k = w->n < DLT_RATE_WINDOW ? w->n + 1 : DLT_RATE_WINDOW;
	double sum = 0.0;

	w->dt[w->n++ % DLT_RATE_WINDOW] = dt;
	for (long i = 0; i < k; i++)
		sum += w->dt[i];
	return sum > 0.0 ? (double)k * batch / sum : 0.0;
}

/* One synchronous data-parallel step on local batch k of the epoch's
 * order: forward and backward, ONE allreduce of gradients + loss sum +
 * correct count, SGD. Sets *loss and *acc to the global batch's mean loss
 * and accuracy. Returns the seconds it took. */
static double step_once(struct run *R, long k, const struct dlt_sgd *sgd,
			double *loss, double *acc)
{
	const int b = R->plan.batch[R->rank], global = R->plan.global_batch;
	const size_t np = R->mlp.nparams;
	double t0 = now(), loss_sum = 0.0;
	long correct = 0;

	dlt_dataset_gather(&R->train, R->perm + (size_t)k * (size_t)b, b, R->bx, R->by);
	/* weight b / global: the sum over ranks is the global batch's mean gradient */
	dlt_mlp_train_batch(&R->mlp, R->params, R->bx, R->by, b, (float)b / (float)global,
			    R->grads, &loss_sum, &correct);
	R->grads[np] = (float)loss_sum;
	R->grads[np + 1] = (float)correct;
	MPI_Allreduce(MPI_IN_PLACE, R->grads, (int)(np + 2), MPI_FLOAT, MPI_SUM,
		      MPI_COMM_WORLD);
	dlt_sgd_step(sgd, R->params, R->mom, R->grads, np);
	*loss = R->grads[np] / (double)global;
	*acc = R->grads[np + 1] / (double)global;
	return now() - t0;
}

/* The training loop, from the step after R->st.step to the last; dies
 * when the loss stops being finite or a file cannot be written. */
static void train(struct run *R)
{
	const struct dlt_plan *p = &R->plan;
	const long spe = p->steps_per_epoch;
	const struct dlt_sgd sgd = {
		.lr = (float)R->o.lr, .momentum = (float)R->o.momentum,
		.weight_decay = (float)R->o.weight_decay,
	};
	struct rate rate = { .n = 0 };
	double ep_time = 0.0, ep_samples = 0.0;
	long perm_epoch = -1;

	for (long step = (long)R->st.step + 1; step <= p->total_steps; step++) {
		long e0 = (step - 1) / spe, k = (step - 1) % spe;
		double dt, loss, acc;

		if (e0 != perm_epoch) {   /* the same order after a resume */
			struct dlt_rng rng;

			dlt_rng_seed(&rng, R->o.seed, (uint64_t)e0, (uint64_t)R->rank);
			dlt_rng_permutation(&rng, R->perm, (size_t)R->train.n);
			perm_epoch = e0;
		}
		if (k == 0) {
			R->st.epoch_loss_sum = 0.0;
			R->st.epoch_steps = 0;
		}
		dt = step_once(R, k, &sgd, &loss, &acc);
		if (!isfinite(loss))
			die("training diverged: loss %g at step %ld (try a smaller --lr)", loss, step);
		R->st.step = (uint64_t)step;
		R->st.epoch = (uint64_t)e0 + 1;
		R->st.train_s += dt;
		R->st.epoch_loss_sum += loss;
		R->st.epoch_steps++;
		ep_time = k == 0 ? dt : ep_time + dt;
		ep_samples = k == 0 ? p->global_batch : ep_samples + p->global_batch;
		if (R->rank == 0)
			append_check(R, dlt_metrics_train(R->mfd, step, (int)e0 + 1,
					 now() - R->t_origin, loss, acc, R->o.lr,
					 rate_push(&rate, dt, p->global_batch)));
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
	}
}

/* Frees what setup() allocated. */
static void teardown(struct run *R)
{
	dlt_dataset_free(&R->train);
	dlt_dataset_free(&R->test);
	dlt_mlp_destroy(&R->mlp);
	free(R->params);
	free(R->mom);
	free(R->grads);
	free(R->bx);
	free(R->by);
	free(R->perm);
	if (R->mfd >= 0)
		close(R->mfd);
}

int main(int argc, char **argv)
{
	static struct run run;   /* the plan is large: keep it off the stack */
	struct run *R = &run;
	char err[DLT_ERR_MAX];
	enum resume kind;
	int rc;

	MPI_Init(&argc, &argv);
	R->t_origin = now();
	R->mfd = -1;
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

	setup(R);
	R->st.nparams = R->mlp.nparams;
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
		open_files(R);
		train(R);
		if (R->st.eval_step != R->st.step) {   /* e.g. resumed past the end */
			double loss, acc;

			evaluate(R, &loss, &acc);
			R->st.test_loss = loss;
			R->st.test_acc = acc;
			R->st.eval_step = R->st.step;
			if (R->rank == 0)
				append_check(R, dlt_metrics_eval(R->mfd, (long)R->st.step,
						 (int)R->st.epoch, now() - R->t_origin, loss, acc));
		}
		save(R, DLT_CKPT_FINAL);
		write_result(R);
		logline(R, "dlh-train: done: %" PRIu64 " steps, test accuracy %.4f, "
			"test loss %.4f, %.0f samples/s, %.1f s",
			R->st.step, R->st.test_acc, R->st.test_loss,
			R->st.train_s > 0 ? (double)R->st.step * R->plan.global_batch /
				R->st.train_s : 0.0, R->st.elapsed_s);
	}
	teardown(R);
	MPI_Finalize();
	return 0;
}
