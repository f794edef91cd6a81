/* cgroup.c - isolating a job's ranks: a cpuset of its CPU slots and a memory limit */
#include "engine/run/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine/util/util.h"

#define CG_ROOT "/sys/fs/cgroup"

/* Writes text to dir/file. Returns 0, or -errno. */
static int put(const char *dir, const char *file, const char *text)
{
	char path[DLH_CG_PATH_MAX + 64];
	snprintf(path, sizeof path, "%s/%s", dir, file);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = dlh_write_all(fd, text, strlen(text));
	close(fd);
	return rc;
}

/* Reads dir/file (first 4 KiB) into out, without the trailing newline.
 * Returns 0, or -errno. */
static int get(const char *dir, const char *file, char *out, size_t len)
{
	char path[DLH_CG_PATH_MAX + 64];
	snprintf(path, sizeof path, "%s/%s", dir, file);
	char *text;
	int rc = dlh_read_file(path, 1 << 16, &text, NULL);
	if (rc)
		return rc;
	snprintf(out, len, "%s", text);
	out[strcspn(out, "\n")] = '\0';
	free(text);
	return 0;
}

static int exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

/* This process's group in the v1 hierarchy of controller (from
 * /proc/self/cgroup), "" for the root. Returns 0, or -ENOENT. */
static int own_group(const char *controller, char *out, size_t len)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	char line[2048];
	int rc = -ENOENT;
	if (!f)
		return rc;
	while (rc && fgets(line, sizeof line, f)) {
		char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
		if (!b)
			continue;
		*b = '\0';
		for (char *c = strtok(a + 1, ","); c; c = strtok(NULL, ","))
			if (!strcmp(c, controller)) {
				b[1 + strcspn(b + 1, "\n")] = '\0';
				snprintf(out, len, "%s", strcmp(b + 1, "/") ? b + 1 : "");
				rc = 0;
			}
	}
	fclose(f);
	return rc;
}

/* Parses a CPU list ("0-3,8") into s->cpu. Returns the count. */
static int parse_cpus(const char *list, int *cpu, int max)
{
	int n = 0;
	const char *p = list;
	while (*p && n < max) {
		char *end;
		long a = strtol(p, &end, 10), b = a;
		if (end == p)
			break;
		if (*end == '-')
			b = strtol(end + 1, &end, 10);
		for (long c = a; c <= b && n < max; c++)
			cpu[n++] = (int)c;
		p = *end == ',' ? end + 1 : end;
		if (*end != ',')
			break;
	}
	return n;
}

/* Kills what is in group dir (and its children) and removes them,
 * waiting up to wait seconds for the processes to go. */
static void remove_tree(const char *dir, double wait)
{
	DIR *d = opendir(dir);
	if (d) {
		struct dirent *de;
		while ((de = readdir(d)))
			if (de->d_type == DT_DIR && de->d_name[0] != '.') {
				char sub[DLH_CG_PATH_MAX + 300];
				snprintf(sub, sizeof sub, "%s/%s", dir, de->d_name);
				remove_tree(sub, wait);
			}
		closedir(d);
	}
	double until = dlh_mono() + wait;
	for (;;) {
		char path[DLH_CG_PATH_MAX + 64], *text = NULL;
		snprintf(path, sizeof path, "%s/cgroup.procs", dir);
		if (!dlh_read_file(path, 1 << 20, &text, NULL)) {
			for (char *p = text; *p;) {
				long pid = strtol(p, &p, 10);
				if (pid > 0)
					kill((pid_t)pid, SIGKILL);
				while (*p == '\n')
					p++;
				if (pid <= 0)
					break;
			}
			free(text);
		}
		if (rmdir(dir) == 0 || errno == ENOENT || dlh_mono() >= until)
			return;
		struct timespec ts = { 0, 10 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

/* Removes the empty groups of the tree at dir, deepest first; groups that
 * still hold processes stay. */
static void remove_empty(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d)))
		if (de->d_type == DT_DIR && de->d_name[0] != '.') {
			char sub[DLH_CG_PATH_MAX + 300];
			snprintf(sub, sizeof sub, "%s/%s", dir, de->d_name);
			remove_empty(sub);
		}
	closedir(d);
	rmdir(dir);
}

/* Removes the dlhfs-PID groups under parent whose daemon is gone, but for
 * those that still hold a run: a run outlives its daemon (backend.h), and
 * a later mount removes its group once it has ended. */
