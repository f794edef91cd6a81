/* calib.c - measuring this machine's devices (dlh-calib on its ranks) and
 * the STATE/calibration cache of what was measured */
#include "engine/plan/calib.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


#define CALIB_TEXT_MAX (512 * 1024)  /* largest cache or dlh-calib output: a GPU type's
					grids are about 30 KB, and a cache holds
					DLH_CALIB_DEVS types */
#define CALIB_KEY_MAX 64             /* longest key */
#define CALIB_PHASE_MAX_S 60.0       /* a phase that runs longer is stuck: killed */
#define CALIB_POLL_NS 10000000L      /* polling a phase's run for its end (10 ms) */

static const int gemm_dims[DLH_CALIB_GEMM_N] = DLH_CALIB_GEMM_DIMS;
static const long bw_sizes[DLH_CALIB_BW_N] = DLH_CALIB_BW_SIZES;
static const long opt_sizes[DLH_CALIB_OPT_N] = DLH_CALIB_OPT_SIZES;
static const char *tr_names[DLH_CALIB_GEMM_TR] = DLH_CALIB_GEMM_TR_NAMES;

/* A number of the cache: its key and where it lives. */
struct field {
	const char *key;
	size_t off;      /* offsetof in struct dlh_calib or struct dlh_calib_dev */
};

/* Machine-wide numbers, in the order the cache lists them. */
static const struct field calib_fields[] = {
	{ "ar_alpha", offsetof(struct dlh_calib, ar_alpha) },
	{ "ar_beta", offsetof(struct dlh_calib, ar_beta) },
	{ "sync_s", offsetof(struct dlh_calib, sync_s) },
	{ "net_alpha", offsetof(struct dlh_calib, net_alpha) },
	{ "net_beta", offsetof(struct dlh_calib, net_beta) },
	{ "launch_s", offsetof(struct dlh_calib, launch_s) },
	{ "launch_rank_s", offsetof(struct dlh_calib, launch_rank_s) },
	{ "finalize_s", offsetof(struct dlh_calib, finalize_s) },
	{ "decode_bw", offsetof(struct dlh_calib, decode_bw) },
	{ "init_rate", offsetof(struct dlh_calib, init_rate) },
	{ "write_s", offsetof(struct dlh_calib, write_s) },
	{ "write_bw", offsetof(struct dlh_calib, write_bw) },
	{ "base_rss", offsetof(struct dlh_calib, base_rss) },
	{ "metrics_s", offsetof(struct dlh_calib, metrics_s) },
	{ "shm_ranks", offsetof(struct dlh_calib, shm_ranks) },
	{ "fence_a_s", offsetof(struct dlh_calib, fence_a_s) },
	{ "fence_b", offsetof(struct dlh_calib, fence_b) },
};

/* A series of numbers measured at sizes, each as KEY_SIZE. */
struct series {
	const char *key;
	size_t off;           /* of the double[n] in the struct */
	const long *sizes;
	int n;
};

static const struct series calib_series[] = {
	{ "shm", offsetof(struct dlh_calib, shm_s), opt_sizes, DLH_CALIB_OPT_N },
};

static const struct series dev_series[] = {
	{ "bw", offsetof(struct dlh_calib_dev, bw), bw_sizes, DLH_CALIB_BW_N },
	{ "sgd", offsetof(struct dlh_calib_dev, sgd_s), opt_sizes, DLH_CALIB_OPT_N },
	{ "adam", offsetof(struct dlh_calib_dev, adam_s), opt_sizes, DLH_CALIB_OPT_N },
};

/* A device type's numbers, each as TYPE.KEY. */
static const struct field dev_fields[] = {
	{ "gemm_flops", offsetof(struct dlh_calib_dev, gemm_flops) },
	{ "gemm_all", offsetof(struct dlh_calib_dev, gemm_all) },
	{ "mem_bw", offsetof(struct dlh_calib_dev, mem_bw) },
	{ "mem_bw_all", offsetof(struct dlh_calib_dev, mem_bw_all) },
	{ "gemm_nt", offsetof(struct dlh_calib_dev, gemm_nt) },
	{ "gemm_tn", offsetof(struct dlh_calib_dev, gemm_tn) },
	{ "gemm_tt", offsetof(struct dlh_calib_dev, gemm_tt) },
	{ "relu_bwd_s", offsetof(struct dlh_calib_dev, relu_bwd_s) },
	{ "dropout_s", offsetof(struct dlh_calib_dev, dropout_s) },
	{ "gather_bw", offsetof(struct dlh_calib_dev, gather_bw) },
};

