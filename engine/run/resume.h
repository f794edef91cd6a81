/* resume.h - a [job] command run again: its newest checkpoint, the step it
 * was taken at, metrics.csv cut back to it, `latest` kept (resume.c) */
#ifndef DLH_RUN_RESUME_H
#define DLH_RUN_RESUME_H

#include <stddef.h>
#include <sys/types.h>

/* The newest checkpoint of job_dir's checkpoints/: the file `latest`
 * names, else the newest regular file by modification time, into name.
 * Returns 0, or -ENOENT. */
int eng_ckpt_newest(const char *job_dir, char *name, size_t len);

/* The last number in a checkpoint's name ("step-00000040.ckpt" -> 40), or -1. */
long eng_ckpt_step(const char *name);

/* Cuts metrics.csv at csv before its first row past step (the header and
 * the rows up to it stay). Returns 0 (also when there is no such file), or
 * -errno. */
int eng_metrics_keep(const char *csv, long step);

/* Where a run of the job in job_dir takes up: the newest checkpoint's path
 * and the step it was taken at (its name's number, else the last train row).
 * Returns 0, or -ENOENT when it has none. */
int eng_resume_point(const char *job_dir, char *path, size_t len, long *step);

/* Points checkpoints/latest of job_dir at the newest checkpoint when it
 * names another (or none), the file owned by uid:gid (the job's owner, who
 * may rewrite it). */
void eng_latest_update(const char *job_dir, uid_t uid, gid_t gid);

/* Where a command's program takes up after a run in job_dir ended: its
 * newest checkpoint (latest, owned by uid:gid, points at it) into path and
 * the step into *step; metrics.csv cut back to that step (why says so if
 * it could not be). Files its owner writes: never under the engine's lock.
 * Returns 0, or -ENOENT when it left no checkpoint (it starts again;
 * nothing is cut). */
int eng_take_up(const char *job_dir, uid_t uid, gid_t gid, char *path, size_t len, long *step,
		char *why, size_t whylen);

#endif
