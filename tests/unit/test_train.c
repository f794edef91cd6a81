/* test_train.c - unit tests of the dlh-train modules (no MPI needed) */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "engine/train/ckpt.h"
#include "engine/train/files.h"
#include "engine/train/idx.h"
#include "engine/train/lrfind.h"
#include "engine/train/metrics.h"
#include "engine/train/net.h"
#include "engine/train/optim.h"
#include "engine/train/opts.h"
#include "engine/train/plan.h"
#include "engine/train/rng.h"
#include "engine/train/shm.h"
#include "tests/unit/batch.h"
#include "tests/unit/check.h"

#define TMP_TEMPLATE "/tmp/dlh-test-train-XXXXXX"

static char tmpdir[sizeof TMP_TEMPLATE];   /* this run's scratch directory */

/* Removes path and, for a directory, everything under it. */
static void rm_tree(const char *path)
{
	struct stat st;
	DIR *d;
	struct dirent *e;

	if (lstat(path, &st) < 0)
		return;
	if (!S_ISDIR(st.st_mode)) {
		unlink(path);
		return;
	}
	d = opendir(path);
	while (d && (e = readdir(d))) {
		char sub[DLT_PATH_MAX];

		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
		rm_tree(sub);
	}
	if (d)
		closedir(d);
	rmdir(path);
}

/* tmpdir/name into out. */
static void tmp_path(char *out, size_t len, const char *name)
{
	snprintf(out, len, "%s/%s", tmpdir, name);
}

static void put_be32(unsigned char *b, uint32_t v)
{
	b[0] = (unsigned char)(v >> 24);
	b[1] = (unsigned char)(v >> 16);
	b[2] = (unsigned char)(v >> 8);
	b[3] = (unsigned char)v;
}

/* Writes a gzip file of len bytes. Returns 0, or -1. */
static int write_gz(const char *path, const void *data, size_t len)
{
	gzFile gz = gzopen(path, "wb");

	if (!gz)
		return -1;
	int n = gzwrite(gz, data, (unsigned)len);

	return gzclose(gz) == Z_OK && (size_t)n == len ? 0 : -1;
}

/* An IDX3 file of count images of rows x cols; pixel i of image k is
 * (k * 31 + i * 7) mod 256; declared says how many the header claims. */
static int write_images(const char *path, uint32_t magic, int declared, int count,
			int rows, int cols)
{
	size_t dim = (size_t)rows * cols, len = 16 + (size_t)count * dim;
	unsigned char *b = malloc(len);
	int rc;

	put_be32(b, magic);
	put_be32(b + 4, (uint32_t)declared);
	put_be32(b + 8, (uint32_t)rows);
	put_be32(b + 12, (uint32_t)cols);
	for (int k = 0; k < count; k++)
		for (size_t i = 0; i < dim; i++)
			b[16 + k * dim + i] = (unsigned char)((k * 31 + (int)i * 7) % 256);
	rc = write_gz(path, b, len);
	free(b);
	return rc;
}

/* An IDX1 file of count labels, label k = k % 10. */
static int write_labels(const char *path, int count)
{
	unsigned char b[8 + 64];

	put_be32(b, DLT_IDX_MAGIC_LABELS);
	put_be32(b + 4, (uint32_t)count);
	for (int k = 0; k < count; k++)
		b[8 + k] = (unsigned char)(k % 10);
	return write_gz(path, b, 8 + (size_t)count);
}

TEST(idx_loads_gzip_shard)
{
	char img[DLT_PATH_MAX], lab[DLT_PATH_MAX], err[DLT_ERR_MAX];
	struct dlt_idx_header h;
	struct dlt_dataset d;

	tmp_path(img, sizeof img, "img.gz");
	tmp_path(lab, sizeof lab, "lab.gz");
	CHECK(write_images(img, DLT_IDX_MAGIC_IMAGES, 5, 5, 2, 3) == 0);
	CHECK(write_labels(lab, 5) == 0);
	CHECK(dlt_idx_probe(img, DLT_IDX_MAGIC_IMAGES, &h, err, sizeof err) == 0);
	CHECK(h.count == 5 && h.rows == 2 && h.cols == 3);
	CHECK_MSG(dlt_dataset_load(&d, img, lab, 1, 4, err, sizeof err) == 0, "%s", err);
	CHECK(d.n == 3 && d.dim == 6);
	for (int k = 0; k < 3; k++) {
		CHECK(d.y[k] == k + 1);
		for (int i = 0; i < 6; i++) {
			float p = (float)(((k + 1) * 31 + i * 7) % 256) / 255.0f;
			float want = (p - DLT_IDX_MEAN) / DLT_IDX_STD;

			CHECK_MSG(fabsf(d.x[k * 6 + i] - want) < 1e-6f, "x[%d][%d] = %g, want %g",
				  k, i, d.x[k * 6 + i], want);
		}
	}
	uint32_t idx[2] = { 2, 0 };
	float bx[12];
	uint8_t by[2];

	dlt_dataset_gather(&d, idx, 2, bx, by);
	CHECK(by[0] == 3 && by[1] == 1);
	CHECK(memcmp(bx, d.x + 12, 6 * sizeof(float)) == 0);
	dlt_dataset_free(&d);
	CHECK(dlt_dataset_load(&d, img, lab, 3, 6, err, sizeof err) == -EINVAL);
}

TEST(idx_rejects_bad_magic)
{
	char img[DLT_PATH_MAX], err[DLT_ERR_MAX] = "";
	float *x;
	int dim;

	tmp_path(img, sizeof img, "magic.gz");
	CHECK(write_images(img, 0x00000802u, 2, 2, 2, 2) == 0);
	CHECK(dlt_idx_load_images(img, 0, 2, &x, &dim, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "bad magic 0x00000802") && strstr(err, img), "%s", err);
	/* a labels file where images are expected */
	CHECK(write_labels(img, 3) == 0);
	CHECK(dlt_idx_load_images(img, 0, 1, &x, &dim, err, sizeof err) < 0);
}

