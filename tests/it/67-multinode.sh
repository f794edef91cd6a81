# 67-multinode.sh - one job across several nodes: ranks placed on the pool's
# nodes by the planner, launched by mpirun over ssh (the node's agent), the
# gradients summed across them. Nodes are network namespaces with their own
# hostname, address and sshd, sharing this machine's filesystem
# (tests/nodes.sh); only their addresses are contacted.

source tests/nodes.sh

submit() { cp "$1" "$MNT/jobs/new" || die "submit $1 failed: $(tail -3 "$MNT/jobs/errors")"; }

# mount_nodes N: nodes dlhn1..dlhnN up, mounted with this machine and them
# as the pool, every node probed
mount_nodes() {
	nodes_up "$1"
	local state i names=
	state=$(mktemp -d /tmp/dlh-state.XXXXXX)
	nodes_pool "$1" > "$state/pool.ini"
	DLH_OPTS="-o pool=$state/pool.ini" dlh_mount "$state"
	for i in $(seq "$1"); do names="$names dlhn$i"; done
	# shellcheck disable=SC2086
	wait_for 30 nodes_probed $names || die "still probing: $(cat "$MNT"/pool/nodes/*/state)"
	for i in $(seq "$1"); do
		grep -q '^up: ' "$MNT/pool/nodes/dlhn$i/state" ||
			die "dlhn$i: $(cat "$MNT/pool/nodes/dlhn$i/state")"
	done
}

# ended_ok ID: the job ended and succeeded
ended_ok() {
	wait_for 240 job_terminal "$1" || die "job $1 did not end: $(cat "$MNT/jobs/$1/progress")"
	expect_eq "$(cat "$MNT/jobs/$1/status")" succeeded "job $1 ($(tail -5 "$MNT/jobs/$1/log"))"
}

# rank_host ID R: the host rank R of the job says it runs on
rank_host() { sed -n "s/^\[rank $2\] dlh-train: host \([^ ]*\) runs rank $2 of .*/\1/p" "$MNT/jobs/$1/log" | tail -1; }

# A job of 2 ranks on 2 nodes through jobs/new: the plan names each rank's
# node, the hostfile and the argv mpirun gets; each rank runs (and says so)
# on its own host; it learns what the same job learns on one node
test_two_nodes_one_rank_each_train_as_one_node_two_ranks() {
	mount_nodes 2
	slice_spec one 1 'nodes = 1' > "$STATE/one.ini"
	submit "$STATE/one.ini"
	ended_ok 1
	slice_spec two 1 'nodes = 2' > "$STATE/two.ini"
	submit "$STATE/two.ini"
	ended_ok 2
	local plan=$MNT/jobs/2/plan h0 h1
	grep -q "^rank 0 host $(hostname) device cpu[01] batch 32$" "$plan" || die "plan: $(grep '^rank' "$plan")"
	grep -q '^rank 1 host dlhn1 device cpu0 batch 32$' "$plan" || die "plan: $(grep '^rank' "$plan")"
	grep -q "^hostfile $STATE/jobs/2/hostfile$" "$plan" || die "plan: $(grep '^hostfile' "$plan")"
	expect_eq "$(cat "$STATE/jobs/2/hostfile")" "$(printf '%s slots=1\ndlhn1 slots=1' "$(hostname)")" "hostfile"
	grep -q "^argv .*mpirun -np 2 .* --hostfile $STATE/jobs/2/hostfile --map-by slot --mca plm_rsh_agent /usr/bin/ssh -F $(node_ssh_config) " "$plan" ||
		die "argv: $(grep '^argv' "$plan")"
	grep -q "^launching 2 ranks on $(hostname):1,dlhn1:1 " "$MNT/jobs/2/log" ||
		grep -q "launching 2 ranks on $(hostname):1,dlhn1:1 " "$MNT/jobs/2/log" || die "log: $(grep launching "$MNT/jobs/2/log")"
	h0=$(rank_host 2 0)
	h1=$(rank_host 2 1)
	expect_eq "$h0" "$(hostname)" "rank 0's host"
	expect_eq "$h1" dlhn1 "rank 1's host"
	grep -q '^allreduce=shm+leaders$' "$STATE/jobs/2/run.info" || die "run.info: $(cat "$STATE/jobs/2/run.info")"
	# one rank a node: each pinned, though both are given CPU slot 0 of their own node
	grep -q 'each rank r pinned to CPU r of --cpus (2 ranks)' "$MNT/jobs/2/log" ||
		die "not pinned: $(grep -E 'pinned|--cpus' "$MNT/jobs/2/log" | head -3)"
	local a1 a2
	a1=$(sed -n 's/^test_accuracy=//p' "$MNT/jobs/1/result")
	a2=$(sed -n 's/^test_accuracy=//p' "$MNT/jobs/2/result")
	echo "measured: test accuracy 1 node x 2 ranks $a1, 2 nodes x 1 rank $a2"
	awk -v a="$a1" -v b="$a2" 'BEGIN { d = a - b; exit !(a > 0.5 && d < 0.005 && d > -0.005) }' ||
		die "test accuracy 1 node $a1, 2 nodes $a2: not within 0.5%"
	dlh_umount
}

