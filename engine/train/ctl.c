/* ctl.c - requests from the harness to a running trainer: checkpoint now, suspend */
#include "engine/train/ctl.h"

#include <mpi.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

/* One flag per request, set by the handler (on whichever thread the signal
 * lands) and taken with an atomic exchange: none is ever lost in between. */
static atomic_int want_checkpoint;
static atomic_int want_suspend;

static void on_signal(int sig)
{
	atomic_store(sig == DLH_SIG_SUSPEND ? &want_suspend : &want_checkpoint, 1);
}

void dlt_ctl_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(DLH_SIG_CHECKPOINT, &sa, NULL);
	sigaction(DLH_SIG_SUSPEND, &sa, NULL);
}

enum dlt_ctl_request dlt_ctl_take(void)
{
	enum dlt_ctl_request mine = DLT_CTL_NONE;

	if (atomic_exchange(&want_checkpoint, 0))
		mine = DLT_CTL_CHECKPOINT;
	if (atomic_exchange(&want_suspend, 0))
		mine = DLT_CTL_SUSPEND;
	return mine;
}

void dlt_ctl_encode(enum dlt_ctl_request r, float f[2])
{
	f[0] = r == DLT_CTL_CHECKPOINT;
	f[1] = r == DLT_CTL_SUSPEND;
}

enum dlt_ctl_request dlt_ctl_decode(const double sum[2])
{
	/* counts of ranks: exact in float up to 2^24 ranks */
	return sum[1] > 0.5 ? DLT_CTL_SUSPEND : sum[0] > 0.5 ? DLT_CTL_CHECKPOINT : DLT_CTL_NONE;
}

enum dlt_ctl_request dlt_ctl_poll(void)
{
	int mine = (int)dlt_ctl_take(), all = DLT_CTL_NONE;

	MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	return (enum dlt_ctl_request)all;
}
