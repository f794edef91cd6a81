/* proc.c - finding and signalling a job's processes through /proc */
#include "engine/run/proc.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Parses /proc/PID/stat: state, session and start time. The command name
 * may hold spaces and parentheses, so fields are counted after the last ')'.
 * Returns 0, or -1 when the process is gone. */
static int read_stat(pid_t pid, char *state, pid_t *sid, unsigned long long *start)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	if (!p)
		return -1;
	/* after ')': state(3) ppid(4) pgrp(5) session(6) ... starttime(22) */
	char st;
	long ppid, pgrp, session;
	if (sscanf(p + 1, " %c %ld %ld %ld", &st, &ppid, &pgrp, &session) != 4)
		return -1;
	unsigned long long t = 0;
	char *q = p + 1;
	for (int field = 3; field < 22 && q; field++) {
		q = strchr(q + 1, ' ');
	}
	if (q)
		t = strtoull(q + 1, NULL, 10);
	if (state)
		*state = st;
	if (sid)
		*sid = (pid_t)session;
	if (start)
		*start = t;
	return 0;
}

unsigned long long dlh_proc_start(pid_t pid)
{
	unsigned long long t;
	char st;
	if (pid <= 0 || read_stat(pid, &st, NULL, &t))
		return 0;
	return t;
}

int dlh_proc_alive(pid_t pid, unsigned long long start)
{
	unsigned long long t;
	char st;
	return pid > 0 && !read_stat(pid, &st, NULL, &t) && t == start && st != 'Z';
}

char dlh_proc_state(pid_t pid)
{
	char st;
	return pid > 0 && !read_stat(pid, &st, NULL, NULL) ? st : 0;
}

int dlh_proc_wait_exit(pid_t pid, unsigned long long start)
{
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (fd < 0)
		return errno == ESRCH ? 0 : -errno;
	/* the pid may have been reused before the pidfd was taken */
	if (!dlh_proc_alive(pid, start)) {
		close(fd);
		return 0;
	}
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int rc;
	while ((rc = poll(&p, 1, -1)) < 0 && errno == EINTR)
		;
	rc = rc < 0 ? -errno : 0;
	close(fd);
	return rc;
}

/* Sends sig (0: none) to each live process of session sid that started
 * at or after start; returns the count. */
static int for_session(pid_t sid, unsigned long long start, int sig)
{
	if (sid <= 1)
		return 0;
	DIR *d = opendir("/proc");
	if (!d)
		return 0;
	int count = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (*end || pid <= 0)
			continue;
		char st;
		pid_t s;
		unsigned long long t;
		if (read_stat((pid_t)pid, &st, &s, &t) || s != sid || st == 'Z' || t < start)
			continue;
		if (sig)
			kill((pid_t)pid, sig);
		count++;
	}
	closedir(d);
	return count;
}

int dlh_proc_kill_session(pid_t sid, int sig)
{
	return for_session(sid, 0, sig);
}

int dlh_proc_count_session(pid_t sid)
{
	return for_session(sid, 0, 0);
}

int dlh_proc_kill_session_since(pid_t sid, unsigned long long start, int sig)
{
	return for_session(sid, start, sig);
}

int dlh_proc_count_session_since(pid_t sid, unsigned long long start)
{
	return for_session(sid, start, 0);
}
