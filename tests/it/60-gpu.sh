# 60-gpu.sh - device = gpu: real GPU runs through the mount (skipped without an
# NVIDIA GPU or a CUDA build), the refusal without one, and main.c's GPU path
# over the host emulation (dlh-train-gpuemu) against the CPU trainer

FMNIST=${DLH_FMNIST:-/usr/share/datasets/fashion-mnist}

# need_gpu: skips unless this machine has an NVIDIA GPU, dlh-train was built
# with CUDA and FUSE can mount here.
need_gpu() {
	[ -e /dev/nvidia0 ] || skip "no NVIDIA GPU: /dev/nvidia0 does not exist"
	[ -f "$DLH_BIN/dlh-train-cuda.so" ] ||
		skip "no NVIDIA GPU support: $DLH_BIN/dlh-train was built without CUDA (make GPU=1)"
	ldd "$DLH_BIN/dlh-train-cuda.so" | grep -q 'not found' &&
		skip "dlh-train's CUDA libraries are not found: $(ldd "$DLH_BIN/dlh-train-cuda.so" | grep 'not found' | head -2 | tr '\n' ' ')(bench/gpu-env sets LD_LIBRARY_PATH)"
	[ -e /dev/fuse ] || skip "no /dev/fuse: the GPU runs go through a mount"
	return 0
}

# gpu_count: the GPUs the pool sees (the /dev/nvidiaN files)
gpu_count() { ls /dev | grep -c '^nvidia[0-9][0-9]*$'; }

# fm_spec NAME DEVICE EPOCHS MODEL [TRAIN]: a Fashion-MNIST slice spec; MODEL
# and TRAIN are extra lines of [model] and [train]; ranks = $RANKS (1)
fm_spec() {
	printf '[job]\nname = %s\n[data]\n' "$1"
	printf 'train = %s/train-images-idx3-ubyte.gz\ntrain_labels = %s/train-labels-idx1-ubyte.gz\n' "$FMNIST" "$FMNIST"
	printf 'test = %s/t10k-images-idx3-ubyte.gz\ntest_labels = %s/t10k-labels-idx1-ubyte.gz\n' "$FMNIST" "$FMNIST"
	printf 'train_limit = 8000\ntest_limit = 2000\n[model]\n%s\n' "$4"
	printf '[train]\nepochs = %s\nbatch_size = 64\ncheckpoint_every = 50\n%s\n' "$3" "${5:-}"
	printf '[resources]\ndevice = %s\nranks = %s\n' "$2" "${RANKS:-1}"
}

# field ID KEY: a value of the job's result file
field() { sed -n "s/^$2=//p" "$MNT/jobs/$1/result"; }

# run_job SPECFILE ID: submits and waits for success
run_job() {
	cp "$1" "$MNT/jobs/new" || die "submit $1 failed: $(tail -2 "$MNT/jobs/errors")"
	wait_for "${2:-300}" job_terminal "$3" || die "job $3 did not end: $(cat "$MNT/jobs/$3/progress")"
	expect_eq "$(cat "$MNT/jobs/$3/status")" succeeded "job $3 ($(grep dlh-train "$MNT/jobs/$3/log" | tail -3))"
}

