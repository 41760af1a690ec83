"""Aggregation of per-run tables and the summaries (mean and CI over seeds) the report shows.

Where a run's files live is spelled once, in :func:`run_file`: the workflow builds its per-run
paths with it, and the aggregate verb finds a table's per-run files from the run grid with it
(the grid travels in the job's argument file, ``@FILE``: :func:`bnstudy.arguments.write_arguments`;
never the list of files, and never on the command line, where Linux limits one argument to
128 KiB: the grid of about 1,260 experiments).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from bnstudy import columns, io, lazy

# scipy.stats takes most of a second to import; only the confidence intervals need it, not the
# aggregate verb nor the workflow planner (which imports the figure registry and this module).
stats = lazy.module("scipy.stats")

GROUP = ["experiment", "dataset", "model", "norm"]


def run_file(results: str | Path, experiment, norm, seed, name: str) -> str:
    """Per-run file ``name`` of one run (experiment, normalizer, seed) under ``results``."""
    return os.path.join(str(results), "runs", str(experiment), str(norm), f"seed{seed}", name)


def grid_files(results: str | Path, grid: dict, name: str) -> list[str]:
    """Per-run file ``name`` of every run of ``grid``, ``{experiment: {"norms": [...], "seeds":
    [...]}}`` (an experiment's runs are every normalizer with every seed; with ``blocks`` and
    ``block_norms``, each block's normalizers with its seeds), in grid order."""
    if not name or os.path.basename(name) != name or name in (".", ".."):
        raise ValueError(f"per-run file name {name!r} must be a plain file name")
    if not isinstance(grid, dict) or not grid:
        raise ValueError(f"run grid must be a non-empty mapping experiment -> "
                         f"{{'norms': [...], 'seeds': [...]}}, got {grid!r}")
    files = []
    for experiment, runs in grid.items():
        _check_grid_entry(experiment, runs)
        if "block_norms" in runs:  # a replicated experiment: each block has its own arms
            files += [run_file(results, experiment, n, s, name)
                      for b, ns in zip(runs["blocks"], runs["block_norms"], strict=True)
                      for n in ns for s in b]
        else:
            files += [run_file(results, experiment, n, s, name)
                      for n in runs["norms"] for s in runs["seeds"]]
    return files


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


def _check_grid_entry(experiment, runs) -> None:
    if (not isinstance(runs, dict) or not {"norms", "seeds"} <= set(runs)
            or not set(runs) <= {"norms", "seeds", "axes", "blocks", "block_norms"}
            or not all(isinstance(runs[k], list) and runs[k] for k in ("norms", "seeds"))
            or not isinstance(runs.get("axes", {}), dict)):
        raise ValueError(f"run grid of experiment {experiment!r} must be "
                         f"{{'norms': [...], 'seeds': [...]}} with non-empty lists (and "
                         f"optionally 'axes': {{axis: value}} and 'blocks': [[seed, ...], "
                         f"...]), got {runs!r}")
    blocks = runs.get("blocks")
    if blocks is not None and (
            not isinstance(blocks, list) or not all(isinstance(b, list) and b for b in blocks)
            or sorted(s for b in blocks for s in b) != sorted(runs["seeds"])):
        raise ValueError(f"the blocks of experiment {experiment!r} must split its seeds "
                         f"{runs['seeds']} into non-empty lists, got {blocks!r}")
    arms = runs.get("block_norms")
    if arms is not None and (
            blocks is None or not isinstance(arms, list) or len(arms) != len(blocks)
            or not all(isinstance(a, list) and a and set(a) <= set(runs["norms"])
                       for a in arms)):
        raise ValueError(f"the block_norms of experiment {experiment!r} must give each of its "
                         f"{len(blocks or [])} blocks a non-empty list of its normalizers "
                         f"{runs['norms']}, got {arms!r}")


def seeds_label(seeds) -> str:
    """A block of seeds as a path-safe label: runs of consecutive seeds as ``a-b``, joined by
    ``_`` (``[0, 1, 2, 5]`` -> ``0-2_5``); :func:`label_seeds` reads it back."""
    out, s = [], sorted(int(x) for x in seeds)
    if not s or len(set(s)) != len(s) or s[0] < 0:
        raise ValueError(f"a block of seeds must be distinct non-negative integers, got {seeds!r}")
    start = prev = s[0]
    for x in [*s[1:], None]:
        if x is not None and x == prev + 1:
            prev = x
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if x is not None:
            start = prev = x
    return "_".join(out)


def label_seeds(label: str) -> list[int]:
    """The seeds of a block label written by :func:`seeds_label`."""
    seeds = []
    try:
        for part in str(label).split("_"):
            lo, _, hi = part.partition("-")
            lo, hi = int(lo), int(hi or lo)
            if hi < lo or (seeds and lo <= seeds[-1]) or not part.replace("-", "").isdigit():
                raise ValueError
            seeds += range(lo, hi + 1)
    except ValueError:
        raise ValueError(f"{label!r} is not a block of seeds (e.g. 0-2_5)") from None
    return seeds


def block_file(results: str | Path, experiment, seeds, name: str) -> str:
    """A measure's file ``name`` over one block of an experiment's seeds (every normalizer):
    ``runs/<experiment>/seeds<label>/<name>``. A block is measured once: adding seeds (a
    replication round) adds blocks and never re-measures one."""
    return os.path.join(str(results), "runs", str(experiment), f"seeds{seeds_label(seeds)}", name)


def experiment_files(results: str | Path, grid: dict, name: str) -> list[str]:
    """Block file ``name`` of every block of every experiment of ``grid`` (an experiment
    without ``blocks`` is one block of all its seeds), in grid order."""
    if not name or os.path.basename(name) != name or name in (".", ".."):
        raise ValueError(f"file name {name!r} must be a plain file name")
    files = []
    for experiment, runs in grid.items():
        _check_grid_entry(experiment, runs)
        files += [block_file(results, experiment, b, name)
                  for b in runs.get("blocks") or [runs["seeds"]]]
    return files


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
    as columns, column types normalised) and its provenance."""
    if not inputs:
        raise ValueError("aggregate needs at least one input table")
    frames, hashes, devices = [], [], set()
    for path in sorted(map(str, inputs)):
        frames.append(io.read_table(path))
        prov = io.read_provenance(path)
        hashes.append(prov.get("config_hash"))
        devices.add(prov.get("device"))
    nonempty = [f for f in frames if len(f)]
    # empty per-run tables (a measure with nothing to say for a run) would turn ints into floats
    df = pd.concat(nonempty or frames[:1], ignore_index=True)
    sort = [c for c in (*GROUP, "seed", "step", "split") if c in df.columns]
    df = df.sort_values(sort, kind="stable").reset_index(drop=True)
    if grid:
        df = with_axes(df, grid)
    df = columns.normalize(table, df)  # one type per column name in every table
    prov = io.provenance(io.stable_hash(hashes), ",".join(sorted(map(str, devices))),
                         inputs=len(inputs), input_config_hashes=hashes)
    return df, prov


def aggregate(inputs: list[str | Path], out: str | Path, grid: dict | None = None
              ) -> pd.DataFrame:
    """Concatenate per-run Parquet files; provenance lists each input's config hash."""
    df, prov = combine(inputs, Path(out).stem, grid)
    io.write_table(df, out, prov)
    return df


