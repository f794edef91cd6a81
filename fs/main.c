/* main.c - dlhfs: mount the harness, parse options, run the FUSE loop */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <fuse.h>
#include <fuse_lowlevel.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/util/util.h"
#include "fs/ops.h"
#include "fs/kcache.h"
#include "fs/poll.h"
#include "fs/stale.h"

#define DLH_VERSION "0.1.0"
/* Threads serving requests: libfuse's default is 10. A thread waits on a
 * submission's data for up to -o data_timeout; more threads let others'
 * reads go on meanwhile (engine/jobs/check.c bounds each user). */
#define DLH_FUSE_THREADS 64

/* SIGTERM, SIGINT, SIGHUP: the engine is told at once that it closes (a
 * calibration or a link measurement under way stops rather than hold up
 * the end of the loop), then libfuse's handler ends the loop. */
static _Atomic(struct dlh_engine *) closing_engine;
static struct sigaction fuse_handler[3];
static const int closing_signals[3] = { SIGTERM, SIGINT, SIGHUP };

static void on_stop_signal(int sig)
{
	dlh_engine_closing(atomic_load(&closing_engine));
	for (int i = 0; i < 3; i++)
		if (closing_signals[i] == sig)
			fuse_handler[i].sa_handler(sig);
}

static int told_on_stop[3];

/* Puts on_stop_signal before the handlers libfuse set. */
static void tell_engine_on_stop(struct dlh_engine *e)
{
	atomic_store(&closing_engine, e);
	for (int i = 0; i < 3; i++) {
		struct sigaction sa;
		/* only in front of a handler libfuse put there: a signal ignored
		 * (nohup, a shell's background job) stays ignored */
		if (sigaction(closing_signals[i], NULL, &fuse_handler[i]) ||
		    (fuse_handler[i].sa_flags & SA_SIGINFO) || fuse_handler[i].sa_handler == SIG_IGN ||
		    fuse_handler[i].sa_handler == SIG_DFL)
			continue;
		sa = fuse_handler[i];
		sa.sa_handler = on_stop_signal;
		told_on_stop[i] = !sigaction(closing_signals[i], &sa, NULL);
	}
}

/* libfuse's handlers back (it removes only its own), before the engine
 * goes: no signal reaches it after. */
static void untell_engine_on_stop(void)
{
	for (int i = 0; i < 3; i++)
		if (told_on_stop[i])
			sigaction(closing_signals[i], &fuse_handler[i], NULL);
	atomic_store(&closing_engine, NULL);
}

/* Options of our own, beside libfuse's. */
struct dlh_options {
	char *state;       /* -o state=DIR */
	char *trainer;     /* -o trainer=PATH */
	char *calib;       /* -o calib=PATH */
	char *mpirun;      /* -o mpirun=PATH */
	char *pool;        /* -o pool=FILE */
	int cpus;          /* -o cpus=N */
	int max_queued;    /* -o max_queued=N */
	int max_queued_per_user; /* -o max_queued_per_user=N */
	int ranks_per_user; /* -o ranks_per_user=N */
	double data_timeout; /* -o data_timeout=SECONDS */
	unsigned max_threads; /* -o max_threads=N (libfuse's, with our default) */
	char *isolation;   /* -o isolation=auto|off */
	char *probe;       /* -o probe=on|off */
	char *expire;      /* -o expire=DURATION */
	char *probe_every; /* -o probe_every=DURATION */
	char *mem_per_rank; /* -o mem_per_rank=SIZE */
	long pids_per_rank; /* -o pids_per_rank=N */
	char *reserve;     /* -o reserve=SIZE */
	char *disk_per_job; /* -o disk_per_job=SIZE */
	char *disk_max;    /* -o disk_max=SIZE */
	int show_help;     /* --help */
	int show_version;  /* --version */
	int calibrate;     /* --calibrate */
};

