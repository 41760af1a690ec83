"""The measure registry: per-run measurement stages, by name.

A :class:`Measure` names a function ``run(run, ds, options, device)`` over a loaded run file
(:mod:`bnstudy.train.checkpoints`) and its dataset, the tables it fills and the package modules it
imports. The function returns tidy rows: a list (rows of the measure's first table) or a dict
``{table: rows}``. The CLI adds the run's identifying columns (experiment, dataset, model, norm,
seed) and writes one Parquet file per table and run; the workflow aggregates them into
``results/tables/<table>.parquet``. The config section named like the measure holds its options
(a measure without a config section is not run); ``dataset_kinds`` restricts a measure to the
data it is defined on (the workflow does not schedule it elsewhere).

Functions are named as ``"module:function"`` and imported on use, so that a stage imports only
the code it measures with; ``code`` lists those modules (relative to ``src/bnstudy``), whose
content hash makes the workflow rerun the measure when they change.

Measures must never change the model they are given: they work on copies or restore the train
mode and BN buffers they touch.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

import torch

from bnstudy.measures import generalization
from bnstudy.train import checkpoints


@dataclass(frozen=True)
class Measure:
    name: str
    func: str  # "module:function"
    tables: tuple[str, ...]  # the first is the main table
    code: tuple[str, ...]  # modules under src/bnstudy the measure's function imports
    dataset_kinds: tuple[str, ...] | None = None  # the data kinds it applies to (None: all)

    def applies_to(self, dataset_kind: str) -> bool:
        return self.dataset_kinds is None or dataset_kind in self.dataset_kinds

    def load(self) -> Callable:
        module, func = self.func.split(":")
        return getattr(importlib.import_module(module), func)


REGISTRY: dict[str, Measure] = {
    m.name: m
    for m in (
        Measure("generalization", "bnstudy.measures:run_generalization", ("generalization",),
                ("measures/__init__.py",)),
        Measure("partition_density", "bnstudy.measures.partition.measure:run",
                ("partition_density", "partition_density_maps"),
                ("measures/partition/measure.py",)),
        Measure("ics", "bnstudy.measures.ics:run_ics", ("ics",),
                ("measures/ics.py",)),
        Measure("smoothness", "bnstudy.measures.smoothness:run", ("smoothness", "smoothness_probes"),
                ("measures/smoothness.py",)),
        Measure("teacher_student", "bnstudy.measures.teacher_student:run", ("teacher_student",),
                ("measures/teacher_student.py",),
                dataset_kinds=("teacher_student",)),
        Measure("bn_jitter", "bnstudy.measures.jitter.measure:run", ("bn_jitter", "bn_jitter_boundary"),
                ("measures/jitter/measure.py",)),
    )
}


def get(name: str) -> Measure:
    if name not in REGISTRY:
        valid = ", ".join(sorted(REGISTRY))
        raise ValueError(f"unknown measure {name!r}; valid choices: {valid}")
    return REGISTRY[name]


def as_tables(measure: Measure, result) -> dict[str, list[dict]]:
    """Normalize a measure function's result to ``{table: rows}`` and check the table names."""
    out = {measure.tables[0]: result} if isinstance(result, list) else dict(result)
    unknown = sorted(set(out) - set(measure.tables))
    if unknown:
        raise ValueError(f"measure {measure.name!r} returned undeclared tables {unknown}")
    return out


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
