#!/usr/bin/env python3
"""bench/torch_peer.py - the PyTorch peer of dlh-train (issue 3).

The same MLP or CNN, data-parallel with DistributedDataParallel over gloo
(--device cuda: over NCCL, one GPU per rank, the data on the GPU), run under
`python3 -m torch.distributed.run --nproc_per_node=N`. It mirrors
dlh-train: rank r trains on the contiguous shard [r*n/N, (r+1)*n/N) of the
training set, shuffled each epoch, drop_last; the global batch is split over
the ranks; pixels are (p/255 - 0.2860) / 0.3530; weights are He-normal and
biases zero; SGD with momentum. After each epoch every rank evaluates its
shard of the test set and the counts are summed (the full test set).

Rank 0 prints machine-readable lines:
  epoch=N test_acc=A test_loss=L time_s=T unix=U
      T: seconds from the process start (/proc/self/stat) to the end of the
      epoch's evaluation; U: the same moment as Unix time
  samples_per_s=S window_steps=K warmup_steps=W mode=M
      global samples per second over steps W+1 .. W+K of the run: wall time
      from the end of step W to the end of step W+K (the GPU synchronised at
      both ends), each step being batch gather, forward, backward (DDP
      allreduce), optimizer step; no data loading and no evaluation falls
      inside the window. M: eager, or graph (below)

PyTorch at its best on a GPU (--graph, one rank): TF32 in matmuls and cuDNN
convolutions, cudnn.benchmark, and the whole training step (the batch's
gather from the data on the GPU, forward, backward, optimizer step) captured
once in a CUDA graph (torch.cuda.graph, static index tensor) and replayed
each step. The capture's warm-up steps train on the first batch; the weights
and the optimizer's state are put back afterwards, so the run trains as the
eager one does (bar the dropout's random stream).
  peak_rss_kb=R (one per rank, R = VmHWM of that rank at exit: rank=I)
  done=1 end_unix=U
"""
import argparse
import gzip
import os
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

MEAN, STD = 0.2860, 0.3530
DATA = "/usr/share/datasets/fashion-mnist"


def process_start_unix():
    """Unix time at which this process started (/proc/self/stat, clock ticks since boot)."""
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        boot = time.time() - float(f.read().split()[0])
    return boot + ticks / os.sysconf("SC_CLK_TCK")


T_START = process_start_unix()


def load_idx(path, lo, hi, images):
    """Items [lo, hi) of a gzip IDX file: normalized float32 images or int64 labels."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    if images:
        rows, cols = int.from_bytes(raw[8:12], "big"), int.from_bytes(raw[12:16], "big")
        x = np.frombuffer(raw, np.uint8, offset=16).reshape(-1, rows * cols)[lo:hi]
        x = (x.astype(np.float32) / 255.0 - MEAN) / STD
        return torch.from_numpy(x)
    return torch.from_numpy(np.frombuffer(raw, np.uint8, offset=8)[lo:hi].astype(np.int64))


def count_idx(path):
    """Items an IDX file declares."""
    with gzip.open(path, "rb") as f:
        return int.from_bytes(f.read(8)[4:8], "big")


def shard(n, ranks, r):
    """dlh-train's shard: [r*n/ranks, (r+1)*n/ranks)."""
    return r * n // ranks, (r + 1) * n // ranks


def mlp(layers):
    mods, width = [], 784
    for w in layers:
        mods += [nn.Linear(width, w), nn.ReLU()]
        width = w
    mods.append(nn.Linear(width, 10))
    return nn.Sequential(*mods)


def cnn():
    return nn.Sequential(
        nn.Unflatten(1, (1, 28, 28)),
        nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(7 * 7 * 64, 1024), nn.ReLU(), nn.Dropout(0.4),
        nn.Linear(1024, 10))


def he_init(model, seed):
    """He-normal weights, zero biases, as dlh-train."""
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Conv2d)):
            fan_in = m.weight[0].numel()
            with torch.no_grad():
                m.weight.normal_(0.0, (2.0 / fan_in) ** 0.5, generator=g)
                m.bias.zero_()


