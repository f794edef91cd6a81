# 75-slurm.sh - a Slurm pool (backend = slurm): pool/ shows the partition's
# nodes as Slurm reports them, and a job is a Slurm job that sbatch submits
# as its owner, whose ranks mpirun starts over the allocation. The cluster is
# real (tests/slurm.sh): munged, slurmctld and one slurmd per network
# namespace node, configured and started here, stopped at the end.

source tests/slurm.sh

# mount_slurm N [MOUNT OPTIONS...]: a cluster of N nodes, mounted with it as
# the pool, every node shown
mount_slurm() {
	local n=$1 i names=
	shift
	slurm_up "$n"
	local state
	state=$(mktemp -d /tmp/dlh-state.XXXXXX)
	chmod o+x "$state"   # the owners' batch jobs reach their job dirs
	slurm_pool > "$state/pool.ini"
	DLH_OPTS="-o pool=$state/pool.ini $*"   # kept: a test mounts again with them
	dlh_mount "$state"
	for i in $(seq "$n"); do names="$names dlhs$i"; done
	# shellcheck disable=SC2086
	wait_for 20 slurm_nodes_shown $names || die "pool/nodes: $(ls "$MNT/pool/nodes" 2>&1)"
}

# slurm_nodes_shown NODE...: each NODE is in pool/nodes and up by Slurm's word
slurm_nodes_shown() {
	local n
	for n in "$@"; do
		grep -q '^idle: ' "$MNT/pool/nodes/$n/state" || return 1
	done
}

# node_ranks NODE: dlh-train processes running in NODE's namespace
node_ranks() {
	local p n=0
	for p in $(ip netns pids "$1" 2>/dev/null); do
		[ "$(cat "/proc/$p/comm" 2>/dev/null)" = dlh-train ] && n=$((n + 1))
	done
	echo "$n"
}

# node_ranks_are NODE N: N dlh-train processes run in NODE's namespace
node_ranks_are() { [ "$(node_ranks "$1")" -eq "$2" ]; }

# node_procs_gone NODE WORD: no process in NODE's namespace has WORD in its
# command line
node_procs_gone() {
	local p
	for p in $(ip netns pids "$1" 2>/dev/null); do
		tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | grep -qF -- "$2" && return 1
	done
	return 0
}
node_has_ranks() { [ "$(node_ranks "$1")" -ge 1 ]; }

# slurm_job ID: the Slurm job id dlhfs submitted for job ID (from its plan)
slurm_job() { sed -n 's/^slurm_job //p' "$MNT/jobs/$1/plan"; }
has_slurm_job() { [ -n "$(slurm_job "$1")" ]; }

# slurm_job_gone SJOB: Slurm runs nothing of job SJOB (it ended, or is forgotten)
slurm_job_gone() {
	case $(squeue -h -j "$1" -t all -o %T 2>/dev/null) in
	""|CANCELLED|COMPLETED|FAILED|TIMEOUT) return 0 ;;
	esac
	return 1
}

# squeue_of SJOB: "UID NODES TIMELIMIT STATE" of Slurm job SJOB
squeue_of() { squeue -h -j "$1" -o '%U %D %l %T' 2>/dev/null; }

# A Slurm pool: pool/nodes has the partition's nodes with Slurm's cores,
# memory and state; drained with scontrol, a node shows drained on the next
# refresh, and idle again once resumed
test_slurm_pool_shows_the_partitions_nodes_as_slurm_reports_them() {
	mount_slurm 2
	local n
	for n in dlhs1 dlhs2; do
		expect_eq "$(cat "$MNT/pool/nodes/$n/cpus")" 2 "$n's cpus"
		expect_eq "$(cat "$MNT/pool/nodes/$n/memory")" $((1024 * 1024 * 1024)) "$n's memory"
		grep -q '^slurm: ranks started by Slurm in partition dlh' "$MNT/pool/nodes/$n/role" ||
			die "$n's role: $(cat "$MNT/pool/nodes/$n/role")"
	done
	grep -q '^idle: Slurm says idle: 2 cpus' "$MNT/pool/nodes/dlhs1/state" ||
		die "dlhs1's state: $(cat "$MNT/pool/nodes/dlhs1/state")"
	scontrol update nodename=dlhs2 state=drain reason=dlhtest-maintenance || die "scontrol drain failed"
	echo refresh > "$MNT/pool/ctl" || die "refresh failed"
	grep -q '^drained: Slurm says drained: dlhtest-maintenance' "$MNT/pool/nodes/dlhs2/state" ||
		die "dlhs2 after a drain: $(cat "$MNT/pool/nodes/dlhs2/state")"
	grep -q '^idle: ' "$MNT/pool/nodes/dlhs1/state" || die "dlhs1: $(cat "$MNT/pool/nodes/dlhs1/state")"
	scontrol update nodename=dlhs2 state=resume || die "scontrol resume failed"
	wait_for 10 slurm_idle 2 || die "dlhs2 did not come back: $(sinfo -N)"
	echo refresh > "$MNT/pool/ctl" || die "refresh failed"
	grep -q '^idle: ' "$MNT/pool/nodes/dlhs2/state" || die "dlhs2 resumed: $(cat "$MNT/pool/nodes/dlhs2/state")"
	# a reload takes the file's [env]; another partition, or another
	# backend, needs a remount: refused with the reason, the pool unchanged
	cp "$STATE/pool.ini" "$STATE/pool.ini.mounted"
	slurm_pool > "$STATE/pool.ini"
	sed -i "s/^partition = .*/partition = ${SLURM_PART}urgent/" "$STATE/pool.ini"
	expect_errno "Invalid argument" bash -c "echo reload > '$MNT/pool/ctl'"
	tail -1 "$MNT/jobs/errors" | grep -qF 'pool ctl: "reload": the file changes the backend, the partition or the account: remount to change them' ||
		die "errors: $(tail -1 "$MNT/jobs/errors")"
	printf '[node dlhs1]\ncpus = 2\n' > "$STATE/pool.ini"
	expect_errno "Invalid argument" bash -c "echo reload > '$MNT/pool/ctl'"
	cp "$STATE/pool.ini.mounted" "$STATE/pool.ini"
	echo reload > "$MNT/pool/ctl" || die "reload of the mounted file refused: $(tail -1 "$MNT/jobs/errors")"
	expect_eq "$(ls "$MNT/pool/nodes" | tr '\n' ' ')" "dlhs1 dlhs2 " "pool/nodes after the refused reloads"
	grep -q '^slurm: ranks started by Slurm in partition dlh;' "$MNT/pool/nodes/dlhs1/role" ||
		die "dlhs1's role: $(cat "$MNT/pool/nodes/dlhs1/role")"
	dlh_umount
}

