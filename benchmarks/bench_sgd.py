"""The training optimizer: what ``torch.optim.SGD`` costs against SGD's update written out.

Issue 33 asked whether the hand-written copy of torch's single-tensor SGD update (written so that
no process paid ``torch.optim``'s ``torch._dynamo`` import on its first step) still pays for
itself now that local jobs start from the fork server. This script prints:

(a) the CPU time (user + sys) of a process's first ``torch.optim.SGD`` construction and step: in
    a fresh ``python -c`` after ``import torch`` (what a job in its own process pays), after
    ``import torch._dynamo`` (what a fork-server child pays: the server imports it once), and
    that import itself (paid once per workflow by the server); medians of ``--repeats``;
(b) the time of one ``step()`` of ``torch.optim.SGD`` and of the written-out update (the removed
    ``train/sgd.py`` loop, kept here as the reference) on the default study's models,
    with their training's momentum and batch's gradients;
(c) the default study's share: the jobs that build an optimizer (training runs and the ICS
    measure's jobs, which replay an update; ``Plan.job_counts`` of ``config/config.yaml`` with the
    rounds shipped in ``studies/default``) times (a)'s per-process cost, plus every training
    step times (b)'s difference, against the study's wall time on ``--cores`` cores (``--wall``:
    the last measured one, README "Quick start"), with the fork server on and off.

    python benchmarks/bench_sgd.py [--repeats 5] [--block 200] [--block-repeats 30]
        [--wall 2808] [--cores 2]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]

FIRST_STEP = """
import resource, torch{extra}
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
lin = torch.nn.Linear(2, 2)
for p in lin.parameters():
    p.grad = torch.zeros_like(p)
