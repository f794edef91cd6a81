#!/usr/bin/python3
"""examples/pytorch-ddp/train.py - a PyTorch DDP (gloo) program run by dlhfs as a
[job] command: an MLP on Fashion-MNIST read from its IDX files.

    dlh-rank /usr/bin/python3 train.py [--data DIR] [--epochs E] [--batch B] ...

It follows dlhfs's contract with a program of its own (README.md, "Your own
program"; engine/contract/contract.h):

- torch.distributed's env:// from dlh-rank: RANK, WORLD_SIZE, MASTER_ADDR,
  MASTER_PORT (as under torchrun).
- rank 0 appends metrics.csv rows to $DLH_METRICS_CSV: the header once, when
  the file is empty, a train row per step (the global batch's loss and
  accuracy) and an eval row per epoch (the test set); each row one write.
- rank 0 saves checkpoints (model, optimizer, step, time_s) as
  $DLH_CHECKPOINT_DIR/step-NNNNNNNN.pt (written as .tmp, then renamed) and
  points `latest` at the newest: every --checkpoint-every steps, on request,
  and at the end.
- SIGUSR1 (ctl checkpoint): a checkpoint at the next step boundary, then on.
  SIGUSR2 (ctl suspend): a checkpoint at the next step boundary, then every
  rank exits with 75. Both are blocked from the first line and taken with
  sigtimedwait between steps, so no thread is ever interrupted by them; each
  step one allreduce carries them with the batch's loss, so every rank acts at
  the same step.
- run again, $DLH_RESUME_FROM and $DLH_START_STEP name the checkpoint and its
  step: it continues at the next step with the same data order (the epoch's
  shuffle is seeded by --seed and the epoch), so metrics.csv gets every step
  once.
- it ends (done or suspended) with os._exit after its last barrier, once its
  output is flushed: torch 1.13's ProcessGroupGloo destructor, run at
  interpreter exit with the GIL held, joins a worker thread that may still be
  freeing the last collective's tensors and waits for the GIL (a deadlock:
  a rank printed "done" and never exited in about 1 run of 6 resumed ones;
  its stacks: ~Reducer -> ~ProcessGroupGloo -> thread::join, the worker in
  runLoop on the group's mutex, another in ~TensorImpl waiting for the GIL).
  Nothing is left to tear down by then: every rank passed the barrier.

Steps: epochs x (train images // global batch); [job] steps in the spec should
say the same, for progress and ETA. The global batch is split over the ranks
(rank r takes rows [r*B/W, (r+1)*B/W) of each batch).
"""
import signal

# Before anything starts a thread: every thread inherits the mask, so the
# verbs' signals stay pending until the step loop takes them.
VERBS = {signal.SIGUSR1, signal.SIGUSR2}
signal.pthread_sigmask(signal.SIG_BLOCK, VERBS)

import argparse  # noqa: E402
import gzip  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

T_START = time.monotonic()

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

EXIT_SUSPENDED = 75          # DLH_EXIT_SUSPENDED
METRICS_HEADER = "kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s\n"   # DLH_METRICS_HEADER
LATEST = "latest"            # DLH_FILE_LATEST
MEAN, STD = 0.2860, 0.3530   # Fashion-MNIST's pixel mean and deviation (of p/255)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist",
                   help="directory of the four IDX files (.gz or not)")
    p.add_argument("--train-limit", type=int, default=0, help="use the first N training images (0: all)")
    p.add_argument("--test-limit", type=int, default=0, help="use the first N test images (0: all)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=64, help="global batch, split over the ranks")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--hidden", default="256,128", help="hidden layer widths")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--checkpoint-every", type=int, default=200, help="steps; 0: only on request and at the end")
    p.add_argument("--keep", type=int, default=3, help="checkpoints kept (the newest)")
    p.add_argument("--min-step-s", type=float, default=0.0,
                   help="make each step last at least this long (to watch a short run)")
    return p.parse_args()


