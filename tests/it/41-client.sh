# 41-client.sh - engine/contract/dlhfs.py, the Python side of the contract,
# without a mount: small programs run with DLH_JOB_DIR and the rest pointing
# at a temp dir, as dlhfs would run them; its rows (header, extra metrics,
# nan, eval), names it refuses, checkpoints (atomic, latest, keep), the verbs'
# signals (SIGUSR1 on, SIGUSR2 exit 75), resume with every step once, and two
# gloo ranks acting at the same step when only one got the signal

# plain_python: Debian's python3 (what a spec's command names), else PATH's
plain_python() { if [ -x /usr/bin/python3 ]; then echo /usr/bin/python3; else command -v python3; fi; }

# client_dir: a job directory D of its own (dlh_cleanup removes it) and the
# contract's variables pointing into it, exported with the library's path
client_dir() {
	D=$(mktemp -d /tmp/dlh-client.XXXXXX)
	STATE=$D
	trap dlh_cleanup EXIT
	export DLH_JOB_DIR=$D DLH_METRICS_CSV=$D/metrics.csv DLH_CHECKPOINT_DIR=$D/checkpoints \
		DLH_OUTPUT_DIR=$D/output PYTHONPATH=$DLH_ROOT/engine/contract
	unset DLH_RESUME_FROM DLH_START_STEP DLH_BATCH DLH_LR RANK WORLD_SIZE LOCAL_RANK
	PY=$(plain_python) || skip "no python3"
}

# train_steps: the step column of metrics.csv's train rows, on one line
train_steps() { grep '^train,' "$D/metrics.csv" | cut -d, -f2 | tr '\n' ' '; }

# steps_prog FILE: a pure Python program of 10 steps (5 an epoch) whose state
# is the sum of the steps done; at step $AT it sends itself SIG$SIG
steps_prog() {
	cat > "$1" <<'EOF'
import os, signal, sys, time
import dlhfs
job = dlhfs.init(steps_per_epoch=5)
st = job.resume() or {"sum": 0}
at = int(os.environ.get("AT", "0"))
print("start", job.start_step, flush=True)
for step in job.steps(int(os.environ.get("TOTAL", "10")), lambda: dict(st)):
    st["sum"] += step
    job.report(step, loss=1.0 / step, lr=0.1, samples=8)
    if step == at:
        os.kill(os.getpid(), getattr(signal, "SIG" + os.environ["SIG"]))
    time.sleep(0.05)
assert "torch" not in sys.modules
print("sum", st["sum"], flush=True)
job.finish()
EOF
}

test_client_rows_have_the_header_extras_nan_and_eval_rows_each_one_write() {
	client_dir
	cat > "$D/p.py" <<'EOF'
import os, sys
import dlhfs
writes = []
real = os.write
def write(fd, data):
    writes.append(bytes(data))
    return real(fd, data)
os.write = write
job = dlhfs.init(steps_per_epoch=2)
for step in job.steps(4):
    job.report(step, loss=1.0 / step, lr=0.1, samples=None if step == 4 else 32, grad_norm=0.5 * step)
    if step == 2:
        job.report(step, loss=0.25, accuracy=0.875, kind="eval")
job.finish()
assert "torch" not in sys.modules
print(len(writes), all(w.endswith(b"\n") and w.count(b"\n") == 1 for w in writes))
EOF
	local out
	out=$("$PY" "$D/p.py" 2>&1) || die "the program failed: $out"
	expect_eq "$out" "6 True" "writes of metrics.csv (count, each one whole line)"
	expect_eq "$(head -1 "$D/metrics.csv")" "kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s,grad_norm" "header"
	expect_eq "$(grep -c '^kind,' "$D/metrics.csv")" 1 "header lines"
	expect_eq "$(train_steps)" "1 2 3 4 " "train rows"
	grep -Eqx 'train,1,1,[0-9]+\.[0-9]{3},1,nan,0\.1,[0-9.e+]+,0\.5' "$D/metrics.csv" ||
		die "row 1: $(sed -n 2p "$D/metrics.csv")"
	grep -Eqx 'train,3,2,[0-9]+\.[0-9]{3},0\.333333,nan,0\.1,[0-9.e+]+,1\.5' "$D/metrics.csv" ||
		die "row 3 (epoch 2): $(grep '^train,3,' "$D/metrics.csv")"
	grep -Eqx 'train,4,2,[0-9]+\.[0-9]{3},0\.25,nan,0\.1,nan,2' "$D/metrics.csv" ||
		die "row 4 (no samples): $(grep '^train,4,' "$D/metrics.csv")"
	grep -Eqx 'eval,2,1,[0-9]+\.[0-9]{3},0\.25,0\.875,,,' "$D/metrics.csv" ||
		die "eval row: $(grep '^eval' "$D/metrics.csv")"
	expect_eq "$(sed -n 4p "$D/metrics.csv" | cut -d, -f1,2)" "eval,2" "the eval row after train row 2"
	expect_eq "$(tr '\n' ' ' < "$D/run.info")" "total_steps=4 steps_per_epoch=2 " "run.info"
}

