/* reason.c - why a run failed, from its log
 *
 * Only the last run's part of the log counts: from its "dlhfs: launching"
 * line on. Rank output is tagged there ("[rank R] ..." by dlh-shepherd);
 * which rank failed first is the backend's to read (its launcher's words). */
#include "engine/supervise/reason.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/table/table.h"
#include "engine/util/util.h"

#define REASON_SCAN (1 << 20)   /* bytes of log searched */
#define REASON_TAIL 3           /* lines of a failed rank's output shown */

/* The last REASON_SCAN bytes of j's log, from its last launch on (malloc'd,
 * with *from where the run starts), or NULL. */
static char *run_log(const struct dlh_engine *e, const struct dlh_job *j, char **from)
{
	char path[4096];
	eng_job_file(e, j->id, DLH_FILE_LOG, path, sizeof path);
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct stat st;
	size_t want = 0;
	if (!fstat(fd, &st) && S_ISREG(st.st_mode))
		want = st.st_size > REASON_SCAN ? REASON_SCAN : (size_t)st.st_size;
	char *text = malloc(want + 1);
	ssize_t n = text ? pread(fd, text, want, st.st_size - (off_t)want) : -1;
	close(fd);
	if (n < 0) {
		free(text);
		return NULL;
	}
	text[n] = '\0';
	*from = text;
	for (char *p = strstr(text, "dlhfs: launching"); p; p = strstr(p + 1, "dlhfs: launching"))
		*from = p;
	return text;
}

/* Copies the line at bol into out, without a "[rank R] " tag or the
 * blanks that indent it. */
static void copy_line(const char *bol, char *out, size_t len)
{
	long r;
	int at = 0;
	if (sscanf(bol, "[rank %ld] %n", &r, &at) == 1 && at > 0)
		bol += at;
	while (*bol == ' ' || *bol == '\t')
		bol++;
	size_t l = strcspn(bol, "\n");
	snprintf(out, len, "%.*s", (int)l, bol);
}

/* The first line from `from` holding mark but not ": warning:", into out.
 * Returns 1 when found. */
static int first_line_with(const char *from, const char *mark, char *out, size_t len)
{
	for (const char *p = strstr(from, mark); p; p = strstr(p + 1, mark)) {
		const char *bol = p;
		while (bol > from && bol[-1] != '\n')
			bol--;
		size_t l = strcspn(bol, "\n");
		const char *warn = strstr(bol, ": warning:");
		if (warn && warn < bol + l)
			continue;
		copy_line(bol, out, len);
		return 1;
	}
	return 0;
}

/* The last REASON_TAIL non-empty lines of text (from `from`) that start
 * with tag ("" = every line), joined with " | ", into out. Returns 1 when
 * it wrote any. */
static int tail_of(const char *from, const char *tag, char *out, size_t len)
{
	const char *lines[REASON_TAIL];
	int n = 0;
	size_t tl = strlen(tag);
	for (const char *bol = from; *bol;) {
		size_t l = strcspn(bol, "\n");
		if (!strncmp(bol, tag, tl) && l > tl) {
			if (n == REASON_TAIL)
				memmove(lines, lines + 1, sizeof lines[0] * (REASON_TAIL - 1)), n--;
			lines[n++] = bol;
		}
		bol += l + (bol[l] == '\n');
	}
	size_t used = 0;
	out[0] = '\0';
	for (int i = 0; i < n && used + 4 < len; i++) {
		char one[512];
		copy_line(lines[i], one, sizeof one);
		used += (size_t)snprintf(out + used, len - used, "%s%s", i ? " | " : "", one);
	}
	return n > 0;
}

/* The rank of the last "[rank R] " line from `from`, or -1. */
static int last_tagged_rank(const char *from)
{
	int r = -1;
	for (const char *bol = from; *bol;) {
		long v;
		if (!strncmp(bol, "[rank ", 6) && sscanf(bol, "[rank %ld] ", &v) == 1)
			r = (int)v;
		bol += strcspn(bol, "\n");
		bol += *bol == '\n';
	}
	return r;
}

