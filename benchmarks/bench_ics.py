"""Cost of the ICS measure against its pass-count floor, on the default study's experiments.

Floor per checkpoint: the forward+backward for G on the step's batch (which training needed
anyway) plus one extra forward+backward per measured layer that has preceding layers (G'_i),
plus the two probe-batch forwards of distributional ICS (at W^t and W^{t+1}).

For each experiment of the config (default: config/config.yaml) and each normalizer, this
script counts the model forwards and the backward calls that ``ics.measure_checkpoint`` makes
(global hooks, independent of the measure's code), times it against ``passes x`` the time of a
plain forward+backward on the same batch, and times the whole ``run_ics`` over a run with the
experiment's number of checkpoints (weights from a short training run: the cost does not
depend on the weights).

    python benchmarks/bench_ics.py [--config config/config.yaml] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import yaml

from bnstudy import data
from bnstudy.measures.ics import compute as ics
from bnstudy.networks import models
from bnstudy.train import loop as training


class PassCounter:
    """Counts forwards of whole models (by batch size) and backward/grad calls."""

    def __init__(self):
        self.forwards: dict[int, int] = {}
        self.backwards = 0

    def __enter__(self):
        def on_forward(module, args, out):
            if isinstance(module, models.Net):
                n = args[0].shape[0]
                self.forwards[n] = self.forwards.get(n, 0) + 1

        self._hook = torch.nn.modules.module.register_module_forward_hook(on_forward)
        self._backward, self._grad = torch.autograd.backward, torch.autograd.grad

        def backward(*a, **k):
            self.backwards += 1
            return self._backward(*a, **k)

        def grad(*a, **k):
            self.backwards += 1
            return self._grad(*a, **k)

        torch.autograd.backward, torch.autograd.grad = backward, grad
        return self

    def __exit__(self, *exc):
        self._hook.remove()
        torch.autograd.backward, torch.autograd.grad = self._backward, self._grad


def _median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


HEADER = (f"{'experiment':10} {'norm':10} {'layers':>6} {'fwd(batch)':>10} {'fwd(probe)':>10} "
          f"{'bwd':>4} {'floor f/b':>9} {'t_fb ms':>8} {'t_ckpt ms':>9} {'floor ms':>8} "
          f"{'ratio':>6} {'run s':>6} {'ckpts':>5}")


def bench_run(name: str, norm: str, spec: dict, ds, opts: dict, repeats: int) -> str:
    """One table line: passes, per-checkpoint time against the floor, whole-run time."""
    run = training.train(spec, ds, "cpu")
    model = training.build(spec, ds).train()
    model.load_state_dict(run["checkpoints"][1]["model"])
    opt = training.make_optimizer(model, training.TrainConfig.from_dict(spec["training"]))
    opt.load_state_dict(run["checkpoints"][1]["optimizer"])
    xtr, ytr = torch.as_tensor(ds.x_train), torch.as_tensor(ds.y_train)
    batch = run["checkpoints"][1]["batch"]
    x, y = xtr[batch], ytr[batch]
    probe = xtr[: min(opts["probe_size"], len(xtr))]
    measured = ics.resolve_layers(opts["layers"], len(ics.layer_groups(model)))
    extra = sum(1 for i in measured if i > 0)
    with PassCounter() as pc:
        ics.measure_checkpoint(model, opt, x, y, ds.task, probe, opts["layers"])
    lf = training.loss_fn(ds.task)
    net = training.build(spec, ds).train()

    def fb():
        net.zero_grad(set_to_none=True)
        lf(net(x), y).backward()

    def probe_fwd():
        with torch.no_grad():
            net(probe)

    def checkpoint():
        ics.measure_checkpoint(model, opt, x, y, ds.task, probe, opts["layers"])

    t_fb, t_probe = _median_time(fb, repeats), _median_time(probe_fwd, repeats)
    t_ck = _median_time(checkpoint, repeats)
    floor = (1 + extra) * t_fb + 2 * t_probe
    t0 = time.perf_counter()
    ics.run_ics(run, ds, opts, torch.device("cpu"))
    t_run = time.perf_counter() - t0
    same = len(x) == len(probe)  # then batch and probe forwards cannot be told apart
    fwd_b = pc.forwards.get(len(x), 0)
    fwd_p = "(shared)" if same else str(pc.forwards.get(len(probe), 0))
    return (f"{name:10} {norm:10} {len(measured):6d} {fwd_b:10d} {fwd_p:>10} "
            f"{pc.backwards:4d} {1 + extra:9d} {1e3 * t_fb:8.2f} {1e3 * t_ck:9.2f} "
            f"{1e3 * floor:8.2f} {t_ck / floor:6.2f} {t_run:6.2f} {len(run['checkpoints']):5d}")


def bench(cfg: dict, repeats: int) -> None:
    torch.set_num_threads(1)
    opts = ics.Options.parse(cfg.get("ics", {}))
    print(HEADER)
    for name, exp in cfg["experiments"].items():
        if "ics" not in exp.get("measures", ["ics"]):  # the study skips it there
            continue
        ds_cfg = cfg["datasets"][exp["dataset"]]
        ds = data.make(ds_cfg["kind"], ds_cfg.get("options", {}))
        tcfg = dict(cfg["trainings"][exp["training"]])
        n_ckpt = len(training.TrainConfig.from_dict(tcfg).checkpoint_steps())
        # As many checkpoints as the study's schedule, from a short run (cost is weight-free).
        short = {**tcfg, "steps": n_ckpt - 1, "checkpoints": list(range(n_ckpt - 1))}
        for norm in exp["norms"]:
            spec = {"experiment": name, "dataset": exp["dataset"], "model": exp["model"],
                    "model_config": cfg["models"][exp["model"]], "norm": norm, "seed": 0,
                    "training": short}
            print(bench_run(name, norm, spec, ds, opts, repeats), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="config/config.yaml")
    p.add_argument("--repeats", type=int, default=5)
    a = p.parse_args()
    with open(a.config) as fh:
        cfg = yaml.safe_load(fh)
    print(__doc__.split("\n\n")[1])
    bench(cfg, a.repeats)


if __name__ == "__main__":
    main()
