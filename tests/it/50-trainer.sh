# 50-trainer.sh - the trainer through the mount: CNN, optimizers, schedules, CSV,
# determinism (same seed, allreduce paths, resume) on small slices

# params_of CKPT: the parameter and optimizer bytes of a checkpoint (its
# header, which records wall-clock times, is skipped by its own size field)
params_of() {
	local hdr; hdr=$(od -An -tu4 -j12 -N4 "$1" | tr -d ' ')
	tail -c +$((hdr + 1)) "$1" | md5sum | cut -d' ' -f1
}

# final_params ID: params_of the job's final checkpoint
final_params() { params_of "$STATE/jobs/$1/checkpoints/final.ckpt"; }

# lr_of ID STEP: the lr column of that train row
lr_of() { grep "^train,$2," "$MNT/jobs/$1/metrics.csv" | cut -d, -f7; }

small_cnn() {
	printf '[job]\nname = %s\n[data]\ntrain_limit = 2000\ntest_limit = 500\n' "$1"
	printf '[model]\ntype = cnn\nconv = 8:5, 16:3\npool = 2\ndense = 64\ndropout = 0.25\n'
	printf '[train]\nepochs = %d\nbatch_size = 64\noptimizer = adam\nlr = 0.002\ncheckpoint_every = 20\n' "${EPOCHS:-2}"
	printf '[resources]\nranks = 2\n'
	shift
	for l in "$@"; do printf '%s\n' "$l"; done
}

submit() { cp "$1" "$MNT/jobs/new" || die "submit $1 failed: $(tail -3 "$MNT/jobs/errors")"; }

expect_succeeded() {
	wait_for "${2:-180}" job_terminal "$1" || die "job $1 did not end: $(cat "$MNT/jobs/$1/progress")"
	expect_eq "$(cat "$MNT/jobs/$1/status")" succeeded "job $1 ($(grep 'dlh-train' "$MNT/jobs/$1/log" | tail -2))"
}

test_cnn_slice_trains_above_chance() {
	dlh_mount
	small_cnn cnn > "$STATE/c.ini"
	submit "$STATE/c.ini"
	expect_succeeded 1
	local acc; acc=$(sed -n 's/^test_accuracy=//p' "$MNT/jobs/1/result")
	awk -v a="$acc" 'BEGIN { exit !(a > 0.5) }' || die "cnn test accuracy $acc"
	grep -q -- '--model cnn --conv 8:5,16:3 --pool 2 --dense 64' "$MNT/jobs/1/plan" || die "plan: $(cat "$MNT/jobs/1/plan")"
	dlh_umount
}

test_same_spec_and_seed_give_identical_weights() {
	dlh_mount
	small_cnn a > "$STATE/a.ini"
	small_cnn b > "$STATE/b.ini"
	submit "$STATE/a.ini"
	submit "$STATE/b.ini"
	expect_succeeded 1
	expect_succeeded 2
	expect_eq "$(final_params 2)" "$(final_params 1)" "weights of two runs with one seed"
	small_cnn c '[train]' 'seed = 2' > "$STATE/c.ini"
	submit "$STATE/c.ini"
	expect_succeeded 3
	[ "$(final_params 3)" != "$(final_params 1)" ] || die "another seed gave the same weights"
	dlh_umount
}

# train_direct DIR NP ARGS...: the small CNN of small_cnn (Adam) run by
# mpirun directly, as a user would, into job dir DIR
train_direct() {
	local dir=$1 np=$2 d=/usr/share/datasets/fashion-mnist
	shift 2
	OPENBLAS_NUM_THREADS=1 mpirun --oversubscribe --bind-to none --mca pml ob1 --mca btl self,vader \
		-np "$np" "$DLH_BIN/dlh-train" --job-dir "$dir" \
		--train-images "$d/train-images-idx3-ubyte.gz" --train-labels "$d/train-labels-idx1-ubyte.gz" \
		--test-images "$d/t10k-images-idx3-ubyte.gz" --test-labels "$d/t10k-labels-idx1-ubyte.gz" \
		--train-limit 2000 --test-limit 500 --model cnn --conv 8:5,16:3 --pool 2 --dense 64 \
		--dropout 0.25 --epochs 2 --batch 64 --optimizer adam --lr 0.002 --checkpoint-every 0 \
		"$@" >"$dir.out" 2>&1 || die "dlh-train $*: $(tail -3 "$dir.out")"
}

