"""The analysis registry: study-level computations that are not per training run.

Some of the papers' experiments are not "train a grid of runs, then measure each run": the
Dannemann-Junike counterexample is a closed computation on a three-point data set, and a theory
curve is a function of the study's settings alone. An :class:`Analysis` holds a function
``run(options: dict) -> list[dict]`` that returns the rows of one table, written to
``results/tables/<name>.parquet``. It runs when the config's ``analyses`` section has an entry
named like it (its options). ``check_options(options: dict) -> dict`` checks them (declared
names, types and ranges; defaults filled in); the study's config check calls it before any job
runs. The workflow's code hash of an analysis covers its module and everything it imports.
Analysis modules are torch-free (they are imported when the Snakefile is read).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from bnstudy.analyses import dannemann


@dataclass(frozen=True)
class Analysis:
    name: str
    run: Callable[[dict], list[dict]]
    check_options: Callable[[dict | None], dict]
    module: ModuleType

    @property
    def source(self) -> str:
        """The analysis module's file, relative to ``src/bnstudy`` (the code hash's entry)."""
        root = Path(__file__).resolve().parent.parent
        return Path(self.module.__file__).resolve().relative_to(root).as_posix()


REGISTRY: dict[str, Analysis] = {a.name: a for a in (
    Analysis("dannemann", dannemann.run, dannemann.parse_options, dannemann),
)}


def get(name: str) -> Analysis:
    if name not in REGISTRY:
        valid = ", ".join(sorted(REGISTRY)) or "(none registered)"
        raise ValueError(f"unknown analysis {name!r}; valid choices: {valid}")
    return REGISTRY[name]
