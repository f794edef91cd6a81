# 66-nodes.sh - the pool's nodes are probed through their agent (ssh): what
# each has, which answer; a node that cannot be reached is down with the
# reason and nothing is planned on it. Nodes are network namespaces with
# their own hostname, address and sshd, made by the test (tests/nodes.sh).

source tests/nodes.sh

test_nodes_are_probed_and_one_that_does_not_answer_is_down() {
	nodes_up 3 dlhn3
	local state cores
	state=$(mktemp -d /tmp/dlh-state.XXXXXX)
	nodes_pool > "$state/pool.ini"
	DLH_OPTS="-o pool=$state/pool.ini" dlh_mount "$state"
	wait_for 30 nodes_probed dlhn1 dlhn2 dlhn3 || die "still probing: $(cat "$MNT"/pool/nodes/*/state)"
	cores=$("$DLH_BIN/dlh-probe" | sed -n 's/^cpus=//p')
	local n
	for n in dlhn1 dlhn2; do
		grep -q "^up: $n answers: $cores cpus, .* memory, gpus none$" "$MNT/pool/nodes/$n/state" ||
			die "$n: $(cat "$MNT/pool/nodes/$n/state")"
		expect_eq "$(cat "$MNT/pool/nodes/$n/cpus")" "$cores" "$n's cores, as its probe says"
		expect_eq "$(cat "$MNT/pool/nodes/$n/cpu_model")" "$(cat "$MNT/pool/nodes/here/cpu_model")" \
			"$n's CPU model, as its probe says (the same machine)"
		[ "$(cat "$MNT/pool/nodes/$n/memory")" -gt 0 ] || die "$n's memory: $(cat "$MNT/pool/nodes/$n/memory")"
	done
	# this machine's own figures where the pool file gives none
	[ "$(cat "$MNT/pool/nodes/here/memory")" -gt 0 ] || die "here's memory: $(cat "$MNT/pool/nodes/here/memory")"
	[ "$(cat "$MNT/pool/nodes/here/cpu_model")" != unknown ] || die "here's CPU model is unknown"
	expect_eq "$(cat "$MNT/pool/nodes/dlhn3/state")" \
		"down: /usr/bin/ssh: ssh: connect to host $NODES_NET.13 port 22: Connection refused" "dlhn3"
	echo "measured: $(cat "$MNT/pool/nodes/dlhn3/state")"
	# the planner's view: dlhn3's 8 cores (the pool file's) are not free, and
	# not held either (no job runs): they are down, as is the node
	grep -qx "cpu total $((3 * cores + 8)) held 0 free $((3 * cores)) down 8" "$MNT/pool/summary" ||
		die "summary: $(cat "$MNT/pool/summary")"
	grep -qx "nodes total 4 up 3 probing 0 down 1 drained 0 unprobed 0" "$MNT/pool/summary" ||
		die "summary: $(cat "$MNT/pool/summary")"
	# dlhn3 comes up: refresh probes again and returns when done
	node_sshd_start 3
	echo refresh > "$MNT/pool/ctl" || die "refresh refused"
	grep -q "^up: dlhn3 answers: $cores cpus" "$MNT/pool/nodes/dlhn3/state" ||
		die "dlhn3 after refresh: $(cat "$MNT/pool/nodes/dlhn3/state")"
	grep -qx "cpu total $((4 * cores)) held 0 free $((4 * cores))" "$MNT/pool/summary" &&
		grep -qx "nodes total 4 up 4 probing 0 down 0 drained 0 unprobed 0" "$MNT/pool/summary" ||
		die "summary after refresh: $(cat "$MNT/pool/summary"); $(cat "$MNT"/pool/nodes/*/state); $(nodes_said)"
	dlh_umount
}
