/* hold.h - dlh-probe --hold: a run's cgroup on this node, held for the run */
#ifndef DLH_PROBE_HOLD_H
#define DLH_PROBE_HOLD_H

/* dlh-probe --hold --name NAME --uid UID [--slots S,S...] [--memory BYTES]
 * [--pids N] (argv from after "--hold"; see hold.c). Returns the exit
 * status; 2 for words it does not take. */
int dlh_probe_hold(int argc, char **argv);

#endif
