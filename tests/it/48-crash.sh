# 48-crash.sh - runs outlive dlhfs: after kill -9 of the daemon, the next
# mount (the same command, no manual unmount) takes its runs back

# remount: dlhfs again on the same MNT and STATE, as the user would type it
remount() {
	REMOUNTED=$(date +%s.%N)
	"$DLH_BIN/dlhfs" -f -o "state=$STATE" ${DLH_OPTS:-} "$MNT" 2>"$DLH_STDERR" &
	DLH_PID=$!
	wait_for 10 test -f "$MNT/pool/summary" || die "dlhfs did not mount again: $(cat "$DLH_STDERR")"
	grep -q "dlhfs: cleared the stale mount at $MNT" "$DLH_STDERR" ||
		die "no word of the stale mount: $(cat "$DLH_STDERR")"
	: > "$DLH_STDERR"
}

# kill9: kills the daemon and waits for it; its mount point is left stale
kill9() {
	kill -KILL "$DLH_PID"
	wait "$DLH_PID" 2>/dev/null
	expect_errno "Transport endpoint is not connected" stat "$MNT/jobs"
}

# held_by_nobody ID: the job's shepherd (run.handle's pid) has exited
held_by_nobody() {
	local p
	p=$(sed -n 's/^pid=//p' "$STATE/jobs/$1/run.handle")
	[ -n "$p" ] && { [ ! -d "/proc/$p" ] || grep -q '^State:.*Z' "/proc/$p/status"; }
}

# has_rows ID: metrics.csv has a train row
has_rows() { [ "$(csv_rows "$1" train)" -gt 0 ]; }

# step_past ID N: metrics.csv has a train row past step N
step_past() { [ "$(train_steps "$1" | tail -1)" -gt "$2" ] 2>/dev/null; }

# train_steps ID: the train rows' steps in metrics.csv, one a line
train_steps() { awk -F, '$1 == "train" { print $2 }' "$STATE/jobs/$1/metrics.csv"; }

test_a_run_outlives_a_killed_daemon_and_is_taken_back() {
	dlh_mount
	slice_spec outlive 250 > "$STATE/s.ini"
	cp "$STATE/s.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 30 ranks_are 1 2 || die "no 2 ranks: $(cat "$MNT/jobs/1/progress")"
	wait_for 30 has_rows 1 || die "no train rows"
	local before after
	before=$(rank_pids 1 | sort | tr '\n' ' ')
	kill9
	after=$(rank_pids 1 | sort | tr '\n' ' ')
	expect_eq "$after" "$before" "rank pids right after the daemon died"
	remount
	expect_eq "$(cat "$MNT/jobs/1/status")" running "status after the new mount"
	grep -q "found its run going on after a restart of dlhfs" "$MNT/jobs/1/log" ||
		die "log: $(grep dlhfs: "$MNT/jobs/1/log" | tail -3)"
	expect_eq "$(rank_pids 1 | sort | tr '\n' ' ')" "$before" "rank pids after the new mount"
	# ctl verbs reach the run that was taken back: the trainer says it took one
	echo checkpoint > "$MNT/jobs/1/ctl" || die "checkpoint verb refused"
	wait_for 60 grep -q "dlh-train: checkpoint .* on request" "$STATE/jobs/1/log" ||
		die "no checkpoint on request: $(grep -v '^\[rank' "$STATE/jobs/1/log" | tail -3)"
	wait_for 120 job_terminal 1 || die "job 1 did not end: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "status ($(tail -3 "$MNT/jobs/1/log"))"
	# every step once, none computed twice: 1..N in order, no resume
	local n
	n=$(train_steps 1 | wc -l)
	[ "$n" -gt 0 ] || die "no train rows"
	expect_eq "$(train_steps 1 | sort -n | uniq -d | head -3)" "" "steps recorded twice"
	expect_eq "$(train_steps 1 | tail -1)" "$(train_steps 1 | sort -n | tail -1)" "last step"
	grep -q "resum" "$STATE/jobs/1/log" && die "the run resumed: $(grep resum "$STATE/jobs/1/log")"
	dlh_umount
}