TEST(idx_rejects_truncated_file)
{
	char img[DLT_PATH_MAX], err[DLT_ERR_MAX] = "";
	struct stat st;
	float *x;
	int dim;

	tmp_path(img, sizeof img, "short.gz");
	/* header promises 10 images, data holds 4 */
	CHECK(write_images(img, DLT_IDX_MAGIC_IMAGES, 10, 4, 4, 4) == 0);
	CHECK(dlt_idx_load_images(img, 0, 4, &x, &dim, err, sizeof err) == 0);
	free(x);
	CHECK(dlt_idx_load_images(img, 2, 10, &x, &dim, err, sizeof err) == -EIO);
	CHECK_MSG(strstr(err, "truncated"), "%s", err);
	/* a gzip stream cut in the middle */
	CHECK(write_images(img, DLT_IDX_MAGIC_IMAGES, 400, 400, 16, 16) == 0);
	CHECK(stat(img, &st) == 0 && truncate(img, st.st_size / 2) == 0);
	err[0] = '\0';
	CHECK(dlt_idx_load_images(img, 0, 400, &x, &dim, err, sizeof err) == -EIO);
	CHECK_MSG(strstr(err, "truncated"), "%s", err);
	/* missing file */
	tmp_path(img, sizeof img, "absent.gz");
	CHECK(dlt_idx_load_images(img, 0, 1, &x, &dim, err, sizeof err) == -ENOENT);
	CHECK_MSG(strstr(err, "cannot open \"") && strstr(err, "No such file"), "%s", err);
}

/* Builds n, an MLP of in inputs, hidden widths and classes outputs for up
 * to rows rows (dropout seed 1). Returns dlt_net_create's result. */
static int make_mlp(struct dlt_net *n, int in, const int *hidden, int nh, int classes, int rows)
{
	struct dlt_net_spec spec;
	char err[DLT_ERR_MAX];

	mlp_spec(&spec, in, hidden, nh, classes);
	return dlt_net_create(n, &spec, rows, 1, 0, err, sizeof err);
}

/* Sets the biases of every dense layer of n in p to small random values. */
static void random_biases(const struct dlt_net *n, float *p, uint64_t seed)
{
	struct dlt_rng r;

	dlt_rng_seed(&r, seed, 0, 0);
	for (int l = 0; l < n->nlayers; l++) {
		const struct dlt_layer *L = &n->layer[l];
		size_t units = (size_t)L->out.c;

		if (L->kind != DLT_LAYER_DENSE)
			continue;
		for (size_t j = 0; j < units; j++)
			p[L->off + L->nparams - units + j] = (float)(0.1 * dlt_rng_normal(&r));
	}
}

TEST(mlp_backward_matches_finite_differences)
{
	enum { IN = 6, C = 3, N = 4 };
	const int hidden[2] = { 5, 4 };
	struct dlt_net m;
	float x[N * IN], *p, *g;
	uint8_t y[N];
	int checked = 0;

	CHECK(make_mlp(&m, IN, hidden, 2, C, N) == 0);
	CHECK(m.nparams == (size_t)(6 * 5 + 5 + 5 * 4 + 4 + 4 * 3 + 3));
	p = malloc(m.nparams * sizeof *p);
	g = malloc(m.nparams * sizeof *g);
	dlt_net_init_params(&m, p, 7);
	random_biases(&m, p, 99);   /* nonzero biases, so theirs are tested too */
	fill_batch(x, y, N, IN, C, 3);

	double loss = 0;
	long hits = 0;

	dlt_net_train_batch(&m, p, x, y, N, 1.0f, 1, g, &loss, &hits);
	for (size_t i = 0; i < m.nparams; i++) {
		const float eps = 1e-2f;
		float keep = p[i];
		double lp = 0, lm = 0;
		long h = 0;

		p[i] = keep + eps;
		dlt_net_eval_batch(&m, p, x, y, N, &lp, &h);
		p[i] = keep - eps;
		dlt_net_eval_batch(&m, p, x, y, N, &lm, &h);
		p[i] = keep;
		double num = (lp - lm) / (2.0 * eps) / N;   /* of the mean loss */
		double ana = g[i];
		double big = fmax(fabs(num), fabs(ana));

		if (big < 1e-3)
			continue;   /* too small for a float relative error */
		CHECK_MSG(fabs(num - ana) / big < 1e-2, "param %zu: analytic %g, numeric %g",
			  i, ana, num);
		checked++;
	}
	CHECK_MSG(checked > 40, "only %d entries large enough to check", checked);
	free(p);
	free(g);
	dlt_net_destroy(&m);
}

TEST(mlp_init_depends_only_on_seed)
{
	const int hidden[2] = { 32, 16 };
	struct dlt_net m;
	float *a, *b, *c;

	CHECK(make_mlp(&m, 50, hidden, 2, 10, 8) == 0);
	a = malloc(m.nparams * sizeof *a);
	b = malloc(m.nparams * sizeof *b);
	c = malloc(m.nparams * sizeof *c);
	dlt_net_init_params(&m, a, 42);
	dlt_net_init_params(&m, b, 42);
	dlt_net_init_params(&m, c, 43);
	CHECK(memcmp(a, b, m.nparams * sizeof *a) == 0);
	CHECK(memcmp(a, c, m.nparams * sizeof *a) != 0);

	/* He-normal: layer 1 weights have variance near 2 / 50, biases 0 */
	double s2 = 0;
	size_t nw = 32 * 50;

	CHECK(m.layer[0].kind == DLT_LAYER_DENSE && m.layer[0].off == 0);
	for (size_t i = 0; i < nw; i++)
		s2 += (double)a[i] * a[i];
	CHECK_MSG(fabs(s2 / nw - 2.0 / 50) < 0.2 * 2.0 / 50, "variance %g", s2 / nw);
	for (int j = 0; j < 32; j++)
		CHECK(a[nw + (size_t)j] == 0.0f);
	free(a);
	free(b);
	free(c);
	dlt_net_destroy(&m);
}