def t_half_width(sd: float, n: int, level: float) -> float:
    """The half-width of the two-sided Student-t confidence interval at ``level`` of a mean of
    ``n`` values with standard deviation ``sd`` (the one interval the tables, figures and the
    claims ledger use)."""
    return float(stats.t.ppf(0.5 + level / 2, n - 1) * sd / np.sqrt(n))


def mean_ci(values, level: float = 0.95) -> tuple[float, float, float, int]:
    """Mean, and the half-width of the Student-t confidence interval, over finite values."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    n = len(v)
    if n == 0:
        return float("nan"), float("nan"), float("nan"), 0
    m = float(v.mean())
    if n == 1:
        return m, float("nan"), float("nan"), 1
    half = t_half_width(float(v.std(ddof=1)), n, level)
    return m, m - half, m + half, n


def summarize(df: pd.DataFrame, columns: list[str], by: list[str] | None = None,
              level: float = 0.95) -> pd.DataFrame:
    """Long table: one row per group and column with mean, CI bounds and number of seeds."""
    by = by or [c for c in GROUP if c in df.columns]
    rows = []
    for key, g in df.groupby(by, sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        for col in columns:
            m, lo, hi, n = mean_ci(g[col], level)
            ids = dict(zip(by, key, strict=True))
            rows.append({**ids, "quantity": col, "mean": m, "ci_low": lo, "ci_high": hi, "n": n,
                         "n_runs": len(g)})
    return pd.DataFrame(rows)


def format_mean_ci(row) -> str:
    """'mean ± half-width' with the half-width at two significant figures and the mean to the
    same decimal place (digits beyond the interval's precision say nothing): 9.808e-05 ±
    0.00038 prints as '0.00010 ± 0.00038'; very large or small values share an exponent."""
    m = row["mean"]
    if not np.isfinite(m):
        return "n/a"
    half = (row["ci_high"] - row["ci_low"]) / 2
    if not (np.isfinite(half) and half > 0):
        return f"{m:.4g}"
    last = int(np.floor(np.log10(half))) - 1  # decimal exponent of half's 2nd significant digit
    half = round(half, -last)
    top = max(abs(m), half)
    if -6 <= last <= 0 and top < 1e6:
        d = -last
        return f"{m:.{d}f} ± {half:.{d}f}"
    k = int(np.floor(np.log10(top)))
    d = max(k - last, 0)
    return f"({m / 10.0**k:.{d}f} ± {half / 10.0**k:.{d}f})e{k:+03d}"
