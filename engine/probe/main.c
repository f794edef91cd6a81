/* main.c - dlh-probe: what a node of the pool has, for the daemon that
 * reaches it (engine/run/probe.c runs it there through the node's agent)
 *
 *   dlh-probe [--state DIR] [--see-stdin]
 *
 * Prints key=value lines: hostname, cpus, memory (bytes), cpu_model, gpus
 * (TYPE:COUNT,... or none), and with --state whether this machine sees the
 * state directory (state_dir=yes, or no: why): runs need it, and the data,
 * on every node. --see-stdin: the paths on standard input (each ended by a
 * NUL; never on a command line, so no shell on the way sees them) must be
 * files this machine can read: seen=yes, or no: the first that is not, and
 * why. Exits 0. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/pool/pool.h"

static int usage(void)
{
	fprintf(stderr, "usage: dlh-probe [--state DIR] [--see-stdin]\n"
		"Prints what this machine has (cores, memory, GPUs) and whether it sees DIR,\n"
		"as key=value lines: dlhfs runs it on each node of its pool.\n");
	return 2;
}

#define SEE_MAX (64 * 1024)   /* bytes of paths read from stdin */

/* --see-stdin: prints seen=yes, or seen=no: the first path of stdin this
 * machine cannot open for reading as a regular file, and why. */
static void see(void)
{
	static char buf[SEE_MAX + 1];
	size_t n = 0;
	ssize_t got;
	while (n < SEE_MAX && (got = read(0, buf + n, SEE_MAX - n)) > 0)
		n += (size_t)got;
	buf[n] = '\0';
	for (size_t at = 0; at < n; at += strlen(buf + at) + 1) {
		const char *path = buf + at;
		struct stat st;
		int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
			printf("seen=no: \"%s\": %s\n", path,
			       fd < 0 ? strerror(errno) : "not a regular file");
			return;
		}
		close(fd);
	}
	printf("seen=yes\n");
}

int main(int argc, char **argv)
{
	const char *state = NULL;
	int seeing = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--state") && i + 1 < argc)
			state = argv[++i];
		else if (!strcmp(argv[i], "--see-stdin"))
			seeing = 1;
		else
			return usage();
	}
	static struct dlh_pool p;
	dlh_pool_detect(&p, 0);
	char host[256];
	if (gethostname(host, sizeof host) < 0)
		snprintf(host, sizeof host, "unknown");
	host[sizeof host - 1] = '\0';
	printf("hostname=%s\ncpus=%d\nmemory=%lld\ncpu_model=%s\ngpus=", host, p.node.cpus,
	       p.node.mem_bytes, p.node.cpu_model);
	int any = 0;
	for (int t = 0; t < p.ntypes; t++)
		if (p.type[t].gpu && p.nodes[p.local].devices[t] > 0)
			printf("%s%s:%d", any++ ? "," : "", p.type[t].name, p.nodes[p.local].devices[t]);
	printf("%s\n", any ? "" : "none");
	if (state) {
		struct stat st;
		if (stat(state, &st) < 0)
			printf("state_dir=no: \"%s\": %s\n", state, strerror(errno));
		else if (!S_ISDIR(st.st_mode))
			printf("state_dir=no: \"%s\" is not a directory\n", state);
		else
			printf("state_dir=yes\n");
	}
	if (seeing)
		see();
	return 0;
}
