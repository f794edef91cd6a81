# 40-control.sh - cancel through ctl, a rank killed mid-run, remount on the same state

long_spec() {
	printf '[job]\nname = %s\n[data]\ntest_limit = 1000\n[train]\nepochs = 20\ncheckpoint_every = 50\n[resources]\nranks = 2\n' "$1"
}

test_cancel_stops_every_rank() {
	dlh_mount
	long_spec cancelme > "$STATE/l.ini"
	cp "$STATE/l.ini" "$MNT/jobs/new" || die "submit failed"
	wait_for 60 sh -c "[ \$(grep -c '^train,' '$MNT/jobs/1/metrics.csv') -ge 5 ]" || die "no training rows"
	[ "$(rank_pids 1 | wc -l)" -eq 2 ] || die "expected 2 rank processes, found: $(rank_pids 1)"
	echo cancel > "$MNT/jobs/1/ctl" || die "cancel write failed"
	wait_for 10 status_is 1 cancelled || die "status: $(cat "$MNT/jobs/1/status")"
	wait_for 5 no_ranks 1 || die "ranks left after cancel: $(rank_pids 1)"
	pgrep -x mpirun >/dev/null && pgrep -af mpirun | grep -q "$STATE/jobs/1 " && die "mpirun left"
	grep -q 'cancel requested by uid 0' "$MNT/jobs/1/log" || die "log lacks the cancel"
	grep -q '^status=cancelled$' "$MNT/jobs/1/result" || die "result: $(cat "$MNT/jobs/1/result")"
	expect_eq "$(cat "$MNT/pool/nodes/$(hostname)/cpus_used")" 0 "slots after cancel"
	dlh_umount
}

test_ctl_rejects_unknown_verbs_and_late_cancel() {
	dlh_mount
	slice_spec verbs 1 > "$STATE/s.ini"
	cp "$STATE/s.ini" "$MNT/jobs/new" || die "submit failed"
	expect_errno "Invalid argument" bash -c "echo frobnicate > '$MNT/jobs/1/ctl'"
	grep -q 'unknown verb "frobnicate"' "$MNT/jobs/1/log" || die "log lacks the rejection"
	wait_for 120 job_terminal 1 || die "did not end"
	expect_errno "Device or resource busy" bash -c "echo cancel > '$MNT/jobs/1/ctl'"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "status after a late cancel"
	grep -q '^cancel' "$MNT/jobs/1/ctl" || die "reading ctl should list the verbs"
	dlh_umount
}

test_cancel_of_a_queued_job() {
	dlh_mount
	long_spec runner > "$STATE/a.ini"
	long_spec waiter > "$STATE/b.ini"
	cp "$STATE/a.ini" "$MNT/jobs/new" && cp "$STATE/b.ini" "$MNT/jobs/new" || die "submit failed"
	expect_eq "$(cat "$MNT/jobs/2/status")" queued "second job"
	echo cancel > "$MNT/jobs/2/ctl" || die "cancel of queued job failed"
	expect_eq "$(cat "$MNT/jobs/2/status")" cancelled "queued job after cancel"
	echo cancel > "$MNT/jobs/1/ctl"
	wait_for 10 status_is 1 cancelled || die "first job: $(cat "$MNT/jobs/1/status")"
	dlh_umount
}

# rank_of PID: the MPI rank of a dlh-train process, from its environment
rank_of() { tr '\0' '\n' < "/proc/$1/environ" | sed -n 's/^OMPI_COMM_WORLD_RANK=//p'; }

