/* lrfind.c - the learning-rate range test */
#include "engine/train/lrfind.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/train/files.h"

#define SLOPE_SPAN 5   /* steps either side of a point for the slope of the smoothed loss */

double dlt_lrfind_rate(int i, int n)
{
	if (n < 2)
		return DLT_LRFIND_LO;
	return DLT_LRFIND_LO * pow(DLT_LRFIND_HI / DLT_LRFIND_LO, (double)i / (double)(n - 1));
}

int dlt_lrfind_init(struct dlt_lrfind *f, int steps)
{
	memset(f, 0, sizeof *f);
	if (steps < 2)
		return -EINVAL;
	f->steps = steps;
	f->lr = calloc((size_t)steps, sizeof *f->lr);
	f->loss = calloc((size_t)steps, sizeof *f->loss);
	f->smooth = calloc((size_t)steps, sizeof *f->smooth);
	if (!f->lr || !f->loss || !f->smooth) {
		dlt_lrfind_free(f);
		return -ENOMEM;
	}
	return 0;
}

void dlt_lrfind_free(struct dlt_lrfind *f)
{
	free(f->lr);
	free(f->loss);
	free(f->smooth);
	memset(f, 0, sizeof *f);
}

int dlt_lrfind_push(struct dlt_lrfind *f, double loss)
{
	double s;

	if (f->stopped || f->n >= f->steps)
		return 0;
	if (!isfinite(loss)) {
		f->stopped = 1;
		return 0;
	}
	f->lr[f->n] = dlt_lrfind_rate(f->n, f->steps);
	f->loss[f->n] = loss;
	f->avg = DLT_LRFIND_BETA * f->avg + (1.0 - DLT_LRFIND_BETA) * loss;
	s = f->avg / (1.0 - pow(DLT_LRFIND_BETA, (double)(f->n + 1)));
	f->smooth[f->n] = s;
	if (f->n == 0 || s < f->best)
		f->best = s;
	f->n++;
	if (f->n > 1 && s > DLT_LRFIND_DIVERGE * f->best)
		f->stopped = 1;
	return !f->stopped && f->n < f->steps;
}

double dlt_lrfind_pick(const struct dlt_lrfind *f, double *steepest, const char **why)
{
	int imin = 0, isteep = -1;
	double steep = 0.0;

	*steepest = 0.0;
	*why = "too few steps to choose";
	if (f->n < 5)
		return 0.0;
	for (int i = 1; i < f->n; i++)
		if (f->smooth[i] < f->smooth[imin])
			imin = i;
	/* the slope over +-SLOPE_SPAN steps (the grid is even in log(rate)) */
	for (int i = 0; i < imin; i++) {
		int a = i - SLOPE_SPAN < 0 ? 0 : i - SLOPE_SPAN;
		int b = i + SLOPE_SPAN > imin ? imin : i + SLOPE_SPAN;
		double d;

		if (b <= a)
			continue;
		d = (f->smooth[b] - f->smooth[a]) / (log(f->lr[b]) - log(f->lr[a]));
		if (d < steep) {
			steep = d;
			isteep = i;
		}
	}
	if (isteep < 0 || f->smooth[imin] >= f->smooth[0]) {
		*why = "the loss never fell";
		return 0.0;
	}
	*steepest = f->lr[isteep];
	*why = "a tenth of the rate of the lowest smoothed loss";
	return f->lr[imin] / 10.0;
}

int dlt_lrfind_write(const struct dlt_lrfind *f, const char *path, double chosen,
		     double steepest, const char *why, char *err, size_t errlen)
{
	size_t cap = 512 + (size_t)f->n * 96, n = 0;
	char *text = malloc(cap);
	int rc;

	if (!text) {
		snprintf(err, errlen, "cannot write \"%s\": %s", path, strerror(ENOMEM));
		return -ENOMEM;
	}
	n += (size_t)snprintf(text + n, cap - n,
			      "chosen_lr=%.6g\nrule=%s\nsteepest_descent_lr=%.6g\nrange=%g..%g\n"
			      "steps=%d of %d\nstopped=%s\nstep,lr,loss,smoothed_loss\n",
			      chosen, why, steepest, DLT_LRFIND_LO,
			      DLT_LRFIND_HI, f->n, f->steps,
			      f->stopped ? "loss diverged" : "all steps");
	for (int i = 0; i < f->n && n < cap; i++)
		n += (size_t)snprintf(text + n, cap - n, "%d,%.6g,%.6f,%.6f\n", i + 1, f->lr[i],
				      f->loss[i], f->smooth[i]);
	rc = dlt_write_atomic_str(path, text, err, errlen);
	free(text);
	return rc;
}

double dlt_lrfind_read_choice(const char *path)
{
	char line[256];
	double lr = 0.0;
	FILE *fp = fopen(path, "r");

	if (!fp)
		return 0.0;
	while (fgets(line, sizeof line, fp))
		if (strncmp(line, "chosen_lr=", 10) == 0) {
			lr = strtod(line + 10, NULL);
			break;
		}
	fclose(fp);
	return isfinite(lr) && lr > 0.0 ? lr : 0.0;
}
