# 61-gpucalib.sh - the GPU phase of the calibration through a mount: a pool
# whose node has GPUs is measured at mount (dlh-calib --phase gpu, here over
# the CUDA emulation: build/dlh-calib-gpuemu), the figures are cached and
# shown in pool/calibration, refreshed by recalibrate, and the estimate of a
# device = gpu spec rests on them

FMNIST=${DLH_FMNIST:-/usr/share/datasets/fashion-mnist}

# need_emu: skips without the emulated programs (GPU=1 builds, where nvcc is)
need_emu() {
	[ -x "$DLH_BIN/dlh-calib-gpuemu" ] || skip "no $DLH_BIN/dlh-calib-gpuemu (built with GPU=1)"
	[ -x "$DLH_BIN/dlh-train-gpuemu" ] || skip "no $DLH_BIN/dlh-train-gpuemu (built with GPU=1)"
	[ -e "$FMNIST/train-images-idx3-ubyte.gz" ] || skip "no Fashion-MNIST in $FMNIST"
}

# gpu_pool N: this machine as a node with N GPUs of type H100
gpu_pool() {
	printf '[type H100]\nflops = 58.5T\nmemory = 80G\nbandwidth = 3.35T\nwatts_idle = 70\nwatts_busy = 700\ngpu = true\n'
	printf '[node here]\nhost = %s\ncpus = 2\ngpus = H100:%s\n' "$(hostname)" "$1"
}

# gpu_mount N: mounts over the emulated trainer and calibration with gpu_pool N
# in a fresh state dir (the suite's CPU calibration copied in). NCCL_DEBUG=WARN,
# as bench/gpu-env sets it: NCCL (and the emulation) then print a version line
# to stdout, which must not reach dlh-calib's figures (an H200 found it there)
gpu_mount() {
	local state; state=$(mktemp -d /tmp/dlh-state.XXXXXX)
	gpu_pool "$1" > "$state/pool.ini"
	NCCL_DEBUG=WARN DLH_OPTS="-o pool=$state/pool.ini -o trainer=$DLH_BIN/dlh-train-gpuemu -o calib=$DLH_BIN/dlh-calib-gpuemu" \
		dlh_mount "$state"
}

# remount: the same state dir again (after dlh_umount)
remount() {
	NCCL_DEBUG=WARN DLH_OPTS="-o pool=$STATE/pool.ini -o trainer=$DLH_BIN/dlh-train-gpuemu -o calib=$DLH_BIN/dlh-calib-gpuemu" \
		dlh_mount "$STATE"
}

# gpu_spec NAME: a dry run of a small MLP on one GPU
gpu_spec() {
	printf '[job]\nname = %s\ndry_run = true\n[data]\n' "$1"
	printf 'train = %s/train-images-idx3-ubyte.gz\ntrain_labels = %s/train-labels-idx1-ubyte.gz\n' "$FMNIST" "$FMNIST"
	printf 'test = %s/t10k-images-idx3-ubyte.gz\ntest_labels = %s/t10k-labels-idx1-ubyte.gz\n' "$FMNIST" "$FMNIST"
	printf 'train_limit = 8000\ntest_limit = 2000\n[model]\nlayers = 256, 128\n'
	printf '[train]\nepochs = 2\nbatch_size = 64\nlr = 0.01\n[resources]\ndevice = gpu\nranks = 1\n'
}

# gpu_measured: pool/calibration holds the H100's GPU figures
gpu_measured() { grep -q '^H100\.kernel_s=' "$MNT/pool/calibration"; }

# est ID KEY: a value of the job's estimate
est() { sed -n "s/^$2=//p" "$MNT/jobs/$1/estimate"; }

# submit ID: submits gpu_spec as job ID, a dry run: planned at once
submit() {
	gpu_spec "g$1" > "$STATE/g$1.ini"
	cp "$STATE/g$1.ini" "$MNT/jobs/new" || die "submit failed: $(tail -3 "$MNT/jobs/errors")"
	expect_eq "$(cat "$MNT/jobs/$1/status")" planned "status of a dry run"
}