test_a_run_that_ends_while_no_daemon_watches_keeps_its_status() {
	DLH_OPTS="-o cpus=3" dlh_mount
	slice_spec away 30 > "$STATE/s.ini"
	cp "$STATE/s.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	printf '#!/bin/sh\nsleep 1\nexit 3\n' > "$STATE/fail.sh"
	chmod 755 "$STATE/fail.sh"
	printf '[job]\ncommand = %s\n[resources]\nranks = 1\n' "$STATE/fail.sh" > "$STATE/f.ini"
	cp "$STATE/f.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 30 ranks_are 1 2 || die "no 2 ranks: $(cat "$MNT/jobs/1/progress")"
	wait_for 10 status_is 2 running || die "job 2: $(cat "$MNT/jobs/2/status")"
	kill9
	wait_for 120 held_by_nobody 1 || die "job 1's run did not end"
	wait_for 30 held_by_nobody 2 || die "job 2's run did not end"
	test -f "$STATE/jobs/2/run.exit" || die "job 2's shepherd left no exit file"
	# dlhfs stays away 2 s past the runs' end
	local down_until
	down_until=$(( $(date +%s) + 3 ))
	wait_for 10 eval '[ "$(date +%s)" -ge "$down_until" ]'
	remount
	wait_for 10 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/status")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "status of the run that succeeded unwatched"
	grep -q "found its run ended while dlhfs was away" "$MNT/jobs/1/log" ||
		die "log: $(grep dlhfs: "$MNT/jobs/1/log" | tail -3)"
	wait_for 10 job_terminal 2 || die "job 2: $(cat "$MNT/jobs/2/status")"
	expect_eq "$(cat "$MNT/jobs/2/status")" failed "status of the command that failed unwatched"
	grep -q "exited with status 3" "$MNT/jobs/2/log" || die "job 2's log: $(tail -3 "$MNT/jobs/2/log")"
	# their end is when their runs ended, not when dlhfs came back: the time
	# dlhfs was away is in no wall time, and nothing of it is learnt from
	local ended
	ended=$(sed -n 's/^finished=//p' "$STATE/jobs/1/job")
	awk -v f="$ended" -v r="$REMOUNTED" 'BEGIN { exit !(f > 0 && f < r - 2) }' ||
		die "job 1 ended at $ended, dlhfs came back at $REMOUNTED"
	grep -q "not learnt from: dlhfs restarted while it ran" "$MNT/jobs/1/log" ||
		die "job 1's log: $(grep estimate "$MNT/jobs/1/log")"
	[ ! -s "$STATE/history" ] || die "history learnt from a run dlhfs was away for: $(cat "$STATE/history")"
	dlh_umount
}

# a rank that stops (SIGSTOP) holds the whole run: after hang_timeout the
# hang is logged naming that rank, the run is stopped and, with restart =
# on-failure, resumes from its checkpoint and succeeds with every step once.
# An explicit hang_timeout counts from the run's start too (README): 8 s, so
# that a restarted run's start-up under ASan on a loaded machine (5-6 s
# seen, with two suites on 2 cores) is not itself taken for a hang
test_a_stalled_rank_is_found_named_and_the_run_restarted() {
	dlh_mount
	slice_spec stall 60 | sed 's/^name = stall$/name = stall\nhang_timeout = 8s\nrestart = on-failure/' > "$STATE/s.ini"
	cp "$STATE/s.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 30 ranks_are 1 2 || die "no 2 ranks: $(cat "$MNT/jobs/1/progress")"
	wait_for 30 step_past 1 100 || die "no step 100: $(cat "$MNT/jobs/1/progress")"
	local p r1 t0 t1
	for p in $(rank_pids 1); do
		grep -qx "OMPI_COMM_WORLD_RANK=1" <(tr '\0' '\n' < "/proc/$p/environ") && r1=$p
	done
	[ -n "${r1:-}" ] || die "rank 1 not found"
	t0=$(date +%s)
	kill -STOP "$r1"
	wait_for 18 grep -q "hung: no step for" "$MNT/jobs/1/log" ||
		die "no hang logged within 8 + 10 s: $(tail -3 "$MNT/jobs/1/log")"
	t1=$(date +%s)
	grep -q "hung: no step for .* (hang_timeout 0:08): rank 1 (pid $r1 on $(hostname), [0-9]* steps done) stopped (SIGSTOP or a debugger); stopping the run" \
		"$MNT/jobs/1/log" || die "hang line: $(grep 'hung:' "$MNT/jobs/1/log")"
	echo "measured: hang logged $((t1 - t0)) s after the SIGSTOP (hang_timeout 8 s)"
	wait_for 120 job_terminal 1 || die "job 1 did not end: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "status ($(tail -3 "$MNT/jobs/1/log"))"
	grep -q "restarting (1 of 3) after: hung: no step for" "$MNT/jobs/1/log" ||
		die "no restart after the hang: $(grep dlhfs: "$MNT/jobs/1/log" | tail -4)"
	local n
	n=$(train_steps 1 | wc -l)
	train_steps 1 | cmp -s - <(seq 1 "$n") || die "train steps of metrics.csv are not 1..$n once each"
	dlh_umount
}

