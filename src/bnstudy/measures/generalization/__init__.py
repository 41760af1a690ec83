"""Generalization at a run's last checkpoint: train/test loss and accuracy and their gap.

The measure's contract (torch-free, read by the workflow planner): ``NAME`` (its config section),
``TABLES`` (the first is the main table), ``DATASET_KINDS`` (``None``: every kind), ``Options``,
``run`` and ``COLUMNS`` / ``ROWS`` (what its tables' columns and rows mean: :mod:`.columns`).
The definitions and every open choice are documented in :mod:`.compute`.
"""

from __future__ import annotations

from bnstudy.measures.generalization.columns import COLUMNS, ROWS
from bnstudy.measures.generalization.options import Options

NAME = "generalization"
TABLES = ('generalization',)
DATASET_KINDS = None

__all__ = ["COLUMNS", "ROWS", "DATASET_KINDS", "NAME", "TABLES", "Options", "run"]


def run(run: dict, data, options: Options, device) -> dict[str, list[dict]]:
    """Rows of generalization for every checkpoint the options select, of one run file
    (:mod:`bnstudy.train.checkpoints`) on its dataset."""
    from bnstudy.measures.generalization import compute

    return {"generalization": compute.run(run, data, Options.parse(options), device)}