def idx_path(data, name):
    """The IDX file name in data, compressed or not."""
    for path in (os.path.join(data, name + ".gz"), os.path.join(data, name)):
        if os.path.exists(path):
            return path
    sys.exit(f"train.py: no {name}[.gz] in {data}")


def load_idx(path, limit, images):
    """The first limit items (0: all) of an IDX file: normalized float32 images or int64 labels."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    count = int.from_bytes(raw[4:8], "big")
    n = min(limit, count) if limit > 0 else count
    if images:
        rows, cols = int.from_bytes(raw[8:12], "big"), int.from_bytes(raw[12:16], "big")
        x = np.frombuffer(raw, np.uint8, count=n * rows * cols, offset=16).reshape(n, rows * cols)
        return torch.from_numpy((x.astype(np.float32) / 255.0 - MEAN) / STD)
    return torch.from_numpy(np.frombuffer(raw, np.uint8, count=n, offset=8).astype(np.int64))


def mlp(hidden):
    mods, width = [], 784
    for w in hidden:
        mods += [nn.Linear(width, w), nn.ReLU()]
        width = w
    mods.append(nn.Linear(width, 10))
    return nn.Sequential(*mods)


def taken_verbs():
    """The verbs' signals pending since the last call (consumed): (checkpoint, suspend)."""
    ckpt = stop = 0
    while VERBS & signal.sigpending():
        info = signal.sigtimedwait(VERBS, 0)
        if info is None:
            break
        stop |= info.si_signo == signal.SIGUSR2
        ckpt |= info.si_signo == signal.SIGUSR1
    return int(ckpt), int(stop)


class Metrics:
    """Rank 0's rows of metrics.csv, each one write on an O_APPEND descriptor."""

    def __init__(self, path):
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        if os.fstat(self.fd).st_size == 0:
            os.write(self.fd, METRICS_HEADER.encode())

    def train(self, step, epoch, time_s, loss, acc, lr, samples_per_s):
        os.write(self.fd, ("train,%d,%d,%.3f,%.6g,%.6g,%.6g,%.1f\n" %
                           (step, epoch, time_s, loss, acc, lr, samples_per_s)).encode())

    def eval(self, step, epoch, time_s, loss, acc):
        os.write(self.fd, ("eval,%d,%d,%.3f,%.6g,%.6g,,\n" % (step, epoch, time_s, loss, acc)).encode())


def save_checkpoint(ckdir, model, opt, step, time_s, keep):
    """step-NNNNNNNN.pt in ckdir (through a .tmp name), then `latest`; the oldest beyond keep go."""
    name = "step-%08d.pt" % step
    tmp = os.path.join(ckdir, name + ".tmp")
    torch.save({"model": model.module.state_dict(), "optimizer": opt.state_dict(),
                "step": step, "time_s": time_s}, tmp)
    os.replace(tmp, os.path.join(ckdir, name))
    with open(os.path.join(ckdir, LATEST + ".tmp"), "w") as f:
        f.write(name + "\n")
    os.replace(os.path.join(ckdir, LATEST + ".tmp"), os.path.join(ckdir, LATEST))
    ours = sorted(n for n in os.listdir(ckdir) if n.startswith("step-") and n.endswith(".pt"))
    for old in ours[:-keep] if keep > 0 else []:
        os.unlink(os.path.join(ckdir, old))
    return name


def evaluate(model, x, y, rank, world):
    """Mean loss and accuracy on the test set, each rank its shard, summed."""
    lo, hi = rank * len(x) // world, (rank + 1) * len(x) // world
    model.eval()
    with torch.no_grad():
        out = model(x[lo:hi])
        t = torch.tensor([F.cross_entropy(out, y[lo:hi], reduction="sum").item(),
                          (out.argmax(1) == y[lo:hi]).sum().item(), hi - lo], dtype=torch.float64)
    dist.all_reduce(t)
    return t[0].item() / t[2].item(), t[1].item() / t[2].item()


