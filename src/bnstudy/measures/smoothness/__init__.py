"""Loss-landscape smoothness along the gradient (Santurkar et al. 2018, §3.1, Fig. 4).

The measure's contract (torch-free, read by the workflow planner): ``NAME`` (its config section),
``TABLES`` (the first is the main table), ``DATASET_KINDS`` (``None``: every kind), ``Options``,
``run`` and ``COLUMNS`` / ``ROWS`` (what its tables' columns and rows mean: :mod:`.columns`).
The definitions and every open choice are documented in :mod:`.compute`.
"""

from __future__ import annotations

from bnstudy.measures.smoothness.columns import COLUMNS, ROWS
from bnstudy.measures.smoothness.options import Options

NAME = "smoothness"
TABLES = ('smoothness', 'smoothness_probes')
DATASET_KINDS = None

__all__ = ["COLUMNS", "ROWS", "DATASET_KINDS", "NAME", "TABLES", "Options", "run"]


def run(run: dict, data, options: Options, device) -> dict[str, list[dict]]:
    """Rows of smoothness, smoothness_probes for every checkpoint the options select, of one run
    file
    (:mod:`bnstudy.train.checkpoints`) on its dataset."""
    from bnstudy.measures.smoothness import compute

    return compute.run(run, data, Options.parse(options), device)
