/* join.h - a rank on another node joins its run's cgroup there
 *
 * The daemon starts a helper on each other node of a run (dlh-probe --hold,
 * engine/probe/hold.c) that makes the run's cgroup there and listens on an
 * abstract unix socket named for the run (abstract names are per network
 * namespace: per node). A rank whose node has one (DLH_NODECG,
 * DLH_NODECG_NODES of engine/contract) connects first thing; the helper
 * checks who it is (SO_PEERCRED: the run's owner), moves it into the
 * group and answers. Then the rank goes on, and what it starts is inside.
 * Shared by dlh-rank and dlh-train; no allocation, no shell. */
#ifndef DLH_RUN_JOIN_H
#define DLH_RUN_JOIN_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

#define DLH_NODECG_NAME_MAX 80    /* a run's helper name (socket and group) */
#define DLH_NODECG_WAIT_S 10      /* seconds a rank waits for the helper to listen, and
				     for its answer (it is started as mpirun is) */

/* The abstract address of the helper called name into a; its length. */
socklen_t dlh_nodecg_addr(const char *name, struct sockaddr_un *a);

/* Joins this process to its run's cgroup on this node where the
 * environment says there is a helper here. Returns 0 when there is none
 * to join (a rank on dlhfs's own machine, or a run without one), 1 when
 * joined (msg: the group), or -1 with msg saying why it could not (the
 * rank then runs outside, as before). */
int dlh_nodecg_join(char *msg, size_t len);

#endif
