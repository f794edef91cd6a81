/* main.c - dlh-probe: what a node of the pool has, for the daemon that
 * reaches it (engine/run/probe.c runs it there through the node's agent)
 *
 *   dlh-probe [--state DIR] [--token FILE] [--see-stdin]
 *   dlh-probe --hold --name NAME --uid UID [--slots S,...] [--memory B] [--pids N]
 *
 * Prints key=value lines: hostname, cpus, memory (bytes), cpu_model, gpus
 * (TYPE:COUNT,... or none), free_port (a TCP port free here now), and with --state whether this machine sees the
 * state directory (state_dir=yes, or no: why): runs need it, and the data,
 * on every node. --token: FILE's first line (token=TEXT, or token=no:
 * why): dlhfs wrote it in the state directory a moment before, so the
 * node shares that directory only when it reads the same text.
 * --see-stdin: the paths on standard input (each ended by a NUL; never on
 * a command line, so no shell on the way sees them) must be files this
 * machine can read: seen=yes and hashes=H,H,... (FNV-1a of each file's
 * bytes, in hex, in their order: dlhfs compares them with its own), or
 * seen=no: the first that is not, and why. As root it also says how this
 * node can isolate a run's ranks (isolation=cgroup v2, cgroup v1, or
 * none: why), found by making and removing a group as --hold would.
 * --hold: a run's cgroup here, held for the run (hold.c). Exits 0. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/pool/pool.h"
#include "engine/probe/hold.h"
#include "engine/run/cgroup.h"
#include "engine/util/util.h"

static int usage(void)
{
	fprintf(stderr, "usage: dlh-probe [--state DIR] [--token FILE] [--see-stdin]\n"
		"       dlh-probe --hold --name NAME --uid UID [--slots S,...] [--memory BYTES] [--pids N]\n"
		"Prints what this machine has (cores, memory, GPUs) and whether it sees DIR,\n"
		"as key=value lines: dlhfs runs it on each node of its pool. --hold makes a\n"
		"run's cgroup here and moves its ranks into it until told \"end\" on stdin.\n");
	return 2;
}

#define SEE_MAX (64 * 1024)   /* bytes of paths read from stdin */

/* --see-stdin: prints seen=yes and the files' hashes, or seen=no: the
 * first path of stdin this machine cannot read as a regular file, and why. */
static void see(void)
{
	static char buf[SEE_MAX + 1], hashes[SEE_MAX];
	size_t n = 0, used = 0;
	ssize_t got;
	while (n < SEE_MAX && (got = read(0, buf + n, SEE_MAX - n)) > 0)
		n += (size_t)got;
	buf[n] = '\0';
	hashes[0] = '\0';
	for (size_t at = 0; at < n; at += strlen(buf + at) + 1) {
		const char *path = buf + at;
		uint64_t h = 0;
		/* looked at before it is opened: a device or FIFO never is */
		int fd = dlh_open_regular(path, 0), rc = 0;
		if (fd < 0 || (rc = dlh_hash_fd(fd, &h, NULL))) {
			printf("seen=no: \"%s\": %s\n", path,
			       fd == -EINVAL ? "not a regular file" : strerror(fd < 0 ? -fd : -rc));
			if (fd >= 0)
				close(fd);
			return;
		}
		close(fd);
		if (used + 20 < sizeof hashes)
			used += (size_t)snprintf(hashes + used, sizeof hashes - used, "%s%016llx",
						 used ? "," : "", (unsigned long long)h);
	}
	printf("seen=yes\nhashes=%s\n", hashes);
}

/* --token: the first line of path (at most 128 bytes), or why not. */
static void token(const char *path)
{
	char *text = NULL;
	int rc = dlh_read_file_nofollow(path, 128, &text, NULL);
	if (rc) {
		printf("token=no: \"%s\": %s\n", path, strerror(-rc));
		return;
	}
	text[strcspn(text, "\n")] = '\0';
	printf("token=%s\n", text);
	free(text);
}

/* How this node isolates a run (as root): a parent group made and removed
 * as the daemon and --hold make theirs, so what it says was tried. */
static void isolation(void)
{
	static struct dlh_cgroup_sys sys;
	dlh_cgroup_setup(&sys);
	if (sys.mode == DLH_CG_NONE) {
		printf("isolation=none: %s\n", sys.why);
		return;
	}
	printf("isolation=cgroup v%d\n", sys.mode == DLH_CG_V1 ? 1 : 2);
	dlh_cgroup_teardown(&sys);
}

int main(int argc, char **argv)
{
	const char *state = NULL, *token_path = NULL;
	int seeing = 0;
	if (argc > 1 && !strcmp(argv[1], "--hold")) {
		int rc = dlh_probe_hold(argc - 2, argv + 2);
		return rc == 2 ? usage() : rc;
	}
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--state") && i + 1 < argc)
			state = argv[++i];
		else if (!strcmp(argv[i], "--token") && i + 1 < argc)
			token_path = argv[++i];
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
	printf("%s\nfree_port=%d\n", any ? "" : "none", dlh_free_port());
	if (state) {
		struct stat st;
		if (stat(state, &st) < 0)
			printf("state_dir=no: \"%s\": %s\n", state, strerror(errno));
		else if (!S_ISDIR(st.st_mode))
			printf("state_dir=no: \"%s\" is not a directory\n", state);
		else
			printf("state_dir=yes\n");
	}
	if (geteuid() == 0)
		isolation();
	if (token_path)
		token(token_path);
	if (seeing)
		see();
	return 0;
}