# A pool file with backend = slurm names a line for each problem
test_slurm_pool_file_problems_name_their_line() {
	local f out
	f=$(mktemp /tmp/dlh-pool.XXXXXX)
	printf 'backend = slurm\npartition = a b\n[node x]\ncpus = 2\n' > "$f"
	MNT=$(mktemp -d /tmp/dlh-mnt.XXXXXX)
	STATE=$(mktemp -d /tmp/dlh-state.XXXXXX)
	trap dlh_cleanup EXIT   # both dirs go
	out=$("$DLH_BIN/dlhfs" -f -o "state=$STATE,pool=$f" "$MNT" 2>&1) && die "mounted with a bad pool file"
	rm -f "$f"
	case $out in *"$f:2: partition: expected a Slurm partition name"*) ;; *) die "no line 2: $out" ;; esac
	case $out in *"$f:3: [node x]: a Slurm pool's nodes are Slurm's"*) ;; *) die "no line 3: $out" ;; esac
}

# A job of 2 ranks on 2 nodes through jobs/new, submitted by a user: it is
# a Slurm job of that user's uid on 2 nodes with a time limit from the
# estimate; its ranks run one on each node; it ends succeeded with a result
test_a_two_node_job_is_a_slurm_job_of_its_owner_and_succeeds() {
	local u d sj q
	dlh_user u
	mount_slurm 2 -o allow_other
	d=$(shared_dir)
	slice_spec two 1 'nodes = 2' > "$d/two.ini"
	chmod 644 "$d/two.ini"
	as "$u" cp "$d/two.ini" "$MNT/jobs/new" || die "submit: $(tail -3 "$MNT/jobs/errors")"
	rm -rf "$d"
	wait_for 30 has_slurm_job 1 || die "no Slurm job in the plan: $(tail -5 "$MNT/jobs/1/log")"
	sj=$(slurm_job 1)
	grep -q "^sbatch /[^ ]*/sbatch --parsable --job-name=dlh-1 --partition=dlh --nodes=2 --ntasks=2 --ntasks-per-node=1 .*--time=[0-9]* --signal=B:XCPU@[0-9]* --requeue " "$MNT/jobs/1/plan" ||
		die "plan: $(grep -E '^(sbatch|launch|time_limit)' "$MNT/jobs/1/plan")"
	q=$(squeue_of "$sj")
	echo "measured: squeue of job $sj: $q"
	set -- $q
	[ -n "$q" ] || { grep -q '^exit=0' "$STATE/jobs/1/run.exit" 2>/dev/null || die "job $sj not in squeue"; }
	if [ -n "$q" ]; then
		expect_eq "$1" "$(id -u "$u")" "the Slurm job's uid"
		expect_eq "$2" 2 "the Slurm job's nodes"
		case $3 in UNLIMITED|"") die "no time limit: $q" ;; esac
	fi
	wait_for 240 job_terminal 1 || die "job 1 did not end: $(cat "$MNT/jobs/1/progress"; tail -5 "$MNT/jobs/1/log")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "job 1 ($(tail -8 "$MNT/jobs/1/log"))"
	grep -q '^test_accuracy=' "$MNT/jobs/1/result" || die "result: $(cat "$MNT/jobs/1/result")"
	grep -q "slurm: submitted batch job $sj as $u" "$MNT/jobs/1/log" || die "log: $(grep slurm: "$MNT/jobs/1/log")"
	grep -q "slurm: job $sj running on dlhs\[1-2\]" "$MNT/jobs/1/log" || die "log: $(grep slurm: "$MNT/jobs/1/log")"
	grep -q "dlh-train: host dlhs1 runs rank 0 of 2" "$MNT/jobs/1/log" || die "rank 0: $(grep 'runs rank' "$MNT/jobs/1/log")"
	grep -q "dlh-train: host dlhs2 runs rank 1 of 2" "$MNT/jobs/1/log" || die "rank 1: $(grep 'runs rank' "$MNT/jobs/1/log")"
	[ -s "$MNT/jobs/1/logs/rank.1" ] || die "no per-rank log of rank 1"
	dlh_umount
}

# cancel through ctl: Slurm cancels the job, it ends cancelled, and no rank
# is left on either node
test_cancel_scancels_the_slurm_job_and_leaves_no_rank() {
	local sj
	mount_slurm 2
	slice_spec long 30 'nodes = 2' > "$STATE/long.ini"
	cp "$STATE/long.ini" "$MNT/jobs/new" || die "submit: $(tail -3 "$MNT/jobs/errors")"
	wait_for 60 node_has_ranks dlhs2 || die "no rank on dlhs2: $(tail -5 "$MNT/jobs/1/log")"
	node_has_ranks dlhs1 || die "no rank on dlhs1"
	sj=$(slurm_job 1)
	echo cancel > "$MNT/jobs/1/ctl" || die "cancel failed"
	wait_for 30 job_terminal 1 || die "job 1 did not end: $(tail -5 "$MNT/jobs/1/log")"
	expect_eq "$(cat "$MNT/jobs/1/status")" cancelled "job 1 ($(tail -5 "$MNT/jobs/1/log"))"
	wait_for 10 slurm_job_gone "$sj" || die "Slurm job $sj: $(squeue -h -j "$sj" -o %T)"
	squeue -h -j "$sj" -t all -o '%T' | grep -qx CANCELLED || die "Slurm job $sj: $(squeue -h -j "$sj" -t all -o %T)"
	# at once: Slurm's job ended only once its processes did
	node_ranks_are dlhs1 0 || die "ranks left on dlhs1"
	node_ranks_are dlhs2 0 || die "ranks left on dlhs2"
	dlh_umount
}

# progress_says ID TEXT: the job's progress line holds TEXT
progress_says() { grep -qF -- "$2" "$MNT/jobs/$1/progress"; }

# progress_is_squeue_reason ID SJOB: job ID's progress is "pending in Slurm"
# with the reason squeue gives Slurm job SJOB (one, not None)
progress_is_squeue_reason() {
	local why; why=$(squeue -h -j "$2" -o %r 2>/dev/null)
	[ -n "$why" ] && [ "$why" != None ] &&
		[ "$(cat "$MNT/jobs/$1/progress")" = "pending in Slurm (job $2): $why" ]
}

