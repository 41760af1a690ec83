"""Training progress: one INFO line on the ``bnstudy`` logger per evaluation step.

A long job (hours on a GPU) can be watched in its log file (the CLI sends the ``bnstudy`` logger
there): step/total, the training-set and test-set loss of the evaluation just taken, the test
accuracy (classification), elapsed seconds and an estimate of the seconds left. Only values the
trainer has already computed are formatted (the history rows of that step), so logging changes
no number and costs one string per evaluation.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the annotation only
    from bnstudy.train.spec import RunSpec

log = logging.getLogger("bnstudy")


def line(run: str, step: int, total: int, train: dict, test: dict, task: str) -> str:
    """The progress line of evaluation step ``step`` of ``total`` from its history rows
    ``train`` and ``test`` (keys loss, accuracy, wall_time: seconds since training began)."""
    elapsed = float(test["wall_time"])
    pct = 100.0 * step / total if total else 100.0
    parts = [f"{run}: step {step}/{total} ({pct:.0f}%)", f"train loss {train['loss']:.4g}",
             f"test loss {test['loss']:.4g}"]
    if task == "classification":
        parts.append(f"test acc {test['accuracy']:.4f}")
    parts.append(f"elapsed {elapsed:.1f}s")
    # the rate so far (a resumed run's elapsed time includes the time before the restart)
    parts.append(f"ETA {elapsed / step * (total - step):.1f}s" if step > 0 else "ETA n/a")
    return ", ".join(parts)


def report(spec: RunSpec, step: int, total: int, history: list[dict], task: str) -> None:
    """Log the progress line of evaluation step ``step``, whose train and test rows are the last
    two of ``history``."""
    if not log.isEnabledFor(logging.INFO):
        return
    train, test = history[-2], history[-1]
    if (train["split"], test["split"], train["step"], test["step"]) != (
            "train", "test", step, step):
        raise ValueError(f"progress of step {step}: the last history rows are "
                         f"{history[-2:]!r}, expected that step's train and test rows")
    run = f"train {spec.experiment}/{spec.norm}/seed{spec.seed}"
    log.info("%s", line(run, step, total, train, test, task))
