"""Cost of the smoothness measure against its pass-count floor, per default-study experiment.

The floor is one forward+backward pass on the step's batch per probe, plus one for the gradient
g at w. For each experiment and normalizer of the study config this script builds the run's
model (at its initialization, i.e. the step-0 checkpoint), times one plain forward+backward on a
batch of the training batch size (the unit), then the measure with the Hessian off and on, and
prints the passes counted, the times, and the time in units of the floor::

    python benchmarks/bench_smoothness.py [--config config/config.yaml] [--repeats 5]

Single-threaded CPU by default (``--threads``, ``--device``), like a workflow job. Times are the
best of ``--repeats`` interleaved calls.
"""

from __future__ import annotations

import argparse
import copy
import time

import torch
import yaml

from bnstudy import data
from bnstudy.measures.smoothness import compute as smoothness
from bnstudy.train import loop as training
from bnstudy.train.loop import TrainConfig, loss_fn


def best_times(fns: dict, repeats: int) -> dict:
    """Best wall time of each function, the calls interleaved so that load from other processes
    on a shared machine hits all of them alike."""
    times = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {k: min(v) for k, v in times.items()}


def bench(model, x, y, task, lr, opts: smoothness.Options, arch, repeats) -> dict:
    """Times as in ``smoothness.run``: the measure on a model it owns (no private copy)."""
    lf, params = loss_fn(task), list(model.parameters())
    twin = copy.deepcopy(model)
    o_off = smoothness.Options(**{**opts.to_dict(), "hessian": False})
    o_on = smoothness.Options(**{**opts.to_dict(), "hessian": True})
    lines = {h: smoothness.measure(twin, x, y, task, lr, o, arch, owned=True)[2]
             for h, o in ((False, o_off), (True, o_on))}
    passes = lines[False].passes
    t = best_times({
        "floor": lambda: [torch.autograd.grad(lf(model(x), y), params) for _ in range(passes)],
        "off": lambda: smoothness.measure(twin, x, y, task, lr, o_off, arch, owned=True),
        "on": lambda: smoothness.measure(twin, x, y, task, lr, o_on, arch, owned=True),
        "copy": lambda: copy.deepcopy(model),
    }, repeats)
    return {"params": sum(p.numel() for p in params), "unit": t["floor"] / passes,
            "lines": lines, **t}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="config/config.yaml")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    dev = training.resolve_device(a.device)
    with open(a.config) as fh:
        cfg = yaml.safe_load(fh)
    opts = smoothness.Options.parse(cfg.get("smoothness", {}))
    print(f"options: {opts.to_dict()}")
    print(f"{'experiment':<10} {'norm':<10} {'params':>7} {'batch':>5} {'f+b ms':>7} "
          f"{'passes':>6} {'ms':>8} {'x floor':>7} {'hvps':>5} {'+hess ms':>9} {'hvp/f+b':>7} "
          f"{'copy ms':>7}")
    for name, e in cfg["experiments"].items():
        if "smoothness" not in e.get("measures", ["smoothness"]):  # the study skips it there
            continue
        d = cfg["datasets"][e["dataset"]]
        ds = data.make(d["kind"], d.get("options", {}))
        tc = TrainConfig.from_dict(cfg["trainings"][e["training"]])
        n = len(ds.x_train) if tc.batch_size is None else min(tc.batch_size, len(ds.x_train))
        x = torch.as_tensor(ds.x_train[:n], device=dev)
        y = torch.as_tensor(ds.y_train[:n], device=dev)
        arch = cfg["models"][e["model"]]["arch"]
        for norm in e["norms"]:
            spec = {"seed": 0, "norm": norm, "model_config": cfg["models"][e["model"]]}
            model = training.build(spec, ds, dev).train()
            r = bench(model, x, y, ds.task, tc.lr, opts, arch, a.repeats)
            line, eig = r["lines"][False], r["lines"][True].hessian
            hvps = eig.iterations if eig else 0
            per_hvp = (r["on"] - r["off"]) / max(hvps, 1) / r["unit"]
            print(f"{name:<10} {norm:<10} {r['params']:>7} {n:>5} {r['unit'] * 1e3:>7.2f} "
                  f"{line.passes:>6} {r['off'] * 1e3:>8.1f} {r['off'] / r['floor']:>7.2f} "
                  f"{hvps:>5} {r['on'] * 1e3:>9.1f} {per_hvp:>7.2f} {r['copy'] * 1e3:>7.2f}")
    print("x floor: measure time / (passes x one plain forward+backward), as smoothness.run "
          "calls it (on a model it owns); hvp/f+b: extra time per Hessian-vector product (incl. "
          "the create_graph overhead) in forward+backward units; copy ms: the private deep copy "
          "a direct measure() call adds")


if __name__ == "__main__":
    main()