# The three ways of summing gradients: one MPI allreduce after backward,
# MPI allreduces of buckets overlapped with backward, and the shared-memory
# sum with the sharded optimizer step (the default on one node)
test_shm_bucketed_and_blocking_allreduce_give_identical_weights() {
	W=$(mktemp -d /tmp/dlh-direct.XXXXXX)
	trap 'rm -rf "$W"' EXIT
	local w=$W
	train_direct "$w/blocking" 2 --allreduce mpi --bucket-mb 0
	train_direct "$w/buckets" 2 --allreduce mpi --bucket-mb 0.01
	train_direct "$w/shm" 2
	grep -q '^allreduce=shm$' "$w/shm/run.info" || die "default on one node: $(grep allreduce "$w/shm/run.info")"
	grep -q '^gradient_buckets=[2-9]' "$w/buckets/run.info" || die "buckets: $(cat "$w/buckets/run.info")"
	expect_eq "$(params_of "$w/buckets/checkpoints/final.ckpt")" \
		"$(params_of "$w/blocking/checkpoints/final.ckpt")" "weights with and without overlap"
	expect_eq "$(params_of "$w/shm/checkpoints/final.ckpt")" \
		"$(params_of "$w/blocking/checkpoints/final.ckpt")" "weights with the shared-memory sum"
	# 3 ranks: slices of unequal length; the same run twice is bit-identical
	train_direct "$w/shm3a" 3 --allreduce shm
	train_direct "$w/shm3b" 3 --allreduce shm
	expect_eq "$(params_of "$w/shm3b/checkpoints/final.ckpt")" \
		"$(params_of "$w/shm3a/checkpoints/final.ckpt")" "3-rank shared-memory runs"
	local acc; acc=$(sed -n 's/^test_accuracy=//p' "$w/shm3a/result")
	awk -v a="$acc" 'BEGIN { exit !(a > 0.5) }' || die "3-rank shm test accuracy $acc"
}

# Rows are held and written in batches of whole lines (at most half a second
# apart, and before a checkpoint and the exit): every step once, in order,
# the eval rows after their epoch's last step; samples_per_s is the wall clock
# over the last 20 train rows (their time_s, 3 decimals), and the heartbeat
# ends at the last step
test_rows_every_step_once_with_wall_clock_samples_per_s() {
	W=$(mktemp -d /tmp/dlh-direct.XXXXXX)
	trap 'rm -rf "$W"' EXIT
	local w=$W/mlp d=/usr/share/datasets/fashion-mnist
	OPENBLAS_NUM_THREADS=1 mpirun --oversubscribe --bind-to none --mca pml ob1 --mca btl self,vader \
		-np 2 "$DLH_BIN/dlh-train" --job-dir "$w" \
		--train-images "$d/train-images-idx3-ubyte.gz" --train-labels "$d/train-labels-idx1-ubyte.gz" \
		--test-images "$d/t10k-images-idx3-ubyte.gz" --test-labels "$d/t10k-labels-idx1-ubyte.gz" \
		--train-limit 6400 --test-limit 500 --layers 32 --epochs 3 --batch 32 --lr 0.05 \
		--checkpoint-every 70 >"$w.out" 2>&1 || die "dlh-train: $(tail -3 "$w.out")"
	grep '^train,' "$w/metrics.csv" | cut -d, -f2 | cmp -s - <(seq 1 600) ||
		die "train steps of metrics.csv are not 1..600 once each"
	expect_eq "$(grep '^eval,' "$w/metrics.csv" | cut -d, -f2 | tr '\n' ' ')" "200 400 600 " "eval rows"
	awk -F, '$1 == "eval" && prev != $2 { bad = 1 } { prev = $2 } END { exit bad }' "$w/metrics.csv" ||
		die "an eval row not right after its step's train row"
	# 20 rows x 32 samples over the time since the row 20 back, within the
	# rounding of time_s (1 ms) and of samples_per_s (0.1)
	awk -F, '$1 == "train" { n++; t[n] = $4; r = $8
		if (n > 20) { dt = t[n] - t[n - 20]; want = 640 / r
			if (want - dt > 0.0011 + want * 1e-4 || dt - want > 0.0011 + want * 1e-4) {
				printf "row %d: samples_per_s %s, 640 samples over %.3f s\n", n, r, dt; bad = 1; exit } } }
		END { exit bad }' "$w/metrics.csv" || die "samples_per_s is not the wall clock over 20 rows"
	grep -q 'rank=0 step=600 ' "$w/heartbeat" && grep -q 'rank=1 step=600 ' "$w/heartbeat" ||
		die "heartbeat: $(cat "$w/heartbeat")"
	expect_eq "$(wc -c < "$w/heartbeat")" 256 "heartbeat bytes"
}

