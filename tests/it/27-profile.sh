# 27-profile.sh - a [job] command estimated from measurement: profile runs
# of the program itself, the fit, the ranks chosen for a deadline, the
# record that plans the next job of the same program at close(), and the
# programs that cannot be timed (they run once, as the job's run)

# steps_prog FILE: a program of its own (a shell script) that writes a train
# row per step to $DLH_METRICS_CSV (rank 0) and whose step takes
# 0.2 s / ranks + 0.02 s: the global batch split over the ranks, a sum; at
# step 5 it writes a checkpoint and an output file
steps_prog() {
	cat > "$1" <<'SH'
#!/bin/sh
n=$1
r=${RANK:-0}; w=${WORLD_SIZE:-1}
t0=$(date +%s.%N)
sleep 0.3
[ "$r" = 0 ] && printf 'kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s\n' >> "$DLH_METRICS_CSV"
i=1
while [ "$i" -le "$n" ]; do
	sleep "$(echo "0.2 / $w + 0.02" | bc -l)"
	if [ "$r" = 0 ]; then
		printf 'train,%d,1,%s,1.0,0.5,0.1,nan\n' "$i" "$(echo "$(date +%s.%N) - $t0" | bc)" >> "$DLH_METRICS_CSV"
		[ "$i" = 5 ] && echo "$i" > "$DLH_CHECKPOINT_DIR/step-5.ckpt" && echo made > "$DLH_OUTPUT_DIR/made-at-5"
	fi
	i=$((i + 1))
done
SH
	chmod 755 "$1"
}

# spec NAME STEPS [LINE...]: the program's spec, [job] lines after
prog_spec() {
	local name=$1 steps=$2
	shift 2
	printf '[job]\nname = %s\ncommand = %s %s\nsteps = %s\n' "$name" "$STATE/steps.sh" "$steps" "$steps"
	local l
	for l in "$@"; do printf '%s\n' "$l"; done
	printf '[resources]\nranks = auto\n'
}

est() { sed -n "s/^$2=//p" "$MNT/jobs/$1/estimate" | head -1; }
train_steps() { grep '^train,' "$MNT/jobs/$1/metrics.csv" | cut -d, -f2 | tr '\n' ' '; }

# 40 steps: about 9 s on one rank, 5 s on two; a deadline of 8 s only two
# meet. The program is profiled on 1 and 2 ranks, then runs on 2; what the
# profile runs wrote is gone (every step once); the estimate is within a
# quarter of the run (the bench measures how near: bench/estimate)
test_a_program_is_profiled_and_runs_on_the_count_its_deadline_needs() {
	DLH_OPTS="-o cpus=2" dlh_mount
	steps_prog "$STATE/steps.sh"
	prog_spec p 40 'deadline = 8s' > "$STATE/p.ini"
	cp "$STATE/p.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	grep -q '^reason=to be measured before its run: its first steps on 1 rank, then on 2 ranks' "$MNT/jobs/1/estimate" ||
		die "estimate at submission: $(cat "$MNT/jobs/1/estimate")"
	wait_for 60 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/progress"); $(grep -v '^\[rank' "$MNT/jobs/1/log" | tail -5)"
	local log; log=$(grep -v '^\[rank' "$MNT/jobs/1/log")
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "status ($(tail -5 <<< "$log"))"
	grep -q 'launching 1 rank on .* (restart 0, profile run 1 of 2)$' <<< "$log" &&
		grep -q 'launching 2 ranks on .* (restart 0, profile run 2 of 2)$' <<< "$log" &&
		grep -q 'launching 2 ranks on .* (restart 0)$' <<< "$log" || die "launches: $(grep launching <<< "$log")"
	grep -q 'estimated by its profile: 2 x cpu, .* (the fewest joules within its deadline)$' <<< "$log" ||
		die "log: $(grep -E 'profile|estimated' <<< "$log")"
	grep -q '^chosen 2 x cpu: ' "$MNT/jobs/1/plan" && grep -q '^candidate 1 x cpu: ' "$MNT/jobs/1/plan" ||
		die "plan: $(grep -E '^(planner|chosen|candidate)' "$MNT/jobs/1/plan")"
	expect_eq "$(est 1 source)" "its profile" "the estimate's source"
	local pred act err
	pred=$(est 1 total_s)
	act=$(est 1 actual_total_s)
	err=$(est 1 error_total_s)
	echo "measured: $(grep 'profile run [12] of 2: [12] rank' <<< "$log" | sed 's/^.*dlhfs: //' | tr '\n' ';')"
	echo "measured: predicted ${pred} s, actual ${act} s (${err}%), deadline 8 s"
	awk -v p="$pred" 'BEGIN { exit !(p > 0 && p <= 8) }' || die "predicted ${pred} s"
	awk -v e="$err" 'BEGIN { exit !(e > -25 && e < 25) }' || die "the estimate is ${err}% off"
	# refined while it ran, from its rows: the last figure and its error beside the first
	grep -q '^current_total_s=[0-9]' "$MNT/jobs/1/estimate" && grep -q '^error_current_total_s=' "$MNT/jobs/1/estimate" ||
		die "estimate: no current figure: $(cat "$MNT/jobs/1/estimate")"
	echo "measured: refined while running: $(est 1 current_total_s) s at step $(est 1 current_step) ($(est 1 error_current_total_s)%)"
	expect_eq "$(train_steps 1)" "$(seq 1 40 | tr '\n' ' ')" "the run's steps"
	# the profile runs' checkpoint was not the run's to take up
	grep -q 'takes up from' <<< "$log" && die "the run took up a profile run's checkpoint: $(grep 'takes up' <<< "$log")"
	expect_eq "$(ls "$MNT/jobs/1/checkpoints" | grep -c 'step-5.ckpt')" 1 "checkpoints"
	dlh_umount
}

