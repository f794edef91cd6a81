/* render.c - the text of generated files, rendered from engine state */
#include "fs/render.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/metrics.h"

const char fs_ctl_help[] =
	"# write one verb per line:\n"
	"cancel\n"
	"suspend\n"
	"resume\n"
	"checkpoint\n"
	"priority N\n";

static const char readme_text[] =
	"dlhfs: a deep-learning harness driven with files\n"
	"\n"
	"README                   this text\n"
	"pool/summary             cpu and gpu slots: total, held, free; job counts\n"
	"pool/nodes/<host>/       cpus, cpus_used, memory, cpu_model, jobs, gpus/\n"
	"pool/nodes/<host>/devices  one line per device: cpu<i> and its holder job\n"
	"pool/nodes/<host>/cpu/<i>/job  the job holding CPU slot i, or -\n"
	"pool/nodes/<host>/isolation  cgroup v1, cgroup v2, or none: why\n"
	"queue                    waiting jobs in start order: id, priority, cpus,\n"
	"                         time limit, estimated start\n"
	"jobs/new                 write a spec (INI) here; close() creates the job\n"
	"                         or fails with EINVAL/EFBIG; read it on the same\n"
	"                         descriptor (O_RDWR) for the new id or the error\n"
	"jobs/errors              recent rejections: time, uid, spec:LINE: message\n"
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
	"jobs/<id>/result         once ended: accuracy, loss, wall time, model\n"
	"jobs/<id>/lr_finder      lr = auto: the range test's sweep and chosen rate\n"
	"jobs/<id>/ctl            write a verb: cancel suspend resume checkpoint\n"
	"                         priority N\n"
	"jobs/<name>              symlink to the newest job with that [job] name\n";

static int render_summary(struct dlh_engine *e, struct dlh_buf *out)
{
	struct dlh_pool pool;
	struct dlh_usage use;
	dlh_engine_pool(e, &pool, &use);
	int total = pool.node.cpus;
	int rc = dlh_buf_printf(out, "cpu total %d held %d free %d\n", total, use.slots_used,
				total - use.slots_used);
	rc |= dlh_buf_printf(out, "gpu total %d held 0 free %d\n", pool.node.gpus, pool.node.gpus);
	rc |= dlh_buf_printf(out, "jobs running %d queued %d suspended %d\n", use.running,
			     use.queued, use.suspended);
	return rc ? -ENOMEM : 0;
}

/* devices (every slot and its holder, "-" when free) or cpu/<i>/job (one). */
static int render_holders(struct dlh_engine *e, const struct fs_node *n, struct dlh_buf *out)
{
	int slots = dlh_engine_holders(e, NULL, 0), rc = 0;
	long *h = calloc((size_t)slots + 1, sizeof *h);
	if (!h)
		return -ENOMEM;
	slots = dlh_engine_holders(e, h, slots);
	for (int s = 0; s < slots; s++) {
		char who[32] = "-";
		if (h[s])
			snprintf(who, sizeof who, "%ld", h[s]);
		if (n->kind == FS_NODE_CPU_JOB && s == n->id)
			rc |= dlh_buf_printf(out, "%s\n", who);
		else if (n->kind == FS_NODE_DEVICES)
			rc |= dlh_buf_printf(out, "cpu%d %s\n", s, who);
	}
	free(h);
	return rc ? -ENOMEM : 0;
}

/* The waiting jobs in queue order, one line each:
 * `ID priority P cpus N limit H:MM:SS|none start ISO|unknown [name NAME]` */
