/* lrfind.h - the learning-rate range test (Smith 2017; the fastai lr_find):
 * train a few hundred steps with the rate growing exponentially from lo to
 * hi, smooth the loss curve, and pick a rate from it */
#ifndef DLT_LRFIND_H
#define DLT_LRFIND_H

#include <stddef.h>

#define DLT_LRFIND_LO 1e-6          /* first rate of the sweep */
#define DLT_LRFIND_HI 10.0          /* last rate */
#define DLT_LRFIND_STEPS 200        /* default steps of the sweep */
#define DLT_LRFIND_BETA 0.95        /* loss smoothing (exponential, bias-corrected) */
#define DLT_LRFIND_DIVERGE 4.0      /* stop once the smoothed loss passes 4x its minimum */

/* The sweep so far and what it chose. */
struct dlt_lrfind {
	int steps;          /* planned steps */
	int n;              /* steps recorded */
	double *lr;         /* rate of each recorded step */
	double *loss;       /* its (global batch) training loss */
	double *smooth;     /* the smoothed loss */
	double avg;         /* running average for the smoothing */
	double best;        /* lowest smoothed loss so far */
	int stopped;        /* 1 = the loss diverged: no more steps */
};

/* Returns the rate of 0-based step i of a sweep of n steps: lo (hi/lo)^(i/(n-1)). */
double dlt_lrfind_rate(int i, int n);

/* Allocates a sweep of steps (>= 2) steps. Returns 0 or -ENOMEM. */
int dlt_lrfind_init(struct dlt_lrfind *f, int steps);

/* Frees it. */
void dlt_lrfind_free(struct dlt_lrfind *f);

/* Records the loss of the next step (trained at dlt_lrfind_rate(f->n,
 * f->steps)). Returns 1 while the sweep should go on, 0 when it is done
 * (all steps, or the loss diverged or is not finite). */
int dlt_lrfind_push(struct dlt_lrfind *f, double loss);

/* The choice: a tenth of the rate at the lowest smoothed loss (fastai's
 * lr_min; on the bench MLP it lands next to the hand-tuned rate, where the
 * steepest descent of the smoothed loss, also found and set in *steepest,
 * is 3-5x lower and trains slower). Sets *why to a short phrase. Returns
 * the rate, or 0 when fewer than 5 steps were recorded or the loss never
 * fell. */
double dlt_lrfind_pick(const struct dlt_lrfind *f, double *steepest, const char **why);

#define DLT_LRFIND_FILE "lr_finder"   /* in the job dir */

/* Writes the sweep and the choice to path (atomically): key=value lines
 * (chosen_lr, rule, steepest_descent_lr, range, steps, stopped), then a CSV table with a
 * header, step,lr,loss,smoothed_loss, one row per step. Returns 0, or
 * -errno with a message in err. */
int dlt_lrfind_write(const struct dlt_lrfind *f, const char *path, double chosen,
		     double steepest, const char *why, char *err, size_t errlen);

/* Reads the chosen_lr of a file dlt_lrfind_write wrote. Returns the rate,
 * or 0 when there is no such file or it holds no positive rate. */
double dlt_lrfind_read_choice(const char *path);

#endif
