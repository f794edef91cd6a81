# 47-reasons.sh - a failed job's result names the real cause: the launcher
# killed, a rank killed, a user command's own error (its last lines)

# reason_of ID: the reason line of the job's result
reason_of() { sed -n 's/^reason=//p' "$MNT/jobs/$1/result"; }

test_mpirun_killed_is_named() {
	dlh_mount
	slice_spec killed 500 > "$STATE/s.ini"
	cp "$STATE/s.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 30 ranks_are 1 2 || die "no 2 ranks: $(cat "$MNT/jobs/1/progress")"
	local shepherd mpirun
	shepherd=$(sed -n 's/^pid=//p' "$STATE/jobs/1/run.handle")
	mpirun=$(pgrep -P "$shepherd" -x mpirun) || die "no mpirun below the shepherd $shepherd"
	kill -KILL "$mpirun"
	wait_for 30 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/status")"
	expect_eq "$(cat "$MNT/jobs/1/status")" failed "status"
	expect_eq "$(reason_of 1)" "mpirun was killed by signal 9 (Killed)" "reason"
	wait_for 5 no_ranks 1 || die "ranks left: $(rank_pids 1)"
	dlh_umount
}

test_a_killed_shepherd_is_named_not_mpirun() {
	dlh_mount
	slice_spec held 500 > "$STATE/s.ini"
	cp "$STATE/s.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 30 ranks_are 1 2 || die "no 2 ranks: $(cat "$MNT/jobs/1/progress")"
	local shepherd
	shepherd=$(sed -n 's/^pid=//p' "$STATE/jobs/1/run.handle")
	kill -KILL "$shepherd"
	wait_for 30 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/status")"
	expect_eq "$(reason_of 1)" "dlh-shepherd (which holds the run) was killed by signal 9 (Killed)" "reason"
	expect_eq "$(cat "$MNT/jobs/1/progress" | cut -d: -f1)" failed "progress"
	wait_for 5 no_ranks 1 || die "ranks left: $(rank_pids 1)"
	dlh_umount
}

test_a_killed_rank_is_named_not_an_info_line() {
	dlh_mount
	slice_spec rank 500 > "$STATE/s.ini"
	cp "$STATE/s.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 30 ranks_are 1 2 || die "no 2 ranks: $(cat "$MNT/jobs/1/progress")"
	wait_for 30 grep -q "pinned to CPU" "$MNT/jobs/1/log" || die "no pinning line: $(tail -3 "$MNT/jobs/1/log")"
	local r1
	for p in $(rank_pids 1); do
		grep -qx "OMPI_COMM_WORLD_RANK=1" <(tr '\0' '\n' < "/proc/$p/environ") && r1=$p
	done
	[ -n "${r1:-}" ] || die "rank 1 not found"
	kill -KILL "$r1"
	wait_for 30 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/status")"
	case $(reason_of 1) in
		"rank 1 was killed by signal 9"*) ;;
		*) die "reason: $(reason_of 1)" ;;
	esac
	dlh_umount
}

test_a_failing_commands_own_error_is_named() {
	dlh_mount
	printf '#!/bin/sh\necho "loading"\necho "Traceback (most recent call last):" >&2\necho "  File \\"train.py\\", line 7, in <module>" >&2\necho "ValueError: boom" >&2\nexit 1\n' > "$STATE/fail.sh"
	chmod 755 "$STATE/fail.sh"
	printf '[job]\ncommand = %s\n[resources]\nranks = 1\n' "$STATE/fail.sh" > "$STATE/c.ini"
	cp "$STATE/c.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 30 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/status")"
	# as mpirun reports the failed rank; when it does not, from the last rank that spoke
	case $(reason_of 1) in
	"rank 0 exited with status 1: Traceback (most recent call last): | File \"train.py\", line 7, in <module> | ValueError: boom") ;;
	"mpirun exited with status 1; the last lines, of rank 0: Traceback (most recent call last): | File \"train.py\", line 7, in <module> | ValueError: boom") ;;
	*) die "reason: $(reason_of 1); log: $(tail -12 "$MNT/jobs/1/log")" ;;
	esac
	grep -qx "\[rank 0\] ValueError: boom" "$MNT/jobs/1/log" || die "log: $(tail -5 "$MNT/jobs/1/log")"
	grep -qx "ValueError: boom" "$STATE/jobs/1/logs/rank.0" || die "logs/rank.0: $(cat "$STATE/jobs/1/logs/rank.0")"
	dlh_umount
}
