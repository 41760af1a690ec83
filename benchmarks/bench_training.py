"""Training-step overhead: bnstudy's trainer against a bare PyTorch loop.

Same model (built by the same code from the same seed), same data, batch size, optimizer and
number of steps; the bare loop draws its batches with the same epoch-wise randperm. bnstudy's
run also evaluates the full train and test sets at step 0 and at the end and saves two
checkpoints, which the ratio includes. Prints seconds per step for both and their ratio
(target <= 1.10). Run:  python benchmarks/bench_training.py [--steps N] [--repeats R]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from bnstudy import data
from bnstudy.train import loop as training


def bare_loop(spec, ds, steps):
    model = training.build(spec, ds)
    cfg = training.TrainConfig.from_dict(spec["training"])
    opt = training.make_optimizer(model, cfg)
    lf = training.loss_fn(ds.task)
    x, y = torch.as_tensor(ds.x_train), torch.as_tensor(ds.y_train)
    gen = torch.Generator().manual_seed(spec["seed"])
    bs, perm, pos = cfg.batch_size, torch.empty(0, dtype=torch.long), 0
    model.train()
    t0 = time.perf_counter()
    for _ in range(steps):
        if pos + bs > len(perm):
            perm, pos = torch.randperm(len(x), generator=gen), 0
        idx = perm[pos: pos + bs]
        pos += bs
        opt.zero_grad(set_to_none=True)
        lf(model(x[idx]), y[idx]).backward()
        opt.step()
    return time.perf_counter() - t0


def package(spec, ds):
    t0 = time.perf_counter()
    training.train(spec, ds, "cpu")
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    ds = data.make("digits", {"seed": 0, "image": False})
    for norm in ("none", "batchnorm", "layernorm"):
        spec = {"experiment": "bench", "dataset": "digits", "model": "mlp", "norm": norm,
                "seed": 0, "model_config": {"arch": "mlp", "depth": 4, "width": 128},
                "training": {"lr": 0.05, "momentum": 0.9, "batch_size": 64, "steps": a.steps,
                             "eval_every": a.steps, "checkpoints": [0]}}
        bare, pkg = [], []
        for _ in range(a.repeats):
            bare.append(bare_loop(spec, ds, a.steps))
            pkg.append(package(spec, ds))
        b, k = statistics.median(bare), statistics.median(pkg)
        print(f"{norm:10s} bare {1e3 * b / a.steps:.3f} ms/step  bnstudy {1e3 * k / a.steps:.3f} "
              f"ms/step  ratio {k / b:.3f}  (median of {a.repeats}, {a.steps} steps, digits MLP "
              f"4x128, batch 64, {a.threads} thread)")


if __name__ == "__main__":
    main()
