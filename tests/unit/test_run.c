/* test_run.c - running a job's processes (engine/run/): launch in its own session,
 * finding and killing them through /proc, the cgroup of a run */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/run/cgroup.h"
#include "engine/run/join.h"
#include "engine/run/launch.h"
#include "engine/run/probe.h"
#include "engine/run/proc.h"
#include "engine/util/util.h"
#include "tests/unit/check.h"
#include "tests/unit/tmpdir.h"

TEST(launch_runs_in_own_session_and_session_kill_reaches_all)
{
	char dir[512], log[600];
	fresh_dir(dir, sizeof dir, "launch");
	snprintf(log, sizeof log, "%s/log", dir);
	/* a leader with a child that outlives nothing unless killed */
	char *argv[] = { "/usr/bin/env", "sleep", "30", NULL };
	char *extra[] = { "DLH_TEST=1", NULL };
	pid_t pid;
	CHECK(dlh_launch(argv, extra, log, &pid) == 0);
	for (int i = 0; i < 100 && dlh_proc_count_session(pid) < 1; i++)
		usleep(10000);
	CHECK(getsid(pid) == pid);
	CHECK(dlh_proc_start(pid) != 0);
	CHECK(dlh_proc_kill_session(pid, SIGKILL) >= 1);
	int st;
	CHECK(waitpid(pid, &st, 0) == pid && WIFSIGNALED(st));
	CHECK(dlh_proc_count_session(pid) == 0);
}

TEST(launch_exec_failure_is_returned)
{
	char dir[512], log[600];
	fresh_dir(dir, sizeof dir, "launchfail");
	snprintf(log, sizeof log, "%s/log", dir);
	char *argv[] = { "/nonexistent/mpirun", NULL };
	pid_t pid = 0;
	CHECK(dlh_launch(argv, NULL, log, &pid) == -ENOENT);
	CHECK(pid == 0);
	CHECK(waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD); /* the child was reaped */
}

TEST(cgroup_run_group_has_cpuset_limit_and_its_process)
{
	struct dlh_cgroup_sys sys;
	dlh_cgroup_setup(&sys);
	if (sys.mode == DLH_CG_NONE)
		SKIP(sys.why);
	struct dlh_cgroup cg;
	char err[512], path[DLH_CG_PATH_MAX + 64], *text;
	int slots[] = { 0 };
	CHECK_MSG(dlh_cgroup_create(&sys, "unit-1", slots, 1, 64LL << 20, 100, &cg, err, sizeof err) == 0,
		  "create: %s", err);
	snprintf(path, sizeof path, "%s/cpuset.cpus", cg.cpuset);
	CHECK(dlh_read_file(path, 4096, &text, NULL) == 0);
	char want[16];
	snprintf(want, sizeof want, "%d\n", sys.cpu[0]);
	CHECK_MSG(!strcmp(text, want), "cpuset.cpus: %s", text);
	free(text);
	snprintf(path, sizeof path, "%s/%s", cg.memory,
		 sys.mode == DLH_CG_V1 ? "memory.limit_in_bytes" : "memory.max");
	CHECK(dlh_read_file(path, 4096, &text, NULL) == 0);
	CHECK_MSG(!strcmp(text, "67108864\n"), "limit: %s", text);
	free(text);
	/* the task limit, where the host has the pids controller */
	if (sys.pids[0]) {
		snprintf(path, sizeof path, "%s/pids.max", cg.pids);
		CHECK(dlh_read_file(path, 4096, &text, NULL) == 0);
		CHECK_MSG(!strcmp(text, "100\n"), "pids.max: %s", text);
		free(text);
	}
	/* a launched program is inside before it runs */
	int join[4];
	CHECK(dlh_cgroup_join_fds(&cg, join) == 0);
	char log[700], dir[512];
	fresh_dir(dir, sizeof dir, "cgroup");
	snprintf(log, sizeof log, "%s/log", dir);
	char *argv[] = { "/bin/sh", "-c", "cat /proc/self/cgroup; exec sleep 30", NULL };
	pid_t pid;
	int rc = dlh_launch_in(argv, NULL, log, join, &pid);
	for (int k = 0; join[k] >= 0; k++)
		close(join[k]);
	CHECK(rc == 0);
	snprintf(path, sizeof path, "%s/cgroup.procs", cg.cpuset);
	CHECK(dlh_read_file(path, 4096, &text, NULL) == 0);
	char me[32];
	snprintf(me, sizeof me, "%ld\n", (long)pid);
	int inside = strstr(text, me) != NULL;
	free(text);
	CHECK(dlh_cgroup_oom_kills(&cg) == 0);
	char dirpath[DLH_CG_PATH_MAX];
	snprintf(dirpath, sizeof dirpath, "%s", cg.cpuset);
	dlh_cgroup_destroy(&cg); /* kills what is left */
	waitpid(pid, NULL, 0);
	CHECK_MSG(inside, "pid %ld is not in its group", (long)pid);
	CHECK_MSG(access(dirpath, F_OK) != 0, "%s left behind", dirpath);
	dlh_cgroup_teardown(&sys);
}

