"""Cost of the landscape measure per checkpoint against its floor, per experiment that runs it.

The floor of a slice is one forward pass on the measure's sample per point (1-D lines, 2-D grid);
of the curvature, one Hessian-vector product per Hutchinson sample and Lanczos step. For each
experiment of the study config whose measures include ``landscape`` and each normalizer, the
script builds the run's model (its initialization), times one plain forward on the sample (the
unit), one Hessian-vector product, the slices by both batchings (a loop of one in-place forward
per point, and vmap over chunks of points) and the curvature, and prints each in units of its
floor::

    python benchmarks/bench_landscape.py [--config config/config.yaml] [--repeats 3]

Single-threaded CPU by default (``--threads``, ``--device``), like a workflow job. Times are the
best of ``--repeats`` interleaved calls.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import torch
import yaml

from bnstudy import data
from bnstudy.measures.landscape import Options, compute, curvature
from bnstudy.train import loop as training
from bnstudy.train.evaluation import loss_fn


def best_times(fns: dict, repeats: int) -> dict:
    times = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {k: min(v) for k, v in times.items()}


def bench(model, x, y, task, opts: Options, repeats: int) -> tuple[float, dict]:
    """One plain forward on the sample (the unit) and the times of one HVP, the grid by both
    batchings, and the curvature at the model's weights."""
    lf = loss_fn(task)
    w = {k: v.detach().clone() for k, v in compute.trainable(model).items()}
    gen = torch.Generator().manual_seed(0)
    norms = compute.normalizer_parameters(model)
    dirs = [compute.filter_normalize(compute.raw_direction(w, gen), w, norms) for _ in range(2)]
    coeffs = torch.rand(opts.grid_points ** 2, 2, generator=gen).numpy() * 2 - 1
    loop = compute.Slicer(model, x, y, task, opts.bn_statistics, 0, 0)
    vm = compute.Slicer(model, x, y, task, opts.bn_statistics, 0, opts.chunk)
    leaves = list(compute.trainable(model).values())
    hvp = curvature.hvp_operator(lf(model(x), y), leaves)
    v = [torch.randn_like(t) for t in leaves]
    small = replace(opts, line_points=0, interpolation_points=0, grid_points=0)
    with torch.no_grad():
        unit = best_times({"f": lambda: model(x)}, repeats * 5)["f"]
    return unit, best_times({
        "hvp": lambda: hvp(v),
        "loop": lambda: loop.losses(w, dirs, coeffs),
        "vmap": lambda: vm.losses(w, dirs, coeffs),
        "curv": lambda: compute.curvature_rows(model, x, y, task, small, 0, 0),
    }, repeats)


def runs_landscape(cfg: dict, e: dict) -> bool:
    return "landscape" in cfg and "landscape" in e.get("measures", ["landscape"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="config/config.yaml")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    dev = training.resolve_device(a.device)
    with open(a.config) as fh:
        cfg = yaml.safe_load(fh)
    opts = Options.parse(cfg.get("landscape", {}))
    print(f"options: {opts.to_dict()}")
    points = opts.line_points + opts.interpolation_points  # per line checkpoint, at most
    grid = opts.grid_points ** 2
    hvps = opts.trace_samples + max(opts.density_runs, 1 if opts.top_k else 0) * opts.lanczos_steps
    print(f"per checkpoint: lines {opts.line_points} + {opts.interpolation_points} points, "
          f"grid {grid} points, curvature {hvps} HVPs")
    print(f"{'experiment':<16} {'norm':<16} {'params':>7} {'n':>5} {'fwd ms':>7} {'hvp ms':>7} "
          f"{'grid loop s':>11} {'x floor':>7} {'grid vmap s':>11} {'x floor':>7} "
          f"{'curv s':>7} {'x floor':>7} {'ckpt s':>7}")
    for name, e in cfg["experiments"].items():
        if not runs_landscape(cfg, e):
            continue
        d = cfg["datasets"][e["dataset"]]
        ds = data.make(d["kind"], d.get("options", {}))
        n = min(opts.sample_size, len(ds.x_train))
        x = torch.as_tensor(ds.x_train[:n], device=dev)
        y = torch.as_tensor(ds.y_train[:n], device=dev)
        for norm in e["norms"]:
            spec = {"experiment": name, "dataset": e["dataset"], "model": e["model"], "seed": 0,
                    "norm": norm, "model_config": cfg["models"][e["model"]],
                    "training": cfg["trainings"][e["training"]]}
            model = training.build(spec, ds, dev).train(opts.bn_statistics == "batch")
            unit, t = bench(model, x, y, ds.task, opts, a.repeats)
            leaves = list(compute.trainable(model).values())
            floor_curv = hvps * t["hvp"]
            ckpt = t["loop"] * (1 + points / grid) + t["curv"]
            print(f"{name:<16} {norm:<16} {sum(p.numel() for p in leaves):>7} {n:>5} "
                  f"{unit * 1e3:>7.2f} {t['hvp'] * 1e3:>7.2f} {t['loop']:>11.3f} "
                  f"{t['loop'] / (grid * unit):>7.2f} {t['vmap']:>11.3f} "
                  f"{t['vmap'] / (grid * unit):>7.2f} {t['curv']:>7.3f} "
                  f"{t['curv'] / floor_curv:>7.2f} {ckpt:>7.2f}")
    print("x floor: time / (points x one plain forward on the sample), and for the curvature "
          "time / (HVPs x one HVP); ckpt s: a checkpoint with the grid, both lines and the "
          "curvature (the loop batching), an upper bound for one that has all of them")


if __name__ == "__main__":
    main()
