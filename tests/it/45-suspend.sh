# 45-suspend.sh - ctl verbs: suspend/resume/checkpoint with bit-identical weights,
# and every verb refused (with its errno, changing nothing) where it does not apply

# params_of CKPT: the parameter and optimizer bytes of a checkpoint (header skipped)
params_of() {
	local hdr; hdr=$(od -An -tu4 -j12 -N4 "$1" | tr -d ' ')
	tail -c +$((hdr + 1)) "$1" | md5sum | cut -d' ' -f1
}

# slow_spec NAME [EXTRA LINES...]: 500 steps of a wider MLP, a few seconds on 2 ranks
slow_spec() {
	local name=$1; shift
	printf '[job]\nname = %s\n[data]\ntrain_limit = 4000\ntest_limit = 500\n' "$name"
	printf '[model]\nlayers = 512, 256\n[train]\nepochs = 4\nbatch_size = 32\nlr = 0.02\n'
	printf 'checkpoint_every = 0\n[resources]\nranks = 2\n'
	for l in "$@"; do printf '%s\n' "$l"; done
}

# cmd_spec NAME RANKS COMMAND...: a job running COMMAND under mpirun (not
# preemptible: priorities set here must not move it)
cmd_spec() {
	printf '[job]\nname = %s\ncommand = %s\npreemptible = false\n[resources]\nranks = %s\n' "$1" "$3" "$2"
}

submit() { cp "$1" "$MNT/jobs/new" || die "submit $1 failed: $(tail -3 "$MNT/jobs/errors")"; }

# last_step ID: the step of the newest train row (0 when none)
last_step() {
	local s; s=$(grep '^train,' "$MNT/jobs/$1/metrics.csv" 2>/dev/null | tail -1 | cut -d, -f2)
	echo "${s:-0}"
}
step_at_least() { [ "$(last_step "$1")" -ge "$2" ]; }

# ctl ID VERB...: writes the verb line to the job's ctl
ctl() { local id=$1; shift; echo "$*" > "$MNT/jobs/$id/ctl"; }

cpus_used() { cat "$MNT/pool/nodes/$(hostname)/cpus_used"; }

test_suspend_resume_twice_gives_identical_weights() {
	dlh_mount
	slow_spec paused > "$STATE/b.ini"
	slow_spec straight > "$STATE/a.ini"
	submit "$STATE/b.ini"
	local round at
	for round in 1 2; do
		at=$((round * 150))
		wait_for 60 status_is 1 running || die "round $round: not running: $(cat "$MNT/jobs/1/progress")"
		wait_for 60 step_at_least 1 "$at" || die "round $round: no step $at: $(cat "$MNT/jobs/1/progress")"
		ctl 1 suspend || die "round $round: suspend refused: $(tail -2 "$MNT/jobs/1/log")"
		wait_for 30 status_is 1 suspended || die "round $round: status $(cat "$MNT/jobs/1/status")"
		wait_for 5 no_ranks 1 || die "round $round: ranks left: $(rank_pids 1)"
		expect_eq "$(cpus_used)" 0 "round $round: slots held while suspended"
		grep -q 'on request, suspending' "$MNT/jobs/1/log" || die "round $round: no suspend checkpoint in the log"
		grep -q "^step-0*$(last_step 1).ckpt\$" "$MNT/jobs/1/checkpoints/latest" ||
			die "round $round: latest $(cat "$MNT/jobs/1/checkpoints/latest"), last row $(last_step 1)"
		grep -q '^suspended' "$MNT/jobs/1/progress" || die "progress: $(cat "$MNT/jobs/1/progress")"
		ctl 1 resume || die "round $round: resume refused"
	done
	wait_for 120 job_terminal 1 || die "did not end: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "suspended job ($(grep dlh-train "$MNT/jobs/1/log" | tail -2))"
	[ "$(grep -c 'start step [1-9]' "$MNT/jobs/1/log")" -eq 2 ] || die "expected two resumed starts: $(grep 'start step' "$MNT/jobs/1/log")"
	grep -q '^suspends=2$' "$STATE/jobs/1/job" || die "record: $(grep suspends "$STATE/jobs/1/job")"
	# every step exactly once, in order: no gaps, no duplicates
	grep '^train,' "$MNT/jobs/1/metrics.csv" | cut -d, -f2 | cmp -s - <(seq 1 500) ||
		die "train steps of metrics.csv are not 1..500 once each"
	submit "$STATE/a.ini"
	wait_for 120 job_terminal 2 || die "straight run did not end"
	expect_eq "$(cat "$MNT/jobs/2/status")" succeeded "straight run"
	expect_eq "$(params_of "$STATE/jobs/1/checkpoints/final.ckpt")" \
		"$(params_of "$STATE/jobs/2/checkpoints/final.ckpt")" "weights after two suspends"
	local a b
	a=$(grep '^train,' "$MNT/jobs/2/metrics.csv" | cut -d, -f1,2,3,5,6,7 | md5sum)
	b=$(grep '^train,' "$MNT/jobs/1/metrics.csv" | cut -d, -f1,2,3,5,6,7 | md5sum)
	expect_eq "$b" "$a" "metrics.csv rows (step, epoch, loss, accuracy, lr) after two suspends"
	dlh_umount
}