static void remove_stale(const char *parent)
{
	DIR *d = opendir(parent);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		long pid;
		char tail;
		if (sscanf(de->d_name, "dlhfs-%ld%c", &pid, &tail) != 1 || pid <= 0 ||
		    (kill((pid_t)pid, 0) == 0 || errno != ESRCH))
			continue;
		char dir[DLH_CG_PATH_MAX + 300];
		snprintf(dir, sizeof dir, "%s/%s", parent, de->d_name);
		remove_empty(dir);
	}
	closedir(d);
}

/* Makes dir (a parent group), removing stale siblings first. */
static int make_parent(const char *parent, char *dir, size_t len)
{
	remove_stale(parent);
	snprintf(dir, len, "%s/dlhfs-%ld", parent, (long)getpid());
	if (mkdir(dir, 0755) && errno != EEXIST)
		return -errno;
	return 0;
}

static void setup_v1(struct dlh_cgroup_sys *s)
{
	char own[DLH_CG_PATH_MAX / 2], parent[DLH_CG_PATH_MAX], cpus[4096];
	int rc;
	if (own_group("cpuset", own, sizeof own)) {
		snprintf(s->why, sizeof s->why, "this process is in no v1 cpuset group");
		return;
	}
	snprintf(parent, sizeof parent, CG_ROOT "/cpuset%s", own);
	if ((rc = get(parent, "cpuset.effective_cpus", cpus, sizeof cpus)) &&
	    (rc = get(parent, "cpuset.cpus", cpus, sizeof cpus))) {
		snprintf(s->why, sizeof s->why, "cannot read %s/cpuset.cpus: %s", parent, strerror(-rc));
		return;
	}
	if ((rc = get(parent, "cpuset.mems", s->mems, sizeof s->mems)) ||
	    (rc = make_parent(parent, s->cpuset, sizeof s->cpuset)) ||
	    (rc = put(s->cpuset, "cpuset.cpus", cpus)) || (rc = put(s->cpuset, "cpuset.mems", s->mems))) {
		snprintf(s->why, sizeof s->why, "cannot make a cpuset group under %s: %s", parent,
			 strerror(-rc));
		return;
	}
	s->ncpu = parse_cpus(cpus, s->cpu, DLH_CG_CPUS_MAX);
	if (own_group("memory", own, sizeof own)) {
		snprintf(s->why, sizeof s->why, "this process is in no v1 memory group");
		rmdir(s->cpuset);
		return;
	}
	snprintf(parent, sizeof parent, CG_ROOT "/memory%s", own);
	if ((rc = make_parent(parent, s->memory, sizeof s->memory))) {
		snprintf(s->why, sizeof s->why, "cannot make a memory group under %s: %s", parent,
			 strerror(-rc));
		rmdir(s->cpuset);
		return;
	}
	/* the process limit where the host has the pids hierarchy (optional) */
	if (!own_group("pids", own, sizeof own)) {
		snprintf(parent, sizeof parent, CG_ROOT "/pids%s", own);
		if (make_parent(parent, s->pids, sizeof s->pids))
			s->pids[0] = '\0';
	}
	s->mode = DLH_CG_V1;
}

static void setup_v2(struct dlh_cgroup_sys *s)
{
	char cpus[4096], ctl[256];
	int rc;
	/* the root is exempt from "no processes in inner groups": our groups live there */
	if ((rc = get(CG_ROOT, "cgroup.controllers", ctl, sizeof ctl)) ||
	    !strstr(ctl, "cpuset") || !strstr(ctl, "memory")) {
		snprintf(s->why, sizeof s->why, "cgroup v2 without the cpuset and memory controllers");
		return;
	}
	if (get(CG_ROOT, "cpuset.cpus.effective", cpus, sizeof cpus)) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		snprintf(cpus, sizeof cpus, "0-%ld", n > 0 ? n - 1 : 0);
	}
	snprintf(s->mems, sizeof s->mems, "0");
	get(CG_ROOT, "cpuset.mems.effective", s->mems, sizeof s->mems);
	if ((rc = put(CG_ROOT, "cgroup.subtree_control", "+cpuset +memory")) ||
	    (rc = make_parent(CG_ROOT, s->cpuset, sizeof s->cpuset)) ||
	    (rc = put(s->cpuset, "cgroup.subtree_control", "+cpuset +memory"))) {
		snprintf(s->why, sizeof s->why, "cannot make a group under " CG_ROOT ": %s", strerror(-rc));
		if (s->cpuset[0])
			rmdir(s->cpuset);
		return;
	}
	snprintf(s->memory, sizeof s->memory, "%s", s->cpuset);
	if (strstr(ctl, "pids") && !put(CG_ROOT, "cgroup.subtree_control", "+pids") &&
	    !put(s->cpuset, "cgroup.subtree_control", "+pids"))
		snprintf(s->pids, sizeof s->pids, "%s", s->cpuset);
	s->ncpu = parse_cpus(cpus, s->cpu, DLH_CG_CPUS_MAX);
	s->mode = DLH_CG_V2;
}

