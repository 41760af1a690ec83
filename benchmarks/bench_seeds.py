"""Seeds per CPU-second: a block of seeds stepped together against one seed after another.

The paths of the trainer (:func:`bnstudy.train.loop.train_block`) side by side in one process
and one thread, on the default study's digits MLP (4x128, batch 64, its ``digits_sgd`` training:
600 steps, an evaluation of both splits every 50, 5 checkpoints), for the ``none`` and
``batchnorm`` arms: the per-seed path (the unbatched kernel, what a job trained before issue 47:
one seed after another) and the batched path at each block size, through the hand-written
kernel a job runs for these nets (:mod:`bnstudy.train.bmm`) and through vmap's (the kernel of
every other net; the same numbers, bitwise). Also prints the matrix-multiply
floor (the step's GEMMs alone, timed here) as a share of a seed's training time. Last line, for
the arm with the smaller ratio at the default block size::

    seeds per CPU-second: batched X, per seed Y, ratio Z

Also prints ``bn_jitter``'s CPU time per BN run, its grouped pass against the per-mini-batch
loop it replaced (issue 47's target: 5x), and where the grouped run's time goes: the population
pass (the layers' moments over the training set), the mini-batches' statistics, the rest.

With ``--dln K`` it also times the default study's 25-layer DLN, K seeds one after another
against a block of K, through either kernel (its narrow layers ran no faster through vmap).

Run:  python benchmarks/bench_seeds.py [--sizes 4 8 16 32] [--per-seed 4] [--steps 600] [--dln 3]
"""

from __future__ import annotations

import argparse
import time
from unittest import mock

import torch
from torch import nn

from bnstudy import data
from bnstudy.train import bmm, loop, stacked


def spec(norm: str, seed: int, steps: int) -> dict:
    return {"experiment": "bench", "dataset": "digits", "model": "mlp_digits", "norm": norm,
            "seed": seed, "model_config": {"arch": "mlp", "depth": 4, "width": 128, "slope": 0.0,
                                           "init": "kaiming"},
            "training": {"lr": 0.05, "momentum": 0.9, "batch_size": 64, "steps": steps,
                         "eval_every": 50,
                         "checkpoints": [c for c in (0, 1, 100, 300) if c <= steps]}}


def dln_spec(norm: str, seed: int, steps: int) -> dict:
    """The default study's 25-layer DLN (full-batch GD at lr 1e-2, its ``dln_gd`` training)."""
    return {"experiment": "bench", "dataset": "gaussian_linear", "model": "dln25", "norm": norm,
            "seed": seed, "model_config": {"arch": "dln", "depth": 25, "init": "xavier"},
            "training": {"lr": 0.01, "momentum": 0.0, "batch_size": "full", "steps": steps,
                         "eval_every": 50, "checkpoints": [c for c in (0, 1, 10, 30, 100)
                                                          if c <= steps]}}


def cpu(fn) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def per_seed(norm: str, n: int, steps: int, ds) -> float:
    """CPU seconds of ``n`` seeds trained one after another (the unbatched kernel)."""
    specs = [spec(norm, s, steps) for s in range(n)]
    with mock.patch.object(stacked, "batchable", lambda _s: (False, "benchmark")):
        return cpu(lambda: loop.train_block(specs, ds, "cpu"))


def batched(norm: str, k: int, steps: int, ds, kernel: str = "hand") -> float:
    """CPU seconds of a block of ``k`` seeds through the hand-written kernel (what a job runs
    for these nets, :mod:`bnstudy.train.bmm`) or, ``kernel="vmap"``, through vmap's."""
    specs = [spec(norm, s, steps) for s in range(k)]
    return cpu(lambda: _block(specs, ds, kernel))


def _block(specs, ds, kernel: str):
    if kernel == "hand":
        return loop.train_block(specs, ds, "cpu")
    with mock.patch.object(bmm, "program", lambda *_a: None):
        return loop.train_block(specs, ds, "cpu")


def matmul_floor(ds, steps: int, repeats: int = 200) -> float:
    """CPU seconds of one seed's GEMMs: forward, and the backward's two per layer."""
    widths = [ds.input_shape[0], 128, 128, 128, 128, ds.out_dim]
    mats = []
    for a, b in zip(widths[:-1], widths[1:], strict=True):
        x, w, g = torch.randn(64, a), torch.randn(b, a), torch.randn(64, b)
        mats.append((x, w, g))

    def step():
        for x, w, g in mats:
            torch.mm(x, w.t())
            torch.mm(g, w)
            torch.mm(g.t(), x)

    step()
    return cpu(lambda: [step() for _ in range(repeats)]) / repeats * steps


def _timed(fn, spent: dict, key: str):
    """``fn``, adding the CPU-seconds of each call to ``spent[key]``."""
    def wrapped(*args, **kwargs):
        t0 = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[key] = spent.get(key, 0.0) + time.process_time() - t0
    return wrapped