/* A GPU type's numbers besides those (written when gpu is 1). */
static const struct field gpu_fields[] = {
	{ "gpu", offsetof(struct dlh_calib_dev, gpu) },
	{ "kernel_s", offsetof(struct dlh_calib_dev, kernel_s) },
	{ "node_s", offsetof(struct dlh_calib_dev, node_s) },
	{ "direct_s", offsetof(struct dlh_calib_dev, direct_s) },
	{ "direct_dw_s", offsetof(struct dlh_calib_dev, direct_dw_s) },
	{ "sync_s", offsetof(struct dlh_calib_dev, sync_s) },
	{ "h2d_s", offsetof(struct dlh_calib_dev, h2d_s) },
	{ "h2d_bw", offsetof(struct dlh_calib_dev, h2d_bw) },
	{ "ctx_s", offsetof(struct dlh_calib_dev, ctx_s) },
	{ "blas_s", offsetof(struct dlh_calib_dev, blas_s) },
	{ "nccl_s", offsetof(struct dlh_calib_dev, nccl_s) },
	{ "ctx_bytes", offsetof(struct dlh_calib_dev, ctx_bytes) },
	{ "blas_bytes", offsetof(struct dlh_calib_dev, blas_bytes) },
	{ "nccl_bytes", offsetof(struct dlh_calib_dev, nccl_bytes) },
	{ "total_bytes", offsetof(struct dlh_calib_dev, total_bytes) },
	{ "nccl_alpha", offsetof(struct dlh_calib_dev, nccl_alpha) },
	{ "nccl_beta", offsetof(struct dlh_calib_dev, nccl_beta) },
	{ "nccl_gpus", offsetof(struct dlh_calib_dev, nccl_gpus) },
};

#define NFIELDS(t) ((int)(sizeof(t) / sizeof((t)[0])))

const struct dlh_calib_dev *dlh_calib_dev(const struct dlh_calib *c, const char *type)
{
	for (int i = 0; i < c->ndev; i++)
		if (!strcmp(c->dev[i].type, type))
			return &c->dev[i];
	return NULL;
}

/* The device of type, added when new. Returns NULL when the table is full. */
static struct dlh_calib_dev *dev_get(struct dlh_calib *c, const char *type, size_t len)
{
	for (int i = 0; i < c->ndev; i++)
		if (strlen(c->dev[i].type) == len && !strncmp(c->dev[i].type, type, len))
			return &c->dev[i];
	if (c->ndev == DLH_CALIB_DEVS || len == 0 || len >= DLH_CALIB_TYPE_NAME)
		return NULL;
	struct dlh_calib_dev *d = &c->dev[c->ndev++];
	memset(d, 0, sizeof *d);
	memcpy(d->type, type, len);
	return d;
}

/* Reads a non-negative finite number that is all of s up to its end or a
 * blank; sets *end after it. Returns 0, or -EINVAL. */
static int number(const char *s, double *v, const char **end)
{
	char *e;
	errno = 0;
	*v = strtod(s, &e);
	if (e == s || errno || !isfinite(*v) || *v < 0 || (*e && *e != ' '))
		return -EINVAL;
	*end = e;
	return 0;
}

/* Sets the field of table named key in base from value. Returns 0,
 * -ENOENT (no such key), or -EINVAL (not a number). */
static int set_field(const struct field *t, int n, void *base, const char *key,
		     const char *value)
{
	const char *end;
	for (int i = 0; i < n; i++)
		if (!strcmp(t[i].key, key)) {
			double v;
			if (number(value, &v, &end) < 0 || *end)
				return -EINVAL;
			*(double *)((char *)base + t[i].off) = v;
			return 0;
		}
	return -ENOENT;
}

