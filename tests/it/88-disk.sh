# 88-disk.sh - one user's job cannot fill the state directory for everyone:
# a job past its disk limit is stopped; a job that fills the filesystem is
# stopped, and the daemon's reserve keeps room for the others' jobs (a
# small tmpfs made by the test is the state dir)

# small_state SIZE: a tmpfs of SIZE as the state dir (STATE), mounted here
small_state() {
	STATE=$(mktemp -d /tmp/dlh-state.XXXXXX)
	mount -t tmpfs -o "size=$1,mode=0711" tmpfs "$STATE" 2>/dev/null || skip "cannot mount a tmpfs here"
	STATE_FS=$STATE   # dlh_cleanup unmounts it
	trap dlh_cleanup EXIT
}

# writer: a program that writes 1 MiB files into its job directory for
# ever, and goes on when a write fails (as a program that checkpoints does)
writer() {
	printf '#!/bin/sh\ni=0\nwhile :; do head -c 1048576 /dev/zero > "$DLH_JOB_DIR/blob.$i" 2>/dev/null; i=$((i + 1)); done\n'
}

test_a_job_filling_the_disk_is_stopped_and_others_go_on() {
	local a b d
	dlh_user a
	dlh_user b
	small_state 160m
	DLH_OPTS="-o allow_other" dlh_mount "$STATE"
	grep -qx 'reserve 8M' "$MNT/pool/limits" || die "pool/limits: $(cat "$MNT/pool/limits")"
	d=$(mktemp -d /tmp/dlh-disk.XXXXXX)
	chmod 755 "$d"
	writer > "$d/fill.sh"
	chmod 755 "$d/fill.sh"
	printf '[job]\ncommand = %s/fill.sh\n[resources]\nranks = 1\n' "$d" > "$d/fill.ini"
	slice_spec other 1 > "$d/t.ini"
	sed -i 's/^ranks = 2$/ranks = 1/' "$d/t.ini"
	chmod 644 "$d"/*.ini
	as "$a" cp "$d/fill.ini" "$MNT/jobs/new" || die "$a's submission: $(cat "$MNT/jobs/errors")"
	wait_for 60 job_terminal 1 || { echo cancel > "$MNT/jobs/1/ctl"; die "the disk filler was not stopped: $(df -h "$STATE" | tail -1)"; }
	expect_eq "$(cat "$MNT/jobs/1/status")" failed "status of the filler"
	case $(as "$b" cat "$MNT/jobs/1/progress") in
	"failed: disk full: the state directory's filesystem has no room left, and this job's directory grew the most ("*) ;;
	*) die "progress: $(cat "$MNT/jobs/1/progress")" ;;
	esac
	echo "measured: $(df -h "$STATE" | awk 'NR == 2 { print $3 " used, " $4 " free" }') after the filler was stopped"
	# B submits on the full disk (the reserve's room) and trains
	as "$b" cp "$d/t.ini" "$MNT/jobs/new" || die "$b's submission on a full disk: $(as "$b" cat "$MNT/jobs/errors")"
	wait_for 120 job_terminal 2 || die "job 2: $(cat "$MNT/jobs/2/status")"
	expect_eq "$(cat "$MNT/jobs/2/status")" succeeded "B's job ($(grep -v '^\[rank' "$MNT/jobs/2/log" | tail -3))"
	expect_eq "$(ls "$STATE/jobs" | tr '\n' ' ')" "1 2 " "job directories"
	expect_eq "$(cat "$STATE/next_id")" 3 "next_id"
	# the filler's owner frees the disk with a purge
	as "$a" bash -c "echo purge > '$MNT/jobs/1/ctl'" || die "$a cannot purge"
	rm -rf "$d"
	dlh_umount
}

test_a_job_past_its_disk_limit_is_stopped_and_disk_max_holds() {
	small_state 200m
	DLH_OPTS="-o disk_max=50M" dlh_mount "$STATE"
	grep -qx 'disk_max 50M' "$MNT/pool/limits" || die "pool/limits: $(cat "$MNT/pool/limits")"
	writer > "$STATE/fill.sh"
	chmod 755 "$STATE/fill.sh"
	printf '[job]\ncommand = %s/fill.sh\n[resources]\nranks = 1\ndisk = 100M\n' "$STATE" > "$STATE/big.ini"
	expect_errno "Invalid argument" cp "$STATE/big.ini" "$MNT/jobs/new"
	tail -1 "$MNT/jobs/errors" | grep -q 'spec: \[resources\] disk: 100M is more than this mount lets a job hold (disk_max=50M)' ||
		die "errors: $(tail -1 "$MNT/jobs/errors")"
	sed -i 's/^disk = 100M$/disk = 20M/' "$STATE/big.ini"
	cp "$STATE/big.ini" "$MNT/jobs/new" || die "submit: $(tail -1 "$MNT/jobs/errors")"
	wait_for 60 job_terminal 1 || { echo cancel > "$MNT/jobs/1/ctl"; die "the job past its limit was not stopped"; }
	grep -q '^reason=disk limit 20M reached: its directory holds ' "$MNT/jobs/1/result" || die "result: $(cat "$MNT/jobs/1/result")"
	local used
	used=$(du -sm "$STATE/jobs/1" | cut -f1)
	echo "measured: the job's directory held $used MiB when stopped (limit 20M, looked at every 0.1 s)"
	[ "$used" -lt 80 ] || die "it wrote $used MiB past a 20M limit"
	dlh_umount
}

test_a_calibration_that_fails_for_room_leaves_no_file() {
	small_state 3m
	local out
	out=$("$DLH_BIN/dlhfs" --calibrate -o "state=$STATE" 2>&1) && die "calibration succeeded in 3 MiB: $out"
	expect_eq "$(ls -A "$STATE" | grep -c '^\.calib-')" 0 "files a failed calibration left: $(ls -A "$STATE")"
	echo "$out" | grep -q 'No space left on device' || die "the failure does not say why: $out"
	echo "measured: $(echo "$out" | head -1)"
}