t0 = cpu()
opt = torch.optim.SGD(lin.parameters(), lr=0.1, momentum=0.9)
opt.step()
print(cpu() - t0)
"""
DYNAMO_IMPORT = """
import resource, torch
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
t0 = cpu()
import torch._dynamo
print(cpu() - t0)
"""


def _fresh(code: str, repeats: int) -> float:
    out = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                check=True).stdout.split()[-1]) for _ in range(repeats)]
    return statistics.median(out)


def written_out_step(params, state, lr, momentum, wd):
    """The removed ``train/sgd.py``'s ``SGD.step``: torch's ``_single_tensor_sgd``, written out."""
    with torch.no_grad():
        for p in params:
            if p.grad is None:
                continue
            grad = p.grad if wd == 0 else p.grad.add(p, alpha=wd)
            if momentum != 0:
                buf = state.get(p)
                if buf is None:
                    buf = state[p] = grad.detach().clone()
                else:
                    buf.mul_(momentum).add_(grad)
                grad = buf
            p.add_(grad, alpha=-lr)


def _models():
    """The default study's models with a batch of their data and their training's options."""
    from bnstudy import data
    from bnstudy.train import loop as training

    star = data.make("star2d", {"n_train": 200, "n_test": 400, "n_arms": 6, "noise": 0.03,
                                "seed": 0})
    gauss = data.make("gaussian_linear", {"n_train": 1000, "n_test": 1000, "dim": 10, "seed": 0})
    digits = data.make("digits", {"test_fraction": 0.25, "seed": 0, "image": False})
    ts = data.make("teacher_student", {"N": 400, "S": 0.25, "alpha": 2.0, "n_test": 1000,
                                       "seed": 0})
    relu = {"slope": 0.0, "init": "kaiming"}
    cases = [("star mlp 6x64", star, {"arch": "mlp", "depth": 6, "width": 64, **relu}, 32, 0.9),
             ("digits mlp 4x128", digits, {"arch": "mlp", "depth": 4, "width": 128, **relu},
              64, 0.9),
             ("dln 25", gauss, {"arch": "dln", "depth": 25, "init": "xavier"}, None, 0.0),
             ("student unit", ts, {"arch": "unit", "slope": 1.0, "init": "orthogonal"}, 32, 0.0)]
    for name, ds, model, batch, momentum in cases:
        for norm in ("none", "batchnorm"):
            spec = {"experiment": "bench", "dataset": "d", "model": "m", "model_config": model,
                    "norm": norm, "seed": 0,
                    "training": {"lr": 0.01, "momentum": momentum, "steps": 1,
                                 "batch_size": batch or "full", "checkpoints": [0]}}
            net = training.build(spec, ds)
            x = torch.as_tensor(ds.x_train)[:batch]
            y = torch.as_tensor(ds.y_train)[:batch]
            training.loss_fn(ds.task)(net(x), y).backward()
            yield f"{name}, {norm}", net, momentum


def _per_step(block: int, repeats: int) -> float:
    """Print (b); return the largest per-step difference torch - written out, in seconds (the
    fastest of ``repeats`` interleaved blocks of ``block`` steps each)."""
    import torch._dynamo  # noqa: F401 - (a)'s first-step cost is not (b)'s

    worst = 0.0
    for name, net, momentum in _models():
        params = [p for p in net.parameters() if p.grad is not None]
        opt = torch.optim.SGD(params, lr=1e-9, momentum=momentum)
        state: dict = {}
        steps = {"torch.optim.SGD": opt.step,
                 "written out": functools.partial(written_out_step, params, state, 1e-9,
                                                   momentum, 0.0)}
        times = {label: [] for label in steps}
        for step in steps.values():
            step()
        for _ in range(repeats):  # interleaved blocks, the fastest of each: load shows as noise
            for label, step in steps.items():
                t0 = time.perf_counter()
                for _ in range(block):
                    step()
                times[label].append((time.perf_counter() - t0) / block)
        times = {label: min(ts) for label, ts in times.items()}
        diff = times["torch.optim.SGD"] - times["written out"]
        worst = max(worst, diff)
        print(f"(b) {name:26s} {len(params):3d} tensors: torch.optim.SGD "
              f"{1e6 * times['torch.optim.SGD']:7.1f} us/step, written out "
              f"{1e6 * times['written out']:7.1f} us/step (+{1e6 * diff:.1f} us)")
    return worst


def _study():
    """(jobs that build an optimizer, training steps) of the default study as shipped."""
    from bnstudy.config import study
    from bnstudy.planning.plan import Plan

    cfg = study.check(study.load([ROOT / "config" / "config.yaml"]), local=False)
    cfg["results"] = str(ROOT / "studies" / "default")
    plan = Plan(cfg)
    counts = plan.job_counts()
    grid = plan.grid(plan.experiments)
    steps = 0
    for name, g in grid.items():
        runs = sum(len(block) * len(norms)
                   for block, norms in zip(g["blocks"], g["block_norms"], strict=True))
        steps += runs * cfg["trainings"][plan.experiments[name]["training"]]["steps"]
    return counts["train"], counts.get("ics", 0), steps


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--block", type=int, default=200, help="steps per timed block")
    p.add_argument("--block-repeats", type=int, default=30)
    p.add_argument("--wall", type=float, default=46 * 60 + 48,
                   help="the default study's wall seconds (README: 46 min 48 s)")
    p.add_argument("--cores", type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(1)
    fresh = _fresh(FIRST_STEP.format(extra=""), a.repeats)
    served = _fresh(FIRST_STEP.format(extra="\nimport torch._dynamo"), a.repeats)
    dynamo = _fresh(DYNAMO_IMPORT, a.repeats)
    print(f"(a) first torch.optim.SGD step, CPU s: {fresh:.3f} in a fresh process, {served:.4f} "
          f"after import torch._dynamo (a fork-server child); the import itself {dynamo:.3f} "
          f"(median of {a.repeats})")
    worst = _per_step(a.block, a.block_repeats)
    train, ics, steps = _study()
    jobs = train + ics
    for label, per_job, once in (("fork server on", served, dynamo), ("fork server off", fresh, 0)):
        cpu = jobs * per_job + once + steps * worst
        print(f"(c) {label:15s}: {jobs} jobs build an optimizer ({train} training, {ics} ICS) x "
              f"{per_job:.4f} s + {once:.2f} s once + {steps} steps x {1e6 * worst:.1f} us = "
              f"{cpu:.1f} CPU-s, {cpu / a.cores:.1f} s wall on {a.cores} cores = "
              f"{100 * cpu / a.cores / a.wall:.2f}% of {a.wall:.0f} s")


if __name__ == "__main__":
    main()
