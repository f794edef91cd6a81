# 60-pool.sh - the shared pool: per-device holders, the queue with estimates,
# priority order and backfill, time limits, max_queued

host() { hostname; }

submit() { cp "$1" "$MNT/jobs/new" || die "submit $1 failed: $(tail -3 "$MNT/jobs/errors")"; }

# sleeper NAME RANKS PRIORITY LIMIT [SECONDS]: a user command that sleeps
sleeper() {
	printf '[job]\nname = %s\ncommand = /bin/sleep %s\npriority = %s\ntime_limit = %s\n' \
		"$1" "${5:-120}" "$3" "$4"
	printf '[resources]\nranks = %s\n' "$2"
}

# tiny NAME RANKS PRIORITY LIMIT: a real training run of about a second (not
# preemptible: this file tests order and backfill, 70-preempt.sh preemption)
tiny() {
	printf '[job]\nname = %s\npriority = %s\ntime_limit = %s\npreemptible = false\n' "$1" "$3" "$4"
	printf '[data]\ntrain_limit = 512\ntest_limit = 256\n[model]\nlayers = 32\n'
	printf '[train]\nepochs = 1\nbatch_size = 64\ncheckpoint_every = 0\n[resources]\nranks = %s\n' "$2"
}

test_devices_show_their_holders_and_the_queue_its_estimates() {
	DLH_OPTS="-o cpus=2" dlh_mount
	local node="$MNT/pool/nodes/$(host)"
	expect_eq "$(ls "$node/cpu" | tr '\n' ' ')" "0 1 " "cpu slots"
	expect_eq "$(cat "$node/cpu/1/job")" "-" "free slot"
	sleeper one 1 0 1m > "$STATE/a.ini"
	sleeper two 2 0 5m > "$STATE/b.ini"
	submit "$STATE/a.ini"
	submit "$STATE/b.ini"
	expect_eq "$(cat "$MNT/jobs/1/status")" running "job 1"
	expect_eq "$(cat "$node/cpu/0/job")" 1 "holder of cpu0"
	expect_eq "$(cat "$node/cpu/1/job")" "-" "holder of cpu1"
	expect_eq "$(cat "$node/devices")" "$(printf 'cpu0 1\ncpu1 -')" "devices"
	grep -q '^cpu total 2 held 1 free 1$' "$MNT/pool/summary" || die "summary: $(cat "$MNT/pool/summary")"
	grep -q '^jobs running 1 queued 1 suspended 0$' "$MNT/pool/summary" || die "summary: $(cat "$MNT/pool/summary")"
	grep -Eq 'device cpu0( |$)' "$MNT/jobs/1/plan" || die "plan: $(cat "$MNT/jobs/1/plan")"
	grep -q '^memory none$' "$MNT/jobs/1/plan" || die "plan: $(cat "$MNT/jobs/1/plan")"
	# job 2 waits for job 1's limit: its estimated start is job 1's start + 1 minute
	local started want
	started=$(sed -n 's/^started=//p' "$STATE/jobs/1/job")
	want=$(date -u -d "@$(awk -v s="$started" 'BEGIN { printf "%d", s + 60 + (s + 60 > int(s + 60)) }')" +%Y-%m-%dT%H:%M:%SZ)
	expect_eq "$(cat "$MNT/queue")" "2 priority 0 cpus 2 limit 5:00 run 5:00 start $want name two" "queue"
	local hms; hms=$(date -d "$want" +%H:%M:%S)
	expect_eq "$(cat "$MNT/jobs/2/progress")" "queued: waiting for 2 cpu slots; 1 free; est. start $hms" "progress"
	echo cancel > "$MNT/jobs/1/ctl"
	wait_for 10 status_is 2 running || die "job 2 did not start: $(cat "$MNT/jobs/2/progress")"
	expect_eq "$(cat "$node/devices")" "$(printf 'cpu0 2\ncpu1 2')" "devices after the switch"
	expect_eq "$(cat "$MNT/queue")" "" "queue with nothing waiting"
	echo cancel > "$MNT/jobs/2/ctl"
	wait_for 10 status_is 2 cancelled || die "job 2: $(cat "$MNT/jobs/2/status")"
	dlh_umount
}

