"""Where a run's and a block's files live under a results directory (the results layout).

Where a run's files live is spelled once, in :func:`run_file`, and a block of an experiment's
seeds once, in :func:`block_file`: the workflow builds its paths with them, and the aggregate
verb finds a table's parts from the run grid with them (the grid travels in the job's argument
file, ``@FILE``: :func:`bnstudy.planning.arguments.write_arguments`; never the list of files, and
never
on the command line, where Linux limits one argument to 128 KiB: the grid of about 1,260
experiments).
"""

from __future__ import annotations

import os
from pathlib import Path

GROUP = ["experiment", "dataset", "model", "norm"]  # a run's identifying columns, but the seed


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