def jitter(ds, steps: int) -> tuple[float, float, dict]:
    """CPU seconds of ``bn_jitter`` (the default study's options) on one BN run: grouped, and
    with the per-mini-batch loop it replaced; and where the grouped run's time goes (the
    population pass, the mini-batches' statistics, the rest: predictions, rows, maps)."""
    import yaml

    from bnstudy.measures.jitter import compute, stats

    with open("config/config.yaml") as f:
        options = yaml.safe_load(f)["bn_jitter"]
    run = loop.train_block([spec("batchnorm", 0, steps)], ds, "cpu")[0]
    run["spec"] = loop.RunSpec.parse(run["spec"])
    dev = torch.device("cpu")
    cpu(lambda: compute.run(run, ds, options, dev))  # warm
    spent: dict = {}
    with mock.patch.object(stats, "population_moments",
                           _timed(stats.population_moments, spent, "population pass")), \
            mock.patch.object(stats, "batch_statistics",
                              _timed(stats.batch_statistics, spent, "mini-batch statistics")):
        grouped = cpu(lambda: compute.run(run, ds, options, dev))
    spent["the rest"] = grouped - sum(spent.values())
    with mock.patch.object(stats, "_grouped", None), mock.patch.object(
            stats, "StepNoise", nn.Module):  # every module "draws noise": the loop
        looped = cpu(lambda: compute.run(run, ds, options, dev))
    return grouped, looped, spent


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", type=int, nargs="+", default=None)
    p.add_argument("--per-seed", type=int, default=4, help="seeds timed on the per-seed path")
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--dln", type=int, default=0, metavar="K",
                   help="also time the default study's 25-layer DLN (300 steps): K seeds per "
                        "seed against a block of K (its looks make blocks of 3)")
    a = p.parse_args()
    torch.set_num_threads(1)
    default_k = stacked.DEFAULT_BLOCK
    sizes = sorted(set(a.sizes or [1, default_k]) | {default_k})  # 1: a lone run's cost
    ds = data.make("digits", {"test_fraction": 0.25, "seed": 0, "image": False})
    loop.train_block([spec("batchnorm", 0, 2)], ds, "cpu")  # warm: imports, first SGD step
    floor = matmul_floor(ds, a.steps)
    print(f"digits MLP 4x128, batch 64, {a.steps} steps, 1 thread; matmul floor "
          f"{floor:.3f} CPU-s per seed ({1 / floor:.2f} seeds per CPU-second)")
    last = None
    for norm in ("none", "batchnorm"):
        y = a.per_seed / per_seed(norm, a.per_seed, a.steps, ds)
        print(f"{norm:9s} per seed: {y:.3f} seeds/CPU-s ({a.per_seed} seeds), "
              f"{y / (1 / floor):.2f} of the floor")
        for k in sizes:
            x = k / batched(norm, k, a.steps, ds)
            v = k / batched(norm, k, a.steps, ds, "vmap")
            print(f"{norm:9s} block of {k:3d}: {x:.3f} seeds/CPU-s, ratio {x / y:.2f}, "
                  f"{x / (1 / floor):.2f} of the floor; through vmap {v:.3f}, ratio {v / y:.2f}"
                  + ("  (default)" if k == default_k else ""))
            if k == default_k and (last is None or x / y < last[2]):
                last = (x, y, x / y)
    if a.dln:
        lin = data.make("gaussian_linear", {"n_train": 1000, "n_test": 1000, "dim": 10,
                                            "seed": 0})
        for norm in ("none", "batchnorm"):
            specs = [dln_spec(norm, s, 300) for s in range(a.dln)]
            with mock.patch.object(stacked, "batchable", lambda _s: (False, "benchmark")):
                alone = cpu(lambda specs=specs: loop.train_block(specs, lin, "cpu"))
            block = cpu(lambda specs=specs: _block(specs, lin, "hand"))
            vmapped = cpu(lambda specs=specs: _block(specs, lin, "vmap"))
            print(f"dln25 {norm:9s} {a.dln} seeds, 300 steps: per seed {alone:.2f} CPU-s, "
                  f"block of {a.dln} {block:.2f} CPU-s, ratio {alone / block:.2f}; through "
                  f"vmap {vmapped:.2f} CPU-s, ratio {alone / vmapped:.2f}")
    grouped, looped, spent = jitter(ds, a.steps)
    print(f"bn_jitter per BN run (default study's options): grouped {grouped:.2f} CPU-s, "
          f"per-mini-batch loop {looped:.2f} CPU-s, {looped / grouped:.1f}x; the grouped run's "
          + ", ".join(f"{k} {v:.2f}" for k, v in spent.items()))
    import resource

    print(f"peak resident memory of this process: "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    print(f"seeds per CPU-second: batched {last[0]:.3f}, per seed {last[1]:.3f}, "
          f"ratio {last[2]:.2f}")


if __name__ == "__main__":
    main()