test_time_limit_stops_the_run_and_fails_it() {
	dlh_mount
	sleeper late 1 0 2s > "$STATE/a.ini"
	submit "$STATE/a.ini"
	wait_for 20 job_terminal 1 || die "not stopped at its limit: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/jobs/1/status")" failed "status"
	grep -q '^reason=time limit 0:02 reached: the run was stopped without a checkpoint of its own; .resume. continues it' "$MNT/jobs/1/result" || die "result: $(cat "$MNT/jobs/1/result")"
	dlh_umount
}

test_max_queued_refuses_with_the_reason() {
	DLH_OPTS="-o cpus=1 -o max_queued=2" dlh_mount
	sleeper s 1 0 0 > "$STATE/a.ini"
	submit "$STATE/a.ini"   # runs
	submit "$STATE/a.ini"   # queued
	submit "$STATE/a.ini"   # queued
	expect_errno "Resource temporarily unavailable" cp "$STATE/a.ini" "$MNT/jobs/new"
	grep -q 'spec: the queue is full: 2 jobs queued (max_queued=2)' "$MNT/jobs/errors" ||
		die "errors: $(tail -2 "$MNT/jobs/errors")"
	[ -e "$MNT/jobs/4" ] && die "a refused job appeared"
	echo cancel > "$MNT/jobs/3/ctl"
	submit "$STATE/a.ini"   # room again: job 4
	local id
	for id in 1 2 4; do echo cancel > "$MNT/jobs/$id/ctl"; done
	wait_for 10 status_is 1 cancelled || die "job 1: $(cat "$MNT/jobs/1/status")"
	dlh_umount
}

# The checker of the 20-job run. Input: jobs.txt ("id priority submitted
# started finished ranks limit_s" per job), then samples.txt (blocks "@ TIME"
# followed by the lines of summary and queue read just before TIME). Prints
# what is wrong, and "backfills N" at the end.
check_pool_run() {
	awk -v total=2 '
	function epoch(iso,  y, m, d) {
		y = substr(iso, 1, 4) + 0; m = substr(iso, 6, 2) + 0; d = substr(iso, 9, 2) + 0
		if (m <= 2) { y--; m += 9 } else m -= 3
		return (365 * y + int(y / 4) - int(y / 100) + int(y / 400) + int((153 * m + 2) / 5) + d - 1 - 719468) * 86400 \
			+ substr(iso, 12, 2) * 3600 + substr(iso, 15, 2) * 60 + substr(iso, 18, 2)
	}
	FNR == NR { id = $1; ids[++n] = id; pr[id] = $2; sub_[id] = $3; st[id] = $4; fi[id] = $5; rk[id] = $6; lim[id] = $7; next }
	$1 == "@" { k++; T[k] = $2; next }
	$1 == "cpu" && $2 == "total" {
		if ($5 + 0 > total || $5 + $7 != total) print "sample " k ": " $0
		next
	}
	$2 == "priority" { for (f = 2; f < NF; f++) if ($f == "start") est[k, $1] = ($(f + 1) == "unknown") ? -1 : epoch($(f + 1)) }
	END {
		# slots held by records: at each start, the runs alive then
		for (a = 1; a <= n; a++) {
			x = ids[a]; held = 0
			for (b = 1; b <= n; b++) { y = ids[b]; if (st[y] <= st[x] && st[x] < fi[y]) held += rk[y] }
			if (held > total) print "at the start of job " x ": " held " slots held"
		}
		# every job that started ahead of one ranked before it was a backfill
		# that, by the queue published before it started, ended in time
		for (a = 1; a <= n; a++) for (b = 1; b <= n; b++) {
			x = ids[a]; y = ids[b]
			if (!(pr[y] > pr[x] || (pr[y] == pr[x] && sub_[y] < sub_[x]))) continue
			if (!(st[x] < st[y] && sub_[y] < st[x])) continue
			e = ""
			for (s = k; s >= 1; s--) if (T[s] < st[x] && ((s, y) in est)) { e = est[s, y]; break }
			if (e == "") { print "job " x " passed job " y " with no published estimate of " y; continue }
			if (e < 0 || st[x] + lim[x] > e + 1)
				printf "job %s passed job %s: ends by %.0f, after %s was estimated to start (%s)\n", x, y, st[x] + lim[x], y, e
			else passed[x] = 1
		}
		for (x in passed) bf++
		print "backfills " bf + 0
	}' "$1" "$2"
}

