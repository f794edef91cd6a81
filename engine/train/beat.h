/* beat.h - a rank's record of the job's heartbeat file, rewritten at a cadence
 *
 * Rank R rewrites the DLH_HEARTBEAT_REC bytes at R * DLH_HEARTBEAT_REC of
 * DIR/heartbeat (contract.h: `rank=R step=S time=T pid=P host=H`) after a
 * step, at most every DLT_BEAT_EVERY seconds, so that a 240 us step does not
 * pay a write each time; dlhfs's hang watch waits a minute or more, and a
 * step longer than the cadence still rewrites it after every step. Before an
 * evaluation or a checkpoint, and at the end, the caller forces a record. */
#ifndef DLT_BEAT_H
#define DLT_BEAT_H

#include <stddef.h>

#define DLT_BEAT_EVERY 0.5   /* seconds between records at most, while steps come */

struct dlt_beat {
	int fd;                  /* DIR/heartbeat, -1: not written (said once) */
	int rank;                /* whose record, at rank * DLH_HEARTBEAT_REC */
	long pid;                /* this process */
	char host[64];           /* where it runs */
	double every;            /* seconds a step's record may be skipped for */
	double last;             /* epoch seconds of the last record, 0: none yet */
	long step;               /* the step that record told, -1: none */
};

/* Opens DIR/heartbeat (creating it) for rank's record, every seconds apart
 * at most. Returns 0, or -errno with a message in err (b then writes
 * nothing, and the caller trains on). */
int dlt_beat_open(struct dlt_beat *b, const char *dir, int rank, double every,
		  char *err, size_t errlen);

/* Rewrites the record as `step` steps done at now (epoch seconds) when
 * force is set, when none was written yet, or when the last is `every`
 * old. Returns 1 when it wrote, 0 when it had no need (or no file), or
 * -errno when the write failed (the file is then left alone). */
int dlt_beat(struct dlt_beat *b, long step, double now, int force);

/* The realtime clock in epoch seconds: what a record's time is. */
double dlt_beat_now(void);

/* Closes the file (the record stays). */
void dlt_beat_close(struct dlt_beat *b);

#endif
