# 70-preempt.sh - a waiting job of higher priority suspends lower-priority runs
# (checkpoint first); the victims resume by themselves and end bit-identical

params_of() {
	local hdr; hdr=$(od -An -tu4 -j12 -N4 "$1" | tr -d ' ')
	tail -c +$((hdr + 1)) "$1" | md5sum | cut -d' ' -f1
}

submit() { cp "$1" "$MNT/jobs/new" || die "submit $1 failed: $(tail -3 "$MNT/jobs/errors")"; }

# one_rank NAME PRIORITY [EXTRA LINES...]: 500 steps of a wider MLP on one rank
one_rank() {
	local name=$1 prio=$2; shift 2
	printf '[job]\nname = %s\npriority = %s\n[data]\ntrain_limit = 4000\ntest_limit = 500\n' "$name" "$prio"
	printf '[model]\nlayers = 512, 256\n[train]\nepochs = 4\nbatch_size = 32\nlr = 0.02\n'
	printf 'checkpoint_every = 0\n[resources]\nranks = 1\n'
	for l in "$@"; do printf '%s\n' "$l"; done
}

last_step() {
	local s; s=$(grep '^train,' "$MNT/jobs/$1/metrics.csv" 2>/dev/null | tail -1 | cut -d, -f2)
	echo "${s:-0}"
}
step_at_least() { [ "$(last_step "$1")" -ge "$2" ]; }

field() { sed -n "s/^$2=//p" "$STATE/jobs/$1/job"; }

test_priority_job_preempts_the_youngest_low_priority_run() {
	DLH_OPTS="-o cpus=2" dlh_mount
	# job 1 runs 5 times longer than the victim: it must still run when job
	# 2 has started (under ASan 500 steps took 2 s, about job 2's start-up)
	one_rank low-a 0 | sed 's/^epochs = 4$/epochs = 20/' > "$STATE/a.ini"
	one_rank low-b 0 > "$STATE/b.ini"
	printf '[job]\nname = urgent\npriority = 10\n[data]\ntrain_limit = 512\ntest_limit = 256\n[model]\nlayers = 32\n[train]\nepochs = 1\n[resources]\nranks = 1\n' > "$STATE/p.ini"
	submit "$STATE/a.ini"
	wait_for 30 step_at_least 1 1 || die "job 1 did not start training"
	submit "$STATE/b.ini"
	wait_for 60 step_at_least 2 50 || die "job 2 did not reach step 50: $(cat "$MNT/jobs/2/progress")"
	status_is 1 running || die "job 1 ended before the preemption could be tested"
	submit "$STATE/p.ini"
	# the urgent job starts within seconds: job 2 (the younger) checkpoints and yields
	wait_for 15 sh -c "grep -q '^status=running\|^status=succeeded' '$STATE/jobs/3/job'" ||
		die "urgent job did not start: $(cat "$MNT/jobs/3/progress")"
	local waited; waited=$(awk -v a="$(field 3 submitted)" -v b="$(field 3 started)" 'BEGIN { print b - a }')
	awk -v w="$waited" 'BEGIN { exit !(w < 10) }' || die "urgent job waited $waited s"
	grep -q 'preempted by job 3 (priority 10 > 0)' "$MNT/jobs/2/log" || die "job 2 log: $(tail -3 "$MNT/jobs/2/log")"
	grep -q 'on request, suspending' "$MNT/jobs/2/log" || die "job 2 stopped without its checkpoint"
	grep -q 'preempting job 2' "$MNT/jobs/3/log" || die "job 3 log: $(tail -3 "$MNT/jobs/3/log")"
	grep -q 'preempted' "$MNT/jobs/1/log" && die "job 1 was preempted too"
	wait_for 60 sh -c "grep -q '^status=succeeded' '$STATE/jobs/3/job'" || die "urgent job: $(cat "$MNT/jobs/3/status")"
	# the victim resumes by itself and ends as if never stopped
	wait_for 120 job_terminal 2 || die "job 2 did not end: $(cat "$MNT/jobs/2/progress")"
	wait_for 120 job_terminal 1 || die "job 1 did not end: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/jobs/2/status")" succeeded "victim"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "job 1"
	expect_eq "$(field 2 suspends)" 1 "suspends of the victim"
	grep -q 'start step [1-9]' "$MNT/jobs/2/log" || die "the victim did not resume from its checkpoint"
	awk -v a="$(field 2 finished)" -v b="$(field 3 started)" 'BEGIN { exit !(a > b) }' || die "the victim ended before the urgent job started"
	grep '^train,' "$MNT/jobs/2/metrics.csv" | cut -d, -f2 | cmp -s - <(seq 1 500) ||
		die "train steps of the victim are not 1..500 once each"
	# the victim's spec run once more, uninterrupted: the same weights
	one_rank ref 0 > "$STATE/r.ini"
	submit "$STATE/r.ini"
	wait_for 120 job_terminal 4 || die "job 4 did not end: $(cat "$MNT/jobs/4/progress")"
	expect_eq "$(params_of "$STATE/jobs/2/checkpoints/final.ckpt")" \
		"$(params_of "$STATE/jobs/4/checkpoints/final.ckpt")" "victim's weights against the uninterrupted run"
	dlh_umount
}

test_preemptible_false_and_equal_priority_are_never_preempted() {
	DLH_OPTS="-o cpus=2" dlh_mount
	printf '[job]\ncommand = /bin/sleep 120\npreemptible = false\n[resources]\nranks = 1\n' > "$STATE/a.ini"
	printf '[job]\ncommand = /bin/sleep 120\npriority = 10\n[resources]\nranks = 1\n' > "$STATE/b.ini"
	printf '[job]\ncommand = /bin/sleep 120\npriority = 10\n[resources]\nranks = 2\n' > "$STATE/c.ini"
	submit "$STATE/a.ini"   # 1: priority 0, not preemptible
	submit "$STATE/b.ini"   # 2: priority 10
	submit "$STATE/c.ini"   # 3: priority 10, needs both slots: nobody may yield
	expect_eq "$(cat "$MNT/jobs/1/status") $(cat "$MNT/jobs/2/status") $(cat "$MNT/jobs/3/status")" \
		"running running queued" "states"
	grep -q preempt "$MNT/jobs/1/log" "$MNT/jobs/2/log" "$MNT/jobs/3/log" && die "someone was preempted"
	# with a slot free, job 3 still waits for job 2: equal priority never preempts
	echo cancel > "$MNT/jobs/1/ctl"
	wait_for 10 status_is 1 cancelled || die "job 1: $(cat "$MNT/jobs/1/status")"
	expect_eq "$(cat "$MNT/jobs/2/status") $(cat "$MNT/jobs/3/status")" "running queued" "states"
	grep -q preempt "$MNT/jobs/2/log" && die "job 2 was preempted by an equal priority"
	echo cancel > "$MNT/jobs/2/ctl"
	wait_for 10 status_is 3 running || die "job 3: $(cat "$MNT/jobs/3/progress")"
	echo cancel > "$MNT/jobs/3/ctl"
	wait_for 10 status_is 3 cancelled || die "job 3: $(cat "$MNT/jobs/3/status")"
	dlh_umount
}