test_twenty_jobs_share_two_slots_by_priority_and_backfill() {
	DLH_OPTS="-o cpus=2" dlh_mount
	local node="$MNT/pool/nodes/$(host)" samples=$STATE/samples.txt i
	# 1 runs alone; 2 (priority 10, both slots) waits for it; 3 is short
	# enough to run beside 1 before 2 could start: a backfill
	tiny j1 1 0 2m > "$STATE/1.ini"
	tiny j2 2 10 1m > "$STATE/2.ini"
	tiny j3 1 0 20s > "$STATE/3.ini"
	for i in $(seq 4 20); do
		tiny "j$i" $((i % 3 == 0 ? 2 : 1)) $(((i * 7) % 3 * 5)) "$((20 + (i * 13) % 5 * 20))s" > "$STATE/$i.ini"
	done
	sample() { # one consistent-enough view: summary and queue, then the time
		local s q; s=$(cat "$MNT/pool/summary"); q=$(cat "$MNT/queue")
		printf '@ %s\n%s\n%s\n' "$(date +%s.%N)" "$s" "$q" >> "$samples"
	}
	( while [ ! -e "$STATE/stop" ]; do sample; sleep 0.02; done ) &
	local sampler=$!
	for i in $(seq 1 20); do
		submit "$STATE/$i.ini"
		sample
	done
	wait_for 300 sh -c "for i in \$(seq 1 20); do case \$(cat '$MNT/jobs/'\$i/status) in succeeded|failed|cancelled) ;; *) exit 1 ;; esac; done" ||
		die "not all ended: $(for i in $(seq 1 20); do printf '%s ' "$(cat "$MNT/jobs/$i/status")"; done)"
	touch "$STATE/stop"
	wait "$sampler"
	for i in $(seq 1 20); do
		expect_eq "$(cat "$MNT/jobs/$i/status")" succeeded "job $i ($(cat "$MNT/jobs/$i/progress"))"
	done
	expect_eq "$(cat "$node/devices")" "$(printf 'cpu0 -\ncpu1 -')" "devices at the end"
	[ "$(grep -c '^@' "$samples")" -ge 40 ] || die "too few samples: $(grep -c '^@' "$samples")"
	local f=$STATE/jobs.txt lim
	: > "$f"
	for i in $(seq 1 20); do
		lim=$(sed -n 's/^time_limit = //p' "$MNT/jobs/$i/spec" | awk -F: '{ print $1 * 3600 + $2 * 60 + $3 }')
		printf '%s %s %s %s %s %s %s\n' "$i" "$(sed -n 's/^priority = //p' "$MNT/jobs/$i/spec")" \
			"$(sed -n 's/^submitted=//p' "$STATE/jobs/$i/job")" "$(sed -n 's/^started=//p' "$STATE/jobs/$i/job")" \
			"$(sed -n 's/^finished=//p' "$STATE/jobs/$i/job")" "$(sed -n 's/^ranks=//p' "$STATE/jobs/$i/job")" "$lim" >> "$f"
	done
	local report; report=$(check_pool_run "$f" "$samples")
	echo "$report" | grep -v '^backfills' && die "$(echo "$report" | head -5)"
	echo "$report" | grep -q '^backfills [1-9]' || die "no job was backfilled: $report"
	# job 3 passed job 2 by backfill
	awk '$1 == 3 { s3 = $4 } $1 == 2 { s2 = $4 } END { exit !(s3 < s2) }' "$f" || die "job 3 did not pass job 2"
	dlh_umount
}