# The fit is the program's record: the next job of it is planned at close()
# with no profile run, and a deadline nothing meets is refused there with
# the best time; profile = true measures it again
test_a_program_on_record_is_planned_at_close_and_an_impossible_deadline_refused() {
	DLH_OPTS="-o cpus=2" dlh_mount
	steps_prog "$STATE/steps.sh"
	prog_spec a 60 > "$STATE/a.ini"
	cp "$STATE/a.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 60 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "job 1"
	ls "$STATE/profiles" | grep -q . || die "no record kept"
	prog_spec b 60 'deadline = 1s' > "$STATE/b.ini"
	expect_errno "Invalid argument" cp "$STATE/b.ini" "$MNT/jobs/new"
	local e; e=$(tail -1 "$MNT/jobs/errors")
	grep -q 'spec: \[job\] deadline: no rank count meets the deadline 1.0s: the fastest, 2 x cpu, is estimated at .* by the record of an earlier run of the program' <<< "$e" ||
		die "errors: $e"
	echo "measured: $e"
	prog_spec c 60 'deadline = 1m' > "$STATE/c.ini"
	cp "$STATE/c.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	expect_eq "$(est 2 source)" "the record of an earlier run of the program" "job 2's estimate at close()"
	grep -q '^chosen 1 x cpu' "$MNT/jobs/2/plan" || die "plan (the fewest joules within a minute): $(grep -E '^(chosen|candidate)' "$MNT/jobs/2/plan")"
	wait_for 60 job_terminal 2 || die "job 2: $(cat "$MNT/jobs/2/progress")"
	expect_eq "$(cat "$MNT/jobs/2/status")" succeeded "job 2"
	grep -q 'profile run' "$MNT/jobs/2/log" && die "job 2 was profiled: $(grep 'profile run' "$MNT/jobs/2/log")"
	prog_spec d 60 'profile = true' > "$STATE/d.ini"
	cp "$STATE/d.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 60 job_terminal 3 || die "job 3: $(cat "$MNT/jobs/3/progress")"
	grep -q 'profile run 2 of 2: 2 ranks' "$MNT/jobs/3/log" || die "job 3 (profile = true): $(grep -v '^\[rank' "$MNT/jobs/3/log" | tail -5)"
	dlh_umount
}