# A job Slurm holds pending is `pending` in status, with Slurm's reason in
# progress; once Slurm lets it run, it trains and succeeds
test_a_pending_slurm_job_shows_slurms_reason_in_progress() {
	local sj
	mount_slurm 2
	scontrol update partitionname=dlh state=down || die "scontrol: partition down failed"
	slice_spec held 1 'nodes = 2' > "$STATE/held.ini"
	cp "$STATE/held.ini" "$MNT/jobs/new" || die "submit: $(tail -3 "$MNT/jobs/errors")"
	wait_for 30 has_slurm_job 1 || die "no Slurm job: $(tail -5 "$MNT/jobs/1/log")"
	sj=$(slurm_job 1)
	wait_for 20 progress_says 1 "pending in Slurm (job $sj): PartitionDown" ||
		die "progress: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/jobs/1/progress")" "pending in Slurm (job $sj): PartitionDown" "progress"
	expect_eq "$(cat "$MNT/jobs/1/status")" pending "status while Slurm holds it"
	expect_eq "$(squeue -h -j "$sj" -o '%T %r')" "PENDING PartitionDown" "squeue"
	grep -q "slurm: job $sj pending (PartitionDown)" "$MNT/jobs/1/log" || die "log: $(grep slurm: "$MNT/jobs/1/log")"
	# a reader waiting in poll(2) on status is woken when Slurm starts the job
	local out=$STATE/poll.out pid
	"$DLH_BIN/tests/poller" "$MNT/jobs/1/status" 60000 > "$out" & pid=$!
	wait_for 10 grep -q poll "/proc/$pid/wchan" || die "the poller did not wait in poll(2)"
	scontrol update partitionname=dlh state=up || die "scontrol: partition up failed"
	wait "$pid" || die "poller failed"
	grep -q '^event ' "$out" || die "poll on status was not woken: $(cat "$out")"
	grep -Eq '^now: (running|succeeded)$' "$out" || die "after the wake-up status says: $(cat "$out")"
	echo "measured: poll on status woke with $(grep '^now: ' "$out") once Slurm let the job run"
	wait_for 240 job_terminal 1 || die "job 1 did not end: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "job 1 ($(tail -5 "$MNT/jobs/1/log"))"
	dlh_umount
}

# queue_shows_slurm_start ID SJOB: the queue file's line of job ID names
# Slurm job SJOB with the start squeue --start gives it (in UTC)
queue_shows_slurm_start() {
	local s; s=$(squeue -h --start -j "$2" -o %S 2>/dev/null)
	case $s in 20*) ;; *) return 1 ;; esac
	grep -q "^$1 priority .* start 20[^ ]* slurm_job $2 slurm_start $(date -u -d "$s" +%Y-%m-%dT%H:%M:%SZ) slurm_reason Resources name " "$MNT/queue"
}

# A job that does not fit because another user's Slurm job holds the nodes
# (dlhfs sees them allocated, which is usable: Slurm queues) is submitted
# and waits `pending` with Slurm's reason (Resources); the queue file shows
# it with Slurm's job id and Slurm's estimated start (squeue --start: when
# the other job's time limit ends) beside dlhfs's own; once that job ends,
# Slurm runs it and it succeeds, and the queue no longer has it
test_a_job_the_busy_nodes_cannot_take_waits_pending_with_slurms_reason() {
	local other sj
	mount_slurm 2
	other=$(sbatch --parsable -p dlh -N2 --exclusive --time=10 -o /dev/null --wrap 'sleep 300') || die "sbatch of the other job failed"
	wait_for 20 eval '[ "$(squeue -h -j "$other" -o %T)" = RUNNING ]' || die "the other job: $(squeue -h -j "$other" -o '%T %r')"
	slice_spec busy 1 'nodes = 2' > "$STATE/b.ini"
	cp "$STATE/b.ini" "$MNT/jobs/new" || die "submit: $(tail -3 "$MNT/jobs/errors")"
	wait_for 30 has_slurm_job 1 || die "no Slurm job: $(cat "$MNT/jobs/1/progress"; tail -5 "$MNT/jobs/1/log")"
	sj=$(slurm_job 1)
	wait_for 20 progress_says 1 "pending in Slurm (job $sj): Resources" ||
		die "progress: $(cat "$MNT/jobs/1/progress"); squeue: $(squeue -h -j "$sj" -o '%T %r')"
	expect_eq "$(cat "$MNT/jobs/1/status")" pending "status while the nodes are busy"
	wait_for 30 queue_shows_slurm_start 1 "$sj" ||
		die "queue: $(cat "$MNT/queue"); squeue --start: $(squeue -h --start -j "$sj" -o '%i %S %r')"
	echo "measured: queue: $(cat "$MNT/queue"); other job $other: $(squeue -h -j "$other" -o '%S %l')"
	scancel "$other" || die "scancel of the other job failed"
	wait_for 120 job_terminal 1 || die "job 1 did not end: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "job 1 ($(tail -5 "$MNT/jobs/1/log"))"
	expect_eq "$(cat "$MNT/queue")" "" "the queue once the job ended"
	grep -q "slurm: job $sj pending (Resources)" "$MNT/jobs/1/log" || die "log: $(grep slurm: "$MNT/jobs/1/log")"
	dlh_umount
}

