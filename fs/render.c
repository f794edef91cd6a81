/* render.c - the text of generated files, rendered from engine state */
#include "fs/render.h"

#include <errno.h>
#include <fuse.h>
#include <math.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/report/metrics.h"
#include "fs/progress.h"
#include "fs/report.h"


static const char job_ctl_help[] =
	"# write one verb per line:\n"
	"cancel\n"
	"suspend\n"
	"resume\n"
	"checkpoint\n"
	"priority N\n"
	"purge\n";

static const char pool_ctl_help[] =
	"# write one verb per line:\n"
	"recalibrate\n"
	"refresh\n"
	"reload\n"
	"drain NODE\n"
	"undrain NODE\n";

const char *fs_ctl_help(enum fs_kind kind)
{
	return kind == FS_POOL_CTL ? pool_ctl_help : job_ctl_help;
}

static const char readme_text[] =
	"dlhfs: a deep-learning harness driven with files\n"
	"\n"
	"README                   this text\n"
	"pool/summary             one line per device type: TYPE total N held N\n"
	"                         free N over all nodes; the nodes by state; this\n"
	"                         machine's role (head HOST node NAME, or outside\n"
	"                         the pool); then job counts\n"
	"pool/types               the device-type table, one line per type: NAME,\n"
	"                         cpu or gpu, flops, memory, bandwidth, watts_idle,\n"
	"                         watts_busy (rates in powers of 1000, memory of\n"
	"                         1024; 0 = unknown)\n"
	"pool/nodes/<node>/       cpus, cpus_used, memory, cpu_model, jobs, host,\n"
	"                         state (up, probing, down: why, drained), role\n"
	"                         (local: mpirun runs here; remote: its agent and\n"
	"                         the link's measured allreduce)\n"
	"pool/nodes/<node>/devices  one line per device: cpu<i> or gpu<i> and its\n"
	"                         holder job, or -\n"
	"pool/nodes/<node>/cpu/<i>/job  the job holding CPU slot i, or -\n"
	"pool/nodes/<node>/gpus/<i>/  model (its type), memory (bytes), state (free\n"
	"                         or busy), job (the holder, or -)\n"
	"pool/nodes/<node>/isolation  cgroup v1, cgroup v2, or none: why\n"
	"pool/limits              the mount's limits, key value: max_queued,\n"
	"                         max_queued_per_user, ranks_per_user,\n"
	"                         mem_per_rank, pids_per_rank, disk_per_job,\n"
	"                         disk_max, reserve, expire (dlhfs(8))\n"
	"pool/calibration         the devices' measured speeds, the date first; or\n"
	"                         why there are none yet (being measured, failed)\n"
	"pool/ctl                 write recalibrate: measure again (the write\n"
	"                         returns when done, failing with the errno);\n"
	"                         refresh: probe the other nodes again (returns\n"
	"                         when they have answered or timed out);\n"
	"                         reload: read the pool file again (new nodes\n"
	"                         join, removed ones leave when idle);\n"
	"                         drain NODE: no new ranks go there (running jobs\n"
	"                         finish); undrain NODE reverses it\n"
	"pool/nodes/<node>/state  up (what its probe found), probing, down: why,\n"
	"                         drained, or unprobed (-o probe=off)\n"
	"queue                    waiting jobs in start order: id, priority, cpus,\n"
	"                         time limit, run time planned, estimated start\n"
	"jobs/new                 write a spec (INI) here; close() creates the job\n"
	"                         or fails with EINVAL/EFBIG; read it on the same\n"
	"                         descriptor (O_RDWR) for the new id or the error\n"
	"jobs/errors              recent rejections: time, uid, spec:LINE: message\n"
	"prometheus/dlhfs.prom    the Prometheus text format: per job and per node\n"
	"                         (node_exporter --collector.textfile.directory)\n"
	"jobs/index               the job history: id owner status submitted ended\n"
	"                         accuracy name, a line per job\n"
	"jobs/<id>/spec           the spec with every default filled in\n"
	"jobs/<id>/status         queued planning running suspended succeeded failed\n"
	"                         cancelled planned (dry_run: never launched)\n"
	"jobs/<id>/progress       one line: epoch, step, %, samples/s, ETA\n"
	"jobs/<id>/metrics        latest values, key=value\n"
	"jobs/<id>/metrics.csv    one row per step and per evaluation; grows\n"
	"jobs/<id>/estimate       predicted step/epoch/total time, energy, memory per\n"
	"                         device, bytes sent per step; after the run the\n"
	"                         actual values and error %\n"
	"jobs/<id>/plan           ranks, batch per rank, lr, the exact argv; the\n"
	"                         planner's choice, what it changed and why, and\n"
	"                         the next best candidates\n"
	"jobs/<id>/log            harness events and rank output; grows\n"
	"jobs/<id>/checkpoints/   checkpoint files; `latest` names the newest\n"
	"jobs/<id>/output/        what the program writes in $DLH_OUTPUT_DIR\n"
	"jobs/<id>/result         once ended: accuracy, loss, wall time, model\n"
	"jobs/<id>/lr_finder      lr = auto: the range test's sweep and chosen rate\n"
	"jobs/<id>/plots/         loss.svg accuracy.svg throughput.svg progress.svg:\n"
	"                         metrics.csv drawn, and the estimate beside the steps;\n"
	"                         NAME.svg for each column a program adds after the eight\n"
	"jobs/<id>/report.html    the plots and the key files on one page\n"
	"jobs/<id>/ctl            write a verb: cancel suspend resume checkpoint\n"
	"                         priority N\n"
	"jobs/<name>              symlink to the newest job with that [job] name\n";

/* One node as the pool files show it: the pool, the node, and who holds
 * each of its devices. */