test_mount_measures_the_nodes_gpus_and_the_estimate_uses_them() {
	need_emu
	gpu_mount 2
	wait_for 120 gpu_measured || die "no GPU figures: $(grep -v gemm "$MNT/pool/calibration")"
	local k
	for k in gpu kernel_s node_s direct_s direct_dw_s sync_s h2d_s h2d_bw ctx_s blas_s nccl_s ctx_bytes blas_bytes nccl_bytes \
		 nccl_alpha nccl_beta nccl_gpus gemm_flops mem_bw; do
		grep -q "^H100\.$k=[0-9]" "$STATE/calibration" || die "cache lacks H100.$k: $(grep '^H100' "$STATE/calibration" | grep -v gemm)"
	done
	grep -q '^H100\.gemmnt_128x128=' "$STATE/calibration" && grep -q '^H100\.gemmtn_8x8=' "$STATE/calibration" ||
		die "cache lacks the transposed grids"
	grep -q '^H100\.gemmtf32_512x512=[0-9]' "$STATE/calibration" || die "cache lacks the TF32 grid"
	expect_eq "$(sed -n 's/^H100\.nccl_gpus=//p' "$STATE/calibration")" 2 "GPUs the allreduce was timed on"
	# the CPU's figures are the suite's, kept
	expect_eq "$(grep '^cpu\.gemm_flops=' "$STATE/calibration")" "$(grep '^cpu\.gemm_flops=' "$DLH_CALIBRATION")" "cpu figures"
	expect_eq "$(grep -v '^#' "$MNT/pool/calibration")" "$(grep -v '^#' "$STATE/calibration")" "pool/calibration is the cache"
	submit 1
	local plan=$MNT/jobs/1/plan
	grep -q '^chosen 1 x H100 on 1 node' "$plan" || die "plan: $(cat "$plan")"
	grep -q '^estimate: H100 as calibrated on it: cuBLAS .* GFLOP/s at best, launch .* us, sync .* us, context + cuBLAS + NCCL 640 MiB$' "$plan" ||
		die "plan does not say the figures' source: $(grep '^estimate' "$plan")"
	! grep -q 'is not calibrated' "$plan" || die "plan: $(grep '^estimate' "$plan")"
	expect_eq "$(est 1 source)" "H100 measured on it (GPU)" "estimate source"
	# the emulation's context, cuBLAS and NCCL: 640 MiB, and the buffers
	awk -v m="$(est 1 mem_bytes)" 'BEGIN { exit !(m > 640 * 1048576 && m < 700 * 1048576) }' ||
		die "mem_bytes $(est 1 mem_bytes)"
	local step0; step0=$(est 1 step_s)
	dlh_umount
	# a slower launch in the cache: the next estimate follows it (no
	# measuring again: the cache holds every GPU type of the node)
	sed -i 's/^H100\.kernel_s=.*/H100.kernel_s=0.1/' "$STATE/calibration"
	remount
	gpu_measured || die "not calibrated at mount: $(head -3 "$MNT/pool/calibration")"
	grep -q '^H100\.kernel_s=0\.1$' "$MNT/pool/calibration" || die "cache measured again: $(grep kernel_s "$MNT/pool/calibration")"
	submit 2
	# a step of this MLP is one CUDA graph (gpu.cu), queued while the step
	# before runs (--step-ahead): its host launches the graph and queues
	# two copies, waits for the step before and appends a row; at 100 ms a
	# launch that host work, not the device's, is the step
	local want; want=$(awk -v s="$(sed -n 's/^H100\.sync_s=//p' "$STATE/calibration")" \
		-v m="$(sed -n 's/^metrics_s=//p' "$STATE/calibration")" 'BEGIN { print 3 * 0.1 + s + m }')
	awk -v a="$step0" -v b="$(est 2 step_s)" -v w="$want" 'BEGIN { exit !(a < w / 2 && b > 0.999 * w && b < 1.001 * w) }' ||
		die "step_s $step0 with the measured launch, $(est 2 step_s) at 100 ms a launch (the host's work: $want)"
	echo "measured: step_s $step0 s on the emulation's figures, $(est 2 step_s) s at 100 ms a launch"
	dlh_umount
}

