/* pool.c - the resource pool: the local machine detected (/proc, NVML or
 * /dev/nvidiaN), lookups, and the planner's view of what is free */
#include "engine/pool/pool.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/pool/nvml.h"

/* What one /proc/cpuinfo scan finds. */
struct cpu_info {
	char model[128];   /* "model name", "" if absent */
	double mhz;        /* "cpu MHz" of the first core, 0 if absent */
	int flops_cycle;   /* FP32 FLOP per cycle per core from the vector flags */
};

/* The value after "key<blanks>:" on line, without its newline, or NULL
 * when line is not that key's. */
static char *cpuinfo_value(char *line, const char *key)
{
	size_t n = strlen(key);
	if (strncmp(line, key, n) || (line[n] != ' ' && line[n] != '\t' && line[n] != ':'))
		return NULL;
	char *v = strchr(line, ':');
	if (!v)
		return NULL;
	v += 1 + strspn(v + 1, " \t");
	v[strcspn(v, "\n")] = '\0';
	return v;
}

/* FP32 FLOP per cycle of one core: two FMA units of the widest vectors the
 * flags announce (AVX-512: 16 lanes, AVX2 with FMA: 8), each an add and a
 * multiply; 8 for SSE-only cores. A peak, as the type table's flops are. */
static int flops_per_cycle(const char *flags)
{
	char padded[4096];
	snprintf(padded, sizeof padded, " %s ", flags);
	if (strstr(padded, " avx512f "))
		return 64;
	if (strstr(padded, " avx2 ") && strstr(padded, " fma "))
		return 32;
	return 8;
}

/* Reads the first core's model, clock and flags from /proc/cpuinfo. */
static void read_cpu_info(struct cpu_info *ci)
{
	memset(ci, 0, sizeof *ci);
	ci->flops_cycle = 8;
	FILE *f = fopen("/proc/cpuinfo", "re");
	if (!f)
		return;
	char line[4096], *v;
	int seen = 0;
	while (seen != 7 && fgets(line, sizeof line, f)) {
		if (!(seen & 1) && (v = cpuinfo_value(line, "model name"))) {
			snprintf(ci->model, sizeof ci->model, "%s", v);
			seen |= 1;
		} else if (!(seen & 2) && (v = cpuinfo_value(line, "cpu MHz"))) {
			ci->mhz = strtod(v, NULL);
			seen |= 2;
		} else if (!(seen & 4) && (v = cpuinfo_value(line, "flags"))) {
			ci->flops_cycle = flops_per_cycle(v);
			seen |= 4;
		}
	}
	fclose(f);
}

static long long read_mem_total(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	if (!f)
		return 0;
	char line[256];
	long long kb = 0;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "MemTotal: %lld kB", &kb) == 1)
			break;
	fclose(f);
	return kb * 1024;
}

/* Counts the NVIDIA GPUs in dir: the driver's nvidiaN device files (N a
 * number; nvidiactl and nvidia-uvm are not GPUs). 0 without the driver. */
static int count_dev_gpus(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, "nvidia", 6) && e->d_name[6] &&
		    strspn(e->d_name + 6, "0123456789") == strlen(e->d_name + 6))
			n++;
	closedir(d);
	return n;
}

/* Appends a type called name to p, or finds the one already there.
 * Returns its index, or -ENOSPC when the table is full. */
static int type_slot(struct dlh_pool *p, const char *name)
{
	int t = dlh_pool_find_type(p, name);
	if (t >= 0)
		return t;
	if (p->ntypes >= DLH_POOL_TYPES)
		return -ENOSPC;
	t = p->ntypes++;
	memset(&p->type[t], 0, sizeof p->type[t]);
	snprintf(p->type[t].name, sizeof p->type[t].name, "%s", name);
	return t;
}

/* Peak FP32 FLOP/s and memory bandwidth of GPU models dlhfs knows, by a
 * run of words of the NVML name (case and '-' vs ' ' ignored); the first
 * match wins, so longer names come before their prefixes. */