test_checkpoint_verb_writes_one_and_keeps_running() {
	dlh_mount
	slow_spec ckpt > "$STATE/a.ini"
	submit "$STATE/a.ini"
	wait_for 60 step_at_least 1 50 || die "no step 50: $(cat "$MNT/jobs/1/progress")"
	[ -e "$MNT/jobs/1/checkpoints/latest" ] && die "a checkpoint before any was asked for"
	ctl 1 checkpoint || die "checkpoint refused"
	wait_for 20 test -e "$MNT/jobs/1/checkpoints/latest" || die "no checkpoint after the verb"
	expect_eq "$(cat "$MNT/jobs/1/status")" running "status after checkpoint"
	grep -q 'checkpoint requested by uid 0' "$MNT/jobs/1/log" || die "log lacks the request"
	ctl 1 cancel
	wait_for 10 status_is 1 cancelled || die "cancel: $(cat "$MNT/jobs/1/status")"
	dlh_umount
}

# refused ERRNO_TEXT ID VERB...: the verb fails with that errno and changes
# neither the job's status nor its record; the log names the reason
refused() {
	local want=$1 id=$2; shift 2
	local before status
	before=$(cat "$STATE/jobs/$id/job")
	status=$(cat "$MNT/jobs/$id/status")
	expect_errno "$want" bash -c "echo '$*' > '$MNT/jobs/$id/ctl'"
	expect_eq "$(cat "$MNT/jobs/$id/status")" "$status" "status of job $id after \"$*\""
	[ "$(cat "$STATE/jobs/$id/job")" = "$before" ] || die "record of job $id changed after \"$*\""
	tail -1 "$MNT/jobs/$id/log" | grep -q "ctl: " || die "log of job $id lacks the reason for \"$*\""
}

