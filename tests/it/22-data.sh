# 22-data.sh - [data] files are checked at close(): only regular files, never
# waited on (a FIFO, a device), and headers that are what their keys say

FM=${DLH_FMNIST:-/usr/share/datasets/fashion-mnist}

# data_spec FILE TRAIN [TRAIN_LABELS]: a slice spec training on TRAIN
data_spec() {
	printf '[data]\ntrain = %s\ntrain_labels = %s\n' "$2" "${3:-$FM/train-labels-idx1-ubyte.gz}" > "$1"
	printf 'train_limit = 512\ntest_limit = 128\n[model]\nlayers = 16\n[train]\nepochs = 1\nbatch_size = 64\n' >> "$1"
}

# refused_fast SPEC TEXT: cp of SPEC into jobs/new fails with EINVAL within 1 s
# and jobs/errors says TEXT; no job appears
refused_fast() {
	local t0 t1 out
	t0=$(date +%s%N)
	if out=$(timeout 10 cp "$1" "$MNT/jobs/new" 2>&1); then
		die "cp $1 succeeded"
	fi
	t1=$(date +%s%N)
	case $out in *"Invalid argument"*) ;; *) die "cp $1: expected EINVAL, got: $out" ;; esac
	[ $(((t1 - t0) / 1000000)) -lt 1000 ] || die "cp $1 took $(((t1 - t0) / 1000000)) ms"
	wait_for 5 grep -qF -- "$2" "$MNT/jobs/errors" || die "jobs/errors lacks: $2: $(tail -3 "$MNT/jobs/errors")"
	ls "$MNT/jobs" | grep -q '^[0-9]' && die "a job appeared for $1"
	return 0
}

test_data_that_is_not_a_regular_file_is_refused_without_waiting() {
	dlh_mount
	mkfifo "$STATE/fifo"
	data_spec "$STATE/f.ini" "$STATE/fifo"
	refused_fast "$STATE/f.ini" "[data] train: cannot read \"$STATE/fifo\": not a regular file (a FIFO)"
	data_spec "$STATE/z.ini" /dev/zero
	refused_fast "$STATE/z.ini" '[data] train: cannot read "/dev/zero": not a regular file (a character device)'
	data_spec "$STATE/l.ini" "$FM/train-images-idx3-ubyte.gz" "$STATE/fifo"
	refused_fast "$STATE/l.ini" "[data] train_labels: cannot read \"$STATE/fifo\": not a regular file (a FIFO)"
	dlh_umount
}

test_data_that_is_not_idx_is_refused_at_close_with_the_reason() {
	dlh_mount
	data_spec "$STATE/p.ini" /etc/passwd
	refused_fast "$STATE/p.ini" 'spec: [data]: "/etc/passwd": bad magic 0x'
	data_spec "$STATE/m.ini" /proc/self/mem
	refused_fast "$STATE/m.ini" 'spec: [data]: cannot read "/proc/self/mem": Input/output error'
	# images and labels that do not belong together
	data_spec "$STATE/c.ini" "$FM/train-images-idx3-ubyte.gz" "$FM/t10k-labels-idx1-ubyte.gz"
	refused_fast "$STATE/c.ini" "holds 60000 images but \"$FM/t10k-labels-idx1-ubyte.gz\" 10000 labels"
	# a good slice still goes through
	data_spec "$STATE/g.ini" "$FM/train-images-idx3-ubyte.gz"
	cp "$STATE/g.ini" "$MNT/jobs/new" || die "good spec: $(tail -2 "$MNT/jobs/errors")"
	wait_for 60 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/status")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "status"
	dlh_umount
}

test_fifo_submissions_leave_every_other_file_answering() {
	dlh_mount
	mkfifo "$STATE/fifo"
	data_spec "$STATE/f.ini" "$STATE/fifo"
	local i pids=() worst
	for i in $(seq 20); do
		timeout 10 cp "$STATE/f.ini" "$MNT/jobs/new" 2>/dev/null &
		pids+=($!)
	done
	worst=$(slowest_read "$MNT/pool/summary" 100) || die "$worst"
	refused_beside "$worst" "of a FIFO" "${pids[@]}"
	dlh_umount
}
