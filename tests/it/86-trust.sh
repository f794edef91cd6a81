# 86-trust.sh - a mount several real users share: nothing of one user's
# output reaches another, and nobody outranks the others (users made by the
# test, removed after)

# walk_as USER DIR NEEDLE: every file under DIR that USER may read, read as
# USER; prints the paths whose content or name holds NEEDLE
walk_as() {
	as "$1" find "$2" -mindepth 1 2>/dev/null | while IFS= read -r p; do
		case $p in *"$3"*) echo "$p (its name)" ;; esac
		[ -f "$p" ] || continue
		as "$1" grep -qF -- "$3" "$p" 2>/dev/null && echo "$p"
	done
	return 0
}

test_a_secret_in_a_failed_programs_stderr_reaches_no_other_user() {
	local a b d secret=API_TOKEN=s3cr3t-$$-tok
	dlh_user a
	dlh_user b
	DLH_OPTS="-o allow_other" dlh_mount
	chmod 711 "$STATE"   # its runs reach their job directories
	d=$(shared_dir)
	printf '#!/bin/sh\necho "loading"\necho "ValueError: %s" >&2\nexit 3\n' "$secret" > "$d/fail.sh"
	chmod 755 "$d/fail.sh"
	printf '[job]\nname = leaky\ncommand = %s/fail.sh\n[resources]\nranks = 1\n' "$d" > "$d/a.ini"
	chmod 644 "$d/a.ini"
	as "$a" cp "$d/a.ini" "$MNT/jobs/new" || die "$a's submission: $(cat "$MNT/jobs/errors")"
	wait_for 30 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/status")"
	expect_eq "$(cat "$MNT/jobs/1/status")" failed "status"
	# its owner reads the whole reason; the public one says which process failed and how
	grep -qF "$secret" "$MNT/jobs/1/result" || die "the owner's result lacks the reason: $(cat "$MNT/jobs/1/result")"
	as "$a" grep -qF "$secret" "$MNT/jobs/1/result" || die "$a cannot read the reason in result"
	case $(as "$b" cat "$MNT/jobs/1/progress") in
	"failed: rank 0 exited with status 3" | "failed: mpirun exited with status 3") ;;
	*) die "progress as $b: $(as "$b" cat "$MNT/jobs/1/progress")" ;;
	esac
	# B walks everything B may read: the secret is nowhere
	local found
	found=$(walk_as "$b" "$MNT" "$secret")
	[ -z "$found" ] || die "$b reads the secret in: $found"
	# and B read something at all (the walk is not empty for lack of rights)
	as "$b" grep -q failed "$MNT/jobs/1/status" || die "$b cannot read job 1's status"
	as "$b" grep -q leaky "$MNT/jobs/index" || die "$b's jobs/index lacks job 1"
	# after a restart of dlhfs the record keeps both, and still shows B only the public one
	dlh_umount
	DLH_OPTS="-o allow_other" dlh_mount "$STATE"
	chmod 711 "$STATE"
	found=$(walk_as "$b" "$MNT" "$secret")
	[ -z "$found" ] || die "after a restart, $b reads the secret in: $found"
	as "$a" grep -qF "$secret" "$MNT/jobs/1/result" || die "after a restart, $a's result lacks the reason"
	rm -rf "$d"
	dlh_umount
}

test_the_history_of_runs_is_root_s_alone() {
	local a d
	dlh_user a
	DLH_OPTS="-o allow_other" dlh_mount
	d=$(shared_dir)
	slice_spec hist 1 > "$d/t.ini"
	chmod 644 "$d/t.ini"
	# a history left by an older dlhfs, readable by all, is narrowed at the next run
	: > "$STATE/history"
	chmod 644 "$STATE/history"
	cp "$d/t.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 120 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/status")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "status"
	wait_for 10 test -s "$STATE/history" || die "no history line"
	expect_eq "$(stat -c %a "$STATE/history")" 600 "mode of STATE/history"
	as "$a" cat "$STATE/history" >/dev/null 2>&1 && die "$a reads STATE/history"
	rm -rf "$d"
	dlh_umount
}