# a [job] command's rows are its heartbeat: one that writes only rows (a row
# a second, hang_timeout 3 s) is not hung while it writes them, and is found
# hung 3 s after its last row once it stops writing; its first row comes
# after a start longer than the timeout (no row: nothing is watched yet).
# The test paces the program: it writes a row for each line the test adds
# to its pace file, and the test adds one once the job has gone the time
# without being found hung (clear_for).

# clear_for MS ID: job ID's log says nothing of a hang for MS milliseconds
clear_for() {
	local end=$(($(date +%s%N) + $1 * 1000000))
	while [ "$(date +%s%N)" -lt "$end" ]; do
		grep -q "hung:" "$MNT/jobs/$2/log" && return 1
		sleep 0.05
	done
	return 0
}

test_a_commands_rows_are_its_heartbeat() {
	dlh_mount
	local prog=$STATE/rows.sh
	cat > "$prog" <<'PROG'
#!/bin/sh
# a user's program: loads until the first line of its pace file (argument
# 1), then writes step N's row once the file has N lines, up to 6 steps
[ -s "$DLH_METRICS_CSV" ] || echo kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s > "$DLH_METRICS_CSV"
s=0
while [ "$s" -lt 6 ]; do
	until [ "$(wc -l < "$1")" -gt "$s" ]; do sleep 0.05; done
	s=$((s + 1))
	echo "train,$s,1,$s,0.5,0.5,0.1,100" >> "$DLH_METRICS_CSV"
done
PROG
	chmod 755 "$prog"
	: > "$STATE/pace1"
	: > "$STATE/pace2"
	printf '[job]\nname = rows\ncommand = %s %s\nhang_timeout = 3s\nsteps = 6\n[resources]\nranks = 1\n' "$prog" "$STATE/pace1" > "$STATE/r.ini"
	printf '[job]\nname = stall\ncommand = %s %s\nhang_timeout = 3s\n[resources]\nranks = 1\n' "$prog" "$STATE/pace2" > "$STATE/s.ini"
	cp "$STATE/r.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 30 status_is 1 running || die "job 1 did not start: $(cat "$MNT/jobs/1/progress")"
	# 4 s of loading (longer than hang_timeout), then a row a second
	clear_for 4000 1 || die "found hung while loading: $(grep 'hung:' "$MNT/jobs/1/log")"
	for step in 1 2 3 4 5 6; do
		echo "$step" >> "$STATE/pace1"
		[ "$step" = 6 ] || clear_for 1000 1 ||
			die "found hung while it wrote rows: $(grep 'hung:' "$MNT/jobs/1/log")"
	done
	wait_for 30 job_terminal 1 || die "job 1 did not end: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "a command writing rows ($(tail -3 "$MNT/jobs/1/log"))"
	grep -q "hung:" "$MNT/jobs/1/log" && die "found hung while it wrote rows: $(grep 'hung:' "$MNT/jobs/1/log")"
	# the same program that stops after 3 rows (its pace file stops growing)
	cp "$STATE/s.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 30 status_is 2 running || die "job 2 did not start: $(cat "$MNT/jobs/2/progress")"
	for step in 1 2 3; do
		echo "$step" >> "$STATE/pace2"
		[ "$step" = 3 ] || clear_for 1000 2 || die "job 2 found hung while it wrote rows"
	done
	wait_for 30 eval '[ "$(csv_rows 2 train)" -ge 3 ]' || die "job 2 wrote no 3 rows: $(cat "$MNT/jobs/2/progress")"
	local t0 t1
	t0=$(date +%s)
	wait_for 15 grep -q "hung: no step for .* (hang_timeout 0:03)" "$MNT/jobs/2/log" ||
		die "no hang logged within 3 + 12 s of its last row: $(tail -3 "$MNT/jobs/2/log")"
	t1=$(date +%s)
	echo "measured: a command's hang logged $((t1 - t0)) s after its last row (hang_timeout 3 s)"
	wait_for 30 job_terminal 2 || die "job 2 did not end: $(cat "$MNT/jobs/2/progress")"
	expect_eq "$(cat "$MNT/jobs/2/status")" failed "a command that stopped writing rows"
	dlh_umount
}

