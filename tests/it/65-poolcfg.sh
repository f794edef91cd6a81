# 65-poolcfg.sh - the pool file (-o pool=FILE): its nodes and types under
# pool/, the local node running jobs beside a remote one, a bad file refused
# before mounting with its line named; the default pool of this machine

submit() { cp "$1" "$MNT/jobs/new" || die "submit $1 failed: $(tail -3 "$MNT/jobs/errors")"; }

# two_node_pool: a GPU node elsewhere and this machine with two cores
two_node_pool() {
	cat <<EOF
; the README's example, trimmed
[type cpu]            ; one core
flops = 90G
memory = 12G
bandwidth = 20G
watts_idle = 3
watts_busy = 12

[type H100]
flops = 67T
memory = 80G
bandwidth = 3.35T
watts_idle = 70
watts_busy = 700
gpu = true

[node gpu01]
host = gpu01.example
cpus = 32
memory = 512G
gpus = H100:8

[node here]
host = $(hostname)
cpus = 2
memory = 8G
EOF
}

# mount_pool FILE-TEXT-FUNCTION: mounts with that pool file in a fresh state
# dir; its remote nodes name no machine, so they are not probed (66-nodes
# probes real ones)
mount_pool() {
	local state; state=$(mktemp -d /tmp/dlh-state.XXXXXX)
	"$1" > "$state/pool.ini"
	DLH_OPTS="-o pool=$state/pool.ini -o probe=off" dlh_mount "$state"
}

test_pool_file_shows_its_nodes_and_types() {
	mount_pool two_node_pool
	expect_eq "$(ls "$MNT/pool" | tr '\n' ' ')" "calibration ctl limits nodes summary types " "ls pool"
	expect_eq "$(ls "$MNT/pool/nodes" | tr '\n' ' ')" "gpu01 here " "ls pool/nodes"
	expect_eq "$(cat "$MNT/pool/types")" "$(printf '%s\n' \
		'cpu cpu flops 90G memory 12G bandwidth 20G watts_idle 3 watts_busy 12' \
		'H100 gpu flops 67T memory 80G bandwidth 3.35T watts_idle 70 watts_busy 700')" "types"
	expect_eq "$(cat "$MNT/pool/summary")" "$(printf '%s\n' 'cpu total 34 held 0 free 34' \
		'H100 total 8 held 0 free 8' 'nodes total 2 up 1 probing 0 down 0 drained 0 unprobed 1' \
		"head $(hostname) node here" 'jobs running 0 queued 0 suspended 0')" "summary"
	local g="$MNT/pool/nodes/gpu01" h="$MNT/pool/nodes/here"
	expect_eq "$(cat "$g/host") $(cat "$g/cpus") $(cat "$g/memory")" "gpu01.example 32 549755813888" "gpu01"
	expect_eq "$(ls "$g/gpus" | tr '\n' ' ')" "0 1 2 3 4 5 6 7 " "gpu01 gpus"
	expect_eq "$(cat "$g/gpus/7/model") $(cat "$g/gpus/7/memory") $(cat "$g/gpus/7/state") $(cat "$g/gpus/7/job")" \
		"H100 85899345920 free -" "gpu01 gpu 7"
	expect_eq "$(sed -n '32,40p' "$g/devices" | tr '\n' ' ')" "cpu31 - gpu0 - gpu1 - gpu2 - gpu3 - gpu4 - gpu5 - gpu6 - gpu7 - " \
		"gpu01 devices"
	expect_eq "$(cat "$g/role")" "remote: ranks started by mpirun on $(hostname) through \"ssh -o BatchMode=yes -o ConnectTimeout=5\"" "gpu01 role"
	expect_eq "$(cat "$h/role") $(cat "$h/host") $(cat "$h/cpus")" "local $(hostname) 2" "here"
	expect_eq "$(ls "$h/gpus")" "" "here has no gpus"
	[ -e "$g/gpus/8" ] && die "gpus/8 exists"
	[ -e "$MNT/pool/nodes/$(hostname)" ] && die "a node by its host name, not its name"
	for f in summary types nodes/gpu01/devices; do
		expect_eq "$(stat -c %s "$MNT/pool/$f")" "$(cat "$MNT/pool/$f" | wc -c)" "size of pool/$f"
	done
	dlh_umount
}