#define OPTION(t, p) { t, offsetof(struct dlh_options, p), 1 }
static const struct fuse_opt option_spec[] = {
	OPTION("state=%s", state),
	OPTION("trainer=%s", trainer),
	OPTION("calib=%s", calib),
	OPTION("mpirun=%s", mpirun),
	OPTION("pool=%s", pool),
	OPTION("cpus=%d", cpus),
	OPTION("max_queued=%d", max_queued),
	OPTION("max_queued_per_user=%d", max_queued_per_user),
	OPTION("ranks_per_user=%d", ranks_per_user),
	OPTION("data_timeout=%lf", data_timeout),
	OPTION("max_threads=%u", max_threads),
	OPTION("isolation=%s", isolation),
	OPTION("probe=%s", probe),
	OPTION("expire=%s", expire),
	OPTION("probe_every=%s", probe_every),
	OPTION("mem_per_rank=%s", mem_per_rank),
	OPTION("pids_per_rank=%ld", pids_per_rank),
	OPTION("reserve=%s", reserve),
	OPTION("disk_per_job=%s", disk_per_job),
	OPTION("disk_max=%s", disk_max),
	OPTION("-h", show_help),
	OPTION("--help", show_help),
	OPTION("-V", show_version),
	OPTION("--version", show_version),
	OPTION("--calibrate", calibrate),
	FUSE_OPT_END
};

static void dlh_fs_destroy(void *data)
{
	(void)data;
	fs_kcache_stop();
	fs_poll_stop();
}

static void *dlh_fs_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	(void)conn;
	/* the kernel keeps attributes and names a while; kcache.c tells it
	 * when a size or a content changes (ids are never reused). A name
	 * not found is not kept: a job submitted appears at once. */
	cfg->attr_timeout = FS_ATTR_TIMEOUT;
	cfg->entry_timeout = FS_ATTR_TIMEOUT;
	cfg->negative_timeout = 0;
	cfg->use_ino = 0;
	struct dlh_fs *fs = fuse_get_context()->private_data;
	if (fs_kcache_start(fs->engine, fuse_get_context()->fuse))
		fprintf(stderr, "dlhfs: cannot start the cache thread: live files are never cached\n");
	if (fs_poll_start(fs->engine))
		fprintf(stderr, "dlhfs: cannot start the poll thread: poll(2) readers are never woken\n");
	return fs;
}

static const struct fuse_operations dlh_fs_ops = {
	.init = dlh_fs_init,
	.destroy = dlh_fs_destroy,
	.getattr = dlh_fs_getattr,
	.readlink = dlh_fs_readlink,
	.readdir = dlh_fs_readdir,
	.open = dlh_fs_open,
	.read = dlh_fs_read,
	.write = dlh_fs_write,
	.flush = dlh_fs_flush,
	.release = dlh_fs_release,
	.poll = dlh_fs_poll,
	.truncate = dlh_fs_truncate,
	.utimens = dlh_fs_utimens,
	.create = dlh_fs_create,
	.mkdir = dlh_fs_refuse_mkdir,
	.unlink = dlh_fs_refuse,
	.rmdir = dlh_fs_refuse,
	.rename = dlh_fs_refuse_rename,
	.chmod = dlh_fs_refuse_chmod,
	.chown = dlh_fs_refuse_chown,
	.symlink = dlh_fs_refuse_link,
	.link = dlh_fs_refuse_link,
};

/* Prints err to stderr, "dlhfs: " before each of its lines (a pool file
 * with several problems gives one "FILE:LINE: problem" line each). */
static void print_error(const char *err)
{
	do {
		size_t len = strcspn(err, "\n");
		fprintf(stderr, "dlhfs: %.*s\n", (int)len, err);
		err += len + (err[len] == '\n');
	} while (*err);
}