/* The index of x in the list v of n, or -1. */
static int grid_index(long x, const long *v, int n)
{
	for (int i = 0; i < n; i++)
		if (v[i] == x)
			return i;
	return -1;
}

/* Sets KEY_SIZE of one of the t series in base. Returns 0, -ENOENT, -EINVAL. */
static int set_series(const struct series *t, int nt, void *base, const char *key,
		      const char *value)
{
	for (int k = 0; k < nt; k++) {
		size_t len = strlen(t[k].key);
		char tail;
		long size;
		if (strncmp(key, t[k].key, len) || key[len] != '_' ||
		    sscanf(key + len + 1, "%ld%c", &size, &tail) != 1)
			continue;
		int i = grid_index(size, t[k].sizes, t[k].n);
		if (i < 0)
			return -ENOENT;
		double *v = (double *)((char *)base + t[k].off) + i;
		const char *e;
		return number(value, v, &e) < 0 || *e ? -EINVAL : 0;
	}
	return -ENOENT;
}

/* Appends KEY_SIZE=value lines of the measured (> 0) numbers of the t
 * series in base, each key after prefix. Returns 0, or -ENOMEM. */
static int format_series(const struct series *t, int nt, const void *base, const char *prefix,
			 struct dlh_buf *out)
{
	int rc = 0;
	for (int k = 0; k < nt; k++)
		for (int i = 0; i < t[k].n; i++) {
			double v = ((const double *)((const char *)base + t[k].off))[i];
			if (v > 0)
				rc |= dlh_buf_printf(out, "%s%s_%ld=%.6g\n", prefix, t[k].key,
						     t[k].sizes[i], v);
		}
	return rc;
}

/* The grid a TYPE.gemmFORM_MxN key fills: form "" (gemm_MxN, the
 * untransposed), one of DLH_CALIB_GEMM_TR_NAMES or "tf32"; sets *rest
 * after the form's "_" and *measured to the grid's measured flag. NULL
 * when key is none of them. */
static float (*gemm_grid_of(struct dlh_calib_dev *d, const char *key, const char **rest,
			    int **measured))[DLH_CALIB_GEMM_N][DLH_CALIB_GEMM_N]
{
	static const char *names[DLH_CALIB_GEMM_TR] = DLH_CALIB_GEMM_TR_NAMES;
	if (strncmp(key, "gemm", 4))
		return NULL;
	key += 4;
	/* the form's name, its grid and its flag: untransposed unless named */
	float (*g)[DLH_CALIB_GEMM_N][DLH_CALIB_GEMM_N] = d->gemm;
	size_t len = 0;
	*measured = &d->grid;
	for (int k = 0; k < DLH_CALIB_GEMM_TR; k++)
		if (!strncmp(key, names[k], strlen(names[k]))) {
			g = d->gemm_tr[k];
			*measured = &d->grid_tr[k];
			len = strlen(names[k]);
		}
	if (!strncmp(key, "tf32", 4)) {
		g = d->gemm_tf32;
		*measured = &d->grid_tf32;
		len = 4;
	}
	if (key[len] != '_')
		return NULL;
	*rest = key + len + 1;
	return g;
}

int dlh_calib_grid_n(const struct dlh_calib_dev *d)
{
	return d->grid_n > 0 && d->grid_n <= DLH_CALIB_GEMM_N ? d->grid_n : DLH_CALIB_GEMM_N;
}

/* TYPE.gemm_MxN=K values (and gemmnt_, gemmtn_, gemmtf32_): a value for
 * each k of the type's grid, whose size the first such line sets
 * (DLH_CALIB_CPU_GEMM_N on a CPU, DLH_CALIB_GEMM_N on a GPU; M and N
 * within it). Returns 0, -ENOENT, -EINVAL (not a number), -ERANGE (not
 * such a line). */