test_client_refuses_bad_metric_names_and_long_rows() {
	client_dir
	cat > "$D/p.py" <<'EOF'
import dlhfs
def refused(what, f, *words):
    try:
        f()
    except ValueError as e:
        missing = [w for w in words if w not in str(e)]
        print(what, "refused" if not missing else "message lacks %s: %s" % (missing, e))
    else:
        print(what, "accepted")
refused("a column", lambda: dlhfs.init(metrics=["loss"]), "'loss'")
refused("a digit first", lambda: dlhfs.init(metrics=["9lives"]), "'9lives'")
refused("a dash", lambda: dlhfs.init(metrics=["a-b"]), "'a-b'")
refused("33 characters", lambda: dlhfs.init(metrics=["x" * 33]), "x" * 33)
refused("twice", lambda: dlhfs.init(metrics=["g", "g"]), "'g'")
refused("nine", lambda: dlhfs.init(metrics=["m%d" % i for i in range(9)]), "'m8'")
refused("a column in report", lambda: dlhfs.init().report(1, time_s=3), "'time_s'")
job = dlhfs.init(metrics=["bleu"])
job.report(1, loss=1, bleu=21.2)
refused("undeclared", lambda: job.report(2, loss=1, rouge=3), "'rouge'", "init(metrics=[")
refused("a long row", lambda: job.report(10 ** 600, loss=1), "512")
job.finish()
again = dlhfs.init()   # a resumed run: the file's header says the columns
again.report(2, loss=1, bleu=20)
refused("not in the header", lambda: again.report(3, loss=1, grad_norm=1), "'grad_norm'")
EOF
	local out
	out=$("$PY" "$D/p.py" 2>&1) || die "the program failed: $out"
	expect_eq "$(echo "$out" | grep -vc ' refused$')" 0 "names and rows accepted: $(echo "$out" | grep -v ' refused$')"
	expect_eq "$(echo "$out" | wc -l)" 10 "cases"
	expect_eq "$(head -1 "$D/metrics.csv")" "kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s,bleu" "header"
	expect_eq "$(grep -c '^kind,' "$D/metrics.csv")" 1 "header lines"
	expect_eq "$(train_steps)" "1 2 " "train rows"
	grep -Eqx 'train,2,1,[0-9.]+,1,nan,nan,nan,20' "$D/metrics.csv" || die "row 2: $(tail -1 "$D/metrics.csv")"
}

