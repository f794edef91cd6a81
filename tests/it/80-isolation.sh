# 80-isolation.sh - each run in its own cgroup: a cpuset of its slots, a memory
# limit that kills it (and only it) when exceeded

submit() { cp "$1" "$MNT/jobs/new" || die "submit $1 failed: $(tail -3 "$MNT/jobs/errors")"; }

# host_cgroups: what the host offers, as this test sees it (not as dlhfs
# does): "v2" with cpuset and memory controllers, "v1" with both
# hierarchies, else "none"
host_cgroups() {
	if [ -f /sys/fs/cgroup/cgroup.controllers ] &&
	   grep -qw cpuset /sys/fs/cgroup/cgroup.controllers && grep -qw memory /sys/fs/cgroup/cgroup.controllers; then
		echo v2
	elif [ -d /sys/fs/cgroup/cpuset ] && [ -d /sys/fs/cgroup/memory ] && [ -w /sys/fs/cgroup/cpuset ]; then
		echo v1
	else
		echo none
	fi
}

# needs_cgroups: skips where the host offers no cgroups; where it does, the
# mount must isolate runs with them (a regression to "none" fails)
needs_cgroups() {
	local how host; how=$(cat "$MNT/pool/nodes/$(hostname)/isolation") host=$(host_cgroups)
	[ "$host" = none ] && skip "no usable cgroups on this host (dlhfs says: $how)"
	case $how in "cgroup $host"*) ;; *) die "the host offers cgroup $host, dlhfs isolates with: $how" ;; esac
}

# cg_dir ID: the cpuset group of the job's current run, from its log
cg_dir() { sed -n 's/.*isolation: cgroup v[12] "\([^"]*\)".*/\1/p' "$MNT/jobs/$1/log" | tail -1; }

last_step() {
	local s; s=$(grep '^train,' "$MNT/jobs/$1/metrics.csv" 2>/dev/null | tail -1 | cut -d, -f2)
	echo "${s:-0}"
}
step_at_least() { [ "$(last_step "$1")" -ge "$2" ]; }

test_ranks_run_in_a_cpuset_of_their_slots() {
	[ "$(nproc)" -ge 2 ] || skip "needs 2 CPUs"
	DLH_OPTS="-o cpus=2" dlh_mount
	needs_cgroups
	printf '[job]\ncommand = /bin/sleep 60\n[resources]\nranks = 1\nmemory = 256M\n' > "$STATE/a.ini"
	submit "$STATE/a.ini"
	submit "$STATE/a.ini"
	local id dir p n
	for id in 1 2; do
		dir=$(cg_dir "$id")
		[ -n "$dir" ] || die "job $id log names no cgroup: $(grep isolation "$MNT/jobs/$id/log")"
		wait_for 5 sh -c "[ \$(wc -l < '$dir/cgroup.procs') -ge 2 ]" || die "job $id: nothing in $dir"
		expect_eq "$(cat "$dir/cpuset.cpus")" $((id - 1)) "cpuset of job $id"
		grep -q '^memory 256M$' "$MNT/jobs/$id/plan" || die "plan: $(head -4 "$MNT/jobs/$id/plan")"
		n=0
		for p in $(cat "$dir/cgroup.procs"); do
			grep -q "^Cpus_allowed_list:.*\b$((id - 1))$" "/proc/$p/status" ||
				die "job $id: pid $p may run on $(grep Cpus_allowed_list "/proc/$p/status")"
			grep -q "memory:.*/dlhfs-$DLH_PID/${dir##*/}$" "/proc/$p/cgroup" ||
				die "job $id: pid $p is not in the job's memory group: $(grep memory "/proc/$p/cgroup")"
			n=$((n + 1))
		done
		[ "$n" -ge 2 ] || die "job $id: $n processes in its group (mpirun and the rank expected)"
	done
	dir=$(cg_dir 1)
	# the daemon's parent groups, one per hierarchy (v1: cpuset, memory, and
	# pids where the host has that hierarchy)
	local parents want=1
	parents=$(find /sys/fs/cgroup -maxdepth 6 -type d -name "dlhfs-$DLH_PID" 2>/dev/null | wc -l)
	[ "$(host_cgroups)" = v1 ] && want=$((2 + $(grep -c ':pids:' /proc/self/cgroup)))
	[ "$parents" -eq "$want" ] ||
		die "the daemon's parent groups ($want expected): $(find /sys/fs/cgroup -maxdepth 6 -type d -name "dlhfs-$DLH_PID")"
	echo cancel > "$MNT/jobs/1/ctl"
	wait_for 10 status_is 1 cancelled || die "job 1: $(cat "$MNT/jobs/1/status")"
	wait_for 5 test ! -d "$dir" || die "$dir left after the run"
	echo cancel > "$MNT/jobs/2/ctl"
	wait_for 10 status_is 2 cancelled || die "job 2: $(cat "$MNT/jobs/2/status")"
	dlh_umount
	local left
	left=$(find /sys/fs/cgroup -maxdepth 6 -type d -name "dlhfs-$DLH_PID" 2>/dev/null)
	[ -z "$left" ] || die "the daemon's cgroups are left after unmount: $left"
}

test_out_of_memory_kills_only_that_job() {
	DLH_OPTS="-o cpus=2" dlh_mount
	needs_cgroups
	# job 1 trains normally (43 MB of RSS; under ASan, whose shadow and
	# quarantine the cgroup counts, 590 MB measured: its limit leaves room);
	# job 2 loads all of Fashion-MNIST (about 190 MB of floats) under a 64 MiB limit
	printf '[job]\nname = fine\n[data]\ntrain_limit = 4000\ntest_limit = 500\n[model]\nlayers = 512, 256\n[train]\nepochs = 2\nbatch_size = 32\n[resources]\nranks = 1\nmemory = 1G\n' > "$STATE/a.ini"
	printf '[job]\nname = hog\n[data]\ntest_limit = 1000\n[train]\nepochs = 1\n[resources]\nranks = 1\nmemory = 64M\n' > "$STATE/b.ini"
	submit "$STATE/a.ini"
	wait_for 30 step_at_least 1 5 || die "job 1 does not train: $(cat "$MNT/jobs/1/progress")"
	submit "$STATE/b.ini"
	wait_for 60 job_terminal 2 || die "job 2 still $(cat "$MNT/jobs/2/status")"
	expect_eq "$(cat "$MNT/jobs/2/status")" failed "job over its memory"
	grep -q '^reason=out of memory (limit 64M)$' "$MNT/jobs/2/result" || die "result: $(cat "$MNT/jobs/2/result")"
	grep -q 'out of memory: the kernel killed' "$MNT/jobs/2/log" || die "log: $(tail -3 "$MNT/jobs/2/log")"
	# the other job and the daemon go on
	grep -q '^cpu total 2 held [01] free' "$MNT/pool/summary" || die "summary: $(cat "$MNT/pool/summary")"
	wait_for 120 job_terminal 1 || die "job 1 still $(cat "$MNT/jobs/1/status")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "the job beside it"
	grep -q 'out of memory' "$MNT/jobs/1/log" && die "job 1 saw an out-of-memory kill"
	dlh_umount
}