TEST(sgd_momentum_matches_hand_computation)
{
	const struct dlt_sgd o = { .lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.01f };
	float w[2] = { 1.0f, -2.0f }, v[2] = { 0.5f, 0.0f }, g[2] = { 0.1f, 0.2f };

	/* g = [0.11, 0.18]; v = [0.45 + 0.11, 0.18]; w = [1 - 0.056, -2 - 0.018] */
	dlt_sgd_step(&o, w, v, g, 2);
	CHECK(fabsf(v[0] - 0.56f) < 1e-6f && fabsf(v[1] - 0.18f) < 1e-6f);
	CHECK(fabsf(w[0] - 0.944f) < 1e-6f && fabsf(w[1] + 2.018f) < 1e-6f);
	/* zero gradient: only decay and momentum move w */
	g[0] = g[1] = 0.0f;
	dlt_sgd_step(&o, w, v, g, 2);
	CHECK(fabsf(v[0] - 0.51344f) < 1e-6f && fabsf(v[1] - 0.14182f) < 1e-6f);
	CHECK(fabsf(w[0] - 0.892656f) < 1e-6f && fabsf(w[1] + 2.032182f) < 1e-6f);
}

/* The shared-memory step runs the optimizer on slices of arrays whose
 * state is laid out for the whole model: slice by slice must give the
 * whole-array update bit for bit, for every optimizer. */
TEST(optimizer_on_slices_equals_whole_update)
{
	enum { N = 37 };
	const enum dlt_optim_kind kinds[] = { DLT_OPTIM_SGD, DLT_OPTIM_NESTEROV, DLT_OPTIM_ADAM };

	for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
		const struct dlt_optim o = { .kind = kinds[k], .momentum = 0.9f, .weight_decay = 0.01f,
					     .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f };
		float w1[N], w2[N], s1[2 * N] = { 0 }, s2[2 * N] = { 0 }, g[N];

		for (int i = 0; i < N; i++) {
			w1[i] = w2[i] = 0.1f * (float)(i - 18);
			g[i] = 0.01f * (float)((i * 7) % 11) - 0.05f;
		}
		for (unsigned long t = 1; t <= 3; t++) {
			dlt_optim_step(&o, 0.01f, t, w1, s1, g, N);
			for (int r = 0; r < 3; r++) {   /* 3 unequal slices */
				size_t lo, hi;

				dlt_shm_slice(N, 3, NULL, r, &lo, &hi);
				dlt_optim_step_strided(&o, 0.01f, t, w2 + lo, s2 + lo, N, g + lo, hi - lo);
			}
		}
		CHECK_MSG(memcmp(w1, w2, sizeof w1) == 0, "%s: weights differ", dlt_optim_name(kinds[k]));
		CHECK_MSG(memcmp(s1, s2, sizeof s1) == 0, "%s: state differs", dlt_optim_name(kinds[k]));
	}
}

/* Slices cover [0, n) in order without overlap, on cache-line boundaries. */
TEST(shm_slices_cover_and_align)
{
	const size_t ns[] = { 0, 1, 15, 16, 17, 1000, 247766 };
	const int w3[3] = { 44, 1, 19 };   /* by batch: ranks of different speeds */

	for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
		for (int k = 1; k <= 7; k++) {
			size_t next = 0;

			for (int r = 0; r < k; r++) {
				size_t lo, hi;

				dlt_shm_slice(ns[a], k, k == 3 ? w3 : NULL, r, &lo, &hi);
				CHECK_MSG(lo == next && hi >= lo && hi <= ns[a],
					  "n %zu k %d r %d: [%zu, %zu) after %zu", ns[a], k, r, lo, hi, next);
				CHECK_MSG(lo % 16 == 0 && (hi % 16 == 0 || hi == ns[a]),
					  "n %zu k %d r %d: [%zu, %zu) not aligned", ns[a], k, r, lo, hi);
				next = hi;
			}
			CHECK_MSG(next == ns[a], "n %zu k %d: slices end at %zu", ns[a], k, next);
		}
	/* weighted: 44/64 of the model for the rank with 44 of the 64 rows */
	size_t lo, hi;

	dlt_shm_slice(247766, 3, w3, 0, &lo, &hi);
	CHECK_MSG(lo == 0 && hi > 247766 * 44 / 64 - 16 && hi < 247766 * 44 / 64 + 16, "hi %zu", hi);
}

/* Update weights: ranks with under 9/10 of the largest batch update nothing. */
TEST(shm_update_weights_leave_slow_ranks_out)
{
	const int hetero[3] = { 44, 1, 19 }, uneven[2] = { 65, 64 }, two[2] = { 2984, 1112 };
	int w[3];

	dlt_shm_update_weights(hetero, 3, w);
	CHECK_MSG(w[0] == 44 && w[1] == 0 && w[2] == 0, "%d %d %d", w[0], w[1], w[2]);
	dlt_shm_update_weights(uneven, 2, w);
	CHECK_MSG(w[0] == 65 && w[1] == 64, "%d %d", w[0], w[1]);
	dlt_shm_update_weights(two, 2, w);
	CHECK_MSG(w[0] == 2984 && w[1] == 0, "%d %d", w[0], w[1]);
	/* a zero weight gets an empty slice; the others cover [0, n) */
	size_t lo, hi;

	dlt_shm_slice(1000, 2, w, 1, &lo, &hi);
	CHECK_MSG(lo == 1000 && hi == 1000, "[%zu, %zu)", lo, hi);
	dlt_shm_slice(1000, 2, w, 0, &lo, &hi);
	CHECK_MSG(lo == 0 && hi == 1000, "[%zu, %zu)", lo, hi);
}

/* A loss curve over log10(rate): flat at 2.3, falling fastest at 1e-3 to
 * a floor near 0.3 around 1e-1, then blowing up past 1. */