# No record: the first profile shows the deadline cannot be met, and the
# job fails with the best time before its run
test_a_first_profile_that_shows_a_deadline_cannot_be_met_fails_the_job() {
	DLH_OPTS="-o cpus=2" dlh_mount
	steps_prog "$STATE/steps.sh"
	prog_spec p 40 'deadline = 2s' > "$STATE/p.ini"
	cp "$STATE/p.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 60 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/jobs/1/status")" failed "status"
	grep -q '^failed: \[job\] deadline: no rank count meets the deadline 2.0s: the fastest, 2 x cpu, is estimated at .* by its profile$' "$MNT/jobs/1/progress" ||
		die "progress: $(cat "$MNT/jobs/1/progress")"
	grep -q 'launching .* (restart 0)$' "$MNT/jobs/1/log" && die "it ran past its profile: $(grep launching "$MNT/jobs/1/log")"
	dlh_umount
}

# What cannot be timed runs once, as the job's run: a program that does not
# tell its steps (rows, no [job] steps) goes on past its profile with every
# step once; one that writes no rows and ends within its profile ran once
test_a_program_that_cannot_be_timed_runs_once_as_the_jobs_run() {
	DLH_OPTS="-o cpus=2" dlh_mount
	steps_prog "$STATE/steps.sh"
	printf '[job]\ncommand = %s 20\n' "$STATE/steps.sh" > "$STATE/a.ini"
	cp "$STATE/a.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 60 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "job 1"
	grep -q 'not estimated: it does not tell its steps .*; profile run 1 of 1 goes on as the job.s run' "$MNT/jobs/1/log" ||
		die "log: $(grep -v '^\[rank' "$MNT/jobs/1/log" | tail -5)"
	expect_eq "$(grep -c 'launching' "$MNT/jobs/1/log")" 1 "launches"
	expect_eq "$(train_steps 1)" "$(seq 1 20 | tr '\n' ' ')" "its steps"
	printf '[job]\ncommand = /bin/echo once\n' > "$STATE/b.ini"
	cp "$STATE/b.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 30 job_terminal 2 || die "job 2: $(cat "$MNT/jobs/2/progress")"
	expect_eq "$(cat "$MNT/jobs/2/status")" succeeded "job 2"
	expect_eq "$(grep -c '^\[rank 0\] once$' "$MNT/jobs/2/log")" 1 "runs of job 2"
	grep -q 'profile run 1 of 1 ended by itself: it was the job.s run' "$MNT/jobs/2/log" ||
		die "log: $(grep -v '^\[rank' "$MNT/jobs/2/log" | tail -4)"
	dlh_umount
}

# An ordinary user's program is profiled as that user: the profile run's
# files (owned by the user) are removed by the daemon, the run writes its
# own from step 1, and the program's record stays root's
test_an_ordinary_users_program_is_profiled_as_its_owner() {
	local a d
	dlh_user a
	DLH_OPTS="-o allow_other" dlh_mount
	chmod 711 "$STATE"
	d=$(shared_dir)
	steps_prog "$d/steps.sh"
	printf '[job]\ncommand = %s 30\nsteps = 30\n' "$d/steps.sh" > "$d/p.ini"
	chmod 644 "$d/p.ini"
	as "$a" cp "$d/p.ini" "$MNT/jobs/new" || die "submit: $(as "$a" tail -2 "$MNT/jobs/errors")"
	wait_for 60 job_terminal 1 || die "job 1: $(as "$a" cat "$MNT/jobs/1/progress")"
	expect_eq "$(as "$a" cat "$MNT/jobs/1/status")" succeeded "status ($(grep -v '^\[rank' "$STATE/jobs/1/log" | tail -4))"
	grep -q "profile run 1 of 1: [0-9]* steps timed: stopping it" "$STATE/jobs/1/log" ||
		die "log: $(grep -v '^\[rank' "$STATE/jobs/1/log" | tail -5)"
	grep -q 'takes up from' "$STATE/jobs/1/log" && die "the run took up the profile's checkpoint"
	expect_eq "$(as "$a" grep -c '^train,' "$MNT/jobs/1/metrics.csv")" 30 "train rows"
	expect_eq "$(stat -c %U "$STATE/jobs/1/checkpoints/step-5.ckpt")" "$a" "the checkpoint's owner"
	as "$a" ls "$STATE/profiles" >/dev/null 2>&1 && die "the user reads the program records"
	expect_eq "$(stat -c %a "$STATE/profiles")" 700 "mode of the records"
	rm -rf "$d"
	dlh_umount
}