# --lr auto: the range test writes its sweep and choice, puts the initial
# weights back, and trains with the chosen rate: the run is the one that
# --lr CHOSEN gives, bit for bit
test_lr_auto_range_test_then_trains_with_its_choice() {
	W=$(mktemp -d /tmp/dlh-direct.XXXXXX)
	trap 'rm -rf "$W"' EXIT
	local w=$W lr rows
	train_direct "$w/auto" 2 --lr auto --lr-find-steps 60
	lr=$(sed -n 's/^chosen_lr=//p' "$w/auto/lr_finder")
	awk -v l="$lr" 'BEGIN { exit !(l > 1e-5 && l < 1) }' || die "chosen_lr '$lr': $(head -5 "$w/auto/lr_finder")"
	grep -q '^step,lr,loss,smoothed_loss$' "$w/auto/lr_finder" || die "no table: $(head -8 "$w/auto/lr_finder")"
	rows=$(grep -c '^[0-9]' "$w/auto/lr_finder")
	[ "$rows" -ge 10 ] && [ "$rows" -le 60 ] || die "$rows sweep rows"
	grep -q "chose $lr" "$w/auto.out" || die "log: $(grep 'lr auto' "$w/auto.out")"
	expect_eq "$(grep '^train,1,' "$w/auto/metrics.csv" | cut -d, -f7)" "$lr" "lr column at step 1"
	train_direct "$w/fixed" 2 --lr "$lr"
	expect_eq "$(params_of "$w/fixed/checkpoints/final.ckpt")" \
		"$(params_of "$w/auto/checkpoints/final.ckpt")" "weights of --lr auto and --lr $lr"
}

# --rank-batches: unequal per-rank batches (devices of different speeds)
# train, are recorded per rank, and a wrong list is refused by name
test_rank_batches_split_the_global_batch_unevenly() {
	W=$(mktemp -d /tmp/dlh-direct.XXXXXX)
	trap 'rm -rf "$W"' EXIT
	local w=$W
	train_direct "$w/uneven" 2 --rank-batches 48,16
	grep -q '^batch_per_rank=48,16$' "$w/uneven/run.info" || die "run.info: $(cat "$w/uneven/run.info")"
	expect_eq "$(cut -d, -f1,2 "$w/uneven/rank_times" | tr '\n' ' ')" "rank,batch 0,48 1,16 " "rank_times"
	# 2000 images in shards of 1500 and 500: 31 steps of 48 and of 16 per epoch
	grep -q '^steps_per_epoch=31$' "$w/uneven/run.info" || die "run.info: $(cat "$w/uneven/run.info")"
	local acc; acc=$(sed -n 's/^test_accuracy=//p' "$w/uneven/result")
	awk -v a="$acc" 'BEGIN { exit !(a > 0.5) }' || die "test accuracy $acc"
	# the slower rank (16 rows) sums and updates nothing in the shared-memory
	# step; the update is still the global batch's, bit for bit MPI's
	train_direct "$w/uneven_mpi" 2 --rank-batches 48,16 --allreduce mpi --bucket-mb 0
	expect_eq "$(params_of "$w/uneven/checkpoints/final.ckpt")" \
		"$(params_of "$w/uneven_mpi/checkpoints/final.ckpt")" "uneven batches, shm and MPI"
	( train_direct "$w/bad" 2 --rank-batches 40,20 ) 2>/dev/null && die "a split that sums to 60 of 64 ran"
	grep -q 'sum to 60, the global batch is 64' "$w/bad.out" || die "message: $(cat "$w/bad.out")"
}

