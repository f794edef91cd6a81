# 44-files.sh - the mount's files behave under the tools scripts use: tail
# sees the line just added, cp and cp -r copy what a cat reads (never padded
# with NULs), du counts the job's real files

test_tail_of_jobs_errors_shows_each_rejection_at_once() {
	dlh_mount
	local i got
	for i in $(seq 1 50); do
		printf '[train]\nepochs = round%s\n' "$i" > "$STATE/bad.ini"
		cp "$STATE/bad.ini" "$MNT/jobs/new" 2>/dev/null && die "round $i: a bad spec was accepted"
		got=$(tail -1 "$MNT/jobs/errors")
		case $got in
		*"\"round$i\""*) ;;
		*) die "round $i: tail -1 shows \"$got\"" ;;
		esac
	done
	dlh_umount
}

test_the_size_stat_gives_after_a_ctl_write_is_the_new_one() {
	dlh_mount
	printf '[job]\ncommand = /bin/sleep 60\n[resources]\nranks = 1\n' > "$STATE/c.ini"
	local i
	for i in 1 2 3 4 5; do
		cp "$STATE/c.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
		wait_for 30 status_is "$i" running || die "job $i: $(cat "$MNT/jobs/$i/status")"
		stat -c %s "$MNT/jobs/$i/status" >/dev/null   # the kernel now holds its size
		echo cancel > "$MNT/jobs/$i/ctl" || die "cancel $i"
		wait_for 30 job_terminal "$i" || die "job $i did not end"
		expect_eq "$(stat -c %s "$MNT/jobs/$i/status")" "$(cat "$MNT/jobs/$i/status" | wc -c)" "size of job $i's status"
		expect_eq "$(tail -1 "$MNT/jobs/$i/status")" cancelled "tail of job $i's status"
	done
	dlh_umount
}