# a run taken back after a restart keeps its time limit, counted from the
# run's start (not from the new mount), and its cgroup
test_a_taken_back_run_keeps_its_time_limit_from_its_start_and_its_cgroup() {
	dlh_mount
	printf '[job]\ncommand = /bin/sleep 300\ntime_limit = 0:12\n[resources]\nranks = 1\n' > "$STATE/t.ini"
	cp "$STATE/t.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 30 status_is 1 running || die "job 1: $(cat "$MNT/jobs/1/status")"
	local started sleeper cg_before
	started=$(sed -n 's/^started=//p' "$STATE/jobs/1/job")
	wait_for 10 pgrep -f "^/bin/sleep 300" || die "no sleep"
	sleeper=$(pgrep -f "^/bin/sleep 300" | head -1)
	cg_before=$(grep -E ':(cpuset|memory):' "/proc/$sleeper/cgroup" | sort | tr '\n' ' ')
	kill9
	local down_until=$(( $(date +%s) + 4 ))
	wait_for 10 eval '[ "$(date +%s)" -ge "$down_until" ]'   # dlhfs away 4 s
	remount
	expect_eq "$(cat "$MNT/jobs/1/status")" running "status after the new mount"
	expect_eq "$(grep -E ':(cpuset|memory):' "/proc/$sleeper/cgroup" | sort | tr '\n' ' ')" "$cg_before" "the run's cgroups after the new mount"
	wait_for 40 job_terminal 1 || die "the time limit did not stop it: $(cat "$MNT/jobs/1/status")"
	local ended
	ended=$(sed -n 's/^finished=//p' "$STATE/jobs/1/job")
	echo "measured: time limit 0:12, the run ended $(awk -v s="$started" -v e="$ended" 'BEGIN { printf "%.1f", e - s }') s after it started, dlhfs away 4 s of it"
	awk -v s="$started" -v e="$ended" 'BEGIN { exit !(e - s >= 11 && e - s < 16) }' ||
		die "a 12 s limit stopped the run $(awk -v s="$started" -v e="$ended" 'BEGIN { print e - s }') s after its start"
	grep -q '^reason=time limit 0:12 reached' "$MNT/jobs/1/result" || die "result: $(cat "$MNT/jobs/1/result")"
	dlh_umount
}

# A profile run (README: Estimating your own program) taken back after
# kill -9 of the daemon: what earlier profile runs measured is gone with
# it, so it goes on as the job's run, not estimated; every step once
test_a_profile_run_taken_back_after_a_restart_is_the_jobs_run() {
	dlh_mount
	cat > "$STATE/rows.sh" <<'SH'
#!/bin/sh
t0=$(date +%s.%N)
printf 'kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s\n' >> "$DLH_METRICS_CSV"
i=1
while [ "$i" -le 30 ]; do
	sleep 0.2
	printf 'train,%d,1,%s,1.0,0.5,0.1,nan\n' "$i" "$(echo "$(date +%s.%N) - $t0" | bc)" >> "$DLH_METRICS_CSV"
	i=$((i + 1))
done
SH
	chmod 755 "$STATE/rows.sh"
	printf '[job]\ncommand = %s\nsteps = 30\n' "$STATE/rows.sh" > "$STATE/p.ini"
	cp "$STATE/p.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 30 grep -q '^train,3,' "$STATE/jobs/1/metrics.csv" || die "no rows: $(cat "$MNT/jobs/1/progress")"
	grep -q 'profile run 1 of 1: [0-9]* steps timed' "$STATE/jobs/1/log" && skip "the profile was timed before the daemon could be killed"
	kill9
	remount
	wait_for 60 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "status ($(grep -v '^\[rank' "$MNT/jobs/1/log" | tail -3))"
	grep -q "not estimated: dlhfs restarted during profile run 1 of 1, which goes on as the job's run" "$MNT/jobs/1/log" ||
		die "log: $(grep -v '^\[rank' "$MNT/jobs/1/log" | tail -5)"
	expect_eq "$(grep -c 'launching' "$MNT/jobs/1/log")" 1 "launches"
	expect_eq "$(train_steps 1 | tr '\n' ' ')" "$(seq 1 30 | tr '\n' ' ')" "its steps"
	dlh_umount
}

# gpu_pool: this machine with two GPUs of one type (the host emulation,
# dlh-train-gpuemu, stands in for them: no GPU is needed)
gpu_pool() {
	printf '[type H100]\nflops = 58.5T\nmemory = 80G\nbandwidth = 3.35T\nwatts_idle = 70\nwatts_busy = 700\ngpu = true\n'
	printf '[node here]\nhost = %s\ncpus = 2\ngpus = H100:2\n' "$(hostname)"
}