static int render_queue(struct dlh_engine *e, struct dlh_buf *out)
{
	size_t n = dlh_engine_queue(e, NULL, 0), rc = 0;
	struct dlh_queue_entry *q = calloc(n + 1, sizeof *q);
	if (!q)
		return -ENOMEM;
	size_t got = dlh_engine_queue(e, q, n);
	if (got < n)
		n = got;
	for (size_t i = 0; i < n; i++) {
		char lim[32] = "none", when[40] = "unknown";
		if (q[i].time_limit > 0)
			dlh_duration(q[i].time_limit, lim, sizeof lim);
		if (!isinf(q[i].est_start))
			dlh_time_iso(ceil(q[i].est_start), when, sizeof when);
		rc |= (size_t)dlh_buf_printf(out, "%ld priority %d cpus %d limit %s start %s%s%s\n",
					     q[i].id, q[i].priority, q[i].cpus, lim, when,
					     q[i].name[0] ? " name " : "", q[i].name);
	}
	free(q);
	return rc ? -ENOMEM : 0;
}

static int render_node(struct dlh_engine *e, const struct fs_node *n, struct dlh_buf *out)
{
	struct dlh_pool pool;
	struct dlh_usage use;
	dlh_engine_pool(e, &pool, &use);
	switch (n->kind) {
	case FS_NODE_CPUS:
		return dlh_buf_printf(out, "%d\n", pool.node.cpus);
	case FS_NODE_USED:
		return dlh_buf_printf(out, "%d\n", use.slots_used);
	case FS_NODE_MEMORY:
		return dlh_buf_printf(out, "%lld\n", pool.node.mem_bytes);
	case FS_NODE_MODEL:
		return dlh_buf_printf(out, "%s\n", pool.node.cpu_model[0] ? pool.node.cpu_model : "unknown");
	case FS_NODE_DEVICES:
	case FS_NODE_CPU_JOB:
		return render_holders(e, n, out);
	case FS_NODE_ISOLATION: {
		char text[512];
		dlh_engine_isolation(e, text, sizeof text);
		return dlh_buf_printf(out, "%s\n", text);
	}
	case FS_NODE_JOBS: {
		long ids[256];
		int ranks[256];
		size_t k = dlh_engine_running(e, ids, ranks, 256);
		int rc = 0;
		for (size_t i = 0; i < k && i < 256; i++)
			rc |= dlh_buf_printf(out, "%ld cpu %d\n", ids[i], ranks[i]);
		return rc ? -ENOMEM : 0;
	}
	default:
		return -ENOENT;
	}
}

/* The one-line progress of a job. */
static int render_progress(struct dlh_engine *e, const struct dlh_job *j, struct dlh_buf *out)
{
	char dir[4096], csv[4200];
	struct dlh_metrics m;
	struct dlh_run_info ri;
	dlh_engine_job_dir(e, j->id, dir, sizeof dir);
	snprintf(csv, sizeof csv, "%s/metrics.csv", dir);
	dlh_metrics_read(csv, &m);
	dlh_run_info_read(dir, &ri);

	switch (j->status) {
	case DLH_QUEUED:
		return dlh_buf_printf(out, "queued: %s%s%s%s\n", j->wait[0] ? j->wait : "waiting to be planned",
				      j->reason[0] ? " (" : "", j->reason, j->reason[0] ? ")" : "");
	case DLH_PLANNING:
		return dlh_buf_printf(out, "planning\n");
	default:
		break;
	}
	if (!m.have_train || !ri.valid) {
		if (j->status == DLH_RUNNING)
			return dlh_buf_printf(out, "running: starting %d rank%s, loading data\n", j->ranks,
					      j->ranks == 1 ? "" : "s");
		return dlh_buf_printf(out, "%s%s%s\n", dlh_status_name(j->status),
				      j->reason[0] ? ": " : "", j->reason);
	}
	long total = ri.total_steps;
	int epochs = j->spec.epochs;
	double pct = total ? 100.0 * (double)m.step / (double)total : 0;
	char eta[32], took[32];
	/* from the current rate, not the average: start-up would skew an average */
	double left = m.samples_per_s > 0
		? (double)(total - m.step) * j->spec.batch_size / m.samples_per_s
		: m.step > 0 ? m.time_s * (double)(total - m.step) / (double)m.step : 0;
	dlh_duration(left, eta, sizeof eta);
	dlh_duration(m.time_s, took, sizeof took);
	if (j->status == DLH_RUNNING)
		return dlh_buf_printf(out, "epoch %d/%d  step %ld/%ld  %.0f%%  %.0f samples/s  ETA %s\n",
				      m.epoch, epochs, m.step, total, pct, m.samples_per_s, eta);
	return dlh_buf_printf(out, "%s: epoch %d/%d  step %ld/%ld  %.0f%%  in %s%s%s\n",
			      dlh_status_name(j->status), m.epoch, epochs, m.step, total, pct, took,
			      j->reason[0] ? "  " : "", j->reason);
}