def evaluate(model, x, y, ranks):
    """Global mean loss and accuracy over every rank's test shard."""
    model.eval()
    s = torch.zeros(3, dtype=torch.float64, device=x.device)
    with torch.no_grad():
        for i in range(0, len(x), 512):
            out = model(x[i:i + 512])
            s[0] += F.cross_entropy(out, y[i:i + 512], reduction="sum").item()
            s[1] += (out.argmax(1) == y[i:i + 512]).sum().item()
    s[2] = len(x)
    if ranks > 1:
        dist.all_reduce(s)
    model.train()
    return s[0].item() / s[2].item(), s[1].item() / s[2].item()


def sync(dev):
    """Waits for the GPU's queued work (timings of --device cuda)."""
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def capture_step(model, opt, x, y, b, dev):
    """The whole training step on rows idx of x, y (gather, forward, backward,
    optimizer step) captured in one CUDA graph. Returns replay(idx), which
    copies the b indices into the graph's static index tensor and replays it.
    The warm-up steps the capture needs (on a side stream, as PyTorch's
    whole-network capture does) train on the first b rows; the parameters and
    the optimizer's state are put back in place afterwards."""
    params = [p.detach().clone() for p in model.parameters()]
    static_idx = torch.arange(b, device=dev)

    def step():
        out = model(x.index_select(0, static_idx))
        loss = F.cross_entropy(out, y.index_select(0, static_idx))
        loss.backward()
        opt.step()

    side = torch.cuda.Stream(dev)
    side.wait_stream(torch.cuda.current_stream(dev))
    with torch.cuda.stream(side):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            step()
    torch.cuda.current_stream(dev).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)   # the graph's backward allocates the gradients
    with torch.cuda.graph(graph):
        step()
    with torch.no_grad():   # as before the warm-up: the first step starts from here
        for p, saved in zip(model.parameters(), params):
            p.copy_(saved)
        for st in opt.state.values():
            for v in st.values():
                if torch.is_tensor(v):
                    v.zero_()   # momentum, Adam's moments and step count
    sync(dev)

    def replay(idx):
        static_idx.copy_(idx)
        graph.replay()
    return replay


