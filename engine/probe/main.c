/* main.c - dlh-probe: what a node of the pool has, for the daemon that
 * reaches it (engine/run/probe.c runs it there through the node's agent)
 *
 *   dlh-probe [--state DIR]
 *
 * Prints key=value lines: hostname, cpus, memory (bytes), cpu_model, gpus
 * (TYPE:COUNT,... or none), and with --state whether this machine sees the
 * state directory (state_dir=yes, or no: why): runs need it, and the data,
 * on every node. Exits 0. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/pool/pool.h"

static int usage(void)
{
	fprintf(stderr, "usage: dlh-probe [--state DIR]\n"
		"Prints what this machine has (cores, memory, GPUs) and whether it sees DIR,\n"
		"as key=value lines: dlhfs runs it on each node of its pool.\n");
	return 2;
}

int main(int argc, char **argv)
{
	const char *state = NULL;
	if (argc == 3 && !strcmp(argv[1], "--state"))
		state = argv[2];
	else if (argc != 1)
		return usage();
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
	return 0;
}