struct node_view {
	struct dlh_pool *pool;   /* a copy (malloc'd: it is large) */
	struct dlh_usage use;    /* the engine's counts */
	int k;                   /* the node's index in pool->nodes */
	int local;               /* 1: the local node, where runs launch */
	int ncpu, ngpu;          /* its CPU slots and GPUs */
	long *cpu, *gpu;         /* the job holding each, 0 = free */
};

static void node_view_close(struct node_view *v)
{
	free(v->pool);
	free(v->cpu);
	free(v->gpu);
}

/* Fills v for the node called name. Returns 0,
 * -ENOENT (no such node), or -ENOMEM. */
static int node_view_open(struct dlh_engine *e, const char *name, struct node_view *v)
{
	memset(v, 0, sizeof *v);
	if (!(v->pool = malloc(sizeof *v->pool)))
		return -ENOMEM;
	dlh_engine_pool(e, v->pool, &v->use);
	v->k = dlh_pool_find_node(v->pool, name);
	if (v->k < 0) {
		node_view_close(v);
		return -ENOENT;
	}
	v->local = v->k == v->pool->local;
	v->ncpu = v->pool->nodes[v->k].cpus;
	v->ngpu = dlh_pool_node_gpus(v->pool, v->k);
	v->cpu = calloc((size_t)v->ncpu + 1, sizeof *v->cpu);
	v->gpu = calloc((size_t)v->ngpu + 1, sizeof *v->gpu);
	if (!v->cpu || !v->gpu) {
		node_view_close(v);
		return -ENOMEM;
	}
	dlh_engine_holders(e, v->k, v->cpu, v->ncpu);
	dlh_engine_gpu_holders(e, v->k, v->gpu, v->ngpu);
	return 0;
}

/* Devices of v's list that a job holds. */
static int held(const long *holder, int n)
{
	int h = 0;
	for (int i = 0; i < n; i++)
		h += holder[i] != 0;
	return h;
}

/* One line per device type over every node, `TYPE total N held N free N`
 * (held: what jobs hold; free: what new ranks may take), then ` drained N`
 * and ` down N` where drained and down nodes keep some from new runs; the
 * nodes by state (`nodes total N up N probing N down N drained N unprobed
 * N`); this machine's role (`head HOST node NAME`, or `head HOST outside the
 * pool: runs mpirun, no rank`); then the job counts. */
static int render_summary(struct dlh_engine *e, struct dlh_buf *out)
{
	struct dlh_pool *p = malloc(sizeof *p);
	struct dlh_pool_free *f = malloc(sizeof *f), *all = malloc(sizeof *all);
	struct dlh_usage use;
	int rc = p && f && all ? 0 : -ENOMEM;
	int down[DLH_POOL_NODES] = { 0 }, st[5] = { 0 };   /* up probing down drained unprobed */
	if (rc)
		goto out;
	dlh_engine_pool(e, p, &use);
	dlh_pool_free_view_nodes(p, use.node_cpus, use.node_gpus, f);
	int leaving = 0, shown = 0;
	for (int k = 0; k < p->nnodes; k++) {
		struct dlh_pool_node *nd = &p->nodes[k];
		if (nd->removed)
			continue;
		shown++;
		leaving += nd->leaving;
		int s = nd->drained || nd->leaving ? 3 : k == p->local ? 0 :
			nd->probe == DLH_PROBE_RUNNING ? 1 : nd->probe == DLH_PROBE_UP ? 0 :
			nd->probe == DLH_PROBE_DOWN ? 2 : 4;
		st[s]++;
		down[k] = k != p->local && nd->probe == DLH_PROBE_DOWN;
		nd->drained = nd->leaving = 0;   /* what would be free were every node usable */
		nd->probe = DLH_PROBE_UP;
	}
	dlh_pool_free_view_nodes(p, use.node_cpus, use.node_gpus, all);
	for (int t = 0; t < p->ntypes && !rc; t++) {
		int total = 0, free_n = 0, free_all = 0, down_n = 0;
		for (int k = 0; k < p->nnodes; k++) {
			if (p->nodes[k].removed)
				continue;
			total += p->nodes[k].devices[t];
			free_n += f->free[k][t];
			free_all += all->free[k][t];
			down_n += down[k] ? all->free[k][t] : 0;
		}
		int drained_n = free_all - free_n - down_n;
		rc = dlh_buf_printf(out, "%s total %d held %d free %d", p->type[t].name, total,
				    total - free_all, free_n);
		if (drained_n > 0)
			rc |= dlh_buf_printf(out, " drained %d", drained_n);
		if (down_n > 0)
			rc |= dlh_buf_printf(out, " down %d", down_n);
		rc |= dlh_buf_printf(out, "\n");
	}
	rc |= dlh_buf_printf(out, "nodes total %d up %d probing %d down %d drained %d unprobed %d",
			     shown, st[0], st[1], st[2], st[3], st[4]);
	rc |= leaving ? dlh_buf_printf(out, " (leaving %d)\n", leaving) : dlh_buf_printf(out, "\n");
	if (p->local >= 0)
		rc |= dlh_buf_printf(out, "head %s node %s\n", p->node.host, p->nodes[p->local].name);
	else
		rc |= dlh_buf_printf(out, "head %s outside the pool: runs mpirun, no rank\n",
				     p->node.host);
	rc |= dlh_buf_printf(out, "jobs running %d queued %d suspended %d\n", use.running,
			     use.queued, use.suspended);
	rc = rc ? -ENOMEM : 0;
out:
	free(p);
	free(f);
	free(all);
	return rc;
}

/* The device-type table, one line per type:
 * `NAME cpu|gpu flops R memory S bandwidth R watts_idle W watts_busy W`
 * with rates and sizes written as pool files write them (0 = unknown). */
