/* plan.c - placing a job: ranks, batch per rank, lr, the program each rank runs */
#include "engine/plan/plan.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/contract/contract.h"
#include "engine/train/opts.h"
#include "engine/util/util.h"

int dlh_plan_slots(const struct dlh_spec *spec, const struct dlh_pool *pool)
{
	if (spec->ranks > 0)
		return spec->ranks;
	int n = dlh_pool_devices(pool, spec->device == DLH_DEVICE_GPU, 1);
	if (n < 1)
		n = 1;
	if (spec->command[0])   /* a program's batch is its own, unless handed one to split */
		return spec->batch_size > 0 && !spec->scale_batch && n > spec->batch_size ?
		       spec->batch_size : n;
	return n < spec->batch_size ? n : spec->batch_size;
}

/* Appends one argument (printf-formatted) to plan->argv. Returns 0, or -E2BIG. */
__attribute__((format(printf, 2, 3)))
static int arg(struct dlh_plan *p, const char *fmt, ...)
{
	if (p->argc + 1 >= DLH_ARGV_MAX)
		return -E2BIG;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(p->store + p->used, sizeof p->store - p->used, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof p->store - p->used)
		return -E2BIG;
	p->argv[p->argc++] = p->store + p->used;
	p->argv[p->argc] = NULL;
	p->used += (size_t)n + 1;
	return 0;
}

/* Writes x in the shortest %g form that reads back as the same double. */
static void num_text(double x, char *out, size_t len)
{
	for (int prec = 6; prec <= 17; prec++) {
		snprintf(out, len, "%.*g", prec, x);
		if (strtod(out, NULL) == x)
			return;
	}
}

/* Appends an option and its printf-formatted value. Returns 0, or -E2BIG. */
__attribute__((format(printf, 3, 4)))
static int opt(struct dlh_plan *p, const char *name, const char *fmt, ...)
{
	char value[DLH_PATH_MAX + 64];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(value, sizeof value, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof value)
		return -E2BIG;
	return arg(p, "%s", name) | arg(p, "%s", value);
}

/* Appends an option and x in the shortest form that reads back equal. */
static int num_opt(struct dlh_plan *p, const char *name, double x)
{
	char v[40];
	num_text(x, v, sizeof v);
	return opt(p, name, "%s", v);
}

/* Splits a user command on blanks (no quoting, no shell) into argv. */
static int user_command(struct dlh_plan *p, const char *cmd)
{
	char word[DLH_COMMAND_MAX + 1];
	const char *s = cmd;
	int rc = 0, words = 0;
	while (*s && !rc) {
		while (*s == ' ' || *s == '\t')
			s++;
		size_t n = strcspn(s, " \t");
		if (!n)
			break;
		memcpy(word, s, n);
		word[n] = '\0';
		rc = arg(p, "%s", word);
		s += n;
		words++;
	}
	return rc ? rc : words ? 0 : -EINVAL;
}

/* Writes n integers as "a,b,c" (the trainer's list syntax). */
static void ints_text(const int *v, int n, char *out, size_t len)
{
	size_t used = 0;
	out[0] = '\0';
	for (int i = 0; i < n && used < len; i++)
		used += (size_t)snprintf(out + used, len - used, "%s%d", i ? "," : "", v[i]);
}

/* Writes a CNN's convolutions as "32:5,64:5". */
static void conv_text(const struct dlh_spec *s, char *out, size_t len)
{
	size_t used = 0;
	out[0] = '\0';
	for (int i = 0; i < s->nconv && used < len; i++)
		used += (size_t)snprintf(out + used, len - used, "%s%d:%d", i ? "," : "",
					 s->conv_filters[i], s->conv_kernel[i]);
}

/* Rank r's batch in the split dlh-train makes by itself: the global batch
 * over the ranks, the remainder to the first ones. */
static int equal_share(int global, int ranks, int r)
{
	return global / ranks + (r < global % ranks);
}

/* 1 when batch is that split. */
static int equal_split(const int *batch, int ranks, int global)
{
	for (int r = 0; r < ranks; r++)
		if (batch[r] != equal_share(global, ranks, r))
			return 0;
	return 1;
}

