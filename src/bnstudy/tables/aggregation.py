"""Aggregation: the per-run and per-block Parquet files of a table concatenated into
``tables/<table>.parquet``, with each experiment's sweep axes as columns and its provenance
(the parts are found by :mod:`bnstudy.tables.layout`).
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from bnstudy import columns, io
from bnstudy.tables import binding
from bnstudy.tables.layout import GROUP, experiment_files, grid_files


def aggregate_grid(results: str | Path, grid: dict, name: str, out: str | Path,
                   level: str = "run") -> pd.DataFrame:
    """:func:`aggregate` of file ``name`` of every run (``level="run"``, :func:`grid_files`) or
    every block of seeds of every experiment (``level="experiment"``, :func:`experiment_files`)
    of ``grid``; every one
    of them must exist. The experiments' sweep axes become columns."""
    if level not in ("run", "experiment"):
        raise ValueError(f"unknown level {level!r}; valid choices: run, experiment")
    files = (grid_files if level == "run" else experiment_files)(results, grid, name)
    missing = [f for f in files if not os.path.isfile(f)]
    if missing:
        raise FileNotFoundError(f"{len(missing)} of the {len(files)} {level} files {name!r} "
                                f"are missing, e.g. {missing[:3]}")
    return aggregate(files, out, grid)


def with_axes(df: pd.DataFrame, grid: dict) -> pd.DataFrame:
    """``df`` with each experiment's sweep axes (``grid[e]["axes"]``) as columns (None for
    experiments without that axis), so pooling over draws is a groupby. An axis the table
    already has as a column (the teacher-student table's ``alpha``) keeps the table's column."""
    names = sorted({a for runs in grid.values() for a in runs.get("axes", {})} - set(df.columns))
    for a in names:
        values = {e: runs.get("axes", {}).get(a) for e, runs in grid.items()}
        df[a] = df["experiment"].map(values) if "experiment" in df else None
    return df


def grid_table(results: str | Path, grid: dict, name: str, level: str = "run") -> pd.DataFrame:
    """The table :func:`aggregate_grid` would write, in memory (a replication round's ledger
    reads its tables so): file ``name`` of ``grid``, sweep axes as columns."""
    files = (grid_files if level == "run" else experiment_files)(results, grid, name)
    return combine(files, Path(name).stem, grid)[0]


def combine(inputs: list[str | Path], table: str, grid: dict | None = None
            ) -> tuple[pd.DataFrame, dict]:
    """The per-run Parquet files ``inputs`` concatenated as table ``table`` (sorted, sweep axes
    as columns, column types normalised) and its provenance. Each part's checksum is verified
    and, for a run's or a block's file, its place (:mod:`bnstudy.tables.binding`): another
    run's file copied over one is refused by name, never counted as that run."""
    if not inputs:
        raise ValueError("aggregate needs at least one input table")
    frames, hashes, devices, machines = [], [], set(), {"cpu": set(), "kernels": set()}
    for path in sorted(map(str, inputs)):
        df, prov = binding.read_table(path)
        frames.append(df)
        hashes.append(prov.get("config_hash"))
        devices.add(prov.get("device"))
        for key, seen in machines.items():
            seen.add(prov.get(key))
    nonempty = [f for f in frames if len(f)]
    # empty per-run tables (a measure with nothing to say for a run) would turn ints into floats
    df = pd.concat(nonempty or frames[:1], ignore_index=True)
    sort = [c for c in (*GROUP, "seed", "step", "split") if c in df.columns]
    df = df.sort_values(sort, kind="stable").reset_index(drop=True)
    if grid:
        df = with_axes(df, grid)
    df = columns.normalize(table, df)  # one type per column name in every table
    # the CPUs and kernels the inputs were computed with (one value when one machine made all)
    kept = {k: "; ".join(sorted(v - {None})) or None for k, v in machines.items()}
    prov = io.provenance(io.stable_hash(hashes), ",".join(sorted(map(str, devices))),
                         inputs=len(inputs), input_config_hashes=hashes, **kept)
    return df, prov


def aggregate(inputs: list[str | Path], out: str | Path, grid: dict | None = None
              ) -> pd.DataFrame:
    """Concatenate per-run Parquet files; provenance lists each input's config hash."""
    df, prov = combine(inputs, Path(out).stem, grid)
    io.write_table(df, out, prov)
    return df
