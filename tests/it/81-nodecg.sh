# 81-nodecg.sh - the ranks of a run on other nodes are isolated there as here:
# a group on each node with the cpuset of their slots, the memory limit and
# the task limit, made by dlh-probe --hold (started as root through the
# node's agent), removed with whatever is left when the run ends. Nodes are
# network namespaces with their own hostname, address and sshd
# (tests/nodes.sh); they share this machine's cgroup tree.

source tests/nodes.sh

# show_script DIR: DIR/show.sh prints this rank's host, then for its
# memory and pids groups (v1 hierarchies, or v2's one) the group and its
# limit: "memory PATH BYTES", "pids PATH MAX"
show_script() {
	cat > "$1/show.sh" <<'SH'
echo "host $(hostname)"
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
	g=$(sed -n 's/^0:://p' /proc/self/cgroup)
	echo "memory $g $(cat "/sys/fs/cgroup$g/memory.max")"
	echo "pids $g $(cat "/sys/fs/cgroup$g/pids.max")"
else
	g=$(sed -n 's/^[0-9]*:memory://p' /proc/self/cgroup)
	echo "memory $g $(cat "/sys/fs/cgroup/memory$g/memory.limit_in_bytes")"
	g=$(sed -n 's/^[0-9]*:pids://p' /proc/self/cgroup)
	echo "pids $g $(cat "/sys/fs/cgroup/pids$g/pids.max")"
fi
SH
	chmod 644 "$1/show.sh"
}

# mount_node [OPTS]: dlhn1 up, mounted with this machine and it as the pool
mount_node() {
	nodes_up 1
	local state
	state=$(mktemp -d /tmp/dlh-state.XXXXXX)
	nodes_pool 1 > "$state/pool.ini"
	DLH_OPTS="-o allow_other -o pool=$state/pool.ini $*" dlh_mount "$state"
	chmod 711 "$STATE"
	wait_for 30 nodes_probed dlhn1 || die "still probing: $(cat "$MNT"/pool/nodes/*/state)"
	grep -q '^up: ' "$MNT/pool/nodes/dlhn1/state" || die "dlhn1: $(cat "$MNT/pool/nodes/dlhn1/state")"
}

# node_cgroups: skips where this machine offers no cgroups; where it does,
# dlhn1 (which shares them) must say it isolates with them
node_cgroups() {
	local here
	here=$(cat "$MNT/pool/nodes/here/isolation")
	case $here in none*) skip "no usable cgroups on this host (dlhfs says: $here)" ;; esac
	expect_eq "$(cat "$MNT/pool/nodes/dlhn1/isolation")" "$here" "dlhn1's isolation (it shares this machine's cgroups)"
}

# only_sshd: dlhn1's namespace holds nothing but its sshd
only_sshd() { [ "$(ip netns pids dlhn1 | sort)" = "$(cat "$NODES_DIR/sshd1.pid")" ]; }

# A user's job of 2 ranks, one here and one on dlhn1: the rank there runs
# in a group of its own with the spec's memory limit and the task limit of
# one rank; a second job without a memory line gets the mount's default;
# each group is gone when its job has ended, and nothing is left on the node
test_a_rank_on_another_node_runs_in_a_group_with_the_jobs_limits() {
	mount_node
	node_cgroups
	local u d
	dlh_user u
	usermod -s /bin/sh -p "*" "$u" || die "usermod failed"
	node_user_key "$u"
	d=$(mktemp -d /tmp/dlh-ncg.XXXXXX)
	chmod 755 "$d"
	show_script "$d"
	printf '[job]\ncommand = /bin/sh %s/show.sh\n[resources]\nranks = 2\nnodes = 2\nmemory = 96M\n' "$d" > "$d/a.ini"
	grep -v '^memory' "$d/a.ini" > "$d/b.ini"
	chmod 644 "$d"/*.ini
	local pids mem id line group limit
	pids=$(sed -n 's/^pids_per_rank //p' "$MNT/pool/limits")
	mem=$(sed -n 's/^mem_per_rank //p' "$MNT/pool/limits")
	for id in 1 2; do
		as "$u" cp "$d/$([ $id = 1 ] && echo a || echo b).ini" "$MNT/jobs/new" || die "submit: $(as "$u" tail -2 "$MNT/jobs/errors")"
		wait_for 60 job_terminal $id || die "job $id: $(cat "$MNT/jobs/$id/progress")"
		expect_eq "$(cat "$MNT/jobs/$id/status")" succeeded "job $id ($(grep -v '^\[rank 0' "$MNT/jobs/$id/log" | tail -6))"
		grep -qx '\[rank 1\] host dlhn1' "$MNT/jobs/$id/log" || die "rank 1's host: $(grep '\[rank 1\]' "$MNT/jobs/$id/log")"
		grep -q "isolation: cgroup v[12] \".*\" on dlhn1, memory limit $([ $id = 1 ] && echo 96M || echo "$mem (the mount's mem_per_rank)"), task limit $((2 * pids))$" "$MNT/jobs/$id/log" ||
			die "job $id's log: $(grep isolation "$MNT/jobs/$id/log")"
		line=$(sed -n 's/^\[rank 1\] memory //p' "$MNT/jobs/$id/log")
		group=${line% *}
		limit=${line##* }
		case $group in */dlhfs-*-"$DLH_PID"-$id-1) ;; *) die "job $id: rank 1's memory group is $group" ;; esac
		[ $id = 2 ] || expect_eq "$limit" $((96 * 1024 * 1024)) "job 1's memory limit on dlhn1"
		# the mount's default for one rank, as rank 0's group here has it
		[ $id = 1 ] || expect_eq "$limit" "$(sed -n 's/^\[rank 0\] memory .* //p' "$MNT/jobs/$id/log")" "job 2's memory limit on dlhn1 (the mount's default)"
		expect_eq "$(sed -n 's/^\[rank 1\] pids .* //p' "$MNT/jobs/$id/log")" $((2 * pids)) "job $id's task limit on dlhn1"
		echo "measured: job $id's rank on dlhn1 in $group, memory $limit bytes, $((2 * pids)) tasks"
		wait_for 10 eval '[ ! -d "/sys/fs/cgroup/memory$group" ] && [ ! -d "/sys/fs/cgroup$group" ]' ||
			die "job $id's group on dlhn1 is left: $group"
		wait_for 10 only_sshd || die "left on dlhn1: $(ip netns pids dlhn1 | xargs -r ps -o pid,user,args -p)"
	done
	rm -rf "$d"
	dlh_umount
}