static int render_types(struct dlh_engine *e, struct dlh_buf *out)
{
	struct dlh_pool *p = malloc(sizeof *p);
	int rc = 0;
	if (!p)
		return -ENOMEM;
	dlh_engine_pool(e, p, NULL);
	for (int t = 0; t < p->ntypes && !rc; t++) {
		const struct dlh_pool_type *ty = &p->type[t];
		char flops[32], mem[32], bw[32];
		dlh_pool_rate_text(ty->flops, flops, sizeof flops);
		dlh_size_text(ty->mem_bytes, mem, sizeof mem);
		dlh_pool_rate_text(ty->bandwidth, bw, sizeof bw);
		rc = dlh_buf_printf(out, "%s %s flops %s memory %s bandwidth %s watts_idle %g watts_busy %g\n",
				    ty->name, ty->gpu ? "gpu" : "cpu", flops, mem, bw, ty->watts_idle,
				    ty->watts_busy);
	}
	free(p);
	return rc;
}

/* devices (every CPU slot and GPU with its holder, "-" when free) or
 * cpu/<i>/job (one slot's). */
static int render_holders(const struct node_view *v, const struct fs_node *n, struct dlh_buf *out)
{
	int rc = 0;
	for (int s = 0; s < v->ncpu; s++) {
		char who[32] = "-";
		if (v->cpu[s])
			snprintf(who, sizeof who, "%ld", v->cpu[s]);
		if (n->kind == FS_NODE_CPU_JOB && s == n->id)
			rc |= dlh_buf_printf(out, "%s\n", who);
		else if (n->kind == FS_NODE_DEVICES)
			rc |= dlh_buf_printf(out, "cpu%d %s\n", s, who);
	}
	for (int g = 0; g < v->ngpu && n->kind == FS_NODE_DEVICES; g++) {
		char who[32] = "-";
		if (v->gpu[g])
			snprintf(who, sizeof who, "%ld", v->gpu[g]);
		rc |= dlh_buf_printf(out, "gpu%d %s\n", g, who);
	}
	return rc ? -ENOMEM : 0;
}

/* gpus/<i>/{model,memory,state,job}. */
static int render_gpu(const struct node_view *v, const struct fs_node *n, struct dlh_buf *out)
{
	int t = dlh_pool_gpu_type(v->pool, v->k, (int)n->id);
	if (t < 0)
		return -ENOENT;
	long who = v->gpu[n->id];
	switch (n->kind) {
	case FS_NODE_GPU_MODEL:
		return dlh_buf_printf(out, "%s\n", v->pool->type[t].name);
	case FS_NODE_GPU_MEMORY:
		return dlh_buf_printf(out, "%lld\n", v->pool->type[t].mem_bytes);
	case FS_NODE_GPU_STATE:
		return dlh_buf_printf(out, "%s\n", who ? "busy" : "free");
	default:
		return who ? dlh_buf_printf(out, "%ld\n", who) : dlh_buf_printf(out, "-\n");
	}
}

/* One job's line of the queue file up to its name: `ID priority P cpus N
 * limit H:MM:SS|none run H:MM:SS|unknown start ISO|unknown`. */
static int queue_line(const struct dlh_queue_entry *q, struct dlh_buf *out)
{
	char lim[32] = "none", run[32] = "unknown", when[40] = "unknown";
	if (q->time_limit > 0)
		dlh_duration(q->time_limit, lim, sizeof lim);
	if (!isinf(q->duration) && q->duration > 0)
		dlh_duration(ceil(q->duration), run, sizeof run);
	if (!isinf(q->est_start))
		dlh_time_iso(ceil(q->est_start), when, sizeof when);
	return dlh_buf_printf(out, "%ld priority %d cpus %d limit %s run %s start %s", q->id,
			      q->priority, q->cpus, lim, run, when);
}

/* The waiting jobs, one line each: first those the launcher holds pending
 * (Slurm), in its order, `... start ISO slurm_job J slurm_start ISO|unknown
 * slurm_reason R [name NAME]` (start: when dlhfs planned it to start); then
 * dlhfs's queued jobs in queue order,
 * `ID priority P cpus N limit H:MM:SS|none run H:MM:SS|unknown start ISO|unknown [name NAME]` */
static int render_queue(struct dlh_engine *e, struct dlh_buf *out)
{
	struct dlh_launcher_wait *lw = NULL;
	long nl = dlh_engine_launcher_queue(e, &lw);
	if (nl < 0)
		return (int)nl;
	int lrc = 0;
	for (long i = 0; i < nl; i++) {
		char when[40] = "unknown";
		if (!isinf(lw[i].start))
			dlh_time_iso(lw[i].start, when, sizeof when);
		lrc |= queue_line(&lw[i].q, out);
		lrc |= dlh_buf_printf(out, " slurm_job %ld slurm_start %s slurm_reason %s%s%s\n",
				      lw[i].job, when, lw[i].reason[0] ? lw[i].reason : "none",
				      lw[i].q.name[0] ? " name " : "", lw[i].q.name);
	}
	free(lw);
	if (lrc)
		return -ENOMEM;
	size_t n = dlh_engine_queue(e, NULL, 0), rc = 0;
	struct dlh_queue_entry *q = calloc(n + 1, sizeof *q);
	if (!q)
		return -ENOMEM;
	size_t got = dlh_engine_queue(e, q, n);
	if (got < n)
		n = got;
	for (size_t i = 0; i < n; i++) {
		rc |= (size_t)queue_line(&q[i], out);
		rc |= (size_t)dlh_buf_printf(out, "%s%s\n", q[i].name[0] ? " name " : "", q[i].name);
	}
	free(q);
	return rc ? -ENOMEM : 0;
}


