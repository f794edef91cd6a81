/* launch.c - launch overhead: close() of jobs/new to the first metrics row,
 * against the same mpirun argv started directly, alternating A B A B.
 *
 *   bench-launch MOUNT STATE SPEC ROUNDS
 *
 * MOUNT is a mounted dlhfs whose state directory is STATE (polled directly,
 * so the poll itself adds no FUSE round trip). Prints a table in ms. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine/util/util.h"

#define ROUNDS_MAX 100
#define POLL_NS (250 * 1000)     /* 0.25 ms between looks at metrics.csv */
#define WAIT_S 60.0              /* give up on a run after this long */

extern char **environ;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* 1 once path holds a complete "train," row. */
static int has_train_row(const char *path)
{
	char buf[8192];
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	char *row = strstr(buf, "\ntrain,");
	return row && strchr(row + 1, '\n') != NULL;
}

/* Waits for the first train row of path; returns the time it was seen, or -1. */
static double wait_first_row(const char *path, double t0)
{
	struct timespec ts = { 0, POLL_NS };
	while (now() - t0 < WAIT_S) {
		if (has_train_row(path))
			return now();
		nanosleep(&ts, NULL);
	}
	return -1;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

/* One run through the mount: returns ms from close() to the first row. */
static double run_dlh(const char *mnt, const char *state, const char *spec, long id)
{
	char path[4096], csv[4096];
	snprintf(path, sizeof path, "%s/jobs/new", mnt);
	int fd = open(path, O_WRONLY | O_TRUNC);
	if (fd < 0 || write(fd, spec, strlen(spec)) != (ssize_t)strlen(spec)) {
		perror("jobs/new");
		exit(1);
	}
	double t0 = now();
	if (close(fd)) {
		perror("close(jobs/new)");
		exit(1);
	}
	snprintf(csv, sizeof csv, "%s/jobs/%ld/metrics.csv", state, id);
	double t1 = wait_first_row(csv, t0);
	snprintf(path, sizeof path, "%s/jobs/%ld/ctl", mnt, id);
	write_file(path, "cancel\n");
	/* wait for the slots to be free again */
	snprintf(path, sizeof path, "%s/jobs/%ld/status", mnt, id);
	struct timespec ts = { 0, 2 * 1000 * 1000 };
	for (double t = now(); now() - t < WAIT_S;) {
		char st[32] = "";
		FILE *f = fopen(path, "r");
		if (f) {
			if (!fgets(st, sizeof st, f))
				st[0] = '\0';
			fclose(f);
		}
		if (!strncmp(st, "cancelled", 9) || !strncmp(st, "succeeded", 9) || !strncmp(st, "failed", 6))
			break;
		nanosleep(&ts, NULL);
	}
	return t1 < 0 ? -1 : (t1 - t0) * 1e3;
}

/* One direct run of argv with --job-dir replaced by dir. */
static double run_direct(char **argv, int jobdir_at, const char *dir)
{
	char csv[4096];
	dlh_mkdir_p(dir, 0755);
	argv[jobdir_at] = (char *)dir;
	snprintf(csv, sizeof csv, "%s/metrics.csv", dir);
	double t0 = now();
	pid_t pid = fork();
	if (pid == 0) {
		setsid();
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 1);
		dup2(null, 2);
		execve(argv[0], argv, environ);
		_exit(127);
	}
	double t1 = wait_first_row(csv, t0);
	kill(-pid, SIGTERM);
	waitpid(pid, NULL, 0);
	kill(-pid, SIGKILL);
	return t1 < 0 ? -1 : (t1 - t0) * 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: bench-launch MOUNT STATE SPEC ROUNDS\n");
		return 2;
	}
	const char *mnt = argv[1], *state = argv[2];
	int rounds = atoi(argv[4]);
	if (rounds < 1 || rounds > ROUNDS_MAX) {
		fprintf(stderr, "bench-launch: ROUNDS must be 1..%d\n", ROUNDS_MAX);
		return 2;
	}
	char *spec;
	if (dlh_read_file(argv[3], 65536, &spec, NULL)) {
		fprintf(stderr, "bench-launch: cannot read %s\n", argv[3]);
		return 1;
	}
	setenv("OPENBLAS_NUM_THREADS", "1", 1);
	setenv("OMP_NUM_THREADS", "1", 1);
	setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
	setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);

	/* job 1 (a warm-up) gives the exact argv dlhfs runs */
	double warm = run_dlh(mnt, state, spec, 1);
	char path[4096], *plan;
	snprintf(path, sizeof path, "%s/jobs/1/plan", state);
	if (warm < 0 || dlh_read_file(path, 1 << 20, &plan, NULL)) {
		fprintf(stderr, "bench-launch: the warm-up job did not train (see %s/jobs/1/log)\n", state);
		return 1;
	}
	char *line = strstr(plan, "\nargv ");
	if (!line) {
		fprintf(stderr, "bench-launch: no argv line in the plan\n");
		return 1;
	}
	line += 6;
	line[strcspn(line, "\n")] = '\0';
	char *words[256];
	int nw = 0, jobdir_at = -1;
	for (char *w = strtok(line, " "); w && nw < 255; w = strtok(NULL, " ")) {
		if (nw > 0 && !strcmp(words[nw - 1], "--job-dir"))
			jobdir_at = nw;
		words[nw++] = w;
	}
	words[nw] = NULL;
	if (jobdir_at < 0) {
		fprintf(stderr, "bench-launch: no --job-dir in the argv\n");
		return 1;
	}
	char dir[4096];
	snprintf(dir, sizeof dir, "%s/direct-warmup", state);
	run_direct(words, jobdir_at, dir);

	double a[ROUNDS_MAX], b[ROUNDS_MAX];
	for (int r = 0; r < rounds; r++) {
		snprintf(dir, sizeof dir, "%s/direct-%d", state, r);
		a[r] = run_direct(words, jobdir_at, dir);
		b[r] = run_dlh(mnt, state, spec, r + 2);
		if (a[r] < 0 || b[r] < 0) {
			fprintf(stderr, "bench-launch: round %d: a run never wrote a metrics row\n", r);
			return 1;
		}
		fprintf(stderr, "round %2d: direct %7.1f ms  dlhfs %7.1f ms\n", r + 1, a[r], b[r]);
	}
	double sa[ROUNDS_MAX], sb[ROUNDS_MAX], d[ROUNDS_MAX];
	for (int r = 0; r < rounds; r++) {
		sa[r] = a[r];
		sb[r] = b[r];
		d[r] = b[r] - a[r];
	}
	double ma = median(sa, rounds), mb = median(sb, rounds), md = median(d, rounds);
	printf("\nlaunch overhead: start to first metrics row, %d rounds alternating (ms)\n", rounds);
	printf("%-34s %9s %9s %9s\n", "path", "median", "min", "max");
	printf("%-34s %9.1f %9.1f %9.1f\n", "mpirun -np 2 dlh-train (direct)", ma, sa[0], sa[rounds - 1]);
	printf("%-34s %9.1f %9.1f %9.1f\n", "close(jobs/new) via dlhfs", mb, sb[0], sb[rounds - 1]);
	printf("%-34s %9.1f\n", "extra (median of paired diffs)", md);
	printf("%-34s %9.3f\n", "ratio dlhfs/direct (medians)", mb / ma);
	printf("target: extra < 100 ms: %s\n", md < 100 ? "met" : "NOT met");
	free(plan);
	free(spec);
	return 0;
}