TEST(launch_as_a_user_takes_its_ids_groups_and_home)
{
	char dir[512], log[600], err[256], *text = NULL;
	struct dlh_cred c;
	if (geteuid() != 0)
		SKIP("needs root to change users");
	if (dlh_cred_of(65534, &c, err, sizeof err))
		SKIP("no user 65534 (nobody) here");
	CHECK(dlh_cred_of(4000000000u, &c, err, sizeof err) == -ENOENT);
	CHECK_MSG(strstr(err, "no entry in the password database"), "%s", err);
	CHECK(dlh_cred_of(65534, &c, err, sizeof err) == 0);
	fresh_dir(dir, sizeof dir, "as-user");
	snprintf(log, sizeof log, "%s/log", dir);
	char *argv[] = { "/bin/sh", "-c",
		"echo \"$(id -u) $(id -g) $HOME $USER $(pwd) ${DLH_SECRET:-unset} $DLH_MINE\"", NULL };
	char *extra[] = { "DLH_MINE=given", NULL };
	pid_t pid;
	int st;
	setenv("DLH_SECRET", "the daemon's", 1);   /* not for the user's run */
	CHECK(dlh_launch_as(argv, extra, log, NULL, &c, "/", &pid) == 0);
	unsetenv("DLH_SECRET");
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(dlh_read_file(log, 4096, &text, NULL) == 0);
	char want[700];
	snprintf(want, sizeof want, "65534 %u %s %s / unset given\n", (unsigned)c.gid, c.home, c.user);
	CHECK_MSG(!strcmp(text, want), "got \"%s\", want \"%s\"", text, want);
	free(text);
}

