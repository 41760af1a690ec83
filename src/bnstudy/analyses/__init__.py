"""The analysis registry: study-level computations that are not per training run.

Some of the papers' experiments are not "train a grid of runs, then measure each run": the
Dannemann-Junike counterexample is a closed computation on a three-point data set, and a theory
curve is a function of the study's settings alone. An :class:`Analysis` names a function
``run(options: dict) -> list[dict]`` that returns the rows of one table, written to
``results/tables/<name>.parquet``. It runs when the config's ``analyses`` section has an entry
named like it (its options); ``code`` lists the modules it imports, for code-change reruns.
``options`` names its option checker ``check(options: dict) -> dict`` (declared names, types
and ranges; defaults filled in), which the study's config check calls before any job runs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Analysis:
    name: str
    func: str  # "module:function"
    code: tuple[str, ...]
    options: str  # "module:function" checking the options

    def load(self) -> Callable[[dict], list[dict]]:
        return _named(self.func)

    def check_options(self, options: dict | None) -> dict:
        """The options checked (ValueError naming the bad one), with defaults filled in."""
        return _named(self.options)(options)


def _named(ref: str) -> Callable:
    module, func = ref.split(":")
    return getattr(importlib.import_module(module), func)


REGISTRY: dict[str, Analysis] = {a.name: a for a in (
    Analysis("dannemann", func="bnstudy.analyses.dannemann:run", code=("analyses/dannemann.py",),
             options="bnstudy.analyses.dannemann:parse_options"),
)}


def get(name: str) -> Analysis:
    if name not in REGISTRY:
        valid = ", ".join(sorted(REGISTRY)) or "(none registered)"
        raise ValueError(f"unknown analysis {name!r}; valid choices: {valid}")
    return REGISTRY[name]