static double toy_loss(double lr)
{
	double x = log10(lr);

	return 2.3 - 2.0 / (1.0 + exp(-3.0 * (x + 3.0))) + (x > 0.0 ? 10.0 * x * x : 0.0) +
	       (x > -1.0 ? 0.3 * (x + 1.0) * (x + 1.0) : 0.0);
}

TEST(lr_range_test_sweeps_smooths_and_picks)
{
	struct dlt_lrfind f;
	char path[DLT_PATH_MAX], err[DLT_ERR_MAX];
	const char *why;
	double steep, lr;

	CHECK(fabs(dlt_lrfind_rate(0, 200) - 1e-6) < 1e-12);
	CHECK(fabs(dlt_lrfind_rate(199, 200) - 10.0) < 1e-9);
	CHECK(fabs(dlt_lrfind_rate(100, 201) - sqrt(1e-6 * 10.0)) < 1e-9);
	CHECK(dlt_lrfind_init(&f, 200) == 0);
	while (dlt_lrfind_push(&f, toy_loss(dlt_lrfind_rate(f.n, f.steps))))
		;
	/* stops once the smoothed loss passes 4x its minimum, before 10 */
	CHECK_MSG(f.stopped && f.n < 200 && f.lr[f.n - 1] > 1.0, "n %d stopped %d", f.n, f.stopped);
	lr = dlt_lrfind_pick(&f, &steep, &why);
	/* the smoothed minimum lags the true one (~0.15) a little */
	CHECK_MSG(lr > 0.01 && lr < 0.05, "chose %g (%s)", lr, why);
	CHECK_MSG(steep > 3e-4 && steep < 4e-3, "steepest %g", steep);
	tmp_path(path, sizeof path, "lr_finder");
	CHECK_MSG(dlt_lrfind_write(&f, path, lr, steep, why, err, sizeof err) == 0, "%s", err);
	CHECK(fabs(dlt_lrfind_read_choice(path) - lr) < 1e-5 * lr);   /* %.6g */
	dlt_lrfind_free(&f);
	/* a loss that never falls chooses nothing; a NaN stops the sweep */
	CHECK(dlt_lrfind_init(&f, 50) == 0);
	for (int i = 0; i < 50; i++)
		dlt_lrfind_push(&f, 2.0 + 0.01 * i);
	CHECK(dlt_lrfind_pick(&f, &steep, &why) == 0.0 && strstr(why, "never fell"));
	dlt_lrfind_free(&f);
	CHECK(dlt_lrfind_init(&f, 50) == 0);
	CHECK(dlt_lrfind_push(&f, 2.0) == 1 && dlt_lrfind_push(&f, NAN) == 0 && f.n == 1);
	CHECK(dlt_lrfind_pick(&f, &steep, &why) == 0.0);
	dlt_lrfind_free(&f);
	tmp_path(path, sizeof path, "no-such-file");
	CHECK(dlt_lrfind_read_choice(path) == 0.0);
}

TEST(weighted_partial_gradients_sum_to_full_batch)
{
	enum { IN = 20, C = 4, N = 8, NA = 3 };   /* unequal parts: 3 + 5 */
	const int hidden[1] = { 12 };
	struct dlt_net m;
	float x[N * IN], *p, *full, *ga, *gb;
	uint8_t y[N];
	double lf = 0, la = 0;
	long hf = 0, ha = 0;

	CHECK(make_mlp(&m, IN, hidden, 1, C, N) == 0);
	p = malloc(m.nparams * sizeof *p);
	full = malloc(m.nparams * sizeof *p);
	ga = malloc(m.nparams * sizeof *p);
	gb = malloc(m.nparams * sizeof *p);
	dlt_net_init_params(&m, p, 5);
	fill_batch(x, y, N, IN, C, 11);

	dlt_net_train_batch(&m, p, x, y, N, 1.0f, 1, full, &lf, &hf);
	dlt_net_train_batch(&m, p, x, y, NA, (float)NA / N, 1, ga, &la, &ha);
	dlt_net_train_batch(&m, p, x + NA * IN, y + NA, N - NA, (float)(N - NA) / N, 1,
			    gb, &la, &ha);
	CHECK(fabs(la - lf) < 1e-5 * fabs(lf) && ha == hf);
	for (size_t i = 0; i < m.nparams; i++) {
		float sum = ga[i] + gb[i];

		CHECK_MSG(fabsf(sum - full[i]) <= 1e-5f + 1e-4f * fabsf(full[i]),
			  "param %zu: parts %g, full %g", i, sum, full[i]);
	}
	free(p);
	free(full);
	free(ga);
	free(gb);
	dlt_net_destroy(&m);
}

/* Fills a checkpoint's arrays and metadata with recognisable values. */
static void sample_ckpt(struct dlt_ckpt_meta *m, float *p, float *v, size_t n)
{
	memset(m, 0, sizeof *m);
	m->nparams = n;
	m->step = 500;
	m->epoch = 3;
	m->seed = 0x123456789abcdefULL;
	m->elapsed_s = 12.5;
	m->train_s = 10.25;
	m->epoch_loss_sum = 33.0;
	m->epoch_steps = 100;
	m->test_loss = 0.4;
	m->test_acc = 0.87;
	m->eval_step = 468;
	m->optimizer = 1;
	m->nstate = 1;
	for (size_t i = 0; i < n; i++) {
		p[i] = (float)i * 0.5f - 3.0f;
		v[i] = -(float)i;
	}
}

