# 87-lifecycle.sh - old jobs can be removed: `purge` through ctl (owner or
# root, ended jobs only), and -o expire removes ended jobs past an age

test_purge_removes_an_ended_job_and_frees_its_disk() {
	local a d
	dlh_user a
	DLH_OPTS="-o allow_other" dlh_mount
	chmod 711 "$STATE"
	slice_spec gone 1 > "$STATE/s.ini"
	cp "$STATE/s.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	printf '[job]\ncommand = /bin/sleep 60\n[resources]\nranks = 1\n' > "$STATE/c.ini"
	cp "$STATE/c.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 120 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/status")"
	wait_for 30 status_is 2 running || die "job 2: $(cat "$MNT/jobs/2/status")"
	[ "$(du -sk "$STATE/jobs/1" | cut -f1)" -gt 100 ] || die "job 1 holds little: $(du -sk "$STATE/jobs/1")"
	# not its owner: refused; not ended: refused, and nothing is removed
	expect_errno "Operation not permitted" as "$a" bash -c "echo purge > '$MNT/jobs/1/ctl'"
	expect_errno "Device or resource busy" bash -c "echo purge > '$MNT/jobs/2/ctl'"
	grep -q 'ctl: "purge": job 2 is running (purge removes an ended job: cancel it first)' "$MNT/jobs/2/log" ||
		die "job 2's log: $(tail -2 "$MNT/jobs/2/log")"
	[ -d "$STATE/jobs/1" ] && [ -d "$STATE/jobs/2" ] || die "a refused purge removed files"
	echo purge > "$MNT/jobs/1/ctl" || die "purge of job 1 refused"
	[ ! -e "$STATE/jobs/1" ] || die "job 1's files are still there: $(ls -A "$STATE/jobs/1")"
	expect_errno "No such file" cat "$MNT/jobs/1/status"
	[ ! -e "$MNT/jobs/gone" ] || die "the name gone still resolves"
	ls "$MNT/jobs" | grep -qx 1 && die "ls jobs/ lists job 1"
	grep -q '^1 ' "$MNT/jobs/index" && die "jobs/index lists job 1: $(cat "$MNT/jobs/index")"
	ls -A "$STATE/jobs" | grep -q purged && die "a purge left $(ls -A "$STATE/jobs")"
	# ids are never reused, also across a restart
	echo cancel > "$MNT/jobs/2/ctl"
	wait_for 30 job_terminal 2 || die "job 2 did not end"
	dlh_umount
	DLH_OPTS="-o allow_other" dlh_mount "$STATE"
	[ ! -e "$MNT/jobs/1" ] || die "job 1 is back after a restart"
	printf '[job]\ncommand = /bin/true\n[resources]\nranks = 1\n' > "$STATE/t.ini"
	d=$(mktemp -d /tmp/dlh-life.XXXXXX)
	chmod 755 "$d"
	cp "$STATE/t.ini" "$d/t.ini"
	chmod 644 "$d/t.ini"
	as "$a" cp "$d/t.ini" "$MNT/jobs/new" || die "$a's submission: $(cat "$MNT/jobs/errors")"
	[ -d "$MNT/jobs/3" ] || die "the next job is not 3: $(ls "$MNT/jobs")"
	wait_for 30 job_terminal 3 || die "job 3: $(cat "$MNT/jobs/3/status")"
	# its owner purges it
	as "$a" bash -c "echo purge > '$MNT/jobs/3/ctl'" || die "$a cannot purge their own job"
	[ ! -e "$STATE/jobs/3" ] || die "job 3's files are still there"
	rm -rf "$d"
	dlh_umount
}

test_a_purge_follows_no_link_the_owner_planted() {
	dlh_mount
	printf '[job]\ncommand = /bin/true\n[resources]\nranks = 1\n' > "$STATE/c.ini"
	cp "$STATE/c.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 30 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/status")"
	local keep
	keep=$(mktemp -d /tmp/dlh-keep.XXXXXX)
	echo precious > "$keep/file"
	ln -s "$keep" "$STATE/jobs/1/checkpoints/elsewhere"
	ln -s "$keep/file" "$STATE/jobs/1/link"
	echo purge > "$MNT/jobs/1/ctl" || die "purge refused"
	[ ! -e "$STATE/jobs/1" ] || die "job 1's files are still there"
	expect_eq "$(cat "$keep/file")" precious "the file a link pointed at"
	rm -rf "$keep"
	dlh_umount
}

