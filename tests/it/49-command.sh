# 49-command.sh - a [job] command runs as written: in its job directory,
# every word of its line an argument (no shell, no comment cut)

test_a_roots_command_starts_in_its_job_directory() {
	dlh_mount
	printf '[job]\ncommand = /bin/pwd\n[resources]\nranks = 1\n' > "$STATE/c.ini"
	cp "$STATE/c.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 30 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/status")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "status"
	grep -qx "\[rank 0\] $STATE/jobs/1" "$MNT/jobs/1/log" || die "log: $(grep rank "$MNT/jobs/1/log")"
	dlh_umount
}

test_a_semicolon_in_a_command_is_an_argument_not_a_comment() {
	dlh_mount
	printf '[job]\ncommand = /bin/echo a ; id\n[resources]\nranks = 1 ; a comment after any other key\n' > "$STATE/c.ini"
	cp "$STATE/c.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 30 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/status")"
	grep -qx '\[rank 0\] a ; id' "$MNT/jobs/1/log" || die "log: $(grep rank "$MNT/jobs/1/log")"
	grep -qx 'command = /bin/echo a ; id' "$MNT/jobs/1/spec" || die "spec: $(grep command "$MNT/jobs/1/spec")"
	grep -q 'uid=' "$MNT/jobs/1/log" && die "id ran: $(grep uid= "$MNT/jobs/1/log")"
	dlh_umount
}

test_a_state_directory_others_cannot_enter_is_named_when_a_users_run_starts() {
	local a f d
	dlh_user a
	DLH_OPTS="-o allow_other" dlh_mount
	chmod 700 "$STATE"
	d=$(mktemp -d /tmp/dlh-cmd.XXXXXX)
	chmod 755 "$d"
	printf '[job]\ncommand = /bin/true\n[resources]\nranks = 1\n' > "$d/c.ini"
	chmod 644 "$d/c.ini"
	as "$a" cp "$d/c.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 30 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/status")"
	grep -q "^reason=the state directory \"$STATE\" (mode 0700) lets no other user reach a job directory" "$MNT/jobs/1/result" ||
		die "result: $(cat "$MNT/jobs/1/result")"
	expect_eq "$(as "$a" cat "$MNT/jobs/1/progress")" "failed: the launch failed" "progress"
	rm -rf "$d"
	dlh_umount
}
