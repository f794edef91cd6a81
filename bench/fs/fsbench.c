/* fsbench.c - the timing loops of bench/fs: what a reader of a mount does,
 * timed here so that no process start-up is in the figures (except in
 * `run`, whose subject is a whole program such as cat).
 *   fsbench orc FILE N       open + read to the end + close, N times
 *   fsbench stat FILE N      stat(2), N times
 *   fsbench run N CMD ARG..  run CMD (exec, no shell) N times, waiting for each
 * Each prints the median, over 7 batches, of seconds per operation. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BATCHES 7

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* One operation of the chosen kind. Returns 0, or -1 (errno set). */
static int one(const char *what, char **argv)
{
	if (!strcmp(what, "orc")) {
		char buf[65536];
		int fd = open(argv[0], O_RDONLY);
		if (fd < 0)
			return -1;
		ssize_t n;
		while ((n = read(fd, buf, sizeof buf)) > 0)
			;
		close(fd);
		return n < 0 ? -1 : 0;
	}
	if (!strcmp(what, "stat")) {
		struct stat st;
		return stat(argv[0], &st);
	}
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		if (null >= 0)
			dup2(null, 1);
		execvp(argv[0], argv);
		_exit(127);
	}
	int st;
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 4 || (strcmp(argv[1], "orc") && strcmp(argv[1], "stat") &&
			 strcmp(argv[1], "run"))) {
		fprintf(stderr, "usage: fsbench orc|stat FILE N | fsbench run N CMD [ARG..]\n");
		return 2;
	}
	int run = !strcmp(argv[1], "run");
	long n = atol(argv[run ? 2 : 3]);
	char **subject = run ? argv + 3 : argv + 2;
	if (n < 1) {
		fprintf(stderr, "fsbench: N must be at least 1\n");
		return 2;
	}
	if (one(argv[1], subject)) {   /* once to warm the caches, and to fail early */
		perror(subject[0]);
		return 1;
	}
	double per[BATCHES];
	for (int b = 0; b < BATCHES; b++) {
		double t0 = now();
		for (long i = 0; i < n; i++)
			if (one(argv[1], subject)) {
				perror(subject[0]);
				return 1;
			}
		per[b] = (now() - t0) / (double)n;
	}
	qsort(per, BATCHES, sizeof per[0], cmp);
	printf("%.9f\n", per[BATCHES / 2]);
	return 0;
}