# a GPU rank's memory is its device's: the trainer reports the device memory
# in use (the context, cuBLAS, NCCL and its buffers), not its host memory
# (an H200 run reported 976 MiB of host RSS against 1217 MiB on the device),
# and the estimate made from the calibration is within 15% of it
test_a_gpu_run_reports_its_device_memory_and_the_estimate_matches_it() {
	need_emu
	gpu_mount 1
	wait_for 120 gpu_measured || die "no GPU figures: $(grep -v gemm "$MNT/pool/calibration")"
	gpu_spec g1 | sed -e '/^dry_run/d' -e 's/^train_limit = .*/train_limit = 1024/' \
		-e 's/^test_limit = .*/test_limit = 256/' -e 's/^epochs = .*/epochs = 1/' > "$STATE/g1.ini"
	cp "$STATE/g1.ini" "$MNT/jobs/new" || die "submit failed: $(tail -3 "$MNT/jobs/errors")"
	wait_for 120 job_terminal 1
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "status: $(tail -3 "$MNT/jobs/1/log")"
	wait_for 20 grep -q '^actual_mem_bytes=' "$MNT/jobs/1/estimate"
	local pred act
	pred=$(est 1 mem_bytes); act=$(est 1 actual_mem_bytes)
	# the emulated device's context + cuBLAS + NCCL alone are 640 MiB; the
	# process's host memory is far less (they are only accounted there)
	awk -v a="$act" 'BEGIN { exit !(a > 640 * 1048576) }' ||
		die "actual_mem_bytes $act: not the device's (640 MiB of context, cuBLAS and NCCL)"
	awk -v p="$pred" -v a="$act" 'BEGIN { e = (p - a) / a; exit !(e < 0.15 && e > -0.15) }' ||
		die "estimate $pred bytes against $act on the device"
	echo "measured: device memory estimated $pred, reported $act bytes"
	# the step the estimate prices is the graph the backend captured: its
	# kernels, GEMMs and copies, one by one (the emulation counts each call
	# a node; on a GPU cuBLAS may add its own)
	local nodes; nodes=$(sed -n 's/.* steps as a CUDA graph (1 captured, \([0-9]*\) nodes).*/\1/p' "$MNT/jobs/1/log")
	[ -n "$nodes" ] || die "no graph in the log: $(grep 'GPU time' "$MNT/jobs/1/log")"
	expect_eq "$(est 1 step_nodes)" "$nodes" "the MLP's graph nodes, estimated and captured"
	# and a CNN with a pool, dropout, Adam and BF16 (its casts): the same
	{
		gpu_spec g2 | sed -e '/^dry_run/d' -e 's/^train_limit = .*/train_limit = 512/' \
			-e 's/^test_limit = .*/test_limit = 128/' -e 's/^epochs = .*/epochs = 1/' \
			-e '/^layers = /d' -e 's/^lr = .*/lr = 0.001/'
		printf '[model]\ntype = cnn\nconv = 4:3\npool = 2\ndense = 16\ndropout = 0.25\n'
		printf '[train]\noptimizer = adam\nprecision = bf16\n'
	} > "$STATE/g2.ini"
	cp "$STATE/g2.ini" "$MNT/jobs/new" || die "submit failed: $(tail -3 "$MNT/jobs/errors")"
	wait_for 120 job_terminal 2
	expect_eq "$(cat "$MNT/jobs/2/status")" succeeded "status: $(tail -3 "$MNT/jobs/2/log")"
	nodes=$(sed -n 's/.* steps as a CUDA graph (1 captured, \([0-9]*\) nodes).*/\1/p' "$MNT/jobs/2/log")
	expect_eq "$(est 2 step_nodes)" "$nodes" "the CNN's graph nodes, estimated and captured"
	echo "measured: graph nodes: MLP $(est 1 step_nodes), CNN (bf16, dropout) $nodes, as estimated"
	# its buffers (BF16 copies of the weights and im2col matrices among them)
	# beside the 640 MiB of context, cuBLAS and NCCL, within 15%
	wait_for 20 grep -q '^actual_mem_bytes=' "$MNT/jobs/2/estimate"
	pred=$(est 2 mem_bytes); act=$(est 2 actual_mem_bytes)
	awk -v p="$pred" -v a="$act" 'BEGIN { b = 640 * 1048576; e = (p - a) / (a - b)
		exit !(a > b && e < 0.15 && e > -0.15) }' ||
		die "the bf16 CNN's buffers: estimate $pred bytes against $act on the device"
	echo "measured: bf16 CNN device memory estimated $pred, reported $act bytes"
	# and an MLP whose last layer's biases lie off a 16-byte line (784-50-10:
	# at float 39750): that layer's bias runs in its own kernel, as estimated
	gpu_spec g3 | sed -e '/^dry_run/d' -e 's/^train_limit = .*/train_limit = 512/' \
		-e 's/^test_limit = .*/test_limit = 128/' -e 's/^epochs = .*/epochs = 1/' \
		-e 's/^layers = .*/layers = 50/' > "$STATE/g3.ini"
	cp "$STATE/g3.ini" "$MNT/jobs/new" || die "submit failed: $(tail -3 "$MNT/jobs/errors")"
	wait_for 120 job_terminal 3
	expect_eq "$(cat "$MNT/jobs/3/status")" succeeded "status: $(tail -3 "$MNT/jobs/3/log")"
	grep -q 'cuBLASLt epilogues (not layer 3: biases not 16-byte aligned)' "$MNT/jobs/3/log" ||
		die "the device line: $(grep 'device gpu' "$MNT/jobs/3/log")"
	nodes=$(sed -n 's/.* steps as a CUDA graph (1 captured, \([0-9]*\) nodes).*/\1/p' "$MNT/jobs/3/log")
	expect_eq "$(est 3 step_nodes)" "$nodes" "the 784-50-10 MLP's graph nodes, estimated and captured"
	dlh_umount
}

