# 30-train.sh - real 2-rank MPI training on Fashion-MNIST slices, watched through files

# col FILE KIND COLUMN ROW: a column (1-based) of the ROW-th row of KIND ("last" works)
col() {
	if [ "$4" = last ]; then
		grep "^$2," "$1" | tail -1 | cut -d, -f"$3"
	else
		grep "^$2," "$1" | sed -n "$4p" | cut -d, -f"$3"
	fi
}

test_slice_trains_loss_drops_accuracy_above_chance() {
	dlh_mount
	slice_spec slice 1 > "$STATE/s.ini"
	cp "$STATE/s.ini" "$MNT/jobs/new" || die "submit failed"
	wait_for 120 job_terminal 1 || die "job did not end: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "status ($(tail -5 "$MNT/jobs/1/log"))"
	local csv=$MNT/jobs/1/metrics.csv
	expect_eq "$(head -1 "$csv")" "kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s" "csv header"
	local first last acc
	first=$(grep '^train,' "$csv" | head -5 | cut -d, -f5 | awk '{s+=$1} END {print s/NR}')
	last=$(grep '^train,' "$csv" | tail -5 | cut -d, -f5 | awk '{s+=$1} END {print s/NR}')
	awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < 0.6 * f) }' || die "loss did not drop: first $first last $last"
	acc=$(grep '^test_accuracy=' "$MNT/jobs/1/result" | cut -d= -f2)
	awk -v a="$acc" 'BEGIN { exit !(a > 0.5) }' || die "test accuracy $acc is not clearly above chance (0.1)"
	grep -q '^wall_time_s=' "$MNT/jobs/1/result" || die "result lacks wall time"
	grep -q '^model=' "$MNT/jobs/1/result" || die "result lacks the model"
	expect_eq "$(csv_rows 1 eval)" 1 "eval rows"
	grep -q '^test_accuracy=' "$MNT/jobs/1/metrics" || die "metrics: $(cat "$MNT/jobs/1/metrics")"
	grep -q '^succeeded: epoch 1/1  step [0-9]*/[0-9]*  100%' "$MNT/jobs/1/progress" || die "progress: $(cat "$MNT/jobs/1/progress")"
	dlh_umount
}

test_plan_names_ranks_batches_and_argv() {
	dlh_mount
	slice_spec plan 1 > "$STATE/s.ini"
	sed -i 's/^batch_size = 64/batch_size = 65/' "$STATE/s.ini"
	cp "$STATE/s.ini" "$MNT/jobs/new" || die "submit failed"
	wait_for 120 job_terminal 1 || die "job did not end"
	local plan=$MNT/jobs/1/plan
	grep -q '^ranks 2$' "$plan" || die "plan: $(cat "$plan")"
	grep -q '^rank 0 .* batch 33$' "$plan" || die "rank 0 batch: $(cat "$plan")"
	grep -q '^rank 1 .* batch 32$' "$plan" || die "rank 1 batch: $(cat "$plan")"
	grep -q '^argv .*mpirun -np 2 .*dlh-train --job-dir ' "$plan" || die "argv: $(cat "$plan")"
	dlh_umount
}

# the ranks a job launches: each pinned to one CPU slot the engine holds for
# it (--cpus in the plan's argv), seen in /proc while the job trains
test_ranks_are_pinned_to_their_cpu_slots() {
	[ "$(nproc)" -ge 2 ] || skip "needs 2 CPUs"
	DLH_OPTS="-o cpus=2" dlh_mount
	slice_spec pin 200 > "$STATE/s.ini"
	cp "$STATE/s.ini" "$MNT/jobs/new" || die "submit failed"
	grep -q '^argv .*dlh-train .* --cpus 0,1$' "$MNT/jobs/1/plan" || die "argv: $(grep argv "$MNT/jobs/1/plan")"
	wait_for 60 sh -c "grep -q '^train,' '$MNT/jobs/1/metrics.csv'" || die "no step: $(tail -3 "$MNT/jobs/1/log")"
	grep -q 'rank r pinned to CPU r of --cpus (2 ranks)' "$MNT/jobs/1/log" || die "log: $(grep dlh-train "$MNT/jobs/1/log")"
	local p cpus=
	for p in $(pgrep -f -- "^[^ ]*/dlh-train --job-dir $STATE/jobs/1 "); do
		cpus="$cpus $(sed -n 's/^Cpus_allowed_list:\t*//p' "/proc/$p/status")"
	done
	expect_eq "$(echo $cpus | tr ' ' '\n' | sort | tr '\n' ' ')" "0 1 " "CPUs the two ranks may run on"
	echo cancel > "$MNT/jobs/1/ctl"
	wait_for 30 job_terminal 1 || die "job 1 still $(cat "$MNT/jobs/1/status")"
	dlh_umount
}

