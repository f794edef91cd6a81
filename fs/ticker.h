/* ticker.h - a thread that looks at a module's work every period while it
 * has some, and sleeps while it has none (poll.c's waiters, kcache.c's
 * files the kernel holds) */
#ifndef DLH_FS_TICKER_H
#define DLH_FS_TICKER_H

#include <pthread.h>

struct fs_ticker {
	pthread_mutex_t *mu;    /* the module's: guards what busy and hurry read */
	pthread_cond_t *cv;     /* the module signals it (mu held) when work comes,
				   or when *hurry is set */
	int (*busy)(void);      /* mu held: 1 while there is something to look at */
	void (*tick)(void);     /* one look, called without mu */
	long period_ns;         /* between the end of a look and the next */
	int *hurry;             /* NULL, or a flag (under mu) that ends a wait early */
	pthread_t thread;       /* the rest is the ticker's own (under mu) */
	int running, stopping;
};

/* Starts t's thread. Returns 0, or -errno. */
int fs_ticker_start(struct fs_ticker *t);

/* Stops it: wakes it, waits for its look to end and joins it. */
void fs_ticker_stop(struct fs_ticker *t);

#endif