int dlh_plan_command_batch(const struct dlh_spec *spec, int ranks, int *batch, double *lr)
{
	int global = spec->scale_batch ? spec->batch_size * ranks : spec->batch_size;
	*lr = spec->lr > 0.0 && spec->scale_batch ? spec->lr * ranks : spec->lr;
	for (int r = 0; r < ranks; r++)
		batch[r] = 0;
	if (global <= 0)
		return 0;
	return dlh_split_batch(global, NULL, ranks, batch);
}

/* The pool type of rank r's device in placed plan p, or -1. */
static int rank_type(const struct dlh_plan *p, const struct dlh_pool *pool, int r)
{
	int k = p->node[r];
	if (k < 0 || k >= pool->nnodes)
		return -1;
	if (!p->gpu)
		return pool->nodes[k].cpu_type;
	if (p->gtype[r] >= 0)
		return p->gtype[r];
	for (int t = 0, first = 0; t < pool->ntypes; t++) {   /* GPUs numbered in type order */
		if (!pool->type[t].gpu)
			continue;
		if (p->dev[r] < first + pool->nodes[k].devices[t])
			return t;
		first += pool->nodes[k].devices[t];
	}
	return -1;
}

int dlh_plan_split_placed(struct dlh_plan *p, const struct dlh_pool *pool, const double *type_speed)
{
	int global = 0, differ = 0;
	double speed[DLH_RANKS_MAX];
	if (p->trainer || p->ranks < 1)
		return 0;
	for (int r = 0; r < p->ranks; r++) {
		int t = rank_type(p, pool, r);
		global += p->batch[r];
		speed[r] = t >= 0 ? type_speed[t] : 0.0;
		if (speed[r] <= 0.0)
			return 0;   /* a speed unknown: the equal split stands */
		differ |= speed[r] != speed[0];
	}
	if (global < p->ranks || !differ)
		return 0;
	return dlh_split_batch(global, speed, p->ranks, p->batch) ? 0 : 1;
}

int dlh_split_batch(int global, const double *speed, int n, int *out)
{
	double sum = 0.0, frac[DLH_RANKS_MAX];
	int given = 0;

	if (n < 1 || n > DLH_RANKS_MAX || global < n)
		return -EINVAL;
	for (int r = 0; speed && r < n; r++)
		sum += speed[r] > 0.0 ? speed[r] : 0.0;
	if (sum <= 0.0) {
		for (int r = 0; r < n; r++)
			out[r] = equal_share(global, n, r);
		return 0;
	}
	for (int r = 0; r < n; r++) {
		double x = speed[r] > 0.0 ? global * speed[r] / sum : 0.0;

		out[r] = (int)x;
		frac[r] = x - out[r];
		given += out[r];
	}
	for (; given < global; given++) {   /* largest remainder; ties to the first rank */
		int m = 0;

		for (int r = 1; r < n; r++)
			if (frac[r] > frac[m] + 1e-12)
				m = r;
		out[m]++;
		frac[m] = -1.0;
	}
	for (int r = 0; r < n; r++)          /* every rank gets a sample */
		while (out[r] < 1) {
			int m = 0;

			for (int k = 1; k < n; k++)
				if (out[k] > out[m])
					m = k;
			out[m]--;
			out[r]++;
		}
	return 0;
}

/* Whatever the schema accepts, dlh-train accepts: the argv is read with
 * the trainer's own option parser (linked, not copied), so that a spec the
 * trainer would refuse is refused now, with its words, not by a run.
 * Returns 0, or -EINVAL with err. */
static int trainer_accepts(struct dlh_plan *p, char *err, size_t errlen)
{
	struct dlt_opts *o = malloc(sizeof *o);
	char why[512];
	if (!o)
		return 0;   /* the run will say */
	int rc = dlt_opts_parse(p->argc, p->argv, o, why, sizeof why);
	free(o);
	if (rc == 0)
		return 0;
	snprintf(err, errlen, "spec: dlh-train refuses the options made of this spec: %s\n",
		 rc > 0 ? "it asks for help" : why);
	return -EINVAL;
}