def vmhwm_kb():
    with open("/proc/self/status") as f:
        return int(next(l.split()[1] for l in f if l.startswith("VmHWM:")))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    ap.add_argument("--layers", default="256,128,100", help="MLP hidden widths")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64, help="global batch")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads per rank")
    ap.add_argument("--train-limit", type=int, default=0, help="first N training images (0: all)")
    ap.add_argument("--test-limit", type=int, default=0, help="first N test images (0: all)")
    ap.add_argument("--max-steps", type=int, default=0, help="stop after N steps (0: all epochs)")
    ap.add_argument("--warmup", type=int, default=20, help="steps before the samples/s window")
    ap.add_argument("--target-acc", type=float, default=0.0, help="stop after the first epoch reaching it")
    ap.add_argument("--no-eval", action="store_true", help="skip evaluation (throughput runs)")
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="cuda: one GPU per rank (LOCAL_RANK), NCCL")
    ap.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd",
                    help="adam: torch.optim.Adam(lr) (--momentum unused)")
    ap.add_argument("--tf32", action="store_true",
                    help="cuda: TF32 in matmuls and convolutions, cudnn.benchmark")
    ap.add_argument("--graph", action="store_true",
                    help="cuda, one rank: the whole step in a CUDA graph (implies --tf32)")
    a = ap.parse_args()
    if a.graph and a.device != "cuda":
        ap.error("--graph needs --device cuda")
    if a.graph and int(os.environ.get("WORLD_SIZE", "1")) != 1:
        ap.error("--graph: one rank only (DDP's allreduce is not captured here)")
    a.tf32 = a.tf32 or a.graph

    torch.set_num_threads(a.threads)
    ranks = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if a.device == "cuda":
        dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(dev)
        # eager: FP32 as dlh-train's cuBLAS GEMMs, no TF32 in matmuls or cuDNN
        # convolutions; --tf32 (and --graph): PyTorch at its best
        torch.backends.cuda.matmul.allow_tf32 = a.tf32
        torch.backends.cudnn.allow_tf32 = a.tf32
        torch.backends.cudnn.benchmark = a.tf32
    else:
        dev = torch.device("cpu")
    dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")

    p = lambda name: os.path.join(a.data, name)
    ntrain = count_idx(p("train-labels-idx1-ubyte.gz"))
    ntest = count_idx(p("t10k-labels-idx1-ubyte.gz"))
    if a.train_limit:
        ntrain = min(ntrain, a.train_limit)
    if a.test_limit:
        ntest = min(ntest, a.test_limit)
    lo, hi = shard(ntrain, ranks, rank)
    x = load_idx(p("train-images-idx3-ubyte.gz"), lo, hi, True)
    y = load_idx(p("train-labels-idx1-ubyte.gz"), lo, hi, False)
    lo, hi = shard(ntest, ranks, rank)
    tx = load_idx(p("t10k-images-idx3-ubyte.gz"), lo, hi, True)
    ty = load_idx(p("t10k-labels-idx1-ubyte.gz"), lo, hi, False)
    x, y, tx, ty = x.to(dev), y.to(dev), tx.to(dev), ty.to(dev)

    b = a.batch // ranks
    assert b * ranks == a.batch, "global batch must divide by the ranks"
    spe = min((shard(ntrain, ranks, r)[1] - shard(ntrain, ranks, r)[0]) // b
              for r in range(ranks))
    model = mlp([int(w) for w in a.layers.split(",")]) if a.model == "mlp" else cnn()
    he_init(model, a.seed)
    model = model.to(dev)
    if not a.graph:   # one rank: no gradients to sum
        model = DDP(model, device_ids=[dev.index] if dev.type == "cuda" else None)
    if a.optimizer == "adam":
        # capturable: its step count lives on the GPU, as a graph needs
        opt = (torch.optim.Adam(model.parameters(), lr=a.lr, capturable=True) if a.graph
               else torch.optim.Adam(model.parameters(), lr=a.lr))
    else:
        opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    if rank == 0:
        nparams = sum(t.numel() for t in model.parameters())
        print(f"peer: model={a.model} ranks={ranks} batch={a.batch} ({b} per rank) "
              f"steps_per_epoch={spe} params={nparams} threads={a.threads} "
              f"blas_threads={os.environ.get('OPENBLAS_NUM_THREADS', '?')} device={dev} "
              f"optimizer={a.optimizer} tf32={int(a.tf32)} graph={int(a.graph)}", flush=True)

    replay = capture_step(model, opt, x, y, b, dev) if a.graph else None
    step, t_warm, done = 0, None, False
    g = torch.Generator().manual_seed(a.seed * 1000003 + rank)
    for epoch in range(1, a.epochs + 1):
        perm = torch.randperm(len(x), generator=g).to(dev)
        for k in range(spe):
            idx = perm[k * b:(k + 1) * b]
            if replay:
                replay(idx)
            else:
                out = model(x[idx])
                loss = F.cross_entropy(out, y[idx])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            step += 1
            if step == a.warmup:
                sync(dev)
                t_warm = time.perf_counter()
            if step == a.max_steps:
                done = True
                break
        if step > a.warmup and t_warm is not None:
            window = step - a.warmup
            sync(dev)
            sps = window * a.batch / (time.perf_counter() - t_warm)
            t_warm = None   # the window ends at the first epoch end (or max-steps)
            if rank == 0:
                print(f"samples_per_s={sps:.1f} window_steps={window} warmup_steps={a.warmup} "
                      f"mode={'graph' if a.graph else 'eager'}", flush=True)
        if not a.no_eval:
            tl, acc = evaluate(model, tx, ty, ranks)
            now = time.time()
            if rank == 0:
                print(f"epoch={epoch} test_acc={acc:.4f} test_loss={tl:.4f} "
                      f"time_s={now - T_START:.3f} unix={now:.3f}", flush=True)
            if a.target_acc and acc >= a.target_acc:
                done = True
        if done:
            break

    rss = torch.tensor([vmhwm_kb()], dtype=torch.int64, device=dev)
    all_rss = [torch.zeros_like(rss) for _ in range(ranks)]
    dist.all_gather(all_rss, rss)
    if rank == 0:
        for r, v in enumerate(all_rss):
            print(f"peak_rss_kb={v.item()} rank={r}")
        print(f"done=1 end_unix={time.time():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