TEST(ckpt_round_trip)
{
	enum { N = 1000 };
	char path[DLT_PATH_MAX], err[DLT_ERR_MAX];
	struct dlt_ckpt_meta m, r;
	static float p[N], v[N], p2[N], v2[N];

	tmp_path(path, sizeof path, "rt.ckpt");
	sample_ckpt(&m, p, v, N);
	CHECK_MSG(dlt_ckpt_write(path, &m, p, v, err, sizeof err) == 0, "%s", err);
	CHECK_MSG(dlt_ckpt_read(path, &r, N, 1, p2, v2, err, sizeof err) == 0, "%s", err);
	CHECK(memcmp(p, p2, sizeof p) == 0 && memcmp(v, v2, sizeof v) == 0);
	CHECK(r.nparams == N && r.step == 500 && r.epoch == 3 && r.seed == m.seed);
	CHECK(r.elapsed_s == 12.5 && r.train_s == 10.25 && r.epoch_loss_sum == 33.0);
	CHECK(r.epoch_steps == 100 && r.test_loss == 0.4 && r.test_acc == 0.87);
	CHECK(r.eval_step == 468);
	/* another model size is refused by name */
	CHECK(dlt_ckpt_read(path, &r, N + 1, 1, p2, v2, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "1000 parameters") && strstr(err, "1001"), "%s", err);
}

TEST(ckpt_rejects_corrupt_files)
{
	enum { N = 64 };
	char path[DLT_PATH_MAX], err[DLT_ERR_MAX];
	struct dlt_ckpt_meta m, r;
	float p[N], v[N], p2[N], v2[N];
	unsigned char byte;
	int fd;

	tmp_path(path, sizeof path, "bad.ckpt");
	sample_ckpt(&m, p, v, N);
	CHECK(dlt_ckpt_write(path, &m, p, v, err, sizeof err) == 0);
	/* one flipped payload bit */
	fd = open(path, O_RDWR);
	CHECK(fd >= 0);
	CHECK(pread(fd, &byte, 1, DLT_CKPT_HEADER + 37) == 1);
	byte ^= 0x10;
	CHECK(pwrite(fd, &byte, 1, DLT_CKPT_HEADER + 37) == 1);
	close(fd);
	CHECK(dlt_ckpt_read(path, &r, N, 1, p2, v2, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "checksum mismatch"), "%s", err);
	/* truncated */
	CHECK(dlt_ckpt_write(path, &m, p, v, err, sizeof err) == 0);
	CHECK(truncate(path, DLT_CKPT_HEADER + 100) == 0);
	CHECK(dlt_ckpt_read(path, &r, N, 1, p2, v2, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "truncated"), "%s", err);
	/* not a checkpoint at all */
	CHECK(dlt_write_atomic_str(path, "hello, world\n", err, sizeof err) == 0);
	CHECK(dlt_ckpt_read(path, &r, N, 1, p2, v2, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "not a dlh-train checkpoint"), "%s", err);
}

TEST(ckpt_save_updates_latest_and_keeps_three)
{
	enum { N = 16 };
	char dir[DLT_PATH_MAX], name[DLT_CKPT_NAME_MAX], err[DLT_ERR_MAX];
	char path[DLT_PATH_MAX + DLT_CKPT_NAME_MAX];
	struct dlt_ckpt_meta m;
	float p[N], v[N];

	tmp_path(dir, sizeof dir, "job/checkpoints");
	CHECK_MSG(dlt_mkdirs(dir, err, sizeof err) == 0, "%s", err);
	CHECK(dlt_ckpt_latest(dir, name, sizeof name, err, sizeof err) == -ENOENT);
	sample_ckpt(&m, p, v, N);
	for (uint64_t s = 100; s <= 500; s += 100) {
		CHECK(dlt_ckpt_step_name(s, name, sizeof name) == 0);
		m.step = s;
		CHECK_MSG(dlt_ckpt_save(dir, name, &m, p, v, err, sizeof err) == 0, "%s", err);
	}
	CHECK(dlt_ckpt_latest(dir, name, sizeof name, err, sizeof err) == 0);
	CHECK_MSG(strcmp(name, "step-00000500.ckpt") == 0, "latest is %s", name);
	for (int s = 100; s <= 500; s += 100) {
		snprintf(path, sizeof path, "%s/step-%08d.ckpt", dir, s);
		CHECK_MSG((access(path, F_OK) == 0) == (s >= 300), "%s", path);
	}
	CHECK(dlt_ckpt_save(dir, DLT_CKPT_FINAL, &m, p, v, err, sizeof err) == 0);
	CHECK(dlt_ckpt_latest(dir, name, sizeof name, err, sizeof err) == 0);
	CHECK(strcmp(name, DLT_CKPT_FINAL) == 0);
	/* where a resume falls back to when one is damaged */
	char prev[DLT_CKPT_NAME_MAX];
	CHECK(dlt_ckpt_previous(dir, DLT_CKPT_FINAL, prev, sizeof prev, err, sizeof err) == 0);
	CHECK_MSG(strcmp(prev, "step-00000500.ckpt") == 0, "before final: %s", prev);
	CHECK(dlt_ckpt_previous(dir, "step-00000500.ckpt", prev, sizeof prev, err, sizeof err) == 0);
	CHECK_MSG(strcmp(prev, "step-00000400.ckpt") == 0, "before 500: %s", prev);
	CHECK(dlt_ckpt_previous(dir, "step-00000300.ckpt", prev, sizeof prev, err,
				sizeof err) == -ENOENT);
}

/* Reads a whole small file into buf. Returns its length, or -1. */
static long slurp(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n >= 0)
		buf[n] = '\0';
	return n;
}

