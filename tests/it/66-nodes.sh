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

# Nodes are probed again every probe_every without a refresh: a node whose
# sshd died is shown down within the period, with no job and no refresh
test_a_node_whose_sshd_dies_is_down_within_the_probe_period() {
	nodes_up 1
	local state t0
	state=$(mktemp -d /tmp/dlh-state.XXXXXX)
	nodes_pool 1 > "$state/pool.ini"
	DLH_OPTS="-o pool=$state/pool.ini -o probe_every=3s" dlh_mount "$state"
	wait_for 30 nodes_probed dlhn1 || die "still probing: $(cat "$MNT"/pool/nodes/*/state)"
	grep -q '^up: ' "$MNT/pool/nodes/dlhn1/state" || die "dlhn1: $(cat "$MNT/pool/nodes/dlhn1/state")"
	kill "$(cat "$NODES_DIR/sshd1.pid")" || die "cannot kill dlhn1's sshd"
	t0=$SECONDS
	wait_for 20 grep -q '^down: ' "$MNT/pool/nodes/dlhn1/state" || die "dlhn1 after its sshd died: $(cat "$MNT/pool/nodes/dlhn1/state")"
	echo "measured: dlhn1 down $((SECONDS - t0)) s after its sshd died (probe_every 3s): $(cat "$MNT/pool/nodes/dlhn1/state")"
	[ $((SECONDS - t0)) -le 14 ] || die "found down after $((SECONDS - t0)) s"
	grep -qx 'nodes total 2 up 1 probing 0 down 1 drained 0 unprobed 0' "$MNT/pool/summary" ||
		die "summary: $(cat "$MNT/pool/summary")"
	# a job that needs it says which node is down, and since when
	slice_spec two 1 'nodes = 2' > "$STATE/two.ini"
	cp "$STATE/two.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 10 grep -q 'node dlhn1 down since [0-9][0-9]:[0-9][0-9]:[0-9][0-9]' "$MNT/jobs/1/progress" ||
		die "job 1: $(cat "$MNT/jobs/1/progress")"
	# it comes back: the next round finds it up, and the job runs
	node_sshd_start 1
	wait_for 20 grep -q '^up: ' "$MNT/pool/nodes/dlhn1/state" || die "dlhn1 back: $(cat "$MNT/pool/nodes/dlhn1/state")"
	wait_for 120 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "job 1 once dlhn1 is back"
	dlh_umount
}

# A node's link cut in the middle of a run: the ranks wait in a collective,
# no step is made, and the hang timer fires at its deadline (hang_timeout)
test_a_link_cut_mid_run_is_caught_by_the_hang_timeout() {
	nodes_up 1
	local state t0 took
	state=$(mktemp -d /tmp/dlh-state.XXXXXX)
	nodes_pool 1 > "$state/pool.ini"
	DLH_OPTS="-o pool=$state/pool.ini -o probe_every=0" dlh_mount "$state"
	wait_for 30 nodes_probed dlhn1 || die "still probing: $(cat "$MNT"/pool/nodes/*/state)"
	slice_spec cut 1000 'nodes = 2' | sed '/^\[job\]/a hang_timeout = 0:15' > "$STATE/cut.ini"
	cp "$STATE/cut.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 60 grep -q '^train,[0-9]*[1-9]0,' "$MNT/jobs/1/metrics.csv" || die "job 1 made no steps: $(cat "$MNT/jobs/1/progress")"
	ip link set dlhv1 down || die "cannot cut dlhn1's link"
	t0=$SECONDS
	wait_for 60 grep -q 'hung: no step for' "$MNT/jobs/1/log" || die "no hang found $((SECONDS - t0)) s after the cut: $(cat "$MNT/jobs/1/progress")"
	took=$((SECONDS - t0))
	echo "measured: the hang found $took s after the link was cut (hang_timeout 0:15): $(grep -o 'hung: no step for.*' "$MNT/jobs/1/log" | head -1)"
	[ "$took" -le 25 ] || die "the hang was found $took s after the cut, hang_timeout 15 s"
	wait_for 60 job_terminal 1 || die "job 1 did not end after its hang: $(cat "$MNT/jobs/1/progress")"
	echo "measured: ended $((SECONDS - t0)) s after the cut: $(cat "$MNT/jobs/1/progress")"
	ip link set dlhv1 up
	dlh_umount
}