/* The descriptors a launched program holds, as it lists them itself. */
static int launched_fds(const char *dir, const char *name, char **text)
{
	char log[600];
	snprintf(log, sizeof log, "%s/%s", dir, name);
	char *argv[] = { "/bin/ls", "/proc/self/fd", NULL };
	pid_t pid;
	int st;
	if (dlh_launch(argv, NULL, log, &pid) || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return dlh_read_file(log, 4096, text, NULL);
}

struct probe_call {
	char agent[700];
	struct dlh_probe_result r;
};

static void *probe_call(void *arg)
{
	struct probe_call *c = arg;
	dlh_probe_node(c->agent, "node1", "/nowhere/dlh-probe", "/tmp", 20, &c->r);
	return NULL;
}

/* A probe runs in a thread of its own while jobs launch from others: a
 * program started meanwhile must not hold the probe's pipes (it would keep
 * the probe waiting for its end of output as long as the program lives). */
TEST(a_launch_beside_a_probe_in_flight_holds_none_of_its_pipes)
{
	char dir[512], fifo[600], script[600], *before = NULL, *during = NULL;
	fresh_dir(dir, sizeof dir, "probe-fds");
	snprintf(fifo, sizeof fifo, "%s/go", dir);
	snprintf(script, sizeof script, "%s/agent.sh", dir);
	CHECK(mkfifo(fifo, 0600) == 0);
	/* the agent answers as dlh-probe would, once the test says so */
	FILE *f = fopen(script, "w");
	CHECK(f);
	fprintf(f, "read word < '%s'\necho cpus=2\necho state_dir=yes\n", fifo);
	fclose(f);
	CHECK(launched_fds(dir, "before", &before) == 0);
	static struct probe_call c;
	snprintf(c.agent, sizeof c.agent, "/bin/sh %s", script);
	pthread_t t;
	CHECK(pthread_create(&t, NULL, probe_call, &c) == 0);
	int w = open(fifo, O_WRONLY | O_CLOEXEC);   /* returns once the agent is running */
	int got = w >= 0 ? launched_fds(dir, "during", &during) : -1;
	if (w >= 0) {
		CHECK(write(w, "go\n", 3) == 3);
		close(w);
	}
	pthread_join(t, NULL);
	CHECK(w >= 0 && got == 0);
	CHECK_MSG(c.r.up && c.r.cpus == 2, "the probe: %s", c.r.why);
	CHECK_MSG(!strcmp(before, during), "descriptors before the probe:\n%sand during it:\n%s",
		  before, during);
	free(before);
	free(during);
}

/* an agent that is not there: the node is down, and why says so */
TEST(a_probe_through_a_missing_agent_says_it_cannot_execute_it)
{
	struct dlh_probe_result r;
	dlh_probe_node("/nonexistent/ssh -x", "node1", "/nowhere/dlh-probe", "/tmp", 10, &r);
	CHECK(!r.up);
	CHECK_MSG(!strcmp(r.why, "/nonexistent/ssh: cannot execute \"/nonexistent/ssh\": no such file"),
		  "why: %s", r.why);
}

/* A stand-in for dlh-probe --hold: takes one connection on its socket and
 * answers it with arg's words. */
struct fake_helper {
	int ls;
	const char *answer;
};

static void *fake_helper_main(void *arg)
{
	struct fake_helper *f = arg;
	int c = accept(f->ls, NULL, NULL);
	if (c >= 0) {
		/* a peer gone already (one that never joined) is no failure */
		ssize_t w = send(c, f->answer, strlen(f->answer), MSG_NOSIGNAL);
		(void)w;
		close(c);
	}
	return NULL;
}

/* dlh_nodecg_join as a rank sees it: r the rank, nodes DLH_RANK_NODES,
 * listed DLH_NODECG_NODES, answer what the helper says (NULL: none
 * listens). Returns its result, msg filled (-99: the stand-in failed). */
static int join_as(const char *r, const char *nodes, const char *listed, const char *answer,
		   char *msg, size_t len)
{
	char name[64];
	snprintf(name, sizeof name, "test-%ld", (long)getpid());
	setenv("OMPI_COMM_WORLD_RANK", r, 1);
	setenv("DLH_RANK_NODES", nodes, 1);
	setenv("DLH_NODECG", name, 1);
	setenv("DLH_NODECG_NODES", listed, 1);
	struct fake_helper f = { -1, answer };
	pthread_t t;
	if (answer) {
		struct sockaddr_un a;
		socklen_t alen = dlh_nodecg_addr(name, &a);
		f.ls = socket(AF_UNIX, SOCK_STREAM, 0);
		if (f.ls < 0 || bind(f.ls, (struct sockaddr *)&a, alen) || listen(f.ls, 4) ||
		    pthread_create(&t, NULL, fake_helper_main, &f)) {
			snprintf(msg, len, "the fake helper did not start: %s", strerror(errno));
			if (f.ls >= 0)
				close(f.ls);
			return -99;
		}
	}
	int rc = dlh_nodecg_join(msg, len);
	if (answer) {
		if (rc == 0) {   /* it never connected: let the helper go */
			int c = socket(AF_UNIX, SOCK_STREAM, 0);
			struct sockaddr_un a;
			socklen_t alen = dlh_nodecg_addr(name, &a);
			if (connect(c, (struct sockaddr *)&a, alen) < 0)
				fprintf(stderr, "connect failed\n");
			close(c);
		}
		pthread_join(t, NULL);
		close(f.ls);
	}
	unsetenv("DLH_NODECG");
	unsetenv("DLH_NODECG_NODES");
	return rc;
}

/* A rank joins its node's group only where DLH_NODECG_NODES lists its
 * node; the helper's "ok"/"no" are its answer; no helper is said plainly */
TEST(a_rank_joins_its_nodes_group_through_the_helper_only_on_a_listed_node)
{
	char msg[600];
	unsetenv("DLH_NODECG");
	CHECK(dlh_nodecg_join(msg, sizeof msg) == 0);   /* no run's helper at all */
	/* rank 0 on node 0 (dlhfs's own machine): nothing to join */
	CHECK(join_as("0", "0,1", "1", "ok /never\n", msg, sizeof msg) == 0);
	CHECK(join_as("1", "0,1", "1", "ok /sys/fs/cgroup/x/y\n", msg, sizeof msg) == 1);
	CHECK(strcmp(msg, "/sys/fs/cgroup/x/y") == 0);
	CHECK(join_as("1", "0,1", "1", "no uid 5 is not the run's owner (uid 6)\n", msg, sizeof msg) == -1);
	CHECK(strcmp(msg, "uid 5 is not the run's owner (uid 6)") == 0);
	CHECK(join_as("2", "0,1,1", "1", NULL, msg, sizeof msg) == -1);
	CHECK(strstr(msg, "no cgroup helper of the run here") != NULL);
}

int main(void)
{
	if (tmp_root_make())
		return 1;
	RUN(launch_runs_in_own_session_and_session_kill_reaches_all);
	RUN(launch_exec_failure_is_returned);
	RUN(launch_as_a_user_takes_its_ids_groups_and_home);
	RUN(a_launch_beside_a_probe_in_flight_holds_none_of_its_pipes);
	RUN(a_probe_through_a_missing_agent_says_it_cannot_execute_it);
	RUN(cgroup_run_group_has_cpuset_limit_and_its_process);
	RUN(a_rank_joins_its_nodes_group_through_the_helper_only_on_a_listed_node);
	tmp_root_remove();
	return CHECK_EXIT();
}