static int render_metrics(struct dlh_engine *e, const struct dlh_job *j, struct dlh_buf *out)
{
	char dir[4096], csv[4200];
	struct dlh_metrics m;
	dlh_engine_job_dir(e, j->id, dir, sizeof dir);
	snprintf(csv, sizeof csv, "%s/metrics.csv", dir);
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
	return rc ? -ENOMEM : 0;
}

static int render_result(struct dlh_engine *e, const struct dlh_job *j, struct dlh_buf *out)
{
	char dir[4096], path[4200], *text = NULL;
	size_t len = 0;
	dlh_engine_job_dir(e, j->id, dir, sizeof dir);
	snprintf(path, sizeof path, "%s/result", dir);
	int rc = dlh_buf_printf(out, "status=%s\n", dlh_status_name(j->status));
	if (j->reason[0])
		rc |= dlh_buf_printf(out, "reason=%s\n", j->reason);
	double wall = j->finished > j->started && j->started > 0 ? j->finished - j->started : 0;
	rc |= dlh_buf_printf(out, "wall_time_s=%.3f\n", wall);
	if (j->status == DLH_SUCCEEDED && !dlh_read_file(path, 1 << 20, &text, &len)) {
		rc |= dlh_buf_append(out, text, len);
		if (len && text[len - 1] != '\n')
			rc |= dlh_buf_append(out, "\n", 1);
		free(text);
	} else {
		struct dlh_metrics m;
		snprintf(path, sizeof path, "%s/metrics.csv", dir);
		if (!dlh_metrics_read(path, &m) && m.have_eval)
			rc |= dlh_buf_printf(out, "test_accuracy=%.6g\ntest_loss=%.6g\n", m.test_accuracy,
					     m.test_loss);
		if (m.have_train)
			rc |= dlh_buf_printf(out, "steps=%ld\n", m.step);
	}
	return rc ? -ENOMEM : 0;
}

int fs_render(struct dlh_engine *e, const struct fs_node *n, struct dlh_buf *out)
{
	struct dlh_job j;
	switch (n->kind) {
	case FS_README:
		return dlh_buf_append(out, readme_text, sizeof readme_text - 1);
	case FS_POOL_SUMMARY:
		return render_summary(e, out);
	case FS_NODE_CPUS: case FS_NODE_USED: case FS_NODE_MEMORY: case FS_NODE_MODEL:
	case FS_NODE_JOBS: case FS_NODE_DEVICES: case FS_NODE_CPU_JOB: case FS_NODE_ISOLATION:
		return render_node(e, n, out);
	case FS_QUEUE:
		return render_queue(e, out);
	default:
		break;
	}
	if (dlh_engine_job(e, n->id, &j))
		return -ENOENT;
	switch (n->kind) {
	case FS_JOB_STATUS:
		return dlh_buf_printf(out, "%s\n", dlh_status_name(j.status));
	case FS_JOB_PROGRESS:
		return render_progress(e, &j, out);
	case FS_JOB_METRICS:
		return render_metrics(e, &j, out);
	case FS_JOB_RESULT:
		return render_result(e, &j, out);
	default:
		return -ENOENT;
	}
}