# Without time_limit, a running job is planned by its own rows and a queued
# one by its estimate: a command that tells its steps ([job] steps) and
# writes a row every 0.3 s holds one of two slots; a two-rank command waits
# for it with an estimated start (by those rows: not unknown), and a short
# training job (its estimate a few seconds, no time_limit) starts ahead of
# it, since by the estimates it ends before the slots are free anyway
test_jobs_without_limits_are_planned_and_backfilled_by_their_estimates() {
	DLH_OPTS="-o cpus=2" dlh_mount
	cat > "$STATE/rows.sh" <<'SH'
#!/bin/sh
t0=$(date +%s.%N)
printf 'kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s\n' >> "$DLH_METRICS_CSV"
i=1
while [ $i -le 100 ]; do
	sleep 0.3
	t=$(echo "$(date +%s.%N) - $t0" | bc)
	printf 'train,%d,1,%s,1.0,0.5,0.1,nan\n' $i "$t" >> "$DLH_METRICS_CSV"
	i=$((i + 1))
done
SH
	chmod 755 "$STATE/rows.sh"
	printf '[job]\nname = rows\ncommand = %s\nsteps = 100\n[resources]\nranks = 1\n' "$STATE/rows.sh" > "$STATE/a.ini"
	printf '[job]\nname = wide\ncommand = /bin/sleep 60\n[resources]\nranks = 2\n' > "$STATE/b.ini"
	printf '[job]\nname = short\npreemptible = false\n[data]\ntrain_limit = 512\ntest_limit = 256\n[model]\nlayers = 32\n' > "$STATE/c.ini"
	printf '[train]\nepochs = 1\nbatch_size = 64\ncheckpoint_every = 0\n[resources]\nranks = 1\n' >> "$STATE/c.ini"
	submit "$STATE/a.ini"
	submit "$STATE/b.ini"
	wait_for 20 grep -q '^2 .* run unknown start 20' "$MNT/queue" ||
		die "job 2 has no estimated start by job 1's rows: $(cat "$MNT/queue"); job 1: $(cat "$MNT/jobs/1/progress")"
	echo "measured: $(cat "$MNT/queue"); job 1: $(cat "$MNT/jobs/1/progress")"
	grep -q 'est. start [0-9]' "$MNT/jobs/2/progress" || die "job 2: $(cat "$MNT/jobs/2/progress")"
	submit "$STATE/c.ini"
	local est; est=$(sed -n 's/^total_s=//p' "$MNT/jobs/3/estimate")
	wait_for 20 job_terminal 3 || die "job 3 (estimated ${est} s) was not started ahead: $(cat "$MNT/jobs/3/progress"); queue: $(cat "$MNT/queue")"
	expect_eq "$(cat "$MNT/jobs/3/status")" succeeded "job 3"
	expect_eq "$(cat "$MNT/jobs/1/status")" running "job 1 while job 3 ran"
	expect_eq "$(cat "$MNT/jobs/2/status")" queued "job 2 while job 3 ran"
	echo "measured: job 3 (estimated ${est} s) backfilled: $(tail -1 "$MNT/jobs/3/progress")"
	for i in 1 2; do echo cancel > "$MNT/jobs/$i/ctl"; done
	wait_for 10 job_terminal 1 || die "job 1 did not end"
	wait_for 10 job_terminal 2 || die "job 2 did not end"
	dlh_umount
}