static int set_gemm_row(struct dlh_calib_dev *d, const char *key, const char *value)
{
	long dims[DLH_CALIB_GEMM_N], m, n;
	const char *p = value, *mn;
	char tail;
	double v[DLH_CALIB_GEMM_N];
	int *measured, nv = 0;
	float (*g)[DLH_CALIB_GEMM_N][DLH_CALIB_GEMM_N] = gemm_grid_of(d, key, &mn, &measured);
	for (int i = 0; i < DLH_CALIB_GEMM_N; i++)
		dims[i] = gemm_dims[i];
	if (!g || sscanf(mn, "%ldx%ld%c", &m, &n, &tail) != 2)
		return -ENOENT;
	int i = grid_index(m, dims, DLH_CALIB_GEMM_N), j = grid_index(n, dims, DLH_CALIB_GEMM_N);
	if (i < 0 || j < 0)
		return -ENOENT;
	for (;;) {
		while (*p == ' ')
			p++;
		if (!*p)
			break;
		if (nv == DLH_CALIB_GEMM_N || number(p, &v[nv], &p) < 0)
			return -EINVAL;
		nv++;
	}
	/* the grid is a CPU's or a GPU's, square, its size the first line's */
	if ((nv != DLH_CALIB_CPU_GEMM_N && nv != DLH_CALIB_GEMM_N) ||
	    (d->grid_n && nv != d->grid_n) || i >= nv || j >= nv)
		return -ERANGE;
	d->grid_n = nv;
	for (int l = 0; l < nv; l++)
		g[i][j][l] = (float)v[l];
	*measured = 1;
	return 0;
}

/* One key=value of the cache into c. Returns 0, -ENOENT, -EINVAL, -ENOSPC, -ERANGE. */
static int set_key(struct dlh_calib *c, const char *key, const char *value)
{
	const char *dot = strchr(key, '.');
	const char *end;
	if (!dot) {
		if (!strcmp(key, "date"))   /* for people; when is the number */
			return 0;
		if (!strcmp(key, "when"))
			return number(value, &c->when, &end) < 0 || *end ? -EINVAL : 0;
		if (!strcmp(key, "device"))
			return dev_get(c, value, strlen(value)) ? 0 : -ENOSPC;
		int rc = set_field(calib_fields, NFIELDS(calib_fields), c, key, value);
		return rc == -ENOENT ? set_series(calib_series, NFIELDS(calib_series), c, key, value)
				     : rc;
	}
	struct dlh_calib_dev *d = dev_get(c, key, (size_t)(dot - key));
	if (!d)
		return -ENOSPC;
	int rc = set_field(dev_fields, NFIELDS(dev_fields), d, dot + 1, value);
	if (rc == -ENOENT)
		rc = set_field(gpu_fields, NFIELDS(gpu_fields), d, dot + 1, value);
	if (rc == -ENOENT)
		rc = set_series(dev_series, NFIELDS(dev_series), d, dot + 1, value);
	return rc == -ENOENT ? set_gemm_row(d, dot + 1, value) : rc;
}

int dlh_calib_parse(const char *text, struct dlh_calib *c, char *err, size_t errlen)
{
	int lineno = 0;
	for (const char *line = text; line && *line;) {
		const char *eol = strchr(line, '\n');
		size_t len = eol ? (size_t)(eol - line) : strlen(line);
		char buf[1024];
		lineno++;
		if (len >= sizeof buf) {
			snprintf(err, errlen, "calibration:%d: line longer than %zu bytes", lineno,
				 sizeof buf - 1);
			return -EINVAL;
		}
		memcpy(buf, line, len);
		buf[len] = '\0';
		line = eol ? eol + 1 : NULL;
		if (len == 0 || buf[0] == '#')
			continue;
		char *eq = strchr(buf, '=');
		if (!eq || eq == buf || eq - buf >= CALIB_KEY_MAX) {
			snprintf(err, errlen, "calibration:%d: expected key=value, got \"%s\"", lineno, buf);
			return -EINVAL;
		}
		*eq = '\0';
		int rc = set_key(c, buf, eq + 1);
		if (rc == -ENOENT)
			snprintf(err, errlen, "calibration:%d: unknown key \"%s\"", lineno, buf);
		else if (rc == -ENOSPC)
			snprintf(err, errlen, "calibration:%d: \"%s\": more than %d device types, or a "
				 "bad type name", lineno, buf, DLH_CALIB_DEVS);
		else if (rc == -ERANGE)
			snprintf(err, errlen, "calibration:%d: %s: a GEMM grid line holds %d values (a "
				 "CPU's) or %d (a GPU's), as many as the type's first, for M and N "
				 "within them", lineno, buf, DLH_CALIB_CPU_GEMM_N, DLH_CALIB_GEMM_N);
		else if (rc)
			snprintf(err, errlen, "calibration:%d: %s: expected non-negative numbers, "
				 "got \"%s\"", lineno, buf, eq + 1);
		if (rc)
			return -EINVAL;
	}
	return 0;
}