/* The files of pool/nodes/<node>/ of v's node. */
static int render_node_file(struct dlh_engine *e, const struct node_view *v,
			    const struct fs_node *n, struct dlh_buf *out)
{
	const struct dlh_pool_node *nd = &v->pool->nodes[v->k];
	const char *model = nd->cpu_model[0] ? nd->cpu_model : "unknown";
	switch (n->kind) {
	case FS_NODE_CPUS:
		return dlh_buf_printf(out, "%d\n", nd->cpus);
	case FS_NODE_USED:
		return dlh_buf_printf(out, "%d\n", held(v->cpu, v->ncpu));
	case FS_NODE_MEMORY:
		return dlh_buf_printf(out, "%lld\n", nd->mem_bytes);
	case FS_NODE_MODEL:
		return dlh_buf_printf(out, "%s\n", model);
	case FS_NODE_HOST:
		return dlh_buf_printf(out, "%s\n", nd->host);
	case FS_NODE_STATE:
		if (nd->leaving)
			return dlh_buf_printf(out, "leaving: no longer in the pool file; it goes when "
					      "its jobs there end\n");
		if (v->pool->nodes[v->k].drained)
			return dlh_buf_printf(out, "drained: no new ranks go there (echo undrain %s > pool/ctl)\n",
					      v->pool->nodes[v->k].name);
		if (nd->slurm_state[0])   /* a Slurm node: Slurm's word first */
			return dlh_buf_printf(out, "%.*s: %s\n", (int)strcspn(nd->slurm_state, "*~#!%$@^-+"),
					      nd->slurm_state, nd->probe_what);
		switch (v->local ? DLH_PROBE_UP : v->pool->nodes[v->k].probe) {
		case DLH_PROBE_RUNNING:
			return dlh_buf_printf(out, "probing\n");
		case DLH_PROBE_UP:
			return v->local ? dlh_buf_printf(out, "up\n") :
			       dlh_buf_printf(out, "up: %s\n", v->pool->nodes[v->k].probe_what);
		case DLH_PROBE_DOWN:
			return dlh_buf_printf(out, "down: %s\n", v->pool->nodes[v->k].probe_what);
		default:
			return dlh_buf_printf(out, "unprobed: the pool file says what it has "
					      "(-o probe=off)\n");
		}
	case FS_NODE_ROLE:
		if (v->local)
			return dlh_buf_printf(out, "local\n");
		if (nd->slurm_state[0])
			return dlh_buf_printf(out, "slurm: ranks started by Slurm in partition %s; jobs "
					      "submitted from %s with sbatch as their owners\n",
					      v->pool->partition[0] ? v->pool->partition : "(Slurm's default)",
					      v->pool->node.host);
		if (nd->link_alpha > 0)   /* the measured link (dlh-calib --phase link) */
			return dlh_buf_printf(out, "remote: ranks started by mpirun on %s through \"%s\"; "
					      "link: allreduce %.0f us + %.3g GB/s\n", v->pool->node.host,
					      nd->agent[0] ? nd->agent : DLH_AGENT_DEFAULT,
					      nd->link_alpha * 1e6,
					      nd->link_beta > 0 ? 1e-9 / nd->link_beta : 0.0);
		return dlh_buf_printf(out, "remote: ranks started by mpirun on %s through \"%s\"%s%s\n",
				      v->pool->node.host, nd->agent[0] ? nd->agent : DLH_AGENT_DEFAULT,
				      nd->link_why[0] ? "; link not measured: " : "", nd->link_why);
	case FS_NODE_DEVICES:
	case FS_NODE_CPU_JOB:
		return render_holders(v, n, out);
	case FS_NODE_ISOLATION: {
		char text[512];
		dlh_engine_isolation(e, v->k, text, sizeof text);
		return dlh_buf_printf(out, "%s\n", text);
	}
	case FS_NODE_JOBS: {
		long ids[256];
		int ranks[256];
		size_t k = dlh_engine_running(e, ids, ranks, 256);
		int rc = 0;
		for (size_t i = 0; i < k && i < 256; i++) {
			int here = 0;   /* its ranks on this node: the slots it holds here */
			for (int s = 0; s < v->ncpu; s++)
				here += v->cpu[s] == ids[i];
			if (here)
				rc |= dlh_buf_printf(out, "%ld cpu %d\n", ids[i], here);
		}
		return rc ? -ENOMEM : 0;
	}
	default:
		return render_gpu(v, n, out);
	}
}

static int render_node(struct dlh_engine *e, const struct fs_node *n, struct dlh_buf *out)
{
	struct node_view v;
	int rc = node_view_open(e, n->name, &v);
	if (rc)
		return rc;
	rc = render_node_file(e, &v, n, out);
	node_view_close(&v);
	return rc;
}

/* The one-line progress of a job (fs/progress.c), from its files. */
static int render_progress(struct dlh_engine *e, const struct dlh_job *j, struct dlh_buf *out)
{
	char dir[4096], csv[4200];
	struct dlh_metrics m;
	struct dlh_run_info ri;
	struct stat st;
	dlh_engine_job_dir(e, j->id, dir, sizeof dir);
	snprintf(csv, sizeof csv, "%s/" DLH_FILE_METRICS, dir);
	dlh_metrics_read(csv, &m);
	dlh_run_info_read(dir, &ri);
	double idle = lstat(csv, &st) || !S_ISREG(st.st_mode) ? 0 :
		      dlh_now() - ((double)st.st_mtim.tv_sec + 1e-9 * (double)st.st_mtim.tv_nsec);
	char note[256] = "";
	int pending = 0;
	if (j->status == DLH_RUNNING)   /* the launcher's word: pending (Slurm), or not yet stepping */
		pending = dlh_engine_run_note(e, j->id, note, sizeof note);
	if (pending)   /* held by the launcher (a requeued run too): its line */
		return dlh_buf_printf(out, "%s\n", note);
	if (m.have_train)
		note[0] = '\0';
	return fs_progress_render(j, &m, &ri, idle, note, out);
}