void dlh_cgroup_setup(struct dlh_cgroup_sys *s)
{
	memset(s, 0, sizeof *s);
	if (geteuid() != 0)
		snprintf(s->why, sizeof s->why, "dlhfs does not run as root");
	else if (exists(CG_ROOT "/cgroup.controllers"))
		setup_v2(s);
	else if (exists(CG_ROOT "/cpuset/cpuset.cpus") && exists(CG_ROOT "/memory/memory.limit_in_bytes"))
		setup_v1(s);
	else
		snprintf(s->why, sizeof s->why, "no cgroup v2, and no v1 cpuset and memory under " CG_ROOT);
	if (s->mode != DLH_CG_NONE && s->ncpu == 0) {
		dlh_cgroup_teardown(s);
		snprintf(s->why, sizeof s->why, "no CPUs in the cpuset");
	}
}

void dlh_cgroup_teardown(struct dlh_cgroup_sys *s)
{
	if (s->mode == DLH_CG_NONE)
		return;
	remove_tree(s->cpuset, 1.0);
	if (s->mode == DLH_CG_V1)
		remove_tree(s->memory, 1.0);
	if (s->mode == DLH_CG_V1 && s->pids[0])
		remove_tree(s->pids, 1.0);
	s->mode = DLH_CG_NONE;
}

int dlh_cgroup_create(const struct dlh_cgroup_sys *s, const char *name, const int *slots,
		      int nslots, long long limit, long pids_max, struct dlh_cgroup *cg, char *err,
		      size_t errlen)
{
	char cpus[4096] = "", num[32];
	int rc = 0, used[DLH_CG_CPUS_MAX] = { 0 };
	memset(cg, 0, sizeof *cg);
	if (s->mode == DLH_CG_NONE) {
		snprintf(err, errlen, "%s", s->why);
		return -ENOTSUP;
	}
	for (int i = 0; i < nslots; i++) {
		int k = slots[i] % s->ncpu;
		if (used[k]++)
			continue;
		snprintf(num, sizeof num, "%s%d", cpus[0] ? "," : "", s->cpu[k]);
		strncat(cpus, num, sizeof cpus - strlen(cpus) - 1);
	}
	snprintf(cg->cpuset, sizeof cg->cpuset, "%s/%s", s->cpuset, name);
	snprintf(cg->memory, sizeof cg->memory, "%s/%s", s->memory, name);
	cg->limit = limit;
	if (s->pids[0] && pids_max > 0)
		snprintf(cg->pids, sizeof cg->pids, "%s/%s", s->pids, name);
	if (mkdir(cg->cpuset, 0755) || (s->mode == DLH_CG_V1 && mkdir(cg->memory, 0755)) ||
	    (s->mode == DLH_CG_V1 && cg->pids[0] && mkdir(cg->pids, 0755))) {
		rc = -errno;
		snprintf(err, errlen, "cannot make cgroup \"%s\": %s", name, strerror(errno));
		goto fail;
	}
	if ((rc = put(cg->cpuset, "cpuset.cpus", cpus)) || (rc = put(cg->cpuset, "cpuset.mems", s->mems))) {
		snprintf(err, errlen, "cannot set the cpuset of \"%s\" to %s: %s", cg->cpuset, cpus,
			 strerror(-rc));
		goto fail;
	}
	if (limit > 0) {
		char text[32];
		snprintf(text, sizeof text, "%lld", limit);
		if (s->mode == DLH_CG_V1) {
			rc = put(cg->memory, "memory.limit_in_bytes", text);
			put(cg->memory, "memory.memsw.limit_in_bytes", text); /* swap accounting may be off */
			put(cg->memory, "memory.swappiness", "0");
		} else {
			rc = put(cg->memory, "memory.max", text);
			put(cg->memory, "memory.swap.max", "0");
		}
		if (rc) {
			snprintf(err, errlen, "cannot set the memory limit of \"%s\": %s", cg->memory,
				 strerror(-rc));
			goto fail;
		}
	}
	if (cg->pids[0]) {
		char text[32];
		snprintf(text, sizeof text, "%ld", pids_max);
		if ((rc = put(cg->pids, "pids.max", text))) {
			snprintf(err, errlen, "cannot set the process limit of \"%s\": %s", cg->pids,
				 strerror(-rc));
			goto fail;
		}
		cg->pids_max = pids_max;
	}
	return 0;
fail:
	rmdir(cg->cpuset);
	if (s->mode == DLH_CG_V1)
		rmdir(cg->memory);
	if (s->mode == DLH_CG_V1 && cg->pids[0])
		rmdir(cg->pids);
	memset(cg, 0, sizeof *cg);
	return rc ? rc : -EIO;
}