# a cache whose GPU figures were measured before dlh-calib timed GEMMs and
# passes as a graph's nodes (no node_s), before its GEMM grid reached the
# convolutions' products, or before it timed the direct conv products (no
# direct_s, or no direct_dw_s), is measured again at mount
test_a_gpu_measured_before_graphs_were_timed_is_measured_again() {
	need_emu
	gpu_mount 1
	wait_for 120 gpu_measured || die "no GPU figures: $(grep -v gemm "$MNT/pool/calibration")"
	dlh_umount
	local key
	for key in node_s direct_s direct_dw_s; do
		grep -q "^H100\.$key=[0-9]" "$STATE/calibration" || die "no $key: $(grep '^H100' "$STATE/calibration" | grep -v gemm)"
		sed -i -e "/^H100\.$key=/d" -e 's/^H100\.kernel_s=.*/H100.kernel_s=9/' "$STATE/calibration"
		remount
		wait_for 120 grep -q "^H100\.$key=[0-9]" "$MNT/pool/calibration" ||
			die "no $key: not measured again: $(grep '^H100' "$MNT/pool/calibration" | grep -v gemm)"
		! grep -q '^H100\.kernel_s=9$' "$STATE/calibration" || die "the old figures stayed (no $key)"
		dlh_umount
	done
	# and one whose GEMM grid stops at 2048 a side (5 dims, as before it
	# reached the convolutions' products): its lines cut to that grid
	grep -q '^H100\.gemm_8x131072=\([0-9.e+-]* \)\{7\}[0-9.e+-]*$' "$STATE/calibration" ||
		die "no 8-dim grid: $(grep '^H100\.gemm_8x' "$STATE/calibration" | head -3)"
	sed -i -E -e '/^H100\.gemm[a-z0-9]*_([0-9]+x)?(8192|32768|131072)(x[0-9]+)?=/d' \
		-e 's/^(H100\.gemm[a-z0-9]*_[0-9]+x[0-9]+=[^ ]+ [^ ]+ [^ ]+ [^ ]+ [^ ]+) .*/\1/' \
		-e 's/^H100\.kernel_s=.*/H100.kernel_s=9/' "$STATE/calibration"
	grep -q '^H100\.gemm_2048x2048=[^ ]* [^ ]* [^ ]* [^ ]* [^ ]*$' "$STATE/calibration" || die "the cut failed"
	remount
	wait_for 120 grep -q '^H100\.gemm_8x131072=' "$MNT/pool/calibration" ||
		die "a 5-dim grid not measured again: $(grep '^H100\.gemm_8x' "$MNT/pool/calibration" | head -3)"
	! grep -q '^H100\.kernel_s=9$' "$STATE/calibration" || die "the old figures stayed (5-dim grid)"
	dlh_umount
}

test_recalibrate_measures_the_gpus_again() {
	need_emu
	gpu_mount 1
	wait_for 120 gpu_measured || die "no GPU figures: $(grep -v gemm "$MNT/pool/calibration")"
	local before; before=$(sed -n 's/^when=//p' "$MNT/pool/calibration")
	sed -i 's/^H100\.kernel_s=.*/H100.kernel_s=9/' "$STATE/calibration"
	echo recalibrate > "$MNT/pool/ctl" || die "recalibrate failed: $(head -3 "$MNT/pool/calibration")"
	local after; after=$(sed -n 's/^when=//p' "$MNT/pool/calibration")
	awk -v a="$before" -v b="$after" 'BEGIN { exit !(b > a) }' || die "when $before -> $after"
	gpu_measured || die "recalibrate lost the GPU: $(grep -v gemm "$MNT/pool/calibration")"
	! grep -q '^H100\.kernel_s=9$' "$STATE/calibration" || die "the GPU was not measured again"
	# one GPU: no allreduce to time
	! grep -q '^H100\.nccl_gpus=' "$STATE/calibration" || die "$(grep nccl "$STATE/calibration")"
	dlh_umount
}

test_a_gpu_that_cannot_be_measured_keeps_its_pool_figures_quietly() {
	need_emu
	gpu_mount 9   # the emulation has 8 devices
	wait_for 120 grep -q '^# not measured: H100: ' "$MNT/pool/calibration" ||
		die "no reason shown: $(grep '^#' "$MNT/pool/calibration")"
	grep -q '9 devices asked for, 8 seen' "$MNT/pool/calibration" || die "$(grep '^#' "$MNT/pool/calibration")"
	! grep -q '^H100\.' "$STATE/calibration" || die "cache: $(grep '^H100' "$STATE/calibration")"
	submit 1
	grep -q '^estimate: H100 is not calibrated (no node with it has measured it' "$MNT/jobs/1/plan" ||
		die "plan: $(grep '^estimate' "$MNT/jobs/1/plan")"
	expect_eq "$(est 1 source)" "H100 pool peak figures (not calibrated)" "estimate source"
	dlh_umount   # and nothing on stderr: the pool's figures stand in
}