TEST(metrics_resume_cuts_rows_after_checkpoint)
{
	char dir[DLT_PATH_MAX], path[DLT_PATH_MAX + 64], err[DLT_ERR_MAX], buf[4096];
	int fd;

	tmp_path(dir, sizeof dir, "metrics");
	CHECK(dlt_mkdirs(dir, err, sizeof err) == 0);
	CHECK_MSG(dlt_metrics_open(dir, 0, &fd, err, sizeof err) == 0, "%s", err);
	for (long s = 1; s <= 4; s++)
		CHECK(dlt_metrics_train(fd, s, 1, 0.5 * s, 2.0 / s, 0.25, 0.1, 1000.0) == 0);
	CHECK(dlt_metrics_eval(fd, 4, 1, 2.5, 0.75, 0.5) == 0);
	CHECK(dlt_metrics_train(fd, 5, 2, 3.0, 0.4, 0.5, 0.1, 1000.0) == 0);
	CHECK(write(fd, "train,6,2,3.5", 13) == 13);   /* a half-written row */
	close(fd);

	CHECK(dlt_metrics_open(dir, 4, &fd, err, sizeof err) == 0);
	close(fd);
	snprintf(path, sizeof path, "%s/%s", dir, DLH_FILE_METRICS);
	CHECK(slurp(path, buf, sizeof buf) > 0);
	CHECK_MSG(strcmp(buf, DLH_METRICS_HEADER
			 "train,1,1,0.500,2,0.25,0.1,1000.0\n"
			 "train,2,1,1.000,1,0.25,0.1,1000.0\n"
			 "train,3,1,1.500,0.666667,0.25,0.1,1000.0\n"
			 "train,4,1,2.000,0.5,0.25,0.1,1000.0\n"
			 "eval,4,1,2.500,0.75,0.5,,\n") == 0, "got:\n%s", buf);
	/* a fresh start keeps only the header */
	CHECK(dlt_metrics_open(dir, 0, &fd, err, sizeof err) == 0);
	close(fd);
	CHECK(slurp(path, buf, sizeof buf) > 0 && strcmp(buf, DLH_METRICS_HEADER) == 0);
}

TEST(run_files_are_key_value_lines)
{
	char dir[DLT_PATH_MAX], path[DLT_PATH_MAX + 64], err[DLT_ERR_MAX], buf[1024];
	const int batch[2] = { 33, 32 };
	const struct dlt_runinfo ri = {
		.ranks = 2, .batch = batch, .train_samples = 60000, .test_samples = 10000,
		.steps_per_epoch = 909, .total_steps = 9090, .params = 247766, .start_step = 0,
	};
	const struct dlt_result res = {
		.test_accuracy = 0.8876, .test_loss = 0.3125, .train_loss = 0.25, .epochs = 10,
		.steps = 9090, .samples_per_s = 41234.5, .train_time_s = 20.5,
		.model = "checkpoints/final.ckpt",
	};

	tmp_path(dir, sizeof dir, "files");
	CHECK(dlt_mkdirs(dir, err, sizeof err) == 0);
	CHECK_MSG(dlt_runinfo_write(dir, &ri, err, sizeof err) == 0, "%s", err);
	snprintf(path, sizeof path, "%s/%s", dir, DLH_FILE_RUNINFO);
	CHECK(slurp(path, buf, sizeof buf) > 0);
	CHECK_MSG(strcmp(buf, "ranks=2\nbatch_per_rank=33,32\ntrain_samples=60000\n"
			 "test_samples=10000\nsteps_per_epoch=909\ntotal_steps=9090\n"
			 "params=247766\nstart_step=0\n") == 0, "got:\n%s", buf);
	CHECK(dlt_result_write(dir, &res, err, sizeof err) == 0);
	snprintf(path, sizeof path, "%s/%s", dir, DLH_FILE_RESULT);
	CHECK(slurp(path, buf, sizeof buf) > 0);
	CHECK_MSG(strcmp(buf, "test_accuracy=0.8876\ntest_loss=0.3125\ntrain_loss=0.25\n"
			 "epochs=10\nsteps=9090\nsamples_per_s=41234.5\ntrain_time_s=20.500\n"
			 "model=checkpoints/final.ckpt\n") == 0, "got:\n%s", buf);
	snprintf(path, sizeof path, "%s/.%s.tmp", dir, DLH_FILE_RESULT);
	CHECK(access(path, F_OK) < 0);
}

TEST(plan_splits_batch_and_shards)
{
	static struct dlt_plan p;
	char err[DLT_ERR_MAX];
	long lo, hi;

	CHECK(dlt_plan_make(&p, 60000, 10000, 2, 65, 3, NULL, err, sizeof err) == 0);
	CHECK(p.batch[0] == 33 && p.batch[1] == 32 && p.global_batch == 65);
	CHECK(p.steps_per_epoch == 30000 / 33 && p.total_steps == 3 * (30000 / 33));
	dlt_plan_shard(10, 3, 0, &lo, &hi);
	CHECK(lo == 0 && hi == 3);
	dlt_plan_shard(10, 3, 2, &lo, &hi);
	CHECK(lo == 6 && hi == 10);
	/* the smallest shard decides: 10 over 3 = 3,3,4 with batch 2,1,1 */
	CHECK(dlt_plan_make(&p, 10, 10, 3, 4, 1, NULL, err, sizeof err) == 0);
	CHECK(p.steps_per_epoch == 1);
	CHECK(dlt_plan_make(&p, 10, 10, 2, 1, 1, NULL, err, sizeof err) == -EINVAL);
	CHECK(dlt_plan_make(&p, 10, 10, 2, 12, 1, NULL, err, sizeof err) == -EINVAL);
	/* given batches (devices of different speeds): shards follow them */
	const int given[2] = { 48, 16 };
	CHECK_MSG(dlt_plan_make(&p, 60000, 10000, 2, 64, 2, given, err, sizeof err) == 0, "%s", err);
	CHECK(p.batch[0] == 48 && p.batch[1] == 16 && p.steps_per_epoch == 937);
	dlt_plan_range(&p, 60000, 0, &lo, &hi);
	CHECK(lo == 0 && hi == 45000);
	dlt_plan_range(&p, 60000, 1, &lo, &hi);
	CHECK(lo == 45000 && hi == 60000);
	const int bad_sum[2] = { 48, 20 }, zero[2] = { 64, 0 };
	CHECK(dlt_plan_make(&p, 60000, 10000, 2, 64, 2, bad_sum, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "sum to 68"), "%s", err);
	CHECK(dlt_plan_make(&p, 60000, 10000, 2, 64, 2, zero, err, sizeof err) == -EINVAL);
}