test_jobs_run_on_the_local_node_of_the_pool_file() {
	mount_pool two_node_pool
	printf '[job]\ncommand = /bin/sleep 60\n[resources]\nranks = 2\n' > "$STATE/a.ini"
	submit "$STATE/a.ini"
	wait_for 10 status_is 1 running || die "job 1: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/pool/nodes/here/devices" | tr '\n' ' ')" "cpu0 1 cpu1 1 " "here devices"
	expect_eq "$(cat "$MNT/pool/nodes/here/cpu/1/job")" 1 "here cpu 1"
	expect_eq "$(cat "$MNT/pool/nodes/gpu01/cpu/1/job")" - "gpu01 cpu 1"
	expect_eq "$(cat "$MNT/pool/nodes/gpu01/cpus_used")" 0 "gpu01 cpus_used"
	grep -qx 'cpu total 34 held 2 free 32' "$MNT/pool/summary" || die "summary: $(cat "$MNT/pool/summary")"
	# gpu01 drained: three ranks wait for room (the drained node's is not
	# counted); more than the whole pool has is refused
	echo drain gpu01 > "$MNT/pool/ctl" || die "drain refused"
	printf '[job]\ncommand = /bin/sleep 1\n[resources]\nranks = 3\n' > "$STATE/b.ini"
	submit "$STATE/b.ini"
	expect_eq "$(cat "$MNT/jobs/2/status")" queued "3 ranks while gpu01 is drained"
	grep -q 'waiting for room: 3 ranks' "$MNT/jobs/2/progress" || die "progress: $(cat "$MNT/jobs/2/progress")"
	printf '[job]\ncommand = /bin/sleep 1\n[resources]\nranks = 35\n' > "$STATE/c.ini"
	expect_errno "Invalid argument" cp "$STATE/c.ini" "$MNT/jobs/new"
	grep -q '35 ranks need 35 cpu slots, the pool has 34' "$MNT/jobs/errors" || die "errors: $(cat "$MNT/jobs/errors")"
	echo cancel > "$MNT/jobs/2/ctl"
	echo cancel > "$MNT/jobs/1/ctl"
	wait_for 10 status_is 1 cancelled || die "job 1: $(cat "$MNT/jobs/1/status")"
	dlh_umount
}