# kill -9 of dlhfs while a Slurm job runs: the job goes on in Slurm; the
# next mount (same state dir) finds it by its id and it ends succeeded
test_a_slurm_job_outlives_a_killed_daemon_and_is_taken_back() {
	local sj
	mount_slurm 2
	slice_spec long 8 'nodes = 2' > "$STATE/long.ini"
	cp "$STATE/long.ini" "$MNT/jobs/new" || die "submit: $(tail -3 "$MNT/jobs/errors")"
	wait_for 60 node_has_ranks dlhs2 || die "no rank on dlhs2: $(tail -5 "$MNT/jobs/1/log")"
	sj=$(slurm_job 1)
	kill -KILL "$DLH_PID"
	wait "$DLH_PID" 2>/dev/null
	expect_eq "$(squeue -h -j "$sj" -o %T)" RUNNING "Slurm job $sj after kill -9 of dlhfs"
	"$DLH_BIN/dlhfs" -f -o "state=$STATE" ${DLH_OPTS:-} "$MNT" 2>"$DLH_STDERR" &
	DLH_PID=$!
	wait_for 10 test -f "$MNT/pool/summary" || die "dlhfs did not mount again: $(cat "$DLH_STDERR")"
	: > "$DLH_STDERR"   # its word of the stale mount
	wait_for 240 job_terminal 1 || die "job 1 did not end: $(cat "$MNT/jobs/1/progress"; tail -5 "$MNT/jobs/1/log")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "job 1 ($(tail -8 "$MNT/jobs/1/log"))"
	grep -q "slurm: job $sj ended COMPLETED" "$MNT/jobs/1/log" || die "log: $(grep -v "^\[rank" "$MNT/jobs/1/log" | tail -25)"
	grep -q '^test_accuracy=' "$MNT/jobs/1/result" || die "result: $(cat "$MNT/jobs/1/result")"
	dlh_umount
}

# last_step ID: the step of the newest train row of job ID (0 when none)
last_step() {
	local s; s=$(grep '^train,' "$MNT/jobs/$1/metrics.csv" 2>/dev/null | tail -1 | cut -d, -f2)
	echo "${s:-0}"
}
step_at_least() { [ "$(last_step "$1")" -ge "$2" ]; }

# steps_once ID: the train rows of metrics.csv are steps 1..N, each once, in order
steps_once() {
	grep '^train,' "$MNT/jobs/$1/metrics.csv" | cut -d, -f2 | cmp -s - <(seq 1 "$(last_step "$1")")
}

# suspend through ctl: the ranks checkpoint and stop, the Slurm job leaves
# Slurm (no rank left on either node); resume submits a new Slurm job that
# starts from that checkpoint; the job succeeds with every step once
test_suspend_leaves_slurm_and_resume_submits_again_from_the_checkpoint() {
	local sj sj2 at
	mount_slurm 2
	slice_spec paused 4 'nodes = 2' > "$STATE/p.ini"
	cp "$STATE/p.ini" "$MNT/jobs/new" || die "submit: $(tail -3 "$MNT/jobs/errors")"
	wait_for 60 step_at_least 1 30 || die "no step 30: $(cat "$MNT/jobs/1/progress"; tail -5 "$MNT/jobs/1/log")"
	sj=$(slurm_job 1)
	echo suspend > "$MNT/jobs/1/ctl" || die "suspend refused: $(tail -3 "$MNT/jobs/1/log")"
	wait_for 30 status_is 1 suspended || die "status $(cat "$MNT/jobs/1/status"): $(tail -5 "$MNT/jobs/1/log")"
	wait_for 10 slurm_job_gone "$sj" || die "Slurm job $sj: $(squeue -h -j "$sj" -o %T)"
	node_ranks_are dlhs1 0 || die "ranks left on dlhs1"
	node_ranks_are dlhs2 0 || die "ranks left on dlhs2"
	grep -q 'on request, suspending' "$MNT/jobs/1/log" || die "no suspend checkpoint: $(grep -i checkpoint "$MNT/jobs/1/log" | tail -3)"
	at=$(last_step 1)
	grep -q "^step-0*$at.ckpt\$" "$MNT/jobs/1/checkpoints/latest" ||
		die "latest $(cat "$MNT/jobs/1/checkpoints/latest"), last row $at"
	echo resume > "$MNT/jobs/1/ctl" || die "resume refused: $(tail -3 "$MNT/jobs/1/log")"
	wait_for 30 eval '[ -n "$(slurm_job 1)" ] && [ "$(slurm_job 1)" != "$sj" ]' ||
		die "no new Slurm job: $(tail -5 "$MNT/jobs/1/log")"
	sj2=$(slurm_job 1)
	wait_for 240 job_terminal 1 || die "job 1 did not end: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "job 1 ($(tail -5 "$MNT/jobs/1/log"))"
	grep -q "slurm: submitted batch job $sj2" "$MNT/jobs/1/log" || die "log: $(grep slurm: "$MNT/jobs/1/log")"
	grep -q "start step $at" "$MNT/jobs/1/log" || die "did not start at step $at: $(grep 'start step' "$MNT/jobs/1/log")"
	steps_once 1 || die "train steps of metrics.csv are not 1..$(last_step 1) once each"
	echo "measured: suspended at step $at of $(last_step 1); Slurm jobs $sj then $sj2"
	dlh_umount
}

# Slurm's time limit: a job whose time_limit is 60 s is submitted with
# --time=1 and Slurm's signal before it; the signal reaches the ranks
# through dlh-shepherd, they checkpoint and stop; the job fails resumable
# with Slurm's limit as its reason (dlhfs keeps no timer of its own: Slurm's
# pending time does not count), and `resume` submits it again from that
# checkpoint, every step once
test_slurms_time_limit_checkpoints_on_its_signal_and_resume_continues() {
	local sj sj2 at
	mount_slurm 2
	slice_spec limited 60 'nodes = 2' | sed 's/^name = limited$/name = limited\ntime_limit = 60s/' > "$STATE/t.ini"
	cp "$STATE/t.ini" "$MNT/jobs/new" || die "submit: $(tail -3 "$MNT/jobs/errors")"
	wait_for 30 has_slurm_job 1 || die "no Slurm job: $(tail -5 "$MNT/jobs/1/log")"
	sj=$(slurm_job 1)
	grep -q "^sbatch .* --time=1 --signal=B:XCPU@30 --requeue " "$MNT/jobs/1/plan" ||
		die "plan: $(grep -E '^(sbatch|time_limit)' "$MNT/jobs/1/plan")"
	wait_for 90 job_terminal 1 || die "job 1 did not stop: $(cat "$MNT/jobs/1/progress"; tail -5 "$MNT/jobs/1/log")"
	expect_eq "$(cat "$MNT/jobs/1/status")" failed "status at Slurm's limit ($(tail -5 "$MNT/jobs/1/log"))"
	grep -q "Slurm's time limit of job $sj (00:01:00) reached: the run stopped at a checkpoint it took then; \`resume\` continues it" \
		"$MNT/jobs/1/progress" || die "progress: $(cat "$MNT/jobs/1/progress"); log: $(grep dlhfs: "$MNT/jobs/1/log" | tail -8)"
	grep -q "time limit 1:00 in" "$MNT/jobs/1/log" && die "dlhfs's own timer stopped it: $(grep 'time limit' "$MNT/jobs/1/log")"
	node_ranks_are dlhs1 0 || die "ranks left on dlhs1"
	node_ranks_are dlhs2 0 || die "ranks left on dlhs2"
	at=$(last_step 1)
	[ "$at" -gt 1 ] || die "stopped at step $at"
	grep -q "^step-0*$at.ckpt\$" "$MNT/jobs/1/checkpoints/latest" ||
		die "latest $(cat "$MNT/jobs/1/checkpoints/latest"), last row $at"
	echo resume > "$MNT/jobs/1/ctl" || die "resume refused: $(tail -3 "$MNT/jobs/1/log")"
	wait_for 30 grep -q "start step $at" "$MNT/jobs/1/log" ||
		die "did not start at step $at: $(grep 'start step' "$MNT/jobs/1/log"; tail -5 "$MNT/jobs/1/log")"
	sj2=$(slurm_job 1)
	[ "$sj2" != "$sj" ] || die "no new Slurm job: $sj2"
	wait_for 30 step_at_least 1 $((at + 5)) || die "no step past $at: $(tail -3 "$MNT/jobs/1/log")"
	echo cancel > "$MNT/jobs/1/ctl" || die "cancel refused"
	wait_for 30 job_terminal 1 || die "job 1 did not end: $(tail -5 "$MNT/jobs/1/log")"
	steps_once 1 || die "train steps of metrics.csv are not 1..$(last_step 1) once each"
	echo "measured: Slurm's signal stopped job $sj at step $at; job $sj2 took up from there"
	dlh_umount
}

# squeue_nodes SJOB: the nodes Slurm gave job SJOB ("" when it has ended)
squeue_nodes() { squeue -h -j "$1" -o %N 2>/dev/null; }

# A node drained with scontrol shows drained in pool/ and gets no rank of a
# job submitted afterwards; a job of two nodes is submitted all the same
# and waits `pending` in Slurm's queue with Slurm's reason (its log saying
# it was planned over the drained node), and runs once the node is resumed
test_a_drained_node_gets_no_ranks_and_a_job_needing_it_waits() {
	local sj sj2 why
	mount_slurm 2
	scontrol update nodename=dlhs2 state=drain reason=dlhtest-maint || die "scontrol drain failed"
	echo refresh > "$MNT/pool/ctl" || die "refresh failed"
	grep -q '^drained: Slurm says drained: dlhtest-maint' "$MNT/pool/nodes/dlhs2/state" ||
		die "dlhs2: $(cat "$MNT/pool/nodes/dlhs2/state")"
	slice_spec one 3 > "$STATE/o.ini"
	cp "$STATE/o.ini" "$MNT/jobs/new" || die "submit: $(tail -3 "$MNT/jobs/errors")"
	wait_for 60 node_has_ranks dlhs1 || die "no rank on dlhs1: $(cat "$MNT/jobs/1/progress"; tail -5 "$MNT/jobs/1/log")"
	sj=$(slurm_job 1)
	expect_eq "$(squeue_nodes "$sj")" dlhs1 "the nodes of Slurm job $sj"
	node_ranks_are dlhs2 0 || die "a rank on the drained dlhs2"
	wait_for 120 job_terminal 1 || die "job 1 did not end: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "job 1 ($(tail -5 "$MNT/jobs/1/log"))"
	grep -q "slurm: job $sj running on dlhs1\$" "$MNT/jobs/1/log" || die "log: $(grep slurm: "$MNT/jobs/1/log")"
	slice_spec wide 1 'nodes = 2' > "$STATE/w.ini"
	cp "$STATE/w.ini" "$MNT/jobs/new" || die "submit: $(tail -3 "$MNT/jobs/errors")"
	wait_for 30 has_slurm_job 2 || die "job 2 not submitted: $(cat "$MNT/jobs/2/progress"; tail -3 "$MNT/jobs/2/log")"
	sj2=$(slurm_job 2)
	wait_for 20 progress_says 2 "pending in Slurm (job $sj2): " || die "progress: $(cat "$MNT/jobs/2/progress")"
	expect_eq "$(cat "$MNT/jobs/2/status")" pending "job 2 while dlhs2 is drained"
	# Slurm's reason, as squeue gives it (the progress file follows it within a poll)
	wait_for 20 progress_is_squeue_reason 2 "$sj2" ||
		die "progress: $(cat "$MNT/jobs/2/progress"); squeue: $(squeue -h -j "$sj2" -o '%T %r')"
	grep -q "planned over dlhs2 (drained in Slurm)" "$MNT/jobs/2/log" || die "log: $(tail -5 "$MNT/jobs/2/log")"
	echo "measured: a job of 2 nodes with dlhs2 drained: Slurm job $sj2 $(squeue -h -j "$sj2" -o '%T %r')"
	scontrol update nodename=dlhs2 state=resume || die "scontrol resume failed"
	wait_for 10 slurm_idle 2 || die "dlhs2 did not come back: $(sinfo -N)"
	echo refresh > "$MNT/pool/ctl" || die "refresh failed"
	wait_for 120 job_terminal 2 || die "job 2 did not end: $(cat "$MNT/jobs/2/progress")"
	expect_eq "$(cat "$MNT/jobs/2/status")" succeeded "job 2 ($(tail -5 "$MNT/jobs/2/log"))"
	grep -q "running on dlhs\[1-2\]" "$MNT/jobs/2/log" || die "log: $(grep slurm: "$MNT/jobs/2/log")"
	dlh_umount
}

# A node Slurm sets down under a job, which then fails (its slurmd and ranks
# gone at once, as a machine that loses power): Slurm requeues the job
# (--requeue; NODE_FAIL is its state only where it cannot), which is then
# `pending` with Slurm's reason, its log saying so, and no rank is left on
# either node; once the node is back (its slurmd started again), the rerun
# (dlh-train) takes up from its newest checkpoint and the job succeeds with
# every step once.
# Why the node goes down first and then dies: set down with its slurmd
# living on, that slurmd (22.05) ends the first run there and then waits a
# while for the job's steps to go, and a rerun let start within that wait
# (this test cuts Slurm's hold short) has the same step ids: slurmd ended
# the rerun's step (seen in CI: "ORTE has lost communication with a remote
# daemon" on the rerun, the job failed); Slurm's hold of a requeued job
# (BeginTime) is what spares a site that. Dead first, the first run's rank
# on the other node fails on its lost peer and the batch job ends FAILED
# before Slurm hears of the node (seen in a suite): a job Slurm never
# requeues.
test_a_node_slurm_sets_down_under_a_job_requeues_it_pending() {
	local sj
	mount_slurm 2
	slice_spec doomed 3 'nodes = 2' > "$STATE/d.ini"
	cp "$STATE/d.ini" "$MNT/jobs/new" || die "submit: $(tail -3 "$MNT/jobs/errors")"
	wait_for 60 step_at_least 1 25 || die "no step 25: $(cat "$MNT/jobs/1/progress"; tail -5 "$MNT/jobs/1/log")"
	sj=$(slurm_job 1)
	scontrol update nodename=dlhs2 state=down reason=dlhtest-fail || die "scontrol down failed"
	slurm_node_crash 2
	wait_for 20 status_is 1 pending || die "status $(cat "$MNT/jobs/1/status"): $(tail -5 "$MNT/jobs/1/log")"
	grep -q "^pending in Slurm (job $sj): " "$MNT/jobs/1/progress" || die "progress: $(cat "$MNT/jobs/1/progress")"
	wait_for 10 grep -q "slurm: job $sj was requeued by Slurm (restart 1)" "$MNT/jobs/1/log" ||
		die "log: $(grep slurm: "$MNT/jobs/1/log")"
	wait_for 10 node_ranks_are dlhs1 0 || die "ranks left on dlhs1"
	node_ranks_are dlhs2 0 || die "ranks left on dlhs2"
	# it boots again: its slurmd registers, and Slurm takes it back
	# (ReturnToService=2), or a resume does
	slurmd_start 2
	wait_for 20 slurm_idle 2 || scontrol update nodename=dlhs2 state=resume 2>/dev/null
	wait_for 20 slurm_idle 2 || die "dlhs2 did not come back: $(sinfo -N; slurm_said)"
	scontrol update jobid="$sj" starttime=now || die "scontrol starttime=now failed"   # past BeginTime
	wait_for 120 job_terminal 1 || die "job 1 did not end: $(cat "$MNT/jobs/1/progress"; tail -5 "$MNT/jobs/1/log")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "job 1 ($(tail -5 "$MNT/jobs/1/log"))"
	steps_once 1 || die "train steps of metrics.csv are not 1..$(last_step 1) once each"
	grep -Eq "start step [1-9][0-9]*" "$MNT/jobs/1/log" || die "the rerun did not take up: $(grep 'start step' "$MNT/jobs/1/log")"
	echo "measured: the rerun of Slurm job $sj: $(grep -Eo 'start step [0-9]+' "$MNT/jobs/1/log" | tr '\n' ' ')"
	dlh_umount
}

# A [job] command's run that Slurm requeues (its node set down under it)
# waits pending past its hang_timeout without being called hung, runs its
# batch job again on the node left, and takes up from its newest
# checkpoint as a resume does: the rerun's dlh-shepherd gives the program
# DLH_RESUME_FROM and DLH_START_STEP and cuts metrics.csv back to that step,
# so the job succeeds with every step once
test_a_command_slurm_requeues_takes_up_from_its_newest_checkpoint() {
	local sj node prog
	mount_slurm 2
	prog=$STATE/steps.sh
	cat > "$prog" <<'PROG'
#!/bin/sh
# a user's program: 50 steps, a row each, a checkpoint every 5
s=${DLH_START_STEP:-0}
[ -s "$DLH_METRICS_CSV" ] || echo kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s > "$DLH_METRICS_CSV"
while [ "$s" -lt 50 ]; do
	s=$((s + 1))
	echo "train,$s,1,$s,0.5,0.5,0.1,100" >> "$DLH_METRICS_CSV"
	[ $((s % 5)) = 0 ] && : > "$DLH_CHECKPOINT_DIR/step-$s.ckpt"
	sleep 0.1
done
PROG
	chmod 755 "$prog"
	printf '[job]\nname = steps\ncommand = %s\nhang_timeout = 10s\n[resources]\nranks = 1\n' "$prog" > "$STATE/c.ini"
	cp "$STATE/c.ini" "$MNT/jobs/new" || die "submit: $(tail -3 "$MNT/jobs/errors")"
	wait_for 60 step_at_least 1 12 || die "no step 12: $(cat "$MNT/jobs/1/progress"; tail -5 "$MNT/jobs/1/log")"
	sj=$(slurm_job 1)
	node=$(squeue_nodes "$sj")
	scontrol update nodename="$node" state=down reason=dlhtest-fail || die "scontrol down failed"
	# and kept from jobs when its slurmd registers again (ReturnToService=2)
	scontrol update nodename="$node" state=drain reason=dlhtest-fail || die "scontrol drain failed"
	wait_for 20 grep -q "slurm: job $sj was requeued by Slurm (restart 1)" "$MNT/jobs/1/log" ||
		die "log: $(grep slurm: "$MNT/jobs/1/log")"
	# Slurm holds a requeued job back a while (BeginTime): longer than its
	# hang_timeout, which does not count while Slurm holds it: the job stays
	# pending, looked at throughout, 12 s into the hold
	echo "measured: requeued job $sj: $(squeue -h -j "$sj" -o '%T %r start %S')"
	holds_for 12 status_is 1 pending ||
		die "status $(cat "$MNT/jobs/1/status") within 12 s of Slurm's hold ($(tail -3 "$MNT/jobs/1/log"))"
	scontrol update jobid="$sj" starttime=now || die "scontrol starttime=now failed"
	wait_for 120 job_terminal 1 || die "job 1 did not end: $(cat "$MNT/jobs/1/progress"; grep -v '^\[rank' "$MNT/jobs/1/log" | tail -30; sinfo -N)"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "job 1 ($(tail -5 "$MNT/jobs/1/log"))"
	expect_eq "$(last_step 1)" 50 "the last step"
	steps_once 1 || die "train steps of metrics.csv are not 1..50 once each: $(grep -c '^train,' "$MNT/jobs/1/metrics.csv") rows"
	grep -q "Slurm requeued the batch job (restart 1): its command takes up from .*/step-[0-9]*.ckpt, step [1-9]" \
		"$MNT/jobs/1/log" || die "no take-up: $(grep -E 'slurm:|shepherd' "$MNT/jobs/1/log")"
	echo "measured: $(grep -o 'takes up from .*' "$MNT/jobs/1/log") after $node went down"
	dlh_umount
}

# A job written while Slurm does not answer (slurmctld stopped before the
# mount: sinfo fails, no node is known) waits `queued`, its progress
# saying that Slurm has not answered; once slurmctld is back and a refresh
# hears sinfo, it is submitted and succeeds
test_a_job_planned_before_slurm_answers_waits_then_runs() {
	local state
	slurm_up 1
	slurm_ctld_stop
	state=$(mktemp -d /tmp/dlh-state.XXXXXX)
	chmod o+x "$state"
	slurm_pool > "$state/pool.ini"
	DLH_OPTS="-o pool=$state/pool.ini"
	dlh_mount "$state"
	slice_spec early 1 > "$STATE/e.ini"
	cp "$STATE/e.ini" "$MNT/jobs/new" || die "submit: $(tail -3 "$MNT/jobs/errors")"
	wait_for 20 progress_says 1 "Slurm has not answered" ||
		die "progress: $(cat "$MNT/jobs/1/progress"); status $(cat "$MNT/jobs/1/status"); $(tail -5 "$MNT/jobs/1/log")"
	expect_eq "$(cat "$MNT/jobs/1/status")" queued "status while Slurm does not answer"
	echo "measured: progress while Slurm does not answer: $(cat "$MNT/jobs/1/progress")"
	slurm_ctld_start
	echo refresh > "$MNT/pool/ctl" || die "refresh failed"
	wait_for 120 job_terminal 1 || die "job 1 did not end: $(cat "$MNT/jobs/1/progress"; tail -5 "$MNT/jobs/1/log")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "job 1 ($(tail -5 "$MNT/jobs/1/log"))"
	has_slurm_job 1 || die "no Slurm job in the plan"
	dlh_umount
}

# squeue_nice SJOB: Slurm's nice of job SJOB
squeue_nice() { squeue -h -j "$1" -o %y 2>/dev/null | tr -d ' '; }

# priority through ctl is Slurm's nice of the job (nice = -priority): its
# owner may lower it (scontrol as the owner: nice 5), not raise it (refused
# with EPERM, Slurm's nice unchanged); root raises it (nice -10)
test_priority_through_ctl_is_slurms_nice_of_the_job() {
	local u d sj
	dlh_user u
	mount_slurm 2 -o allow_other
	scontrol update partitionname=dlh state=down || die "scontrol: partition down failed"
	d=$(shared_dir)
	slice_spec nice 1 'nodes = 2' > "$d/n.ini"
	chmod 644 "$d/n.ini"
	as "$u" cp "$d/n.ini" "$MNT/jobs/new" || die "submit: $(tail -3 "$MNT/jobs/errors")"
	rm -rf "$d"
	wait_for 30 has_slurm_job 1 || die "no Slurm job: $(tail -5 "$MNT/jobs/1/log")"
	sj=$(slurm_job 1)
	wait_for 20 status_is 1 pending || die "status $(cat "$MNT/jobs/1/status")"
	as "$u" sh -c "echo 'priority -5' > '$MNT/jobs/1/ctl'" || die "the owner's priority -5 refused: $(tail -3 "$MNT/jobs/1/log")"
	expect_eq "$(squeue_nice "$sj")" 5 "Slurm's nice after the owner's priority -5"
	as "$u" sh -c "echo 'priority 20' > '$MNT/jobs/1/ctl'" 2>/dev/null && die "the owner raised the priority"
	expect_eq "$(squeue_nice "$sj")" 5 "Slurm's nice after a refused raise"
	echo 'priority 10' > "$MNT/jobs/1/ctl" || die "root's priority 10 refused: $(tail -3 "$MNT/jobs/1/log")"
	expect_eq "$(squeue_nice "$sj")" -10 "Slurm's nice after root's priority 10"
	echo cancel > "$MNT/jobs/1/ctl" || die "cancel refused"
	wait_for 30 job_terminal 1 || die "job 1 did not end: $(tail -5 "$MNT/jobs/1/log")"
	dlh_umount
}

# An unmount while Slurm does not answer ends all the same (the job is left
# to Slurm, its handle kept); the next mount, with Slurm back, takes it back
# and it ends as Slurm ran it
test_an_unmount_while_slurm_does_not_answer_ends_and_the_next_mount_takes_the_job_back() {
	local sj t0 took
	mount_slurm 2
	slice_spec long 8 'nodes = 2' > "$STATE/long.ini"
	cp "$STATE/long.ini" "$MNT/jobs/new" || die "submit: $(tail -3 "$MNT/jobs/errors")"
	wait_for 60 node_has_ranks dlhs2 || die "no rank on dlhs2: $(tail -5 "$MNT/jobs/1/log")"
	sj=$(slurm_job 1)
	slurm_ctld_stop
	t0=$SECONDS
	fusermount3 -u "$MNT" || die "fusermount3 -u failed"
	wait_for 90 eval '! kill -0 "$DLH_PID" 2>/dev/null' ||
		die "dlhfs still there 90 s after the unmount: $(tail -3 "$STATE/jobs/1/log")"
	wait "$DLH_PID"
	took=$((SECONDS - t0))
	echo "measured: the unmount with slurmctld down took $took s"
	grep -q . "$STATE/jobs/1/run.handle" || die "the job's handle is gone"
	slurm_ctld_start
	"$DLH_BIN/dlhfs" -f -o "state=$STATE" ${DLH_OPTS:-} "$MNT" 2>"$DLH_STDERR" &
	DLH_PID=$!
	wait_for 10 test -f "$MNT/pool/summary" || die "dlhfs did not mount again: $(cat "$DLH_STDERR")"
	wait_for 240 job_terminal 1 || die "job 1 did not end: $(cat "$MNT/jobs/1/progress"; tail -5 "$MNT/jobs/1/log")"
	grep -q "slurm: job $sj ended" "$MNT/jobs/1/log" || die "log: $(grep -v "^\[rank" "$MNT/jobs/1/log" | tail -25)"
	echo "measured: job 1 (Slurm job $sj) $(cat "$MNT/jobs/1/status") after the remount: $(grep "slurm: job $sj ended" "$MNT/jobs/1/log" | tail -1)"
	case $(cat "$MNT/jobs/1/status") in
	succeeded|queued|suspended) ;;
	*) die "job 1 after the remount: $(cat "$MNT/jobs/1/progress"); $(grep -v '^\[rank' "$MNT/jobs/1/log" | tail -12)" ;;
	esac
	dlh_umount
}