test_cp_r_of_a_running_job_pads_no_file_with_nul_bytes() {
	dlh_mount
	slice_spec copied 30 > "$STATE/s.ini"
	cp "$STATE/s.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 60 sh -c "[ \$(grep -c '^train,' '$MNT/jobs/1/metrics.csv') -ge 20 ]" || die "no rows: $(cat "$MNT/jobs/1/progress")"
	local i f rel out errs bad=0
	for i in $(seq 1 30); do
		out=$(mktemp -d /tmp/dlh-copy.XXXXXX)
		# a checkpoint rotated away between cp's readdir and its stat
		# ("cannot stat") or its open ("cannot open ... for reading") is
		# gone, as on any directory being written; nothing else may fail
		errs=$(cp -r "$MNT/jobs/1" "$out/" 2>&1 | grep -v "checkpoints/step-[0-9]*\.ckpt'\( for reading\)\?: No such file or directory")
		[ -z "$errs" ] || die "cp -r round $i: $errs"
		while IFS= read -r f; do
			rel=${f#"$out/1/"}
			case $rel in checkpoints/*) continue ;; esac   # binary: NULs are theirs
			if [ "$(tr -d '\0' < "$f" | wc -c)" != "$(wc -c < "$f")" ]; then
				echo "round $i: $rel has NUL bytes"
				bad=1
			fi
		done < <(find "$out/1" -type f)
		rm -rf "$out"
		[ $bad = 0 ] || die "cp -r copied NUL bytes"
		status_is 1 running || break
	done
	echo cancel > "$MNT/jobs/1/ctl"
	wait_for 30 job_terminal 1 || die "job 1 did not end"
	dlh_umount
}

test_fstat_of_an_open_generated_file_gives_the_size_its_reads_give() {
	dlh_mount
	slice_spec sized 30 > "$STATE/s.ini"
	cp "$STATE/s.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 60 sh -c "grep -q '^train,' '$MNT/jobs/1/metrics.csv'" || die "no rows: $(cat "$MNT/jobs/1/progress")"
	local p got
	# (status, progress and the other small live files are served through
	# the kernel's pages at the size it was last told: 43-cache)
	for p in plots/loss.svg plots/progress.svg report.html ../index metrics.csv log; do
		# the size fstat gives on the descriptor, then every byte read through it
		got=$(python3 - "$MNT/jobs/1/$p" <<'PY'
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
size = os.fstat(fd).st_size
blocks = os.fstat(fd).st_blocks
time.sleep(0.3)   # the job goes on meanwhile
data = b""
while True:
    b = os.read(fd, 4096)
    if not b:
        break
    data += b
print(size, len(data), blocks, (len(data) + 511) // 512)
PY
)
		set -- $got
		case $p in
		metrics.csv|log) [ "$2" -ge "$1" ] || die "$p: fstat said $1 bytes, the reads gave $2" ;;
		*) [ "$1" = "$2" ] || die "$p: fstat said $1 bytes, the reads gave $2" ;;
		esac
		[ "$3" -gt 0 ] || die "$p: $1 bytes in 0 blocks (cp and tar take it for sparse)"
	done
	echo cancel > "$MNT/jobs/1/ctl"
	wait_for 30 job_terminal 1 || die "job 1 did not end"
	dlh_umount
}

test_du_of_a_job_counts_its_checkpoints() {
	dlh_mount
	slice_spec big 2 > "$STATE/s.ini"
	sed -i 's/^layers = 64$/layers = 512,256/' "$STATE/s.ini"
	cp "$STATE/s.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 120 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/status")"
	local mine real
	mine=$(du -sk "$MNT/jobs/1" | cut -f1)
	real=$(du -sk "$STATE/jobs/1" | cut -f1)
	[ "$real" -gt 1000 ] || die "the job's state dir holds only $real KiB"
	echo "measured: du -sk of the job in the mount $mine KiB, of its state dir $real KiB"
	[ $((mine * 10)) -ge $((real * 9)) ] && [ $((mine * 10)) -le $((real * 11)) ] ||
		die "du -sk: $mine KiB in the mount, $real KiB in the state dir"
	dlh_umount
}

test_tar_and_rsync_of_an_ended_job_copy_what_cat_reads() {
	dlh_mount
	slice_spec tarred 1 > "$STATE/s.ini"
	cp "$STATE/s.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 60 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/status")"
	local out d f rel
	d=$(mktemp -d /tmp/dlh-tar.XXXXXX)
	# tar says nothing of a file whose size or time moved while it read it
	out=$(tar -C "$MNT/jobs" -cf "$d/job.tar" 1 2>&1) || die "tar failed: $out"
	[ -z "$out" ] || die "tar: $out"
	mkdir "$d/x" && tar -C "$d/x" -xf "$d/job.tar" || die "untar failed"
	command -v rsync >/dev/null || die "no rsync (make deps installs it)"
	out=$(rsync -a "$MNT/jobs/1/" "$d/r/" 2>&1) || die "rsync failed: $out"
	while IFS= read -r f; do
		rel=${f#"$d/x/1/"}
		cmp -s "$f" "$MNT/jobs/1/$rel" || die "tar's $rel differs from a cat of it"
		cmp -s "$d/r/$rel" "$MNT/jobs/1/$rel" || die "rsync's $rel differs from a cat of it"
	done < <(find "$d/x/1" -type f)
	echo "measured: tar and rsync of job 1: $(find "$d/x/1" -type f | wc -l) files, each as cat reads it"
	rm -rf "$d"
	dlh_umount
}

test_tar_of_a_running_job_says_nothing_changed() {
	dlh_mount
	slice_spec tarred 30 > "$STATE/s.ini"
	cp "$STATE/s.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 60 sh -c "[ \$(grep -c '^train,' '$MNT/jobs/1/metrics.csv') -ge 20 ]" || die "no rows: $(cat "$MNT/jobs/1/progress")"
	local i out warn=0 rounds=0
	for i in $(seq 1 200); do
		out=$(tar -C "$MNT/jobs" --exclude=1/checkpoints -cf "$STATE/x.tar" 1 2>&1)
		rounds=$i
		# metrics.csv, log and the rank logs are the run's real files:
		# they grow while tar reads them, and tar says so, as on any disk
		out=$(printf '%s\n' "$out" | grep -v -E '^tar: 1/(metrics\.csv|log|logs/rank\.[0-9]+): file changed as we read it$')
		[ -n "$out" ] && { echo "round $i: $out"; warn=$((warn + 1)); }
		status_is 1 running || break
	done
	echo "measured: $warn of $rounds tar rounds warned"
	echo cancel > "$MNT/jobs/1/ctl" 2>/dev/null   # (it may have ended)
	wait_for 30 job_terminal 1 || die "job 1 did not end"
	dlh_umount
	[ $warn = 0 ] || die "tar warned in $warn of $rounds rounds"
}