int dlh_plan_make_with(const struct dlh_spec *spec, const struct dlh_plan_override *ov,
		       const struct dlh_pool *pool, const struct dlh_tools *tools,
		       const char *job_dir, struct dlh_plan *p, char *err, size_t errlen)
{
	memset(p, 0, sizeof *p);
	/* what the pool can ever run (drained and down nodes too: a job waits
	 * for them); where the ranks go now is dlh_plan_place's */
	int gpus = dlh_pool_devices(pool, 1, 0), cpus = dlh_pool_devices(pool, 0, 0);
	long long most_mem = 0;
	for (int k = 0; k < pool->nnodes; k++)
		if (pool->nodes[k].mem_bytes > most_mem)
			most_mem = pool->nodes[k].mem_bytes;
	if (spec->device == DLH_DEVICE_GPU && gpus == 0) {
		snprintf(err, errlen, "spec: [resources] device: \"gpu\" asked for, the pool has no GPU\n");
		return -EINVAL;
	}
	if (spec->memory > 0 && most_mem > 0 && spec->memory > most_mem) {
		snprintf(err, errlen, "spec: [resources] memory: %lld MiB asked for, the largest node has %lld MiB\n",
			 spec->memory >> 20, most_mem >> 20);
		return -EINVAL;
	}
	int ranks = ov ? ov->ranks : dlh_plan_slots(spec, pool);
	if (spec->device == DLH_DEVICE_GPU && ranks > gpus) {
		snprintf(err, errlen, "spec: [resources] ranks: %d ranks need %d GPUs (one each), the pool has %d\n",
			 ranks, ranks, gpus);
		return -EINVAL;
	}
	p->gpu = spec->device == DLH_DEVICE_GPU;
	if (ranks > cpus) {
		snprintf(err, errlen, "spec: [resources] ranks: %d ranks need %d cpu slots, the pool has %d\n",
			 ranks, ranks, cpus);
		return -EINVAL;
	}
	if (ranks > DLH_RANKS_MAX) {
		snprintf(err, errlen, "spec: [resources] ranks: at most %d ranks\n", DLH_RANKS_MAX);
		return -EINVAL;
	}
	p->ranks = ranks;
	for (int r = 0; r < ranks; r++) {
		p->slot[r] = -1;   /* the engine places the ranks (dlh_plan_place) */
		p->node[r] = -1;
		p->dev[r] = r;
		p->gtype[r] = -1;
	}
	p->memory = spec->memory;
	snprintf(p->host, sizeof p->host, "%s", pool->node.host);

	int rc = 0;
	if (spec->command[0]) {   /* batch and lr handed on when given, else the program's own */
		if ((rc = dlh_plan_command_batch(spec, ranks, p->batch, &p->lr)) < 0) {
			snprintf(err, errlen, "spec: [train] batch_size: %d is smaller than "
				 "[resources] ranks (%d)\n", spec->batch_size, ranks);
			return rc;
		}
		if (tools->rank[0] && (rc = arg(p, "%s", tools->rank)))
			goto toolong;
		rc = user_command(p, spec->command);
		if (rc == -EINVAL) {
			snprintf(err, errlen, "spec: [job] command: empty command\n");
			return rc;
		}
		if (rc)
			goto toolong;
		return 0;
	}
	int global = 0;
	for (int r = 0; r < ranks; r++) {
		p->batch[r] = ov ? ov->batch[r] : equal_share(spec->batch_size, ranks, r);
		global += p->batch[r];
	}
	p->lr = ov ? ov->lr : spec->lr;
	int warmup = ov ? ov->warmup_steps : spec->warmup_steps;
	char list[256];
	p->trainer = 1;
	rc |= arg(p, "%s", tools->trainer);
	rc |= opt(p, "--job-dir", "%s", job_dir);
	rc |= opt(p, "--format", "%s", spec->format);
	rc |= opt(p, "--train-images", "%s", spec->train);
	rc |= opt(p, "--train-labels", "%s", spec->train_labels);
	rc |= opt(p, "--test-images", "%s", spec->test);
	rc |= opt(p, "--test-labels", "%s", spec->test_labels);
	rc |= opt(p, "--model", "%s", spec->model_type);
	if (!strcmp(spec->model_type, "cnn")) {
		conv_text(spec, list, sizeof list);
		rc |= opt(p, "--conv", "%s", list);
		rc |= opt(p, "--pool", "%d", spec->pool);
		ints_text(spec->dense, spec->ndense, list, sizeof list);
		rc |= opt(p, "--dense", "%s", list);
	} else {
		ints_text(spec->layers, spec->nlayers, list, sizeof list);
		rc |= opt(p, "--layers", "%s", list);
	}
	rc |= num_opt(p, "--dropout", spec->dropout);
	rc |= opt(p, "--epochs", "%d", spec->epochs);
	rc |= opt(p, "--batch", "%d", global);
	if (!equal_split(p->batch, ranks, global)) {
		char rb[DLH_ARGV_BYTES];   /* the argv store holds no more */
		ints_text(p->batch, ranks, rb, sizeof rb);
		rc |= strlen(rb) + 1 >= sizeof rb ? -E2BIG : arg(p, "--rank-batches") | arg(p, "%s", rb);
		/* devices of different speeds: the planned split is a prediction;
		 * during the run it follows what each rank measures (not on GPUs,
		 * whose compute time dlh-train does not measure apart from waits) */
		if (spec->rebalance && !p->gpu) {
			p->rebalance = DLH_REBALANCE_STEPS;
			rc |= opt(p, "--rebalance", "%d", p->rebalance);
		}
	}
	rc |= p->lr > 0.0 ? num_opt(p, "--lr", p->lr) : opt(p, "--lr", "%s", "auto");
	rc |= opt(p, "--optimizer", "%s", spec->optimizer);
	if (!strcmp(spec->optimizer, "adam"))
		rc |= num_opt(p, "--beta1", spec->beta1) | num_opt(p, "--beta2", spec->beta2);
	else
		rc |= num_opt(p, "--momentum", spec->momentum);
	rc |= num_opt(p, "--weight-decay", spec->weight_decay);
	rc |= opt(p, "--schedule", "%s", spec->schedule);
	if (!strcmp(spec->schedule, "step"))
		rc |= opt(p, "--step-epochs", "%d", spec->step_epochs) | num_opt(p, "--gamma", spec->gamma);
	rc |= opt(p, "--warmup-steps", "%d", warmup);
	rc |= opt(p, "--seed", "%llu", (unsigned long long)spec->seed);
	rc |= opt(p, "--checkpoint-every", "%d", spec->checkpoint_every);
	rc |= num_opt(p, "--bucket-mb", spec->bucket_mb);
	rc |= opt(p, "--train-limit", "%ld", spec->train_limit);
	rc |= opt(p, "--test-limit", "%ld", spec->test_limit);
	if (p->gpu)
		rc |= opt(p, "--device", "%s", "gpu");
	if (spec->precision != DLH_PRECISION_FP32)   /* fp32 is the trainer's default */
		rc |= opt(p, "--precision", "%s", dlh_spec_precision_name(spec->precision));
	if (rc)
		goto toolong;
	return trainer_accepts(p, err, errlen);
toolong:
	snprintf(err, errlen, "spec: the command line is longer than %d bytes\n", DLH_ARGV_BYTES);
	return -E2BIG;
}