static const struct gpu_model {
	const char *words;   /* e.g. "h100 pcie" */
	const char *type;    /* the type's name */
	double flops;        /* FP32 peak, FLOP/s */
	double bandwidth;    /* bytes/s */
} gpu_models[] = {
	{ "h100 pcie", "H100-PCIe", 51.2e12, 2.0e12 },
	{ "h100 nvl", "H100-NVL", 60e12, 3.9e12 },
	{ "gh200", "GH200", 67e12, 4.0e12 },
	{ "h200", "H200", 67e12, 4.8e12 },
	{ "h100", "H100", 67e12, 3.35e12 },
	{ "h800", "H800", 67e12, 3.35e12 },
	{ "a100 sxm4 40gb", "A100-40GB", 19.5e12, 1.555e12 },
	{ "a100 pcie 40gb", "A100-40GB", 19.5e12, 1.555e12 },
	{ "a100", "A100", 19.5e12, 2.0e12 },
	{ "a10g", "A10G", 31.2e12, 0.6e12 },
	{ "a10", "A10", 31.2e12, 0.6e12 },
	{ "a40", "A40", 37.4e12, 0.696e12 },
	{ "l40s", "L40S", 91.6e12, 0.864e12 },
	{ "l40", "L40", 90.5e12, 0.864e12 },
	{ "l4", "L4", 30.3e12, 0.3e12 },
	{ "v100", "V100", 15.7e12, 0.9e12 },
	{ "t4", "T4", 8.1e12, 0.32e12 },
	{ "rtx a6000", "RTX-A6000", 38.7e12, 0.768e12 },
	{ "rtx 4090", "RTX-4090", 82.6e12, 1.008e12 },
	{ "rtx 3090", "RTX-3090", 35.6e12, 0.936e12 },
};

/* The known model of an NVML name, or NULL. */
static const struct gpu_model *gpu_model_of(const char *nvml_name)
{
	char name[DLH_NVML_NAME_MAX + 3], words[64];
	size_t i = 0;
	name[i++] = ' ';
	for (const char *s = nvml_name; *s && i < sizeof name - 2; s++)
		name[i++] = *s == '-' || *s == '_' ? ' ' : (char)(*s >= 'A' && *s <= 'Z' ? *s + 32 : *s);
	name[i++] = ' ';
	name[i] = '\0';
	for (size_t k = 0; k < sizeof gpu_models / sizeof gpu_models[0]; k++) {
		snprintf(words, sizeof words, " %s ", gpu_models[k].words);
		if (strstr(name, words))
			return &gpu_models[k];
	}
	return NULL;
}

/* A type name for an unknown NVML name: without the "NVIDIA " prefix,
 * characters a type name cannot hold as '-'. */