# suspend of a job Slurm still holds pending: it leaves Slurm's queue (there
# is nothing to checkpoint yet) and is `suspended`; resume submits it again,
# and it runs and succeeds once Slurm lets it
test_suspend_of_a_job_pending_in_slurm_takes_it_out_of_slurms_queue() {
	local sj sj2
	mount_slurm 2
	scontrol update partitionname=dlh state=down || die "scontrol: partition down failed"
	slice_spec held 1 'nodes = 2' > "$STATE/held.ini"
	cp "$STATE/held.ini" "$MNT/jobs/new" || die "submit: $(tail -3 "$MNT/jobs/errors")"
	wait_for 30 status_is 1 pending || die "status: $(cat "$MNT/jobs/1/status"): $(tail -3 "$MNT/jobs/1/log")"
	sj=$(slurm_job 1)
	echo suspend > "$MNT/jobs/1/ctl" || die "suspend failed"
	wait_for 30 status_is 1 suspended || die "status $(cat "$MNT/jobs/1/status"): $(tail -5 "$MNT/jobs/1/log")"
	wait_for 10 slurm_job_gone "$sj" || die "Slurm job $sj: $(squeue -h -j "$sj" -t all -o '%T %r')"
	echo "measured: suspended while pending: $(cat "$MNT/jobs/1/progress"); Slurm job $sj $(squeue -h -j "$sj" -t all -o %T)"
	scontrol update partitionname=dlh state=up || die "scontrol: partition up failed"
	echo resume > "$MNT/jobs/1/ctl" || die "resume failed"
	wait_for 240 job_terminal 1 || die "job 1 did not end: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "job 1 ($(tail -5 "$MNT/jobs/1/log"))"
	sj2=$(slurm_job 1)
	[ "$sj2" != "$sj" ] || die "resume did not submit a new Slurm job ($sj)"
	steps_once 1 || die "train steps of metrics.csv are not 1..$(last_step 1) once each"
	dlh_umount
}