static int render_metrics(struct dlh_engine *e, const struct dlh_job *j, struct dlh_buf *out)
{
	char dir[4096], csv[4200];
	struct dlh_metrics m;
	dlh_engine_job_dir(e, j->id, dir, sizeof dir);
	snprintf(csv, sizeof csv, "%s/" DLH_FILE_METRICS, dir);
	int rc = dlh_metrics_read(csv, &m);
	if (rc)
		return rc;
	if (m.have_train)
		rc |= dlh_buf_printf(out,
			"step=%ld\nepoch=%d\ntime_s=%.3f\nloss=%.6g\naccuracy=%.6g\nlr=%.6g\nsamples_per_s=%.1f\n",
			m.step, m.epoch, m.time_s, m.loss, m.accuracy, m.lr, m.samples_per_s);
	if (m.have_eval)
		rc |= dlh_buf_printf(out, "test_step=%ld\ntest_loss=%.6g\ntest_accuracy=%.6g\n",
				     m.eval_step, m.test_loss, m.test_accuracy);
	/* a program's own columns: the newest train row's as NAME, eval's as eval_NAME */
	for (int x = 0; x < m.cols.nextra; x++) {
		if (m.have_train && x < m.train_nextra && !isnan(m.train_extra[x]))
			rc |= dlh_buf_printf(out, "%s=%.6g\n", m.cols.extra[x], m.train_extra[x]);
		if (m.have_eval && x < m.eval_nextra && !isnan(m.eval_extra[x]))
			rc |= dlh_buf_printf(out, "eval_%s=%.6g\n", m.cols.extra[x], m.eval_extra[x]);
	}
	return rc ? -ENOMEM : 0;
}

int fs_caller_may_read(struct dlh_engine *e, long id)
{
	const struct fuse_context *cx = fuse_get_context();
	gid_t groups[FS_GROUPS_MAX + 1];
	int k = fuse_getgroups(FS_GROUPS_MAX, groups + 1);
	groups[0] = cx->gid;
	return dlh_engine_may_read(e, id, cx->uid, groups, 1 + (k > 0 && k <= FS_GROUPS_MAX ? k : 0));
}

/* The test accuracy job id reached (its last eval row), into out ("-"
 * without one, or when the caller of this request may not read the job). */
static void accuracy_of(struct dlh_engine *e, long id, char *out, size_t len)
{
	char dir[4096], csv[4200];
	struct dlh_metrics m;
	snprintf(out, len, "-");
	if (fs_caller_may_read(e, id))
		return;   /* its results are its owner's (and readable_by's) */
	dlh_engine_job_dir(e, id, dir, sizeof dir);
	snprintf(csv, sizeof csv, "%s/" DLH_FILE_METRICS, dir);
	if (!dlh_metrics_read(csv, &m) && m.have_eval)
		snprintf(out, len, "%.4f", m.test_accuracy);
}

/* The name of user uid into out, or its number when it has none. */
static void owner_name(uid_t uid, char *out, size_t len)
{
	char pwbuf[1024];
	struct passwd pw, *found = NULL;
	if (getpwuid_r(uid, &pw, pwbuf, sizeof pwbuf, &found) == 0 && found)
		snprintf(out, len, "%s", pw.pw_name);
	else
		snprintf(out, len, "%u", (unsigned)uid);
}

/* The energy job id's runs took, as its estimate's actual figures say
 * (measured time on the devices' modelled power), into out ("-" when not
 * known). */
static void energy_of(struct dlh_engine *e, long id, char *out, size_t len)
{
	char dir[4096], path[4200], v[64], *text = NULL;
	snprintf(out, len, "-");
	dlh_engine_job_dir(e, id, dir, sizeof dir);
	snprintf(path, sizeof path, "%s/estimate", dir);
	if (!dlh_read_file_nofollow(path, 1 << 16, &text, NULL) &&
	    !dlh_kv_get(text, "actual_joules", v, sizeof v) && strtod(v, NULL) > 0)
		snprintf(out, len, "%.0f", strtod(v, NULL));
	free(text);
}

/* jobs/index: the job history, a header then one line per job, as sacct
 * lists them: `ID OWNER STATUS SUBMITTED STARTED ENDED CPU_S PEAK_MEM
 * ENERGY_J ACCURACY NAME` (times in ISO 8601 UTC; CPU seconds of its runs;
 * the most memory a run used at once, in powers of 1024; joules; "-" where
 * a job has not started or ended, or a figure is not known; the accuracy
 * only of jobs the reader may read). */
static int render_index(struct dlh_engine *e, struct dlh_buf *out)
{
	size_t n;
	long *ids = dlh_engine_job_ids(e, &n);
	struct dlh_job *j = malloc(sizeof *j);
	int rc = ids && j ? 0 : -ENOMEM;
	if (!rc)
		rc = dlh_buf_printf(out, "id owner status submitted started ended cpu_s peak_mem energy_j "
				    "accuracy name\n");
	for (size_t i = 0; i < n && !rc; i++) {
		char owner[64], sub[40], start[40] = "-", end[40] = "-", acc[32], cpu[32] = "-",
		     mem[32] = "-", joules[32];
		if (dlh_engine_job(e, ids[i], j))
			continue;   /* gone since */
		owner_name(j->uid, owner, sizeof owner);
		dlh_time_iso(j->submitted, sub, sizeof sub);
		if (j->started > 0)
			dlh_time_iso(j->started, start, sizeof start);
		if (j->finished > 0)
			dlh_time_iso(j->finished, end, sizeof end);
		if (j->cpu_s > 0)
			snprintf(cpu, sizeof cpu, "%.1f", j->cpu_s);
		if (j->peak_mem > 0)
			dlh_size_text(j->peak_mem, mem, sizeof mem);
		accuracy_of(e, j->id, acc, sizeof acc);
		energy_of(e, j->id, joules, sizeof joules);
		rc = dlh_buf_printf(out, "%ld %s %s %s %s %s %s %s %s %s %s\n", j->id, owner,
				    dlh_status_name(j->status), sub, start, end, cpu, mem, joules, acc,
				    j->spec.name[0] ? j->spec.name : "-");
	}
	free(ids);
	free(j);
	return rc ? -ENOMEM : 0;
}