int dlh_calib_load(const char *state_dir, struct dlh_calib *c, char *err, size_t errlen)
{
	char path[4096], *text = NULL;
	size_t len;
	memset(c, 0, sizeof *c);
	snprintf(path, sizeof path, "%s/%s", state_dir, DLH_CALIB_FILE);
	int rc = dlh_read_file(path, CALIB_TEXT_MAX, &text, &len);
	if (rc) {
		snprintf(err, errlen, "cannot read \"%s\": %s", path, strerror(-rc));
		return rc == -EFBIG ? -EINVAL : rc;
	}
	rc = dlh_calib_parse(text, c, err, errlen);
	free(text);
	if (!rc && c->when <= 0.0) {
		snprintf(err, errlen, "calibration: no \"when\" line");
		rc = -EINVAL;
	}
	if (rc)
		memset(c, 0, sizeof *c);
	return rc;
}

/* Appends the TYPE.gemmFORM_MxN=K... lines of grid g, its first gn dims.
 * Returns 0, or -ENOMEM. */
static int format_grid(const char *type, const char *form,
		       const float (*g)[DLH_CALIB_GEMM_N][DLH_CALIB_GEMM_N], int gn,
		       struct dlh_buf *out)
{
	int rc = 0;
	for (int i = 0; i < gn; i++)
		for (int j = 0; j < gn; j++) {
			rc |= dlh_buf_printf(out, "%s.gemm%s_%dx%d=", type, form, gemm_dims[i],
					     gemm_dims[j]);
			for (int l = 0; l < gn; l++)
				rc |= dlh_buf_printf(out, "%s%.4g", l ? " " : "", (double)g[i][j][l]);
			rc |= dlh_buf_printf(out, "\n");
		}
	return rc ? -ENOMEM : 0;
}

int dlh_calib_format(const struct dlh_calib *c, struct dlh_buf *out)
{
	char date[64];
	int rc = 0;
	dlh_time_iso(c->when, date, sizeof date);
	rc |= dlh_buf_printf(out, "date=%s\nwhen=%.3f\n", date, c->when);
	for (int i = 0; i < NFIELDS(calib_fields); i++)
		rc |= dlh_buf_printf(out, "%s=%.6g\n", calib_fields[i].key,
				     *(const double *)((const char *)c + calib_fields[i].off));
	rc |= format_series(calib_series, NFIELDS(calib_series), c, "", out);
	for (int k = 0; k < c->ndev; k++) {
		const struct dlh_calib_dev *d = &c->dev[k];
		rc |= dlh_buf_printf(out, "device=%s\n", d->type);
		for (int i = 0; i < NFIELDS(dev_fields); i++)
			rc |= dlh_buf_printf(out, "%s.%s=%.6g\n", d->type, dev_fields[i].key,
					     *(const double *)((const char *)d + dev_fields[i].off));
		for (int i = 0; d->gpu > 0 && i < NFIELDS(gpu_fields); i++) {
			double v = *(const double *)((const char *)d + gpu_fields[i].off);
			if (v > 0)   /* 0: not measured (no allreduce on one GPU) */
				rc |= dlh_buf_printf(out, "%s.%s=%.6g\n", d->type, gpu_fields[i].key, v);
		}
		char prefix[DLH_CALIB_TYPE_NAME + 1];
		snprintf(prefix, sizeof prefix, "%s.", d->type);
		rc |= format_series(dev_series, NFIELDS(dev_series), d, prefix, out);
		if (d->grid)
			rc |= format_grid(d->type, "", d->gemm, dlh_calib_grid_n(d), out);
		for (int t = 0; t < DLH_CALIB_GEMM_TR; t++)
			if (d->grid_tr[t])
				rc |= format_grid(d->type, tr_names[t], d->gemm_tr[t], dlh_calib_grid_n(d),
						  out);
		if (d->grid_tf32)
			rc |= format_grid(d->type, "tf32", d->gemm_tf32, dlh_calib_grid_n(d), out);
	}
	return rc ? -ENOMEM : 0;
}

