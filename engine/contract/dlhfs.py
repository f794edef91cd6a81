"""dlhfs.py - the Python side of engine/contract/contract.h: what a program
run by dlhfs as a [job] command writes (metrics.csv rows, run.info,
checkpoints) and the signals it takes (SIGUSR1 checkpoint, SIGUSR2 suspend).

One module, the standard library only. torch is used when the program has
imported it (torch.save/torch.load for checkpoints, torch.distributed to agree
on the step at which every rank acts); without it checkpoints are pickles, and
a pure Python program works as well. Outside dlhfs (no DLH_JOB_DIR) the same
script runs by hand: metrics.csv, checkpoints/ and output/ in the current
directory.

Import it first: the import blocks SIGUSR1 and SIGUSR2 in the calling thread,
and only threads started later (torch's, a DataLoader's) inherit the mask.
The signals then stay pending until job.take_verbs() takes them between steps,
so no thread is ever interrupted by one.

A complete program: a plain PyTorch loop, and the 12 lines (marked) that
wire it to dlhfs:

    import dlhfs                                        # dlhfs: before torch
    import torch
    import torch.nn.functional as F

    job = dlhfs.init(steps_per_epoch=100)                             # dlhfs
    model = torch.nn.Linear(784, 10)
    opt = torch.optim.SGD(model.parameters(), lr=job.lr(0.05))        # dlhfs
    state = job.resume()                                              # dlhfs
    if state:                                                         # dlhfs
        model.load_state_dict(state["model"])                         # dlhfs
        opt.load_state_dict(state["opt"])                             # dlhfs
    ckpt = lambda: {"model": model.state_dict(), "opt": opt.state_dict()}  # dlhfs
    batch = job.batch_size(64)                                        # dlhfs
    for step in job.steps(1000, ckpt, checkpoint_every=200):          # dlhfs
        x, y = torch.randn(batch, 784), torch.randint(0, 10, (batch,))
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        job.report(step, loss=loss.item(), lr=job.lr(0.05), samples=batch * job.world_size)  # dlhfs
    job.finish()                                                      # dlhfs

job.steps() yields start_step + 1 .. total. After each step's body it takes
the verbs: a checkpoint is written when one is due (every checkpoint_every
steps, on SIGUSR1 or SIGUSR2, at the last step), and after SIGUSR2 the
process exits with 75 (suspended; dlhfs runs it again later with
DLH_RESUME_FROM, and job.resume() hands back what ckpt() returned).
"""
import signal

VERBS = (signal.SIGUSR1, signal.SIGUSR2)   # DLH_SIG_CHECKPOINT, DLH_SIG_SUSPEND

# First of all, before the imports below: no thread may exist yet that does not
# inherit the mask.
signal.pthread_sigmask(signal.SIG_BLOCK, VERBS)

import os  # noqa: E402
import pickle  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

EXIT_SUSPENDED = 75                      # DLH_EXIT_SUSPENDED
COLUMNS = ("kind", "step", "epoch", "time_s", "loss", "accuracy", "lr", "samples_per_s")
METRICS_HEADER = ",".join(COLUMNS)       # DLH_METRICS_HEADER, without its newline
LINE_MAX = 512                           # bytes of a row or the header, its newline included
EXTRAS_MAX = 8                           # extra metric columns
FILE_METRICS = "metrics.csv"             # DLH_FILE_METRICS
FILE_RUNINFO = "run.info"                # DLH_FILE_RUNINFO
FILE_LATEST = "latest"                   # DLH_FILE_LATEST
CKPT_FORMAT = "step-%08d.pt"
CKPT_NAME = re.compile(r"step-(\d{8,})\.pt\Z")
EXTRA_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}\Z")

_T0 = time.monotonic()                   # the process's start, as near as a library sees it

# Where a thread started before this import takes a verb's signal (it was not
# masked there), the default action would end the process: a handler instead
# keeps it for take_verbs(). In the masked threads the signals stay pending.
_caught = set()


def _keep(signo, frame):
    _caught.add(signo)