# gpu_rank_pids ID: pids of the job's dlh-train-gpuemu processes (the
# kernel keeps 15 characters of a command's name)
gpu_rank_pids() {
	local p
	for p in $(pgrep -x dlh-train-gpuem); do
		tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | grep -q -- "--job-dir $STATE/jobs/$1 " && echo "$p"
	done
	return 0
}

# gpus_held N: pool/summary says N of the H100s are held
gpus_held() { grep -q "^H100 total 2 held $1 " "$MNT/pool/summary"; }

# a GPU run (its plan: "device gpuN") is taken back like a CPU run: the
# same ranks on the same GPUs, held again, watched to the end
test_a_gpu_run_outlives_a_killed_daemon_and_is_taken_back() {
	[ -x "$DLH_BIN/dlh-train-gpuemu" ] || skip "no $DLH_BIN/dlh-train-gpuemu (built with GPU=1)"
	local state; state=$(mktemp -d /tmp/dlh-state.XXXXXX)
	gpu_pool > "$state/pool.ini"
	DLH_OPTS="-o pool=$state/pool.ini -o trainer=$DLH_BIN/dlh-train-gpuemu"
	dlh_mount "$state"
	# the data named, as on a GPU machine where bench/gpu-env sets DLH_FMNIST
	local fm=${DLH_FMNIST:-/usr/share/datasets/fashion-mnist}
	slice_spec gpuout 80 'device = gpu' |
		sed "/^\[data\]\$/a train = $fm/train-images-idx3-ubyte.gz\ntrain_labels = $fm/train-labels-idx1-ubyte.gz\ntest = $fm/t10k-images-idx3-ubyte.gz\ntest_labels = $fm/t10k-labels-idx1-ubyte.gz" > "$STATE/s.ini"
	cp "$STATE/s.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 60 eval '[ "$(gpu_rank_pids 1 | wc -l)" -eq 2 ]' || die "no 2 ranks: $(cat "$MNT/jobs/1/progress")"
	wait_for 60 has_rows 1 || die "no train rows: $(tail -3 "$MNT/jobs/1/log")"
	grep -q '^rank 0 host .* device gpu0 ' "$MNT/jobs/1/plan" && grep -q '^rank 1 host .* device gpu1 ' "$MNT/jobs/1/plan" ||
		die "plan: $(grep '^rank ' "$MNT/jobs/1/plan")"
	# each rank's CPU slot, which recovery reads back beside its GPU
	grep -q -- '^argv .* --cpus [0-9]*,[0-9]* --gpus 0,1' "$MNT/jobs/1/plan" || die "argv: $(grep '^argv' "$MNT/jobs/1/plan")"
	gpus_held 2 || die "summary: $(cat "$MNT/pool/summary")"
	local before plan
	before=$(gpu_rank_pids 1 | sort | tr '\n' ' ')
	plan=$(cat "$STATE/jobs/1/plan")
	kill9
	expect_eq "$(gpu_rank_pids 1 | sort | tr '\n' ' ')" "$before" "rank pids right after the daemon died"
	remount
	expect_eq "$(cat "$MNT/jobs/1/status")" running "status after the new mount"
	grep -q "found its run going on after a restart of dlhfs: .*, 2 GPU ranks; watching it again" "$MNT/jobs/1/log" ||
		die "log: $(grep dlhfs: "$MNT/jobs/1/log" | tail -3)"
	expect_eq "$(gpu_rank_pids 1 | sort | tr '\n' ' ')" "$before" "rank pids after the new mount"
	# its GPUs are held again, as the launch held them
	gpus_held 2 || die "summary after the new mount: $(cat "$MNT/pool/summary")"
	wait_for 300 job_terminal 1 || die "job 1 did not end: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "status ($(grep -v '^\[rank' "$MNT/jobs/1/log" | tail -3))"
	expect_eq "$(grep -c 'launching' "$MNT/jobs/1/log")" 1 "launches"
	grep -q "resum" "$STATE/jobs/1/log" && die "the run resumed: $(grep resum "$STATE/jobs/1/log")"
	expect_eq "$(train_steps 1 | sort -n | uniq -d | head -3)" "" "steps recorded twice"
	expect_eq "$(cat "$STATE/jobs/1/plan")" "$plan" "the plan after the new mount"
	wait_for 10 gpus_held 0 || die "GPUs not given back: $(cat "$MNT/pool/summary")"
	dlh_umount
}