int dlh_calib_save(const char *state_dir, const struct dlh_calib *c)
{
	struct dlh_buf b = { 0 };
	char path[4096];
	int rc = dlh_buf_printf(&b, "# dlhfs calibration: what this machine's devices measured "
				"(dlh-calib); rates in FLOP/s and bytes/s, times in seconds\n");
	if (!rc)
		rc = dlh_calib_format(c, &b);
	snprintf(path, sizeof path, "%s/%s", state_dir, DLH_CALIB_FILE);
	if (!rc)
		rc = dlh_write_atomic(path, b.data, b.len);
	dlh_buf_free(&b);
	return rc;
}

/* Waits for the phase's run to end; one that runs past CALIB_PHASE_MAX_S
 * is stuck (a hung launcher must not hold the calibration, and the jobs
 * waiting for it, for ever): it is killed, as is one under way when *cancel
 * becomes nonzero (dlhfs is stopping). Polls, since the daemon's other runs
 * must not be waited for here. Returns 0 with *end set, -ETIMEDOUT,
 * -ECANCELED, or -errno. */
static int wait_phase(const struct dlh_backend *be, const struct dlh_run *run, const char *dir,
		      const atomic_int *cancel, struct dlh_run_end *end)
{
	const double until = dlh_mono() + CALIB_PHASE_MAX_S;
	const struct timespec tick = { 0, CALIB_POLL_NS };
	for (;;) {
		int rc = be->ops->wait(be, run, dir, 0, end);
		if (rc != -EAGAIN)
			return rc;
		int cancelled = cancel && atomic_load(cancel);
		if (cancelled || dlh_mono() > until) {
			be->ops->signal(be, run, DLH_VERB_KILL);
			be->ops->wait(be, run, dir, 1, end);
			return cancelled ? -ECANCELED : -ETIMEDOUT;
		}
		nanosleep(&tick, NULL);
	}
}

/* Runs dlh-calib --phase phase on ranks ranks through the backend, its
 * figures in out_path (--out) and the launcher's own output in
 * out_path.log; parses the figures into c and sets the seconds from the
 * start to its MPI_Init (*launch) and from its MPI_Finalize to the run's
 * end (*fin). With a GPU type g (NULL: none) dlh-calib gets --type and
 * --gpus, and sees g's devices alone (CUDA_VISIBLE_DEVICES). Returns 0,
 * or -errno with err naming what failed. */