# train_nodes DIR HOSTFILE NP ARGS...: the MLP on a slice, each step's global
# batch of 60 the same rows however it is split (--rebalance that never
# re-splits), run by mpirun over the nodes as dlhfs launches it
train_nodes() {
	local dir=$1 hosts=$2 np=$3 d=/usr/share/datasets/fashion-mnist
	shift 3
	OPENBLAS_NUM_THREADS=1 mpirun --oversubscribe --bind-to none --mca pml ob1 \
		--mca btl self,vader,tcp --hostfile "$hosts" --map-by slot \
		--mca plm_rsh_agent "/usr/bin/ssh -F $(node_ssh_config)" --mca plm_rsh_no_tree_spawn 1 \
		-x OPENBLAS_NUM_THREADS -x ASAN_OPTIONS -x UBSAN_OPTIONS -x LSAN_OPTIONS \
		-np "$np" "$DLH_BIN/dlh-train" --job-dir "$dir" \
		--train-images "$d/train-images-idx3-ubyte.gz" --train-labels "$d/train-labels-idx1-ubyte.gz" \
		--test-images "$d/t10k-images-idx3-ubyte.gz" --test-labels "$d/t10k-labels-idx1-ubyte.gz" \
		--train-limit 3000 --test-limit 500 --layers 64,32 --dropout 0 --epochs 1 --batch 60 \
		--lr 0.05 --momentum 0.9 --checkpoint-every 0 --rebalance 1000000 --bucket-mb 0.005 \
		"$@" >"$dir.out" 2>&1 || die "dlh-train on $np ranks: $(grep -v "^\s*$" "$dir.out" | grep -iv "^---\|^ *Process\|^ *Exit code\|^mpirun\|terminated\|non-zero" | tail -8)"
}

# 3 nodes x 2 ranks: gradients summed in each node's shared memory, then
# bucket by bucket across the nodes by their leaders while backward goes on;
# the update is the one process's on the same global batch, to float rounding
test_three_nodes_two_ranks_each_update_as_one_process() {
	nodes_up 3
	W=$(mktemp -d /tmp/dlh-direct.XXXXXX)
	trap 'rm -rf "$W"; dlh_cleanup' EXIT
	printf 'dlhn1 slots=2\ndlhn2 slots=2\ndlhn3 slots=2\n' > "$W/hosts"
	printf 'dlhn1 slots=1\n' > "$W/one"
	train_nodes "$W/six" "$W/hosts" 6 --rank-batches 10,10,10,10,10,10
	train_nodes "$W/single" "$W/one" 1
	grep -q '^allreduce=shm+leaders$' "$W/six/run.info" || die "run.info: $(cat "$W/six/run.info")"
	grep -q 'gradients summed in each node.s shared memory, then across the 3 nodes by their leaders in [2-9] buckets' "$W/six.out" ||
		die "log: $(grep 'gradients' "$W/six.out")"
	local hosts
	hosts=$(grep -o 'host dlhn[1-3] runs rank [0-5] of 6' "$W/six.out" | awk '{print $2}' | sort | tr '\n' ' ')
	expect_eq "$hosts" "dlhn1 dlhn1 dlhn2 dlhn2 dlhn3 dlhn3 " "the ranks' hosts"
	local diff
	diff=$("$DLH_BIN/dlh-train" --params-diff "$W/six/checkpoints/final.ckpt" "$W/single/checkpoints/final.ckpt") ||
		die "params-diff failed"
	echo "measured: 3 nodes x 2 ranks against 1 process: $diff"
	awk -v t="$diff" 'BEGIN { split(t, f, /[ =]/); d = f[4]; m = f[6]; exit !(m > 0 && d <= 1e-4 * m) }' ||
		die "weights differ beyond float rounding: $diff"
}