test_client_checkpoints_are_renamed_whole_latest_names_the_newest_three_kept() {
	client_dir
	mkdir -p "$D/checkpoints"
	echo mine > "$D/checkpoints/model-final.pt"
	cat > "$D/p.py" <<'EOF'
import os, sys
import dlhfs
renames = []
real = os.replace
def replace(a, b):
    renames.append((a, b))
    return real(a, b)
os.replace = replace
job = dlhfs.init()
acc = {"sum": 0}
for step in job.steps(7, lambda: dict(acc), checkpoint_every=2):
    acc["sum"] += step
assert "torch" not in sys.modules
for a, b in renames:
    print(os.path.basename(a), os.path.basename(b), os.path.dirname(a) == os.path.dirname(b))
EOF
	local out
	out=$("$PY" "$D/p.py" 2>&1) || die "the program failed: $out"
	expect_eq "$(echo "$out" | grep -c ' True$')" "$(echo "$out" | wc -l)" "renames across directories: $out"
	expect_eq "$(echo "$out" | grep -c '\.tmp ')" "$(echo "$out" | wc -l)" "renames from a name without .tmp: $out"
	expect_eq "$(echo "$out" | cut -d' ' -f2 | tr '\n' ' ')" \
		"run.info step-00000002.pt latest step-00000004.pt latest step-00000006.pt latest step-00000007.pt latest " \
		"renames in order"
	expect_eq "$(ls "$D/checkpoints" | tr '\n' ' ')" \
		"latest model-final.pt step-00000004.pt step-00000006.pt step-00000007.pt " "checkpoints kept"
	expect_eq "$(cat "$D/checkpoints/latest")" "step-00000007.pt" "latest"
	out=$("$PY" -c 'import pickle, sys; d = pickle.load(open(sys.argv[1], "rb")); print(d["dlhfs"], d["step"], d["state"], type(d["time_s"]).__name__)' \
		"$D/checkpoints/step-00000006.pt") || die "step-00000006.pt is no pickle"
	expect_eq "$out" "1 6 {'sum': 21} float" "step-00000006.pt"
}

test_client_sigusr1_checkpoints_at_the_next_step_and_goes_on() {
	client_dir
	steps_prog "$D/p.py"
	local out
	out=$(AT=3 SIG=USR1 TOTAL=6 timeout 60 "$PY" "$D/p.py" 2>&1) || die "exit status $?: $out"
	echo "$out" | grep -qx 'dlhfs: step 3: checkpoint step-00000003.pt on request' || die "output: $out"
	echo "$out" | grep -q 'suspended' && die "suspended on SIGUSR1: $out"
	echo "$out" | grep -qx 'sum 21' || die "output: $out"
	expect_eq "$(ls "$D/checkpoints" | tr '\n' ' ')" "latest step-00000003.pt step-00000006.pt " "checkpoints"
	expect_eq "$(train_steps)" "1 2 3 4 5 6 " "train rows"
}

test_client_sigusr2_exits_75_at_a_checkpoint_and_the_rerun_records_every_step_once() {
	client_dir
	steps_prog "$D/p.py"
	local out rc
	out=$(AT=4 SIG=USR2 timeout 60 "$PY" "$D/p.py" 2>&1)
	rc=$?
	expect_eq "$rc" 75 "exit status after SIGUSR2 ($out)"
	echo "$out" | grep -qx 'dlhfs: step 4: checkpoint step-00000004.pt on request' || die "output: $out"
	echo "$out" | grep -qx 'dlhfs: step 4: suspended at a checkpoint' || die "output: $out"
	echo "$out" | grep -q '^sum' && die "went on after the suspend: $out"
	expect_eq "$(cat "$D/checkpoints/latest")" "step-00000004.pt" "latest after the suspend"
	expect_eq "$(train_steps)" "1 2 3 4 " "train rows of the first run"
	# run again as dlhfs does: the checkpoint and its step
	out=$(DLH_RESUME_FROM=$D/checkpoints/step-00000004.pt DLH_START_STEP=4 timeout 60 "$PY" "$D/p.py" 2>&1) ||
		die "the rerun: exit status $?: $out"
	expect_eq "$(echo "$out" | tr '\n' ' ')" "start 4 sum 55 " "the rerun's output"
	expect_eq "$(train_steps)" "1 2 3 4 5 6 7 8 9 10 " "train rows"
	expect_eq "$(grep -c '^kind,' "$D/metrics.csv")" 1 "header lines"
	expect_eq "$(grep '^train,' "$D/metrics.csv" | cut -d, -f3 | tr '\n' ' ')" "1 1 1 1 1 2 2 2 2 2 " "epochs"
	# time_s goes on from the checkpoint's: never back
	grep '^train,' "$D/metrics.csv" | cut -d, -f4 | sort -c -g ||
		die "time_s went back: $(grep '^train,' "$D/metrics.csv" | cut -d, -f4 | tr '\n' ' ')"
	expect_eq "$(cat "$D/checkpoints/latest")" "step-00000010.pt" "latest at the end"
}

