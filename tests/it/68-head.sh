# 68-head.sh - dlhfs on a head node that is not in the pool file: every
# rank runs on the node the plan names, none on the head node, and pool/
# says which machine is which (nodes are network namespaces with their own
# hostname, address and sshd: tests/nodes.sh)

source tests/nodes.sh

# rank_host ID R: the host rank R of the job says it runs on
rank_host() { sed -n "s/^\[rank $2\] dlh-train: host \([^ ]*\) runs rank $2 of .*/\1/p" "$MNT/jobs/$1/log" | tail -1; }

test_a_head_node_outside_the_pool_runs_no_rank() {
	nodes_up 2
	local state r h
	state=$(mktemp -d /tmp/dlh-state.XXXXXX)
	nodes_pool 2 | awk '/^\[node here\]/ { skip = 1; next } /^\[/ { skip = 0 } !skip' > "$state/pool.ini"
	grep -q "$(hostname)" "$state/pool.ini" && die "the pool file names this machine: $(cat "$state/pool.ini")"
	DLH_OPTS="-o pool=$state/pool.ini" dlh_mount "$state"
	wait_for 30 nodes_probed dlhn1 dlhn2 || die "still probing: $(cat "$MNT"/pool/nodes/*/state)"
	grep -qx "head $(hostname) outside the pool: runs mpirun, no rank" "$MNT/pool/summary" ||
		die "summary: $(cat "$MNT/pool/summary")"
	grep -qx 'nodes total 2 up 2 probing 0 down 0 drained 0 unprobed 0' "$MNT/pool/summary" ||
		die "summary: $(cat "$MNT/pool/summary")"
	expect_eq "$(ls "$MNT/pool/nodes" | tr '\n' ' ')" "dlhn1 dlhn2 " "pool/nodes"
	for h in dlhn1 dlhn2; do
		grep -q "^remote: ranks started by mpirun on $(hostname) through " "$MNT/pool/nodes/$h/role" ||
			die "$h's role: $(cat "$MNT/pool/nodes/$h/role")"
		# what its probe found: the namespace nodes share this machine's cgroups
		expect_eq "$(cat "$MNT/pool/nodes/$h/isolation")" "$("$DLH_BIN/dlh-probe" | sed -n 's/^isolation=//p')" "$h's isolation"
	done
	# without nodes = N: 2 ranks fit one node, and that node is not this one
	slice_spec two 1 > "$STATE/two.ini"
	cp "$STATE/two.ini" "$MNT/jobs/new" || die "submit: $(tail -3 "$MNT/jobs/errors")"
	wait_for 240 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "job 1 ($(tail -5 "$MNT/jobs/1/log"))"
	grep -q "$(hostname)" "$STATE/jobs/1/hostfile" && die "hostfile names this machine: $(cat "$STATE/jobs/1/hostfile")"
	for r in 0 1; do
		h=$(sed -n "s/^rank $r host \([^ ]*\) .*/\1/p" "$MNT/jobs/1/plan")
		case $h in dlhn[12]) ;; *) die "plan puts rank $r on \"$h\": $(grep '^rank' "$MNT/jobs/1/plan")" ;; esac
		expect_eq "$(rank_host 1 $r)" "$h" "the host rank $r ran on, against the plan"
	done
	# spread over both nodes: each rank where the plan says
	slice_spec spread 1 'nodes = 2' > "$STATE/spread.ini"
	cp "$STATE/spread.ini" "$MNT/jobs/new" || die "submit: $(tail -3 "$MNT/jobs/errors")"
	wait_for 240 job_terminal 2 || die "job 2: $(cat "$MNT/jobs/2/progress")"
	expect_eq "$(cat "$MNT/jobs/2/status")" succeeded "job 2 ($(tail -5 "$MNT/jobs/2/log"))"
	local hosts=
	for r in 0 1; do
		h=$(sed -n "s/^rank $r host \([^ ]*\) .*/\1/p" "$MNT/jobs/2/plan")
		expect_eq "$(rank_host 2 $r)" "$h" "the host rank $r of job 2 ran on, against the plan"
		hosts="$hosts $h"
	done
	expect_eq "$hosts" " dlhn1 dlhn2" "job 2's nodes"
	# the trainer's ranks joined a group on their nodes, where this machine has cgroups
	case $("$DLH_BIN/dlh-probe" | sed -n 's/^isolation=//p') in
	cgroup*)
		for h in dlhn1 dlhn2; do
			grep -q "isolation: cgroup v[12] \".*\" on $h, memory limit " "$MNT/jobs/2/log" ||
				die "$h: $(grep isolation "$MNT/jobs/2/log")"
		done
		grep 'isolation: none on' "$MNT/jobs/2/log" && die "a rank ran unisolated" ;;
	esac
	dlh_umount
}

# rank 0 on another node: MASTER_PORT is a port that node said was free
# (the kernel's choice there, from its ephemeral range), MASTER_ADDR its host
test_rank_0_on_a_node_gets_a_port_free_there() {
	nodes_up 2
	local state lo hi port
	state=$(mktemp -d /tmp/dlh-state.XXXXXX)
	nodes_pool 2 | awk '/^\[node here\]/ { skip = 1; next } /^\[/ { skip = 0 } !skip' > "$state/pool.ini"
	DLH_OPTS="-o pool=$state/pool.ini" dlh_mount "$state"
	wait_for 30 nodes_probed dlhn1 dlhn2 || die "still probing: $(cat "$MNT"/pool/nodes/*/state)"
	printf '[job]\ncommand = /usr/bin/env\n[resources]\nranks = 2\nnodes = 2\n' > "$STATE/e.ini"
	cp "$STATE/e.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 60 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "job 1"
	port=$(sed -n 's/^\[rank 1\] MASTER_PORT=//p' "$MNT/jobs/1/log")
	read -r lo hi < /proc/sys/net/ipv4/ip_local_port_range
	echo "measured: rank 0 on $(sed -n 's/^\[rank 1\] MASTER_ADDR=//p' "$MNT/jobs/1/log"), MASTER_PORT $port (ephemeral $lo-$hi)"
	[ -n "$port" ] && [ "$port" -ge "$lo" ] && [ "$port" -le "$hi" ] || die "MASTER_PORT $port is not a port a node chose"
	expect_eq "$(sed -n 's/^\[rank 0\] MASTER_ADDR=//p' "$MNT/jobs/1/log")" \
		"$(sed -n 's/^rank 0 host \([^ ]*\) .*/\1/p' "$MNT/jobs/1/plan")" "MASTER_ADDR: rank 0's host"
	dlh_umount
}
