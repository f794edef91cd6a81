/* bind.c - each rank on the CPU the harness gave it */
#define _GNU_SOURCE
#include "engine/train/bind.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 0 when this rank can be pinned to cpus[rank], else -1 with why. node[r]:
 * the node rank r runs on (ranks of other nodes may have the same CPU). */
static int check(const int *cpus, int ncpus, int rank, int ranks, const int *node,
		 const cpu_set_t *allowed, char *why, size_t len)
{
	if (ncpus != ranks) {
		snprintf(why, len, "--cpus gives %d CPUs for %d ranks", ncpus, ranks);
		return -1;
	}
	for (int r = 0; r < rank; r++)
		if (cpus[r] == cpus[rank] && node[r] == node[rank]) {
			snprintf(why, len, "--cpus gives CPU %d to ranks %d and %d", cpus[r], r, rank);
			return -1;
		}
	if (cpus[rank] >= CPU_SETSIZE || !CPU_ISSET(cpus[rank], allowed)) {
		snprintf(why, len, "CPU %d is not among the %d CPUs rank %d may run on", cpus[rank],
			 CPU_COUNT(allowed), rank);
		return -1;
	}
	return 0;
}

int dlt_bind(MPI_Comm comm, const int *cpus, int ncpus, char *why, size_t len)
{
	int rank, ranks, first_bad, mine;
	cpu_set_t allowed, one;

	MPI_Comm_rank(comm, &rank);
	MPI_Comm_size(comm, &ranks);
	why[0] = '\0';
	/* which ranks share this node: each names its node by its first rank */
	MPI_Comm local;
	int leader = rank, *node = malloc((size_t)ranks * sizeof *node);
	MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
	MPI_Bcast(&leader, 1, MPI_INT, 0, local);
	MPI_Comm_free(&local);
	if (!node) {   /* every rank takes part in the collectives or none does */
		fprintf(stderr, "dlh-train: rank %d: out of memory\n", rank);
		MPI_Abort(comm, 1);
	}
	MPI_Allgather(&leader, 1, MPI_INT, node, 1, MPI_INT, comm);
	if (sched_getaffinity(0, sizeof allowed, &allowed) < 0) {
		snprintf(why, len, "sched_getaffinity: %s", strerror(errno));
		mine = rank;
	} else {
		mine = check(cpus, ncpus, rank, ranks, node, &allowed, why, len) ? rank : INT_MAX;
	}
	free(node);
	MPI_Allreduce(&mine, &first_bad, 1, MPI_INT, MPI_MIN, comm);
	if (first_bad == INT_MAX) {
		CPU_ZERO(&one);
		CPU_SET(cpus[rank], &one);
		mine = sched_setaffinity(0, sizeof one, &one) < 0 ? rank : INT_MAX;
		if (mine != INT_MAX)
			snprintf(why, len, "sched_setaffinity CPU %d: %s", cpus[rank], strerror(errno));
		MPI_Allreduce(&mine, &first_bad, 1, MPI_INT, MPI_MIN, comm);
		if (first_bad == INT_MAX)
			return 1;
		/* someone could not: all or nothing, so every rank lets go again */
		sched_setaffinity(0, sizeof allowed, &allowed);
	}
	if (first_bad != rank)   /* only the rank that refused says why */
		why[0] = '\0';
	return 0;
}