/* Node indices of pool by room: most avail first, the local node first
 * among equals, then pool order. */
static void by_room(const struct dlh_pool *pool, const int *avail, int *order)
{
	int n = pool->nnodes;
	for (int k = 0; k < n; k++)
		order[k] = k;
	for (int i = 1; i < n; i++) {   /* insertion sort: stable, n is small */
		int k = order[i], m = i;
		for (; m > 0; m--) {
			int o = order[m - 1];
			int before = avail[k] > avail[o] ||
				     (avail[k] == avail[o] && k == pool->local);
			if (!before)
				break;
			order[m] = o;
		}
		order[m] = k;
	}
}

/* The number node k gives its first GPU of type t (GPUs in type order). */
static int gpu_base(const struct dlh_pool *pool, int k, int t)
{
	int base = 0;
	for (int u = 0; u < t; u++)
		if (pool->type[u].gpu)
			base += pool->nodes[k].devices[u];
	return base;
}

/* dlh_plan_place for GPU ranks of named types: each type's consecutive
 * ranks on the nodes with the most of its GPUs free. */
static int place_typed(struct dlh_plan *p, const struct dlh_pool *pool, const int *avail,
		       char *why, size_t len)
{
	int left[DLH_POOL_NODES], taken[DLH_POOL_NODES][DLH_POOL_TYPES], used[DLH_POOL_NODES] = { 0 };
	int last = -1;   /* a node's ranks stay consecutive: only it may take more */
	memset(taken, 0, sizeof taken);
	for (int k = 0; k < pool->nnodes; k++)
		left[k] = avail[k];
	for (int r = 0; r < p->ranks;) {
		int t = p->gtype[r], n = 0;
		while (r + n < p->ranks && p->gtype[r + n] == t)
			n++;
		for (int placed = 0; placed < n;) {
			int best = -1, room = 0;
			for (int k = 0; k < pool->nnodes; k++) {
				if (used[k] && k != last)
					continue;
				int f = pool->nodes[k].devices[t] - taken[k][t];
				f = f < left[k] ? f : left[k];
				if (f > room || (f == room && f > 0 && k == pool->local))
					best = k, room = f;
			}
			if (best < 0 || room <= 0) {
				snprintf(why, len, "%d ranks on %s GPUs: room for %d", n, pool->type[t].name,
					 placed);
				return -EAGAIN;
			}
			used[best] = 1;
			last = best;
			for (; room > 0 && placed < n; room--, placed++, r++) {
				p->node[r] = best;
				p->dev[r] = gpu_base(pool, best, t) + taken[best][t]++;
				left[best]--;
			}
		}
	}
	return 0;
}

