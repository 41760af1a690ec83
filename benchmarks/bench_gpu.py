"""The paper models on one device: bnstudy's training step against a bare PyTorch loop, the
host-device syncs per step, peak memory, and each measure's time per checkpoint.

For VGG11, ResNet9 and ResNet18 (BN; width 64, batch 128 on a GPU; ``--quick``: widths 1/16,
batch 32, so that it runs on a CPU in a few minutes) on CIFAR-shaped synthetic data (3x32x32,
10 classes; the GPU machine has no network), on the device of ``--device`` (auto: CUDA when
present):

- step time: seconds per step over the steps between a run's first and last (its only)
  evaluations and checkpoints (CUDA: their mean, device synchronized at both ends; CPU: the
  median step), best of ``--repeats`` interleaved runs; bnstudy's ``train`` and a bare loop
  (the same model, optimizer and epoch-wise permutation, data on the device, nothing else);
  ratio bnstudy/bare;
- syncs/step: host-device syncs per training step between evaluations (CUDA:
  ``torch.cuda.set_sync_debug_mode``'s warnings; CPU: the conversions a GPU would stall on,
  ``_local_scalar_dense``, data-dependent shapes, ``tolist``/``cpu``/``numpy``);
- peak memory: ``torch.cuda.max_memory_allocated`` of a bnstudy run (CUDA only);
- each measure's seconds per checkpoint with its default options (``--measures``; ``--quick``:
  generalization, ics and smoothness), in units of a training step of the model.

The last line is ``bnstudy/bare: R``, R the worst model's step-time ratio (goal: <= 1.05).

    python benchmarks/bench_gpu.py [--quick] [--device auto] [--measures ics smoothness]
"""

from __future__ import annotations

import argparse
import collections
import statistics
import time
import warnings

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from bnstudy import measures
from bnstudy.data import Dataset
from bnstudy.networks import normalizers
from bnstudy.train import loop as training