# --rebalance: every rank holds the whole set and each step's global batch is
# the same rows however it is split, so runs from different splits (one of
# them re-split during the run) reach the same model up to float rounding;
# the re-split is logged and rank_times shows the batches it left
test_rebalance_resplits_the_same_global_batches() {
	W=$(mktemp -d /tmp/dlh-direct.XXXXXX)
	trap 'rm -rf "$W"' EXIT
	local w=$W never=1000000 la lb lr
	train_direct "$w/a" 2 --dropout 0 --rank-batches 48,16 --rebalance $never
	train_direct "$w/b" 2 --dropout 0 --rank-batches 32,32 --rebalance $never
	# 60,4 on two equal ranks: each re-split moves rows to rank 1, halfway to
	# the split by speed held at rank 1's cap (twice its first batch): 56,8
	train_direct "$w/r" 2 --dropout 0 --rank-batches 60,4 --rebalance 10
	grep -q '^dlh-train: rebalance at step 10: batches 60,4 -> 58,6 from step 19 ' "$w/r.out" ||
		die "log: $(grep -E 'rebalance|ranks' "$w/r.out")"
	expect_eq "$(cut -d, -f1,2 "$w/r/rank_times" | tr '\n' ' ')" "rank,batch 0,56 1,8 " "rank_times"
	# 2000 images, global batch 64: 31 steps an epoch, whatever the split
	grep -q '^steps_per_epoch=31$' "$w/r/run.info" || die "run.info: $(cat "$w/r/run.info")"
	la=$(sed -n 's/^test_loss=//p' "$w/a/result")
	lb=$(sed -n 's/^test_loss=//p' "$w/b/result")
	lr=$(sed -n 's/^test_loss=//p' "$w/r/result")
	awk -v a="$la" -v b="$lb" -v r="$lr" 'function d(x, y) { return (x > y ? x - y : y - x) / y }
		BEGIN { exit !(a > 0 && d(a, b) < 1e-3 && d(r, b) < 1e-3) }' ||
		die "test loss 48,16: $la, 32,32: $lb, 60,4 re-split: $lr (same rows each step: should agree)"
	( train_direct "$w/bad" 2 --rebalance 5 ) 2>/dev/null && die "--rebalance 5 ran"
	grep -q 'at least 10 steps between re-splits' "$w/bad.out" || die "message: $(cat "$w/bad.out")"
}

# --cpus: each rank pinned to its CPU, or (one CPU not to be had) none, said
# in the log; either way the same weights
test_cpus_pin_every_rank_or_none() {
	[ "$(nproc)" -ge 2 ] || skip "needs 2 CPUs"
	W=$(mktemp -d /tmp/dlh-direct.XXXXXX)
	trap 'rm -rf "$W"' EXIT
	local w=$W
	train_direct "$w/pinned" 2 --cpus 1,0
	grep -q 'rank r pinned to CPU r of --cpus (2 ranks)' "$w/pinned.out" || die "log: $(cat "$w/pinned.out")"
	train_direct "$w/loose" 2 --cpus 0,4095
	grep -q 'rank 1: warning: ranks not pinned to CPUs: CPU 4095 is not among the [0-9]* CPUs rank 1 may run on' \
		"$w/loose.out" || die "log: $(cat "$w/loose.out")"
	grep -q 'pinned to CPU r' "$w/loose.out" && die "pinned although rank 1 could not be"
	expect_eq "$(params_of "$w/loose/checkpoints/final.ckpt")" \
		"$(params_of "$w/pinned/checkpoints/final.ckpt")" "weights pinned and not"
	( train_direct "$w/bad" 2 --cpus 0,x ) 2>/dev/null && die "--cpus 0,x ran"
	grep -q -- '--cpus "0,x": expected' "$w/bad.out" || die "message: $(cat "$w/bad.out")"
}