/* The last lines rank r wrote in j's last run, into out: of its stderr
 * (logs/rank.R.err, written since the run started) when there are any,
 * else of all its output in the log. Returns 1 when it wrote any. */
static int rank_tail(const struct dlh_engine *e, const struct dlh_job *j, const char *from, int r,
		     char *out, size_t len)
{
	char name[64], path[4096], *text = NULL;
	struct stat st;
	size_t n = 0;
	snprintf(name, sizeof name, "%s/rank.%d.err", DLH_DIR_LOGS, r);
	eng_job_file(e, j->id, name, path, sizeof path);
	int ok = !lstat(path, &st) && S_ISREG(st.st_mode) &&
		 (double)st.st_mtim.tv_sec + 1 >= j->run_started && st.st_size > 0 &&
		 !dlh_read_file_nofollow(path, REASON_SCAN, &text, &n) && tail_of(text, "", out, len);
	free(text);
	if (ok)
		return 1;
	snprintf(name, sizeof name, "[rank %d] ", r);
	return tail_of(from, name, out, len);
}

void eng_failure_reason(const struct dlh_engine *e, const struct dlh_job *j, char *pub,
			size_t publen, char *out, size_t len)
{
	static const struct { const char *mark, *what; } marks[] = {
		{ "dlh-train: rank", "dlh-train reported an error" },
		{ "ERROR: AddressSanitizer", "AddressSanitizer reported an error" },
		{ "ERROR: LeakSanitizer", "LeakSanitizer reported a leak" },
		{ "runtime error:", "UndefinedBehaviorSanitizer reported an error" },
	};
	const char *launcher = e->backend.launcher_name;
	out[0] = pub[0] = '\0';
	if (j->exit_code < 0 && j->holder_died) {   /* the holder, not the launcher */
		snprintf(out, len, "dlh-shepherd (which holds the run) was killed by signal %d (%s)",
			 -j->exit_code, strsignal(-j->exit_code));
		snprintf(pub, publen, "%s", out);
		return;
	}
	if (j->exit_code < 0) {   /* the launcher itself was killed: nothing below tells more */
		snprintf(out, len, "%s was killed by signal %d (%s)", launcher, -j->exit_code,
			 strsignal(-j->exit_code));
		snprintf(pub, publen, "%s", out);
		return;
	}
	char *from = NULL, *text = run_log(e, j, &from);
	if (!text)
		return;
	for (size_t m = 0; m < sizeof marks / sizeof marks[0] && !out[0]; m++)
		if (first_line_with(from, marks[m].mark, out, len))
			snprintf(pub, publen, "%s", marks[m].what);
	int code = 0, r = e->backend.ops->failed_rank(&e->backend, from, &code);
	char tail[DLH_REASON_MAX / 2];
	/* what the launcher says of the rank is public; the rank's own words
	 * are its owner's */
	if (!out[0] && r >= 0) {
		if (code > 0)
			snprintf(pub, publen, "rank %d exited with status %d", r, code);
		else if (code < 0)
			snprintf(pub, publen, "rank %d was killed by signal %d (%s)", r, -code,
				 strsignal(-code));
		else
			snprintf(pub, publen, "rank %d failed", r);
		if (rank_tail(e, j, from, r, tail, sizeof tail))
			snprintf(out, len, "%s: %s", pub, tail);
		else if (code)
			snprintf(out, len, "%s", pub);
		else
			pub[0] = '\0';
	}
	if (!out[0] && first_line_with(from, "MPI_ABORT was invoked", out, len))
		snprintf(pub, publen, "MPI_ABORT was invoked");
	/* the launcher did not say which rank failed: the last one that spoke */
	if (!out[0] && r < 0 && (r = last_tagged_rank(from)) >= 0 && rank_tail(e, j, from, r, tail, sizeof tail)) {
		snprintf(pub, publen, "%s exited with status %d", launcher, j->exit_code);
		snprintf(out, len, "%s; the last lines, of rank %d: %s", pub, r, tail);
	}
	free(text);
}