int dlh_plan_place(struct dlh_plan *p, const struct dlh_pool *pool, const int *avail, int nodes,
		   char *why, size_t len)
{
	if (p->gpu && p->ranks > 0 && p->gtype[0] >= 0)
		return place_typed(p, pool, avail, why, len);
	int order[DLH_POOL_NODES], share[DLH_POOL_NODES] = { 0 }, room = 0, used = 0;
	const int ranks = p->ranks;
	by_room(pool, avail, order);
	for (int k = 0; k < pool->nnodes; k++)
		room += avail[k] > 0 ? avail[k] : 0;
	if (nodes > 0) {
		for (int i = 0; i < nodes && i < pool->nnodes; i++)
			used += avail[order[i]] > 0;
		if (used < nodes || nodes > ranks) {
			snprintf(why, len, "%d ranks over %d nodes: %d nodes have room", ranks, nodes, used);
			return -EAGAIN;
		}
		for (int i = 0; i < nodes; i++) {
			share[i] = ranks / nodes + (i < ranks % nodes);
			if (share[i] > avail[order[i]]) {
				snprintf(why, len, "%d ranks over %d nodes: node %s has room for %d, not %d",
					 ranks, nodes, pool->nodes[order[i]].name, avail[order[i]], share[i]);
				return -EAGAIN;
			}
		}
	} else if (pool->local >= 0 && avail[pool->local] >= ranks) {
		order[0] = pool->local;
		share[0] = ranks;
		nodes = 1;
	} else {
		if (room < ranks) {
			snprintf(why, len, "%d ranks, room for %d on the usable nodes", ranks, room);
			return -EAGAIN;
		}
		int left = ranks;
		for (nodes = 0; left > 0; nodes++) {
			share[nodes] = avail[order[nodes]] < left ? avail[order[nodes]] : left;
			left -= share[nodes];
		}
	}
	/* the local node's ranks first when it is among the chosen: rank 0
	 * beside the launcher */
	for (int i = 1; i < nodes; i++)
		if (order[i] == pool->local) {
			int o = order[i], s = share[i];
			memmove(order + 1, order, sizeof *order * (size_t)i);
			memmove(share + 1, share, sizeof *share * (size_t)i);
			order[0] = o;
			share[0] = s;
		}
	for (int i = 0, r = 0; i < nodes; i++)
		for (int d = 0; d < share[i]; d++, r++) {
			p->node[r] = order[i];
			p->dev[r] = d;
		}
	return 0;
}