# The pool changes without a remount: echo reload > pool/ctl reads the file
# again; a node added joins (probed) and a job uses it; a node taken out
# while a job runs there leaves once the job ends; a file with a problem
# changes nothing and says why in jobs/errors
test_reload_adds_a_node_a_job_then_uses_and_a_removed_node_leaves_when_idle() {
	nodes_up 2
	local state
	state=$(mktemp -d /tmp/dlh-state.XXXXXX)
	nodes_pool 1 > "$state/pool.ini"
	DLH_OPTS="-o pool=$state/pool.ini" dlh_mount "$state"
	wait_for 30 nodes_probed dlhn1 || die "still probing: $(cat "$MNT"/pool/nodes/*/state)"
	expect_eq "$(ls "$MNT/pool/nodes" | tr '\n' ' ')" "dlhn1 here " "nodes before the reload"
	# a broken file: refused, nothing changes
	cp "$state/pool.ini" "$state/good.ini"
	printf '[node dlhn2]\ncpus = lots\n' >> "$state/pool.ini"
	expect_errno "Invalid argument" bash -c "echo reload > '$MNT/pool/ctl'"
	tail -1 "$MNT/jobs/errors" | grep -q "pool ctl: \"reload\": $state/pool.ini:[0-9]*: \[node dlhn2\] cpus: " ||
		die "errors: $(tail -2 "$MNT/jobs/errors")"
	expect_eq "$(ls "$MNT/pool/nodes" | tr '\n' ' ')" "dlhn1 here " "nodes after a refused reload"
	# dlhn2 added: it joins, probed, and a job over 3 nodes runs there
	nodes_pool 2 > "$state/pool.ini"
	echo reload > "$MNT/pool/ctl" || die "reload refused: $(tail -1 "$MNT/jobs/errors")"
	grep -q '^up: ' "$MNT/pool/nodes/dlhn2/state" || die "dlhn2 after the reload: $(cat "$MNT/pool/nodes/dlhn2/state")"
	grep -qx 'nodes total 3 up 3 probing 0 down 0 drained 0 unprobed 0' "$MNT/pool/summary" ||
		die "summary: $(cat "$MNT/pool/summary"); states: $(grep . "$MNT"/pool/nodes/*/state)"
	slice_spec three 1 'nodes = 3' | sed 's/^ranks = 2$/ranks = 3/' > "$STATE/three.ini"
	cp "$STATE/three.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 120 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "job 1 ($(tail -3 "$MNT/jobs/1/log"))"
	grep -q '^rank 2 host dlhn2 ' "$MNT/jobs/1/plan" || die "plan: $(grep '^rank' "$MNT/jobs/1/plan")"
	# dlhn2 taken out while a job runs there: leaving, then gone once it ends
	printf '[job]\ncommand = /bin/sleep 300\n[resources]\nranks = 3\nnodes = 3\n' > "$STATE/sleep.ini"
	cp "$STATE/sleep.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 30 status_is 2 running || die "job 2: $(cat "$MNT/jobs/2/progress")"
	nodes_pool 1 > "$state/pool.ini"
	echo reload > "$MNT/pool/ctl" || die "reload refused: $(tail -1 "$MNT/jobs/errors")"
	grep -q '^leaving: no longer in the pool file' "$MNT/pool/nodes/dlhn2/state" ||
		die "dlhn2: $(cat "$MNT/pool/nodes/dlhn2/state")"
	status_is 2 running || die "the reload stopped job 2: $(cat "$MNT/jobs/2/progress")"
	echo cancel > "$MNT/jobs/2/ctl"
	wait_for 30 job_terminal 2 || die "job 2 did not end"
	wait_for 10 test ! -e "$MNT/pool/nodes/dlhn2" || die "dlhn2 stayed: $(cat "$MNT/pool/nodes/dlhn2/state")"
	expect_eq "$(ls "$MNT/pool/nodes" | tr '\n' ' ')" "dlhn1 here " "nodes after dlhn2 left"
	dlh_umount
}

# Nodes reached by different agents (another ssh option here, as another
# port or user would be): one run over both, through dlh-agent, each node
# through its own
test_one_run_over_nodes_with_different_agents() {
	nodes_up 2
	local state
	state=$(mktemp -d /tmp/dlh-state.XXXXXX)
	nodes_pool 2 | sed '/^\[node dlhn2\]/,$ s|^agent = \(.*\)$|agent = \1 -o ServerAliveInterval=7|' > "$state/pool.ini"
	grep -q 'ServerAliveInterval=7' "$state/pool.ini" || die "pool: $(cat "$state/pool.ini")"
	DLH_OPTS="-o pool=$state/pool.ini" dlh_mount "$state"
	wait_for 30 nodes_probed dlhn1 dlhn2 || die "still probing: $(cat "$MNT"/pool/nodes/*/state)"
	printf '[job]\ncommand = /bin/hostname\n[resources]\nranks = 3\nnodes = 3\n' > "$STATE/h.ini"
	cp "$STATE/h.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 60 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "job 1 ($(grep -v '^\[rank' "$MNT/jobs/1/log" | tail -3))"
	local r
	for r in 0 1 2; do
		expect_eq "$(sed -n "s/^\[rank $r\] //p" "$MNT/jobs/1/log")" "$(sed -n "s/^rank $r host \([^ ]*\) .*/\1/p" "$MNT/jobs/1/plan" | sed "s/^$(hostname)$/$(hostname)/")" "rank $r's host"
	done
	grep -q -- "--mca plm_rsh_agent $DLH_BIN/dlh-agent $STATE/jobs/1/agents " "$MNT/jobs/1/plan" ||
		die "argv: $(grep '^argv' "$MNT/jobs/1/plan")"
	grep -qx "dlhn2 /usr/bin/ssh -F $(node_ssh_config) -o ServerAliveInterval=7" "$STATE/jobs/1/agents" ||
		die "agents: $(cat "$STATE/jobs/1/agents")"
	dlh_umount
}
