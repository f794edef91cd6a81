/* load.c - the CUDA backend, loaded when first used: dlh-train links only this,
 * and opens dlh-train-cuda.so (gpu.cu with cuBLAS, NCCL and the CUDA runtime)
 * the first time a GPU is asked for, so a CPU run does not map those libraries
 * (about 150 MB of resident memory per rank when linked in) */
#include "engine/train/gpu.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DLT_GPU_LIB "dlh-train-cuda.so"   /* beside dlh-train (or one level up: tests/) */

/* The backend's entry points, each as gpu.h declares it. */
static struct {
	int (*count)(char *, size_t);
	int (*create)(struct dlt_gpu **, const struct dlt_net *, int, int, uint64_t, int,
		      char *, size_t);
	void (*destroy)(struct dlt_gpu *);
	int (*set_precision)(struct dlt_gpu *, enum dlt_precision, char *, size_t);
	void (*describe)(const struct dlt_gpu *, char *, size_t);
	int (*nccl_id)(unsigned char *, char *, size_t);
	int (*nccl_init)(struct dlt_gpu *, const unsigned char *, int, int, char *, size_t);
	int (*add_bucket)(struct dlt_gpu *, size_t, size_t, int, char *, size_t);
	int (*upload)(struct dlt_gpu *, const float *, const float *, char *, size_t);
	int (*download)(struct dlt_gpu *, float *, float *, char *, size_t);
	int (*forward)(struct dlt_gpu *, const float *, int, int, uint64_t, float *, char *,
		       size_t);
	int (*train_batch)(struct dlt_gpu *, const float *, const uint8_t *, int, float, uint64_t,
			   float *, double *, long *, char *, size_t);
	int (*optim_step)(struct dlt_gpu *, const struct dlt_optim *, float, unsigned long,
			  char *, size_t);
	int (*step)(struct dlt_gpu *, const float *, const uint8_t *, int, float, uint64_t,
		    const struct dlt_optim *, float, unsigned long, float *, char *, size_t);
	int (*set_data)(struct dlt_gpu *, const float *, const uint8_t *, long, char *, size_t);
	int (*step_rows)(struct dlt_gpu *, const uint32_t *, int, float, uint64_t,
			 const struct dlt_optim *, float, unsigned long, float *, char *, size_t);
	int (*queue)(struct dlt_gpu *, const float *, const uint8_t *, int, float, uint64_t,
		     const struct dlt_optim *, float, unsigned long, char *, size_t);
	int (*queue_rows)(struct dlt_gpu *, const uint32_t *, int, float, uint64_t,
			  const struct dlt_optim *, float, unsigned long, char *, size_t);
	int (*wait)(struct dlt_gpu *, float *, char *, size_t);
	int (*set_profile)(struct dlt_gpu *, int, char *, size_t);
	void (*profile)(const struct dlt_gpu *, struct dlt_gpu_profile *);
	int (*eval_batch)(struct dlt_gpu *, const float *, const uint8_t *, int, double *, long *,
			  char *, size_t);
	void (*times)(const struct dlt_gpu *, double *);
	double (*mem_used)(struct dlt_gpu *);
	int (*set_graph)(struct dlt_gpu *, int, char *, size_t);
	void (*graph_stats)(const struct dlt_gpu *, struct dlt_gpu_graph_stats *);
	int (*calibrate)(const struct dlt_gpu_cal_in *, struct dlt_gpu_cal *, char *, size_t);
} T;

static int state;          /* 0 = not tried, 1 = loaded, -1 = cannot be loaded */
static char why[1024];     /* the reason for -1 */

/* Opens path and fills T. Returns 0, or -1 with the reason in why. */
static int open_lib(const char *path)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		snprintf(why, sizeof why, "no NVIDIA GPU: cannot load the CUDA backend: %s", dlerror());
		return -1;
	}