if threading.current_thread() is threading.main_thread():
    for _s in VERBS:
        if signal.getsignal(_s) == signal.SIG_DFL:
            signal.signal(_s, _keep)


def _torch():
    """torch when the program has imported it, else None."""
    return sys.modules.get("torch")


def _dist():
    """torch.distributed when it is initialized, else None."""
    torch = _torch()
    if torch is None:
        return None
    try:
        dist = torch.distributed
        return dist if dist.is_available() and dist.is_initialized() else None
    except AttributeError:
        return None


def _num(v):
    """A metrics.csv number: "%.6g", nan for None (strtod reads both)."""
    return "nan" if v is None else "%.6g" % float(v)


def _check_extras(names):
    """Raises ValueError unless names are valid extra metric columns."""
    names = list(names)
    seen = set()
    for n in names:
        if not isinstance(n, str) or not EXTRA_NAME.match(n):
            raise ValueError("dlhfs: metric %r: a name is a letter, then up to 31 letters, "
                             "digits or _" % (n,))
        if n in COLUMNS:
            raise ValueError("dlhfs: metric %r: already one of metrics.csv's columns (%s)"
                             % (n, METRICS_HEADER))
        if n in seen:
            raise ValueError("dlhfs: metric %r: named twice" % (n,))
        seen.add(n)
    if len(names) > EXTRAS_MAX:
        raise ValueError("dlhfs: metric %r: more than %d extra metrics (%s)"
                         % (names[EXTRAS_MAX], EXTRAS_MAX, ",".join(names)))
    return names


