"""The analysis registry: study-level computations that are not per training run.

Some of the papers' experiments are not "train a grid of runs, then measure each run": the
Dannemann-Junike counterexample is a closed computation on a three-point data set, and a theory
curve is a function of the study's settings alone. Every module (or subpackage) of this package
is an analysis, found by :func:`_discover` as the measures are (adding an analysis is adding its
module and its test). The contract, in that module (torch-free at import: the workflow planner
reads the registry when it parses the Snakefile; import torch inside ``run``):

- ``NAME``: the analysis's name, its entry in the config's ``analyses`` section (it runs where
  the study has that entry) and its table, ``results/tables/<NAME>.parquet``;
- ``Options``: its typed options, a :class:`bnstudy.options.Options` with ``SECTION =
  "analyses.<NAME>"`` (the config path, so that every error names ``analyses.<NAME>.<key>``).
  They are declared there only: the study's config check parses the entry with
  ``Options.parse`` before any job runs, and the CLI parses it again at its edge;
- ``run(options: Options) -> list[dict]``: the rows of its table.

The workflow's code hash of an analysis covers its module and every package module it imports.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from bnstudy.options import Options

CONTRACT = ("NAME", "Options", "run")


@dataclass(frozen=True)
class Analysis:
    name: str
    run: Callable[[Options], list[dict]]
    options: type[Options]
    module: ModuleType

    @property
    def source(self) -> str:
        """The analysis module's file, relative to ``src/bnstudy`` (the code hash's entry)."""
        root = Path(__file__).resolve().parent.parent
        return Path(self.module.__file__).resolve().relative_to(root).as_posix()


def _modules() -> Iterable[ModuleType]:
    """This package's modules and subpackages, by name."""
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        yield importlib.import_module(f"{__name__}.{info.name}")


def _discover(modules: Iterable[ModuleType] | None = None) -> dict[str, Analysis]:
    """The registry of ``modules`` (default: this package's), each checked against the
    contract; a module that breaks it is a TypeError naming what is wrong."""
    found: dict[str, Analysis] = {}
    for mod in _modules() if modules is None else modules:
        missing = [k for k in CONTRACT if not hasattr(mod, k)]
        if missing:
            raise TypeError(f"analysis module {mod.__name__} lacks {missing} of the contract "
                            f"{list(CONTRACT)}")
        if not (isinstance(mod.Options, type) and issubclass(mod.Options, Options)):
            raise TypeError(f"analysis module {mod.__name__}: Options must derive from "
                            "bnstudy.options.Options")
        if mod.Options.SECTION != f"analyses.{mod.NAME}":
            raise TypeError(f"analysis module {mod.__name__}: Options.SECTION is "
                            f"{mod.Options.SECTION!r}, need 'analyses.{mod.NAME}'")
        if mod.NAME in found:
            raise TypeError(f"analysis name {mod.NAME!r} is defined by both "
                            f"{found[mod.NAME].module.__name__} and {mod.__name__}")
        found[mod.NAME] = Analysis(mod.NAME, mod.run, mod.Options, mod)
    return found


REGISTRY: dict[str, Analysis] = _discover()


def get(name: str) -> Analysis:
    if name not in REGISTRY:
        valid = ", ".join(sorted(REGISTRY)) or "(none registered)"
        raise ValueError(f"unknown analysis {name!r}; valid choices: {valid}")
    return REGISTRY[name]