# One node lost mid-run (every process of it killed: its sshd, mpirun's
# daemon, its rank) with restart = on-failure: the log names the node, it is
# down and nothing is planned there; the job is planned again on the nodes
# that remain (the same ranks and global batch) and resumes from its newest
# checkpoint; metrics.csv has every step once
test_a_lost_node_fails_the_run_naming_it_and_it_resumes_on_the_others() {
	mount_nodes 3
	echo drain here > "$MNT/pool/ctl" || die "drain here refused"   # the ranks on the nodes
	printf '[job]\nname = k\nrestart = on-failure\n[data]\ntrain_limit = 20000\ntest_limit = 500\n[model]\nlayers = 256,128\n[train]\nepochs = 2\nbatch_size = 60\nlr = 0.05\ncheckpoint_every = 20\n[resources]\nranks = 3\nnodes = 3\n' \
		> "$STATE/k.ini"
	submit "$STATE/k.ini"
	wait_for 60 eval '[ "$(csv_rows 1 train)" -gt 50 ]' || die "no steps: $(tail -5 "$MNT/jobs/1/log")"
	grep -q '^rank 1 host dlhn2 ' "$MNT/jobs/1/plan" || die "plan: $(grep '^rank' "$MNT/jobs/1/plan")"
	node_kill 2
	ended_ok 1
	local log=$MNT/jobs/1/log
	grep -q 'dlhfs: node dlhn2 lost (down: .*Connection refused)' "$log" ||
		die "log: $(grep -v '^\[rank' "$log" | tail -8)"
	grep -q 'queued: restarting (1 of 3) after: node dlhn2 lost' "$log" || die "log: $(grep restarting "$log")"
	grep -q 'launching 3 ranks on dlhn1:2,dlhn3:1 (restart 1)' "$log" ||
		grep -q 'launching 3 ranks on dlhn1:1,dlhn3:2 (restart 1)' "$log" || die "relaunch: $(grep launching "$log")"
	grep -q '^down: ' "$MNT/pool/nodes/dlhn2/state" || die "dlhn2: $(cat "$MNT/pool/nodes/dlhn2/state")"
	grep 'host dlhn2' "$MNT/jobs/1/plan" && die "dlhn2 planned again"
	local start
	start=$(grep -o 'start step [0-9]*' "$log" | tail -1 | awk '{print $3}')
	[ "${start:-0}" -gt 0 ] || die "the second run did not resume from a checkpoint: $(grep 'start step' "$log")"
	echo "measured: resumed at step $start on $(grep -o 'launching 3 ranks on [^ ]*' "$log" | tail -1 | awk '{print $NF}')"
	expect_eq "$(csv_rows 1 train)" 666 "train rows (333 steps x 2 epochs)"
	expect_eq "$(grep '^train,' "$MNT/jobs/1/metrics.csv" | cut -d, -f2 | sort -n | uniq -d | head -3)" "" "steps recorded twice"
	dlh_umount
}

