"""Teacher-student generalization error against Luo et al.'s closed forms (§4).

The measure's contract (torch-free, read by the workflow planner): ``NAME`` (its config section),
``TABLES`` (the first is the main table), ``DATASET_KINDS`` (``None``: every kind), ``Options``,
``run`` and ``COLUMNS`` / ``ROWS`` (what its tables' columns and rows mean: :mod:`.columns`).
The definitions and every open choice are documented in :mod:`.compute`.
"""

from __future__ import annotations

from bnstudy.measures.teacher_student.columns import COLUMNS, ROWS
from bnstudy.measures.teacher_student.options import Options

NAME = "teacher_student"
TABLES = ('teacher_student',)
DATASET_KINDS = ('teacher_student',)

__all__ = ["COLUMNS", "ROWS", "DATASET_KINDS", "NAME", "TABLES", "Options", "run"]


def run(run: dict, data, options: Options, device) -> dict[str, list[dict]]:
    """Rows of teacher_student for every checkpoint the options select, of one run file
    (:mod:`bnstudy.train.checkpoints`) on its dataset."""
    from bnstudy.measures.teacher_student import compute

    return {"teacher_student": compute.run(run, data, Options.parse(options), device)}