VGG11 = [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"]
# bn_jitter and partition_density take minutes per checkpoint on a CPU at their default options
QUICK_MEASURES = ("generalization", "ics", "smoothness")
SYNC_OPS = {"_local_scalar_dense", "nonzero", "masked_select", "_unique2", "unique_dim",
            "unique_consecutive", "equal", "is_nonzero"}


def model_configs(scale: float) -> dict[str, dict]:
    width = max(1, int(64 * scale))
    return {"vgg11": {"arch": "vgg", "channels": VGG11, "width_mult": scale, "init": "kaiming"},
            "resnet9": {"arch": "resnet9", "width": width},
            "resnet18": {"arch": "resnet18", "width": width}}


def synthetic(n_train: int, n_test: int, seed: int = 0) -> Dataset:
    """CIFAR-shaped data: standard normal 3x32x32 images, 10 classes from a random linear map."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n_train + n_test, 3, 32, 32)).astype(np.float32)
    y = (x.reshape(len(x), -1) @ rng.standard_normal((3 * 32 * 32, 10))).argmax(1)
    meta = {"task": "classification", "input_shape": [3, 32, 32], "out_dim": 10,
            "kind": "cifar10", "standardized": True}
    return Dataset(x[:n_train], y[:n_train].astype(np.int64), x[n_train:],
                   y[n_train:].astype(np.int64), meta)


NORM = {"name": "batchnorm"}


def make_spec(name: str, model: dict, steps: int, batch: int) -> dict:
    return {"experiment": "bench", "dataset": "cifar10", "model": name, "norm": NORM["name"],
            "seed": 0, "model_config": model,
            "training": {"lr": 0.05, "momentum": 0.9, "weight_decay": 5e-4, "batch_size": batch,
                         "steps": steps, "eval_every": steps, "checkpoints": [0]}}


def sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def mark(marks: dict, step: int, steps: int, dev: torch.device) -> None:
    """Note the time step ``step`` of ``1 .. steps - 1`` starts (CUDA: synchronized, at the
    window's two ends only; CPU: every step, computing synchronously)."""
    if 1 <= step <= steps - 1 and (dev.type != "cuda" or step in (1, steps - 1)):
        sync(dev)
        marks[step] = time.perf_counter()


def per_step(marks: dict, dev: torch.device) -> float:
    """Seconds per step from :func:`mark`'s times: the window's mean on CUDA, the median
    step on the CPU (robust to other jobs on a shared machine)."""
    steps = sorted(marks)
    if dev.type == "cuda":
        return (marks[steps[-1]] - marks[steps[0]]) / (steps[-1] - steps[0])
    return statistics.median(marks[b] - marks[a] for a, b in zip(steps, steps[1:], strict=False))


def bare(spec: dict, ds: Dataset, dev: torch.device) -> float:
    """Seconds per step of a bare PyTorch loop over its steps ``1 .. steps - 1``."""
    model = training.build(spec, ds, dev)
    cfg = training.TrainConfig.from_dict(spec["training"])
    opt = training.make_optimizer(model, cfg)
    x, y = torch.as_tensor(ds.x_train, device=dev), torch.as_tensor(ds.y_train, device=dev)
    gen = torch.Generator().manual_seed(spec["seed"])
    bs, perm, pos = cfg.batch_size, torch.empty(0, dtype=torch.long), 0
    model.train()
    marks = {}
    for step in range(cfg.steps):
        mark(marks, step, cfg.steps, dev)
        if pos + bs > len(perm):
            perm, pos = torch.randperm(len(x), generator=gen).to(dev), 0
        idx = perm[pos: pos + bs]
        pos += bs
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
        opt.step()
    return per_step(marks, dev)


def package(spec: dict, ds: Dataset, dev: torch.device) -> float:
    """Seconds per step of bnstudy's trainer over its steps ``1 .. steps - 1`` (between its
    first and last evaluation and checkpoint), timed where each step starts."""
    steps, marks, set_step = spec["training"]["steps"], {}, normalizers.set_step

    def timed(model, step):
        mark(marks, step, steps, dev)
        set_step(model, step)

    normalizers.set_step = timed
    try:
        training.train(spec, ds, str(dev))
    finally:
        normalizers.set_step = set_step
    return per_step(marks, dev)


def step_times(name, model, ds, dev, steps, batch, repeats) -> tuple[float, float]:
    """Seconds per step, bare and bnstudy, the best of ``repeats`` interleaved runs of each."""
    spec = make_spec(name, model, steps, batch)
    times = [(bare(spec, ds, dev), package(spec, ds, dev)) for _ in range(repeats)]
    return min(t[0] for t in times), min(t[1] for t in times)


class _CpuSyncs(TorchDispatchMode):
    def __init__(self, log):
        super().__init__()
        self.log = log

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket.__name__ in SYNC_OPS:
            self.log()
        return func(*args, **(kwargs or {}))


def _counted(method, log):
    def counted(self, *args, **kwargs):
        log()
        return method(self, *args, **kwargs)

    return counted


def syncs_per_step(spec: dict, ds: Dataset, dev: torch.device) -> float:
    """Host-device syncs per training step at the steps between the first and last evaluation."""
    steps, now = spec["training"]["steps"], {"step": -1}
    per_step: collections.Counter = collections.Counter()
    set_step = normalizers.set_step

    def tracking(model, step):
        now["step"] = step
        set_step(model, step)

    def log():
        per_step[now["step"]] += 1

    originals = {n: getattr(torch.Tensor, n) for n in ("tolist", "cpu", "numpy")}
    normalizers.set_step = tracking
    try:
        if dev.type == "cuda":
            torch.cuda.set_sync_debug_mode("warn")
            with warnings.catch_warnings():
                warnings.simplefilter("always")
                warnings.showwarning = lambda message, *_a, **_k: (
                    log() if "synchroniz" in str(message) else None)
                training.train(spec, ds, str(dev))
        else:
            for n, f in originals.items():
                setattr(torch.Tensor, n, _counted(f, log))
            with _CpuSyncs(log):
                training.train(spec, ds, str(dev))
    finally:
        normalizers.set_step = set_step
        for n, f in originals.items():
            setattr(torch.Tensor, n, f)
        if dev.type == "cuda":
            torch.cuda.set_sync_debug_mode(0)
    between = range(1, steps)
    return sum(per_step[s] for s in between) / max(1, len(between))


def peak_memory(spec: dict, ds: Dataset, dev: torch.device) -> str:
    if dev.type != "cuda":
        return "-"
    torch.cuda.reset_peak_memory_stats(dev)
    training.train(spec, ds, str(dev))
    return f"{torch.cuda.max_memory_allocated(dev) / 2**30:.2f} GiB"


def measure_times(names, spec, ds, dev, step_s) -> list[tuple[str, float, float]]:
    """``(measure, seconds per checkpoint, in training steps)`` on a run with 2 checkpoints."""
    run = training.train(spec, ds, str(dev))
    out = []
    for name in names:
        m = measures.get(name)
        opts = m.options.parse({})
        sync(dev)
        t0 = time.perf_counter()
        m.run(run, ds, opts, dev)
        sync(dev)
        per = (time.perf_counter() - t0) / len(run["checkpoints"])
        out.append((name, per, per / step_s))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small widths and batch (CPU, CI)")
    p.add_argument("--device", default="auto")
    p.add_argument("--repeats", type=int, default=None)
    p.add_argument("--models", nargs="+", default=["vgg11", "resnet9", "resnet18"])
    p.add_argument("--measures", nargs="*", default=None,
                   help=f"measures to time (default: all but teacher_student; with --quick "
                        f"{', '.join(QUICK_MEASURES)}); choices: "
                        f"{', '.join(sorted(measures.REGISTRY))}")
    p.add_argument("--norm", default="batchnorm", help="the normalizer of every model")
    a = p.parse_args()
    dev = training.resolve_device(a.device)
    NORM["name"] = normalizers.get(a.norm).name
    scale, batch, n1, n2 = (1 / 16, 32, 6, 40) if a.quick else (1.0, 128, 20, 200)
    repeats = a.repeats or 3
    names = a.measures if a.measures is not None else (
        list(QUICK_MEASURES) if a.quick else
        [n for n in sorted(measures.REGISTRY) if n != "teacher_student"])
    ds = synthetic(n_train=batch * 8, n_test=batch * 2)
    configs = model_configs(scale)
    print(f"device {dev} ({torch.cuda.get_device_name(dev) if dev.type == 'cuda' else 'cpu'}, "
          f"{torch.get_num_threads()} threads), torch {torch.__version__}, {NORM['name']}, "
          f"batch {batch}, widths x{scale:g} of the paper's, {n2 - 2} timed steps, "
          f"best of {repeats}")
    print(f"{'model':9s} {'bare ms/step':>12s} {'bnstudy ms/step':>15s} {'ratio':>6s} "
          f"{'syncs/step':>10s} {'peak mem':>9s}")
    ratios, rows = {}, []
    for name in a.models:
        model = configs[name]
        b, k = step_times(name, model, ds, dev, n2, batch, repeats)
        spec = make_spec(name, model, n1, batch)
        s = syncs_per_step(spec, ds, dev)
        mem = peak_memory(spec, ds, dev)
        ratios[name] = k / b
        print(f"{name:9s} {1e3 * b:12.2f} {1e3 * k:15.2f} {k / b:6.3f} {s:10.2f} {mem:>9s}",
              flush=True)
        rows += [(name, *r) for r in measure_times(names, spec, ds, dev, k)] if names else []
    if rows:
        print(f"{'model':9s} {'measure':18s} {'s/checkpoint':>12s} {'training steps':>14s}")
        for name, m, per, steps in rows:
            print(f"{name:9s} {m:18s} {per:12.3f} {steps:14.1f}")
    worst = max(ratios, key=ratios.get)
    print(f"bnstudy/bare: {ratios[worst]:.3f}")


if __name__ == "__main__":
    main()