int dlh_cgroup_join_fds(const struct dlh_cgroup *cg, int fds[4])
{
	const char *dirs[3] = { cg->cpuset, strcmp(cg->memory, cg->cpuset) ? cg->memory : "",
				cg->pids[0] && strcmp(cg->pids, cg->cpuset) ? cg->pids : "" };
	int n = 0;
	fds[0] = fds[1] = fds[2] = fds[3] = -1;
	for (int i = 0; i < 3; i++) {
		if (!dirs[i][0])
			continue;
		char path[DLH_CG_PATH_MAX + 64];
		snprintf(path, sizeof path, "%s/cgroup.procs", dirs[i]);
		if ((fds[n] = open(path, O_WRONLY | O_CLOEXEC)) < 0) {
			int e = -errno;
			for (int k = 0; k < n; k++)
				close(fds[k]);
			fds[0] = fds[1] = fds[2] = -1;
			return e;
		}
		n++;
	}
	return 0;
}

/* The number after "key " in file name of group dir (a cgroup's events:
 * "oom_kill 2", "max 7"), or 0 when the file or the key is not there. */
static long event_count(const char *dir, const char *name, const char *key)
{
	char path[DLH_CG_PATH_MAX + 64], *text;
	long n = 0;
	snprintf(path, sizeof path, "%s/%s", dir, name);
	if (!dir[0] || dlh_read_file(path, 1 << 16, &text, NULL))
		return 0;
	for (char *p = strstr(text, key); p; p = strstr(p + 1, key))
		if (p == text || p[-1] == '\n') {
			n = atol(p + strlen(key));
			break;
		}
	free(text);
	return n;
}

int dlh_cgroup_oom_kills(const struct dlh_cgroup *cg)
{
	/* v2: memory.events; v1: memory.oom_control; both say "oom_kill N" */
	long kills = event_count(cg->memory, "memory.events", "oom_kill ");
	return (int)(kills ? kills : event_count(cg->memory, "memory.oom_control", "oom_kill "));
}

long dlh_cgroup_pids_hits(const struct dlh_cgroup *cg)
{
	return event_count(cg->pids, "pids.events", "max ");
}

long long dlh_cgroup_peak(const struct dlh_cgroup *cg)
{
	static const char *const names[] = { "memory.peak", "memory.max_usage_in_bytes" };
	char path[DLH_CG_PATH_MAX + 64], *text;
	long long peak = 0;
	for (size_t i = 0; i < 2 && cg->memory[0] && !peak; i++) {
		snprintf(path, sizeof path, "%s/%s", cg->memory, names[i]);
		if (!dlh_read_file(path, 4096, &text, NULL)) {
			peak = strtoll(text, NULL, 10);
			free(text);
		}
	}
	return peak > 0 ? peak : 0;
}

void dlh_cgroup_destroy(struct dlh_cgroup *cg)
{
	if (cg->cpuset[0])
		remove_tree(cg->cpuset, 2.0);
	if (cg->memory[0] && strcmp(cg->memory, cg->cpuset))
		remove_tree(cg->memory, 2.0);
	if (cg->pids[0] && strcmp(cg->pids, cg->cpuset))
		remove_tree(cg->pids, 2.0);
	memset(cg, 0, sizeof *cg);
}