TEST(plan_split_follows_speed_within_caps)
{
	static struct dlt_plan p;
	char err[DLT_ERR_MAX];
	int out[4], cap[4] = { 4095, 4095, 4095, 4095 };
	const double even[2] = { 1000, 1000 }, fast[2] = { 2300, 1000 };

	CHECK(dlt_plan_split(even, cap, 2, 4096, out) == 0 && out[0] == 2048 && out[1] == 2048);
	/* 4096 * 2300 / 3300 = 2854.8: rounded by largest remainder */
	CHECK(dlt_plan_split(fast, cap, 2, 4096, out) == 0);
	CHECK_MSG(out[0] == 2855 && out[1] == 1241, "%d,%d", out[0], out[1]);
	/* a capped rank keeps its cap; the rest goes to the others in proportion */
	const double three[3] = { 10000, 100, 100 };
	int cap3[3] = { 50, 100, 100 };
	CHECK(dlt_plan_split(three, cap3, 3, 150, out) == 0);
	CHECK_MSG(out[0] == 50 && out[1] == 50 && out[2] == 50, "%d,%d,%d", out[0], out[1], out[2]);
	/* every rank keeps a row, however slow */
	const double slow[3] = { 1e9, 1, 1 };
	CHECK(dlt_plan_split(slow, cap, 3, 64, out) == 0);
	CHECK_MSG(out[0] == 62 && out[1] == 1 && out[2] == 1, "%d,%d,%d", out[0], out[1], out[2]);
	/* sums to the global batch for awkward numbers */
	const double odd[4] = { 3, 7, 11, 13 };
	CHECK(dlt_plan_split(odd, cap, 4, 1001, out) == 0);
	CHECK(out[0] + out[1] + out[2] + out[3] == 1001 && out[0] < out[1] && out[2] < out[3]);
	/* refused: caps too small, a speed that is not positive */
	int tiny[2] = { 10, 10 };
	const double zero[2] = { 0, 1 }, nan2[2] = { NAN, 1 };
	CHECK(dlt_plan_split(even, tiny, 2, 64, out) == -EINVAL);
	CHECK(dlt_plan_split(zero, cap, 2, 64, out) == -EINVAL);
	CHECK(dlt_plan_split(nan2, cap, 2, 64, out) == -EINVAL);
	/* caps and the whole-set epoch of a plan */
	const int given[2] = { 3000, 1096 };
	CHECK(dlt_plan_make(&p, 60000, 10000, 2, 4096, 3, given, err, sizeof err) == 0);
	CHECK(dlt_plan_cap(&p, 0) == 4095 && dlt_plan_cap(&p, 1) == 2192);
	CHECK(dlt_plan_pool(&p, err, sizeof err) == 0);
	CHECK(p.steps_per_epoch == 14 && p.total_steps == 42);
	p.train_n = 4000;
	CHECK(dlt_plan_pool(&p, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "4000 training images"), "%s", err);
}

TEST(opts_parse_and_reject)
{
	char *good[] = { "dlh-train", "--job-dir", "/j", "--train-images", "a",
		"--train-labels", "b", "--test-images", "c", "--test-labels", "d",
		"--layers", "256,128,100", "--epochs", "5", "--batch=64", "--lr", "0.05",
		"--momentum", "0.9", "--weight-decay", "0", "--seed", "18446744073709551615",
		"--checkpoint-every", "0", "--train-limit", "4000" };
	int ngood = (int)(sizeof good / sizeof good[0]);
	char err[DLT_ERR_MAX];
	struct dlt_opts o;

	CHECK_MSG(dlt_opts_parse(ngood, good, &o, err, sizeof err) == 0, "%s", err);
	CHECK(strcmp(o.job_dir, "/j") == 0 && o.nhidden == 3 && o.hidden[2] == 100);
	CHECK(o.epochs == 5 && o.batch == 64 && o.lr == 0.05 && o.momentum == 0.9);
	CHECK(o.seed == UINT64_MAX && o.train_limit == 4000 && o.test_limit == 0);

	char *help[] = { "dlh-train", "--help" };
	CHECK(dlt_opts_parse(2, help, &o, err, sizeof err) == 1);
	char *unknown[] = { "dlh-train", "--bogus", "1" };
	CHECK(dlt_opts_parse(3, unknown, &o, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "unknown option \"--bogus\""), "%s", err);
	good[15] = "--batch=6x4";
	CHECK(dlt_opts_parse(ngood, good, &o, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "--batch \"6x4\""), "%s", err);
	good[15] = "--batch=64";
	{   /* --rebalance: 0, or at least DLT_REBALANCE_MIN steps; CPU ranks only */
		char *rb[] = { "dlh-train", "--job-dir", "/j", "--train-images", "a", "--train-labels", "b",
			"--test-images", "c", "--test-labels", "d", "--layers", "8", "--epochs", "1",
			"--batch", "64", "--lr", "0.1", "--rebalance", "20", "--device", "cpu" };
		int nrb = (int)(sizeof rb / sizeof rb[0]);

		CHECK(dlt_opts_parse(nrb, rb, &o, err, sizeof err) == 0 && o.rebalance == 20);
		rb[20] = "9";
		CHECK(dlt_opts_parse(nrb, rb, &o, err, sizeof err) == -EINVAL);
		CHECK_MSG(strstr(err, "--rebalance 9: at least 10 steps"), "%s", err);
		rb[20] = "0";
		CHECK(dlt_opts_parse(nrb, rb, &o, err, sizeof err) == 0 && o.rebalance == 0);
		rb[20] = "20";
		rb[22] = "gpu";
		CHECK(dlt_opts_parse(nrb, rb, &o, err, sizeof err) == -EINVAL);
		CHECK_MSG(strstr(err, "--rebalance: ranks on CPUs only"), "%s", err);
	}
	{   /* --precision: fp32 anywhere, tf32 and bf16 on GPUs only */
		char *pr[] = { "dlh-train", "--job-dir", "/j", "--train-images", "a", "--train-labels", "b",
			"--test-images", "c", "--test-labels", "d", "--layers", "8", "--epochs", "1",
			"--batch", "64", "--lr", "0.1", "--precision", "bf16", "--device", "gpu" };
		int npr = (int)(sizeof pr / sizeof pr[0]);

		CHECK_MSG(dlt_opts_parse(npr, pr, &o, err, sizeof err) == 0, "%s", err);
		CHECK(o.precision == DLT_PRECISION_BF16 && o.device == DLT_DEVICE_GPU);
		pr[20] = "tf32";
		CHECK(dlt_opts_parse(npr, pr, &o, err, sizeof err) == 0 && o.precision == DLT_PRECISION_TF32);
		pr[22] = "cpu";
		CHECK(dlt_opts_parse(npr, pr, &o, err, sizeof err) == -EINVAL);
		CHECK_MSG(strstr(err, "--precision tf32: needs --device gpu (the CPU trainer computes in fp32)"),
			  "%s", err);
		CHECK(dlt_opts_parse(npr - 2, pr, &o, err, sizeof err) == -EINVAL);   /* cpu by default */
		pr[20] = "fp32";
		CHECK(dlt_opts_parse(npr, pr, &o, err, sizeof err) == 0 && o.precision == DLT_PRECISION_FP32);
		pr[20] = "fp16";
		CHECK(dlt_opts_parse(npr, pr, &o, err, sizeof err) == -EINVAL);
		CHECK_MSG(strstr(err, "--precision \"fp16\": unknown value"), "%s", err);
	}
	CHECK(dlt_opts_parse(ngood, good, &o, err, sizeof err) == 0 && o.precision == DLT_PRECISION_FP32);
	good[17] = "auto";   /* --lr auto: the range test */
	CHECK_MSG(dlt_opts_parse(ngood, good, &o, err, sizeof err) == 0, "%s", err);
	CHECK(o.lr_auto == 1 && o.lr == 0.0 && o.lr_find_steps == DLT_LRFIND_STEPS);
	good[17] = "automatic";
	CHECK(dlt_opts_parse(ngood, good, &o, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "--lr \"automatic\": malformed"), "%s", err);
	good[17] = "0.05";
	good[21] = "1.5";   /* --weight-decay out of range */
	CHECK(dlt_opts_parse(ngood, good, &o, err, sizeof err) == -EINVAL);
	good[21] = "0";
	good[12] = "256,,100";
	CHECK(dlt_opts_parse(ngood, good, &o, err, sizeof err) == -EINVAL);
	good[12] = "256,128,100";
	CHECK(dlt_opts_parse(ngood - 2, good, &o, err, sizeof err) == 0);
	CHECK(dlt_opts_parse(3, good, &o, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "missing option"), "%s", err);
}