test_bad_pool_file_refuses_to_mount_naming_the_line() {
	local dir; dir=$(mktemp -d /tmp/dlh-poolcfg.XXXXXX)
	trap 'fusermount3 -u "$dir/mnt" 2>/dev/null; rm -rf "$dir"' EXIT
	mkdir "$dir/mnt" "$dir/state"
	printf '[type H100]\ngpu = true\n[node a]\ncpus = 4\ngpus = H10:2\n[nod b]\n' > "$dir/pool.ini"
	local rc=0
	timeout 10 "$DLH_BIN/dlhfs" -f -o "state=$dir/state,pool=$dir/pool.ini" "$dir/mnt" 2> "$dir/err" || rc=$?
	[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || die "dlhfs exited with $rc: $(cat "$dir/err")"
	mountpoint -q "$dir/mnt" && die "mounted with a bad pool file"
	expect_eq "$(cat "$dir/err")" "$(printf '%s\n' \
		"dlhfs: $dir/pool.ini:5: [node a] gpus: unknown device type \"H10\" (did you mean \"H100\"?)" \
		"dlhfs: $dir/pool.ini:6: [nod b]: unknown section (did you mean \"[node b]\"?)")" "stderr"
	# a file that is not there is named too
	rc=0
	timeout 10 "$DLH_BIN/dlhfs" -f -o "state=$dir/state,pool=$dir/none.ini" "$dir/mnt" 2> "$dir/err" || rc=$?
	[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || die "dlhfs exited with $rc: $(cat "$dir/err")"
	expect_eq "$(cat "$dir/err")" "dlhfs: cannot read pool file \"$dir/none.ini\": No such file or directory" "stderr"
}

test_default_pool_is_this_machine() {
	dlh_mount
	local host; host=$(hostname)
	local node="$MNT/pool/nodes/$host" gpus
	expect_eq "$(ls "$MNT/pool/nodes")" "$host" "ls pool/nodes"
	expect_eq "$(cat "$node/role") $(cat "$node/host") $(cat "$node/cpus")" "local $host $(nproc)" "node"
	grep -qx "cpu total $(nproc) held 0 free $(nproc)" "$MNT/pool/summary" || die "summary: $(cat "$MNT/pool/summary")"
	# the built-in cpu type: 2 W idle, 9 W busy, 10 GB/s; memory a core's share
	local share=$(( $(cat "$node/memory") / $(nproc) ))
	head -1 "$MNT/pool/types" | grep -q "^cpu cpu flops [0-9.]*[KMGT]* memory [0-9]*[KMGT]* bandwidth 10G watts_idle 2 watts_busy 9$" ||
		die "types: $(cat "$MNT/pool/types")"
	[ "$share" -gt 0 ] || die "memory share $share"
	gpus=$(ls /dev | grep -c '^nvidia[0-9][0-9]*$')
	[ "$gpus" -gt 0 ] || expect_eq "$(cat "$MNT/pool/types" | wc -l)" 1 "types without a GPU"
	expect_eq "$(ls "$node/gpus" | wc -l)" "$gpus" "gpus (the /dev/nvidiaN files)"
	dlh_umount
}

# calibrated: pool/calibration holds figures (it starts with their date)
calibrated() { head -1 "$MNT/pool/calibration" | grep -q '^date=[0-9-]*T[0-9:]*Z$'; }

test_pool_ctl_recalibrates_and_calibration_shows_the_figures() {
	dlh_mount
	expect_eq "$(ls "$MNT/pool" | tr '\n' ' ')" "calibration ctl limits nodes summary types " "ls pool"
	expect_eq "$(cat "$MNT/pool/ctl")" "$(printf '# write one verb per line:\nrecalibrate\nrefresh\nreload\ndrain NODE\nundrain NODE')" "ctl help"
	expect_errno "Invalid argument" bash -c "echo recalibrat > '$MNT/pool/ctl'"
	expect_errno "Permission denied" bash -c "echo x > '$MNT/pool/calibration'"
	# the first mount measures in the background; the file says so meanwhile
	calibrated || grep -q '^measuring' "$MNT/pool/calibration" || die "calibration: $(cat "$MNT/pool/calibration")"
	wait_for 300 calibrated || die "not calibrated: $(cat "$MNT/pool/calibration")"
	local before; before=$(sed -n 's/^when=//p' "$MNT/pool/calibration")
	# a shell's background job ignores SIGINT, and so does dlhfs started so:
	# it neither stops nor takes itself for stopping (which cancels measurements)
	kill -INT "$DLH_PID"
	echo recalibrate > "$MNT/pool/ctl" || die "recalibrate failed: $(cat "$MNT/pool/calibration")"
	local after; after=$(sed -n 's/^when=//p' "$MNT/pool/calibration")
	awk -v a="$after" -v b="$before" 'BEGIN { exit !(a > b) }' || die "when: $before, then $after"
	# the cache in the state dir, without its comment
	expect_eq "$(cat "$MNT/pool/calibration")" "$(grep -v '^#' "$STATE/calibration")" "the file is the cache"
	expect_eq "$(stat -c %s "$MNT/pool/calibration")" "$(cat "$MNT/pool/calibration" | wc -c)" "size"
	dlh_umount
}

test_calibrate_without_mounting_reads_the_pool_file() {
	local state; state=$(mktemp -d /tmp/dlh-state.XXXXXX)
	printf '[node one]\nhost = %s\ncpus = 1\n' "$(hostname)" > "$state/pool.ini"
	"$DLH_BIN/dlhfs" --calibrate -o "state=$state,pool=$state/pool.ini" > "$state/out" ||
		die "--calibrate failed: $(cat "$state/out")"
	grep -q '^date=' "$state/calibration" || die "no calibration written: $(ls "$state")"
	grep -v "^#" "$state/calibration" | cmp -s "$state/out" - || die "printed text differs from the cache"
	# one core in the pool: no two-rank phase was measured
	grep -q '^shm_ranks=0$' "$state/calibration" || die "$(grep shm_ranks "$state/calibration")"
	printf '[node one]\ncpus = x\n' > "$state/bad.ini"
	if "$DLH_BIN/dlhfs" --calibrate -o "state=$state,pool=$state/bad.ini" 2> "$state/err"; then
		die "a bad pool file was accepted"
	fi
	grep -q 'bad.ini:2: \[node one\] cpus: ' "$state/err" || die "stderr: $(cat "$state/err")"
	rm -rf "$state"
}

# mixed_gpu_pool: this machine as the pool file sees it, with GPUs of two
# types (only ever dry runs on it here: the machine has none)
mixed_gpu_pool() {
	cat <<EOF2
[type A100]
flops = 19.5T
memory = 40G
bandwidth = 1.5T
watts_idle = 50
watts_busy = 400
gpu = true

[type H100]
flops = 58.5T
memory = 80G
bandwidth = 3.35T
watts_idle = 70
watts_busy = 700
gpu = true

[node here]
host = $(hostname)
cpus = 2
gpus = A100:1, H100:1
EOF2
}

# devices of two speeds in one job (a dry run: a launch takes one type): the
# plan mixes the types, each rank's batch follows its device's speed
test_dry_run_mixes_two_gpu_types_with_batches_by_speed() {
	mount_pool mixed_gpu_pool
	printf '[job]\nname = mix\ndry_run = true\n[train]\nepochs = 1\nbatch_size = 256\n[resources]\ndevice = gpu\nranks = 2\n' \
		> "$STATE/m.ini"
	submit "$STATE/m.ini"
	local plan=$MNT/jobs/mix/plan
	expect_eq "$(cat "$MNT/jobs/mix/status")" planned "status of a dry run"
	grep -q '^chosen 1 x A100 + 1 x H100 on 1 node: ' "$plan" || die "plan: $(cat "$plan")"
	# 19.5 : 58.5 TFLOP/s: the A100 (rank 0) takes a quarter of 256
	grep -Eq '^rank 0 host .* batch 64( |$)' "$plan" && grep -Eq '^rank 1 host .* batch 192( |$)' "$plan" ||
		die "batches: $(grep '^rank ' "$plan")"
	grep -q '^batches by device speed: 1 x A100 take 64 each, 1 x H100 192 each' "$plan" ||
		die "plan says why: $(cat "$plan")"
	grep -q -- '--rank-batches 64,192 ' "$plan" || die "argv: $(grep '^argv' "$plan")"
	dlh_umount
}

# pool/ctl drain: a drained node gets no new ranks (dry runs do not plan on
# it, the local node starts nothing), it says so in its state, the drain
# survives a new mount, and undrain reverses it
test_a_drained_node_gets_no_ranks_until_undrained() {
	mount_pool two_node_pool
	expect_eq "$(cat "$MNT/pool/nodes/here/state")" up "state of the local node"
	printf '[job]\nname = g1\ndry_run = true\n[resources]\nranks = 2\n' > "$STATE/g1.ini"
	submit "$STATE/g1.ini"
	# the planner weighs both nodes (chosen or the next best, as the calibration says)
	grep -Eq '^(chosen|candidate) 2 x cpu on 2 nodes \(1\+1\)' "$MNT/jobs/g1/plan" ||
		die "plan: $(grep -E '^(chosen|candidate)' "$MNT/jobs/g1/plan")"
	echo drain gpu01 > "$MNT/pool/ctl" || die "drain refused"
	expect_eq "$(cat "$MNT/pool/nodes/gpu01/state")" \
		"drained: no new ranks go there (echo undrain gpu01 > pool/ctl)" "state of gpu01"
	grep -qx 'H100 total 8 held 0 free 0 drained 8' "$MNT/pool/summary" || die "summary: $(cat "$MNT/pool/summary")"
	sed 's/g1/g2/' "$STATE/g1.ini" > "$STATE/g2.ini"
	submit "$STATE/g2.ini"
	grep -q '^chosen 2 x cpu on 1 node' "$MNT/jobs/g2/plan" || die "plan with gpu01 drained: $(grep chosen "$MNT/jobs/g2/plan")"
	grep -q 'on 2 nodes' "$MNT/jobs/g2/plan" && die "a drained node planned: $(grep nodes "$MNT/jobs/g2/plan")"
	expect_errno "Invalid argument" bash -c "echo drain nosuch > $MNT/pool/ctl"
	# the local node: a job waits while it is drained, and starts once undrained
	echo drain here > "$MNT/pool/ctl" || die "drain here refused"
	printf '[job]\ncommand = /bin/sleep 60\n[resources]\nranks = 1\n' > "$STATE/s.ini"
	submit "$STATE/s.ini"
	local id
	id=$(ls "$MNT/jobs" | grep -E '^[0-9]+$' | sort -n | tail -1)
	expect_eq "$(cat "$MNT/jobs/$id/status")" queued "a job submitted while the local node is drained"
	# a new mount keeps the drains
	dlh_umount
	DLH_OPTS="-o pool=$STATE/pool.ini -o probe=off" dlh_mount "$STATE"
	grep -q '^drained' "$MNT/pool/nodes/gpu01/state" || die "gpu01 after a new mount: $(cat "$MNT/pool/nodes/gpu01/state")"
	expect_eq "$(cat "$MNT/jobs/$id/status")" queued "the job after a new mount"
	echo undrain here > "$MNT/pool/ctl" || die "undrain here refused"
	wait_for 10 status_is "$id" running || die "job $id after undrain: $(cat "$MNT/jobs/$id/status")"
	echo undrain gpu01 > "$MNT/pool/ctl" || die "undrain refused"
	sed 's/g1/g3/' "$STATE/g1.ini" > "$STATE/g3.ini"
	submit "$STATE/g3.ini"
	grep -Eq '^(chosen|candidate) 2 x cpu on 2 nodes \(1\+1\)' "$MNT/jobs/g3/plan" ||
		die "plan after undrain: $(grep -E '^(chosen|candidate)' "$MNT/jobs/g3/plan")"
	echo cancel > "$MNT/jobs/$id/ctl"
	wait_for 10 job_terminal "$id" || die "job $id did not end"
	dlh_umount
}

# four remote nodes of 8 H100 each (none is this machine: a head node outside
# the pool, where mpirun runs and no rank does): a dry run of device = gpu
# plans over every node, and the plan names each rank's true host, GPU and
# CUDA_VISIBLE_DEVICES, the hostfile (no line for this machine) and mpirun's
# argv with the agent
h100_pool() {
	printf '[type H100]\nflops = 67T\nmemory = 80G\nbandwidth = 3.35T\nwatts_idle = 70\nwatts_busy = 700\ngpu = true\n'
	local i
	for i in 1 2 3 4; do
		printf '[node gpu0%d]\nhost = gpu0%d.example\ncpus = 32\nmemory = 512G\ngpus = H100:8\n' "$i" "$i"
	done
}

test_dry_run_plans_gpus_across_four_h100_nodes() {
	mount_pool h100_pool
	grep -qx 'H100 total 32 held 0 free 32' "$MNT/pool/summary" || die "summary: $(cat "$MNT/pool/summary")"
	printf '[job]\nname = big\ndry_run = true\n[data]\ntrain_limit = 60000\n[train]\nepochs = 1\nbatch_size = 4096\n[resources]\ndevice = gpu\nranks = 32\n' \
		> "$STATE/big.ini"
	submit "$STATE/big.ini"
	local plan=$MNT/jobs/big/plan
	expect_eq "$(cat "$MNT/jobs/big/status")" planned "status of the dry run"
	grep -q '^chosen 32 x H100 on 4 nodes (8+8+8+8)' "$plan" || die "plan: $(grep -E '^(chosen|planner)' "$plan")"
	local i
	for i in 1 2 3 4; do
		expect_eq "$(grep -c "^rank [0-9]* host gpu0$i.example device gpu[0-7] batch 128 env CUDA_VISIBLE_DEVICES=[0-7]$" "$plan")" 8 \
			"ranks on gpu0$i"
	done
	grep -q '^rank 13 host gpu02.example device gpu5 batch 128 env CUDA_VISIBLE_DEVICES=5$' "$plan" ||
		die "rank 13: $(grep '^rank 13 ' "$plan")"
	grep -q "^hostfile $STATE/jobs/1/hostfile$" "$plan" || die "plan: $(grep hostfile "$plan")"
	grep -q '^host gpu04.example slots=8$' "$plan" || die "plan: $(grep '^host ' "$plan")"
	expect_eq "$(grep '^host ' "$plan" | tr '\n' ' ')" "host gpu01.example slots=8 host gpu02.example slots=8 host gpu03.example slots=8 host gpu04.example slots=8 " "the hostfile's lines"
	grep -qx "head $(hostname) outside the pool: runs mpirun, no rank" "$MNT/pool/summary" ||
		die "summary: $(cat "$MNT/pool/summary")"
	grep -q -- "--hostfile $STATE/jobs/1/hostfile --map-by slot --mca plm_rsh_agent ssh -o BatchMode=yes -o ConnectTimeout=5 " "$plan" ||
		die "argv: $(grep '^argv' "$plan")"
	grep -q -- '--device gpu' "$plan" || die "argv: $(grep '^argv' "$plan")"
	dlh_umount
}

# ranks = auto on GPUs: the planner estimates every count and spread, the
# GPUs of one node summing over NVLink (NCCL) and the nodes over the
# network; for the CNN example trained 400 epochs it plans more than one GPU,
# none on this machine (outside the pool), and 8 GPUs of one node beat one.
# (A short job lasts seconds and the launch of 7 more ranks, timed on this
# machine, may outweigh what they save: a slow CI machine under ASan measured
# 0.25 s a rank, this one 1.5 s; at 80 epochs, with the step one CUDA graph,
# 8 GPUs saved 8.7 s of steps and were charged 10.4 s more start-up.)
test_ranks_auto_on_h100_nodes_plans_several_gpus_and_eight_beat_one() {
	mount_pool h100_nvlink_pool
	local n
	for n in auto 1 8; do
		sed -e "s/^name = .*/name = cnn$n/" -e '/^\[job\]/a dry_run = true' -e "s/^ranks = .*/ranks = $n\nnodes = 1\ndevice = gpu/" \
			-e 's/^epochs = .*/epochs = 400/' \
			"$DLH_ROOT/examples/fashion-mnist-cnn.ini" > "$STATE/cnn$n.ini"
		[ "$n" = auto ] && sed -i '/^nodes = 1$/d' "$STATE/cnn$n.ini"
		submit "$STATE/cnn$n.ini"
	done
	local chosen; chosen=$(grep '^chosen' "$MNT/jobs/cnnauto/plan")
	echo "measured: ranks = auto: $chosen"
	case $chosen in "chosen 1 x H100"*|"") die "ranks = auto: ${chosen:-nothing chosen}" ;; esac
	grep -q "^rank [0-9]* host $(hostname) " "$MNT/jobs/cnnauto/plan" && die "a rank on this machine: $(grep '^rank' "$MNT/jobs/cnnauto/plan")"
	local one eight
	one=$(sed -n 's/^total_s=//p' "$MNT/jobs/cnn1/estimate")
	eight=$(sed -n 's/^total_s=//p' "$MNT/jobs/cnn8/estimate")
	echo "measured: estimated 1 x H100 ${one} s, 8 x H100 on one node ${eight} s"
	awk -v a="$one" -v b="$eight" 'BEGIN { exit !(b < a) }' ||
		die "8 GPUs ($eight s) not faster than one ($one s): $(grep -E '^(step_s|comm_s|epoch_s|startup_s)=' "$MNT/jobs/cnn8/estimate" | tr '\n' ' ') against $(grep -E '^(step_s|epoch_s|startup_s)=' "$MNT/jobs/cnn1/estimate" | tr '\n' ' ')"
	grep -q '^comm_s=[0-9.e-]*[1-9]' "$MNT/jobs/cnn8/estimate" || die "8 GPUs sum nothing: $(grep comm "$MNT/jobs/cnn8/estimate")"
	dlh_umount
}
h100_nvlink_pool() { h100_pool | sed 's/^gpu = true$/gpu = true\nlink = nvlink/'; }

