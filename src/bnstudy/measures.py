"""The measure registry: per-run measurement stages, by name.

A measure entry is a function ``run(run, ds, options, device) -> list[dict]`` over a loaded run
file (:mod:`bnstudy.checkpoints`) and its dataset. It returns tidy rows; the CLI adds the run's
identifying columns (experiment, dataset, model, norm, seed) and writes one Parquet file per run.
Functions are named as ``"module:function"`` and imported on use, so that a stage imports only
the code it measures with (which is also what makes code-change reruns stage-precise).

Measures must never change the model they are given: they work on copies or restore the train
mode and BN buffers they touch.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

import torch

from . import checkpoints, generalization

REGISTRY: dict[str, str] = {
    "generalization": "bnstudy.measures:run_generalization",
}


def get(name: str) -> Callable:
    if name not in REGISTRY:
        valid = ", ".join(sorted(REGISTRY))
        raise ValueError(f"unknown measure {name!r}; valid choices: {valid}")
    module, func = REGISTRY[name].split(":")
    return getattr(importlib.import_module(module), func)


def run_generalization(run: dict, ds, options: dict, device: torch.device) -> list[dict]:
    """Generalization at the run's last checkpoint (NaN row when the run diverged)."""
    stats = options.get("bn_statistics", "running")
    last = run["checkpoints"][-1]
    if run["diverged"]:
        row = generalization.diverged_row(stats)
    else:
        restored = checkpoints.restore(run, len(run["checkpoints"]) - 1, ds, device)
        row = generalization.measure(restored.model, ds, options)[0]
    return [{"step": int(last["step"]), **row, "diverged": bool(run["diverged"])}]
