/* proc.h - finding and signalling a job's processes through /proc */
#ifndef DLH_PROC_H
#define DLH_PROC_H

#include <sys/types.h>

/* The start time of pid (field 22 of /proc/PID/stat, clock ticks since
 * boot), or 0 when the process does not exist. */
unsigned long long dlh_proc_start(pid_t pid);

/* 1 when pid is the process that started at start (clock ticks since
 * boot) and has not exited (a zombie has). */
int dlh_proc_alive(pid_t pid, unsigned long long start);

/* The state letter of pid (R, S, D, T, Z, ...), or 0 when it is gone. */
char dlh_proc_state(pid_t pid);

/* Waits until the process pid that started at start has exited (without
 * reaping it: it need not be the caller's child), through a pidfd: no
 * polling. Returns 0 (exited, or was gone), or -errno. */
int dlh_proc_wait_exit(pid_t pid, unsigned long long start);

/* Sends sig to every process whose session id is sid (the session a job's
 * mpirun leads; Open MPI gives each rank its own process group but keeps
 * it in this session). Returns how many processes were signalled. */
int dlh_proc_kill_session(pid_t sid, int sig);

/* Counts the live (not zombie) processes in session sid. */
int dlh_proc_count_session(pid_t sid);

/* As dlh_proc_kill_session and dlh_proc_count_session, but only processes
 * that started at or after start (clock ticks since boot, as from
 * dlh_proc_start): after the session leader is gone its id may be reused,
 * and only processes of the original run are meant. */
int dlh_proc_kill_session_since(pid_t sid, unsigned long long start, int sig);
int dlh_proc_count_session_since(pid_t sid, unsigned long long start);

#endif
