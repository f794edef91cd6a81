/* poller.c - a reader that waits with poll(2), for the mount tests
 *
 *   poller FILE TIMEOUT_MS
 *
 * Reads FILE to its end, then waits in poll(2) for POLLIN or POLLPRI at
 * most TIMEOUT_MS. Prints "event REVENTS at NS" (CLOCK_REALTIME
 * nanoseconds when poll returned) then, after lseek(0), what FILE holds now
 * ("now: ..." first line), or "timeout at NS" when nothing came. */
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv)
{
	char buf[65536];
	if (argc != 3) {
		fprintf(stderr, "usage: poller FILE TIMEOUT_MS\n");
		return 2;
	}
	int fd = open(argv[1], O_RDONLY);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	while (read(fd, buf, sizeof buf) > 0)
		;
	struct pollfd p = { .fd = fd, .events = POLLIN | POLLPRI };
	int rc = poll(&p, 1, atoi(argv[2]));
	long long at = now_ns();
	if (rc < 0) {
		perror("poll");
		return 1;
	}
	if (rc == 0) {
		printf("timeout at %lld\n", at);
		return 0;
	}
	printf("event %d at %lld\n", p.revents, at);
	if (lseek(fd, 0, SEEK_SET) == 0) {
		ssize_t n = read(fd, buf, sizeof buf - 1);
		buf[n > 0 ? n : 0] = '\0';
		buf[strcspn(buf, "\n")] = '\0';
		printf("now: %s\n", buf);
	}
	close(fd);
	return 0;
}