test_an_ordinary_user_may_only_lower_a_priority() {
	local a d
	dlh_user a
	DLH_OPTS="-o allow_other" dlh_mount
	chmod 711 "$STATE"   # its runs reach their job directories
	d=$(shared_dir)
	printf '[job]\ncommand = /bin/sleep 60\npriority = 10\n[resources]\nranks = 1\n' > "$d/up.ini"
	printf '[job]\ncommand = /bin/sleep 60\npriority = -5\n[resources]\nranks = 1\n' > "$d/down.ini"
	chmod 644 "$d"/*.ini
	expect_errno "Invalid argument" as "$a" cp "$d/up.ini" "$MNT/jobs/new"
	as "$a" tail -1 "$MNT/jobs/errors" | grep -q 'spec:3: \[job\] priority: 10 is above 0: only root and the mounting user may raise' ||
		die "$a's errors: $(as "$a" tail -1 "$MNT/jobs/errors")"
	[ ! -e "$MNT/jobs/1" ] || die "a refused spec made job 1"
	as "$a" cp "$d/down.ini" "$MNT/jobs/new" || die "$a's lower priority refused: $(as "$a" tail -1 "$MNT/jobs/errors")"
	# through ctl: lower works, raising again does not (not even back to 0)
	as "$a" bash -c "echo 'priority -7' > '$MNT/jobs/1/ctl'" || die "$a cannot lower"
	grep -q '^priority=-7$' "$STATE/jobs/1/job" || die "priority not recorded: $(grep priority "$STATE/jobs/1/job")"
	expect_errno "Operation not permitted" as "$a" bash -c "echo 'priority 0' > '$MNT/jobs/1/ctl'"
	grep -q 'only root and the mounting user may raise it' "$MNT/jobs/1/log" || die "log: $(tail -2 "$MNT/jobs/1/log")"
	grep -q '^priority=-7$' "$STATE/jobs/1/job" || die "the refused raise changed the record"
	# root raises it, and root's own spec may say any priority
	echo 'priority 50' > "$MNT/jobs/1/ctl" || die "root cannot raise"
	grep -q '^priority=50$' "$STATE/jobs/1/job" || die "root's raise not recorded"
	cp "$d/up.ini" "$MNT/jobs/new" || die "root's priority 10 refused: $(tail -1 "$MNT/jobs/errors")"
	echo cancel > "$MNT/jobs/1/ctl"
	echo cancel > "$MNT/jobs/2/ctl"
	wait_for 30 job_terminal 1 || die "job 1 did not end"
	wait_for 30 job_terminal 2 || die "job 2 did not end"
	rm -rf "$d"
	dlh_umount
}

test_a_user_at_ranks_per_user_leaves_freed_slots_to_the_others() {
	local a b d
	dlh_user a
	dlh_user b
	DLH_OPTS="-o allow_other -o cpus=2 -o ranks_per_user=1" dlh_mount
	chmod 711 "$STATE"
	grep -qx 'ranks_per_user 1' "$MNT/pool/limits" || die "pool/limits: $(cat "$MNT/pool/limits")"
	d=$(shared_dir)
	printf '[job]\ncommand = /bin/sleep 300\n[resources]\nranks = 1\n' > "$d/one.ini"
	chmod 644 "$d/one.ini"
	# alone, a has the whole pool: the cap binds only while another user waits
	as "$a" cp "$d/one.ini" "$MNT/jobs/new" || die "$a's job 1: $(as "$a" tail -1 "$MNT/jobs/errors")"
	as "$a" cp "$d/one.ini" "$MNT/jobs/new" || die "$a's job 2: $(as "$a" tail -1 "$MNT/jobs/errors")"
	wait_for 30 status_is 2 running || die "job 2, a's second rank alone: $(cat "$MNT/jobs/2/status")"
	as "$a" cp "$d/one.ini" "$MNT/jobs/new" || die "$a's job 3"
	as "$b" cp "$d/one.ini" "$MNT/jobs/new" || die "$b's job 4"
	wait_for 10 grep -q 'ranks_per_user=1' "$MNT/jobs/3/progress" || die "job 3: $(cat "$MNT/jobs/3/progress")"
	grep -q 'ranks_per_user' "$MNT/jobs/4/progress" && die "b's job is capped: $(cat "$MNT/jobs/4/progress")"
	# the queue shows b's job first: a's waits unreserved behind it
	awk '{ print $1 }' "$MNT/queue" | tr '\n' ' ' | grep -q '^4 3 $' || die "queue: $(cat "$MNT/queue")"
	# a slot of a's frees: b's job takes it, not a's older job 3
	echo cancel > "$MNT/jobs/1/ctl"
	wait_for 30 status_is 4 running || die "job 4: $(cat "$MNT/jobs/4/progress")"
	status_is 3 queued || die "job 3 started beside b's: $(cat "$MNT/jobs/3/status")"
	# nobody else waits now: a's next job starts as soon as a slot frees
	echo cancel > "$MNT/jobs/2/ctl"
	wait_for 30 status_is 3 running || die "job 3 with nobody else waiting: $(cat "$MNT/jobs/3/progress")"
	for i in 3 4; do echo cancel > "$MNT/jobs/$i/ctl"; done
	for i in 1 2 3 4; do wait_for 30 job_terminal "$i" || die "job $i did not end"; done
	rm -rf "$d"
	dlh_umount
}

test_a_fork_bomb_without_limits_in_its_spec_is_bounded_by_the_defaults() {
	local a b d
	dlh_user a
	dlh_user b
	DLH_OPTS="-o allow_other" dlh_mount
	chmod 711 "$STATE"
	local limit
	limit=$(sed -n 's/^pids_per_rank //p' "$MNT/pool/limits")
	case $limit in
	none) [ -d /sys/fs/cgroup/pids ] || grep -qw pids /sys/fs/cgroup/cgroup.controllers 2>/dev/null &&
		die "the host has the pids controller, pool/limits says pids_per_rank none"
		skip "no pids controller here" ;;
	'' | *[!0-9]*) die "pool/limits: $(cat "$MNT/pool/limits")" ;;
	esac
	d=$(shared_dir)
	# 3000 sleeping processes, a bounded bomb: no [resources] line at all
	printf '#!/bin/sh\ni=0\nwhile [ $i -lt 3000 ]; do sleep 300 & i=$((i + 1)); done\necho started\nwait\n' > "$d/bomb.sh"
	chmod 755 "$d/bomb.sh"
	printf '[job]\ncommand = %s/bomb.sh\n[resources]\nranks = 1\n' "$d" > "$d/bomb.ini"
	chmod 644 "$d/bomb.ini"
	as "$a" cp "$d/bomb.ini" "$MNT/jobs/new" || die "submit: $(cat "$MNT/jobs/errors")"
	# another user's reads of the pool stay quick while it forks
	local worst max=$((limit * 2))
	wait_for 30 status_is 1 running || die "job 1: $(cat "$MNT/jobs/1/status")"
	worst=$(as "$b" bash -c 'w=0; for i in $(seq 20); do s=$(date +%s%N); cat "$1/pool/summary" >/dev/null; e=$(( ($(date +%s%N) - s) / 1000000 )); [ $e -gt $w ] && w=$e; done; echo $w' _ "$MNT")
	echo "measured: slowest of 20 reads of pool/summary by another user while the bomb forks: $worst ms"
	[ "$worst" -lt 100 ] || die "pool/summary took $worst ms"
	# the shell gives up at its first failed fork: the run ends there, and says why
	wait_for 60 job_terminal 1 || { echo cancel > "$MNT/jobs/1/ctl"; die "the bomb runs on: $(pgrep -u "$a" -c -x sleep) sleeps"; }
	grep -q "task limit $max" "$MNT/jobs/1/log" || die "log: $(grep isolation "$MNT/jobs/1/log")"
	grep -q "the run reached its task limit ($max processes and threads)" "$MNT/jobs/1/log" ||
		die "log: $(tail -4 "$MNT/jobs/1/log")"
	expect_eq "$(cat "$MNT/jobs/1/status")" failed "status"
	echo "measured: $(grep -c . "$STATE/jobs/1/log") log lines; $(grep 'task limit' "$MNT/jobs/1/log" | tail -1 | cut -c22-)"
	wait_for 10 eval '[ "$(pgrep -u "$a" -c -x sleep)" = 0 ]' || die "sleeps left: $(pgrep -u "$a" -c -x sleep)"
	rm -rf "$d"
	dlh_umount
}