test_gpu_mlp_slice_trains_and_matches_the_cpu_run() {
	need_gpu
	# one rank per GPU, two at most (one on a single-GPU machine)
	local n; n=$(gpu_count); [ "$n" -gt 2 ] && n=2
	dlh_mount
	[ "$(ls "$MNT/pool/nodes/$(hostname)/gpus" | wc -l)" -ge "$n" ] || die "pool: $(cat "$MNT/pool/summary")"
	# lr 0.01 (momentum 0.9): at 0.05 the slice's SGD amplifies rounding and
	# two runs that differ in the last bit part after ~75 steps (bench/gpu-drift)
	RANKS=$n fm_spec g gpu 2 'layers = 256, 128, 100' 'lr = 0.01' > "$STATE/g.ini"
	RANKS=$n fm_spec c cpu 2 'layers = 256, 128, 100' 'lr = 0.01' > "$STATE/c.ini"
	run_job "$STATE/g.ini" 300 1
	run_job "$STATE/c.ini" 600 2
	grep -q -- '--device gpu' "$MNT/jobs/1/plan" || die "plan: $(cat "$MNT/jobs/1/plan")"
	grep -q "^rank 0 host .* device gpu0 batch" "$MNT/jobs/1/plan" || die "plan: $(cat "$MNT/jobs/1/plan")"
	grep -q 'device gpu: rank 0 on' "$MNT/jobs/1/log" || die "log: $(grep dlh-train "$MNT/jobs/1/log")"
	local ga gl ca cl
	ga=$(field 1 test_accuracy); gl=$(field 1 test_loss)
	ca=$(field 2 test_accuracy); cl=$(field 2 test_loss)
	echo "measured: gpu: test accuracy $ga loss $gl $(field 1 samples_per_s) samples/s; cpu: $ca $cl $(field 2 samples_per_s) samples/s"
	awk -v a="$ga" 'BEGIN { exit !(a > 0.7) }' || die "gpu test accuracy $ga"
	awk -v a="$ca" 'BEGIN { exit !(a > 0.7) }' || die "cpu test accuracy $ca"
	# same seed, same weights, same batches: only float rounding differs (on
	# an H100 the two runs printed the same 6 digits at every step of 250)
	local worst
	worst=$(awk -F, 'FNR == 1 { f++ } $1 == "train" { l[f, $2] = $5; if ($2 > n) n = $2 }
		END { w = -1; for (s = 1; s <= n; s++) { if (!((1, s) in l) || !((2, s) in l)) { print "missing step " s; exit }
			d = (l[1, s] - l[2, s]) / l[2, s]; if (d < 0) d = -d; if (d > w) w = d }
		printf "%.3g over %d steps\n", w, n }' "$MNT/jobs/1/metrics.csv" "$MNT/jobs/2/metrics.csv")
	echo "measured: train loss: largest relative difference gpu/cpu $worst"
	awk -v w="${worst%% *}" -v n="${worst##* over }" 'BEGIN { exit !(w ~ /^[0-9.e+-]+$/ && w < 1e-4 && n + 0 >= 250) }' ||
		die "gpu and cpu train losses apart: $worst"
	awk -v a="$ga" -v b="$ca" 'BEGIN { d = a - b; exit !(d < 0.005 && d > -0.005) }' ||
		die "gpu accuracy $ga vs cpu $ca"
	dlh_umount
}

test_gpu_cnn_slice_trains_with_dropout_and_adam() {
	need_gpu
	local n; n=$(gpu_count); [ "$n" -gt 2 ] && n=2
	dlh_mount
	RANKS=$n fm_spec cnn gpu 2 "$(printf 'type = cnn\nconv = 32:5, 64:5\ndense = 256\ndropout = 0.4')" \
		"$(printf 'optimizer = adam\nlr = 0.001')" > "$STATE/g.ini"
	run_job "$STATE/g.ini" 300 1
	local acc; acc=$(field 1 test_accuracy)
	echo "measured: gpu cnn: test accuracy $acc, $(field 1 samples_per_s) samples/s"
	awk -v a="$acc" 'BEGIN { exit !(a > 0.75) }' || die "cnn test accuracy $acc"
	[ -f "$STATE/jobs/1/checkpoints/final.ckpt" ] || die "no final checkpoint"
	dlh_umount
}

test_gpu_device_refused_where_the_pool_has_none() {
	[ -e /dev/nvidia0 ] && skip "this machine has an NVIDIA GPU (the refusal needs none)"
	dlh_mount
	expect_eq "$(ls "$MNT/pool/nodes/$(hostname)/gpus" | wc -l)" 0 "gpus in pool/nodes"
	expect_eq "$(grep -v '^cpu \|^jobs \|^nodes \|^head ' "$MNT/pool/summary")" "" "device types in pool/summary"
	fm_spec g gpu 1 'layers = 32' > "$STATE/g.ini"
	expect_errno "Invalid argument" cp "$STATE/g.ini" "$MNT/jobs/new"
	grep -q 'device: "gpu" asked for, the pool has no GPU' "$MNT/jobs/errors" ||
		die "errors: $(tail -2 "$MNT/jobs/errors")"
	dlh_umount
}

# train_rows DIR: a run's training rows without their times and speeds
train_rows() { awk -F, '$1 == "train" { print $2, $3, $5, $6, $7 }' "$1/metrics.csv"; }

# the GPU path with each step queued before the one before it is waited for
# (--step-ahead on, the default) and without: one rank, where the emulated
# stream runs its work only when the host waits (a step whose values or
# sums the next one overwrote would show), every step's loss, the
# checkpoints at steps 10 and 30 and at the epoch ends, and the final
# weights, bit for bit; then a checkpoint asked for while a step is queued
# ahead holds the weights of the step it is named for: the run resumed
# from it ends as the run never stopped
test_gpu_steps_queued_ahead_on_the_host_emulation_match_steps_waited_for() {
	[ -x "$DLH_BIN/dlh-train-gpuemu" ] || skip "no $DLH_BIN/dlh-train-gpuemu (built with GPU=1)"
	local d c n; d=$(mktemp -d /tmp/dlh-gpuahead.XXXXXX)
	STATE=$d; trap dlh_cleanup EXIT
	# shellcheck disable=SC2046
	mpirun -np 1 --bind-to none "$DLH_BIN/dlh-train-gpuemu" $(emu_args "$d/a") --device gpu \
		> "$d/a.out" 2>&1 || die "--step-ahead on failed: $(tail -5 "$d/a.out")"
	# shellcheck disable=SC2046
	mpirun -np 1 --bind-to none "$DLH_BIN/dlh-train-gpuemu" $(emu_args "$d/w") --device gpu \
		--step-ahead off > "$d/w.out" 2>&1 || die "--step-ahead off failed: $(tail -5 "$d/w.out")"
	grep -q 'device gpu: rank 0 on .*, no allreduce (one rank); .*; each step queued before the last one is waited for$' "$d/a.out" ||
		die "log: $(grep 'device gpu' "$d/a.out")"
	grep -q 'device gpu: .*; no step queued ahead (--step-ahead off)$' "$d/w.out" ||
		die "log: $(grep 'device gpu' "$d/w.out")"
	expect_eq "$(train_rows "$d/a" | wc -l)" 40 "train rows"
	[ "$(train_rows "$d/a")" = "$(train_rows "$d/w")" ] ||
		die "the steps' losses differ: $(diff <(train_rows "$d/a") <(train_rows "$d/w") | head -4)"
	for c in step-00000010.ckpt step-00000020.ckpt step-00000030.ckpt final.ckpt; do
		"$DLH_BIN/dlh-train" --same-params "$d/a/checkpoints/$c" "$d/w/checkpoints/$c" ||
			die "$c: other weights with a step queued ahead: $("$DLH_BIN/dlh-train" --params-diff "$d/a/checkpoints/$c" "$d/w/checkpoints/$c")"
	done
	# a checkpoint on request (SIGUSR1, as the ctl verb sends it), no
	# others: 4 epochs of 20 steps, asked for once rows come
	# shellcheck disable=SC2046
	mpirun -np 1 --bind-to none "$DLH_BIN/dlh-train-gpuemu" $(emu_args "$d/r") --device gpu \
		--checkpoint-every 0 --epochs 4 > "$d/r.out" 2>&1 &
	local pid=$!
	wait_for 60 sh -c "grep -q '^train,' '$d/r/metrics.csv' 2>/dev/null" || die "no rows: $(tail -3 "$d/r.out")"
	pkill -USR1 -f "dlh-train-gpuemu --job-dir $d/r " || die "no rank to signal"
	wait "$pid" || die "the run asked for a checkpoint failed: $(tail -5 "$d/r.out")"
	c=$(sed -n 's/.*checkpoint \(step-[0-9]*\.ckpt\) on request.*/\1/p' "$d/r.out")
	[ -n "$c" ] && [ -f "$d/r/checkpoints/$c" ] || die "no checkpoint on request: $(grep checkpoint "$d/r.out" | tail -3)"
	n=$((10#${c//[^0-9]/}))
	echo "measured: checkpoint on request at step $n of 80"
	[ "$n" -lt 80 ] || die "the request came after the last step: make the run longer"
	rm "$d/r/checkpoints/final.ckpt"
	echo "$c" > "$d/r/checkpoints/latest"
	# shellcheck disable=SC2046
	mpirun -np 1 --bind-to none "$DLH_BIN/dlh-train-gpuemu" $(emu_args "$d/r") --device gpu \
		--checkpoint-every 0 --epochs 4 > "$d/r2.out" 2>&1 || die "resume failed: $(tail -5 "$d/r2.out")"
	grep -q "start step $n" "$d/r2.out" || die "did not resume at step $n: $(head -3 "$d/r2.out")"
	# shellcheck disable=SC2046
	mpirun -np 1 --bind-to none "$DLH_BIN/dlh-train-gpuemu" $(emu_args "$d/s") --device gpu \
		--checkpoint-every 0 --epochs 4 --step-ahead off > "$d/s.out" 2>&1 ||
		die "the uninterrupted run failed: $(tail -5 "$d/s.out")"
	"$DLH_BIN/dlh-train" --same-params "$d/r/checkpoints/final.ckpt" "$d/s/checkpoints/final.ckpt" ||
		die "resumed from $c: other weights than the run never stopped: $("$DLH_BIN/dlh-train" --params-diff "$d/r/checkpoints/final.ckpt" "$d/s/checkpoints/final.ckpt")"
}

# --gpu-profile on: the log ends with the GPU time of each part of a graphed
# step (events between the parts of its graph; on the emulation the CPU's
# time of its kernels), the steps not queued ahead, the weights those of a
# run without it
test_gpu_profile_on_the_host_emulation_logs_each_layers_time() {
	[ -x "$DLH_BIN/dlh-train-gpuemu" ] || skip "no $DLH_BIN/dlh-train-gpuemu (built with GPU=1)"
	local d; d=$(mktemp -d /tmp/dlh-gpuprof.XXXXXX)
	STATE=$d; trap dlh_cleanup EXIT
	# shellcheck disable=SC2046
	mpirun -np 1 --bind-to none "$DLH_BIN/dlh-train-gpuemu" $(emu_args "$d/p") --device gpu \
		--epochs 1 --gpu-profile on > "$d/p.out" 2>&1 || die "--gpu-profile on failed: $(tail -5 "$d/p.out")"
	# shellcheck disable=SC2046
	mpirun -np 1 --bind-to none "$DLH_BIN/dlh-train-gpuemu" $(emu_args "$d/n") --device gpu \
		--epochs 1 > "$d/n.out" 2>&1 || die "the run without it failed: $(tail -5 "$d/n.out")"
	grep -q 'device gpu: .*; no step queued ahead (--gpu-profile on)$' "$d/p.out" ||
		die "log: $(grep 'device gpu' "$d/p.out")"
	# 20 steps: the first launch by launch, 19 graphed and profiled
	grep -q 'GPU step profile (CUDA events between the parts of the step.s graph, mean of 19 steps): [0-9.]* us a step: gather [0-9.]* us, loss [0-9.]* us, allreduce wait [0-9.]* us, update [0-9.]* us$' "$d/p.out" ||
		die "no step profile: $(grep -i profile "$d/p.out" | head -3)"
	# the CNN's 10 layers (conv relu pool conv relu pool dense relu dropout dense): a line each
	expect_eq "$(grep -c 'GPU step profile: layer [0-9]* ' "$d/p.out")" 10 "profile lines of layers"
	grep -q 'GPU step profile: layer 1 conv 1x28x28 -> 8x28x28: forward [1-9][0-9.]* us, backward [1-9][0-9.]* us$' "$d/p.out" ||
		die "the first conv's line: $(grep 'layer 1 ' "$d/p.out")"
	grep -q 'GPU step profile: layer 2 relu .* (fused into layer 1)$' "$d/p.out" ||
		die "the fused ReLU's line: $(grep 'layer 2 ' "$d/p.out")"
	grep -q 'GPU step profile: layer 3 maxpool .* (fused into layer 1)$' "$d/p.out" ||
		die "the fused pool's line: $(grep 'layer 3 ' "$d/p.out")"
	# the graph's nodes by what they run: the conv blocks' fused kernels (the
	# first conv's product computed directly with its ReLU and pool, and its
	# weight gradient from the pool's), no ReLU's
	grep -q 'GPU step graph (profiled: the events are nodes too): [0-9]* x event record, .*1 x k_gather_rows, .*1 x k_conv_direct, .*1 x k_im2col, .*1 x k_conv_pool_fwd, .*1 x k_pool_conv_gather, .*1 x k_conv_pool_dw' "$d/p.out" ||
		die "the graph's census: $(grep 'step graph' "$d/p.out")"
	! grep 'step graph' "$d/p.out" | grep -q k_relu || die "a ReLU kernel in the graph: $(grep 'step graph' "$d/p.out")"
	echo "measured: $(grep -o '[0-9.]* us a step' "$d/p.out") on the emulation"
	"$DLH_BIN/dlh-train" --same-params "$d/p/checkpoints/final.ckpt" "$d/n/checkpoints/final.ckpt" ||
		die "profiled and unprofiled runs ended with other weights"
}

# emu_args DIR: a dlh-train command line on a small CNN with dropout and Adam,
# its gradients in 4 buckets (overlapped allreduce)
emu_args() {
	echo --job-dir "$1" --train-images "$FMNIST/train-images-idx3-ubyte.gz" \
		--train-labels "$FMNIST/train-labels-idx1-ubyte.gz" \
		--test-images "$FMNIST/t10k-images-idx3-ubyte.gz" \
		--test-labels "$FMNIST/t10k-labels-idx1-ubyte.gz" --model cnn --conv 8:5,16:3 \
		--dense 64 --dropout 0.25 --optimizer adam --lr 0.002 --epochs 2 --batch 64 \
		--train-limit 1280 --test-limit 256 --checkpoint-every 10 --bucket-mb 0.05
}

test_gpu_path_on_the_host_emulation_matches_the_cpu_trainer() {
	[ -x "$DLH_BIN/dlh-train-gpuemu" ] || skip "no $DLH_BIN/dlh-train-gpuemu (built with GPU=1)"
	local d; d=$(mktemp -d /tmp/dlh-gpuemu.XXXXXX)
	STATE=$d; trap dlh_cleanup EXIT
	# shellcheck disable=SC2046
	mpirun -np 2 --oversubscribe --bind-to none "$DLH_BIN/dlh-train-gpuemu" $(emu_args "$d/g") --device gpu \
		> "$d/g.out" 2>&1 || die "gpu path failed: $(tail -5 "$d/g.out")"
	# shellcheck disable=SC2046
	mpirun -np 2 --oversubscribe --bind-to none "$DLH_BIN/dlh-train" $(emu_args "$d/c") \
		> "$d/c.out" 2>&1 || die "cpu run failed: $(tail -5 "$d/c.out")"
	grep -q 'device gpu: rank 0 on host emulation' "$d/g.out" || die "log: $(head -5 "$d/g.out")"
	local ga ca gl cl
	ga=$(sed -n 's/^test_accuracy=//p' "$d/g/result"); ca=$(sed -n 's/^test_accuracy=//p' "$d/c/result")
	gl=$(sed -n 's/^test_loss=//p' "$d/g/result"); cl=$(sed -n 's/^test_loss=//p' "$d/c/result")
	echo "measured: emulated gpu: accuracy $ga loss $gl; cpu: accuracy $ca loss $cl"
	expect_eq "$ga" "$ca" "test accuracy"
	awk -v a="$gl" -v b="$cl" 'BEGIN { exit !(a < 1.001 * b && b < 1.001 * a) }' || die "loss $gl vs $cl"
	# resume from a step checkpoint of the GPU path (uploaded after loading):
	# the emulation is deterministic, so the final weights are the same
	cp "$d/g/checkpoints/final.ckpt" "$d/first.ckpt"
	[ -f "$d/g/checkpoints/step-00000030.ckpt" ] || die "checkpoints: $(ls "$d/g/checkpoints")"
	rm "$d/g/checkpoints/final.ckpt"
	echo step-00000030.ckpt > "$d/g/checkpoints/latest"
	# shellcheck disable=SC2046
	mpirun -np 2 --oversubscribe --bind-to none "$DLH_BIN/dlh-train-gpuemu" $(emu_args "$d/g") --device gpu \
		> "$d/g2.out" 2>&1 || die "resumed run failed: $(tail -5 "$d/g2.out")"
	grep -q 'start step 30' "$d/g2.out" || die "did not resume: $(head -3 "$d/g2.out")"
	"$DLH_BIN/dlh-train" --same-params "$d/first.ckpt" "$d/g/checkpoints/final.ckpt" ||
		die "the resumed run ended with other weights"
}

# the GPU path with its steps in a CUDA graph (the default) and without
# (--cuda-graph off), 2 ranks, the bucketed allreduces captured: the same
# weights bit for bit (the emulation replays the captured work, with each
# step's batch, step number and learning rate read from device memory)
test_gpu_cuda_graph_on_the_host_emulation_matches_the_ungraphed_run_bit_for_bit() {
	[ -x "$DLH_BIN/dlh-train-gpuemu" ] || skip "no $DLH_BIN/dlh-train-gpuemu (built with GPU=1)"
	local d; d=$(mktemp -d /tmp/dlh-gpugraph.XXXXXX)
	STATE=$d; trap dlh_cleanup EXIT
	# shellcheck disable=SC2046
	mpirun -np 2 --oversubscribe --bind-to none "$DLH_BIN/dlh-train-gpuemu" $(emu_args "$d/g") --device gpu \
		> "$d/g.out" 2>&1 || die "graph run failed: $(tail -5 "$d/g.out")"
	# shellcheck disable=SC2046
	mpirun -np 2 --oversubscribe --bind-to none "$DLH_BIN/dlh-train-gpuemu" $(emu_args "$d/e") --device gpu \
		--cuda-graph off > "$d/e.out" 2>&1 || die "ungraphed run failed: $(tail -5 "$d/e.out")"
	grep -q 'device gpu: rank 0 on .*; steps in a CUDA graph; training rows on the device; each step queued before the last one is waited for$' "$d/g.out" ||
		die "log: $(grep 'device gpu' "$d/g.out")"
	grep -q 'device gpu: rank 0 on .*; no CUDA graph (--cuda-graph off); training rows on the device; each step' "$d/e.out" ||
		die "log: $(grep 'device gpu' "$d/e.out")"
	# 40 steps: the first one warms up, the second captures, all but the first replay
	grep -q 'GPU time (CUDA events): 1 steps launch by launch: .*; 39 steps as a CUDA graph (1 captured, [1-9][0-9]* nodes)' "$d/g.out" ||
		die "graph counters: $(grep 'GPU time' "$d/g.out")"
	grep -q 'GPU time (CUDA events): 40 steps launch by launch: .*; 0 steps as a CUDA graph (0 captured' "$d/e.out" ||
		die "ungraphed counters: $(grep 'GPU time' "$d/e.out")"
	echo "measured: $(grep -o '[0-9]* steps as a CUDA graph ([^)]*)' "$d/g.out")"
	"$DLH_BIN/dlh-train" --same-params "$d/g/checkpoints/final.ckpt" "$d/e/checkpoints/final.ckpt" ||
		die "graphed and ungraphed runs ended with other weights: $("$DLH_BIN/dlh-train" --params-diff "$d/g/checkpoints/final.ckpt" "$d/e/checkpoints/final.ckpt")"
	expect_eq "$(sed -n 's/^test_loss=//p' "$d/g/result")" "$(sed -n 's/^test_loss=//p' "$d/e/result")" "test loss"
	# the batches copied each step (--device-data off) instead of gathered on
	# the device from its copy of the rows: the same weights, bit for bit
	# shellcheck disable=SC2046
	mpirun -np 2 --oversubscribe --bind-to none "$DLH_BIN/dlh-train-gpuemu" $(emu_args "$d/h") --device gpu \
		--device-data off > "$d/h.out" 2>&1 || die "--device-data off failed: $(tail -5 "$d/h.out")"
	grep -q 'device gpu: rank 0 on .*; steps in a CUDA graph; batches copied each step; each step' "$d/h.out" ||
		die "log: $(grep 'device gpu' "$d/h.out")"
	"$DLH_BIN/dlh-train" --same-params "$d/g/checkpoints/final.ckpt" "$d/h/checkpoints/final.ckpt" ||
		die "rows on the device and batches copied ended with other weights: $("$DLH_BIN/dlh-train" --params-diff "$d/g/checkpoints/final.ckpt" "$d/h/checkpoints/final.ckpt")"
}

# near A B TOL: exits 0 when |A - B| <= TOL * |B|
near() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; if (b < 0) b = -b; exit !(d <= t * b) }'; }

# each --precision of the GPU path (over the host emulation, which rounds as
# the tensor cores do) against the CPU trainer after 40 steps: test loss
# within 2e-2 relative for tf32, 5e-2 for bf16 (BF16 operands carry 8
# significant bits; FP32 master weights keep the updates exact), accuracy
# within 0.02; the emulation measured 4.7e-3 (tf32) and 9e-4 (bf16), and
# accuracy equal or one image of 256 apart. Then the checkpoints cross:
# a bf16 GPU run's step checkpoint (FP32 master weights) resumes on the CPU
# trainer, a CPU run's on a bf16 GPU run, each ending near the CPU run.
test_gpu_precisions_on_the_host_emulation_match_the_cpu_trainer_and_share_checkpoints() {
	[ -x "$DLH_BIN/dlh-train-gpuemu" ] || skip "no $DLH_BIN/dlh-train-gpuemu (built with GPU=1)"
	local d; d=$(mktemp -d /tmp/dlh-gpuprec.XXXXXX)
	STATE=$d; trap dlh_cleanup EXIT
	# shellcheck disable=SC2046
	"$DLH_BIN/dlh-train" $(emu_args "$d/x") --precision bf16 > "$d/x.out" 2>&1 &&
		die "the CPU trainer took --precision bf16"
	grep -q -- '--precision bf16: needs --device gpu (the CPU trainer computes in fp32)' "$d/x.out" ||
		die "refusal: $(cat "$d/x.out")"
	# shellcheck disable=SC2046
	mpirun -np 2 --oversubscribe --bind-to none "$DLH_BIN/dlh-train" $(emu_args "$d/c") \
		> "$d/c.out" 2>&1 || die "cpu run failed: $(tail -5 "$d/c.out")"
	local cl ca; cl=$(sed -n 's/^test_loss=//p' "$d/c/result"); ca=$(sed -n 's/^test_accuracy=//p' "$d/c/result")
	local p tol l a
	for p in tf32 bf16; do
		# shellcheck disable=SC2046
		mpirun -np 2 --oversubscribe --bind-to none "$DLH_BIN/dlh-train-gpuemu" $(emu_args "$d/$p") \
			--device gpu --precision "$p" > "$d/$p.out" 2>&1 || die "$p run failed: $(tail -5 "$d/$p.out")"
		grep -q "device gpu: rank 0 on host emulation.*; precision $p" "$d/$p.out" ||
			die "log: $(grep 'device gpu' "$d/$p.out")"
		l=$(sed -n 's/^test_loss=//p' "$d/$p/result"); a=$(sed -n 's/^test_accuracy=//p' "$d/$p/result")
		echo "measured: emulated gpu $p: test loss $l accuracy $a; cpu: $cl $ca"
		tol=0.02; [ "$p" = bf16 ] && tol=0.05
		near "$l" "$cl" "$tol" || die "$p test loss $l, cpu $cl (tolerance $tol relative)"
		awk -v a="$a" -v b="$ca" 'BEGIN { d = a - b; exit !(d <= 0.02 && d >= -0.02) }' ||
			die "$p test accuracy $a, cpu $ca"
	done
	# the bf16 run's step-20 checkpoint on the CPU trainer
	mkdir -p "$d/bc/checkpoints"
	cp "$d/bf16/checkpoints/step-00000020.ckpt" "$d/bc/checkpoints/" || die "checkpoints: $(ls "$d/bf16/checkpoints")"
	echo step-00000020.ckpt > "$d/bc/checkpoints/latest"
	# shellcheck disable=SC2046
	mpirun -np 2 --oversubscribe --bind-to none "$DLH_BIN/dlh-train" $(emu_args "$d/bc") \
		> "$d/bc.out" 2>&1 || die "cpu resume of a bf16 checkpoint failed: $(tail -5 "$d/bc.out")"
	grep -q 'start step 20' "$d/bc.out" || die "did not resume: $(head -3 "$d/bc.out")"
	# the CPU run's step-20 checkpoint on a bf16 GPU run
	mkdir -p "$d/cb/checkpoints"
	cp "$d/c/checkpoints/step-00000020.ckpt" "$d/cb/checkpoints/"
	echo step-00000020.ckpt > "$d/cb/checkpoints/latest"
	# shellcheck disable=SC2046
	mpirun -np 2 --oversubscribe --bind-to none "$DLH_BIN/dlh-train-gpuemu" $(emu_args "$d/cb") \
		--device gpu --precision bf16 > "$d/cb.out" 2>&1 || die "bf16 resume of a cpu checkpoint failed: $(tail -5 "$d/cb.out")"
	grep -q 'start step 20' "$d/cb.out" || die "did not resume: $(head -3 "$d/cb.out")"
	for p in bc cb; do
		l=$(sed -n 's/^test_loss=//p' "$d/$p/result")
		echo "measured: resumed across devices ($p): test loss $l; cpu: $cl"
		near "$l" "$cl" 0.05 || die "$p: test loss $l, cpu $cl"
	done
}

# two GPU types on one node, launched (the host emulation stands in for the
# GPUs): each rank gets a GPU of its part's type by CUDA_VISIBLE_DEVICES
# (dlh-train --gpus), with batches by the types' speeds
mixed_pool() {
	printf '[type A100]\nflops = 19.5T\nmemory = 40G\nbandwidth = 1.5T\nwatts_idle = 50\nwatts_busy = 400\ngpu = true\n'
	printf '[type H100]\nflops = 58.5T\nmemory = 80G\nbandwidth = 3.35T\nwatts_idle = 70\nwatts_busy = 700\ngpu = true\n'
	printf '[node here]\nhost = %s\ncpus = 2\ngpus = H100:1, A100:1\n' "$(hostname)"
}

test_two_gpu_types_launch_each_rank_on_its_type() {
	[ -x "$DLH_BIN/dlh-train-gpuemu" ] || skip "no $DLH_BIN/dlh-train-gpuemu (built with GPU=1)"
	local state; state=$(mktemp -d /tmp/dlh-state.XXXXXX)
	mixed_pool > "$state/pool.ini"
	DLH_OPTS="-o pool=$state/pool.ini -o trainer=$DLH_BIN/dlh-train-gpuemu" dlh_mount "$state"
	RANKS=2 fm_spec mix gpu 1 'layers = 32' 'batch_size = 256' | sed '/^batch_size = 64$/d' > "$STATE/mix.ini"
	run_job "$STATE/mix.ini" 300 1
	local plan=$MNT/jobs/1/plan
	grep -q '^chosen 1 x A100 + 1 x H100 on 1 node' "$plan" || die "plan: $(grep '^chosen' "$plan")"
	# the pool numbers GPUs in type order: A100 (gpu0), then H100 (gpu1)
	grep -q '^rank 0 host .* device gpu0 batch 64 env CUDA_VISIBLE_DEVICES=0$' "$plan" &&
		grep -q '^rank 1 host .* device gpu1 batch 192 env CUDA_VISIBLE_DEVICES=1$' "$plan" ||
		die "ranks: $(grep '^rank ' "$plan")"
	grep -q -- '--rank-batches 64,192 .*--gpus 0,1' "$plan" || die "argv: $(grep '^argv' "$plan")"
	grep -q '^\[rank 0\] dlh-train: host .* runs rank 0 of 2, CUDA_VISIBLE_DEVICES=0$' "$MNT/jobs/1/log" &&
		grep -q '^\[rank 1\] dlh-train: host .* runs rank 1 of 2, CUDA_VISIBLE_DEVICES=1$' "$MNT/jobs/1/log" ||
		die "log: $(grep 'runs rank' "$MNT/jobs/1/log")"
	dlh_umount
}