# A program that does not stop on Slurm's signal before its time limit
# (it ignores the suspend signal it is passed) runs into the limit: Slurm
# ends the job TIMEOUT, and the job fails with Slurm's words on it, its
# progress saying there was no checkpoint of its own then; no process is
# left on the node
test_a_program_that_ignores_slurms_signal_ends_timeout() {
	local sj prog
	mount_slurm 1
	prog=$STATE/stubborn.sh
	cat > "$prog" <<'PROG'
#!/bin/sh
# a user's program that ignores the signals asking it to checkpoint
trap '' USR1 USR2 XCPU
[ -s "$DLH_METRICS_CSV" ] || echo kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s > "$DLH_METRICS_CSV"
s=0
while :; do
	s=$((s + 1))
	echo "train,$s,1,$s,0.5,0.5,0.1,100" >> "$DLH_METRICS_CSV"
	sleep 0.2
done
PROG
	chmod 755 "$prog"
	printf '[job]\nname = stubborn\ncommand = %s\ntime_limit = 60s\nprofile = false\n[resources]\nranks = 1\n' "$prog" > "$STATE/s.ini"
	cp "$STATE/s.ini" "$MNT/jobs/new" || die "submit: $(tail -3 "$MNT/jobs/errors")"
	wait_for 30 has_slurm_job 1 || die "no Slurm job: $(tail -5 "$MNT/jobs/1/log")"
	sj=$(slurm_job 1)
	wait_for 30 step_at_least 1 2 || die "no step: $(cat "$MNT/jobs/1/progress"; tail -5 "$MNT/jobs/1/log")"
	wait_for 150 job_terminal 1 || die "job 1 did not end: $(cat "$MNT/jobs/1/progress"; squeue -h -j "$sj" -t all -o '%T %r')"
	expect_eq "$(cat "$MNT/jobs/1/status")" failed "status ($(tail -5 "$MNT/jobs/1/log"))"
	grep -q "slurm: job $sj ended TIMEOUT" "$MNT/jobs/1/log" || die "log: $(grep slurm: "$MNT/jobs/1/log")"
	grep -q "Slurm's time limit of job $sj (00:01:00; ended TIMEOUT)" "$MNT/jobs/1/progress" ||
		die "progress: $(cat "$MNT/jobs/1/progress")"
	wait_for 10 node_procs_gone dlhs1 stubborn.sh || die "the program is left on dlhs1"
	echo "measured: $(cat "$MNT/jobs/1/progress")"
	dlh_umount
}

