/* stub.c - the CUDA backend of a build without CUDA (make GPU=0): every call says so */
#include "engine/train/gpu.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define DLT_GPU_NONE "no NVIDIA GPU: this dlh-train was built without CUDA (make GPU=1)"

/* Writes the reason into err; returns -ENOSYS. */
static int none(char *err, size_t errlen)
{
	snprintf(err, errlen, "%s", DLT_GPU_NONE);
	return -ENOSYS;
}

int dlt_gpu_built(void)
{
	return 0;
}

int dlt_gpu_count(char *err, size_t errlen)
{
	return none(err, errlen);
}

int dlt_gpu_create(struct dlt_gpu **out, const struct dlt_net *n, int nstate,
		   int device, uint64_t seed, int rank, char *err, size_t errlen)
{
	(void)n;
	(void)nstate;
	(void)device;
	(void)seed;
	(void)rank;
	*out = NULL;
	return none(err, errlen);
}

void dlt_gpu_destroy(struct dlt_gpu *g)
{
	(void)g;
}

int dlt_gpu_set_precision(struct dlt_gpu *g, enum dlt_precision p, char *err, size_t errlen)
{
	(void)g;
	(void)p;
	return none(err, errlen);
}

void dlt_gpu_describe(const struct dlt_gpu *g, char *out, size_t len)
{
	(void)g;
	snprintf(out, len, "none");
}

int dlt_gpu_nccl_id(unsigned char *id, char *err, size_t errlen)
{
	memset(id, 0, DLT_GPU_ID_BYTES);
	return none(err, errlen);
}

int dlt_gpu_nccl_init(struct dlt_gpu *g, const unsigned char *id, int rank, int ranks,
		      char *err, size_t errlen)
{
	(void)g;
	(void)id;
	(void)rank;
	(void)ranks;
	return none(err, errlen);
}

int dlt_gpu_add_bucket(struct dlt_gpu *g, size_t lo, size_t hi, int trigger,
		       char *err, size_t errlen)
{
	(void)g;
	(void)lo;
	(void)hi;
	(void)trigger;
	return none(err, errlen);
}

int dlt_gpu_upload(struct dlt_gpu *g, const float *params, const float *state,
		   char *err, size_t errlen)
{
	(void)g;
	(void)params;
	(void)state;
	return none(err, errlen);
}

int dlt_gpu_download(struct dlt_gpu *g, float *params, float *state,
		     char *err, size_t errlen)
{
	(void)g;
	(void)params;
	(void)state;
	return none(err, errlen);
}

int dlt_gpu_forward(struct dlt_gpu *g, const float *x, int rows, int train, uint64_t step,
		    float *logits, char *err, size_t errlen)
{
	(void)g;
	(void)x;
	(void)rows;
	(void)train;
	(void)step;
	(void)logits;
	return none(err, errlen);
}

int dlt_gpu_train_batch(struct dlt_gpu *g, const float *x, const uint8_t *y, int rows,
			float weight, uint64_t step, float *grads, double *loss_sum,
			long *correct, char *err, size_t errlen)
{
	(void)g;
	(void)x;
	(void)y;
	(void)rows;
	(void)weight;
	(void)step;
	(void)grads;
	(void)loss_sum;
	(void)correct;
	return none(err, errlen);
}

int dlt_gpu_optim_step(struct dlt_gpu *g, const struct dlt_optim *o, float lr,
		       unsigned long t, char *err, size_t errlen)
{
	(void)g;
	(void)o;
	(void)lr;
	(void)t;
	return none(err, errlen);
}

int dlt_gpu_step(struct dlt_gpu *g, const float *x, const uint8_t *y, int rows,
		 float weight, uint64_t step, const struct dlt_optim *o, float lr,
		 unsigned long t, float sums[2], char *err, size_t errlen)
{
	(void)g;
	(void)x;
	(void)y;
	(void)rows;
	(void)weight;
	(void)step;
	(void)o;
	(void)lr;
	(void)t;
	(void)sums;
	return none(err, errlen);
}

int dlt_gpu_eval_batch(struct dlt_gpu *g, const float *x, const uint8_t *y, int rows,
		       double *loss_sum, long *correct, char *err, size_t errlen)
{
	(void)g;
	(void)x;
	(void)y;
	(void)rows;
	(void)loss_sum;
	(void)correct;
	return none(err, errlen);
}

void dlt_gpu_times(const struct dlt_gpu *g, double t[4])
{
	(void)g;
	memset(t, 0, 4 * sizeof *t);
}

int dlt_gpu_set_data(struct dlt_gpu *g, const float *x, const uint8_t *y, long rows,
		     char *err, size_t errlen)
{
	(void)g;
	(void)x;
	(void)y;
	(void)rows;
	return none(err, errlen);
}

int dlt_gpu_step_rows(struct dlt_gpu *g, const uint32_t *idx, int rows, float weight,
		      uint64_t step, const struct dlt_optim *o, float lr, unsigned long t,
		      float sums[2], char *err, size_t errlen)
{
	(void)g;
	(void)idx;
	(void)rows;
	(void)weight;
	(void)step;
	(void)o;
	(void)lr;
	(void)t;
	(void)sums;
	return none(err, errlen);
}

int dlt_gpu_queue(struct dlt_gpu *g, const float *x, const uint8_t *y, int rows, float weight,
		  uint64_t step, const struct dlt_optim *o, float lr, unsigned long t,
		  char *err, size_t errlen)
{
	(void)g;
	(void)x;
	(void)y;
	(void)rows;
	(void)weight;
	(void)step;
	(void)o;
	(void)lr;
	(void)t;
	return none(err, errlen);
}

int dlt_gpu_queue_rows(struct dlt_gpu *g, const uint32_t *idx, int rows, float weight,
		       uint64_t step, const struct dlt_optim *o, float lr, unsigned long t,
		       char *err, size_t errlen)
{
	(void)g;
	(void)idx;
	(void)rows;
	(void)weight;
	(void)step;
	(void)o;
	(void)lr;
	(void)t;
	return none(err, errlen);
}

int dlt_gpu_wait(struct dlt_gpu *g, float sums[2], char *err, size_t errlen)
{
	(void)g;
	(void)sums;
	return none(err, errlen);
}

int dlt_gpu_set_profile(struct dlt_gpu *g, int on, char *err, size_t errlen)
{
	(void)g;
	(void)on;
	return none(err, errlen);
}

void dlt_gpu_profile(const struct dlt_gpu *g, struct dlt_gpu_profile *out)
{
	(void)g;
	memset(out, 0, sizeof *out);
}

double dlt_gpu_mem_used(struct dlt_gpu *g)
{
	(void)g;
	return -1.0;
}

int dlt_gpu_set_graph(struct dlt_gpu *g, int on, char *err, size_t errlen)
{
	(void)g;
	(void)on;
	return none(err, errlen);
}

void dlt_gpu_graph_stats(const struct dlt_gpu *g, struct dlt_gpu_graph_stats *out)
{
	(void)g;
	memset(out, 0, sizeof *out);
}

int dlt_gpu_calibrate(const struct dlt_gpu_cal_in *in, struct dlt_gpu_cal *out,
		      char *err, size_t errlen)
{
	(void)in;
	memset(out, 0, sizeof *out);
	return none(err, errlen);
}
