/* test_calib.c - the calibration cache (format, parse, save, load, its
 * errors) and one real measurement by dlh-calib under mpirun */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/plan/calib.h"
#include "tests/unit/check.h"

/* A calibration with every field set to a distinct value. */
static void sample(struct dlh_calib *c)
{
	memset(c, 0, sizeof *c);
	c->when = 1795000000.5;
	c->ar_alpha = 2.5e-6;
	c->ar_beta = 1.75e-10;
	c->sync_s = 4e-7;
	c->launch_s = 0.125;
	c->launch_rank_s = 0.01;
	c->finalize_s = 0.05;
	c->decode_bw = 1.5e8;
	c->init_rate = 6.5e7;
	c->write_s = 0.001;
	c->write_bw = 1.25e9;
	c->base_rss = 1.6e7;
	c->ndev = 2;
	for (int d = 0; d < 2; d++) {
		struct dlh_calib_dev *v = &c->dev[d];
		snprintf(v->type, sizeof v->type, "%s", d ? "H100" : "cpu");
		v->gemm_flops = d ? 5e14 : 1.5e11;
		v->mem_bw = d ? 3e12 : 1e10;
		v->mem_bw_all = d ? 3e12 : 9e9;
		v->gemm_all = d ? 1.0 : 0.875;
		if (d)
			continue;   /* a GPU type from the pool config: no grid */
		v->grid = 1;
		v->grid_n = DLH_CALIB_CPU_GEMM_N;   /* a CPU's grid: the first dims */
		for (int i = 0; i < DLH_CALIB_BW_N; i++)
			v->bw[i] = 3e10 - 4e9 * i;
		for (int i = 0; i < DLH_CALIB_CPU_GEMM_N; i++)
			for (int j = 0; j < DLH_CALIB_CPU_GEMM_N; j++)
				for (int l = 0; l < DLH_CALIB_CPU_GEMM_N; l++)
					v->gemm[i][j][l] = (float)(1e10 * (1 + i + 2 * j + 3 * l));
		v->grid_tr[1] = 1;   /* tn measured, nt not */
		for (int i = 0; i < DLH_CALIB_CPU_GEMM_N; i++)
			for (int j = 0; j < DLH_CALIB_CPU_GEMM_N; j++)
				for (int l = 0; l < DLH_CALIB_CPU_GEMM_N; l++)
					v->gemm_tr[1][i][j][l] = (float)(2e10 * (1 + 3 * i + j + l));
	}
}

/* 1 when a and b agree to the 6 digits the cache keeps. */
static int near(double a, double b)
{
	double d = a - b;
	return (d < 0 ? -d : d) <= 1e-5 * (a < 0 ? -a : a) + 1e-300;
}

TEST(format_then_parse_gives_the_same_numbers)
{
	struct dlh_calib c, back;
	struct dlh_buf b = { 0 };
	char err[256];

	sample(&c);
	CHECK(dlh_calib_format(&c, &b) == 0);
	CHECK(strstr(b.data, "date=2026-"));   /* 1795000000 s */
	memset(&back, 0, sizeof back);
	int rc = dlh_calib_parse(b.data, &back, err, sizeof err);
	dlh_buf_free(&b);
	CHECK_MSG(rc == 0, "%s", err);
	CHECK(near(back.when, c.when) && near(back.ar_alpha, c.ar_alpha));
	CHECK(near(back.base_rss, c.base_rss) && near(back.launch_rank_s, c.launch_rank_s));
	CHECK(back.ndev == 2);
	const struct dlh_calib_dev *cpu = dlh_calib_dev(&back, "cpu");
	const struct dlh_calib_dev *gpu = dlh_calib_dev(&back, "H100");
	CHECK(cpu && gpu && cpu->grid && !gpu->grid);
	CHECK(near(cpu->gemm_all, 0.875) && near(gpu->gemm_flops, 5e14));
	CHECK(near(cpu->bw[DLH_CALIB_BW_N - 1], c.dev[0].bw[DLH_CALIB_BW_N - 1]));
	CHECK(near(cpu->gemm[4][3][2], c.dev[0].gemm[4][3][2]));
	CHECK(near(cpu->gemm[0][0][0], 1e10));
	/* a CPU's grid: its 5 dims, 5 values a line */
	CHECK(cpu->grid_n == DLH_CALIB_CPU_GEMM_N && dlh_calib_grid_n(cpu) == 5);
}