test_killed_rank_fails_the_job_without_orphans() {
	dlh_mount
	long_spec victim > "$STATE/l.ini"
	cp "$STATE/l.ini" "$MNT/jobs/new" || die "submit failed"
	wait_for 60 sh -c "[ \$(grep -c '^train,' '$MNT/jobs/1/metrics.csv') -ge 5 ]" || die "no training rows"
	local p victim=
	for p in $(rank_pids 1); do
		[ "$(rank_of "$p")" = 1 ] && victim=$p
	done
	[ -n "$victim" ] || die "rank 1 not found among $(rank_pids 1)"
	kill -KILL "$victim"
	wait_for 20 status_is 1 failed || die "status: $(cat "$MNT/jobs/1/status")"
	wait_for 5 no_ranks 1 || die "ranks left: $(rank_pids 1)"
	grep -q 'exited on signal 9' "$MNT/jobs/1/log" || die "log lacks the reason: $(tail -5 "$MNT/jobs/1/log")"
	grep -q '^reason=.*signal 9' "$MNT/jobs/1/result" || die "result: $(cat "$MNT/jobs/1/result")"
	dlh_umount
}

test_remount_keeps_finished_jobs() {
	dlh_mount
	local state=$STATE
	slice_spec keep 1 > "$STATE/s.ini"
	cp "$STATE/s.ini" "$MNT/jobs/new" || die "submit failed"
	wait_for 120 job_terminal 1 || die "did not end"
	printf '[train]\nepochs = -1\n' > "$STATE/bad.ini"
	cp "$STATE/bad.ini" "$MNT/jobs/new" 2>/dev/null && die "bad spec accepted"
	local f before=$STATE/before
	mkdir "$before"
	for f in status spec metrics metrics.csv plan result progress; do
		cat "$MNT/jobs/1/$f" > "$before/$f"
	done
	cat "$MNT/jobs/errors" > "$before/errors"
	ls "$MNT/jobs/1/checkpoints" > "$before/ckpts"
	dlh_umount
	dlh_mount "$state"
	for f in status spec metrics metrics.csv plan result progress; do
		cmp -s "$before/$f" "$MNT/jobs/1/$f" || die "jobs/1/$f changed across the remount"
	done
	cmp -s "$before/errors" "$MNT/jobs/errors" || die "jobs/errors changed across the remount"
	ls "$MNT/jobs/1/checkpoints" | cmp -s "$before/ckpts" - || die "checkpoints changed"
	expect_eq "$(readlink "$MNT/jobs/keep")" 1 "name link after remount"
	# ids are never reused
	slice_spec next 1 > "$STATE/n.ini"
	cp "$STATE/n.ini" "$MNT/jobs/new" || die "submit after remount failed"
	[ -d "$MNT/jobs/2" ] || die "the next job is not 2: $(ls "$MNT/jobs")"
	wait_for 120 job_terminal 2 || die "job 2 did not end"
	dlh_umount
}

test_unmount_while_running_requeues_and_resumes() {
	dlh_mount
	local state=$STATE
	long_spec resume > "$STATE/l.ini"
	cp "$STATE/l.ini" "$MNT/jobs/new" || die "submit failed"
	wait_for 60 test -e "$MNT/jobs/1/checkpoints/latest" || die "no checkpoint"
	dlh_umount
	no_ranks 1 || die "ranks survive the unmount: $(rank_pids 1)"
	grep -q '^status=queued' "$state/jobs/1/job" || die "record: $(cat "$state/jobs/1/job")"
	local ck; ck=$(cat "$state/jobs/1/checkpoints/latest")
	dlh_mount "$state"
	wait_for 30 status_is 1 running || die "not resumed: $(cat "$MNT/jobs/1/status")"
	# the trainer itself says where it starts: past step 0 (the unmount's
	# own line says "resumes" too, so that word proves nothing)
	wait_for 60 grep -q 'start step [1-9]' "$MNT/jobs/1/log" || die "did not resume from a checkpoint: $(grep -e 'start step' -e dlhfs: "$MNT/jobs/1/log" | tail -5)"
	echo cancel > "$MNT/jobs/1/ctl"
	wait_for 10 status_is 1 cancelled || die "cancel after resume"
	# no step appears twice in metrics.csv
	local dups; dups=$(grep '^train,' "$MNT/jobs/1/metrics.csv" | cut -d, -f2 | sort | uniq -d | head -3)
	[ -z "$dups" ] || die "steps twice in metrics.csv: $dups (resumed from $ck)"
	dlh_umount
}