def main():
    a = parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)

    xtr = load_idx(idx_path(a.data, "train-images-idx3-ubyte"), a.train_limit, True)
    ytr = load_idx(idx_path(a.data, "train-labels-idx1-ubyte"), a.train_limit, False)
    xte = load_idx(idx_path(a.data, "t10k-images-idx3-ubyte"), a.test_limit, True)
    yte = load_idx(idx_path(a.data, "t10k-labels-idx1-ubyte"), a.test_limit, False)
    per_epoch = len(xtr) // a.batch
    total = a.epochs * per_epoch
    if per_epoch < 1:
        sys.exit(f"train.py: {len(xtr)} training images are fewer than a batch of {a.batch}")

    model = DDP(mlp([int(w) for w in a.hidden.split(",")]))
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    ckdir = os.environ.get("DLH_CHECKPOINT_DIR", "checkpoints")
    csv = os.environ.get("DLH_METRICS_CSV", "metrics.csv")
    step, time_base = 0, 0.0
    resume = os.environ.get("DLH_RESUME_FROM")
    if resume:
        ck = torch.load(resume, map_location="cpu")
        model.module.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        step, time_base = ck["step"], ck["time_s"]
        said = os.environ.get("DLH_START_STEP")
        if said is not None and int(said) != step and rank == 0:
            print(f"train.py: DLH_START_STEP is {said}, the checkpoint's step {step}: "
                  f"going on from {step}", file=sys.stderr, flush=True)
    if rank == 0:
        os.makedirs(ckdir, exist_ok=True)
        rows = Metrics(csv)
        print(f"train.py: {world} ranks, {total} steps ({a.epochs} epochs of {per_epoch}), "
              + (f"resuming after step {step} from {resume}" if resume else "from step 1"), flush=True)

    lo, hi = rank * a.batch // world, (rank + 1) * a.batch // world
    order, order_epoch = None, 0
    t_prev = time.monotonic()
    while step < total:
        step += 1
        epoch = (step - 1) // per_epoch + 1
        if order_epoch != epoch:   # the epoch's order: the same on every rank and every run
            order = torch.randperm(len(xtr), generator=torch.Generator().manual_seed(a.seed * 1000003 + epoch))
            order_epoch = epoch
        at = (step - 1) % per_epoch * a.batch
        idx = order[at + lo:at + hi]
        model.train()
        out = model(xtr[idx])
        loss = F.cross_entropy(out, ytr[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        ckpt, stop = taken_verbs()
        # the batch's loss and accuracy, and the verbs: one allreduce, so that
        # every rank checkpoints or stops after the same step
        t = torch.tensor([loss.item() * len(idx), (out.argmax(1) == ytr[idx]).sum().item(), len(idx),
                          ckpt, stop], dtype=torch.float64)
        dist.all_reduce(t)
        if a.min_step_s > 0:
            time.sleep(max(0.0, a.min_step_s - (time.monotonic() - t_prev)))
        now = time.monotonic()
        time_s = time_base + now - T_START
        if rank == 0:
            rows.train(step, epoch, time_s, t[0].item() / t[2].item(), t[1].item() / t[2].item(),
                       a.lr, t[2].item() / max(now - t_prev, 1e-9))
        t_prev = now
        if step % per_epoch == 0:
            tl, ta = evaluate(model.module, xte, yte, rank, world)
            if rank == 0:
                rows.eval(step, epoch, time_base + time.monotonic() - T_START, tl, ta)
        want_stop = t[4].item() > 0
        if want_stop or t[3].item() > 0 or step == total or (a.checkpoint_every and step % a.checkpoint_every == 0):
            if rank == 0:
                name = save_checkpoint(ckdir, model, opt, step, time_s, a.keep)
                if want_stop or t[3].item() > 0:
                    print(f"train.py: step {step}: checkpoint {name} on request"
                          + (", suspending" if want_stop else ""), flush=True)
            dist.barrier()   # the checkpoint is whole before any rank goes on or exits
            if want_stop and step < total:
                finish(EXIT_SUSPENDED)
    if rank == 0:
        print(f"train.py: done: {total} steps", flush=True)
    finish(0)


def finish(code):
    """Ends the process past its last barrier without tearing torch down (see above)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
