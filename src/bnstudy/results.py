"""A finished study's results directory from Python (a notebook): tables and rebuilt models.

::

    from bnstudy import results
    r = results.load("results")
    r["training"].head(); r.provenance("training"); r.model("star", "batchnorm", 0, step=0)

:func:`load` opens ``<results>/tables/<table>.parquet`` (each read on first use, its checksum
verified), the runs under ``<results>/runs/<experiment>/<norm>/seed<seed>/checkpoints.pt`` and
the datasets ``<results>/data/<dataset>.npz``, the layout of ``workflow/rules/common.smk``. It
only reads; no workflow stage imports this module.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
from torch import nn

from bnstudy import data, io
from bnstudy.tables import layout
from bnstudy.train import checkpoints
from bnstudy.train.spec import RunSpec

TABLES, RUNS, DATA = "tables", "runs", "data"


class NotFound(KeyError):
    """A table, run or dataset the results directory lacks; the message names what it has."""

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass
class Checkpoint:
    """One checkpoint of one run, its model rebuilt (see :meth:`Results.checkpoint`)."""

    model: nn.Module
    dataset: data.Dataset
    step: int
    steps: list[int]  # every checkpointed step of the run
    spec: RunSpec  # the run spec (experiment, dataset, model, norm, seed, model_config, training)
    batch: torch.Tensor  # training-set indices of the mini-batch of update ``step``


class _Tables(Mapping):
    """name -> DataFrame, each table read (and its checksum verified) on first access."""

    def __init__(self, owner: Results):
        self._owner, self._frames = owner, {}

    def __getitem__(self, name: str) -> pd.DataFrame:
        if name not in self._frames:
            self._frames[name] = io.read_table(self._owner.table_path(name))
        return self._frames[name]

    def __iter__(self):
        return iter(self._owner.names())

    def __len__(self) -> int:
        return len(self._owner.names())

    def __contains__(self, name) -> bool:
        return name in self._owner.names()


class Results:
    """A results directory written by the workflow (see :func:`load`)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.tables = _Tables(self)
        self._runs: dict[tuple, dict] = {}

    def __repr__(self) -> str:
        return f"Results({str(self.root)!r}: {len(self.names())} tables, {len(self.runs())} runs)"

    def names(self) -> list[str]:
        """The tables, by name (``tables/<name>.parquet``)."""
        d = self.root / TABLES
        return sorted(p.stem for p in d.glob("*.parquet")) if d.is_dir() else []

    def table_path(self, name: str) -> Path:
        path = self.root / TABLES / f"{name}.parquet"
        if not isinstance(name, str) or os.path.basename(name) != name or not path.is_file():
            raise NotFound(f"no table {name!r} in {self.root / TABLES}; tables there: "
                           f"{', '.join(self.names()) or 'none'}")
        return path

    def __getitem__(self, name: str) -> pd.DataFrame:
        return self.tables[name]

    def plot(self, family: str, out: str | Path, experiment: str | None = None,
             options: dict | None = None) -> Path:
        """Draw figure ``family`` (``python -m bnstudy list figures``) from this directory's
        tables into ``out`` (a .png), for ``experiment`` (an experiment-scope family) or the
        whole study: the figure the report shows, from a shipped study's tables too
        (:mod:`bnstudy.report.ship`), without its runs."""
        from bnstudy import plots

        fam = plots.get(family)
        if (fam.scope == "experiment") != (experiment is not None):
            how = ("per experiment: name one" if fam.scope == "experiment"
                   else "once for the study: name no experiment")
            raise ValueError(f"figure family {family!r} is drawn {how}")
        plots.render(family, [str(self.table_path(t)) for t in fam.tables], str(out),
                     options or {}, experiment)
        return Path(out)

    def provenance(self, name: str) -> dict:
        """The provenance stored in table ``name`` (config hash, versions, device, commit...),
        its checksum verified (:class:`bnstudy.io.CorruptFile` names a damaged table)."""
        return io.read_provenance(self.table_path(name))

    def runs(self) -> pd.DataFrame:
        """experiment, norm, seed and path of every run that has a ``checkpoints.pt``."""
        rows = [{"experiment": p.parts[-4], "norm": p.parts[-3],
                 "seed": int(p.parts[-2][4:]), "path": str(p)}
                for p in (self.root / RUNS).glob("*/*/seed*/checkpoints.pt")
                if p.parts[-2][4:].isdigit()]
        cols = ["experiment", "norm", "seed", "path"]
        return pd.DataFrame(rows, columns=cols).sort_values(cols[:3], ignore_index=True)

    def run(self, experiment: str, norm: str, seed: int) -> dict:
        """The run file (:mod:`bnstudy.train.checkpoints` format) of one run, its checksum
        verified."""
        key = (str(experiment), str(norm), int(seed))
        if key not in self._runs:
            path = Path(layout.run_file(self.root, *key, "checkpoints.pt"))
            if not path.is_file():
                have = self.runs()
                exp = have[have["experiment"] == key[0]]
                here = exp[exp["norm"] == key[1]]
                what = (f"seeds of {key[0]}/{key[1]}: {sorted(here['seed'])}" if len(here) else
                        f"norms of {key[0]}: {sorted(set(exp['norm']))}" if len(exp) else
                        f"experiments: {sorted(set(have['experiment']))}")
                raise NotFound(f"no run {key[0]}/{key[1]}/seed{key[2]} in {self.root} ({path} "
                               f"does not exist); runs there: {what}")
            self._runs = {key: checkpoints.load(path)}  # keep one: run files can be large
        return self._runs[key]

    def dataset(self, name: str) -> data.Dataset:
        """Dataset ``name`` (``data/<name>.npz``, its checksum verified)."""
        path = self.root / DATA / f"{name}.npz"
        if not path.is_file():
            have = sorted(p.stem for p in (self.root / DATA).glob("*.npz"))
            raise NotFound(f"no dataset {name!r} in {self.root / DATA}; datasets there: "
                           f"{', '.join(have) or 'none'}")
        return data.load(path)

    def checkpoint(self, experiment: str, norm: str, seed: int, step: int | None = None,
                   train: bool = False, device: str = "cpu") -> Checkpoint:
        """The model of one run at checkpointed ``step`` (default: the last), rebuilt from the
        run spec and the checkpoint's weights and normalizer buffers exactly as measures get it
        (:func:`bnstudy.train.checkpoints.restore`), with the run's dataset.

        The model is in eval mode (BN normalizes with its running statistics) unless ``train``
        (batch statistics; a stochastic normalizer draws the noise of ``step``, stored in the
        checkpoint). A ``step`` that
        is not checkpointed raises a ValueError naming the checkpointed steps.
        """
        run = self.run(experiment, norm, seed)
        steps = checkpoints.steps(run)
        if step is None:
            step = steps[-1]
        if isinstance(step, bool) or not isinstance(step, int) or step not in steps:
            raise ValueError(f"run {experiment}/{norm}/seed{seed} has no checkpoint at step "
                             f"{step!r}; checkpointed steps: {steps}")
        ds = self.dataset(run["spec"].dataset)
        r = checkpoints.restore(run, steps.index(step), ds, device)
        r.model.train(train)
        return Checkpoint(r.model, ds, r.step, steps, r.spec, r.batch)

    def model(self, experiment: str, norm: str, seed: int, step: int | None = None,
              train: bool = False, device: str = "cpu") -> nn.Module:
        """The rebuilt model of :meth:`checkpoint` (eval mode unless ``train``)."""
        return self.checkpoint(experiment, norm, seed, step, train, device).model


def load(results_dir: str | Path = "results") -> Results:
    """The results directory ``results_dir`` a study wrote (its ``results:`` setting)."""
    root = Path(results_dir)
    if root.exists() and not root.is_dir():
        hint = (f" (it is a table: its results directory is {str(root.parent.parent)!r})"
                if root.suffix == ".parquet" and root.parent.name == TABLES else "")
        raise NotADirectoryError(f"{str(root)!r} is a file, not a results directory{hint}; "
                                 f"pass the directory that holds {TABLES}/, {RUNS}/ and {DATA}/")
    if not root.is_dir():
        raise FileNotFoundError(f"results directory {str(root)!r} does not exist")
    if not any((root / d).is_dir() for d in (TABLES, RUNS, DATA)):
        inner = sorted(p.parent.name for p in root.glob(f"*/{TABLES}") if p.is_dir())
        raise FileNotFoundError(
            f"{str(root)!r} is not a results directory (no {TABLES}/, {RUNS}/ or {DATA}/ in "
            f"it); results directories inside it: {', '.join(inner) or 'none'}")
    return Results(root)
