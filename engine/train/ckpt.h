/* ckpt.h - checkpoints: the binary format, atomic save, `latest`, pruning */
#ifndef DLT_CKPT_H
#define DLT_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "engine/contract/contract.h"

/* File layout, little-endian:
 *   0  char[8]  magic "DLHCKPT\0"
 *   8  u32      version (DLT_CKPT_VERSION)
 *  12  u32      header size (DLT_CKPT_HEADER)
 *  16  u64      nparams
 *  24  u64      step            global steps done
 *  32  u64      epoch           1-based epoch of that step (0 before any)
 *  40  u64      seed
 *  48  f64      elapsed_s       wall clock of the run so far
 *  56  f64      train_s         wall-clock time of the training loop (steps,
 *                                   rows, evaluations, checkpoints)
 *  64  f64      epoch_loss_sum  sum of the step losses of that epoch so far
 *  72  u64      epoch_steps     steps of that epoch so far
 *  80  f64      test_loss       last evaluation (NaN if none yet)
 *  88  f64      test_acc
 *  96  u64      eval_step       step of the last evaluation (0 if none)
 * 104  u32      optimizer       enum dlt_optim_kind (0 = unknown)        (v2)
 * 108  u32      nstate          optimizer state arrays, 1 or 2           (v2)
 * 112  ...      zero
 * 124  u32      crc32 of bytes [0, 124) and the payload
 * 128  f32[nparams] params, then nstate x f32[nparams] optimizer state
 *      (SGD/Nesterov: momentum buffers; Adam: m, then v)
 * Version 1 had no optimizer fields and always one state array; it is
 * refused (by version number) with a message. */
#define DLT_CKPT_MAGIC "DLHCKPT"        /* 7 chars and the NUL */
#define DLT_CKPT_VERSION 2u
#define DLT_CKPT_MAX_STATE 2          /* most optimizer state arrays */
#define DLT_CKPT_HEADER 128             /* header bytes */
#define DLT_CKPT_KEEP 3                 /* step-* checkpoints kept */
#define DLT_CKPT_NAME_MAX 64            /* longest checkpoint file name */
#define DLT_CKPT_FINAL "final.ckpt"
#define DLT_CKPT_LATEST DLH_FILE_LATEST   /* engine/contract/contract.h */

struct dlt_ckpt_meta {
	uint64_t nparams;        /* floats in params (and in momentum) */
	uint64_t step;           /* global steps done */
	uint64_t epoch;          /* 1-based epoch of step */
	uint64_t seed;           /* --seed of the run */
	double elapsed_s;        /* wall clock since the first start */
	double train_s;          /* wall-clock seconds of the training loop */
	double epoch_loss_sum;   /* sum of the step losses of epoch so far */
	uint64_t epoch_steps;    /* steps of epoch so far */
	double test_loss;        /* last evaluation, NaN if none */
	double test_acc;         /* last evaluation, NaN if none */
	uint64_t eval_step;      /* step of the last evaluation, 0 if none */
	uint32_t optimizer;      /* enum dlt_optim_kind of the state, 0 = unknown */
	uint32_t nstate;         /* state arrays of nparams floats, 1..DLT_CKPT_MAX_STATE */
};

/* Writes a checkpoint atomically (tmp + fsync + rename) to path: params
 * (m->nparams floats) and state (m->nstate x m->nparams floats; nstate 0
 * counts as 1). Returns 0, or -errno with a message in err. */
int dlt_ckpt_write(const char *path, const struct dlt_ckpt_meta *m,
		   const float *params, const float *state,
		   char *err, size_t errlen);

/* Reads the checkpoint at path into *m, params (nparams floats) and state
 * (nstate x nparams floats), after checking the magic, version, size, that
 * its parameter count is nparams and its state count nstate, and the
 * checksum. Returns 0, or -errno (-EINVAL: not a checkpoint, an older
 * version, another model or optimizer, corrupt) with a message in err;
 * params and state may then hold garbage. */
int dlt_ckpt_read(const char *path, struct dlt_ckpt_meta *m, size_t nparams,
		  int nstate, float *params, float *state, char *err, size_t errlen);

/* The newest step-* checkpoint of dir older than name (a step-N name: a
 * smaller step; another name, final.ckpt: any) into out: where a resume
 * falls back to when name is damaged. Returns 0, -ENOENT when there is
 * none, or -errno with a message in err. */
int dlt_ckpt_previous(const char *dir, const char *name, char *out, size_t len,
		      char *err, size_t errlen);

/* Compares the payloads (parameters and optimizer state) of checkpoints a
 * and b, ignoring the header (whose timing fields differ between runs).
 * Returns 1 when they are byte for byte the same, 0 when not (a message
 * naming the first differing float goes in err), or -errno with a message
 * when one cannot be read. */
int dlt_ckpt_same_payload(const char *a, const char *b, char *err, size_t errlen);

/* The largest absolute difference between the payload floats (parameters
 * and optimizer state) of checkpoints a and b into *diff, the largest
 * magnitude of a's into *mag, their count into *n. Returns 0, or -errno
 * with err (not checkpoints, or payloads of different sizes). */
int dlt_ckpt_payload_diff(const char *a, const char *b, double *diff, double *mag, long *n,
			  char *err, size_t errlen);

/* Writes the name of step's checkpoint ("step-00000500.ckpt") into out.
 * Returns 0, or -ENAMETOOLONG. */
int dlt_ckpt_step_name(uint64_t step, char *out, size_t len);

/* Saves a checkpoint named name in directory dir, then rewrites dir/latest
 * atomically to hold "NAME\n", then removes all but the DLT_CKPT_KEEP
 * newest step-* checkpoints. Returns 0, or -errno with a message in err. */
int dlt_ckpt_save(const char *dir, const char *name,
		  const struct dlt_ckpt_meta *m, const float *params,
		  const float *state, char *err, size_t errlen);

/* Reads dir/latest into name (the file name alone). Returns 0, -ENOENT
 * when there is no latest file, or another -errno (-EINVAL: not a plain
 * file name) with a message in err. */
int dlt_ckpt_latest(const char *dir, char *name, size_t len,
		    char *err, size_t errlen);

#endif
