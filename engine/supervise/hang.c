/* hang.c - a run that no longer steps: found, named, stopped
 *
 * Every rank of dlh-train rewrites its record of the job's heartbeat file
 * after a step at most every 0.5 s, and after every step slower than that
 * (contract.h); a [job] command shows it steps by growing
 * metrics.csv (its modification time; or by the heartbeat records, where it
 * writes them), and is watched from its first row on. The timer thread asks eng_hang_check when the run would be
 * hung at the earliest; nothing polls in between. A rank that stalls (a
 * SIGSTOP, a dead filesystem) holds every other in the next collective, so
 * which one stalls is told by its process state first (stopped, in
 * uninterruptible sleep, gone), then by the oldest record. */
#include "engine/supervise/hang.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/table/table.h"
#include "engine/run/proc.h"
#include "engine/util/util.h"

#define HANG_RANKS_READ 4096     /* records read of a heartbeat file */

void eng_hang_arm(struct dlh_engine *e, struct dlh_job *j)
{
	char path[4096], v[64], *text = NULL;
	double step_s = 0;
	j->hung = 0;
	j->hang_why[0] = '\0';
	j->hang_pending = 0;
	j->hang_held = 0;
	if (j->spec.hang_timeout > 0) {
		j->hang_after = (double)j->spec.hang_timeout;
		return;
	}
	eng_job_file(e, j->id, "estimate", path, sizeof path);
	if (!dlh_read_file_nofollow(path, 1 << 16, &text, NULL) &&
	    !dlh_kv_get(text, "step_s", v, sizeof v))
		step_s = strtod(v, NULL);
	free(text);
	j->hang_after = ENG_HANG_STEPS * step_s > ENG_HANG_MIN ? ENG_HANG_STEPS * step_s :
								   ENG_HANG_MIN;
}

/* What a process's state letter says of a stalled rank, or NULL. */
static const char *state_words(char st)
{
	switch (st) {
	case 'T': case 't': return "stopped (SIGSTOP or a debugger)";
	case 'D': return "in uninterruptible sleep (I/O: a hung filesystem?)";
	case 'Z': return "dead (a zombie)";
	case 0: return "gone";
	default: return NULL;
	}
}

/* The bytes of metrics.csv's header line at path, its newline included
 * (with a program's extra columns it is longer than DLH_METRICS_HEADER);
 * DLH_METRICS_HEADER's when it cannot be read. Opened never to wait: the
 * run's owner writes it. */
static off_t header_bytes(const char *path)
{
	char line[DLH_METRICS_LINE_MAX];
	off_t n = (off_t)strlen(DLH_METRICS_HEADER);
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return n;
	ssize_t got = pread(fd, line, sizeof line, 0);
	close(fd);
	const char *nl = got > 0 ? memchr(line, '\n', (size_t)got) : NULL;
	return nl && !strncmp(line, "kind,", 5) ? (off_t)(nl - line) + 1 : n;
}

/* The newest heartbeat of j's run (epoch seconds; 0 when none since the
 * run started) and, into why, the rank that stalls. */
static double newest_beat(struct dlh_engine *e, struct dlh_job *j, char *why, size_t len)
{
	char path[4096], host[64], *text = NULL;
	size_t n = 0;
	double newest = 0, oldest = 0;
	struct dlh_heartbeat h, pick = { .rank = -1 };
	const char *pick_state = NULL;
	why[0] = '\0';
	if (gethostname(host, sizeof host) < 0)
		host[0] = '\0';
	host[sizeof host - 1] = '\0';
	eng_job_file(e, j->id, DLH_FILE_HEARTBEAT, path, sizeof path);
	if (!dlh_read_file_nofollow(path, (size_t)HANG_RANKS_READ * DLH_HEARTBEAT_REC, &text, &n)) {
		for (size_t at = 0; at + DLH_HEARTBEAT_REC <= n; at += DLH_HEARTBEAT_REC) {
			if (dlh_heartbeat_parse(text + at, DLH_HEARTBEAT_REC, &h) ||
			    h.time < j->run_started)
				continue;
			newest = h.time > newest ? h.time : newest;
			const char *st = strcmp(h.host, host) ? NULL :
					 state_words(dlh_proc_state((pid_t)h.pid));
			if (!pick_state && (st || !oldest || h.time < oldest)) {
				pick = h;
				pick_state = st;
				oldest = h.time;
			}
		}
		free(text);
	}
	if (pick.rank >= 0)
		snprintf(why, len, "rank %ld (pid %ld on %s, %ld steps done) %s", pick.rank,
			 pick.pid, pick.host, pick.step,
			 pick_state ? pick_state : "has the oldest heartbeat");
	struct stat st;   /* a [job] command: its metrics rows */
	eng_job_file(e, j->id, DLH_FILE_METRICS, path, sizeof path);
	/* a row past the header: the header alone is no step (data may load) */
	if (j->spec.command[0] && !lstat(path, &st) && S_ISREG(st.st_mode) &&
	    st.st_size > header_bytes(path)) {
		double t = (double)st.st_mtim.tv_sec + 1e-9 * (double)st.st_mtim.tv_nsec;
		if (t >= j->run_started && t > newest)
			newest = t;
	}
	return newest;
}

double eng_hang_check(struct dlh_engine *e, struct dlh_job *j, double now)
{
	char why[256], lim[32], idle[32];
	if (j->hung || j->kill_at || j->cancelling || j->hang_after <= 0 || !j->run.pid)
		return 0;
	/* held pending by its launcher (Slurm requeued it): nothing steps, and
	 * the quiet counts from when it was last seen so (the note reads the
	 * job's directory only, never asks the launcher) */
	char note[256];
	if (eng_run_note(e, j->id, note, sizeof note) == 1) {
		j->hang_pending = dlh_now();
		j->hang_held = 1;
		return now + ENG_HANG_LOOK;
	}
	if (j->hang_held) {   /* going again: its start-up counts from now */
		j->hang_pending = dlh_now();
		j->hang_held = 0;
	}
	double last = newest_beat(e, j, why, sizeof why);
	if (!last && j->spec.command[0])   /* a command that shows no step yet: not */
		return now + ENG_HANG_LOOK;  /* watched, but looked at again */
	double after = j->hang_after;
	if (!last) {   /* starting: loading data may take longer than a step */
		last = j->run_started;
		if (j->spec.hang_timeout <= 0 && after < ENG_HANG_STARTUP)
			after = ENG_HANG_STARTUP;
	}
	if (last < j->hang_pending)   /* it ran again since: a start-up of its own */
		last = j->hang_pending;
	double quiet = dlh_now() - last;
	if (quiet < after)
		return now + (after - quiet) + 0.05;
	dlh_duration(after, lim, sizeof lim);
	dlh_duration(quiet, idle, sizeof idle);
	snprintf(j->hang_why, sizeof j->hang_why, "hung: no step for %s (hang_timeout %s)%s%s",
		 idle, lim, why[0] ? ": " : "", why);
	eng_job_log(e, j, "%s; stopping the run", j->hang_why);
	j->hung = 1;   /* the caller stops the run */
	return 0;
}
