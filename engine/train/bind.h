/* bind.h - each rank on the CPU the harness gave it
 *
 * The engine holds one CPU slot per rank and passes them as --cpus. A rank
 * left to the scheduler migrates between the CPUs and its batch thread
 * runs on the other ranks' CPUs; pinned, every rank's compute, buffers and
 * batch thread stay on the CPU the job holds. Two equal ranks of the MLP run
 * as fast either way here; ranks of unequal speed (bench/hetero) keep the
 * fast one's step steadier. Pinning is all or nothing: when any rank cannot have its CPU (not
 * among those it may run on, e.g. a pool file naming more CPUs than the
 * machine has) no rank is pinned and the run goes on as before. */
#ifndef DLT_BIND_H
#define DLT_BIND_H

#include <mpi.h>
#include <stddef.h>

/* Pins the calling process (its threads so far, and every thread it starts
 * later) to cpus[rank of comm]; ncpus must equal the ranks of comm.
 * Collective. Returns 1 when every rank was pinned, else 0 with the first
 * refusing rank's reason in why on that rank (empty on the others). */
int dlt_bind(MPI_Comm comm, const int *cpus, int ncpus, char *why, size_t len);

#endif
