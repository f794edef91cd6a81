/* slurm.c - a Slurm pool's nodes from sinfo's lines (pure: engine/run/slurm.c
 * runs sinfo, engine/live/nodes.c applies what this makes) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/pool/pool.h"

#define SINFO_FIELDS 6          /* NAME|CPUS|MEMORY_MB|GRES|STATE|REASON */
#define SINFO_LINE_MAX 1024     /* a longer line is not sinfo's */
#define GPU_TYPE_PLAIN "gpu"    /* the type of GPUs Slurm lists without one ("gpu:2") */

int dlh_pool_is_slurm(const struct dlh_pool *p)
{
	return !strcmp(p->backend, DLH_BACKEND_SLURM);
}

int dlh_pool_slurm_usable(const char *state)
{
	static const char *const up[] = {
		"idle", "mixed", "allocated", "completing", "planned", "reserved",
	};
	size_t len = strcspn(state, "*~#!%$@^-+");
	if (state[len])   /* not responding, powered off or powering, rebooting, ... */
		return 0;
	for (size_t i = 0; i < sizeof up / sizeof up[0]; i++)
		if (strlen(up[i]) == len && !strncmp(state, up[i], len))
			return 1;
	return 0;
}

/* The type called name (a GPU type, added to p when it has none). Returns
 * its index, or -ENOSPC. */
static int gpu_type(struct dlh_pool *p, const char *name)
{
	int t = dlh_pool_find_type(p, name);
	if (t >= 0)
		return t;
	if (p->ntypes >= DLH_POOL_TYPES)
		return -ENOSPC;
	struct dlh_pool_type *ty = &p->type[p->ntypes];
	memset(ty, 0, sizeof *ty);
	snprintf(ty->name, sizeof ty->name, "%s", name);
	ty->gpu = 1;   /* its figures unknown: a [type NAME] in the pool file gives them */
	dlh_pool_link_defaults(ty);
	return p->ntypes++;
}

/* Adds node nd's GPUs of gres ("gpu:H100:4(S:0-1),gpu:2,shard:8", or
 * "(null)"). Returns 0, or -EINVAL/-ENOSPC. */
static int add_gres(struct dlh_pool *p, struct dlh_pool_node *nd, const char *gres)
{
	char list[SINFO_LINE_MAX];
	snprintf(list, sizeof list, "%s", gres);
	for (char *save = NULL, *item = strtok_r(list, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		item[strcspn(item, "(")] = '\0';   /* its sockets */
		if (strncmp(item, "gpu", 3) || (item[3] && item[3] != ':'))
			continue;   /* another kind of GRES, or "(null)" */
		char *type = item[3] ? item + 4 : item + 3, *count = strrchr(type, ':');
		long n = 1;
		if (count) {
			*count++ = '\0';
			char *end;
			n = strtol(count, &end, 10);
			if (*end || n < 0 || n > 4096)
				return -EINVAL;
		} else if (*type) {   /* "gpu:2" */
			char *end;
			n = strtol(type, &end, 10);
			if (*end)
				n = 1;   /* "gpu:H100": one */
			else
				type += strlen(type);
		}
		int t = gpu_type(p, *type ? type : GPU_TYPE_PLAIN);
		if (t < 0)
			return t;
		nd->devices[t] += (int)n;
	}
	return 0;
}

int dlh_pool_slurm_parse(const struct dlh_pool *base, const char *text, struct dlh_pool *next,
			 char *err, size_t errlen)
{
	*next = *base;
	next->nnodes = 0;
	next->local = -1;   /* dlhfs runs on a head node: no rank here */
	memset(next->nodes, 0, sizeof next->nodes);
	int cpu = dlh_pool_find_type(next, DLH_POOL_CPU_TYPE);
	if (cpu < 0) {
		if (next->ntypes >= DLH_POOL_TYPES) {
			snprintf(err, errlen, "no room for the \"cpu\" type");
			return -ENOSPC;
		}
		dlh_pool_default_cpu(&next->type[next->ntypes]);
		cpu = next->ntypes++;
	}
	int lineno = 0;
	for (const char *l = text; *l;) {
		size_t n = strcspn(l, "\n");
		char line[SINFO_LINE_MAX], *f[SINFO_FIELDS];
		lineno++;
		if (n >= sizeof line) {
			snprintf(err, errlen, "sinfo line %d: longer than %d bytes", lineno, SINFO_LINE_MAX - 1);
			return -EINVAL;
		}
		snprintf(line, sizeof line, "%.*s", (int)n, l);
		l += n + (l[n] == '\n');
		if (!line[0])
			continue;
		int nf = 0;
		char *s = line;
		for (char *bar; nf < SINFO_FIELDS - 1 && (bar = strchr(s, '|')); s = bar + 1) {
			*bar = '\0';
			f[nf++] = s;
		}
		f[nf++] = s;   /* the reason: the rest */
		char *end = line;
		long cpus = nf == SINFO_FIELDS ? strtol(f[1], &end, 10) : -1;
		if (nf != SINFO_FIELDS || cpus < 1 || *end || !f[0][0] || strlen(f[0]) > DLH_HOST_MAX) {
			snprintf(err, errlen, "sinfo line %d: expected NAME|CPUS|MEMORY|GRES|STATE|REASON, "
				 "got \"%.80s\"", lineno, line);
			return -EINVAL;
		}
		if (dlh_pool_find_node(next, f[0]) >= 0)
			continue;   /* in two partitions */
		if (next->nnodes >= DLH_POOL_NODES) {
			snprintf(err, errlen, "Slurm lists more than %d nodes", DLH_POOL_NODES);
			return -ENOSPC;
		}
		struct dlh_pool_node *nd = &next->nodes[next->nnodes];
		snprintf(nd->name, sizeof nd->name, "%s", f[0]);
		snprintf(nd->host, sizeof nd->host, "%s", f[0]);
		nd->cpus = (int)cpus;
		nd->cpu_type = cpu;
		nd->devices[cpu] = nd->cpus;
		nd->mem_bytes = strtoll(f[2], NULL, 10) * 1024 * 1024;
		snprintf(nd->slurm_state, sizeof nd->slurm_state, "%s", f[4]);
		/* what Slurm says of it; the caller makes it the node's state line */
		snprintf(nd->probe_what, sizeof nd->probe_what, "%s", strcmp(f[5], "none") ? f[5] : "");
		int rc = add_gres(next, nd, f[3]);
		if (rc) {
			snprintf(err, errlen, "sinfo line %d: GRES \"%.80s\": %s", lineno, f[3],
				 rc == -ENOSPC ? "too many device types" : "expected gpu[:TYPE][:COUNT]");
			return rc;
		}
		next->nnodes++;
	}
	return 0;
}
