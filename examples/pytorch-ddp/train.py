#!/usr/bin/python3
"""examples/pytorch-ddp/train.py - a PyTorch DDP (gloo) program run by dlhfs as a
[job] command: an MLP or a small CNN (--model) on Fashion-MNIST read from its IDX files.

    dlh-rank /usr/bin/python3 train.py [--data DIR] [--epochs E] [--batch B] ...

It follows dlhfs's contract (README.md, "Your own program";
engine/contract/contract.h) through the Python library dlhfs
(engine/contract/dlhfs.py; `make install` puts it where /usr/bin/python3 finds
it, and from a checkout this file finds it beside examples/):

- torch.distributed's env:// from dlh-rank: RANK, WORLD_SIZE, MASTER_ADDR,
  MASTER_PORT (as under torchrun).
- rank 0's rows of metrics.csv: a train row per step (the global batch's loss
  and accuracy) and an eval row per epoch (the test set).
- checkpoints (model, optimizer) step-NNNNNNNN.pt, the newest --keep kept:
  every --checkpoint-every steps, on request (SIGUSR1, SIGUSR2), at the end;
  after SIGUSR2 every rank exits with 75 at the same step.
- run again, it continues from $DLH_RESUME_FROM at the next step with the same
  data order (the epoch's shuffle is seeded by --seed and the epoch), so
  metrics.csv gets every step once.
- it ends (done or suspended) with os._exit after its last barrier, once its
  output is flushed: torch 1.13's ProcessGroupGloo destructor, run at
  interpreter exit with the GIL held, joins a worker thread that may still be
  freeing the last collective's tensors and waits for the GIL (a deadlock:
  a rank printed "done" and never exited in about 1 run of 6 resumed ones;
  its stacks: ~Reducer -> ~ProcessGroupGloo -> thread::join, the worker in
  runLoop on the group's mutex, another in ~TensorImpl waiting for the GIL).
  Nothing is left to tear down by then: every rank passed the barrier.

Steps: epochs x (train images // global batch), which it tells dlhfs (run.info)
for progress and the ETA. The global batch is split over the ranks (rank r
takes rows [r*B/W, (r+1)*B/W) of each batch).
"""
import os
import sys

try:   # first, before torch starts threads: it blocks the verbs' signals
    import dlhfs
except ImportError:   # a checkout: engine/contract/ beside examples/
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "engine", "contract"))
    import dlhfs

import argparse  # noqa: E402
import gzip  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

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
    p.add_argument("--model", choices=("mlp", "cnn"), default="mlp",
                   help="an MLP (--hidden) or a small CNN (--conv)")
    p.add_argument("--hidden", default="256,128", help="mlp: hidden layer widths")
    p.add_argument("--conv", default="16,32",
                   help="cnn: the filters of its 5x5 convolutions, each followed by a 2x2 max-pool")
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


def cnn(filters):
    mods, ch, side = [nn.Unflatten(1, (1, 28, 28))], 1, 28
    for f in filters:
        mods += [nn.Conv2d(ch, f, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2)]
        ch, side = f, side // 2
    mods += [nn.Flatten(), nn.Linear(ch * side * side, 10)]
    return nn.Sequential(*mods)


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
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)

    xtr = load_idx(idx_path(a.data, "train-images-idx3-ubyte"), a.train_limit, True)
    ytr = load_idx(idx_path(a.data, "train-labels-idx1-ubyte"), a.train_limit, False)
    xte = load_idx(idx_path(a.data, "t10k-images-idx3-ubyte"), a.test_limit, True)
    yte = load_idx(idx_path(a.data, "t10k-labels-idx1-ubyte"), a.test_limit, False)
    job = dlhfs.init(keep=a.keep)
    rank, world = job.rank, job.world_size
    # the planner's, where the spec gives [train] batch_size and lr
    batch, lr = job.global_batch(a.batch), job.lr(a.lr)
    per_epoch = len(xtr) // batch
    total = a.epochs * per_epoch
    if per_epoch < 1:
        sys.exit(f"train.py: {len(xtr)} training images are fewer than a batch of {batch}")
    job.steps_per_epoch = per_epoch   # run.info says it, with the total, from job.steps()
    widths = [int(w) for w in (a.hidden if a.model == "mlp" else a.conv).split(",")]
    model = DDP(mlp(widths) if a.model == "mlp" else cnn(widths))
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=a.momentum)
    ck = job.resume()
    if ck:
        model.module.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
    if rank == 0:
        print(f"train.py: {world} ranks, {total} steps ({a.epochs} epochs of {per_epoch}), "
              + (f"resuming after step {job.start_step} from {os.environ['DLH_RESUME_FROM']}"
                 if ck else "from step 1"), flush=True)

    lo, hi = job.batch_range(a.batch)   # by device speed where the planner split it
    scale = job.loss_scale(a.batch)     # DDP averages the ranks: weight by the share
    order, order_epoch = None, 0
    t_prev = time.monotonic()
    state = lambda: {"model": model.module.state_dict(), "optimizer": opt.state_dict()}  # noqa: E731
    for step in job.steps(total, state, a.checkpoint_every):
        epoch = (step - 1) // per_epoch + 1
        if order_epoch != epoch:   # the epoch's order: the same on every rank and every run
            order = torch.randperm(len(xtr), generator=torch.Generator().manual_seed(a.seed * 1000003 + epoch))
            order_epoch = epoch
        at = (step - 1) % per_epoch * batch
        idx = order[at + lo:at + hi]
        model.train()
        out = model(xtr[idx])
        loss = F.cross_entropy(out, ytr[idx])
        opt.zero_grad()
        (loss * scale).backward()
        opt.step()
        # the global batch's loss and accuracy
        t = torch.tensor([loss.item() * len(idx), (out.argmax(1) == ytr[idx]).sum().item(), len(idx)],
                         dtype=torch.float64)
        dist.all_reduce(t)
        if a.min_step_s > 0:
            time.sleep(max(0.0, a.min_step_s - (time.monotonic() - t_prev)))
        t_prev = time.monotonic()
        job.report(step, loss=t[0].item() / t[2].item(), accuracy=t[1].item() / t[2].item(),
                   lr=lr, samples=t[2].item(), epoch=epoch)
        if step % per_epoch == 0:
            tl, ta = evaluate(model.module, xte, yte, rank, world)
            job.report(step, loss=tl, accuracy=ta, epoch=epoch, kind="eval")
    if rank == 0:
        print(f"train.py: done: {total} steps", flush=True)
    job.finish()   # flushed, and past the final checkpoint's barrier
    os._exit(0)    # nothing torn down (see above); a suspend ends so in job.steps()


if __name__ == "__main__":
    main()