static int run_phase_gpu(const struct dlh_calib_opts *o, const char *phase, int ranks,
			 const char *dir, const char *out_path, const struct dlh_calib_gpu *g,
			 struct dlh_calib *c, double *launch, double *fin, char *err,
			 size_t errlen)
{
	char *text = NULL, v[64], log_path[4096], count[16], visible[512];
	size_t len;
	int rc, n = 0;
	double t_init, t_fin;
	char *argv[20];
	argv[n++] = (char *)o->program;
	argv[n++] = "--phase";
	argv[n++] = (char *)phase;
	argv[n++] = "--dir";
	argv[n++] = (char *)dir;
	argv[n++] = "--out";
	argv[n++] = (char *)out_path;
	if (o->images && o->labels) {
		argv[n++] = "--images";
		argv[n++] = (char *)o->images;
		argv[n++] = "--labels";
		argv[n++] = (char *)o->labels;
	}
	if (g) {
		size_t used = (size_t)snprintf(visible, sizeof visible, "CUDA_VISIBLE_DEVICES=");
		for (int i = 0; i < g->count && used < sizeof visible; i++)
			used += (size_t)snprintf(visible + used, sizeof visible - used, "%s%d",
						 i ? "," : "", g->first + i);
		snprintf(count, sizeof count, "%d", g->count);
		argv[n++] = "--type";
		argv[n++] = (char *)g->type;
		argv[n++] = "--gpus";
		argv[n++] = count;
	}
	argv[n] = NULL;
	char *env[] = { "OPENBLAS_NUM_THREADS=1", "OMP_NUM_THREADS=1", g ? visible : NULL, NULL };
	snprintf(log_path, sizeof log_path, "%s.log", out_path);
	struct dlh_launch l = {
		.argv = argv, .ranks = ranks, .env = env, .job_dir = dir, .log_path = log_path,
		.hosts = o->hosts, .nhosts = o->nhosts, .agent = o->agent,
	};
	struct dlh_run run;
	struct dlh_run_end end;
	double t0 = dlh_now();
	unlink(out_path);
	rc = o->backend->ops->start(o->backend, &l, &run, err, errlen);
	if (rc)
		return rc;
	rc = wait_phase(o->backend, &run, dir, o->cancel, &end);
	if (rc) {
		unlink(log_path);
		if (rc == -ETIMEDOUT)
			snprintf(err, errlen, "dlh-calib --phase %s on %d ranks ran past %.0f s: killed",
				 phase, ranks, CALIB_PHASE_MAX_S);
		else if (rc == -ECANCELED)
			snprintf(err, errlen, "dlh-calib --phase %s on %d ranks: stopped, dlhfs is stopping",
				 phase, ranks);
		else
			snprintf(err, errlen, "waiting for dlh-calib --phase %s on %d ranks: %s", phase,
				 ranks, strerror(-rc));
		return rc;
	}
	double t1 = dlh_now();
	if (dlh_read_file(out_path, CALIB_TEXT_MAX, &text, &len) < 0)
		text = NULL;
	if (end.state != DLH_RUN_EXITED || end.exit_code != 0 || !text ||
	    dlh_kv_get(text, "#t_init", v, sizeof v) < 0 || (t_init = strtod(v, NULL)) <= 0 ||
	    dlh_kv_get(text, "#t_fin", v, sizeof v) < 0 || (t_fin = strtod(v, NULL)) <= 0) {
		/* the launcher's last words, which carry the ranks' stderr */
		char *said = NULL;
		size_t slen = 0;
		if (dlh_read_file(log_path, CALIB_TEXT_MAX, &said, &slen) < 0)
			said = NULL;
		/* dlh-calib's own words where it said any (MPI_Abort's banner
		 * follows them), else the last of what the launcher said */
		const char *tail = slen > 200 ? said + slen - 200 : said, *own = NULL;
		for (const char *p = said; p && (p = strstr(p, "dlh-calib: ")); p++)
			if (p == said || p[-1] == '\n' || p[-1] == ' ')
				own = p;
		int ownlen = own ? (int)strcspn(own, "\n") : 0;
		snprintf(err, errlen, "dlh-calib --phase %s on %d ranks failed (%s %d): %.*s", phase,
			 ranks, end.exit_code >= 0 ? "exit status" : "signal",
			 end.exit_code >= 0 ? end.exit_code : -end.exit_code,
			 own ? ownlen : slen ? (int)strlen(tail) : 9, own ? own : slen ? tail : "no output");
		free(said);
		free(text);
		unlink(log_path);
		return -EIO;
	}
	unlink(log_path);
	rc = dlh_calib_parse(text, c, err, errlen);
	free(text);
	*launch = t_init - t0;
	*fin = t1 - t_fin;
	return rc;
}

/* run_phase without a GPU type. */
static int run_phase(const struct dlh_calib_opts *o, const char *phase, int ranks,
		     const char *dir, const char *out_path, struct dlh_calib *c,
		     double *launch, double *fin, char *err, size_t errlen)
{
	return run_phase_gpu(o, phase, ranks, dir, out_path, NULL, c, launch, fin, err, errlen);
}

