/* ctl.h - requests from the harness to a running trainer: checkpoint now, suspend
 *
 * dlhfs signals the run, and the launcher forwards the signal to every rank
 * (the meanings are engine/contract/contract.h's):
 *   DLH_SIG_CHECKPOINT  write a checkpoint at the next step boundary, keep training
 *   DLH_SIG_SUSPEND     write a checkpoint at the next step boundary, then exit
 *                       with DLH_EXIT_SUSPENDED ("suspended, not failed")
 * A handler only records the request; the ranks agree on it at a step
 * boundary (dlt_ctl_poll), so every rank stops after the same step. */
#ifndef DLT_CTL_H
#define DLT_CTL_H

#include "engine/contract/contract.h"

enum dlt_ctl_request {
	DLT_CTL_NONE = 0,        /* keep training */
	DLT_CTL_CHECKPOINT = 1,  /* write a checkpoint now, keep training */
	DLT_CTL_SUSPEND = 2,     /* write a checkpoint now, then exit DLH_EXIT_SUSPENDED */
};

/* Installs the SIGUSR1 and SIGUSR2 handlers (SA_RESTART). Call first thing
 * in main, before MPI_Init, so an early request is kept, not fatal. */
void dlt_ctl_install(void);

/* Takes this rank's pending request (DLT_CTL_NONE when there is none). */
enum dlt_ctl_request dlt_ctl_take(void);

/* Puts request r of this rank as two floats (checkpoint, suspend: 0 or 1)
 * into f, to be summed over the ranks with the step's gradients. */
void dlt_ctl_encode(enum dlt_ctl_request r, float f[2]);

/* The strongest request of any rank from those floats summed over the
 * ranks (suspend over checkpoint over none). */
enum dlt_ctl_request dlt_ctl_decode(const double sum[2]);

/* Collective over MPI_COMM_WORLD, called by every rank at each step
 * boundary: takes this rank's pending request and returns the strongest
 * request of any rank (suspend over checkpoint over none). */
enum dlt_ctl_request dlt_ctl_poll(void);

#endif