test_resume_after_unmount_gives_identical_weights() {
	dlh_mount
	local state=$STATE
	EPOCHS=3 small_cnn straight > "$STATE/a.ini"
	EPOCHS=3 small_cnn resumed > "$STATE/b.ini"
	submit "$STATE/a.ini"
	expect_succeeded 1
	submit "$STATE/b.ini"
	wait_for 60 test -s "$MNT/jobs/2/checkpoints/latest" || die "no checkpoint to resume from"
	dlh_umount   # stops the run; it is requeued
	dlh_mount "$state"
	expect_succeeded 2
	grep -q 'start step [1-9]' "$MNT/jobs/2/log" || die "job 2 did not resume from a checkpoint: $(grep 'start step' "$MNT/jobs/2/log")"
	expect_eq "$(final_params 2)" "$(final_params 1)" "weights after a resume"
	local a b
	a=$(grep '^train,' "$MNT/jobs/1/metrics.csv" | cut -d, -f1,2,3,5,6,7 | md5sum)
	b=$(grep '^train,' "$MNT/jobs/2/metrics.csv" | cut -d, -f1,2,3,5,6,7 | md5sum)
	expect_eq "$b" "$a" "metrics.csv rows (step, epoch, loss, accuracy, lr) after a resume"
	dlh_umount
}

test_step_schedule_and_warmup_show_in_lr_column() {
	dlh_mount
	slice_spec sched 2 '[train]' 'schedule = step' 'step_epochs = 1' 'gamma = 0.5' 'warmup_steps = 10' > "$STATE/s.ini"
	submit "$STATE/s.ini"
	expect_succeeded 1
	local spe; spe=$(sed -n 's/^steps_per_epoch=//p' "$STATE/jobs/1/run.info")
	awk -v a="$(lr_of 1 1)" -v b="$(lr_of 1 5)" 'BEGIN { exit !(a < b) }' || die "warmup: lr at step 1 $(lr_of 1 1), step 5 $(lr_of 1 5)"
	awk -v a="$(lr_of 1 $((spe)))" -v b="$(lr_of 1 $((spe + 1)))" 'BEGIN { exit !(b > 0.49 * a && b < 0.51 * a) }' ||
		die "step: lr $(lr_of 1 $spe) then $(lr_of 1 $((spe + 1)))"
	dlh_umount
}

test_cosine_schedule_ends_near_zero() {
	dlh_mount
	slice_spec cos 1 '[train]' 'schedule = cosine' > "$STATE/s.ini"
	submit "$STATE/s.ini"
	expect_succeeded 1
	local last; last=$(grep '^train,' "$MNT/jobs/1/metrics.csv" | tail -1 | cut -d, -f7)
	awk -v l="$last" 'BEGIN { exit !(l < 0.005) }' || die "last lr $last"
	dlh_umount
}

test_nesterov_and_adam_train_mlp() {
	dlh_mount
	slice_spec nest 1 '[train]' 'optimizer = nesterov' > "$STATE/n.ini"
	slice_spec adam 1 > "$STATE/a.ini"
	sed -i 's/^lr = 0.05/lr = 0.002/; s/^\[train\]$/[train]\noptimizer = adam/' "$STATE/a.ini"
	submit "$STATE/n.ini"
	submit "$STATE/a.ini"
	expect_succeeded 1
	expect_succeeded 2
	local id acc
	for id in 1 2; do
		acc=$(sed -n 's/^test_accuracy=//p' "$MNT/jobs/$id/result")
		awk -v a="$acc" 'BEGIN { exit !(a > 0.5) }' || die "job $id test accuracy $acc"
	done
	dlh_umount
}

# idx_to_csv IMAGES LABELS N OUT: the first N images as CSV with a header
idx_to_csv() {
	{
		printf 'label'
		seq 1 784 | sed 's/^/,pixel/' | tr -d '\n'
		echo
		paste -d, \
			<(zcat "$2" | tail -c +9 | head -c "$3" | od -An -v -tu1 -w1 | tr -d ' ') \
			<(zcat "$1" | tail -c +17 | head -c $(($3 * 784)) | od -An -v -tu1 -w784 |
				sed 's/^ *//; s/ \+/,/g')
	} > "$4"
}

