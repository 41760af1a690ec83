"""Spline-partition density near the data (Balestriero & Baraniuk, Figs. 3-4).

The measure's contract (torch-free, read by the workflow planner): ``NAME`` (its config section),
``TABLES`` (the first is the main table), ``DATASET_KINDS`` (``None``: every kind), ``Options``,
``run`` and ``COLUMNS`` / ``ROWS`` (what its tables' columns and rows mean: :mod:`.columns`).
The definitions and every open choice are documented in :mod:`.compute`.
"""

from __future__ import annotations

from bnstudy.measures.partition.columns import COLUMNS, ROWS
from bnstudy.measures.partition.options import Options

NAME = "partition_density"
TABLES = ('partition_density', 'partition_density_maps', 'partition_boundaries')
DATASET_KINDS = None

__all__ = ["COLUMNS", "ROWS", "DATASET_KINDS", "NAME", "TABLES", "Options", "run"]


def run(run: dict, data, options: Options, device) -> dict[str, list[dict]]:
    """Rows of partition_density, partition_density_maps, partition_boundaries for every
    checkpoint the options select, of one run file
    (:mod:`bnstudy.train.checkpoints`) on its dataset."""
    from bnstudy.measures.partition import compute

    return compute.run(run, data, Options.parse(options), device)