test_every_verb_refused_where_it_does_not_apply() {
	dlh_mount
	cmd_spec ok 2 /bin/true > "$STATE/t.ini"
	cmd_spec bad 2 /bin/false > "$STATE/f.ini"
	cmd_spec sleeper 2 "/bin/sleep 120" > "$STATE/s.ini"
	submit "$STATE/t.ini"
	wait_for 30 status_is 1 succeeded || die "job 1: $(cat "$MNT/jobs/1/status")"
	submit "$STATE/f.ini"
	wait_for 30 status_is 2 failed || die "job 2: $(cat "$MNT/jobs/2/status")"
	submit "$STATE/s.ini"   # 3: running
	wait_for 30 status_is 3 running || die "job 3: $(cat "$MNT/jobs/3/status")"
	submit "$STATE/s.ini"   # 4: queued
	submit "$STATE/s.ini"   # 5: suspended while queued (held)
	submit "$STATE/s.ini"   # 6: cancelled while queued
	expect_eq "$(cat "$MNT/jobs/4/status")" queued "job 4"
	ctl 5 suspend || die "suspend of a queued job refused"
	expect_eq "$(cat "$MNT/jobs/5/status")" suspended "job 5 after suspend"
	ctl 6 cancel || die "cancel of a queued job refused"
	expect_eq "$(cat "$MNT/jobs/6/status")" cancelled "job 6 after cancel"

	local busy="Device or resource busy" inval="Invalid argument" id v
	# ended jobs: every verb is EBUSY
	for id in 1 2 6; do
		for v in cancel suspend resume checkpoint "priority 5"; do
			refused "$busy" "$id" "$v"
		done
	done
	refused "$busy" 3 resume        # running
	refused "$busy" 4 resume        # queued
	refused "$busy" 4 checkpoint
	refused "$busy" 5 suspend       # suspended
	refused "$busy" 5 checkpoint
	# unknown verbs and bad arguments: EINVAL in every state
	for id in 1 2 3 4 5 6; do
		for v in frobnicate "cancel now" "resume 1" priority "priority x" "priority 1001" \
			"priority -1001" "priority 5 6" "priority 2.5"; do
			refused "$inval" "$id" "$v"
		done
	done
	# nothing moved: the runner still runs, the queue still waits
	expect_eq "$(cat "$MNT/jobs/3/status")" running "job 3 after the refusals"
	expect_eq "$(cat "$MNT/jobs/4/status")" queued "job 4 after the refusals"

	# where they apply, they work
	ctl 4 priority 7 || die "priority of a queued job refused"
	grep -q '^priority=7$' "$STATE/jobs/4/job" || die "priority not recorded"
	ctl 5 priority -3 || die "priority of a suspended job refused"
	ctl 3 priority 2 || die "priority of a running job refused"
	ctl 5 resume || die "resume refused"
	expect_eq "$(cat "$MNT/jobs/5/status")" queued "job 5 after resume"
	# a program that does not handle SIGUSR2 dies of it: still suspended, not failed
	ctl 3 suspend || die "suspend of a running job refused"
	wait_for 30 status_is 3 suspended || die "job 3 after suspend: $(cat "$MNT/jobs/3/status")"
	wait_for 10 status_is 4 running || die "job 4 did not take the freed slots: $(cat "$MNT/jobs/4/status")"
	refused "$busy" 3 suspend
	ctl 3 cancel || die "cancel of a suspended job refused"
	expect_eq "$(cat "$MNT/jobs/3/status")" cancelled "job 3 after cancel"
	ctl 4 cancel && ctl 5 cancel || die "final cancels refused"
	wait_for 10 status_is 4 cancelled || die "job 4: $(cat "$MNT/jobs/4/status")"
	dlh_umount
}

# a suspend sent right after a resume, before the trainer takes signals, is
# held by the run's shepherd and delivered when it does: 50 pairs back to
# back, every suspend takes effect at a checkpoint (none by the SIGTERM
# fallback, none lost to a run that goes on)
test_suspend_right_after_resume_is_never_lost() {
	dlh_mount
	slow_spec pairs | sed 's/^epochs = 4$/epochs = 400/' > "$STATE/p.ini"
	submit "$STATE/p.ini"
	wait_for 60 status_is 1 running || die "not running: $(cat "$MNT/jobs/1/progress")"
	ctl 1 suspend || die "first suspend refused"
	wait_for 30 status_is 1 suspended || die "first suspend: $(cat "$MNT/jobs/1/status")"
	local i st
	for i in $(seq 50); do
		ctl 1 resume || die "pair $i: resume refused: $(tail -2 "$MNT/jobs/1/log")"
		st=$(cat "$MNT/jobs/1/status")
		ctl 1 suspend || die "pair $i: suspend refused ($st): $(tail -2 "$MNT/jobs/1/log")"
		wait_for 30 status_is 1 suspended ||
			die "pair $i: status $(cat "$MNT/jobs/1/status") after a suspend sent while $st"
		wait_for 5 no_ranks 1 || die "pair $i: ranks left: $(rank_pids 1)"
	done
	grep -q "did not suspend within" "$STATE/jobs/1/log" &&
		die "a suspend took the SIGTERM fallback: $(grep -m1 -B3 "did not suspend within" "$STATE/jobs/1/log")"
	grep -q '^suspends=51$' "$STATE/jobs/1/job" || die "record: $(grep suspends "$STATE/jobs/1/job")"
	echo "measured: 50 resume/suspend pairs: $(grep -c 'on request, suspending' "$STATE/jobs/1/log") suspends at a checkpoint"
	# the train rows stay every step once, in order
	grep '^train,' "$MNT/jobs/1/metrics.csv" | cut -d, -f2 | cmp -s - <(seq 1 "$(last_step 1)") ||
		die "train steps of metrics.csv are not 1..$(last_step 1) once each"
	ctl 1 cancel
	dlh_umount
}