# `checkpoint` through ctl reaches the ranks of a Slurm job (the trainer
# says it took one on request). A job of a partition of a higher priority
# tier then preempts the dlhfs job
# (PreemptMode=CANCEL): Slurm ends it PREEMPTED, and the job is
# `suspended` with Slurm's words, not resubmitted against Slurm's
# decision; no rank is left; `resume` submits it again once the other job
# is gone, and it takes up from its newest checkpoint (every step once)
test_a_job_slurm_preempts_is_suspended_and_resumes_from_its_checkpoint() {
	local sj other at
	mount_slurm 1
	slice_spec preempted 100 > "$STATE/p.ini"
	cp "$STATE/p.ini" "$MNT/jobs/new" || die "submit: $(tail -3 "$MNT/jobs/errors")"
	wait_for 60 step_at_least 1 25 || die "no step 25: $(cat "$MNT/jobs/1/progress"; tail -5 "$MNT/jobs/1/log")"
	sj=$(slurm_job 1)
	# the checkpoint verb: Slurm signals the batch shell, which passes it on
	echo checkpoint > "$MNT/jobs/1/ctl" || die "checkpoint refused: $(tail -3 "$MNT/jobs/1/log")"
	wait_for 30 grep -q "dlh-train: checkpoint .* on request" "$MNT/jobs/1/log" ||
		die "no checkpoint on request: $(grep -v '^\[rank' "$MNT/jobs/1/log" | tail -3)"
	other=$(sbatch --parsable -p "${SLURM_PART}urgent" -N1 --exclusive -o /dev/null --wrap 'sleep 300') ||
		die "sbatch of the urgent job failed"
	wait_for 60 job_terminal_or_suspended 1 || die "job 1: $(cat "$MNT/jobs/1/status"): $(tail -5 "$MNT/jobs/1/log")"
	expect_eq "$(cat "$MNT/jobs/1/status")" suspended "status once Slurm preempted it ($(grep slurm: "$MNT/jobs/1/log"))"
	grep -q "slurm: job $sj ended PREEMPTED" "$MNT/jobs/1/log" || die "log: $(grep slurm: "$MNT/jobs/1/log")"
	grep -q "Slurm preempted job $sj (PREEMPTED)" "$MNT/jobs/1/progress" || die "progress: $(cat "$MNT/jobs/1/progress")"
	wait_for 10 node_ranks_are dlhs1 0 || die "ranks left on dlhs1"
	holds_for 3 status_is 1 suspended || die "not kept suspended: $(cat "$MNT/jobs/1/status")"
	[ "$(slurm_job 1)" = "$sj" ] || die "resubmitted by itself as Slurm job $(slurm_job 1)"
	echo "measured: $(cat "$MNT/jobs/1/progress")"
	scancel "$other" || die "scancel of the urgent job failed"
	wait_for 20 slurm_idle 1 || die "dlhs1 not idle: $(sinfo -N)"
	at=$(last_step 1)
	echo resume > "$MNT/jobs/1/ctl" || die "resume refused: $(tail -3 "$MNT/jobs/1/log")"
	wait_for 60 grep -Eq "start step [1-9][0-9]*" "$MNT/jobs/1/log" ||
		die "the resumed run did not take up: $(grep 'start step' "$MNT/jobs/1/log"; tail -5 "$MNT/jobs/1/log")"
	[ "$(slurm_job 1)" != "$sj" ] || die "resume submitted no new Slurm job"
	wait_for 60 step_at_least 1 $((at + 5)) || die "no step past $at: $(tail -3 "$MNT/jobs/1/log")"
	echo cancel > "$MNT/jobs/1/ctl" || die "cancel refused"
	wait_for 30 job_terminal 1 || die "job 1 did not end: $(tail -5 "$MNT/jobs/1/log")"
	steps_once 1 || die "train steps of metrics.csv are not 1..$(last_step 1) once each"
	echo "measured: preempted at step $at; the resumed run $(grep -Eo 'start step [0-9]+' "$MNT/jobs/1/log" | tail -1)"
	dlh_umount
}

job_terminal_or_suspended() { job_terminal "$1" || status_is "$1" suspended; }
