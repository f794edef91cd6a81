# 20-specs.sh - jobs/new: bad specs fail close() and land in jobs/errors; no job appears

# submit_bad FILE ERRTEXT: cp must fail with ERRTEXT; no job may appear.
submit_bad() {
	local out
	if out=$(cp "$1" "$MNT/jobs/new" 2>&1); then
		die "cp $1 succeeded"
	fi
	case $out in *"$2"*) ;; *) die "cp $1: expected \"$2\", got: $out" ;; esac
	ls "$MNT/jobs" | grep -q '^[0-9]' && die "a job appeared after $1"
	return 0
}

test_bad_corpus_each_fails_and_is_explained() {
	dlh_mount
	local n=0 f want
	for f in "$DLH_ROOT"/tests/spec/bad/*.ini; do
		want=$(head -1 "${f%.ini}.err")
		case $want in
			"spec: larger than"*) submit_bad "$f" "File too large" ;;
			*) submit_bad "$f" "Invalid argument" ;;
		esac
		wait_for 5 grep -qF -- "$want" "$MNT/jobs/errors" || die "$(basename "$f"): jobs/errors lacks: $want"
		n=$((n + 1))
	done
	[ "$n" -ge 30 ] || die "only $n bad specs in the corpus"
	dlh_umount
}

test_one_mebibyte_spec_fails_with_efbig() {
	dlh_mount
	local big=$STATE/big.ini
	{ echo '[train]'; head -c 1048576 /dev/zero | tr '\0' '#'; } > "$big"
	submit_bad "$big" "File too large"
	grep -q 'spec: larger than 65536 bytes' "$MNT/jobs/errors" || die "no EFBIG line in errors"
	dlh_umount
}

test_binary_junk_is_refused() {
	dlh_mount
	head -c 3000 "$DLH_BIN/dlhfs" > "$STATE/junk.ini"
	submit_bad "$STATE/junk.ini" "Invalid argument"
	grep -q 'binary data' "$MNT/jobs/errors" || die "errors: $(cat "$MNT/jobs/errors")"
	dlh_umount
}

test_empty_spec_is_refused() {
	dlh_mount
	: > "$STATE/empty.ini"
	submit_bad "$STATE/empty.ini" "Invalid argument"
	wait_for 5 grep -q "empty spec" "$MNT/jobs/errors" || die "errors: $(cat "$MNT/jobs/errors")"
	dlh_umount
}

test_errors_lines_carry_time_and_uid() {
	dlh_mount
	printf '[train]\nbatch_size = 12x\n' > "$STATE/b.ini"
	submit_bad "$STATE/b.ini" "Invalid argument"
	grep -Eq '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z uid=0 spec:2: \[train\] batch_size: expected a positive integer, got "12x"$' \
		"$MNT/jobs/errors" || die "errors: $(cat "$MNT/jobs/errors")"
	dlh_umount
}

test_rdwr_handle_reads_back_id_or_error() {
	dlh_mount
	local answer
	slice_spec rw 1 > "$STATE/ok.ini"
	exec 3<>"$MNT/jobs/new"
	cat "$STATE/ok.ini" >&3
	read -r answer <&3
	exec 3>&-
	expect_eq "$answer" "1" "id read back"
	printf '[train]\nepochs = 0\n' > "$STATE/bad.ini"
	exec 3<>"$MNT/jobs/new"
	cat "$STATE/bad.ini" >&3
	read -r answer <&3
	exec 3>&- 2>/dev/null || true
	case $answer in
		"spec:2: [train] epochs:"*) ;;
		*) die "error read back: $answer" ;;
	esac
	echo cancel > "$MNT/jobs/1/ctl"
	wait_for 20 job_terminal 1 || die "job 1 did not end"
	dlh_umount
}

test_spec_file_shows_defaults() {
	dlh_mount
	printf '[job]\nname = defaults\n[train]\nepochs = 1\n[data]\ntrain_limit = 128\ntest_limit = 128\n' > "$STATE/d.ini"
	cp "$STATE/d.ini" "$MNT/jobs/new" || die "cp failed"
	grep -q '^batch_size = 64$' "$MNT/jobs/1/spec" || die "spec lacks defaults: $(cat "$MNT/jobs/1/spec")"
	grep -q '^optimizer = sgd$' "$MNT/jobs/1/spec" || die "spec lacks optimizer default"
	grep -q '^train_limit = 128$' "$MNT/jobs/1/spec" || die "spec lost the given value"
	expect_errno "Permission denied" sh -c "echo x > '$MNT/jobs/1/spec'"
	wait_for 60 job_terminal 1 || die "job did not end"
	dlh_umount
}

test_too_many_ranks_for_the_pool_is_refused() {
	dlh_mount
	printf '[resources]\nranks = %d\n' $(( $(nproc) + 1 )) > "$STATE/r.ini"
	submit_bad "$STATE/r.ini" "Invalid argument"
	grep -q "cpu slots, the pool has $(nproc)" "$MNT/jobs/errors" || die "errors: $(cat "$MNT/jobs/errors")"
	dlh_umount
}

test_shell_redirections_submit_whole_specs() {
	dlh_mount
	slice_spec redirected 1 > "$STATE/s.ini"
	cat "$STATE/s.ini" > "$MNT/jobs/new" || die "cat > jobs/new failed"
	[ -d "$MNT/jobs/1" ] || die "no job after cat >"
	cmp -s "$STATE/s.ini" "$STATE/jobs/1/submitted.ini" || die "job 1 got a partial spec"
	printf '[job]\nname = echoed\n[data]\ntrain_limit = 256\ntest_limit = 256\n[model]\nlayers = 16\n[train]\nepochs = 1\n[resources]\nranks = 1\n' > "$MNT/jobs/new" ||
		die "printf > jobs/new failed"
	expect_eq "$(readlink "$MNT/jobs/echoed")" 2 "job made by printf >"
	tee "$MNT/jobs/new" < "$STATE/s.ini" > /dev/null || die "tee failed"
	[ -d "$MNT/jobs/3" ] || die "no job after tee"
	if cat "$STATE/s.ini" | sed 's/^epochs = 1$/epochs = zero/' > "$MNT/jobs/new" 2>/dev/null; then
		: # a shell does not report close() errors of its redirections; jobs/errors does
	fi
	wait_for 5 grep -q 'epochs: expected' "$MNT/jobs/errors" || die "errors: $(cat "$MNT/jobs/errors")"
	[ -d "$MNT/jobs/4" ] && die "a bad spec made job 4"
	grep -c 'empty spec' "$MNT/jobs/errors" | grep -qx 0 || die "shell redirections logged empty specs: $(cat "$MNT/jobs/errors")"
	local id
	for id in 1 2 3; do
		wait_for 120 job_terminal $id || die "job $id did not end"
	done
	dlh_umount
}

test_append_descriptor_keeps_every_write() {
	dlh_mount
	# O_APPEND with a stat between writes: the kernel would place the second
	# write at the reported size (0) without the daemon's own append offset
	perl -e 'open(my $f, ">>", $ARGV[0]) or die "open: $!";
		syswrite($f, "[job]\nname = appended\n") or die "write: $!";
		my @st = stat($ARGV[0]);
		syswrite($f, "[data]\ntrain_limit = 256\ntest_limit = 256\n[model]\nlayers = 16\n[train]\nepochs = 1\n[resources]\nranks = 1\n") or die "write: $!";
		close($f) or die "close: $!"' "$MNT/jobs/new" || die "perl append failed"
	wait_for 5 test -L "$MNT/jobs/appended" || die "no job named appended: $(tail -3 "$MNT/jobs/errors")"
	grep -q '^train_limit = 256$' "$MNT/jobs/appended/spec" || die "second write lost: $(cat "$MNT/jobs/appended/spec")"
	wait_for 60 job_terminal 1 || die "job did not end"
	dlh_umount
}
