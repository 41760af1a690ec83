"""The measure registry: per-run measurement stages, by name.

Every subpackage of this package that defines the measure contract is a measure (found by
:func:`_discover`; adding a measure is adding its subpackage, its plot module and its tests:
its config section's schema is derived from its ``Options``,
:meth:`bnstudy.options.Options.json_schema`). The contract, in the subpackage's ``__init__``
(torch-free, so the workflow planner can read it at Snakefile parse time without importing
torch):

- ``NAME``: the measure's name and config section (a measure without a section is not run);
- ``TABLES``: the tables it fills, the first being the main table;
- ``DATASET_KINDS``: the data kinds it is defined on (``None``: all; the workflow schedules it
  nowhere else);
- ``Options``: its typed options, a :class:`bnstudy.options.Options` (checked once, by
  ``Options.parse``, before any job runs and again at the CLI's edge);
- ``run(run, data, options, device) -> {table: rows}``: the measure over one run file
  (:mod:`bnstudy.train.checkpoints`) and its dataset. It imports its implementation (the
  subpackage's ``compute`` module) when called;
- ``COLUMNS``: ``{table: {column: meaning with units}}`` of every column its rows carry besides
  the run's identifying ones, and ``ROWS``: ``{table: what one row is}``: its part of the column
  dictionary (:mod:`bnstudy.column_docs`, ``results/README.md``), checked against the rows it
  writes (``tests/test_column_docs.py``);
- optionally ``check(options, model) -> None``: the measure's own config check, for what its
  ``Options`` cannot know alone because it depends on the model (ICS's layer indices against
  the model's layers). The study check (:mod:`bnstudy.config.study`) calls it before any job,
  once per experiment that runs the measure, with the parsed ``Options`` and that experiment's
  plain model (normalizer ``none``, built once per model and dataset on the CPU, shared: the
  check must not change it); it may import torch inside. It raises ``ValueError`` naming the
  option, the bad value and the valid ones (``options.fail(key, why)`` writes
  ``<section>.<key>=<value>: <why>``); the study adds the model and experiment. Absent: no
  check. A check keeps a measure's errors in its own package, so that the study names none.

The CLI adds the runs' identifying columns and writes one Parquet file per table and
experiment; the workflow aggregates them into ``results/tables/<table>.parquet``. The workflow's
code hash of a measure covers its subpackage's ``__init__`` and every package module it imports,
at any depth (so the implementation counts).

Measures must never change the model they are given: they work on copies or restore the train
mode and BN buffers they touch.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from bnstudy.options import Options

CONTRACT = ("NAME", "TABLES", "DATASET_KINDS", "Options", "run", "COLUMNS", "ROWS")


@dataclass(frozen=True)
class Measure:
    name: str
    run: Callable[..., dict[str, list[dict]]]
    options: type[Options]
    tables: tuple[str, ...]  # the first is the main table
    dataset_kinds: tuple[str, ...] | None  # the data kinds it applies to (None: all)
    module: ModuleType
    columns: dict  # {table: {column: meaning}}
    rows: dict  # {table: what one row is}
    check: Callable[[Options, object], None] | None = None  # config check against the model

    def applies_to(self, dataset_kind: str) -> bool:
        return self.dataset_kinds is None or dataset_kind in self.dataset_kinds

    @property
    def source(self) -> str:
        """The contract module's file, relative to ``src/bnstudy`` (the code hash's entry)."""
        root = Path(__file__).resolve().parent.parent
        return Path(self.module.__file__).resolve().relative_to(root).as_posix()


def _discover() -> dict[str, Measure]:
    found = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        mod = importlib.import_module(f"{__name__}.{info.name}")
        missing = [k for k in CONTRACT if not hasattr(mod, k)]
        if missing:
            raise TypeError(f"measure package {mod.__name__} lacks {missing} of the contract")
        undocumented = sorted(set(mod.TABLES) - set(mod.COLUMNS) | set(mod.TABLES) - set(mod.ROWS))
        if undocumented:
            raise TypeError(f"measure package {mod.__name__}: COLUMNS and ROWS must describe "
                            f"each of its TABLES; missing {undocumented}")
        check = getattr(mod, "check", None)
        if check is not None and not callable(check):
            raise TypeError(f"measure package {mod.__name__}: check must be a function "
                            f"check(options, model), got {check!r}")
        found[mod.NAME] = Measure(mod.NAME, mod.run, mod.Options, tuple(mod.TABLES),
                                  None if mod.DATASET_KINDS is None else tuple(mod.DATASET_KINDS),
                                  mod, dict(mod.COLUMNS), dict(mod.ROWS), check)
    return found


REGISTRY: dict[str, Measure] = _discover()


def get(name: str) -> Measure:
    if name not in REGISTRY:
        valid = ", ".join(sorted(REGISTRY))
        raise ValueError(f"unknown measure {name!r}; valid choices: {valid}")
    return REGISTRY[name]


def as_tables(measure: Measure, result) -> dict[str, list[dict]]:
    """Check a measure's result, ``{table: rows}``, against its declared tables."""
    out = dict(result)
    unknown = sorted(set(out) - set(measure.tables))
    if unknown:
        raise ValueError(f"measure {measure.name!r} returned undeclared tables {unknown}")
    return out
