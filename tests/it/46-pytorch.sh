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
	# its profile run first (README: Estimating your own program), then its run
	wait_for 120 grep -q 'dlhfs: estimated by its profile: 2 x cpu' "$MNT/jobs/1/log" ||
		die "not profiled: $(cat "$MNT/jobs/1/progress"); $(grep -v '^\[rank' "$MNT/jobs/1/log" | tail -5)"
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

# A plain PyTorch script of a user's own (not the example): an MLP on a
# slice of Fashion-MNIST, wired to dlhfs with the library in at most 12
# lines (those marked "# dlhfs"), one extra metric (grad_norm), its model
# saved to the job's output directory. Through the mount, with no [job]
# steps in the spec: its profile run, then progress with %, ETA; plots/grad_norm.svg; a
# checkpoint on request; suspend and resume with every step once;
# output/model.pt; the metric in metrics and the Prometheus file
plain_script() {
	cat <<'PY'
import dlhfs                                                             # dlhfs
import gzip, time
import numpy as np
import torch
import torch.nn.functional as F

def load(name, n, off, shape):
    with gzip.open("/usr/share/datasets/fashion-mnist/" + name, "rb") as f:
        raw = f.read()
    a = np.frombuffer(raw, np.uint8, count=n * int(np.prod(shape)), offset=off)
    return torch.from_numpy(a.reshape((n,) + shape).copy())

x = load("train-images-idx3-ubyte.gz", 2048, 16, (784,)).float() / 255
y = load("train-labels-idx1-ubyte.gz", 2048, 8, ()).long()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(784, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
job = dlhfs.init(steps_per_epoch=32)                                     # dlhfs
state = job.resume()                                                     # dlhfs
if state:                                                                # dlhfs
    model.load_state_dict(state["model"]); opt.load_state_dict(state["opt"])  # dlhfs
ckpt = lambda: {"model": model.state_dict(), "opt": opt.state_dict()}    # dlhfs
for step in job.steps(160, ckpt, checkpoint_every=40):                    # dlhfs
    i = torch.randperm(2048, generator=torch.Generator().manual_seed(step))[:64]
    out = model(x[i])
    loss = F.cross_entropy(out, y[i])
    opt.zero_grad()
    loss.backward()
    gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9).item()
    opt.step()
    acc = (out.argmax(1) == y[i]).float().mean().item()
    job.report(step, loss=loss.item(), accuracy=acc, lr=0.1, samples=64, grad_norm=gn)  # dlhfs
    time.sleep(0.05)
torch.save(model.state_dict(), job.output("model.pt"))                   # dlhfs
job.finish()                                                             # dlhfs
PY
}

test_a_plain_pytorch_script_wired_with_the_library_shows_everything_in_the_mount() {
	local py
	py=$(torch_python) || skip "no python3 here imports torch (Debian: apt-get install python3-torch)"
	[ -r /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || skip "no Fashion-MNIST"
	dlh_mount
	trap torch_cleanup EXIT
	plain_script > "$STATE/mine.py"
	local added; added=$(grep -c '# dlhfs$' "$STATE/mine.py")
	[ "$added" -le 12 ] || die "$added lines wire the script"
	echo "measured: $added lines of the script are the library's"
	printf '[job]\ncommand = %s %s\nenv = PYTHONPATH=%s\n' "$py" "$STATE/mine.py" "$DLH_ROOT/engine/contract" > "$STATE/mine.ini"
	cp "$STATE/mine.ini" "$MNT/jobs/new" || die "submit: $(tail -3 "$MNT/jobs/errors")"
	# first its profile run (README: Estimating your own program), then its run
	wait_for 120 grep -q 'dlhfs: estimated by its profile: 1 x cpu' "$MNT/jobs/1/log" ||
		die "not profiled: $(cat "$MNT/jobs/1/progress"); $(grep -v '^\[rank' "$MNT/jobs/1/log" | tail -5)"
	wait_for 120 train_step_at_least 1 10 ||
		die "no step 10: $(cat "$MNT/jobs/1/progress"); log: $(tail -5 "$MNT/jobs/1/log")"
	local line; line=$(cat "$MNT/jobs/1/progress")
	echo "$line" | grep -Eq '^epoch [0-9]+  step [0-9]+/160  [0-9]+%  [0-9]+ samples/s  ETA [0-9]+:[0-9]{2}$' ||
		die "progress while running: $line"
	echo "measured: $line"
	ls "$MNT/jobs/1/plots" | grep -qx grad_norm.svg || die "plots/: $(ls "$MNT/jobs/1/plots")"
	grep -q '>grad_norm<' "$MNT/jobs/1/plots/grad_norm.svg" && grep -q '<polyline' "$MNT/jobs/1/plots/grad_norm.svg" ||
		die "grad_norm.svg: $(grep -Eo '<text[^>]*>[^<]*</text>|<polyline.{0,60}' "$MNT/jobs/1/plots/grad_norm.svg" | head -30)"
	grep -q '^grad_norm=[0-9]' "$MNT/jobs/1/metrics" || die "metrics: $(cat "$MNT/jobs/1/metrics")"
	grep -q '^dlhfs_job_metric{job_id="1",.*metric="grad_norm",rows="train"} [0-9]' "$MNT/prometheus/dlhfs.prom" ||
		die "prom: $(grep dlhfs_job_metric "$MNT/prometheus/dlhfs.prom")"
	echo checkpoint > "$MNT/jobs/1/ctl" || die "checkpoint refused"
	wait_for 30 grep -Eq 'dlhfs: step [0-9]+: checkpoint step-[0-9]{8}\.pt on request$' "$MNT/jobs/1/log" ||
		die "no checkpoint on request: $(tail -3 "$MNT/jobs/1/log")"
	echo suspend > "$MNT/jobs/1/ctl" || die "suspend refused"
	wait_for 60 status_is 1 suspended || die "status $(cat "$MNT/jobs/1/status"): $(tail -5 "$MNT/jobs/1/log")"
	local stopped; stopped=$(last_train_step 1)
	[ "$stopped" -gt 10 ] && [ "$stopped" -lt 160 ] || die "suspended at step $stopped"
	[ -e "$MNT/jobs/1/output/model.pt" ] && die "a model before the end"
	echo resume > "$MNT/jobs/1/ctl" || die "resume refused"
	wait_for 120 job_terminal 1 || die "did not end: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "status ($(tail -5 "$MNT/jobs/1/log"))"
	grep '^train,' "$MNT/jobs/1/metrics.csv" | cut -d, -f2 | cmp -s - <(seq 1 160) ||
		die "train steps are not 1..160 once each: $(grep '^train,' "$MNT/jobs/1/metrics.csv" | cut -d, -f2 | tr '\n' ' ')"
	expect_eq "$(head -1 "$MNT/jobs/1/metrics.csv")" "kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s,grad_norm" "header"
	[ -s "$MNT/jobs/1/output/model.pt" ] || die "output/: $(ls -l "$MNT/jobs/1/output")"
	"$py" -c "import torch, sys; sd = torch.load(sys.argv[1]); assert sd['2.weight'].shape == (10, 64)" \
		"$MNT/jobs/1/output/model.pt" || die "output/model.pt is not the model"
	grep -q '<svg' <(cat "$MNT/jobs/1/report.html") && grep -c '>grad_norm<' "$MNT/jobs/1/report.html" | grep -q '^[1-9]' ||
		die "report.html draws no grad_norm"
	echo "measured: suspended at step $stopped, resumed, 160 steps once each; $(cat "$MNT/jobs/1/progress")"
	dlh_umount
}