test_expire_removes_only_ended_jobs_past_the_age() {
	DLH_OPTS="-o expire=3s" dlh_mount
	printf '[job]\ncommand = /bin/true\n[resources]\nranks = 1\n' > "$STATE/t.ini"
	printf '[job]\ncommand = /bin/sleep 60\n[resources]\nranks = 1\n' > "$STATE/s.ini"
	cp "$STATE/t.ini" "$MNT/jobs/new" || die "submit 1"
	cp "$STATE/s.ini" "$MNT/jobs/new" || die "submit 2"
	wait_for 30 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/status")"
	local ended
	ended=$(sed -n 's/^finished=//p' "$STATE/jobs/1/job")
	wait_for 20 test ! -e "$STATE/jobs/1" || die "job 1 was not expired"
	local gone_at
	gone_at=$(date +%s.%N)
	awk -v f="$ended" -v g="$gone_at" 'BEGIN { exit !(g - f >= 3) }' || die "job 1 went $ended -> $gone_at, before 3 s"
	expect_errno "No such file" cat "$MNT/jobs/1/status"
	# the running job stays; once ended it goes in its turn
	status_is 2 running || die "job 2: $(cat "$MNT/jobs/2/status")"
	echo cancel > "$MNT/jobs/2/ctl"
	wait_for 30 job_terminal 2 || die "job 2 did not end"
	wait_for 20 test ! -e "$STATE/jobs/2" || die "job 2 was not expired"
	dlh_umount
}

test_a_bad_expire_option_is_refused_before_mounting() {
	local mnt err
	mnt=$(mktemp -d /tmp/dlh-mnt.XXXXXX)
	err=$("$DLH_BIN/dlhfs" -f -o "state=$(mktemp -d /tmp/dlh-state.XXXXXX),expire=soon" "$mnt" 2>&1) &&
		die "dlhfs mounted with expire=soon"
	rmdir "$mnt"
	case $err in
	*"-o expire: expected a duration such as"*'got "soon"'*) ;;
	*) die "error: $err" ;;
	esac
}

# jobs/index's energy is measured where the machine has a meter: the CPU
# packages' RAPL counters (powercap), here a tree the test writes
# ($DLH_POWERCAP), read at the run's launch and at its end, the job's share
# of the machine's cores; without one, the modelled power over the run
test_energy_is_read_from_the_machines_meter_where_it_has_one() {
	local pc cores
	pc=$(mktemp -d /tmp/dlh-powercap.XXXXXX)
	mkdir -p "$pc/intel-rapl:0" "$pc/intel-rapl:0:0"
	echo 262143328850 > "$pc/intel-rapl:0/max_energy_range_uj"
	echo 262142000000 > "$pc/intel-rapl:0/energy_uj"       # 1.3 J before it wraps
	echo 999999999 > "$pc/intel-rapl:0:0/energy_uj"         # a part of the package: not counted
	DLH_POWERCAP=$pc dlh_mount
	slice_spec metered 40 > "$STATE/m.ini"
	cp "$STATE/m.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 60 grep -q '^train,' "$MNT/jobs/1/metrics.csv" || die "job 1: $(cat "$MNT/jobs/1/progress")"
	status_is 1 running || die "job 1 ended before the meter moved: $(cat "$MNT/jobs/1/progress")"
	echo 2700000 > "$pc/intel-rapl:0/energy_uj"            # wrapped: 1.3 + 2.7 = 4 J
	wait_for 120 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "job 1"
	cores=$(nproc)
	local want; want=$(awk -v c="$cores" 'BEGIN { printf "%.0f", 4 * (2 < c ? 2 / c : 1) }')
	grep -q "energy: $want.0 J measured (the machine's RAPL meter, 4.0 J over the run, 2 of its $cores cores)" "$MNT/jobs/1/log" ||
		die "log: $(grep energy "$MNT/jobs/1/log")"
	expect_eq "$(awk '$1 == 1 { print $9 }' "$MNT/jobs/index")" "$want" "energy_j of job 1 in jobs/index ($(cat "$MNT/jobs/index"))"
	dlh_umount
	rm -rf "$pc"
}