test_client_start_step_other_than_the_checkpoints_warns_and_takes_the_checkpoints() {
	client_dir
	steps_prog "$D/p.py"
	AT=4 SIG=USR2 timeout 60 "$PY" "$D/p.py" > /dev/null 2>&1
	[ -f "$D/checkpoints/step-00000004.pt" ] || die "no checkpoint at step 4"
	local out
	out=$(DLH_RESUME_FROM=$D/checkpoints/step-00000004.pt DLH_START_STEP=2 timeout 60 "$PY" "$D/p.py" 2>&1 >/dev/null) ||
		die "the rerun: exit status $?: $out"
	expect_eq "$out" "dlhfs: DLH_START_STEP is 2, the checkpoint's step 4: going on from 4" "stderr"
	expect_eq "$(train_steps)" "1 2 3 4 5 6 7 8 9 10 " "train rows"
}

test_client_runs_by_hand_outside_dlhfs() {
	client_dir
	unset DLH_JOB_DIR DLH_METRICS_CSV DLH_CHECKPOINT_DIR DLH_OUTPUT_DIR
	cat > "$D/p.py" <<'EOF'
import signal, threading
import dlhfs
seen = []
t = threading.Thread(target=lambda: seen.append(signal.pthread_sigmask(signal.SIG_BLOCK, [])))
t.start()
t.join()
print("masked", {signal.SIGUSR1, signal.SIGUSR2} <= seen[0])
job = dlhfs.init()
print(job.rank, job.world_size, job.local_rank, job.start_step, job.batch_size(32), job.lr(0.5))
for step in job.steps(3, {"w": 1}):
    job.report(step, loss=0.5)
with open(job.output("plots/a.txt"), "w") as f:
    f.write("x\n")
job.finish()
EOF
	local out
	out=$(cd "$D" && "$PY" p.py 2>&1) || die "the program failed: $out"
	expect_eq "$out" "masked True
0 1 0 0 32 0.5" "the verbs' signals masked in a later thread; rank, world size, local rank, start step, batch, lr"
	for f in metrics.csv run.info checkpoints/latest checkpoints/step-00000003.pt output/plots/a.txt; do
		[ -f "$D/$f" ] || die "no ./$f: $(cd "$D" && find . | tr '\n' ' ')"
	done
	out=$(cd "$D" && DLH_BATCH=48 DLH_LR=0.125 "$PY" -c 'import dlhfs; j = dlhfs.init(); print(j.batch_size(32), j.lr(0.5))') ||
		die "the program failed: $out"
	expect_eq "$out" "48 0.125" "DLH_BATCH and DLH_LR"
	# the planner's unequal shares (a rank on a device twice as fast): rank 1
	# of 3 takes rows 40..60 of 100, its mean loss weighted 20 x 3 / 100
	out=$(cd "$D" && RANK=1 WORLD_SIZE=3 DLH_GLOBAL_BATCH=100 DLH_RANK_BATCHES=40,20,40 "$PY" -c \
		'import dlhfs; j = dlhfs.init(); print(j.batch_size(8), j.global_batch(8), j.batch_range(8), round(j.loss_scale(8), 6))') ||
		die "the program failed: $out"
	expect_eq "$out" "20 100 (40, 60) 0.6" "DLH_RANK_BATCHES"
	# none set: the defaults, split equally
	out=$(cd "$D" && RANK=2 WORLD_SIZE=3 "$PY" -c \
		'import dlhfs; j = dlhfs.init(); print(j.batch_size(8), j.global_batch(90), j.batch_range(90), j.loss_scale(90))') ||
		die "the program failed: $out"
	expect_eq "$out" "8 90 (60, 90) 1.0" "the defaults"
}

