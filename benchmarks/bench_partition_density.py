"""Partition density cost vs its floor: one forward pass over all points x vertices.

For the default study's models (star2d MLP 6x64, digits MLP 4x128; the DLN has no partition) and
the default ``partition_density`` options of config/config.yaml, at initialization, prints per
normalizer:

- the forward passes the measure makes over the vertex rows (counted with a hook on the model)
  and the number of rows; the floor is 1 pass (``ceil(rows / chunk_rows)`` when chunked);
- the BN-statistics passes (``train_set``: one full-batch pass over the training set);
- times (best of ``--repeat``, one CPU thread): the counting pass with its hooks, a plain forward
  over the same rows without hooks (the floor), and the whole per-checkpoint ``measure`` (BN
  statistics, counting and rows).

Run: ``python benchmarks/bench_partition_density.py [--repeat 5] [--device cpu]``.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
import torch
import yaml

from bnstudy import data, models, partition_maps
from bnstudy import partition_density as pdm

ROOT = Path(__file__).resolve().parents[1]


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def bench(net, ds, opts: pdm.Options, dev, repeat: int) -> dict:
    """Passes, rows and best times of one model at one checkpoint."""
    xtr = torch.as_tensor(ds.x_train, device=dev).reshape(len(ds.x_train), -1)
    batch = torch.arange(32)
    frozen = pdm.frozen_copy(net, opts.bn_statistics, xtr, batch)
    sets = pdm.point_sets(ds, opts)
    centers = [sets[s] for s in opts.point_sets for _ in opts.radii]
    radii = [np.full(len(sets[s]), r, np.float32) for s in opts.point_sets for r in opts.radii]
    if opts.maps and xtr.shape[1] == 2:
        g = partition_maps.grid(ds, opts.map_resolution, opts.map_margin)
        centers.append(g)
        radii.append(np.full(len(g), opts.map_radius, np.float32))
    c = torch.as_tensor(np.concatenate(centers), device=dev)
    r = torch.as_tensor(np.concatenate(radii), device=dev)
    v = pdm.frame(xtr.shape[1], opts.n_vertices, opts.seed).to(dev)
    calls = []
    hook = frozen.register_forward_pre_hook(lambda m, i: calls.append(len(i[0])))
    counts = pdm.crossing_counts(frozen, c, r, v, opts.chunk_rows)
    hook.remove()
    assert len(calls) == counts.forwards and sum(calls) == counts.rows
    verts = (c[:, None, :] + r[:, None, None] * torch.cat([v, -v])[None]).reshape(-1, c.shape[1])

    def plain():
        with torch.no_grad():
            for i in range(0, len(verts), opts.chunk_rows):
                frozen(verts[i: i + opts.chunk_rows])

    has_bn = any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in net.modules())
    return {
        "rows": counts.rows, "forwards": counts.forwards,
        "floor": math.ceil(counts.rows / opts.chunk_rows),
        "bn_passes": int(has_bn and opts.bn_statistics != "running"),
        "count_s": best(lambda: pdm.crossing_counts(frozen, c, r, v, opts.chunk_rows), repeat),
        "floor_s": best(plain, repeat),
        "measure_s": best(lambda: pdm.measure(net, ds, opts, batch), repeat),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    torch.set_num_threads(1)
    dev = torch.device(a.device)
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    opts = pdm.Options.from_dict(cfg.get("partition_density", {}))
    print(f"options: {opts}")
    print(f"{'experiment':10} {'norm':10} {'rows':>7} {'fwd':>4} {'floor':>5} {'bn_pass':>7} "
          f"{'count_s':>8} {'floor_s':>8} {'ratio':>6} {'measure_s':>9}")
    for exp, dname, mname in (("star", "star2d", "mlp_star"), ("digits", "digits", "mlp_digits")):
        d = cfg["datasets"][dname]
        ds = data.make(d["kind"], d.get("options", {}))
        for norm in ("none", "batchnorm", "layernorm"):
            torch.manual_seed(0)
            net = models.build_model(cfg["models"][mname], norm, ds.input_shape, ds.out_dim)
            b = bench(net.to(dev).train(), ds, opts, dev, a.repeat)
            print(f"{exp:10} {norm:10} {b['rows']:7d} {b['forwards']:4d} {b['floor']:5d} "
                  f"{b['bn_passes']:7d} {b['count_s']:8.3f} {b['floor_s']:8.3f} "
                  f"{b['count_s'] / b['floor_s']:6.2f} {b['measure_s']:9.3f}")
    print("dln (gaussian_linear, 25 linear layers): no kinked activation, no partition; the "
          "measure writes not-applicable rows without any forward pass")


if __name__ == "__main__":
    main()