# A rank that goes over its memory limit on dlhn1 is killed there by the
# kernel; the job fails naming the node and its limit
test_a_rank_over_its_memory_on_another_node_is_killed_naming_the_node() {
	mount_node
	node_cgroups
	local d
	d=$(mktemp -d /tmp/dlh-ncg.XXXXXX)
	chmod 755 "$d"
	# rank 1 (on dlhn1) holds 300 MB in tail's buffer; rank 0 does nothing
	printf '[ "$RANK" = 1 ] || exit 0\nhead -c 300000000 /dev/zero | tail -c 300000000 > /dev/null\n' > "$d/hog.sh"
	printf '[job]\ncommand = /bin/sh %s/hog.sh\n[resources]\nranks = 2\nnodes = 2\nmemory = 64M\n' "$d" > "$d/hog.ini"
	cp "$d/hog.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 60 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/jobs/1/status")" failed "a job over its memory on dlhn1"
	grep -q '^reason=out of memory on dlhn1 (limit 64M)$' "$MNT/jobs/1/result" ||
		die "result: $(grep reason "$MNT/jobs/1/result"); log: $(grep -v '^\[rank 0' "$MNT/jobs/1/log" | tail -6)"
	grep -q 'out of memory: the kernel killed [0-9]* process.* of the run in its cgroup on dlhn1 (limit 64M)' "$MNT/jobs/1/log" ||
		die "log: $(grep -i 'memory' "$MNT/jobs/1/log")"
	echo "measured: $(grep -o 'out of memory: .*' "$MNT/jobs/1/log" | head -1)"
	wait_for 10 only_sshd || die "left on dlhn1: $(ip netns pids dlhn1 | xargs -r ps -o pid,user,args -p)"
	rm -rf "$d"
	dlh_umount
}

