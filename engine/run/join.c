/* join.c - a rank on another node joins its run's cgroup there */
#include "engine/run/join.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "engine/contract/contract.h"

socklen_t dlh_nodecg_addr(const char *name, struct sockaddr_un *a)
{
	memset(a, 0, sizeof *a);
	a->sun_family = AF_UNIX;
	/* sun_path[0] = '\0': the abstract namespace, never a file */
	int n = snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "dlhfs-cg/%s", name);
	if (n < 0 || (size_t)n >= sizeof a->sun_path - 1)
		n = (int)sizeof a->sun_path - 2;
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/* 1 when word is an item of the comma-separated list. */
static int listed(const char *list, const char *word)
{
	size_t wl = strlen(word);
	while (list && *list) {
		size_t n = strcspn(list, ",");
		if (n == wl && !strncmp(list, word, n))
			return 1;
		list += n + (list[n] == ',');
	}
	return 0;
}

/* Item index of the comma-separated list into out ("" when none). */
static void item(const char *list, long index, char *out, size_t len)
{
	out[0] = '\0';
	for (long i = 0; list && *list; i++) {
		size_t n = strcspn(list, ",");
		if (i == index) {
			snprintf(out, len, "%.*s", (int)n, list);
			return;
		}
		list += n + (list[n] == ',');
	}
}

int dlh_nodecg_join(char *msg, size_t len)
{
	const char *name = getenv(DLH_ENV_NODECG), *rank = getenv("OMPI_COMM_WORLD_RANK");
	char node[16];
	msg[0] = '\0';
	if (!name || !name[0] || !rank)
		return 0;
	item(getenv(DLH_ENV_RANK_NODES), strtol(rank, NULL, 10), node, sizeof node);
	if (!node[0] || !listed(getenv(DLH_ENV_NODECG_NODES), node))
		return 0;   /* its node is dlhfs's own: mpirun put it in the run's group */
	struct sockaddr_un a;
	socklen_t alen = dlh_nodecg_addr(name, &a);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(msg, len, "cannot make a socket: %s", strerror(errno));
		return -1;
	}
	struct timeval tv = { DLH_NODECG_WAIT_S, 0 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	/* the helper was started before mpirun, through another login: it
	 * may not listen yet (nobody has the name: ECONNREFUSED) */
	struct timespec t0, now, pause = { 0, 20 * 1000 * 1000 };
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (connect(fd, (struct sockaddr *)&a, alen) < 0) {
		int err = errno;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((err != ECONNREFUSED && err != EINTR) ||
		    now.tv_sec - t0.tv_sec >= DLH_NODECG_WAIT_S) {
			snprintf(msg, len, "no cgroup helper of the run here (%s)", strerror(err));
			close(fd);
			return -1;
		}
		if (err == ECONNREFUSED)
			nanosleep(&pause, NULL);
	}
	char answer[512];
	size_t got = 0;
	ssize_t n;
	while (got < sizeof answer - 1 && (n = read(fd, answer + got, sizeof answer - 1 - got)) > 0) {
		got += (size_t)n;
		if (memchr(answer, '\n', got))
			break;
	}
	int e = errno;
	close(fd);
	answer[got] = '\0';
	answer[strcspn(answer, "\n")] = '\0';
	if (!strncmp(answer, "ok ", 3)) {
		snprintf(msg, len, "%s", answer + 3);
		return 1;
	}
	if (!strncmp(answer, "no ", 3))
		snprintf(msg, len, "%s", answer + 3);
	else
		snprintf(msg, len, "the run's cgroup helper did not answer (%s)",
			 got ? "unknown words" : strerror(e ? e : EPIPE));
	return -1;
}