# The data must be on a filesystem every node shares: a node that cannot
# read a job's files (here an empty tmpfs covers their directory in dlhn2's
# own mount namespace) is asked before the run starts, and the job fails
# naming the node, the file and why; a job placed on a node that reads
# them runs
test_a_node_that_cannot_read_the_data_fails_the_job_naming_it() {
	nodes_up 2 dlhn2
	local state data f d=/usr/share/datasets/fashion-mnist
	state=$(mktemp -d /tmp/dlh-state.XXXXXX)
	data=$state/data
	mkdir "$data"
	for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
		cp "$d/$f" "$data/$f"
	done
	node_sshd_start 2 "$data"
	nodes_pool 2 > "$state/pool.ini"
	DLH_OPTS="-o pool=$state/pool.ini" dlh_mount "$state"
	wait_for 30 nodes_probed dlhn1 dlhn2 || die "still probing: $(cat "$MNT"/pool/nodes/*/state)"
	echo drain here > "$MNT/pool/ctl" || die "drain here refused"
	local at="train = $data/train-images-idx3-ubyte.gz
train_labels = $data/train-labels-idx1-ubyte.gz
test = $data/t10k-images-idx3-ubyte.gz
test_labels = $data/t10k-labels-idx1-ubyte.gz"
	slice_spec both 1 'nodes = 2' | sed "s|^\[data\]|[data]\n$(printf '%s' "$at" | sed 's/$/\\n/' | tr -d '\n')|" > "$STATE/both.ini"
	grep -q "^train = $data/" "$STATE/both.ini" || die "spec: $(cat "$STATE/both.ini")"
	submit "$STATE/both.ini"
	wait_for 60 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/jobs/1/status")" failed "a job placed on dlhn2"
	grep -q "^reason=node dlhn2 cannot read the job's data: \"$data/train-images-idx3-ubyte.gz\": No such file or directory (the data must be on a filesystem every node shares)$" \
		"$MNT/jobs/1/result" 2>/dev/null || grep -q "node dlhn2 cannot read the job's data: \"$data/train-images-idx3-ubyte.gz\": No such file or directory" "$MNT/jobs/1/log" ||
		die "reason: $(grep -v '^\[rank' "$MNT/jobs/1/log" | tail -3)"
	echo "measured: $(grep -o 'node dlhn2 cannot read.*' "$MNT/jobs/1/log" | head -1)"
	# on dlhn1 alone (the node with the most room, first) it runs
	echo drain dlhn2 > "$MNT/pool/ctl" || die "drain dlhn2 refused"
	sed 's/^nodes = 2$/nodes = 1/; s/^name = both$/name = one/' "$STATE/both.ini" > "$STATE/one.ini"
	submit "$STATE/one.ini"
	ended_ok 2
	grep -q 'its nodes read its data' "$MNT/jobs/2/log" || die "log: $(grep -v '^\[rank' "$MNT/jobs/2/log" | head -8)"
	grep -q '^rank 1 host dlhn1 ' "$MNT/jobs/2/plan" || die "plan: $(grep '^rank' "$MNT/jobs/2/plan")"
	dlh_umount
}

# [job] env reaches the ranks on other nodes too (mpirun forwards it by
# name); the pool's [env] likewise, below the job's own
test_job_env_reaches_the_ranks_on_every_node() {
	nodes_up 2
	local state
	state=$(mktemp -d /tmp/dlh-state.XXXXXX)
	{ nodes_pool 2; printf '[env]\nPOOL_DEFAULT = every node\nGLOO_SOCKET_IFNAME = lo\n'; } > "$state/pool.ini"
	DLH_OPTS="-o pool=$state/pool.ini" dlh_mount "$state"
	wait_for 30 nodes_probed dlhn1 dlhn2 || die "still probing: $(cat "$MNT"/pool/nodes/*/state)"
	printf '[job]\ncommand = /usr/bin/env\nenv = GLOO_SOCKET_IFNAME=eth0\n[resources]\nranks = 3\nnodes = 3\n' > "$STATE/e.ini"
	submit "$STATE/e.ini"
	wait_for 60 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/progress"); $(cat "$MNT/pool/summary"); $(head -50 "$MNT"/pool/nodes/*/state)"
	ended_ok 1
	local r hosts=
	for r in 0 1 2; do
		grep -qx "\[rank $r\] GLOO_SOCKET_IFNAME=eth0" "$MNT/jobs/1/log" || die "rank $r: $(grep "\[rank $r\] GLOO" "$MNT/jobs/1/log")"
		grep -qx "\[rank $r\] POOL_DEFAULT=every node" "$MNT/jobs/1/log" || die "rank $r lacks the pool's default"
		# torchrun's node numbers: one rank a node here
		grep -qx "\[rank $r\] NODE_RANK=$r" "$MNT/jobs/1/log" && grep -qx "\[rank $r\] GROUP_RANK=$r" "$MNT/jobs/1/log" ||
			die "rank $r: $(grep -E "\[rank $r\] (NODE|GROUP)_RANK" "$MNT/jobs/1/log")"
		hosts="$hosts $(sed -n "s/^rank $r host \([^ ]*\) .*/\1/p" "$MNT/jobs/1/plan")"
	done
	expect_eq "$hosts" " $(hostname) dlhn1 dlhn2" "the ranks' hosts"
	grep -q -- "-x GLOO_SOCKET_IFNAME " "$MNT/jobs/1/plan" || die "plan's argv: $(grep '^argv' "$MNT/jobs/1/plan")"
	grep -q -- "-x DLH_MASTER_ADDR -x DLH_MASTER_PORT " "$MNT/jobs/1/plan" || die "plan's argv: $(grep '^argv' "$MNT/jobs/1/plan")"
	dlh_umount
}