TEST(transposed_grids_round_trip_apart_from_the_untransposed)
{
	struct dlh_calib c, back;
	struct dlh_buf b = { 0 };
	char err[256];

	sample(&c);
	CHECK(dlh_calib_format(&c, &b) == 0);
	CHECK(strstr(b.data, "cpu.gemmtn_8x8=") && !strstr(b.data, "cpu.gemmnt_"));
	CHECK(strstr(b.data, "\ncpu.gemm_2048x2048=") && !strstr(b.data, "cpu.gemm_8192x"));
	memset(&back, 0, sizeof back);
	int rc = dlh_calib_parse(b.data, &back, err, sizeof err);
	dlh_buf_free(&b);
	CHECK_MSG(rc == 0, "%s", err);
	const struct dlh_calib_dev *cpu = dlh_calib_dev(&back, "cpu");
	CHECK(cpu && cpu->grid_tr[1] && !cpu->grid_tr[0]);
	CHECK(near(cpu->gemm_tr[1][4][3][2], c.dev[0].gemm_tr[1][4][3][2]));
	CHECK(near(cpu->gemm[4][3][2], c.dev[0].gemm[4][3][2]));
	CHECK(cpu->gemm_tr[0][1][1][1] == 0);
	memset(&back, 0, sizeof back);
	CHECK(dlh_calib_parse("cpu.gemmxy_8x8=1 2 3 4 5\n", &back, err, sizeof err) == -EINVAL);
	CHECK(strstr(err, "unknown key"));
}

/* Saves c into a new state dir and loads it back into back (the dir
 * removed after). Returns dlh_calib_load's result, err its reason; -1
 * when the dir or the save failed. */
static int save_load(const struct dlh_calib *c, struct dlh_calib *back, char *err, size_t len)
{
	char dir[] = "/tmp/dlh-test-calib.XXXXXX", path[256];
	int rc = -1;

	snprintf(err, len, "cannot make a state dir or save into it");
	if (!mkdtemp(dir))
		return -1;
	if (dlh_calib_save(dir, c) == 0)
		rc = dlh_calib_load(dir, back, err, len);
	snprintf(path, sizeof path, "%s/%s", dir, DLH_CALIB_FILE);
	unlink(path);
	rmdir(dir);
	return rc;
}

TEST(save_then_load_round_trips)
{
	char err[256];
	struct dlh_calib c, back;

	sample(&c);
	int rc = save_load(&c, &back, err, sizeof err);
	CHECK_MSG(rc == 0, "%s", err);
	CHECK(near(back.decode_bw, c.decode_bw) && near(back.dev[0].mem_bw, c.dev[0].mem_bw));
}

TEST(load_without_a_cache_is_enoent)
{
	struct dlh_calib c;
	char err[256];

	CHECK(dlh_calib_load("/nonexistent-dlh-dir", &c, err, sizeof err) == -ENOENT);
	CHECK(c.when == 0);
}

/* Parses text; returns the error message (or "" when it parsed). */
static const char *parse_err(const char *text)
{
	static char err[256];
	struct dlh_calib c;

	memset(&c, 0, sizeof c);
	err[0] = '\0';
	dlh_calib_parse(text, &c, err, sizeof err);
	return err;
}