int dlh_plan_nodes(const struct dlh_plan *p, int *out, int *count, int max)
{
	int n = 0;
	for (int r = 0; r < p->ranks; r++) {
		if (n && out[n - 1] == p->node[r]) {
			count[n - 1]++;
			continue;
		}
		if (n == max)
			break;
		out[n] = p->node[r];
		count[n++] = 1;
	}
	return n;
}

int dlh_plan_pin(struct dlh_plan *p)
{
	if (!p->trainer || p->ranks < 1)
		return 0;
	char list[DLH_ARGV_BYTES];   /* the argv store holds no more */
	ints_text(p->slot, p->ranks, list, sizeof list);
	if (strlen(list) + 1 >= sizeof list)
		return -E2BIG;
	int rc = arg(p, "--cpus") | arg(p, "%s", list);
	if (p->gpu && !rc && p->node[0] >= 0) {
		ints_text(p->dev, p->ranks, list, sizeof list);
		if (strlen(list) + 1 >= sizeof list)
			return -E2BIG;
		rc = arg(p, "--gpus") | arg(p, "%s", list);
	}
	return rc;
}

int dlh_plan_format(const struct dlh_plan *p, const struct dlh_pool *pool, struct dlh_buf *out)
{
	int global = 0, rc = 0;
	for (int r = 0; r < p->ranks; r++)
		global += p->batch[r];
	rc |= dlh_buf_printf(out, "ranks %d\n", p->ranks);
	if (p->trainer)
		rc |= dlh_buf_printf(out, "global_batch %d\n", global);
	else if (global > 0)   /* a [job] command given [train] batch_size */
		rc |= dlh_buf_printf(out, "global_batch %d (" DLH_ENV_GLOBAL_BATCH "; each rank's "
				     DLH_ENV_BATCH " below)\n", global);
	if (p->lr > 0.0)
		rc |= dlh_buf_printf(out, p->trainer ? "lr %.6g\n" : "lr %.6g (" DLH_ENV_LR ")\n", p->lr);
	else if (p->trainer)   /* the trainer's range test picks it: see lr_finder */
		rc |= dlh_buf_printf(out, "lr auto (range test before training; see lr_finder)\n");
	if (p->memory > 0) {
		char mem[32];
		dlh_size_text(p->memory, mem, sizeof mem);
		rc |= dlh_buf_printf(out, "memory %s\n", mem);
	} else {
		rc |= dlh_buf_printf(out, "memory none\n");
	}
	for (int r = 0; r < p->ranks; r++) {
		const char *host = p->node[r] >= 0 ? pool->nodes[p->node[r]].host : p->host;
		char batch[32] = "";
		if (p->batch[r] > 0)
			snprintf(batch, sizeof batch, " batch %d", p->batch[r]);
		rc |= p->gpu ?
			dlh_buf_printf(out, "rank %d host %s device gpu%d%s env CUDA_VISIBLE_DEVICES=%d\n",
				       r, host, p->dev[r], batch, p->dev[r]) :
			p->slot[r] < 0 ?
			dlh_buf_printf(out, "rank %d host %s device cpu (a free slot at launch)%s\n",
				       r, host, batch) :
			dlh_buf_printf(out, "rank %d host %s device cpu%d%s\n", r, host, p->slot[r], batch);
	}
	if (p->rebalance)
		rc |= dlh_buf_printf(out, "rebalance every %d steps (the batches above are the start; "
				     "they follow each rank's measured samples/s, see log)\n",
				     p->rebalance);
	return rc ? -ENOMEM : 0;
}