test_checkpoints_are_listed_and_latest_names_one() {
	dlh_mount
	slice_spec ck 1 > "$STATE/s.ini"
	cp "$STATE/s.ini" "$MNT/jobs/new" || die "submit failed"
	wait_for 120 job_terminal 1 || die "job did not end"
	local latest; latest=$(cat "$MNT/jobs/1/checkpoints/latest")
	[ -f "$MNT/jobs/1/checkpoints/$latest" ] || die "latest names \"$latest\" which is not there: $(ls "$MNT/jobs/1/checkpoints")"
	ls "$MNT/jobs/1/checkpoints" | grep -q '^step-' || die "no periodic checkpoint: $(ls "$MNT/jobs/1/checkpoints")"
	cmp -s "$MNT/jobs/1/checkpoints/$latest" "$STATE/jobs/1/checkpoints/$latest" || die "checkpoint content differs from the state dir"
	dlh_umount
}

test_status_goes_queued_running_succeeded_and_name_links() {
	dlh_mount
	slice_spec first 2 > "$STATE/a.ini"
	slice_spec second 1 > "$STATE/b.ini"
	cp "$STATE/a.ini" "$MNT/jobs/new" || die "submit a"
	cp "$STATE/b.ini" "$MNT/jobs/new" || die "submit b"
	# both need every slot: the second waits for the first
	expect_eq "$(cat "$MNT/jobs/2/status")" queued "second job while the first runs"
	grep -q '^queued: waiting for 2 cpu slots' "$MNT/jobs/2/progress" || die "progress: $(cat "$MNT/jobs/2/progress")"
	wait_for 60 status_is 2 running || die "second job never ran (first: $(cat "$MNT/jobs/1/status"))"
	job_terminal 1 || die "second job started while the first still held the slots"
	wait_for 120 job_terminal 2 || die "second job did not end"
	expect_eq "$(cat "$MNT/jobs/1/status") $(cat "$MNT/jobs/2/status")" "succeeded succeeded" "statuses"
	expect_eq "$(readlink "$MNT/jobs/first")" 1 "name link"
	expect_eq "$(cat "$MNT/jobs/second/status")" succeeded "status through the name link"
	dlh_umount
}

test_tail_follows_metrics_csv_while_it_grows() {
	dlh_mount
	printf '[job]\nname = tail\n[data]\ntest_limit = 1000\n[train]\nepochs = 20\n[resources]\nranks = 2\n' > "$STATE/t.ini"
	cp "$STATE/t.ini" "$MNT/jobs/new" || die "submit failed"
	# opened before the trainer creates the file: it must still follow it
	tail -n +1 -f "$MNT/jobs/1/metrics.csv" > "$STATE/tail.out" 2>"$STATE/tail.err" &
	local tail_pid=$!
	wait_for 60 sh -c "[ \$(grep -c '^train,' '$STATE/tail.out') -ge 1 ]" || die "tail saw no rows"
	local seen; seen=$(grep -c '^train,' "$STATE/tail.out")
	wait_for 30 sh -c "[ \$(grep -c '^train,' '$STATE/tail.out') -gt $seen ]" || die "tail saw no new rows after $seen"
	status_is 1 running || die "the job ended; this test needs it running"
	echo cancel > "$MNT/jobs/1/ctl"
	wait_for 20 job_terminal 1 || die "job did not end"
	wait_for 10 cmp -s "$STATE/tail.out" "$MNT/jobs/1/metrics.csv" || die "tail output differs from metrics.csv"
	kill "$tail_pid"
	wait "$tail_pid" 2>/dev/null
	[ -s "$STATE/tail.err" ] && die "tail complained: $(cat "$STATE/tail.err")"
	expect_eq "$(stat -c %s "$MNT/jobs/1/metrics.csv")" "$(stat -c %s "$STATE/jobs/1/metrics.csv")" "size in getattr"
	dlh_umount
}

