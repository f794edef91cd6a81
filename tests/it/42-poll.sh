# 42-poll.sh - poll(2) on live files: a reader that waits is woken when
# metrics.csv grows (POLLIN) or status changes (POLLPRI; a read from 0
# then returns the new content), and is not woken while nothing changes

long_job() {
	printf '[job]\nname = %s\n[data]\ntest_limit = 1000\n[train]\nepochs = 50\ncheckpoint_every = 0\n[resources]\nranks = %s\n' "$1" "$2"
}

# in_poll PID: the process waits in poll(2) or ppoll(2) (x86-64 numbers 7, 271)
in_poll() { case $(cut -d' ' -f1 "/proc/$1/syscall" 2>/dev/null) in 7|271) return 0 ;; esac; return 1; }

# ms_since NS: milliseconds from CLOCK_REALTIME nanoseconds NS to the
# poller's wake-up line in FILE
wake_ms() { awk -v t0="$1" '/^event/ { printf "%d", ($4 - t0) / 1e6 }' "$2"; }

test_a_c_poller_wakes_on_growth_and_on_a_status_change_and_not_before() {
	dlh_mount
	long_job a 2 > "$STATE/a.ini"
	cp "$STATE/a.ini" "$MNT/jobs/new" || die "submit a"
	wait_for 60 eval '[ "$(csv_rows 1 train)" -ge 3 ]' || die "no rows: $(cat "$MNT/jobs/1/progress")"
	local p=$DLH_BIN/tests/poller out=$STATE/poll.out t0
	# metrics.csv of a training run grows at every step: POLLIN soon
	"$p" "$MNT/jobs/1/metrics.csv" 2000 > "$out" || die "poller failed"
	grep -q '^event 1 at' "$out" || die "metrics.csv: $(cat "$out")"
	# status of the running job does not change: poll waits (no busy return)
	"$p" "$MNT/jobs/1/status" 300 > "$out" || die "poller failed"
	grep -q '^timeout' "$out" || die "status woke with nothing new: $(cat "$out")"
	# a queued job (every slot is taken) cancelled: its status changes
	long_job b 2 > "$STATE/b.ini"
	cp "$STATE/b.ini" "$MNT/jobs/new" || die "submit b"
	expect_eq "$(cat "$MNT/jobs/2/status")" queued "job 2"
	"$p" "$MNT/jobs/2/status" 5000 > "$out" &
	local pid=$!
	wait_for 5 in_poll "$pid" || die "the poller is not waiting in poll(2): $(cat "/proc/$pid/syscall" 2>&1)"
	t0=$(date +%s%N)
	echo cancel > "$MNT/jobs/2/ctl"
	wait "$pid" || die "poller failed"
	grep -q '^event [0-9]* at' "$out" || die "status of a cancelled job: $(cat "$out")"
	grep -q '^now: cancelled$' "$out" || die "after lseek(0): $(cat "$out")"
	local ms; ms=$(wake_ms "$t0" "$out")
	echo "measured: status woke its poller ${ms} ms after the cancel"
	[ "$ms" -lt 200 ] || die "woken ${ms} ms after the change"
	# a stopped job's metrics.csv no longer grows: read to its end, poll waits
	echo cancel > "$MNT/jobs/1/ctl"
	wait_for 20 job_terminal 1 || die "job 1 did not end"
	"$p" "$MNT/jobs/1/metrics.csv" 300 > "$out" || die "poller failed"
	grep -q '^timeout' "$out" || die "metrics.csv of an ended job woke: $(cat "$out")"
	dlh_umount
}

test_python_select_poll_wakes_on_metrics_rows() {
	command -v python3 >/dev/null || skip "no python3 (make deps installs it)"
	dlh_mount
	long_job p 2 > "$STATE/p.ini"
	cp "$STATE/p.ini" "$MNT/jobs/new" || die "submit"
	wait_for 60 eval '[ "$(csv_rows 1 train)" -ge 3 ]' || die "no rows: $(cat "$MNT/jobs/1/progress")"
	local out
	out=$(python3 - "$MNT/jobs/1/metrics.csv" <<'PY'
import os, select, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
while os.read(fd, 65536):
    pass
p = select.poll()
p.register(fd, select.POLLIN | select.POLLPRI)
t = time.monotonic()
ev = p.poll(2000)
waited = (time.monotonic() - t) * 1000
new = os.read(fd, 65536)
print("events", len(ev), "waited_ms", int(waited), "new_bytes", len(new))
PY
) || die "python failed"
	echo "measured: python $out"
	case $out in "events 1 "*) ;; *) die "python: $out" ;; esac
	case $out in *"new_bytes 0") die "woken with nothing new: $out" ;; esac
	echo cancel > "$MNT/jobs/1/ctl"
	wait_for 20 job_terminal 1 || die "job did not end"
	dlh_umount
}
