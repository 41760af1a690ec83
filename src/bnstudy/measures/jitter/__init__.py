"""Mini-batch jitter of BN statistics and of the decision boundary (BN-Explained §4, Fig. 6).

The measure's contract (torch-free, read by the workflow planner): ``NAME`` (its config section),
``TABLES`` (the first is the main table), ``DATASET_KINDS`` (``None``: every kind), ``Options``,
``run`` and ``COLUMNS`` / ``ROWS`` (what its tables' columns and rows mean: :mod:`.columns`).
The definitions and every open choice are documented in :mod:`.compute`.
"""

from __future__ import annotations

from bnstudy.measures.jitter.columns import COLUMNS, ROWS
from bnstudy.measures.jitter.options import Options

NAME = "bn_jitter"
TABLES = ('bn_jitter', 'bn_jitter_boundary')
DATASET_KINDS = None

__all__ = ["COLUMNS", "ROWS", "DATASET_KINDS", "NAME", "TABLES", "Options", "run"]


def run(run: dict, data, options: Options, device) -> dict[str, list[dict]]:
    """Rows of bn_jitter, bn_jitter_boundary for every checkpoint the options select, of one run
    file
    (:mod:`bnstudy.train.checkpoints`) on its dataset."""
    from bnstudy.measures.jitter import compute

    return compute.run(run, data, Options.parse(options), device)