test_progress_while_running_has_epoch_step_rate_eta() {
	dlh_mount
	printf '[data]\ntest_limit = 1000\n[train]\nepochs = 20\n[resources]\nranks = 2\n' > "$STATE/p.ini"
	cp "$STATE/p.ini" "$MNT/jobs/new" || die "submit failed"
	wait_for 60 sh -c "grep -q '^epoch' '$MNT/jobs/1/progress'" || die "progress: $(cat "$MNT/jobs/1/progress")"
	grep -Eq '^epoch 1/20  step [0-9]+/[0-9]+  [0-9]+%  [0-9]+ samples/s  ETA ([0-9]+:)?[0-9]+:[0-9]{2}$' "$MNT/jobs/1/progress" ||
		die "progress: $(cat "$MNT/jobs/1/progress")"
	grep -q '^step=' "$MNT/jobs/1/metrics" || die "metrics: $(cat "$MNT/jobs/1/metrics")"
	echo cancel > "$MNT/jobs/1/ctl"
	wait_for 20 job_terminal 1 || die "did not end"
	dlh_umount
}

test_user_command_runs_under_mpirun_with_dlh_environment() {
	dlh_mount
	printf '[job]\nname = own\ncommand = /usr/bin/env\n[resources]\nranks = 2\n' > "$STATE/c.ini"
	cp "$STATE/c.ini" "$MNT/jobs/new" || die "submit failed"
	wait_for 60 job_terminal 1 || die "did not end"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "status ($(tail -3 "$MNT/jobs/1/log"))"
	# each rank's lines carry its rank in the log, and are in logs/rank.N as they were
	local r
	for r in 0 1; do
		expect_eq "$(grep -c "^\[rank $r\] DLH_METRICS_CSV=$STATE/jobs/1/metrics.csv$" "$MNT/jobs/1/log")" 1 \
			"rank $r's env dump in the log"
		grep -qx "OMPI_COMM_WORLD_RANK=$r" "$MNT/jobs/1/logs/rank.$r" ||
			die "logs/rank.$r: $(head -3 "$MNT/jobs/1/logs/rank.$r")"
	done
	expect_eq "$(ls "$MNT/jobs/1/logs" | tr '\n' ' ')" "rank.0 rank.1 " "ls logs"
	grep -q "^\[rank 0\] DLH_CHECKPOINT_DIR=$STATE/jobs/1/checkpoints$" "$MNT/jobs/1/log" || die "no DLH_CHECKPOINT_DIR"
	grep -q '^argv .*mpirun -np 2 .* /usr/bin/env$' "$MNT/jobs/1/plan" || die "plan: $(cat "$MNT/jobs/1/plan")"
	dlh_umount
}

# A [job] command's ranks get torchrun's environment (dlh-rank, in the
# plan's argv): RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
# MASTER_PORT, besides DLH_*; the program itself is exec'd
test_a_command_gets_torchruns_environment() {
	dlh_mount
	local prog=$STATE/env.sh
	printf '#!/bin/sh\nenv | grep -E "^(RANK|WORLD_SIZE|LOCAL_RANK|LOCAL_WORLD_SIZE|MASTER_ADDR|MASTER_PORT|DLH_JOB_ID)=" | sort > "$DLH_JOB_DIR/env.$RANK"\n' > "$prog"
	chmod 755 "$prog"
	printf '[job]\nname = envs\ncommand = %s\n[resources]\nranks = 2\n' "$prog" > "$STATE/c.ini"
	cp "$STATE/c.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 30 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "status ($(tail -3 "$MNT/jobs/1/log"))"
	grep -q "^argv .*/dlh-rank $prog$" "$MNT/jobs/1/plan" || die "argv: $(grep '^argv' "$MNT/jobs/1/plan")"
	local r port
	for r in 0 1; do
		[ -f "$STATE/jobs/1/env.$r" ] || die "rank $r wrote nothing: $(ls "$STATE/jobs/1")"
		port=$(sed -n 's/^MASTER_PORT=//p' "$STATE/jobs/1/env.$r")
		expect_eq "$(tr '\n' ' ' < "$STATE/jobs/1/env.$r")" \
			"DLH_JOB_ID=1 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=$r WORLD_SIZE=2 " \
			"rank $r's environment"
		[ "$port" -gt 0 ] 2>/dev/null || die "MASTER_PORT \"$port\""
	done
	expect_eq "$(sed -n 's/^MASTER_PORT=//p' "$STATE/jobs/1/env.0")" "$port" "both ranks' MASTER_PORT"
	dlh_umount
}