#define SYM(field, name) \
	if (!(*(void **)(&T.field) = dlsym(h, name))) { \
		snprintf(why, sizeof why, "no NVIDIA GPU: %s lacks %s", path, name); \
		dlclose(h); \
		return -1; \
	}
	SYM(count, "dlt_gpu_count") SYM(create, "dlt_gpu_create") SYM(destroy, "dlt_gpu_destroy")
	SYM(set_precision, "dlt_gpu_set_precision")
	SYM(describe, "dlt_gpu_describe") SYM(nccl_id, "dlt_gpu_nccl_id")
	SYM(nccl_init, "dlt_gpu_nccl_init") SYM(add_bucket, "dlt_gpu_add_bucket")
	SYM(upload, "dlt_gpu_upload") SYM(download, "dlt_gpu_download")
	SYM(forward, "dlt_gpu_forward") SYM(train_batch, "dlt_gpu_train_batch")
	SYM(optim_step, "dlt_gpu_optim_step") SYM(step, "dlt_gpu_step")
	SYM(eval_batch, "dlt_gpu_eval_batch") SYM(times, "dlt_gpu_times")
	SYM(mem_used, "dlt_gpu_mem_used")
	SYM(set_data, "dlt_gpu_set_data") SYM(step_rows, "dlt_gpu_step_rows")
	SYM(queue, "dlt_gpu_queue") SYM(queue_rows, "dlt_gpu_queue_rows") SYM(wait, "dlt_gpu_wait")
	SYM(set_profile, "dlt_gpu_set_profile") SYM(profile, "dlt_gpu_profile")
	SYM(set_graph, "dlt_gpu_set_graph") SYM(graph_stats, "dlt_gpu_graph_stats")
	SYM(calibrate, "dlt_gpu_calibrate")
#undef SYM
	return 0;
}

/* Loads the backend once: $DLH_TRAIN_CUDA, else dlh-train-cuda.so in the
 * directory of this executable or its parent. Returns 0, or -ENOSYS with
 * the reason in err. */
static int load(char *err, size_t errlen)
{
	if (state == 0) {
		char exe[PATH_MAX], path[PATH_MAX + 64];
		const char *env = getenv("DLH_TRAIN_CUDA");
		ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
		char *slash;

		state = -1;
		if (env && *env) {
			state = open_lib(env) == 0 ? 1 : -1;
		} else if (n > 0) {
			exe[n] = '\0';
			slash = strrchr(exe, '/');
			*(slash ? slash : exe) = '\0';
			snprintf(path, sizeof path, "%s/%s", exe, DLT_GPU_LIB);
			if (access(path, F_OK) != 0)   /* tests/ binaries: the build dir */
				snprintf(path, sizeof path, "%s/../%s", exe, DLT_GPU_LIB);
			state = open_lib(path) == 0 ? 1 : -1;
		} else {
			snprintf(why, sizeof why, "no NVIDIA GPU: cannot find this program's directory");
		}
	}
	if (state < 0) {
		snprintf(err, errlen, "%s", why);
		return -ENOSYS;
	}
	return 0;
}

int dlt_gpu_built(void)
{
	return 1;
}

int dlt_gpu_count(char *err, size_t errlen)
{
	int rc = load(err, errlen);

	return rc < 0 ? rc : T.count(err, errlen);
}

int dlt_gpu_create(struct dlt_gpu **out, const struct dlt_net *n, int nstate,
		   int device, uint64_t seed, int rank, char *err, size_t errlen)
{
	int rc = load(err, errlen);

	*out = NULL;
	return rc < 0 ? rc : T.create(out, n, nstate, device, seed, rank, err, errlen);
}

int dlt_gpu_nccl_id(unsigned char *id, char *err, size_t errlen)
{
	int rc = load(err, errlen);

	return rc < 0 ? rc : T.nccl_id(id, err, errlen);
}

/* The calls below take a device that dlt_gpu_create made: the backend is loaded. */

void dlt_gpu_destroy(struct dlt_gpu *g)
{
	if (g)
		T.destroy(g);
}

int dlt_gpu_set_precision(struct dlt_gpu *g, enum dlt_precision p, char *err, size_t errlen)
{
	return T.set_precision(g, p, err, errlen);
}

void dlt_gpu_describe(const struct dlt_gpu *g, char *out, size_t len)
{
	T.describe(g, out, len);
}

int dlt_gpu_nccl_init(struct dlt_gpu *g, const unsigned char *id, int rank, int ranks,
		      char *err, size_t errlen)
{
	return T.nccl_init(g, id, rank, ranks, err, errlen);
}

int dlt_gpu_add_bucket(struct dlt_gpu *g, size_t lo, size_t hi, int trigger,
		       char *err, size_t errlen)
{
	return T.add_bucket(g, lo, hi, trigger, err, errlen);
}