# gloo_ranks LOGSUFFIX: runs $D/p.py as ranks 0 and 1 of a gloo group on a
# free port; sets RC0 and RC1
gloo_ranks() {
	local port r pids=()
	port=$("$TPY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	for r in 0 1; do
		RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port GLOO_SOCKET_IFNAME=lo \
			timeout 60 "$TPY" "$D/p.py" > "$D/out$r.$1" 2>&1 &
		pids+=($!)
	done
	wait "${pids[0]}"; RC0=$?
	wait "${pids[1]}"; RC1=$?
}

test_client_two_gloo_ranks_one_signalled_both_checkpoint_at_its_step() {
	client_dir
	TPY=$(torch_python) || skip "no python3 here imports torch (Debian: apt-get install python3-torch)"
	cat > "$D/p.py" <<'EOF'
import os, signal
import dlhfs
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
job = dlhfs.init(steps=12)
st = job.resume()
w = torch.zeros(1) if st is None else st["w"]
print("start", job.start_step, flush=True)
for step in job.steps(12, lambda: {"w": w.clone()}):
    t = torch.ones(1)
    dist.all_reduce(t)
    w += t
    job.report(step, loss=float(w), samples=2)
    if job.rank == 1 and step == 5 and not os.environ.get("DLH_RESUME_FROM"):
        os.kill(os.getpid(), signal.SIGUSR2)
    print("step", step, flush=True)
print("done w=%g" % float(w), flush=True)
job.finish()
os._exit(0)   # past every collective: no gloo teardown (train.py says why)
EOF
	gloo_ranks 1
	expect_eq "$RC0 $RC1" "75 75" "exit statuses after rank 1's SIGUSR2 (rank 0: $(tail -3 "$D/out0.1"); rank 1: $(tail -3 "$D/out1.1"))"
	expect_eq "$(grep '^step' "$D/out0.1" | tail -1) $(grep '^step' "$D/out1.1" | tail -1)" "step 5 step 5" "last steps of the ranks"
	grep -qx 'dlhfs: step 5: suspended at a checkpoint' "$D/out0.1" || die "rank 0: $(cat "$D/out0.1")"
	expect_eq "$(cat "$D/checkpoints/latest")" "step-00000005.pt" "latest"
	"$TPY" -c 'import sys, zipfile; sys.exit(not zipfile.is_zipfile(sys.argv[1]))' "$D/checkpoints/step-00000005.pt" ||
		die "step-00000005.pt is not torch.save's"
	expect_eq "$(train_steps)" "1 2 3 4 5 " "train rows of the first run"
	DLH_RESUME_FROM=$D/checkpoints/step-00000005.pt DLH_START_STEP=5 gloo_ranks 2
	expect_eq "$RC0 $RC1" "0 0" "exit statuses of the rerun (rank 0: $(tail -3 "$D/out0.2"); rank 1: $(tail -3 "$D/out1.2"))"
	expect_eq "$(grep -E '^(start|done)' "$D/out0.2" | tr '\n' ' ')" "start 5 done w=24 " "rank 0's rerun"
	expect_eq "$(grep -E '^(start|done)' "$D/out1.2" | tr '\n' ' ')" "start 5 done w=24 " "rank 1's rerun"
	expect_eq "$(train_steps)" "1 2 3 4 5 6 7 8 9 10 11 12 " "train rows"
	expect_eq "$(cat "$D/run.info")" "total_steps=12" "run.info"
}