# a damaged newest checkpoint (one byte flipped) is refused by its checksum
# and the run resumes from the one before, saying so; no step is lost or
# recorded twice
test_a_damaged_checkpoint_falls_back_to_the_previous_one() {
	dlh_mount
	slow_spec damaged | sed 's/^checkpoint_every = 0$/checkpoint_every = 50/' > "$STATE/d.ini"
	submit "$STATE/d.ini"
	wait_for 60 step_at_least 1 230 || die "no step 230: $(cat "$MNT/jobs/1/progress")"
	ctl 1 suspend || die "suspend refused"
	wait_for 30 status_is 1 suspended || die "status $(cat "$MNT/jobs/1/status")"
	local newest f byte
	newest=$(cat "$STATE/jobs/1/checkpoints/latest")
	f="$STATE/jobs/1/checkpoints/$newest"
	byte=$(od -An -tu1 -j 4000 -N1 "$f" | tr -d ' ')
	printf "$(printf '\\%03o' $(((byte + 1) % 256)))" | dd of="$f" bs=1 seek=4000 conv=notrunc status=none
	ctl 1 resume || die "resume refused"
	wait_for 120 job_terminal 1 || die "did not end: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "status ($(tail -3 "$MNT/jobs/1/log"))"
	grep -q "checkpoint \"$newest\" cannot be used (.*checksum.*); resuming from the previous one" "$MNT/jobs/1/log" ||
		die "log: $(grep -i checkpoint "$MNT/jobs/1/log" | tail -3)"
	grep '^train,' "$MNT/jobs/1/metrics.csv" | cut -d, -f2 | cmp -s - <(seq 1 500) ||
		die "train steps of metrics.csv are not 1..500 once each"
	dlh_umount
}

