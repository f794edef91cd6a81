# 89-sharing.sh - what the README promises of a shared mount, each tested:
# readable_by = group, the Prometheus file per reader, dd as a submitter,
# and a spec written while the first calibration runs

# group_file TEXT: a spec every user may read, holding TEXT; prints its path
group_file() {
	local d
	d=$(shared_dir)
	printf '%b' "$1" > "$d/spec.ini"
	chmod 644 "$d/spec.ini"
	echo "$d/spec.ini"
}

test_readable_by_group_lets_the_owners_group_read_and_no_one_else() {
	local a b c f ga
	dlh_user a
	dlh_user b
	dlh_user c
	ga=$(id -gn "$a")
	usermod -a -G "$ga" "$b" || die "usermod failed"
	DLH_OPTS="-o allow_other" dlh_mount
	chmod 711 "$STATE"
	f=$(group_file '[job]\ncommand = /bin/echo shared\nreadable_by = group\n[resources]\nranks = 1\n')
	as "$a" cp "$f" "$MNT/jobs/new" || die "$a's submission: $(cat "$MNT/jobs/errors")"
	wait_for 30 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/status")"
	expect_eq "$(stat -c %A "$MNT/jobs/1/log")" "-r--r-----" "mode of a log shared with the group"
	as "$b" grep -q '\[rank 0\] shared' "$MNT/jobs/1/log" || die "$b, in $a's group $ga, cannot read the log"
	as "$b" cat "$MNT/jobs/1/result" > /dev/null || die "$b cannot read the result"
	expect_errno "Permission denied" as "$c" cat "$MNT/jobs/1/log"
	expect_errno "Permission denied" as "$c" cat "$MNT/jobs/1/result"
	as "$c" cat "$MNT/jobs/1/status" > /dev/null || die "$c cannot read the status"
	rm -rf "$(dirname "$f")"
	dlh_umount
}

test_the_prometheus_file_shows_each_reader_only_the_jobs_it_may_read() {
	local a b f
	dlh_user a
	dlh_user b
	DLH_OPTS="-o allow_other" dlh_mount
	chmod 711 "$STATE"
	slice_spec promjob 1 > "$STATE/s.ini"
	f=$(group_file "$(cat "$STATE/s.ini")\n")
	as "$a" cp "$f" "$MNT/jobs/new" || die "$a's submission: $(cat "$MNT/jobs/errors")"
	wait_for 120 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/status")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "status"
	local as_a as_b
	as_a=$(as "$a" cat "$MNT/prometheus/dlhfs.prom")
	as_b=$(as "$b" cat "$MNT/prometheus/dlhfs.prom")
	# everyone sees that the job is there and its state, as squeue
	echo "$as_b" | grep -q "^dlhfs_job_state{job_id=\"1\",name=\"promjob\",owner=\"$a\",state=\"succeeded\"} 1$" ||
		die "$b's export lacks job 1's state: $(echo "$as_b" | grep job_state)"
	# its owner sees its numbers; another user does not
	echo "$as_a" | grep -Eq '^dlhfs_job_loss\{job_id="1",[^}]*\} [0-9.e+-]+$' || die "$a's export lacks the loss"
	echo "$as_a" | grep -Eq '^dlhfs_job_test_accuracy_ratio\{job_id="1",' || die "$a's export lacks the accuracy"
	echo "$as_b" | grep -Eq '^dlhfs_job_(loss|step|test_accuracy_ratio|samples_per_second)\{job_id="1",' &&
		die "$b sees job 1's numbers: $(echo "$as_b" | grep 'job_id="1"')"
	rm -rf "$(dirname "$f")"
	dlh_umount
}

test_dd_submits_and_reports_a_refusal() {
	dlh_mount
	printf '[job]\ncommand = /bin/true\n[resources]\nranks = 1\n' > "$STATE/ok.ini"
	printf '[train]\nepochs = lots\n' > "$STATE/bad.ini"
	dd if="$STATE/ok.ini" of="$MNT/jobs/new" status=none || die "dd of a good spec failed"
	[ -d "$MNT/jobs/1" ] || die "dd submitted nothing: $(ls "$MNT/jobs")"
	local out
	out=$(dd if="$STATE/bad.ini" of="$MNT/jobs/new" status=none 2>&1) && die "dd of a bad spec succeeded"
	case $out in *"Invalid argument"*) ;; *) die "dd said: $out" ;; esac
	tail -1 "$MNT/jobs/errors" | grep -q 'spec:2: \[train\] epochs: expected a positive integer, got "lots"' ||
		die "errors: $(tail -1 "$MNT/jobs/errors")"
	[ ! -e "$MNT/jobs/2" ] || die "the bad spec made job 2"
	wait_for 30 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/status")"
	dlh_umount
}

test_a_spec_written_during_the_first_calibration_waits_for_it() {
	local saved=${DLH_CALIBRATION:-}
	DLH_CALIBRATION=   # this mount measures on its own, as a first mount does
	dlh_mount
	DLH_CALIBRATION=$saved
	slice_spec early 1 > "$STATE/s.ini"
	grep -q '^measuring' "$MNT/pool/calibration" || skip "the calibration ended before the test looked: $(head -1 "$MNT/pool/calibration")"
	local t0=$SECONDS
	cp "$STATE/s.ini" "$MNT/jobs/new" || die "submit during the calibration: $(tail -2 "$MNT/jobs/errors")"
	echo "measured: the close() of jobs/new returned $((SECONDS - t0)) s later, the calibration done"
	grep -q '^date=' "$MNT/pool/calibration" || die "the submission returned before the calibration: $(head -2 "$MNT/pool/calibration")"
	grep -q '^estimated=yes' "$MNT/jobs/1/estimate" || grep -q '^total_s=' "$MNT/jobs/1/estimate" ||
		die "the job was not estimated: $(cat "$MNT/jobs/1/estimate")"
	wait_for 120 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/status")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "status"
	dlh_umount
}