# GPUs are held per job: two GPU jobs on one node get different GPUs, and
# pool/nodes shows who holds each
two_gpu_pool() {
	printf '[type H100]\nflops = 67T\nmemory = 80G\nbandwidth = 3.35T\nwatts_idle = 70\nwatts_busy = 700\ngpu = true\n'
	printf '[node here]\nhost = %s\ncpus = 2\ngpus = H100:2\n' "$(hostname)"
}

test_two_gpu_jobs_on_one_node_hold_different_gpus() {
	mount_pool two_gpu_pool
	printf '[job]\ncommand = /bin/sleep 60\n[resources]\ndevice = gpu\nranks = 1\n' > "$STATE/g.ini"
	submit "$STATE/g.ini"
	submit "$STATE/g.ini"
	wait_for 10 status_is 2 running || die "job 2: $(cat "$MNT/jobs/2/progress")"
	grep -q '^rank 0 host .* device gpu0 ' "$MNT/jobs/1/plan" || die "job 1: $(grep '^rank' "$MNT/jobs/1/plan")"
	grep -q '^rank 0 host .* device gpu1 ' "$MNT/jobs/2/plan" || die "job 2: $(grep '^rank' "$MNT/jobs/2/plan")"
	expect_eq "$(grep '^gpu' "$MNT/pool/nodes/here/devices" | tr '\n' ' ')" "gpu0 1 gpu1 2 " "here's GPUs"
	expect_eq "$(cat "$MNT/pool/nodes/here/gpus/1/job")" 2 "gpu 1's job"
	grep -qx 'H100 total 2 held 2 free 0' "$MNT/pool/summary" || die "summary: $(cat "$MNT/pool/summary")"
	# a third waits for a GPU
	submit "$STATE/g.ini"
	expect_eq "$(cat "$MNT/jobs/3/status")" queued "a third GPU job"
	echo cancel > "$MNT/jobs/1/ctl"
	wait_for 10 status_is 3 running || die "job 3 after job 1 ended: $(cat "$MNT/jobs/3/progress")"
	grep -q '^rank 0 host .* device gpu0 ' "$MNT/jobs/3/plan" || die "job 3: $(grep '^rank' "$MNT/jobs/3/plan")"
	for i in 2 3; do echo cancel > "$MNT/jobs/$i/ctl"; done
	wait_for 10 job_terminal 3 || die "job 3 did not end"
	wait_for 10 job_terminal 2 || die "job 2 did not end"
	# a GPU command's ranks see the GPU the plan gives each (dlh-rank sets it)
	printf '[job]\ncommand = /usr/bin/env\n[resources]\ndevice = gpu\nranks = 1\n' > "$STATE/genv.ini"
	submit "$STATE/genv.ini"
	wait_for 30 job_terminal 4 || die "job 4: $(cat "$MNT/jobs/4/progress")"
	local dev; dev=$(sed -n 's/^rank 0 host .* device gpu\([0-9]\) .*/\1/p' "$MNT/jobs/4/plan")
	grep -qx "\[rank 0\] CUDA_VISIBLE_DEVICES=$dev" "$MNT/jobs/4/log" ||
		die "job 4 (gpu$dev): $(grep -E 'CUDA_VISIBLE|^\[rank' "$MNT/jobs/4/log" | head -5)"
	dlh_umount
}