# a time limit checkpoints first: time_limit_grace before the limit the run
# is told to checkpoint and stop; the job fails at its limit with that
# checkpoint, and `resume` continues it with every step once
test_a_time_limit_checkpoints_first_and_resume_continues() {
	dlh_mount
	local spec=$STATE/t.ini
	slow_spec limited | sed 's/^epochs = 4$/epochs = 150/
		s/^name = limited$/name = limited\ntime_limit = 20s\ntime_limit_grace = 5s/' > "$spec"
	submit "$spec"
	wait_for 60 job_terminal 1 || die "did not stop: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/jobs/1/status")" failed "status at the limit"
	grep -q "time limit 0:20 reached: the run stopped at a checkpoint it took then; \`resume\` continues it" \
		"$MNT/jobs/1/result" ||
		die "result: $(cat "$MNT/jobs/1/result"); log: $(grep -v '^\[rank 0\] epoch' "$MNT/jobs/1/log" | tail -25)"
	grep -q "time limit 0:20 in 0:05: asking the run to checkpoint and stop" "$MNT/jobs/1/log" ||
		die "log: $(grep dlhfs: "$MNT/jobs/1/log" | tail -3)"
	local stopped
	stopped=$(last_step 1)
	[ "$stopped" -gt 1 ] || die "stopped at step $stopped"
	expect_eq "$(cat "$MNT/jobs/1/checkpoints/latest")" "$(printf 'step-%08d.ckpt' "$stopped")" \
		"the checkpoint taken at the stop"
	# the job resumed to its end is sized from how far that run got (125
	# steps an epoch): about 2.5 runs' steps, so it takes 3 runs of 20 s on
	# any machine (a sanitizer build, or suites run side by side, get less
	# far in a run: sized by steps, the job took 5 runs here alone, 22 under
	# ASan on CI); each run goes on from where the one before stopped
	local epochs=$(((stopped * 5 / 2 + 124) / 125))
	sed "s/^epochs = 150$/epochs = $epochs/; s/^name = limited$/name = resumed/" "$spec" > "$STATE/r.ini"
	submit "$STATE/r.ini"
	wait_for 60 job_terminal 2 || die "job 2 did not stop: $(cat "$MNT/jobs/2/progress")"
	local runs=1 before=0 now
	while [ "$(cat "$MNT/jobs/2/status")" = failed ] && [ "$runs" -lt 12 ]; do
		now=$(last_step 2)
		[ "$now" -gt "$before" ] || die "run $runs ended at step $now, the one before at $before"
		before=$now
		ctl 2 resume || die "resume of a job stopped by its time limit refused: $(tail -2 "$MNT/jobs/2/log")"
		runs=$((runs + 1))
		wait_for 30 grep -q "start step $now\$" "$MNT/jobs/2/log" ||
			die "run $runs did not start at step $now: $(grep 'start step' "$MNT/jobs/2/log" | tail -3)"
		wait_for 60 job_terminal 2 || die "run $runs did not stop: $(cat "$MNT/jobs/2/progress")"
	done
	expect_eq "$(cat "$MNT/jobs/2/status")" succeeded "status after $runs runs, which started at steps $(grep -o 'start step [0-9]*' "$MNT/jobs/2/log" | cut -d' ' -f3 | tr '\n' ' ') ($(tail -2 "$MNT/jobs/2/log"))"
	[ "$runs" -ge 2 ] || die "$((epochs * 125)) steps took one run: the first run of job 1 reached step $stopped"
	echo "measured: a run of 20 s stopped first at step $stopped; a job of $((epochs * 125)) steps took $runs runs"
	grep '^train,' "$MNT/jobs/2/metrics.csv" | cut -d, -f2 | cmp -s - <(seq 1 $((epochs * 125))) ||
		die "train steps of metrics.csv are not 1..$((epochs * 125)) once each"
	dlh_umount
}