int dlt_gpu_upload(struct dlt_gpu *g, const float *params, const float *state_,
		   char *err, size_t errlen)
{
	return T.upload(g, params, state_, err, errlen);
}

int dlt_gpu_download(struct dlt_gpu *g, float *params, float *state_, char *err, size_t errlen)
{
	return T.download(g, params, state_, err, errlen);
}

int dlt_gpu_forward(struct dlt_gpu *g, const float *x, int rows, int train, uint64_t step,
		    float *logits, char *err, size_t errlen)
{
	return T.forward(g, x, rows, train, step, logits, err, errlen);
}

int dlt_gpu_train_batch(struct dlt_gpu *g, const float *x, const uint8_t *y, int rows,
			float weight, uint64_t step, float *grads, double *loss_sum,
			long *correct, char *err, size_t errlen)
{
	return T.train_batch(g, x, y, rows, weight, step, grads, loss_sum, correct, err, errlen);
}

int dlt_gpu_optim_step(struct dlt_gpu *g, const struct dlt_optim *o, float lr,
		       unsigned long t, char *err, size_t errlen)
{
	return T.optim_step(g, o, lr, t, err, errlen);
}

int dlt_gpu_step(struct dlt_gpu *g, const float *x, const uint8_t *y, int rows,
		 float weight, uint64_t step, const struct dlt_optim *o, float lr,
		 unsigned long t, float sums[2], char *err, size_t errlen)
{
	return T.step(g, x, y, rows, weight, step, o, lr, t, sums, err, errlen);
}

int dlt_gpu_set_data(struct dlt_gpu *g, const float *x, const uint8_t *y, long rows,
		     char *err, size_t errlen)
{
	return T.set_data(g, x, y, rows, err, errlen);
}

int dlt_gpu_step_rows(struct dlt_gpu *g, const uint32_t *idx, int rows, float weight,
		      uint64_t step, const struct dlt_optim *o, float lr, unsigned long t,
		      float sums[2], char *err, size_t errlen)
{
	return T.step_rows(g, idx, rows, weight, step, o, lr, t, sums, err, errlen);
}

int dlt_gpu_queue(struct dlt_gpu *g, const float *x, const uint8_t *y, int rows, float weight,
		  uint64_t step, const struct dlt_optim *o, float lr, unsigned long t,
		  char *err, size_t errlen)
{
	return T.queue(g, x, y, rows, weight, step, o, lr, t, err, errlen);
}

int dlt_gpu_queue_rows(struct dlt_gpu *g, const uint32_t *idx, int rows, float weight,
		       uint64_t step, const struct dlt_optim *o, float lr, unsigned long t,
		       char *err, size_t errlen)
{
	return T.queue_rows(g, idx, rows, weight, step, o, lr, t, err, errlen);
}

int dlt_gpu_wait(struct dlt_gpu *g, float sums[2], char *err, size_t errlen)
{
	return T.wait(g, sums, err, errlen);
}

int dlt_gpu_set_profile(struct dlt_gpu *g, int on, char *err, size_t errlen)
{
	return T.set_profile(g, on, err, errlen);
}

void dlt_gpu_profile(const struct dlt_gpu *g, struct dlt_gpu_profile *out)
{
	T.profile(g, out);
}

int dlt_gpu_eval_batch(struct dlt_gpu *g, const float *x, const uint8_t *y, int rows,
		       double *loss_sum, long *correct, char *err, size_t errlen)
{
	return T.eval_batch(g, x, y, rows, loss_sum, correct, err, errlen);
}

void dlt_gpu_times(const struct dlt_gpu *g, double t[4])
{
	T.times(g, t);
}

double dlt_gpu_mem_used(struct dlt_gpu *g)
{
	return T.mem_used(g);
}

int dlt_gpu_set_graph(struct dlt_gpu *g, int on, char *err, size_t errlen)
{
	return T.set_graph(g, on, err, errlen);
}

void dlt_gpu_graph_stats(const struct dlt_gpu *g, struct dlt_gpu_graph_stats *out)
{
	T.graph_stats(g, out);
}

int dlt_gpu_calibrate(const struct dlt_gpu_cal_in *in, struct dlt_gpu_cal *out,
		      char *err, size_t errlen)
{
	int rc = load(err, errlen);

	if (rc < 0)
		memset(out, 0, sizeof *out);
	return rc < 0 ? rc : T.calibrate(in, out, err, errlen);
}