static void usage(const char *prog)
{
	printf("usage: %s [options] MOUNTPOINT\n"
	       "       %s --calibrate [-o state=DIR]\n"
	       "\n"
	       "Mounts the dlhfs deep-learning harness at MOUNTPOINT. Write a job spec\n"
	       "into MOUNTPOINT/jobs/new to train; read MOUNTPOINT/README for the tree.\n"
	       "\n"
	       "dlhfs options:\n"
	       "    -o state=DIR       where jobs, logs and checkpoints live (default %s)\n"
	       "    -o pool=FILE       the pool: device types and nodes, INI (default: this\n"
	       "                       machine, its cores and its NVIDIA GPUs; README.md\n"
	       "                       describes the file)\n"
	       "    -o cpus=N          CPU slots of the local node (default: online cores)\n"
	       "    -o max_queued=N    most jobs queued at once; more are refused (default %d)\n"
	       "    -o max_queued_per_user=N\n"
	       "                       most jobs of one user queued at once (default %d;\n"
	       "                       -1: no limit but max_queued)\n"
	       "    -o ranks_per_user=N\n"
	       "                       rank slots one user's runs may hold while another\n"
	       "                       user's job waits; that user's queued jobs wait\n"
	       "                       meanwhile (default: half the pool's slots; -1: none)\n"
	       "    -o mem_per_rank=SIZE\n"
	       "                       memory limit per rank of a job whose spec sets no\n"
	       "                       [resources] memory (default: this machine's memory\n"
	       "                       over its cores; 0: none)\n"
	       "    -o reserve=SIZE    room the state dir keeps for dlhfs's own records: a\n"
	       "                       job that fills the disk is stopped and the reserve\n"
	       "                       given up (default 64M, at most 5%% of the\n"
	       "                       filesystem; 0: none)\n"
	       "    -o disk_per_job=SIZE\n"
	       "                       what a job's directory may hold when its spec sets\n"
	       "                       no [resources] disk (default: no limit)\n"
	       "    -o disk_max=SIZE   the largest [resources] disk a spec may ask for\n"
	       "    -o pids_per_rank=N processes and threads a job may have per rank, and\n"
	       "                       as many for its launcher (default %d; -1: no limit)\n"
	       "    -o data_timeout=S  seconds a submission's data files may take to answer\n"
	       "                       before the spec is refused (default %.0f: a hung\n"
	       "                       filesystem never holds the mount)\n"
	       "    -o max_threads=N   most threads serving requests (default %d)\n"
	       "    -o allow_other     let every user use the mount (libfuse; for a team's\n"
	       "                       system mount: README.md, Sharing a mount)\n"
	       "    -o probe=off       do not probe the pool file's other nodes over their\n"
	       "                       agent (ssh) at mount: take the file as it is\n"
	       "    -o probe_every=DURATION\n"
	       "                       probe them again this often: a node whose sshd died\n"
	       "                       is found down, one back up (default 1m; 0: never)\n"
	       "    -o isolation=off   no cgroups for runs (default auto: cpusets and memory\n"
	       "                       limits where cgroup v1 or v2 is usable)\n"
	       "    -o expire=DURATION remove ended jobs (their files, as ctl `purge`) this\n"
	       "                       long after they ended: 30d, 12h, 90m (default 0:\n"
	       "                       kept until purged)\n"
	       "    -o trainer=PATH    the dlh-train program (default: beside dlhfs)\n"
	       "    -o calib=PATH      the dlh-calib program that measures the devices\n"
	       "                       (default: beside the trainer)\n"
	       "    -o mpirun=PATH     the mpirun program (default: from PATH)\n"
	       "    -h, --help         this text, then libfuse's options\n"
	       "    -V, --version      print the version\n"
	       "    --calibrate        measure the devices now (GEMM, memory bandwidth,\n"
	       "                       allreduce; seconds), store STATE/calibration, print\n"
	       "                       it and exit; a mount measures on its own when the\n"
	       "                       state dir has none\n"
	       "\n"
	       "Unmount with: fusermount3 -u MOUNTPOINT (running jobs are stopped and\n"
	       "resume from their newest checkpoint at the next mount).\n"
	       "\n", prog, prog, DLH_STATE_DEFAULT, DLH_MAX_QUEUED, DLH_MAX_QUEUED_PER_USER,
	       DLH_PIDS_PER_RANK, DLH_DATA_TIMEOUT, DLH_FUSE_THREADS);
}

/* dlhfs --calibrate: measure, store, print. Returns the exit status. */
static int calibrate(const struct dlh_options *o)
{
	struct dlh_engine_opts eo = {
		.state_dir = o->state ? o->state : DLH_STATE_DEFAULT,
		.trainer = o->trainer, .calib = o->calib, .launcher = o->mpirun, .cpus = o->cpus,
		.pool_file = o->pool,
	};
	struct dlh_buf out = {0};
	char err[1024] = "";
	int rc = dlh_engine_calibrate(&eo, &out, err, sizeof err);

	if (rc)
		fprintf(stderr, "dlhfs: calibration failed: %s\n", err);
	else
		fputs(out.data ? out.data : "", stdout);
	dlh_buf_free(&out);
	return rc ? 1 : 0;
}