# The helper by itself (no mount): a process of another uid than the run's
# owner is refused and told why; the owner's is taken in; with its input
# closed and no "end" (dlhfs died: the run goes on) it keeps the group until
# its last process ends, then removes it and exits
test_the_helper_takes_in_only_the_owners_ranks_and_outlives_the_daemon_until_its_group_empties() {
	[ "$(id -u)" = 0 ] || skip "the helper runs as root"
	case $("$DLH_BIN/dlh-probe" | sed -n 's/^isolation=//p') in
	cgroup*) ;;
	*) skip "no usable cgroups on this host" ;;
	esac
	local u d hp group uid name=dlht-hold-$$ pid
	dlh_user u
	uid=$(id -u "$u")
	d=$(mktemp -d /tmp/dlh-ncg.XXXXXX)
	mkfifo "$d/in"
	"$DLH_BIN/dlh-probe" --hold --name "$name" --uid "$uid" --memory 100000000 --pids 50 --slots 0 < "$d/in" > "$d/out" &
	hp=$!
	exec 7>"$d/in"   # its input: dlhfs's end
	wait_for 5 grep -q '^isolation=cgroup' "$d/out" || die "the helper said: $(cat "$d/out")"
	group=$(sed -n 's/^isolation=cgroup v[12] //p' "$d/out")
	local rank=(env DLH_NODECG="$name" DLH_NODECG_NODES=1 DLH_RANK_NODES=1 OMPI_COMM_WORLD_RANK=0 "$DLH_BIN/dlh-rank")
	"${rank[@]}" /bin/true 2> "$d/root" || die "root's rank did not run: $(cat "$d/root")"
	grep -qx "dlh-rank: isolation: none on $(hostname): uid 0 is not the run's owner (uid $uid)" "$d/root" ||
		die "root's rank: $(cat "$d/root")"
	# (cgroup files say size 0: read, not stat'ed)
	[ -z "$(cat "$group/cgroup.procs")" ] || die "root's process was taken in: $(cat "$group/cgroup.procs")"
	as "$u" "${rank[@]}" /bin/sleep 60 2> "$d/owner" &
	wait_for 5 grep -q . "$group/cgroup.procs" || die "the owner's rank is not in $group: $(cat "$d/owner")"
	pid=$(head -1 "$group/cgroup.procs")
	expect_eq "$(stat -c %U "/proc/$pid")" "$u" "the process in the group"
	exec 7>&-   # dlhfs gone
	kill -0 "$hp" || die "the helper left with a process in its group"
	[ -d "$group" ] || die "the group went with the daemon"
	kill "$pid"
	wait_for 5 eval '! kill -0 "$hp" 2>/dev/null' || die "the helper is still there with its group empty"
	[ ! -d "$group" ] || die "$group is left"
	grep -q '^left=0$' "$d/out" || die "the helper's report: $(cat "$d/out")"
	wait
	rm -rf "$d"
}

# A node slow to start the run's helper (its agent takes 3 s for it) holds
# up nobody: reads of the mount answer at once while the run starts, and
# the rank there waits for its helper and still runs in its group
test_a_node_slow_to_start_its_helper_holds_up_no_reader() {
	nodes_up 1
	local d t0 t1 worst ms state
	d=$(mktemp -d /tmp/dlh-ncg.XXXXXX)
	chmod 755 "$d"
	show_script "$d"
	# the same agent, 3 s slower for the helper only (a node under load)
	printf '#!/bin/sh\ncase "$*" in *--hold*) sleep 3 ;; esac\nexec /usr/bin/ssh -F %s "$@"\n' \
		"$(node_ssh_config)" > "$d/agent"
	chmod 755 "$d/agent"
	state=$(mktemp -d /tmp/dlh-state.XXXXXX)
	nodes_pool 1 | sed "s|^agent = .*|agent = $d/agent|" > "$state/pool.ini"
	DLH_OPTS="-o pool=$state/pool.ini" dlh_mount "$state"
	wait_for 30 nodes_probed dlhn1 || die "still probing: $(cat "$MNT"/pool/nodes/*/state)"
	grep -q '^up: ' "$MNT/pool/nodes/dlhn1/state" || die "dlhn1: $(cat "$MNT/pool/nodes/dlhn1/state")"
	node_cgroups
	printf '[job]\ncommand = /bin/sh %s/show.sh\n[resources]\nranks = 2\nnodes = 2\nmemory = 96M\n' "$d" > "$d/a.ini"
	# another reader, from before the submission until the job has ended
	(
		while ! job_terminal 1; do
			t0=$(date +%s%N)
			cat "$MNT/pool/summary" > /dev/null
			t1=$(date +%s%N)
			echo $(( (t1 - t0) / 1000000 ))
		done > "$d/reads"
	) &
	local reader=$!
	t0=$(date +%s%N)
	cp "$d/a.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	t1=$(date +%s%N)
	wait_for 60 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/progress")"
	wait "$reader"
	worst=$(sort -n "$d/reads" | tail -1)
	ms=$(( (t1 - t0) / 1000000 ))
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "job 1 ($(grep -v '^\[rank 0' "$MNT/jobs/1/log" | tail -6))"
	grep -q 'isolation: cgroup v[12] ".*" on dlhn1, memory limit 96M' "$MNT/jobs/1/log" ||
		die "log: $(grep isolation "$MNT/jobs/1/log")"
	grep -q '^\[rank 1\] memory .*/dlhfs-[^ ]* 100663296$' "$MNT/jobs/1/log" ||
		die "rank 1 not in its group: $(grep '^\[rank 1\]' "$MNT/jobs/1/log")"
	echo "measured: the submission took $ms ms, the slowest of $(wc -l < "$d/reads") reads while the run started $worst ms"
	[ "$ms" -lt 1000 ] || die "the submission took $ms ms while a node's helper started"
	[ "$worst" -lt 1000 ] || die "a read took $worst ms while a node's helper started"
	rm -rf "$d"
	dlh_umount
}
