# 69-proof.sh - what a pool's nodes are is found out, not assumed: a node
# that does not share the state directory, or whose copy of a job's data is
# another, is down saying so; an ordinary user's job reaches the nodes with
# that user's own key (its [job] env on every rank), and a user without one
# is told at once (nodes are network namespaces with their own hostname,
# address and sshd: tests/nodes.sh)

source tests/nodes.sh

FMNIST=/usr/share/datasets/fashion-mnist
FMNIST_FILES="train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz"

# data_spec NAME DIR EXTRA: a slice spec reading its data from DIR
data_spec() {
	slice_spec "$1" 1 "$3" | sed "s|^\[data\]|[data]\ntrain = $2/train-images-idx3-ubyte.gz\ntrain_labels = $2/train-labels-idx1-ubyte.gz\ntest = $2/t10k-images-idx3-ubyte.gz\ntest_labels = $2/t10k-labels-idx1-ubyte.gz|"
}

test_a_node_without_the_state_dir_or_with_other_data_is_down() {
	nodes_up 2 dlhn1 dlhn2
	local state data alt f
	state=$(mktemp -d /tmp/dlh-state.XXXXXX)
	data=$(mktemp -d /tmp/dlh-data.XXXXXX)
	alt=$(mktemp -d /tmp/dlh-data.XXXXXX)
	chmod 755 "$data" "$alt"
	for f in $FMNIST_FILES; do cp "$FMNIST/$f" "$data/$f"; cp "$FMNIST/$f" "$alt/$f"; done
	# dlhn2's copy of the training images: the same size, 16 bytes otherwise
	printf 'sixteen bytes!!!' | dd of="$alt/train-images-idx3-ubyte.gz" bs=1 seek=100000 conv=notrunc status=none
	expect_eq "$(stat -c %s "$alt/train-images-idx3-ubyte.gz")" "$(stat -c %s "$data/train-images-idx3-ubyte.gz")" "the copies' sizes"
	node_sshd_start 1 "$state"           # dlhn1: an empty directory at the state dir's path
	node_sshd_start 2 "$data" "$alt"     # dlhn2: its own copy of the data at the same paths
	nodes_pool 2 > "$state/pool.ini"
	DLH_OPTS="-o pool=$state/pool.ini" dlh_mount "$state"
	wait_for 30 nodes_probed dlhn1 dlhn2 || die "still probing: $(cat "$MNT"/pool/nodes/*/state)"
	grep -q '^down: does not share the state directory: it cannot read the file dlhfs wrote there a moment ago' "$MNT/pool/nodes/dlhn1/state" ||
		die "dlhn1: $(cat "$MNT/pool/nodes/dlhn1/state")"
	echo "measured: dlhn1 $(cat "$MNT/pool/nodes/dlhn1/state")"
	grep -q '^up: ' "$MNT/pool/nodes/dlhn2/state" || die "dlhn2: $(cat "$MNT/pool/nodes/dlhn2/state")"
	# a job over 2 nodes: dlhn2 is asked for its data before the run, and its
	# copy is found to differ: it goes down, and the job is not run there
	data_spec two "$data" 'nodes = 2' > "$STATE/two.ini"
	cp "$STATE/two.ini" "$MNT/jobs/new" || die "submit: $(tail -3 "$MNT/jobs/errors")"
	wait_for 30 grep -q '^down: ' "$MNT/pool/nodes/dlhn2/state" || die "dlhn2: $(cat "$MNT/pool/nodes/dlhn2/state"); job: $(cat "$MNT/jobs/1/progress")"
	grep -qF "down: its copy of \"$data/train-images-idx3-ubyte.gz\" differs from this machine's (the same path, other bytes)" \
		"$MNT/pool/nodes/dlhn2/state" || die "dlhn2: $(cat "$MNT/pool/nodes/dlhn2/state")"
	echo "measured: dlhn2 $(cat "$MNT/pool/nodes/dlhn2/state")"
	wait_for 10 grep -q 'waiting' "$MNT/jobs/1/progress" || die "job 1: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/jobs/1/status")" queued "job 1, with one node left"
	[ ! -e "$STATE/jobs/1/logs" ] || [ -z "$(ls "$STATE/jobs/1/logs")" ] || die "job 1 ran: $(ls "$STATE/jobs/1/logs")"
	grep -qx 'nodes total 3 up 1 probing 0 down 2 drained 0 unprobed 0' "$MNT/pool/summary" ||
		die "summary: $(cat "$MNT/pool/summary")"
	echo cancel > "$MNT/jobs/1/ctl"
	wait_for 10 job_terminal 1 || die "job 1 did not end"
	rm -rf "$data" "$alt"
	dlh_umount
}