/* mount(8), for an fstab line of type fuse.dlhfs, runs mount.fuse3, which
 * runs "dlhfs SOURCE MOUNTPOINT -o OPTIONS": the source (the line's first
 * field) names nothing here and is dropped. */
static void drop_source(struct fuse_args *args)
{
	int pos[3], n = 0;
	for (int i = 1; i < args->argc && n < 3; i++) {
		if (!strcmp(args->argv[i], "-o")) {
			i++;   /* its value */
			continue;
		}
		if (args->argv[i][0] != '-')
			pos[n++] = i;
	}
	if (n != 2 || !args->allocated)
		return;
	free(args->argv[pos[0]]);
	memmove(&args->argv[pos[0]], &args->argv[pos[0] + 1],
		(size_t)(args->argc - pos[0]) * sizeof args->argv[0]);   /* the NULL too */
	args->argc--;
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct dlh_options o = { 0 };
	struct fuse_cmdline_opts c = { 0 };
	struct dlh_fs fs = { 0 };
	struct fuse *f = NULL;
	char err[4096] = "";   /* room for a pool file's problems, one line each */
	int rc = 1;

	if (fuse_opt_parse(&args, &o, option_spec, NULL) == -1)
		return 1;
	drop_source(&args);
	if (o.show_help) {
		usage(argv[0]);
		fuse_opt_add_arg(&args, "--help");
		args.argv[0][0] = '\0';
	}
	if (!o.show_help && !o.show_version && !o.calibrate) {
		/* libfuse cannot even parse a mount point left by a dlhfs that died */
		char msg[4400];
		int cleared = dlh_clear_stale_mount(dlh_mountpoint_arg(args.argc, args.argv), msg,
						    sizeof msg);
		if (cleared)
			fprintf(stderr, "dlhfs: %s\n", msg);
		if (cleared < 0)
			goto out_args;
	}
	if (fuse_parse_cmdline(&args, &c) != 0)
		goto out_args;
	if (o.show_help) {
		fuse_cmdline_help();
		fuse_lib_help(&args);
		rc = 0;
		goto out_args;
	}
	if (o.show_version) {
		printf("dlhfs %s (libfuse %s)\n", DLH_VERSION, fuse_pkgversion());
		rc = 0;
		goto out_args;
	}
	if (o.calibrate) {
		rc = calibrate(&o);
		goto out_args;
	}
	if (!c.mountpoint) {
		fprintf(stderr, "dlhfs: no mountpoint given (try --help)\n");
		goto out_args;
	}

	/* the daemon works from "/" once detached: make given paths absolute */
	char **given[] = { &o.trainer, &o.calib, &o.mpirun, &o.pool };
	for (size_t i = 0; i < sizeof given / sizeof given[0]; i++) {
		char *path = *given[i], *fixed;
		if (!path || path[0] == '/')
			continue;
		if (!(fixed = realpath(path, NULL))) {
			fprintf(stderr, "dlhfs: cannot find \"%s\": %s\n", path, strerror(errno));
			goto out_args;
		}
		free(path);
		*given[i] = fixed;
	}
	struct dlh_engine_opts eo = {
		.state_dir = o.state ? o.state : DLH_STATE_DEFAULT,
		.trainer = o.trainer,
		.calib = o.calib,
		.launcher = o.mpirun,
		.pool_file = o.pool,
		.cpus = o.cpus,
		.max_queued = o.max_queued,
		.max_queued_per_user = o.max_queued_per_user,
		.ranks_per_user = o.ranks_per_user,
		.data_timeout = o.data_timeout,
		.no_isolation = o.isolation && !strcmp(o.isolation, "off"),
		.no_probe = o.probe && !strcmp(o.probe, "off"),
	};
	long expire = 0;
	char why[256];
	if (o.expire && dlh_spec_duration(o.expire, &expire, why, sizeof why)) {
		fprintf(stderr, "dlhfs: -o expire: %s\n", why);
		goto out_args;
	}
	eo.expire = (double)expire;
	long every = 0;
	if (o.probe_every && dlh_spec_duration(o.probe_every, &every, why, sizeof why)) {
		fprintf(stderr, "dlhfs: -o probe_every: %s\n", why);
		goto out_args;
	}
	eo.probe_every = o.probe_every ? (every > 0 ? (double)every : -1) : 0;
	long long mem = 0;
	if (o.mem_per_rank && dlh_spec_size(o.mem_per_rank, &mem, why, sizeof why)) {
		fprintf(stderr, "dlhfs: -o mem_per_rank: %s\n", why);
		goto out_args;
	}
	eo.mem_per_rank = o.mem_per_rank ? (mem > 0 ? mem : -1) : 0;
	eo.pids_per_rank = o.pids_per_rank;
	const struct { const char *name, *text; long long *to; int zero_none; } sizes[] = {
		{ "reserve", o.reserve, &eo.reserve, 1 },
		{ "disk_per_job", o.disk_per_job, &eo.disk_per_job, 0 },
		{ "disk_max", o.disk_max, &eo.disk_max, 0 },
	};
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		long long v = 0;
		if (!sizes[i].text)
			continue;
		if (dlh_spec_size(sizes[i].text, &v, why, sizeof why)) {
			fprintf(stderr, "dlhfs: -o %s: %s\n", sizes[i].name, why);
			goto out_args;
		}
		*sizes[i].to = v > 0 ? v : sizes[i].zero_none ? -1 : 0;
	}
	if (o.probe && strcmp(o.probe, "off") && strcmp(o.probe, "on")) {
		fprintf(stderr, "dlhfs: -o probe: expected \"on\" or \"off\", got \"%s\"\n", o.probe);
		goto out_args;
	}
	if (o.isolation && strcmp(o.isolation, "off") && strcmp(o.isolation, "auto")) {
		fprintf(stderr, "dlhfs: -o isolation: expected \"auto\" or \"off\", got \"%s\"\n", o.isolation);
		goto out_args;
	}
	/* say what is wrong before detaching, while stderr still reaches the user */
	if ((rc = dlh_engine_check(&eo, err, sizeof err))) {
		print_error(err);
		rc = 1;
		goto out_args;
	}
	rc = 1;
	f = fuse_new(&args, &dlh_fs_ops, sizeof dlh_fs_ops, &fs);
	if (!f)
		goto out_args;
	if (fuse_mount(f, c.mountpoint) != 0)
		goto out_new;
	if (fuse_daemonize(c.foreground) != 0)
		goto out_mount;
	/* threads and children start only now, after any fork of daemonizing */
	if (dlh_engine_open(&fs.engine, &eo, err, sizeof err)) {
		print_error(err);
		goto out_mount;
	}
	fs.mounted_at = dlh_now();
	if (fuse_set_signal_handlers(fuse_get_session(f)) != 0)
		goto out_engine;
	tell_engine_on_stop(fs.engine);
	if (c.singlethread) {
		rc = fuse_loop(f);
	} else {
		struct fuse_loop_config *lc = fuse_loop_cfg_create();
		if (!lc)
			goto out_signals;
		fuse_loop_cfg_set_clone_fd(lc, (unsigned)c.clone_fd);
		if (c.max_idle_threads != UINT_MAX)   /* UINT_MAX: not given */
			fuse_loop_cfg_set_idle_threads(lc, c.max_idle_threads);
		fuse_loop_cfg_set_max_threads(lc, o.max_threads ? o.max_threads : DLH_FUSE_THREADS);
		rc = fuse_loop_mt(f, lc);
		fuse_loop_cfg_destroy(lc);
	}
	rc = rc ? 1 : 0;
out_signals:
	untell_engine_on_stop();
	fuse_remove_signal_handlers(fuse_get_session(f));
out_engine:
	fs_kcache_stop();   /* their threads render through the engine: first */
	fs_poll_stop();
	dlh_engine_close(fs.engine);
out_mount:
	fuse_unmount(f);
out_new:
	fuse_destroy(f);
out_args:
	free(c.mountpoint);
	free(o.state);
	free(o.trainer);
	free(o.calib);
	free(o.mpirun);
	free(o.pool);
	free(o.isolation);
	free(o.expire);
	free(o.probe_every);
	free(o.mem_per_rank);
	free(o.reserve);
	free(o.disk_per_job);
	free(o.disk_max);
	free(o.probe);
	fuse_opt_free_args(&args);
	return rc;
}
