"""Internal covariate shift (Santurkar et al. 2018, Def. 2.1 and Fig. 8).

The measure's contract (torch-free, read by the workflow planner): ``NAME`` (its config section),
``TABLES`` (the first is the main table), ``DATASET_KINDS`` (``None``: every kind), ``Options``,
``run`` and ``COLUMNS`` / ``ROWS`` (what its tables' columns and rows mean: :mod:`.columns`).
The definitions and every open choice are documented in :mod:`.compute`.
"""

from __future__ import annotations

from bnstudy.measures.ics.columns import COLUMNS, ROWS
from bnstudy.measures.ics.options import Options

NAME = "ics"
TABLES = ('ics',)
DATASET_KINDS = None

__all__ = ["COLUMNS", "ROWS", "DATASET_KINDS", "NAME", "TABLES", "Options", "run"]


def run(run: dict, data, options: Options, device) -> dict[str, list[dict]]:
    """Rows of ics for every checkpoint the options select, of one run file
    (:mod:`bnstudy.train.checkpoints`) on its dataset."""
    from bnstudy.measures.ics import compute

    return {"ics": compute.run_ics(run, data, Options.parse(options), device)}