# A user's program ([job] command) run again takes up where it left: a
# restart after its rank was killed and a suspend + resume each get
# DLH_RESUME_FROM (the newest checkpoint; dlhfs keeps `latest` pointing at
# it) and DLH_START_STEP (the step in its name), and metrics.csv is cut back
# to that step: the train rows are steps 1..N, each once
test_a_command_run_again_takes_up_from_its_newest_checkpoint() {
	dlh_mount
	local prog=$STATE/steps.sh
	cat > "$prog" <<'PROG'
#!/bin/sh
# a user's program: 60 steps, a row each, a checkpoint every 5; on SIGUSR2
# it stops at its next checkpoint (exit 75)
s=${DLH_START_STEP:-0} stop=0
trap 'stop=1' USR2
[ -s "$DLH_METRICS_CSV" ] || echo kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s > "$DLH_METRICS_CSV"
while [ "$s" -lt 60 ]; do
	s=$((s + 1))
	echo "train,$s,1,$s,0.5,0.5,0.1,100" >> "$DLH_METRICS_CSV"
	if [ $((s % 5)) = 0 ]; then
		: > "$DLH_CHECKPOINT_DIR/step-$s.ckpt"
		[ "$stop" = 1 ] && exit 75
	fi
	sleep 0.05
done
PROG
	chmod 755 "$prog"
	printf '[job]\nname = steps\ncommand = %s\nrestart = on-failure\n[resources]\nranks = 1\n' "$prog" > "$STATE/c.ini"
	cp "$STATE/c.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 30 eval '[ "$(csv_rows 1 train)" -ge 12 ]' || die "no rows: $(cat "$MNT/jobs/1/progress")"
	pkill -KILL -f "^/bin/sh $prog" || die "the program's rank was not found"
	wait_for 30 grep -q 'takes up from .*/step-[0-9]*\.ckpt, step [0-9]*' "$MNT/jobs/1/log" ||
		die "log: $(tail -5 "$MNT/jobs/1/log")"
	wait_for 30 eval '[ "$(csv_rows 1 train)" -ge 35 ]' || die "no rows after the restart: $(cat "$MNT/jobs/1/progress")"
	echo suspend > "$MNT/jobs/1/ctl" || die "suspend refused"
	wait_for 30 status_is 1 suspended || die "status: $(cat "$MNT/jobs/1/status")"
	local latest
	latest=$(cat "$STATE/jobs/1/checkpoints/latest")
	expect_eq "$latest" "step-$(grep '^train,' "$MNT/jobs/1/metrics.csv" | tail -1 | cut -d, -f2).ckpt" "latest"
	echo resume > "$MNT/jobs/1/ctl" || die "resume refused"
	wait_for 60 status_is 1 succeeded || die "status: $(cat "$MNT/jobs/1/status") ($(tail -3 "$MNT/jobs/1/log"))"
	grep -q "takes up from $STATE/jobs/1/checkpoints/$latest, step ${latest//[!0-9]/}" "$MNT/jobs/1/log" ||
		die "log: $(grep 'takes up' "$MNT/jobs/1/log")"
	echo "measured: $(grep -o 'takes up from [^ ]*, step [0-9]*' "$MNT/jobs/1/log" | sed 's|.*/||' | tr '\n' ';')"
	expect_eq "$(grep '^train,' "$MNT/jobs/1/metrics.csv" | cut -d, -f2 | tr '\n' ' ')" "$(seq 1 60 | tr '\n' ' ')" "train steps"
	dlh_umount
}

# a program that ignores the suspend signal is stopped with SIGTERM after the
# suspend grace (30 s) and still ends suspended: it resumes from its newest
# checkpoint
test_a_command_ignoring_suspend_is_terminated_after_the_grace_and_ends_suspended() {
	dlh_mount
	printf '#!/bin/sh\ntrap "" USR2\necho ready\nexec sleep 300\n' > "$STATE/deaf.sh"
	chmod 755 "$STATE/deaf.sh"
	printf '[job]\ncommand = %s/deaf.sh\n[resources]\nranks = 1\n' "$STATE" > "$STATE/d.ini"
	cp "$STATE/d.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 30 grep -q '\[rank 0\] ready' "$MNT/jobs/1/log" || die "not started: $(tail -3 "$MNT/jobs/1/log")"
	local t0=$SECONDS
	echo suspend > "$MNT/jobs/1/ctl" || die "suspend refused"
	wait_for 60 job_terminal_or_suspended 1 || die "job 1: $(cat "$MNT/jobs/1/status")"
	local took=$((SECONDS - t0))
	echo "measured: the run that ignored SIGUSR2 ended ${took} s after the suspend"
	[ "$took" -ge 29 ] || die "it ended after $took s, before the 30 s grace"
	expect_eq "$(cat "$MNT/jobs/1/status")" suspended "status"
	grep -q 'the run did not suspend within 30 s: SIGTERM' "$MNT/jobs/1/log" || die "log: $(tail -3 "$MNT/jobs/1/log")"
	tail -1 "$MNT/jobs/1/log" | grep -q 'suspended: .*the run did not stop at a checkpoint, it resumes from its newest one' ||
		die "log: $(tail -1 "$MNT/jobs/1/log")"
	dlh_umount
}
job_terminal_or_suspended() { job_terminal "$1" || status_is "$1" suspended; }