TEST(rng_permutation_is_deterministic)
{
	enum { N = 1000 };
	static uint32_t a[N], b[N], c[N];
	static unsigned char seen[N];
	struct dlt_rng r;

	dlt_rng_seed(&r, 1, 2, 0);
	dlt_rng_permutation(&r, a, N);
	dlt_rng_seed(&r, 1, 2, 0);
	dlt_rng_permutation(&r, b, N);
	dlt_rng_seed(&r, 1, 2, 1);   /* another rank */
	dlt_rng_permutation(&r, c, N);
	CHECK(memcmp(a, b, sizeof a) == 0 && memcmp(a, c, sizeof a) != 0);
	for (int i = 0; i < N; i++) {
		CHECK(a[i] < N && !seen[a[i]]);
		seen[a[i]] = 1;
	}
}

TEST(data_opens_only_regular_files_and_never_waits)
{
	char fifo[600], file[600], err[256];
	int fd;

	snprintf(fifo, sizeof fifo, "%s/fifo", tmpdir);
	snprintf(file, sizeof file, "%s/plain", tmpdir);
	CHECK(mkfifo(fifo, 0600) == 0);
	fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0 && write(fd, "x", 1) == 1);
	close(fd);
	/* a FIFO without a writer: refused at once, not waited on */
	CHECK(dlt_open_regular(fifo, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "not a regular file"), "%s", err);
	CHECK(dlt_open_regular("/dev/null", err, sizeof err) == -EINVAL);
	CHECK(dlt_open_regular(tmpdir, err, sizeof err) == -EISDIR);
	CHECK(dlt_open_regular("/nonexistent/x", err, sizeof err) == -ENOENT);
	CHECK_MSG(strstr(err, "cannot open \"/nonexistent/x\""), "%s", err);
	fd = dlt_open_regular(file, err, sizeof err);
	CHECK(fd >= 0);
	close(fd);
	struct dlt_idx_header h;
	CHECK(dlt_idx_probe(fifo, DLT_IDX_MAGIC_IMAGES, &h, err, sizeof err) == -EINVAL);
	unlink(fifo);
	unlink(file);
}

int main(void)
{
	strcpy(tmpdir, TMP_TEMPLATE);
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	RUN(idx_loads_gzip_shard);
	RUN(data_opens_only_regular_files_and_never_waits);
	RUN(idx_rejects_bad_magic);
	RUN(idx_rejects_truncated_file);
	RUN(mlp_backward_matches_finite_differences);
	RUN(mlp_init_depends_only_on_seed);
	RUN(sgd_momentum_matches_hand_computation);
	RUN(optimizer_on_slices_equals_whole_update);
	RUN(shm_slices_cover_and_align);
	RUN(shm_update_weights_leave_slow_ranks_out);
	RUN(lr_range_test_sweeps_smooths_and_picks);
	RUN(weighted_partial_gradients_sum_to_full_batch);
	RUN(ckpt_round_trip);
	RUN(ckpt_rejects_corrupt_files);
	RUN(ckpt_save_updates_latest_and_keeps_three);
	RUN(metrics_resume_cuts_rows_after_checkpoint);
	RUN(run_files_are_key_value_lines);
	RUN(plan_splits_batch_and_shards);
	RUN(plan_split_follows_speed_within_caps);
	RUN(opts_parse_and_reject);
	RUN(rng_permutation_is_deterministic);
	rm_tree(tmpdir);
	return CHECK_EXIT();
}