# The link to a node is timed at mount (a run of two ranks, one there) once
# it answers. A run that hangs there (a stuck launch: up to 60 s before it
# is killed as stuck) does not hold up an unmount: the measurement stops,
# its run killed. The node's agent here is a script: it runs dlh-probe on
# this machine and hangs for anything else; no machine is contacted.
test_an_unmount_stops_a_link_measurement_that_hangs() {
	local state cores
	state=$(mktemp -d /tmp/dlh-state.XXXXXX)
	cat > "$state/agent.sh" <<AGENT
#!/bin/sh
shift   # the host: this machine is the node
case "\$*" in
*dlh-probe*) exec sh -c "\$*" ;;
*) echo \$\$ > "$state/hung"; exec sleep 300 ;;   # mpirun's daemon never calls back
esac
AGENT
	chmod 755 "$state/agent.sh"
	cores=$("$DLH_BIN/dlh-probe" | sed -n 's/^cpus=//p')
	printf '[node here]\nhost = %s\ncpus = %d\n[node far]\nhost = far.example\ncpus = 2\nagent = %s\n' \
		"$(hostname)" "$cores" "$state/agent.sh" > "$state/pool.ini"
	DLH_OPTS="-o pool=$state/pool.ini" dlh_mount "$state"
	wait_for 30 test -s "$state/hung" || die "no link measurement started: $(cat "$MNT/pool/nodes/far/state")"
	expect_eq "$(cat "$MNT/pool/nodes/far/state")" probing "far's state while its link is timed"
	local t0 t1
	t0=$(date +%s%N)
	fusermount3 -u "$MNT" || die "fusermount3 -u $MNT failed"
	wait_for 10 eval '! kill -0 "$DLH_PID" 2>/dev/null' ||
		die "dlhfs still runs 10 s after the unmount"
	t1=$(date +%s%N)
	wait "$DLH_PID" || die "dlhfs exited with status $?"
	[ -s "$DLH_STDERR" ] && die "dlhfs wrote to stderr: $(head -3 "$DLH_STDERR")"
	# killed with the measurement's run (reaped by whoever inherits it)
	wait_for 5 eval '! kill -0 "$(cat "$state/hung")" 2>/dev/null' ||
		die "the hung run's process outlived dlhfs: $(ps -o pid,stat,cmd -p "$(cat "$state/hung")")"
	echo "measured: unmount during a hung link measurement: $(( (t1 - t0) / 1000000 )) ms"
	rmdir "$MNT"
	MNT=
}