static void gpu_type_name(const char *nvml_name, char *out, size_t len)
{
	if (!strncmp(nvml_name, "NVIDIA ", 7))
		nvml_name += 7;
	snprintf(out, len, "%s", nvml_name);
	for (char *c = out; *c; c++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", *c))
			*c = '-';
	if (!out[0])
		snprintf(out, len, "gpu");
}

/* Adds GPU number i of NVML to node k of p as a device of its model's
 * type. Returns 0, or -errno (NVML failed, the type table is full). */
static int add_nvml_gpu(struct dlh_pool *p, int k, const struct dlh_nvml *n, unsigned int i)
{
	void *dev;
	char name[DLH_NVML_NAME_MAX] = "", tname[DLH_POOL_TYPE_NAME];
	struct dlh_nvml_memory mem = { 0 };
	unsigned int mw = 0;

	if (n->handle(i, &dev) || n->name(dev, name, sizeof name))
		return -EIO;
	name[sizeof name - 1] = '\0';
	const struct gpu_model *m = gpu_model_of(name);
	gpu_type_name(name, tname, sizeof tname);
	int t = type_slot(p, m ? m->type : tname);
	if (t < 0)
		return t;
	struct dlh_pool_type *ty = &p->type[t];
	ty->gpu = 1;
	ty->flops = m ? m->flops : 0;
	ty->bandwidth = m ? m->bandwidth : 0;
	/* a type is as large as its smallest device */
	if (!n->memory(dev, &mem) && mem.total &&
	    (!ty->mem_bytes || (long long)mem.total < ty->mem_bytes))
		ty->mem_bytes = (long long)mem.total;
	if (!n->power_limit(dev, &mw) && mw) {
		ty->watts_busy = mw / 1000.0;
		ty->watts_idle = ty->watts_busy * DLH_GPU_IDLE_SHARE;
	}
	p->nodes[k].devices[t]++;
	return 0;
}

int dlh_pool_add_nvml(struct dlh_pool *p, int k, const struct dlh_nvml *n)
{
	unsigned int count = 0;
	int rc = 0;

	if (n->init())
		return -ENODEV;
	if (n->count(&count))
		rc = -EIO;
	for (unsigned int i = 0; !rc && i < count; i++)
		rc = add_nvml_gpu(p, k, n, i);
	n->shutdown();
	return rc ? rc : (int)count;
}

/* Adds the GPUs of this machine to node k: NVML when it loads and
 * answers, else a type "gpu" of unknown figures per /dev/nvidiaN. */
static void detect_gpus(struct dlh_pool *p, int k, const struct dlh_pool_probe *probe)
{
	struct dlh_nvml n;
	struct dlh_pool saved = *p;   /* NVML may fail halfway: keep none of it then */

	int done = 0;
	if (probe->nvml && !dlh_nvml_open(&n, probe->nvml)) {
		int rc = dlh_pool_add_nvml(p, k, &n);
		dlh_nvml_close(&n);
		if (!(done = rc >= 0))
			*p = saved;
	}
	int gpus = done ? 0 : count_dev_gpus(probe->dev_dir);
	int t = gpus ? type_slot(p, "gpu") : -1;
	if (t >= 0) {
		p->type[t].gpu = 1;
		p->nodes[k].devices[t] = gpus;
	}
	for (t = 0; t < p->ntypes; t++)   /* their link: not detected, pcie's figures */
		if (p->type[t].gpu)
			dlh_pool_link_defaults(&p->type[t]);
}

void dlh_pool_set_head(struct dlh_pool *p)
{
	struct cpu_info ci;
	read_cpu_info(&ci);
	p->local = -1;
	if (gethostname(p->node.host, sizeof p->node.host - 1) || !p->node.host[0])
		snprintf(p->node.host, sizeof p->node.host, "localhost");
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	p->node.cpus = n > 0 ? (int)n : 1;
	p->node.mem_bytes = read_mem_total();
	snprintf(p->node.cpu_model, sizeof p->node.cpu_model, "%s", ci.model);
	p->node.gpus = 0;   /* none the pool offers */
}

/* Whether the numeric address text is one of this machine's (an
 * interface's, or loopback). No name is resolved: nothing is asked of any
 * network. */
static int address_is_self(const char *text)
{
	unsigned char want[16];
	int family = inet_pton(AF_INET, text, want) == 1 ? AF_INET :
		     inet_pton(AF_INET6, text, want) == 1 ? AF_INET6 : 0;
	if (!family)
		return 0;
	if (family == AF_INET && want[0] == 127)
		return 1;
	struct ifaddrs *list, *a;
	if (getifaddrs(&list))
		return 0;
	int found = 0;
	for (a = list; a && !found; a = a->ifa_next) {
		if (!a->ifa_addr || a->ifa_addr->sa_family != family)
			continue;
		if (family == AF_INET)
			found = !memcmp(&((struct sockaddr_in *)(void *)a->ifa_addr)->sin_addr, want, 4);
		else
			found = !memcmp(&((struct sockaddr_in6 *)(void *)a->ifa_addr)->sin6_addr, want, 16);
	}
	freeifaddrs(list);
	return found;
}

int dlh_pool_host_is_self(const char *host, const char *hostname)
{
	size_t short_len = strcspn(hostname, ".");
	if (!host[0])
		return 0;
	if (hostname[0] && (!strcmp(host, hostname) ||
			    (strcspn(host, ".") == short_len && !strncmp(host, hostname, short_len))))
		return 1;
	if (!strcmp(host, "localhost") || !strcmp(host, "localhost.localdomain"))
		return 1;
	return address_is_self(host);
}

void dlh_pool_set_local(struct dlh_pool *p, int k)
{
	struct dlh_pool_node *nd = &p->nodes[k];
	struct cpu_info ci;
	read_cpu_info(&ci);
	p->local = k;
	/* what this machine is, where the pool file does not say */
	if (!nd->mem_bytes)
		nd->mem_bytes = read_mem_total();
	snprintf(nd->cpu_model, sizeof nd->cpu_model, "%s", ci.model);
	memcpy(p->node.host, nd->host, sizeof p->node.host);   /* same size, NUL included */
	p->node.cpus = nd->cpus;
	p->node.mem_bytes = nd->mem_bytes;
	snprintf(p->node.cpu_model, sizeof p->node.cpu_model, "%s", ci.model);
	p->node.gpus = dlh_pool_node_gpus(p, k);
}

void dlh_pool_link_defaults(struct dlh_pool_type *t)
{
	int nvlink = !strcmp(t->link, "nvlink");
	if (!t->link[0])
		snprintf(t->link, sizeof t->link, "pcie");
	if (t->link_bw <= 0)
		t->link_bw = nvlink ? DLH_NVLINK_BW : DLH_PCIE_BW;
	t->link_alpha = nvlink ? DLH_NVLINK_ALPHA : DLH_PCIE_ALPHA;
}

void dlh_pool_default_cpu(struct dlh_pool_type *t)
{
	memset(t, 0, sizeof *t);
	snprintf(t->name, sizeof t->name, "%s", DLH_POOL_CPU_TYPE);
	t->bandwidth = DLH_CPU_BANDWIDTH;
	t->watts_idle = DLH_CPU_WATTS_IDLE;
	t->watts_busy = DLH_CPU_WATTS_BUSY;
}

/* The peak FLOP/s of one core of this machine, 0 when the clock is unknown. */
static double cpu_core_flops(const struct cpu_info *ci)
{
	return ci->mhz * 1e6 * ci->flops_cycle;
}

int dlh_pool_probe(struct dlh_pool *p, const struct dlh_pool_probe *probe, int cpus_override)
{
	struct cpu_info ci;
	struct dlh_pool_node *nd = &p->nodes[0];

	memset(p, 0, sizeof *p);
	snprintf(p->source, sizeof p->source, "detected");
	read_cpu_info(&ci);
	p->nnodes = 1;
	if (gethostname(nd->host, sizeof nd->host - 1) || !nd->host[0])
		snprintf(nd->host, sizeof nd->host, "localhost");
	snprintf(nd->name, sizeof nd->name, "%s", nd->host);
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	nd->cpus = cpus_override > 0 ? cpus_override : n > 0 ? (int)n : 1;
	nd->mem_bytes = read_mem_total();

	p->ntypes = 1;
	dlh_pool_default_cpu(&p->type[0]);
	p->type[0].flops = cpu_core_flops(&ci);
	p->type[0].mem_bytes = nd->mem_bytes / nd->cpus;
	nd->cpu_type = 0;
	nd->devices[0] = nd->cpus;
	detect_gpus(p, 0, probe);
	dlh_pool_set_local(p, 0);
	return 0;
}

int dlh_pool_detect(struct dlh_pool *p, int cpus_override)
{
	const struct dlh_pool_probe probe = { .nvml = DLH_NVML_LIB, .dev_dir = "/dev" };
	return dlh_pool_probe(p, &probe, cpus_override);
}

/* The index of the node called name, removed ones too, or -1. */
static int node_index(const struct dlh_pool *p, const char *name)
{
	for (int k = 0; k < p->nnodes; k++)
		if (!strcmp(p->nodes[k].name, name))
			return k;
	return -1;
}

int dlh_pool_merge(struct dlh_pool *p, const struct dlh_pool *next, const int *busy,
		   enum dlh_pool_change *change, char *err, size_t errlen)
{
	int tmap[DLH_POOL_TYPES], ntypes = p->ntypes, nnodes = p->nnodes;
	int mine = p->local, theirs = next->local;   /* which node is this machine: settled */
	if ((mine < 0) != (theirs < 0) ||
	    (mine >= 0 && strcmp(p->nodes[mine].name, next->nodes[theirs].name))) {
		snprintf(err, errlen, "the file makes %s this machine's node, where the mount has %s: "
			 "remount to change which node dlhfs runs on",
			 theirs >= 0 ? next->nodes[theirs].name : "none",
			 mine >= 0 ? p->nodes[mine].name : "none (a head node outside the pool)");
		return -EINVAL;
	}
	for (int t = 0; t < next->ntypes; t++) {   /* room first: nothing changes on -ENOSPC */
		tmap[t] = dlh_pool_find_type(p, next->type[t].name);
		if (tmap[t] < 0 && (tmap[t] = ntypes++) >= DLH_POOL_TYPES) {
			snprintf(err, errlen, "more than %d device types over the pool's life: remount "
				 "to start afresh", DLH_POOL_TYPES);
			return -ENOSPC;
		}
	}
	for (int k = 0; k < next->nnodes; k++)
		if (node_index(p, next->nodes[k].name) < 0 && nnodes++ >= DLH_POOL_NODES) {
			snprintf(err, errlen, "more than %d nodes over the pool's life: remount to "
				 "start afresh", DLH_POOL_NODES);
			return -ENOSPC;
		}
	for (int t = 0; t < next->ntypes; t++)
		p->type[tmap[t]] = next->type[t];
	p->ntypes = ntypes;
	for (int k = 0; k < p->nnodes; k++)
		change[k] = DLH_NODE_SAME;
	int in_next[DLH_POOL_NODES] = { 0 };
	for (int i = 0; i < next->nnodes; i++) {
		const struct dlh_pool_node *n = &next->nodes[i];
		int k = node_index(p, n->name), fresh = k < 0;
		if (fresh) {
			k = p->nnodes++;
			memset(&p->nodes[k], 0, sizeof p->nodes[k]);
		}
		struct dlh_pool_node *nd = &p->nodes[k];
		in_next[k] = 1;
		int moved = strcmp(nd->host, n->host) || strcmp(nd->agent, n->agent);
		int devices[DLH_POOL_TYPES] = { 0 };
		for (int t = 0; t < next->ntypes; t++)
			devices[tmap[t]] = n->devices[t];
		int has = nd->cpus != n->cpus || memcmp(nd->devices, devices, sizeof devices) ||
			  nd->cpu_type != tmap[n->cpu_type];
		change[k] = fresh || nd->removed ? DLH_NODE_NEW : moved || has ? DLH_NODE_CHANGED :
			    DLH_NODE_SAME;
		snprintf(nd->name, sizeof nd->name, "%s", n->name);
		snprintf(nd->host, sizeof nd->host, "%s", n->host);
		snprintf(nd->agent, sizeof nd->agent, "%s", n->agent);
		nd->cpus = n->cpus;
		memcpy(nd->devices, devices, sizeof devices);
		nd->cpu_type = tmap[n->cpu_type];
		if (n->mem_bytes)
			nd->mem_bytes = n->mem_bytes;
		if (change[k] == DLH_NODE_NEW || moved) {   /* to be probed: what it was no longer holds */
			nd->probe = DLH_PROBE_NONE;
			nd->probe_what[0] = '\0';
			nd->down_since = 0;
			nd->link_alpha = nd->link_beta = 0;
			nd->link_why[0] = '\0';
			if (change[k] == DLH_NODE_NEW)
				nd->drained = 0;
		}
		nd->removed = nd->leaving = 0;
	}
	for (int k = 0; k < p->nnodes; k++) {
		struct dlh_pool_node *nd = &p->nodes[k];
		if (in_next[k] || nd->removed || k == p->local)
			continue;
		if (busy && busy[k]) {
			nd->leaving = 1;
			change[k] = DLH_NODE_LEAVING;
		} else {
			nd->removed = 1;
			change[k] = DLH_NODE_REMOVED;
		}
	}
	memcpy(p->env, next->env, sizeof p->env);
	if (p->local >= 0)
		p->node.gpus = dlh_pool_node_gpus(p, p->local);
	return 0;
}

int dlh_pool_find_node(const struct dlh_pool *p, const char *name)
{
	for (int k = 0; k < p->nnodes; k++)
		if (!strcmp(p->nodes[k].name, name) && !p->nodes[k].removed)
			return k;
	return -ENOENT;
}

int dlh_pool_find_type(const struct dlh_pool *p, const char *name)
{
	for (int t = 0; t < p->ntypes; t++)
		if (!strcmp(p->type[t].name, name))
			return t;
	return -ENOENT;
}

int dlh_pool_node_gpus(const struct dlh_pool *p, int k)
{
	int n = 0;
	for (int t = 0; t < p->ntypes; t++)
		if (p->type[t].gpu)
			n += p->nodes[k].devices[t];
	return n;
}

int dlh_pool_gpu_type(const struct dlh_pool *p, int k, int i)
{
	for (int t = 0; t < p->ntypes && i >= 0; t++) {
		if (!p->type[t].gpu)
			continue;
		if (i < p->nodes[k].devices[t])
			return t;
		i -= p->nodes[k].devices[t];
	}
	return -ENOENT;
}

/* Takes up to have of *want (nothing when *want < 0). Returns what was taken. */
static int take(int *want, int have)
{
	int n = *want <= 0 ? 0 : *want < have ? *want : have;
	*want -= n;
	return n;
}

int dlh_pool_node_usable(const struct dlh_pool *p, int k)
{
	const struct dlh_pool_node *nd = &p->nodes[k];
	return !nd->drained && !nd->removed && !nd->leaving &&
	       (nd->probe == DLH_PROBE_NONE || nd->probe == DLH_PROBE_UP);
}

int dlh_pool_devices(const struct dlh_pool *p, int gpu, int usable)
{
	int n = 0;
	for (int k = 0; k < p->nnodes; k++)
		if (usable ? dlh_pool_node_usable(p, k) : !p->nodes[k].removed)
			n += gpu ? dlh_pool_node_gpus(p, k) : p->nodes[k].cpus;
	return n;
}

void dlh_pool_free_view_nodes(const struct dlh_pool *p, const int *used_cpus, const int *used_gpus,
			      struct dlh_pool_free *f)
{
	memset(f, 0, sizeof *f);
	f->ntypes = p->ntypes;
	f->nnodes = p->nnodes;
	for (int t = 0; t < p->ntypes; t++) {
		struct dlh_devtype *d = &f->type[t];
		snprintf(d->name, sizeof d->name, "%s", p->type[t].name);
		d->flops = p->type[t].flops;
		d->mem_bytes = (double)p->type[t].mem_bytes;
		d->watts_idle = p->type[t].watts_idle;
		d->watts_busy = p->type[t].watts_busy;
	}
	for (int k = 0; k < p->nnodes; k++) {
		int *fk = f->free[k], cpus = used_cpus ? used_cpus[k] : 0;
		int gpus = used_gpus ? used_gpus[k] : 0;
		if (!dlh_pool_node_usable(p, k))
			continue;
		for (int t = 0; t < p->ntypes; t++)
			fk[t] = p->nodes[k].devices[t];
		fk[p->nodes[k].cpu_type] -= take(&cpus, fk[p->nodes[k].cpu_type]);
		for (int t = 0; t < p->ntypes; t++)
			if (p->type[t].gpu)
				fk[t] -= take(&gpus, fk[t]);
	}
}

void dlh_pool_rate_text(double v, char *out, size_t len)
{
	static const char suffix[] = "KMGTP";
	int i = -1;
	while (i < 4 && v >= 1000) {
		v /= 1000;
		i++;
	}
	/* up to three significant decimals, none trailing: 3.35T, 90G, 1.5K */
	char num[64];
	snprintf(num, sizeof num, "%.3f", v);
	char *end = num + strlen(num);
	while (end[-1] == '0')
		*--end = '\0';
	if (end[-1] == '.')
		end[-1] = '\0';
	snprintf(out, len, "%s%.*s", num, i >= 0 ? 1 : 0, i >= 0 ? &suffix[i] : "");
}

int dlh_pool_node_isolates(const struct dlh_pool_node *n)
{
	return strncmp(n->isolation, "none", 4) != 0;
}