/* ---- /prometheus/dlhfs.prom: node_exporter's textfile collector reads it ---- */

#define PROM_ENDED_S 3600.0   /* ended jobs stay in the export this long */

/* One metric family: its HELP and TYPE lines. */
static int prom_family(struct dlh_buf *b, const char *name, const char *type, const char *help)
{
	return dlh_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value as the exposition format quotes it (\\, \", \n). */
static void prom_label(const char *v, char *out, size_t len)
{
	size_t n = 0;
	for (; *v && n + 3 < len; v++) {
		if (*v == '\\' || *v == '"' || *v == '\n') {
			out[n++] = '\\';
			out[n++] = *v == '\n' ? 'n' : *v;
		} else {
			out[n++] = *v;
		}
	}
	out[n] = '\0';
}

/* What the export says of one job. */
struct prom_job {
	long id;
	char labels[300];             /* job_id="..",name="..",owner=".." */
	int status;                   /* enum dlh_status */
	int readable;                 /* the reader may read its files */
	struct dlh_metrics m;
	long steps;                   /* train steps of the whole run; 0 = unknown */
	double predicted_s, elapsed_s, joules;
	int restarts;
};

/* The jobs of the export (not ended, or ended within PROM_ENDED_S), into
 * *out (malloc'd). Returns how many. */
static size_t prom_jobs(struct dlh_engine *e, struct prom_job **out)
{
	size_t n, k = 0;
	long *ids = dlh_engine_job_ids(e, &n);
	struct dlh_job *j = malloc(sizeof *j);
	struct prom_job *p = calloc(n ? n : 1, sizeof *p);
	double now = dlh_now();
	*out = p;
	if (!ids || !j || !p) {
		free(ids);
		free(j);
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		char user[64], owner[64], name[160], dir[4096], path[4200], *text = NULL, v[64];
		if (dlh_engine_job(e, ids[i], j) || (j->finished > 0 && now - j->finished > PROM_ENDED_S))
			continue;
		struct prom_job *q = &p[k++];
		owner_name(j->uid, user, sizeof user);
		prom_label(user, owner, sizeof owner);
		prom_label(j->spec.name, name, sizeof name);
		q->id = j->id;
		snprintf(q->labels, sizeof q->labels, "job_id=\"%ld\",name=\"%s\",owner=\"%s\"", j->id,
			 name, owner);
		q->status = j->status;
		q->restarts = j->restarts;
		q->readable = !fs_caller_may_read(e, j->id);
		q->predicted_s = j->est_total;
		q->elapsed_s = j->started > 0 ? (j->finished > 0 ? j->finished : now) - j->started : 0;
		dlh_engine_job_dir(e, j->id, dir, sizeof dir);
		snprintf(path, sizeof path, "%s/" DLH_FILE_METRICS, dir);
		if (q->readable) {
			struct dlh_run_info ri;
			dlh_metrics_read(path, &q->m);
			dlh_run_info_read(dir, &ri);
			q->steps = dlh_total_steps(&ri, &j->spec);
		}
		snprintf(path, sizeof path, "%s/estimate", dir);
		if (!dlh_read_file_nofollow(path, 1 << 16, &text, NULL) &&
		    !dlh_kv_get(text, "joules", v, sizeof v))
			q->joules = strtod(v, NULL);
		free(text);
	}
	free(ids);
	free(j);
	return k;
}

/* One gauge per job of the export where has(q); value(q) its value. */
#define PROM_PER_JOB(b, rc, jobs, n, name, type, help, has, value)                     \
	do {                                                                           \
		int first_ = 1;                                                        \
		for (size_t i_ = 0; i_ < (n); i_++) {                                  \
			const struct prom_job *q = &(jobs)[i_];                        \
			if (!(has))                                                    \
				continue;                                              \
			if (first_)                                                    \
				rc |= prom_family(b, name, type, help);                \
			first_ = 0;                                                    \
			rc |= dlh_buf_printf(b, "%s{%s} %.9g\n", name, q->labels,      \
					     (double)(value));                         \
		}                                                                      \
	} while (0)

/* dlhfs_job_metric: the columns a program adds to metrics.csv, the newest
 * train row's and eval row's values (an empty one is left out), the
 * column's name in label metric. Returns 0, or -ENOMEM. */
static int prom_extra(struct dlh_buf *b, const struct prom_job *jobs, size_t n)
{
	int rc = 0, first = 1;
	for (size_t i = 0; i < n; i++) {
		const struct dlh_metrics *m = &jobs[i].m;
		for (int x = 0; jobs[i].readable && x < m->cols.nextra; x++)
			for (int eval = 0; eval < 2; eval++) {
				double v = NAN;
				if (!eval && m->have_train && x < m->train_nextra)
					v = m->train_extra[x];
				else if (eval && m->have_eval && x < m->eval_nextra)
					v = m->eval_extra[x];
				if (!isfinite(v))
					continue;
				if (first)
					rc |= prom_family(b, "dlhfs_job_metric", "gauge",
							  "A column the job's program adds to metrics.csv "
							  "(label metric): its value in the newest train "
							  "or eval row (label rows).");
				first = 0;
				rc |= dlh_buf_printf(b, "dlhfs_job_metric{%s,metric=\"%s\",rows=\"%s\"} %.9g\n",
						     jobs[i].labels, m->cols.extra[x], eval ? "eval" : "train", v);
			}
	}
	return rc;
}

/* The devices of every node by type: held and free (dlhfs_devices). */
static int prom_devices(struct dlh_engine *e, struct dlh_buf *b)
{
	struct dlh_pool *p = malloc(sizeof *p);
	struct dlh_usage use;
	long gh[1024];
	int rc = 0;
	if (!p)
		return -ENOMEM;
	dlh_engine_pool(e, p, &use);
	rc |= prom_family(b, "dlhfs_devices", "gauge",
			  "Devices of a node of the pool by type and state (held by a job, or free).");
	for (int k = 0; k < p->nnodes; k++) {
		int held[DLH_POOL_TYPES] = { 0 };
		if (p->nodes[k].removed)
			continue;
		int ng = dlh_engine_gpu_holders(e, k, gh, 1024);
		for (int g = 0; g < ng && g < 1024; g++)
			if (gh[g]) {
				int t = dlh_pool_gpu_type(p, k, g);
				if (t >= 0)
					held[t]++;
			}
		held[p->nodes[k].cpu_type] = use.node_cpus[k];
		for (int t = 0; t < p->ntypes; t++) {
			if (!p->nodes[k].devices[t])
				continue;
			int usable = dlh_pool_node_usable(p, k);
			int free_n = usable ? p->nodes[k].devices[t] - held[t] : 0;
			rc |= dlh_buf_printf(b, "dlhfs_devices{node=\"%s\",type=\"%s\",state=\"held\"} %d\n"
					     "dlhfs_devices{node=\"%s\",type=\"%s\",state=\"free\"} %d\n",
					     p->nodes[k].name, p->type[t].name, held[t], p->nodes[k].name,
					     p->type[t].name, free_n > 0 ? free_n : 0);
		}
	}
	rc |= prom_family(b, "dlhfs_node_up", "gauge",
			  "1 when new ranks may go to the node (not drained, not down).");
	for (int k = 0; k < p->nnodes; k++)
		if (!p->nodes[k].removed)
			rc |= dlh_buf_printf(b, "dlhfs_node_up{node=\"%s\"} %d\n", p->nodes[k].name,
					     dlh_pool_node_usable(p, k));
	rc |= prom_family(b, "dlhfs_jobs", "gauge", "Jobs of the mount by state.");
	rc |= dlh_buf_printf(b, "dlhfs_jobs{state=\"running\"} %d\ndlhfs_jobs{state=\"queued\"} %d\n"
			     "dlhfs_jobs{state=\"suspended\"} %d\n", use.running, use.queued, use.suspended);
	free(p);
	return rc ? -ENOMEM : 0;
}

/* /prometheus/dlhfs.prom: the text exposition format, every family with
 * HELP and TYPE, names prefixed dlhfs_, base units (seconds, joules, ratios).
 * Per job (not ended, or ended within the hour): its state, and where the
 * reader may read the job, its step (and the run's steps, where known),
 * epoch, samples per second, loss, test accuracy; predicted and elapsed seconds, predicted joules, restarts. Per
 * node and device type: held and free. */
static int render_prom(struct dlh_engine *e, struct dlh_buf *b)
{
	struct prom_job *jobs;
	size_t n = prom_jobs(e, &jobs);
	int rc = 0;
	if (!jobs)
		return -ENOMEM;
	if (n)
		rc |= prom_family(b, "dlhfs_job_state", "gauge",
				  "A job's state: 1 for the state it is in (label state).");
	for (size_t i = 0; i < n; i++)
		rc |= dlh_buf_printf(b, "dlhfs_job_state{%s,state=\"%s\"} 1\n", jobs[i].labels,
				     dlh_status_name((enum dlh_status)jobs[i].status));
	PROM_PER_JOB(b, rc, jobs, n, "dlhfs_job_step", "gauge", "The newest training step the job recorded.",
		     q->readable && q->m.have_train, q->m.step);
	PROM_PER_JOB(b, rc, jobs, n, "dlhfs_job_steps", "gauge",
		     "The training steps of the whole run (run.info's, or a command's [job] steps).",
		     q->readable && q->steps > 0, q->steps);
	PROM_PER_JOB(b, rc, jobs, n, "dlhfs_job_epoch", "gauge", "The epoch of that step.",
		     q->readable && q->m.have_train, q->m.epoch);
	PROM_PER_JOB(b, rc, jobs, n, "dlhfs_job_samples_per_second", "gauge",
		     "Training throughput of the newest step, samples per second.",
		     q->readable && q->m.have_train, q->m.samples_per_s);
	PROM_PER_JOB(b, rc, jobs, n, "dlhfs_job_loss", "gauge", "Training loss of the newest step.",
		     q->readable && q->m.have_train, q->m.loss);
	PROM_PER_JOB(b, rc, jobs, n, "dlhfs_job_test_accuracy_ratio", "gauge",
		     "Test accuracy of the newest evaluation (0 to 1).", q->readable && q->m.have_eval,
		     q->m.test_accuracy);
	rc |= prom_extra(b, jobs, n);
	PROM_PER_JOB(b, rc, jobs, n, "dlhfs_job_predicted_seconds", "gauge",
		     "The estimate of the job's run time, seconds.", q->predicted_s > 0, q->predicted_s);
	PROM_PER_JOB(b, rc, jobs, n, "dlhfs_job_elapsed_seconds", "gauge",
		     "Seconds since the job first started (to its end once ended).", q->elapsed_s > 0,
		     q->elapsed_s);
	PROM_PER_JOB(b, rc, jobs, n, "dlhfs_job_predicted_joules", "gauge",
		     "The estimate of the energy of the devices the job holds, joules.", q->joules > 0,
		     q->joules);
	PROM_PER_JOB(b, rc, jobs, n, "dlhfs_job_restarts_total", "counter",
		     "Relaunches of the job under restart = on-failure.", 1, q->restarts);
	free(jobs);
	if (rc)
		return -ENOMEM;
	return prom_devices(e, b);
}

static int render_result(struct dlh_engine *e, const struct dlh_job *j, struct dlh_buf *out)
{
	char dir[4096], path[4200], *text = NULL;
	size_t len = 0;
	dlh_engine_job_dir(e, j->id, dir, sizeof dir);
	snprintf(path, sizeof path, "%s/result", dir);
	int rc = dlh_buf_printf(out, "status=%s\n", dlh_status_name(j->status));
	if (j->reason[0])   /* in full: result is the job's readers' */
		rc |= dlh_buf_printf(out, "reason=%s\n", dlh_job_reason_full(j));
	double wall = j->finished > j->started && j->started > 0 ? j->finished - j->started : 0;
	rc |= dlh_buf_printf(out, "wall_time_s=%.3f\n", wall);
	if (j->status == DLH_SUCCEEDED && !dlh_read_file_nofollow(path, 1 << 20, &text, &len)) {
		rc |= dlh_buf_append(out, text, len);
		if (len && text[len - 1] != '\n')
			rc |= dlh_buf_append(out, "\n", 1);
		free(text);
	} else {
		struct dlh_metrics m;
		snprintf(path, sizeof path, "%s/" DLH_FILE_METRICS, dir);
		if (!dlh_metrics_read(path, &m) && m.have_eval)
			rc |= dlh_buf_printf(out, "test_accuracy=%.6g\ntest_loss=%.6g\n", m.test_accuracy,
					     m.test_loss);
		if (m.have_train)
			rc |= dlh_buf_printf(out, "steps=%ld\n", m.step);
	}
	return rc ? -ENOMEM : 0;
}

/* report.html: the page fs/report.c makes, with progress, metrics and
 * (once the job has ended) result as those files read. */
static int render_report(struct dlh_engine *e, const struct dlh_job *j, struct dlh_buf *out)
{
	struct dlh_buf progress = { 0 }, metrics = { 0 }, result = { 0 };
	int rc = render_progress(e, j, &progress);
	rc = rc ? rc : render_metrics(e, j, &metrics);
	if (!rc && dlh_status_terminal(j->status))
		rc = render_result(e, j, &result);
	if (!rc) {
		struct fs_report_text t = {
			.progress = progress.data ? progress.data : "",
			.metrics = metrics.data ? metrics.data : "",
			.result = dlh_status_terminal(j->status) ? (result.data ? result.data : "") : NULL,
		};
		rc = fs_report_html(e, j, &t, out);
	}
	dlh_buf_free(&progress);
	dlh_buf_free(&metrics);
	dlh_buf_free(&result);
	return rc;
}

int fs_render(struct dlh_engine *e, const struct fs_node *n, struct dlh_buf *out)
{
	struct dlh_job j;
	switch (n->kind) {
	case FS_README:
		return dlh_buf_append(out, readme_text, sizeof readme_text - 1);
	case FS_POOL_SUMMARY:
		return render_summary(e, out);
	case FS_POOL_TYPES:
		return render_types(e, out);
	case FS_POOL_CALIB:
		return dlh_engine_calibration(e, out);
	case FS_POOL_LIMITS:
		return dlh_engine_limits(e, out);
	case FS_NODE_CPUS: case FS_NODE_USED: case FS_NODE_MEMORY: case FS_NODE_MODEL:
	case FS_NODE_JOBS: case FS_NODE_DEVICES: case FS_NODE_CPU_JOB: case FS_NODE_ISOLATION:
	case FS_NODE_HOST: case FS_NODE_ROLE: case FS_NODE_STATE: case FS_NODE_GPU_MODEL:
	case FS_NODE_GPU_MEMORY:
	case FS_NODE_GPU_STATE: case FS_NODE_GPU_JOB:
		return render_node(e, n, out);
	case FS_QUEUE:
		return render_queue(e, out);
	case FS_JOBS_INDEX:
		return render_index(e, out);
	case FS_PROM_FILE:
		return render_prom(e, out);
	case FS_JOB_STATUS: {
		struct dlh_job_brief b;
		if (dlh_engine_job_brief(e, n->id, &b))
			return -ENOENT;
		char note[256];
		/* a run its launcher holds waiting to start (Slurm's PENDING) */
		if (b.status == DLH_RUNNING && dlh_engine_run_note(e, n->id, note, sizeof note))
			return dlh_buf_printf(out, "pending\n");
		return dlh_buf_printf(out, "%s\n", dlh_status_name(b.status));
	}
	default:
		break;
	}
	if (dlh_engine_job(e, n->id, &j))
		return -ENOENT;
	switch (n->kind) {
	case FS_JOB_PROGRESS:
		return render_progress(e, &j, out);
	case FS_JOB_METRICS:
		return render_metrics(e, &j, out);
	case FS_JOB_RESULT:
		return render_result(e, &j, out);
	case FS_JOB_PLOT_LOSS: case FS_JOB_PLOT_ACCURACY: case FS_JOB_PLOT_THROUGHPUT:
	case FS_JOB_PLOT_PROGRESS: case FS_JOB_PLOT_EXTRA:
		return fs_report_plot(e, &j, n->kind, n->name, out);
	case FS_JOB_REPORT:
		return render_report(e, &j, out);
	default:
		return -ENOENT;
	}
}