def _write_atomic(path, data):
    """Writes data (bytes) to path through a .tmp name in its directory."""
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class Job:
    """One run of a program under dlhfs (or by hand): made by init()."""

    def __init__(self, metrics=None, steps=None, steps_per_epoch=None, keep=3):
        env = os.environ
        self.rank = int(env.get("RANK", 0))
        self.world_size = int(env.get("WORLD_SIZE", 1))
        self.local_rank = int(env.get("LOCAL_RANK", 0))
        self.job_dir = env.get("DLH_JOB_DIR") or "."
        self.output_dir = env.get("DLH_OUTPUT_DIR") or os.path.join(self.job_dir, "output")
        self.checkpoint_dir = (env.get("DLH_CHECKPOINT_DIR")
                               or os.path.join(self.job_dir, "checkpoints"))
        self.metrics_csv = env.get("DLH_METRICS_CSV") or os.path.join(self.job_dir, FILE_METRICS)
        self.start_step = 0
        self.steps_per_epoch = steps_per_epoch
        self.keep = keep
        self._declared = None if metrics is None else _check_extras(metrics)
        self._extras = None       # the extra columns, once the header is known
        self._fd = -1             # metrics.csv (rank 0), once the first row comes
        self._time_base = 0.0     # time_s of the checkpoint resumed from
        self._t_prev = time.monotonic()   # the previous train row (samples_per_s)
        self._run_info = None     # what run.info says, once written
        self._stop = False        # a suspend was taken
        if steps:
            self._write_run_info(steps)

    # -- the environment --------------------------------------------------

    def output(self, name):
        """The path of name in the output directory (DLH_OUTPUT_DIR, served as
        jobs/<id>/output/), its directory made."""
        path = os.path.join(self.output_dir, name)
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        return path

    def batch_size(self, default):
        """This rank's batch: the planner's share of the global batch when the
        spec gives [train] batch_size (DLH_BATCH, which dlh-rank takes from
        DLH_RANK_BATCHES: ranks on faster devices get more), else default."""
        v = os.environ.get("DLH_BATCH")
        if not v:
            shares = os.environ.get("DLH_RANK_BATCHES", "").split(",")
            v = shares[self.rank] if self.rank < len(shares) else ""
        return int(v) if v else int(default)

    def global_batch(self, default):
        """The samples of one step over all ranks: DLH_GLOBAL_BATCH when set
        (the spec's [train] batch_size; with scale_batch, x the ranks), else
        default."""
        v = os.environ.get("DLH_GLOBAL_BATCH")
        return int(v) if v else int(default)

    def batch_range(self, default):
        """This rank's rows [lo, hi) of a global batch: its share by
        DLH_RANK_BATCHES when set, else an equal split of
        global_batch(default)."""
        shares = [int(x) for x in os.environ.get("DLH_RANK_BATCHES", "").split(",") if x]
        if len(shares) == self.world_size:
            return sum(shares[:self.rank]), sum(shares[:self.rank + 1])
        g = self.global_batch(default)
        return self.rank * g // self.world_size, (self.rank + 1) * g // self.world_size

    def loss_scale(self, default):
        """What this rank's mean loss is multiplied by so that the average of
        the ranks' gradients (DistributedDataParallel's) is the mean over the
        global batch when the shares differ: its rows x world_size / the
        global batch (1.0 with equal shares). default: the global batch."""
        lo, hi = self.batch_range(default)
        return (hi - lo) * self.world_size / self.global_batch(default)

    def lr(self, default):
        """The learning rate: DLH_LR when set ([train] lr, with scale_batch
        scaled by the ranks: the linear scaling rule), else default."""
        v = os.environ.get("DLH_LR")
        return float(v) if v else float(default)

    def time_s(self):
        """Seconds since the job's first run started, resumes included."""
        return self._time_base + time.monotonic() - _T0

    # -- rows ---------------------------------------------------------------

    def _open_metrics(self, names):
        """Opens metrics.csv and fixes the extra columns: the header's when the
        file has one, else those declared to init(), else names (the first
        report's), writing the header."""
        d = os.path.dirname(self.metrics_csv)
        if d:
            os.makedirs(d, exist_ok=True)
        fd = os.open(self.metrics_csv, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size > 0:
                with open(self.metrics_csv, "rb") as f:
                    first = f.readline(LINE_MAX).decode("utf-8", "replace").rstrip("\r\n")
                if first == METRICS_HEADER or first.startswith(METRICS_HEADER + ","):
                    self._extras = first.split(",")[len(COLUMNS):]
                    self._fd = fd
                    return
            extras = self._declared if self._declared is not None else _check_extras(names)
            if os.fstat(fd).st_size == 0:
                self._write_line(fd, ",".join(list(COLUMNS) + extras))
            self._extras = extras
            self._fd = fd
        except BaseException:
            os.close(fd)
            raise

    @staticmethod
    def _write_line(fd, text):
        """Appends text and a newline in one write."""
        line = (text + "\n").encode()
        if len(line) > LINE_MAX:
            raise ValueError("dlhfs: a metrics.csv line of %d bytes (at most %d): %.60s..."
                             % (len(line), LINE_MAX, text))
        if os.write(fd, line) != len(line):
            raise OSError("dlhfs: a short write to metrics.csv")

    def report(self, step, loss=None, accuracy=None, lr=None, samples=None, epoch=None,
               kind="train", **extra):
        """Appends one row to metrics.csv (rank 0; other ranks' calls do nothing).

        kind "train": one optimizer step, loss and accuracy of its batch, its
        lr, samples = the step's samples over all ranks (samples_per_s is
        samples over the seconds since the previous train row, the first since
        init()). kind "eval": an evaluation after step (test loss and accuracy;
        lr and samples are not written). An unknown value is written nan.
        epoch: given, else (step - 1) // steps_per_epoch + 1 when init() was
        told steps_per_epoch, else 1. Any other keyword is an extra metric
        column (grad_norm=0.3): the columns are those of init(metrics=[...]),
        else of the first report (when it writes the header), else of the
        header already in the file (a resumed run); a name not among them
        raises ValueError, as does a row longer than 512 bytes."""
        if kind not in ("train", "eval"):
            raise ValueError("dlhfs: report kind %r: train or eval" % (kind,))
        if self.rank != 0:
            return
        if self._fd < 0:
            self._open_metrics(extra.keys())
        for n in extra:
            if n not in self._extras:
                raise ValueError("dlhfs: metric %r is not a column of %s (%s): declare it in "
                                 "init(metrics=[...])" % (n, self.metrics_csv,
                                                          ",".join(self._extras) or "no extras"))
        step = int(step)
        if epoch is None:
            epoch = (step - 1) // self.steps_per_epoch + 1 if self.steps_per_epoch else 1
        now = time.monotonic()
        cols = [kind, "%d" % step, "%d" % int(epoch), "%.3f" % (self._time_base + now - _T0),
                _num(loss), _num(accuracy)]
        if kind == "train":
            per_s = None if samples is None else float(samples) / max(now - self._t_prev, 1e-9)
            cols += [_num(lr), _num(per_s)]
            self._t_prev = now
        else:
            cols += ["", ""]
        cols += ["" if extra.get(n) is None else _num(extra[n]) for n in self._extras]
        self._write_line(self._fd, ",".join(cols))

    def _write_run_info(self, total):
        """Rank 0 writes run.info (total_steps, steps_per_epoch) when it says
        something new: dlhfs shows % and an ETA from it."""
        text = "total_steps=%d\n" % int(total)
        if self.steps_per_epoch:
            text += "steps_per_epoch=%d\n" % int(self.steps_per_epoch)
        if self.rank != 0 or text == self._run_info:
            return
        os.makedirs(self.job_dir, exist_ok=True)
        _write_atomic(os.path.join(self.job_dir, FILE_RUNINFO), text.encode())
        self._run_info = text

    # -- checkpoints --------------------------------------------------------

    def checkpoint(self, step, state):
        """Saves state as checkpoint_dir/step-NNNNNNNN.pt (rank 0): written
        under a .tmp name and renamed, then `latest` names it; the newest
        `keep` (init, 3) of the step-*.pt files stay. The file holds
        {"dlhfs": 1, "step", "time_s", "state"}, by torch.save when torch is
        imported, else pickle. With torch.distributed initialized every rank
        calls it, and it returns after a barrier: the file is whole before any
        rank goes on or exits. Returns the file's name."""
        name = CKPT_FORMAT % int(step)
        if self.rank == 0:
            d = self.checkpoint_dir
            os.makedirs(d, exist_ok=True)
            blob = {"dlhfs": 1, "step": int(step), "time_s": self.time_s(), "state": state}
            tmp = os.path.join(d, name + ".tmp")
            torch = _torch()
            with open(tmp, "wb") as f:
                if torch is not None:
                    torch.save(blob, f)
                else:
                    pickle.dump(blob, f, protocol=pickle.HIGHEST_PROTOCOL)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, os.path.join(d, name))
            _write_atomic(os.path.join(d, FILE_LATEST), (name + "\n").encode())
            if self.keep and self.keep > 0:
                ours = sorted((int(m.group(1)), n) for n in os.listdir(d)
                              for m in [CKPT_NAME.match(n)] if m)
                for _, old in ours[:-self.keep]:
                    if old != name:
                        os.unlink(os.path.join(d, old))
        dist = _dist()
        if dist is not None:
            dist.barrier()
        return name

    def resume(self):
        """The state given to checkpoint() in the checkpoint DLH_RESUME_FROM
        names, or None on a first run (no DLH_RESUME_FROM). Sets start_step to
        its step and time_s to go on from its time. Where DLH_START_STEP says
        another step, it warns and takes the checkpoint's."""
        path = os.environ.get("DLH_RESUME_FROM")
        if not path:
            return None
        blob = _load(path)
        said = os.environ.get("DLH_START_STEP")
        if isinstance(blob, dict) and blob.get("dlhfs") == 1:
            step, self._time_base, state = int(blob["step"]), float(blob["time_s"]), blob["state"]
        else:   # not one of ours: the step dlhfs read in its name
            step, state = int(said or 0), blob
        if said is not None and int(said) != step and self.rank == 0:
            print("dlhfs: DLH_START_STEP is %s, the checkpoint's step %d: going on from %d"
                  % (said, step, step), file=sys.stderr, flush=True)
        self.start_step = step
        return state

    # -- the verbs ----------------------------------------------------------

    def take_verbs(self):
        """Takes the verbs' signals pending since the last call: (checkpoint,
        suspend), booleans. With torch.distributed initialized and more than
        one rank, every rank gets what any rank took (one all_reduce), so all
        act after the same step: call it on every rank at the same point."""
        ckpt = stop = False
        while True:
            pending = signal.sigpending()
            if not any(s in pending for s in VERBS):
                break
            info = signal.sigtimedwait(VERBS, 0)
            if info is None:
                break
            ckpt |= info.si_signo == signal.SIGUSR1
            stop |= info.si_signo == signal.SIGUSR2
        while _caught:
            s = _caught.pop()
            ckpt |= s == signal.SIGUSR1
            stop |= s == signal.SIGUSR2
        dist = _dist()
        if dist is not None and self.world_size > 1:
            torch = _torch()
            dev = "cpu"
            if dist.get_backend() == "nccl":
                dev = torch.device("cuda", torch.cuda.current_device())
            t = torch.tensor([float(ckpt), float(stop)], dtype=torch.float64, device=dev)
            dist.all_reduce(t)   # a sum: > 0 where any rank took one
            ckpt, stop = bool(t[0].item() > 0), bool(t[1].item() > 0)
        self._stop |= stop
        return ckpt, stop

    def should_stop(self):
        """True once a suspend was taken: checkpoint, then suspend_exit()."""
        return self._stop

    def steps(self, total, state=None, checkpoint_every=0):
        """Yields the steps start_step + 1 .. total (run.info tells dlhfs the
        total). After each step's body: take_verbs(); a checkpoint of state (or
        of state() when it is callable) when one is due: every
        checkpoint_every steps (0: never), on a verb, at the last step; after a
        suspend, before the last step, the process exits with 75. Leaving the
        loop early (break) does none of it."""
        self._write_run_info(total)
        step = self.start_step
        while step < total:
            step += 1
            yield step
            ckpt, stop = self.take_verbs()
            name = None
            if state is not None and (ckpt or stop or step == total or
                                      (checkpoint_every > 0 and step % checkpoint_every == 0)):
                name = self.checkpoint(step, state() if callable(state) else state)
                if (ckpt or stop) and self.rank == 0:
                    print("dlhfs: step %d: checkpoint %s on request" % (step, name), flush=True)
            if stop and step < total:
                if self.rank == 0:
                    print("dlhfs: step %d: suspended %s" % (step, "at a checkpoint" if name else
                          "without a checkpoint (steps() was given no state)"), flush=True)
                self.suspend_exit()

    def suspend_exit(self):
        """Ends the process as suspended (exit 75): output flushed, every rank
        past a barrier when distributed. os._exit: nothing is torn down (torch's
        gloo group may deadlock in its destructor at interpreter exit)."""
        self.finish()
        dist = _dist()
        if dist is not None:
            dist.barrier()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_SUSPENDED)

    def finish(self):
        """The end of a run: closes metrics.csv, flushes output, returns (the
        final checkpoint is the caller's, or steps()'s)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        sys.stdout.flush()
        sys.stderr.flush()


def _load(path):
    """What checkpoint() saved in path: torch.load (to the CPU) when torch is
    imported or the file is not a pickle, else pickle."""
    torch = _torch()
    if torch is not None:
        try:
            return _torch_load(torch, path)
        except Exception:   # a pickle written without torch
            pass
    try:
        with open(path, "rb") as f:
            return pickle.load(f)
    except Exception:
        if torch is not None:
            raise
    import torch   # a torch checkpoint, read by a program that had not imported torch
    return _torch_load(torch, path)


def _torch_load(torch, path):
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except TypeError:   # a torch without weights_only
        return torch.load(path, map_location="cpu")


def init(metrics=None, steps=None, steps_per_epoch=None, keep=3):
    """The job this process is a rank of. metrics: the names of extra
    metric columns report() will be given (else those of its first call);
    steps: the run's total train steps (else steps() tells it); steps_per_epoch:
    for the epoch column and progress; keep: the checkpoints kept."""
    return Job(metrics=metrics, steps=steps, steps_per_epoch=steps_per_epoch, keep=keep)