# A pool of two nodes named by address (names that resolve on every node),
# this machine outside it: user a, whose key the nodes accept, runs PyTorch
# DDP over both with [job] env naming the interface gloo must use; user b,
# without a key, is told at once which node and user
test_a_users_ddp_job_reaches_the_nodes_with_its_key_and_env_and_a_keyless_user_is_told() {
	local py a b state d i
	py=$(torch_python) || skip "no python3 here imports torch (Debian: apt-get install python3-torch)"
	nodes_up 2
	dlh_user a
	dlh_user b
	# logins on the nodes: a shell, and an account sshd does not take for locked
	usermod -s /bin/sh -p "*" "$a" && usermod -s /bin/sh -p "*" "$b" || die "usermod failed"
	node_user_key "$a"
	state=$(mktemp -d /tmp/dlh-state.XXXXXX)
	for i in 1 2; do
		printf '[node dlhn%d]\nhost = %s.%d\ncpus = 2\nagent = /usr/bin/ssh -F %s\n' "$i" "$NODES_NET" $((10 + i)) "$(node_ssh_config)"
	done > "$state/pool.ini"
	DLH_OPTS="-o allow_other -o pool=$state/pool.ini" dlh_mount "$state"
	chmod 711 "$STATE"
	wait_for 30 nodes_probed dlhn1 dlhn2 || die "still probing: $(cat "$MNT"/pool/nodes/*/state)"
	d=$(mktemp -d /tmp/dlh-proof.XXXXXX)
	chmod 755 "$d"
	# the dlhfs library beside it: the script's directory is on its sys.path
	cp "$DLH_ROOT/examples/pytorch-ddp/train.py" "$DLH_ROOT/engine/contract/dlhfs.py" "$d/"
	printf '[job]\ncommand = %s %s/train.py --epochs 1 --batch 64 --lr 0.05 --train-limit 640\nsteps = 10\nenv = GLOO_SOCKET_IFNAME=eth0\n[resources]\nranks = 2\nnodes = 2\n' \
		"$py" "$d" > "$d/ddp.ini"
	chmod 644 "$d"/*
	# b first: no key, so the job fails before anything runs, naming node and user
	local t0=$SECONDS
	as "$b" cp "$d/ddp.ini" "$MNT/jobs/new" || die "$b's submission: $(as "$b" tail -2 "$MNT/jobs/errors")"
	wait_for 20 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/progress")"
	echo "measured: $b's keyless job ended in $((SECONDS - t0)) s: $(as "$b" cat "$MNT/jobs/1/progress")"
	[ $((SECONDS - t0)) -le 5 ] || die "$b's keyless job took $((SECONDS - t0)) s to fail"
	expect_eq "$(cat "$MNT/jobs/1/status")" failed "$b's job"
	grep -q "^reason=user $b cannot reach node dlhn1 through \"/usr/bin/ssh -F $(node_ssh_config)\" (dlhfs can): .*Permission denied" "$MNT/jobs/1/result" ||
		die "result: $(grep reason "$MNT/jobs/1/result")"
	grep -q '^up: ' "$MNT/pool/nodes/dlhn1/state" || die "a user's missing key took dlhn1 down: $(cat "$MNT/pool/nodes/dlhn1/state")"
	# a's job runs on both nodes, as a, each rank with the job's env
	as "$a" cp "$d/ddp.ini" "$MNT/jobs/new" || die "$a's submission: $(as "$a" tail -2 "$MNT/jobs/errors")"
	wait_for 180 job_terminal 2 || die "job 2: $(cat "$MNT/jobs/2/progress")"
	expect_eq "$(cat "$MNT/jobs/2/status")" succeeded "$a's DDP job ($(grep -v '^\[rank' "$MNT/jobs/2/log" | tail -3); $(grep '^\[rank' "$MNT/jobs/2/log" | tail -5))"
	grep -q "^rank 0 host $NODES_NET.11 " "$MNT/jobs/2/plan" && grep -q "^rank 1 host $NODES_NET.12 " "$MNT/jobs/2/plan" ||
		die "plan: $(grep '^rank' "$MNT/jobs/2/plan")"
	grep -q 'its nodes answer' "$MNT/jobs/2/log" || die "log: $(grep -v '^\[rank' "$MNT/jobs/2/log" | head -8)"
	grep -q "^argv .* -x GLOO_SOCKET_IFNAME " "$MNT/jobs/2/plan" || die "plan: $(grep '^argv' "$MNT/jobs/2/plan")"
	grep -q '^train,10,' "$MNT/jobs/2/metrics.csv" || die "metrics: $(tail -2 "$MNT/jobs/2/metrics.csv")"
	rm -rf "$d"
	dlh_umount
}
