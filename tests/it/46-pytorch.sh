# 46-pytorch.sh - examples/pytorch-ddp through the mount: a PyTorch DDP (gloo)
# program as a [job] command on 2 ranks, its progress from its rows and
# [job] steps, checkpointed on request, suspended and resumed without
# repeating or losing a step

# job_procs ID: pids of the processes that run job ID's command (found by the
# DLH_JOB_DIR of their environment: the program's argv does not name the job)
job_procs() {
	local e
	for e in /proc/[0-9]*/environ; do
		tr '\0' '\n' 2>/dev/null < "$e" | grep -qx "DLH_JOB_DIR=$STATE/jobs/$1" &&
			{ e=${e#/proc/}; echo "${e%/environ}"; }
	done
	return 0
}
no_job_procs() { [ -z "$(job_procs "$1")" ]; }

# a run left by a failed test: its ranks are not dlh-train, so dlh_cleanup
# does not find them
torch_cleanup() {
	local p
	[ -n "${STATE:-}" ] && for p in $(job_procs 1); do kill -KILL "$p" 2>/dev/null; done
	dlh_cleanup
}

# ddp_spec PY: the example's spec on a slice, its program copied to STATE (a
# checkout's path may be long) and the checkout's dlhfs library on its
# PYTHONPATH ([job] env; installed, it is where python3 looks): 3072 images,
# 2 epochs of 48 steps (96), a checkpoint every 20, each step at least 50 ms
# (a few seconds in all, so that it can be suspended midway)
ddp_spec() {
	cp "$DLH_ROOT/examples/pytorch-ddp/train.py" "$STATE/train.py" || die "cannot copy train.py"
	sed -e "s|^command = /usr/bin/python3 /usr/local/share/doc/dlhfs/examples/pytorch-ddp/train.py |command = $1 $STATE/train.py |" \
	    -e 's|^command = .*|& --train-limit 3072 --checkpoint-every 20 --min-step-s 0.05|' \
	    -e "/^command = /a env = PYTHONPATH=$DLH_ROOT/engine/contract" \
	    -e 's|^steps = .*|steps = 96|' "$DLH_ROOT/examples/pytorch-ddp/fashion-mnist-ddp.ini"
}

last_train_step() {
	local s; s=$(grep '^train,' "$MNT/jobs/$1/metrics.csv" 2>/dev/null | tail -1 | cut -d, -f2)
	echo "${s:-0}"
}
train_step_at_least() { [ "$(last_train_step "$1")" -ge "$2" ]; }

test_pytorch_ddp_suspended_and_resumed_records_every_step_once() {
	local py
	py=$(torch_python) || skip "no python3 here imports torch (Debian: apt-get install python3-torch)"
	dlh_mount
	trap torch_cleanup EXIT
	ddp_spec "$py" > "$STATE/ddp.ini"
	grep -q "^command = $py $STATE/train.py --epochs 2 " "$STATE/ddp.ini" ||
		die "the example's command changed: $(grep '^command' "$STATE/ddp.ini")"
	cp "$STATE/ddp.ini" "$MNT/jobs/new" || die "submit: $(tail -3 "$MNT/jobs/errors")"
	grep -q '^steps = 96$' "$MNT/jobs/1/spec" || die "spec: $(grep -A2 '^command' "$MNT/jobs/1/spec")"
	wait_for 120 train_step_at_least 1 12 ||
		die "no step 12: $(cat "$MNT/jobs/1/progress"); log: $(tail -5 "$MNT/jobs/1/log")"
	# progress from its rows and [job] steps: step S/96, a percentage, an ETA
	local line
	line=$(cat "$MNT/jobs/1/progress")
	echo "$line" | grep -Eq '^epoch 1  step [0-9]+/96  [0-9]+%  [0-9]+ samples/s  ETA [0-9]+:[0-9]{2}$' ||
		die "progress while running: $line"
	echo "measured: progress at step $(last_train_step 1): $line"

	# checkpoint: one at the next step, and on it goes
	echo checkpoint > "$MNT/jobs/1/ctl" || die "checkpoint refused: $(tail -2 "$MNT/jobs/1/log")"
	wait_for 30 grep -Eq 'dlhfs: step [0-9]+: checkpoint step-[0-9]{8}\.pt on request$' "$MNT/jobs/1/log" ||
		die "no checkpoint on request: $(grep -E 'train.py|dlhfs:' "$MNT/jobs/1/log" | tail -3)"
	expect_eq "$(cat "$MNT/jobs/1/status")" running "status after checkpoint"

	echo suspend > "$MNT/jobs/1/ctl" || die "suspend refused: $(tail -2 "$MNT/jobs/1/log")"
	wait_for 60 status_is 1 suspended || die "status $(cat "$MNT/jobs/1/status"): $(tail -5 "$MNT/jobs/1/log")"
	wait_for 10 no_job_procs 1 || die "ranks left after the suspend: $(job_procs 1)"
	grep -q 'did not suspend within' "$MNT/jobs/1/log" && die "the suspend took the SIGTERM fallback"
	local stopped latest
	stopped=$(last_train_step 1)
	[ "$stopped" -gt 12 ] && [ "$stopped" -lt 96 ] || die "suspended at step $stopped"
	grep -q "dlhfs: step $stopped: checkpoint step-0*$stopped.pt on request$" "$MNT/jobs/1/log" &&
		grep -q "dlhfs: step $stopped: suspended at a checkpoint$" "$MNT/jobs/1/log" ||
		die "log: $(grep -E 'train.py|dlhfs:' "$MNT/jobs/1/log" | tail -3)"
	latest=$(cat "$MNT/jobs/1/checkpoints/latest") || die "no checkpoints/latest"
	expect_eq "$latest" "$(printf 'step-%08d.pt' "$stopped")" "latest after the suspend"
	[ -s "$MNT/jobs/1/checkpoints/$latest" ] || die "latest names $latest, which is not there"
	grep -q "^suspended: epoch [12]  step $stopped/96  [0-9]*%" "$MNT/jobs/1/progress" ||
		die "progress while suspended: $(cat "$MNT/jobs/1/progress")"

	# dlhfs restarted while the job is suspended: where it takes up is found again
	local state=$STATE
	dlh_umount
	dlh_mount "$state"
	expect_eq "$(cat "$MNT/jobs/1/status")" suspended "status after a restart of dlhfs"
	echo resume > "$MNT/jobs/1/ctl" || die "resume refused: $(tail -2 "$MNT/jobs/1/log")"
	wait_for 120 job_terminal 1 || die "did not end: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "status ($(tail -5 "$MNT/jobs/1/log"))"
	grep -q "takes up from $STATE/jobs/1/checkpoints/$latest, step $stopped " "$MNT/jobs/1/log" ||
		die "log: $(grep 'takes up' "$MNT/jobs/1/log")"
	grep -q "train.py: 2 ranks, 96 steps (2 epochs of 48), resuming after step $stopped " "$MNT/jobs/1/log" ||
		die "log: $(grep 'train.py' "$MNT/jobs/1/log")"
	# every step exactly once, in order; an eval row per epoch, once
	grep '^train,' "$MNT/jobs/1/metrics.csv" | cut -d, -f2 | cmp -s - <(seq 1 96) ||
		die "train steps of metrics.csv are not 1..96 once each: $(grep '^train,' "$MNT/jobs/1/metrics.csv" | cut -d, -f2 | tr '\n' ' ')"
	expect_eq "$(grep '^eval,' "$MNT/jobs/1/metrics.csv" | cut -d, -f2,3 | tr '\n' ' ')" "48,1 96,2 " "eval rows"
	expect_eq "$(head -1 "$MNT/jobs/1/metrics.csv")" "kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s" "header"
	expect_eq "$(grep -c '^kind,' "$MNT/jobs/1/metrics.csv")" 1 "header lines"
	line=$(cat "$MNT/jobs/1/progress")
	echo "$line" | grep -Eq '^succeeded: epoch 2  step 96/96  100%  in [0-9]+:[0-9]{2}$' || die "progress at the end: $line"
	echo "measured: suspended at step $stopped; test accuracy $(grep '^eval,96,' "$MNT/jobs/1/metrics.csv" | cut -d, -f6)"
	wait_for 10 no_job_procs 1 || die "ranks left after the end: $(job_procs 1)"
	dlh_umount
}
