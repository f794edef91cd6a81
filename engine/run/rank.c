/* rank.c - dlh-rank: a [job] command's rank with the environment PyTorch's
 * torchrun gives its workers, then the command itself
 *
 *   dlh-rank PROGRAM [ARG...]
 *
 * mpirun starts it as every rank of a [job] command; it sets RANK,
 * WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE from Open MPI's
 * OMPI_COMM_WORLD_* variables, MASTER_ADDR and
 * MASTER_PORT from the engine's DLH_MASTER_ADDR and DLH_MASTER_PORT (rank
 * 0's host and a port free there at launch), NODE_RANK and GROUP_RANK (its
 * node's number among the run's, 0 first) from DLH_RANK_NODES and, on GPUs,
 * CUDA_VISIBLE_DEVICES (the GPU the plan gives it) from DLH_RANK_GPUS (both
 * lists in rank order: every rank of a node sees that node's GPUs of the
 * run, in local-rank order, so cuda:LOCAL_RANK is its own), DLH_BATCH (its
 * share of a command's global batch) from DLH_RANK_BATCHES, and replaces
 * itself with
 * PROGRAM (found on PATH when it has no slash): torch.distributed's env://
 * initialisation then works as under torchrun. Variables already set are
 * kept. On another node than dlhfs's, it first joins the run's cgroup
 * there (engine/run/join.h); one it cannot join it says so, and runs on.
 * No shell is involved. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/run/join.h"

/* name=value of from (an Open MPI or dlhfs variable), unless name is set. */
static int pass(const char *name, const char *from)
{
	const char *v = getenv(from);
	if (!v || getenv(name))
		return 0;
	if (setenv(name, v, 1) < 0) {
		fprintf(stderr, "dlh-rank: cannot set %s: %s\n", name, strerror(errno));
		return -1;
	}
	return 0;
}

/* Item `index` of the comma-separated list (NULL: none) into out; "" when
 * there is none. */
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

/* name=value unless name is set or value is "". */
static int set_new(const char *name, const char *value)
{
	if (!value[0] || getenv(name))
		return 0;
	if (setenv(name, value, 1) < 0) {
		fprintf(stderr, "dlh-rank: cannot set %s: %s\n", name, strerror(errno));
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const char *const map[][2] = {
		{ "RANK", "OMPI_COMM_WORLD_RANK" },
		{ "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE" },
		{ "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK" },
		{ "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE" },
		{ "MASTER_ADDR", "DLH_MASTER_ADDR" },
		{ "MASTER_PORT", "DLH_MASTER_PORT" },
	};
	if (argc < 2 || !strcmp(argv[1], "--help")) {
		fprintf(argc < 2 ? stderr : stdout,
			"usage: dlh-rank PROGRAM [ARG...]\n"
			"Runs PROGRAM as this MPI rank with torchrun's environment: RANK, WORLD_SIZE,\n"
			"LOCAL_RANK, LOCAL_WORLD_SIZE (from OMPI_COMM_WORLD_*),\n"
			"MASTER_ADDR and MASTER_PORT (from DLH_MASTER_ADDR, DLH_MASTER_PORT),\n"
			"NODE_RANK, GROUP_RANK and CUDA_VISIBLE_DEVICES (from DLH_RANK_NODES,\n"
			"DLH_RANK_GPUS), and DLH_BATCH (from DLH_RANK_BATCHES).\n");
		return argc < 2 ? 2 : 0;
	}
	char why[600], host[128] = "";
	if (dlh_nodecg_join(why, sizeof why) < 0) {
		gethostname(host, sizeof host - 1);
		fprintf(stderr, "dlh-rank: isolation: none on %s: %s\n", host, why);
	}
	for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
		if (pass(map[i][0], map[i][1]))
			return 127;
	const char *r = getenv("OMPI_COMM_WORLD_RANK");
	const char *nodes = getenv("DLH_RANK_NODES"), *devs = getenv("DLH_RANK_GPUS");
	char node[16], gpus[1024] = "";
	item(nodes, r ? strtol(r, NULL, 10) : -1, node, sizeof node);
	if (set_new("NODE_RANK", node) || set_new("GROUP_RANK", node))
		return 127;
	char batch[16];   /* the planner's share of the global batch for this rank */
	item(getenv("DLH_RANK_BATCHES"), r ? strtol(r, NULL, 10) : 0, batch, sizeof batch);
	if (set_new("DLH_BATCH", batch))
		return 127;
	/* the plan's GPUs of this node's ranks, in local-rank order, over whatever
	 * the daemon's environment said: cuda:LOCAL_RANK is then this rank's, as
	 * under torchrun; numbered as nvidia-smi numbers them. The two lists go
	 * rank by rank side by side. */
	size_t used = 0;
	while (node[0] && nodes && devs && *nodes && *devs) {
		size_t nl = strcspn(nodes, ","), gl = strcspn(devs, ",");
		if (nl == strlen(node) && !strncmp(nodes, node, nl) && gl &&
		    used + gl + 2 < sizeof gpus)
			used += (size_t)snprintf(gpus + used, sizeof gpus - used, "%s%.*s",
						 used ? "," : "", (int)gl, devs);
		nodes += nl + (nodes[nl] == ',');
		devs += gl + (devs[gl] == ',');
	}
	if (gpus[0] && (setenv("CUDA_VISIBLE_DEVICES", gpus, 1) < 0 ||
			setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 1) < 0)) {
		fprintf(stderr, "dlh-rank: cannot set CUDA_VISIBLE_DEVICES: %s\n", strerror(errno));
		return 127;
	}
	execvp(argv[1], argv + 1);
	fprintf(stderr, "dlh-rank: cannot run \"%s\": %s\n", argv[1], strerror(errno));
	return 127;
}