TEST(bad_cache_lines_are_named)
{
	CHECK(!strcmp(parse_err("when=1\n# note\n\nsync_s=1e-6\n"), ""));
	CHECK(!strcmp(parse_err("when=1\nsync_s=1\nspeed=3\n"),
		      "calibration:3: unknown key \"speed\""));
	CHECK(!strcmp(parse_err("when=1\nsync_s=fast\n"),
		      "calibration:2: sync_s: expected non-negative numbers, got \"fast\""));
	CHECK(strstr(parse_err("sync_s=-1\n"), "calibration:1: sync_s: expected non-negative"));
	CHECK(!strcmp(parse_err("when\n"), "calibration:1: expected key=value, got \"when\""));
	CHECK(strstr(parse_err("cpu.gemm_8x8=1 2 x 4 5\n"), "calibration:1: cpu.gemm_8x8: expected"));
	/* a grid is a CPU's 5 or a GPU's 8 dims, the same on every line */
	CHECK(strstr(parse_err("cpu.gemm_8x8=1 2 3\n"),
		     "calibration:1: cpu.gemm_8x8: a GEMM grid line holds 5 values (a CPU's) or 8"));
	CHECK(strstr(parse_err("cpu.gemm_8x8=1 2 3 4 5\ncpu.gemm_8x32=1 2 3 4 5 6 7 8\n"),
		     "calibration:2: cpu.gemm_8x32: a GEMM grid line holds"));
	CHECK(strstr(parse_err("cpu.gemm_8192x8=1 2 3 4 5\n"),
		     "calibration:1: cpu.gemm_8192x8: a GEMM grid line holds"));
	CHECK(!strcmp(parse_err("cpu.gemm_8192x8=1 2 3 4 5 6 7 8\n"), ""));
	CHECK(strstr(parse_err("cpu.gemm_8x9=1 2 3 4 5\n"), "unknown key \"cpu.gemm_8x9\""));
	CHECK(strstr(parse_err("cpu.bw_100=1\n"), "unknown key \"cpu.bw_100\""));
	CHECK(strstr(parse_err("a.x=1\n"), "unknown key \"a.x\""));
	CHECK(strstr(parse_err("device=a\ndevice=b\ndevice=c\ndevice=d\ndevice=e\ndevice=f\n"
			       "device=g\ndevice=h\ndevice=i\n"), "calibration:9:"));
}