int dlh_calib_link(const struct dlh_calib_opts *o, double *alpha, double *beta,
		   char *err, size_t errlen)
{
	const char *dir = o->dir ? o->dir : "/tmp";
	char out[4096];
	double l, f;
	struct dlh_calib *c = calloc(1, sizeof *c);
	if (!c)
		return -ENOMEM;
	snprintf(out, sizeof out, "%s/.calib-link.%d", dir, (int)getpid());
	int rc = run_phase(o, "link", 2, dir, out, c, &l, &f, err, errlen);
	unlink(out);
	*alpha = c->net_alpha;
	*beta = c->net_beta;
	free(c);
	if (!rc && *alpha <= 0) {
		snprintf(err, errlen, "dlh-calib --phase link gave no figures");
		rc = -EIO;
	}
	return rc;
}

int dlh_calib_measure_gpus(const struct dlh_calib_opts *o, struct dlh_calib *c,
			   char *err, size_t errlen)
{
	const char *dir = o->dir ? o->dir : "/tmp";
	char out[4096];
	double l, f;
	int rc = 0;
	snprintf(out, sizeof out, "%s/.calib-gpu.%d", dir, (int)getpid());
	for (int i = 0; i < o->ngpus && !rc; i++) {
		const struct dlh_calib_gpu *g = &o->gpus[i];
		struct dlh_calib *one = calloc(1, sizeof *one);
		if (!one)
			return -ENOMEM;
		rc = run_phase_gpu(o, "gpu", 1, dir, out, g, one, &l, &f, err, errlen);
		const struct dlh_calib_dev *m = rc ? NULL : dlh_calib_dev(one, g->type);
		if (!rc && (!m || m->gpu <= 0 || m->gemm_flops <= 0)) {
			snprintf(err, errlen, "dlh-calib --phase gpu --type %s gave no figures", g->type);
			rc = -EIO;
		}
		struct dlh_calib_dev *d = rc ? NULL : dev_get(c, g->type, strlen(g->type));
		if (!rc && !d) {
			snprintf(err, errlen, "calibration: more than %d device types", DLH_CALIB_DEVS);
			rc = -ENOSPC;
		}
		if (!rc)
			*d = *m;   /* the type's figures, all of them new */
		free(one);
	}
	unlink(out);
	return rc;
}

int dlh_calib_measure(const struct dlh_calib_opts *o, struct dlh_calib *c,
		      char *err, size_t errlen)
{
	const char *dir = o->dir ? o->dir : "/tmp";
	char out[4096];
	double l1 = 0, f1 = 0, ln = 0, fn = 0;
	int rc;
	memset(c, 0, sizeof *c);
	c->when = dlh_now();
	snprintf(out, sizeof out, "%s/.calib-out.%d", dir, (int)getpid());
	rc = run_phase(o, "single", 1, dir, out, c, &l1, &f1, err, errlen);
	if (!rc && o->cpus > 1)
		rc = run_phase(o, "all", o->cpus, dir, out, c, &ln, &fn, err, errlen);
	unlink(out);
	if (rc) {
		memset(c, 0, sizeof *c);
		return rc;
	}
	/* both phases time a launch and an exit: the other load of a shared
	 * machine only ever adds to them, so the lesser of each */
	c->launch_s = o->cpus > 1 && ln < l1 ? ln : l1;
	c->finalize_s = o->cpus > 1 && fn < f1 ? fn : f1;
	c->launch_rank_s = o->cpus > 1 && ln > l1 ? (ln - l1) / (o->cpus - 1) : 0.0;
	for (int i = 0; i < c->ndev; i++) {   /* one core: the node's ranks never overlap */
		struct dlh_calib_dev *d = &c->dev[i];
		if (d->gemm_all <= 0)
			d->gemm_all = 1.0;
		if (d->mem_bw_all <= 0)
			d->mem_bw_all = d->mem_bw;
	}
	return 0;
}