test_csv_data_trains() {
	dlh_mount
	local d=/usr/share/datasets/fashion-mnist
	idx_to_csv "$d/train-images-idx3-ubyte.gz" "$d/train-labels-idx1-ubyte.gz" 2000 "$STATE/train.csv"
	idx_to_csv "$d/t10k-images-idx3-ubyte.gz" "$d/t10k-labels-idx1-ubyte.gz" 500 "$STATE/test.csv"
	expect_eq "$(head -2 "$STATE/train.csv" | tail -1 | tr ',' '\n' | wc -l)" 785 "values per csv row"
	printf '[data]\nformat = csv\ntrain = %s\ntest = %s\n[model]\nlayers = 64\n[train]\nepochs = 2\nlr = 0.05\n[resources]\nranks = 2\n' \
		"$STATE/train.csv" "$STATE/test.csv" > "$STATE/c.ini"
	submit "$STATE/c.ini"
	expect_succeeded 1
	local acc; acc=$(sed -n 's/^test_accuracy=//p' "$MNT/jobs/1/result")
	awk -v a="$acc" 'BEGIN { exit !(a > 0.5) }' || die "csv test accuracy $acc"
	dlh_umount
}

# lr = auto through the mount: the plan says so, the trainer gets --lr auto,
# and lr_finder appears in the job's directory with the sweep and the choice
test_lr_auto_through_the_mount_shows_lr_finder() {
	dlh_mount
	slice_spec auto 1 > "$STATE/a.ini"
	sed -i 's/^lr = 0.05$/lr = auto/' "$STATE/a.ini"
	submit "$STATE/a.ini"
	expect_succeeded 1
	grep -q '^lr auto' "$MNT/jobs/1/plan" || die "plan: $(head -4 "$MNT/jobs/1/plan")"
	grep -q -- '--lr auto' "$MNT/jobs/1/plan" || die "argv: $(grep argv "$MNT/jobs/1/plan")"
	ls "$MNT/jobs/1" | grep -qx lr_finder || die "not listed: $(ls "$MNT/jobs/1")"
	local lr; lr=$(sed -n 's/^chosen_lr=//p' "$MNT/jobs/1/lr_finder")
	awk -v l="$lr" 'BEGIN { exit !(l > 0) }' || die "lr_finder: $(head -5 "$MNT/jobs/1/lr_finder")"
	grep -q '^rule=' "$MNT/jobs/1/lr_finder" || die "no rule line"
	# a job with a fixed rate has no lr_finder
	slice_spec fixed 1 > "$STATE/b.ini"
	submit "$STATE/b.ini"
	expect_succeeded 2
	[ ! -e "$MNT/jobs/2/lr_finder" ] || die "lr_finder of a job with lr = 0.05"
	ls "$MNT/jobs/2" | grep -qx lr_finder && die "lr_finder listed for job 2"
	dlh_umount
}

# The bar of the range test: on the example MLP (all of Fashion-MNIST, 14
# epochs), the rate it picks trains to within 1% test accuracy of the
# hand-tuned lr = 0.01 of examples/fashion-mnist-mlp.ini
test_lr_auto_trains_the_example_mlp_within_1pct_of_the_tuned_rate() {
	dlh_mount
	sed 's/^name = .*/name = tuned/; s/^checkpoint_every = .*/checkpoint_every = 0/' \
		examples/fashion-mnist-mlp.ini > "$STATE/tuned.ini"
	sed 's/^name = .*/name = auto/; s/^lr = .*/lr = auto/' "$STATE/tuned.ini" > "$STATE/auto.ini"
	grep -q '^lr = 0.01$' "$STATE/tuned.ini" || die "the example's rate is not 0.01"
	submit "$STATE/tuned.ini"
	submit "$STATE/auto.ini"
	expect_succeeded 1 400
	expect_succeeded 2 400
	local a b lr
	a=$(sed -n 's/^test_accuracy=//p' "$MNT/jobs/1/result")
	b=$(sed -n 's/^test_accuracy=//p' "$MNT/jobs/2/result")
	lr=$(sed -n 's/^chosen_lr=//p' "$MNT/jobs/2/lr_finder")
	echo "measured: tuned lr 0.01: test accuracy $a; lr = auto chose $lr: $b"
	awk -v a="$a" -v b="$b" 'BEGIN { exit !(b >= a - 0.01) }' ||
		die "lr = auto ($lr) reached $b, the tuned rate $a"
	dlh_umount
}