TEST(load_names_a_missing_date)
{
	char dir[] = "/tmp/dlh-test-calib.XXXXXX", err[256] = "", path[256];
	struct dlh_calib c;

	CHECK(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/%s", dir, DLH_CALIB_FILE);
	FILE *f = fopen(path, "w");
	CHECK(f);
	fputs("sync_s=1e-6\n", f);
	fclose(f);
	int rc = dlh_calib_load(dir, &c, err, sizeof err);
	unlink(path);
	rmdir(dir);
	CHECK(rc == -EINVAL);
	CHECK(strstr(err, "\"when\""));
}

/* The absolute path of prog on PATH, or NULL. */
static const char *which(const char *prog, char *out, size_t len)
{
	const char *path = getenv("PATH");
	char dirs[4096];

	snprintf(dirs, sizeof dirs, "%s", path ? path : "/usr/bin:/bin");
	for (char *save, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		snprintf(out, len, "%s/%s", d, prog);
		if (access(out, X_OK) == 0)
			return out;
	}
	return NULL;
}

TEST(measure_runs_dlh_calib_and_fills_every_term)
{
	const char *build = getenv("DLH_BUILD");
	char mpirun[1024], prog[1024], cwd[1024], dir[] = "/tmp/dlh-test-calib.XXXXXX", err[1024];
	struct dlh_calib c;

	if (!which("mpirun", mpirun, sizeof mpirun))
		SKIP("no mpirun on PATH");
	if (!getcwd(cwd, sizeof cwd))
		SKIP("no working directory");
	snprintf(prog, sizeof prog, "%s/%s/dlh-calib", cwd, build ? build : "build");
	if (access(prog, X_OK))
		SKIP("dlh-calib not built");
	CHECK(mkdtemp(dir));
	struct dlh_backend be;
	CHECK_MSG(dlh_backend_local(&be, mpirun, err, sizeof err) == 0, "%s", err);
	struct dlh_calib_opts o = { .backend = &be, .program = prog, .cpus = 2, .dir = dir };
	double t0 = dlh_now();
	int rc = dlh_calib_measure(&o, &c, err, sizeof err);
	double took = dlh_now() - t0;
	rmdir(dir);   /* fails, and the test with it, when dlh-calib left files */
	CHECK_MSG(rc == 0, "%s", err);
	printf("    measure took %.1f s\n", took);
	const struct dlh_calib_dev *cpu = dlh_calib_dev(&c, "cpu");
	CHECK(cpu && cpu->grid);
	CHECK(cpu->gemm_flops > 1e9 && cpu->mem_bw > 1e8 && cpu->mem_bw_all > 1e8);
	CHECK(cpu->gemm[2][2][2] > 0 && cpu->bw[0] > 0 && cpu->gemm_all > 0);
	CHECK(cpu->grid_tr[0] && cpu->grid_tr[1] && cpu->gemm_tr[1][2][2][2] > 0);
	CHECK(cpu->relu_bwd_s > 0 && cpu->dropout_s > 0 && cpu->gather_bw > 1e8);
	CHECK(c.launch_s > 0 && c.finalize_s > 0 && c.sync_s > 0 && c.ar_alpha > 0);
	CHECK(c.decode_bw > 0 && c.init_rate > 0 && c.write_s > 0 && c.write_bw > 0);
	CHECK(c.base_rss > 1e6 && c.when > 0 && c.metrics_s > 0);
	CHECK(access(dir, F_OK) != 0);
}

/* sample() with its H100 measured on the GPU (dlh-calib --phase gpu). */
static void sample_gpu(struct dlh_calib *c)
{
	sample(c);
	struct dlh_calib_dev *g = &c->dev[1];
	g->gpu = 1;
	g->kernel_s = 2.5e-6;
	g->node_s = 1.25e-6;
	g->direct_s = 3.125e-12;
	g->direct_dw_s = 6.25e-12;
	g->sync_s = 6e-6;
	g->h2d_s = 9e-6;
	g->h2d_bw = 1.2e10;
	g->ctx_s = 0.25;
	g->blas_s = 0.125;
	g->nccl_s = 0.5;
	g->ctx_bytes = 5.5e8;
	g->blas_bytes = 2.5e8;
	g->nccl_bytes = 1.5e8;
	g->total_bytes = 8.5e10;
	g->nccl_alpha = 2e-5;
	g->nccl_beta = 4e-12;
	g->nccl_gpus = 2;
	g->grid = 1;
	g->grid_tr[0] = g->grid_tr[1] = 1;
	g->grid_tf32 = 1;
	for (int i = 0; i < DLH_CALIB_GEMM_N; i++)
		for (int j = 0; j < DLH_CALIB_GEMM_N; j++)
			for (int l = 0; l < DLH_CALIB_GEMM_N; l++) {
				g->gemm[i][j][l] = (float)(1e11 * (1 + i + j + l));
				g->gemm_tr[0][i][j][l] = (float)(2e11 * (1 + i + j + l));
				g->gemm_tr[1][i][j][l] = (float)(3e11 * (1 + i + j + l));
				g->gemm_tf32[i][j][l] = (float)(5e11 * (1 + i + j + l));
			}
}

TEST(gpu_figures_round_trip_and_a_cpu_type_writes_none)
{
	struct dlh_calib c, back;
	struct dlh_buf b = { 0 };
	char err[256];

	sample_gpu(&c);
	CHECK(dlh_calib_format(&c, &b) == 0);
	CHECK(strstr(b.data, "\nH100.gpu=1\n") && strstr(b.data, "\nH100.kernel_s=2.5e-06\n"));
	CHECK(strstr(b.data, "\nH100.gemmnt_8x8=") && strstr(b.data, "\nH100.nccl_gpus=2\n"));
	CHECK(strstr(b.data, "\nH100.gemmtf32_8x8=") && strstr(b.data, "\nH100.node_s=1.25e-06\n"));
	CHECK(!strstr(b.data, "cpu.gpu=") && !strstr(b.data, "cpu.kernel_s="));
	memset(&back, 0, sizeof back);
	int rc = dlh_calib_parse(b.data, &back, err, sizeof err);
	dlh_buf_free(&b);
	CHECK_MSG(rc == 0, "%s", err);
	const struct dlh_calib_dev *g = dlh_calib_dev(&back, "H100");
	CHECK(g && g->gpu == 1 && g->grid && g->grid_tr[0] && g->grid_tr[1]);
	CHECK(near(g->kernel_s, 2.5e-6) && near(g->sync_s, 6e-6) && near(g->h2d_s, 9e-6));
	CHECK(near(g->h2d_bw, 1.2e10) && near(g->ctx_s, 0.25) && near(g->blas_s, 0.125));
	CHECK(near(g->nccl_s, 0.5) && near(g->ctx_bytes, 5.5e8) && near(g->blas_bytes, 2.5e8));
	CHECK(near(g->nccl_bytes, 1.5e8) && near(g->total_bytes, 8.5e10));
	CHECK(near(g->nccl_alpha, 2e-5) && near(g->nccl_beta, 4e-12) && g->nccl_gpus == 2);
	CHECK(near(g->gemm_tr[1][4][3][2], c.dev[1].gemm_tr[1][4][3][2]));
	CHECK(g->grid_tf32 && near(g->gemm_tf32[4][3][2], c.dev[1].gemm_tf32[4][3][2]));
	CHECK(near(g->node_s, 1.25e-6) && near(g->direct_s, 3.125e-12) &&
	      near(g->direct_dw_s, 6.25e-12));
	/* a GPU's grid reaches the convolutions' products: 8 dims to 131072 */
	CHECK(g->grid_n == DLH_CALIB_GEMM_N && dlh_calib_grid_n(g) == 8);
	CHECK(near(g->gemm[7][6][5], c.dev[1].gemm[7][6][5]) &&
	      near(g->gemm_tr[0][2][7][7], c.dev[1].gemm_tr[0][2][7][7]));
	CHECK(dlh_calib_dev(&back, "cpu")->gpu == 0 && !dlh_calib_dev(&back, "cpu")->grid_tf32);
}

/* a cache of as many GPU types as it holds (their 8-dim grids in 4 forms,
 * with long type names: about 30 KB each) is saved and read back */
TEST(a_cache_of_every_gpu_type_it_holds_loads)
{
	char err[256];
	struct dlh_calib c, back;
	struct dlh_buf b = { 0 };

	sample_gpu(&c);
	for (int d = 2; d < DLH_CALIB_DEVS; d++) {
		c.dev[d] = c.dev[1];
		snprintf(c.dev[d].type, sizeof c.dev[d].type, "NVIDIA-H100-80GB-HBM3-%d", d);
	}
	snprintf(c.dev[1].type, sizeof c.dev[1].type, "NVIDIA-H100-80GB-HBM3-1");
	c.ndev = DLH_CALIB_DEVS;
	CHECK(dlh_calib_format(&c, &b) == 0);
	printf("measured: a cache of %d GPU types and the CPU: %zu bytes\n", DLH_CALIB_DEVS - 1,
	       b.len);
	dlh_buf_free(&b);
	int rc = save_load(&c, &back, err, sizeof err);
	CHECK_MSG(rc == 0, "%s", err);
	CHECK(back.ndev == DLH_CALIB_DEVS);
	const struct dlh_calib_dev *g = dlh_calib_dev(&back, "NVIDIA-H100-80GB-HBM3-7");
	CHECK(g && g->gpu == 1 && g->grid_n == DLH_CALIB_GEMM_N &&
	      near(g->gemm_tf32[7][7][7], c.dev[7].gemm_tf32[7][7][7]));
}

TEST(a_cache_written_before_gpu_figures_still_parses)
{
	/* the keys a cache of the previous format holds, and nothing else */
	const char *old = "# dlhfs calibration\ndate=2026-11-19T10:00:00Z\nwhen=1795000000\n"
			  "ar_alpha=2e-06\nsync_s=5e-07\nlaunch_s=0.1\ndevice=cpu\n"
			  "cpu.gemm_flops=1.2e+11\ncpu.mem_bw=1e+10\ncpu.gemm_all=0.9\n"
			  "cpu.bw_65536=3e+10\ncpu.gemm_8x8=1 2 3 4 5\ndevice=H100\n"
			  "H100.gemm_flops=6.7e+13\nH100.mem_bw=3.35e+12\n";
	struct dlh_calib c;
	char err[256] = "";

	memset(&c, 0, sizeof c);
	CHECK_MSG(dlh_calib_parse(old, &c, err, sizeof err) == 0, "%s", err);
	const struct dlh_calib_dev *g = dlh_calib_dev(&c, "H100");
	CHECK(c.ndev == 2 && g && g->gpu == 0 && g->kernel_s == 0 && g->ctx_bytes == 0);
	CHECK(near(g->gemm_flops, 6.7e13) && near(c.sync_s, 5e-7));
}

/* The emulated dlh-calib (GPU builds) and mpirun, or NULL (then a skip). */
static const char *emu_calib(char *prog, size_t len, char *mpirun, size_t mlen)
{
	const char *build = getenv("DLH_BUILD");
	char cwd[1024];

	if (!which("mpirun", mpirun, mlen) || !getcwd(cwd, sizeof cwd))
		return NULL;
	snprintf(prog, len, "%s/%s/dlh-calib-gpuemu", cwd, build ? build : "build");
	return access(prog, X_OK) ? NULL : prog;
}

TEST(the_gpu_phase_runs_on_the_emulation_and_replaces_its_type_alone)
{
	char mpirun[1024], prog[1024], dir[] = "/tmp/dlh-test-calib.XXXXXX", err[1024];
	struct dlh_calib c;

	if (!emu_calib(prog, sizeof prog, mpirun, sizeof mpirun))
		SKIP("no mpirun, or no dlh-calib-gpuemu (built where nvcc is)");
	CHECK(mkdtemp(dir));
	struct dlh_backend be;
	CHECK_MSG(dlh_backend_local(&be, mpirun, err, sizeof err) == 0, "%s", err);
	struct dlh_calib_gpu g = { .type = "H100", .first = 0, .count = 2 };
	struct dlh_calib_opts o = { .backend = &be, .program = prog, .dir = dir, .gpus = &g,
				    .ngpus = 1 };
	sample(&c);   /* an H100 from the pool file's figures: replaced */
	double t0 = dlh_now();
	int rc = dlh_calib_measure_gpus(&o, &c, err, sizeof err);
	double took = dlh_now() - t0;
	rmdir(dir);   /* fails, and the test with it, when dlh-calib left files */
	CHECK_MSG(rc == 0, "%s", err);
	const struct dlh_calib_dev *h = dlh_calib_dev(&c, "H100"), *cpu = dlh_calib_dev(&c, "cpu");
	CHECK(c.ndev == 2 && h && cpu && cpu->gpu == 0 && near(cpu->gemm_all, 0.875));
	printf("    gpu phase took %.1f s: gemm %.3g FLOP/s, launch %.3g s, sync %.3g s, "
	       "h2d %.3g s + %.3g B/s, bw %.3g B/s, context %.0f MiB, cuBLAS %.0f MiB, "
	       "NCCL %.0f MiB, allreduce %.3g s + %.3g s/B, direct conv %.3g s an output and tap, "
	       "its weight gradient %.3g s a pooled output and tap\n",
	       took, h->gemm_flops, h->kernel_s,
	       h->sync_s, h->h2d_s, h->h2d_bw, h->mem_bw, h->ctx_bytes / 1048576,
	       h->blas_bytes / 1048576, h->nccl_bytes / 1048576, h->nccl_alpha, h->nccl_beta,
	       h->direct_s, h->direct_dw_s);
	CHECK(h->gpu == 1 && h->grid && h->grid_tr[0] && h->grid_tr[1] && h->grid_tf32);
	CHECK(h->gemm_flops > 1e8 && h->gemm[2][2][2] > 0 && h->gemm_tr[1][2][2][2] > 0);
	CHECK(h->gemm_tf32[2][2][2] > 0 && h->node_s > 0 && h->direct_s > 0 && h->direct_dw_s > 0);
	CHECK(h->kernel_s > 0 && h->sync_s >= 0 && h->h2d_s > 0 && h->h2d_bw > 0);
	CHECK(h->mem_bw > 0 && h->bw[0] > 0 && h->gemm_all == 1);
	/* the emulation's context, cuBLAS handle and communicator (gpu_emu.h) */
	CHECK(h->ctx_bytes >= 384.0 * 1048576 && h->blas_bytes >= 96.0 * 1048576);
	CHECK(h->nccl_bytes >= 160.0 * 1048576 && h->total_bytes > 79.0 * 1073741824);
	CHECK(h->nccl_gpus == 2 && h->nccl_alpha > 0);
	CHECK(access(dir, F_OK) != 0);
}

TEST(a_gpu_phase_that_fails_says_why_and_keeps_the_rest)
{
	char mpirun[1024], prog[1024], dir[] = "/tmp/dlh-test-calib.XXXXXX", err[1024] = "";
	struct dlh_calib c;

	if (!emu_calib(prog, sizeof prog, mpirun, sizeof mpirun))
		SKIP("no mpirun, or no dlh-calib-gpuemu (built where nvcc is)");
	CHECK(mkdtemp(dir));
	struct dlh_backend be;
	CHECK_MSG(dlh_backend_local(&be, mpirun, err, sizeof err) == 0, "%s", err);
	/* more GPUs than the emulation has (8) */
	struct dlh_calib_gpu g = { .type = "A100", .first = 0, .count = 9 };
	struct dlh_calib_opts o = { .backend = &be, .program = prog, .dir = dir, .gpus = &g,
				    .ngpus = 1 };
	sample(&c);
	int rc = dlh_calib_measure_gpus(&o, &c, err, sizeof err);
	rmdir(dir);
	CHECK(rc == -EIO);
	CHECK_MSG(strstr(err, "dlh-calib --phase gpu") && strstr(err, "9 devices asked for"), "%s",
		  err);
	CHECK(c.ndev == 2 && !dlh_calib_dev(&c, "A100") && dlh_calib_dev(&c, "H100")->gpu == 0);
	CHECK(access(dir, F_OK) != 0);
}

int main(void)
{
	RUN(format_then_parse_gives_the_same_numbers);
	RUN(transposed_grids_round_trip_apart_from_the_untransposed);
	RUN(save_then_load_round_trips);
	RUN(a_cache_of_every_gpu_type_it_holds_loads);
	RUN(load_without_a_cache_is_enoent);
	RUN(bad_cache_lines_are_named);
	RUN(load_names_a_missing_date);
	RUN(measure_runs_dlh_calib_and_fills_every_term);
	RUN(gpu_figures_round_trip_and_a_cpu_type_writes_none);
	RUN(a_cache_written_before_gpu_figures_still_parses);
	RUN(the_gpu_phase_runs_on_the_emulation_and_replaces_its_type_alone);
	RUN(a_gpu_phase_that_fails_says_why_and_keeps_the_rest);
	return CHECK_EXIT();
}
