"""Partition density cost: the distance method (default) against the polytope method.

For the default study's models (star2d MLP 6x64, digits MLP 4x128; the DLN has no partition), a
CIFAR-sized VGG on random 3x32x32 images (``--cifar-points`` points per set; the same options
otherwise), and the default ``partition_density`` options of config/config.yaml, at
initialization, prints per normalizer and method:

- the rows of the counting passes (polytope: points x radii x vertices, plus the map grid x
  vertices; distance: points x D input directions, all radii at once, plus the grid x 2) and the
  forward passes made (counted by the measure; the floor is ``ceil(rows / chunk_rows)``);
- times (best of ``--repeat``, one CPU thread): the counting with its hooks (distance: forward-mode
  AD, primal and tangent), a plain forward over the same number of rows without hooks or AD (the
  floor), and the whole per-checkpoint ``measure`` (BN statistics, counting, effective radius,
  rows).

Run: ``python benchmarks/bench_partition_density.py [--repeat 3] [--device cpu]
[--cifar-points 2] [--only star digits cifar-like]``. Measured once on one thread of a shared
CPU: star and digits, the distance count 0.1-0.6 s per checkpoint, 1-3x the polytope's; the
CIFAR-like net, about 4-6 s per point (its 3072 dual rows, 3.5-5x a plain forward over as many
rows) against about 0.015 s per point and radius for the polytope's 40 vertices, and the
polytope's effective radius costs one point's 3072 dual rows per checkpoint.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
import yaml

from bnstudy import data
from bnstudy.data import grids
from bnstudy.measures.partition import compute as pdm
from bnstudy.measures.partition import polytope as pdp
from bnstudy.networks import models

ROOT = Path(__file__).resolve().parents[1]


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def bench(net, ds, opts: pdm.Options, dev, repeat: int) -> dict:
    """Rows, passes and best times of one model at one checkpoint, for ``opts.method``."""
    xtr = torch.as_tensor(ds.x_train, device=dev).reshape(len(ds.x_train), -1)
    batch = torch.arange(32)
    frozen = pdm.frozen_copy(net, opts.bn_statistics, xtr, batch)
    sets = pdm.point_sets(ds, opts)
    grid = (grids.grid(ds, opts.map_resolution, opts.map_margin)
            if opts.maps and xtr.shape[1] == 2 else None)
    v = pdp.frame(xtr.shape[1], opts.n_vertices, opts.seed).to(dev)
    calls = []
    hook = frozen.register_forward_pre_hook(lambda m, i: calls.append(len(i[0])))
    got = pdm.count_blocks(frozen, opts, sets, grid, v, dev)
    hook.remove()
    forwards, rows = got[4], got[5]
    assert len(calls) == forwards and sum(calls) == rows
    x = torch.as_tensor(np.concatenate(list(sets.values())), device=dev)
    plain_rows = x.repeat_interleave(math.ceil(rows / len(x)), 0)[:rows]

    def plain():
        with torch.no_grad():
            for i in range(0, rows, opts.chunk_rows):
                frozen(plain_rows[i: i + opts.chunk_rows])

    return {
        "rows": rows, "forwards": forwards, "floor": math.ceil(rows / opts.chunk_rows),
        "count_s": best(lambda: pdm.count_blocks(frozen, opts, sets, grid, v, dev), repeat),
        "floor_s": best(plain, repeat),
        "measure_s": best(lambda: pdm.measure(net, ds, opts, batch), repeat),
    }


def cifar_like(n_train: int = 2000, seed: int = 0) -> SimpleNamespace:
    """Uniform random 3x32x32 images in [0, 1] (only the shapes and scale matter here)."""
    rng = np.random.default_rng(seed)
    x = rng.random((n_train + 200, 3 * 32 * 32), dtype=np.float32)
    return SimpleNamespace(x_train=x[:n_train], x_test=x[n_train:], input_shape=(3, 32, 32),
                           out_dim=10, y_train=np.zeros(n_train))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--cifar-points", type=int, default=2,
                    help="points per set for the CIFAR-like case (its distance pass is slow)")
    ap.add_argument("--only", nargs="*", default=None, help="cases to run (star digits cifar-like)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    dev = torch.device(a.device)
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    base = cfg.get("partition_density", {})
    print(f"options: {pdm.Options.parse(base)}")
    print(f"{'experiment':10} {'norm':10} {'method':8} {'rows':>7} {'fwd':>4} {'floor':>5} "
          f"{'count_s':>8} {'floor_s':>8} {'ratio':>6} {'measure_s':>9}")
    cases = []
    for exp, dname, mname in (("star", "star2d", "mlp_star"), ("digits", "digits", "mlp_digits")):
        d = cfg["datasets"][dname]
        cases.append((exp, data.make(d["kind"], d.get("options", {})), cfg["models"][mname], {}))
    cases.append(("cifar-like", cifar_like(), {"arch": "vgg", "channels": [16, "M", 32, "M", 64]},
                  {"n_points": a.cifar_points, "chunk_rows": 8192}))
    for exp, ds, model, extra in cases:
        if a.only is not None and exp not in a.only:
            continue
        for norm in ("none", "batchnorm", "layernorm"):
            for method in pdm.METHODS:
                opts = pdm.Options.parse({**base, **extra, "method": method})
                torch.manual_seed(0)
                net = models.build_model(model, norm, ds.input_shape, ds.out_dim)
                b = bench(net.to(dev).train(), ds, opts, dev, a.repeat)
                print(f"{exp:10} {norm:10} {method:8} {b['rows']:7d} {b['forwards']:4d} "
                      f"{b['floor']:5d} {b['count_s']:8.3f} {b['floor_s']:8.3f} "
                      f"{b['count_s'] / b['floor_s']:6.2f} {b['measure_s']:9.3f}")
    print("dln (gaussian_linear, 25 linear layers): no kinked activation, no partition; the "
          "measure writes not-applicable rows without any forward pass")


if __name__ == "__main__":
    main()
