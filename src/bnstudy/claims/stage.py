"""Claims measured along training compare the arms at matched training stages.

A landscape or ICS measure taken at step 50 of a net that already interpolates its data
(training loss 1e-3 of its initial value) and of one that has not (10%) compares two training
stages, not two landscapes: the review of the star2d MLP found three of four probed checkpoints
like that. The ledger therefore compares a pair of arms only at the checkpoints where **neither
arm has reached the loss floor while the other has not**: a run is *converged* at a checkpoint
when its training loss there is at most :data:`FLOOR` (1%) of its own loss at its first
checkpoint (initialization). Step 0 is always like-for-like (every arm is at its initial loss),
and so is a checkpoint where both arms have converged; a checkpoint where one arm has converged
and the other has not is dropped for both arms of that seed, and the row says which it used
(:func:`stage_note`). A diverged run (non-finite loss) is not converged: it stays, and counts as
a blow-up in the smoothness metrics.

:func:`matched` is applied by the per-run metrics of the smoothness and ICS claims
(:mod:`bnstudy.claims.metrics`) to the compared pair's rows, so both arms of a seed are averaged
over the same checkpoints.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

FLOOR = 1e-2
LOSS = {"smoothness": "loss", "ics": "batch_loss"}  # each table's training-loss column
RUN = ["experiment", "norm", "seed"]


def converged(df: pd.DataFrame, loss: str) -> pd.Series:
    """Per row: whether its run's loss at that step is at most FLOOR x the run's first one."""
    run = [df[k] for k in RUN if k in df]
    first = df.groupby(run)["step"].transform("min")
    start = df[loss].where(df["step"] == first).groupby(run).transform("max")
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = df[loss].astype(float) / start.astype(float)
    return pd.Series(np.isfinite(rel) & (rel <= FLOOR), index=df.index)


def matched(df: pd.DataFrame, loss: str) -> pd.DataFrame:
    """``df``'s rows at the (experiment, seed, step) where no arm in ``df`` is converged."""
    if loss not in df or "step" not in df or df.empty:
        return df
    return df[~_mismatched(df, loss).to_numpy()]


def _mismatched(df: pd.DataFrame, loss: str) -> pd.Series:
    """Per row: whether at its (experiment, seed, step) some arm has converged and another has
    not (both converged, or neither, compare like with like)."""
    conv = converged(df, loss)
    by = conv.groupby([df[k] for k in ("experiment", "seed", "step") if k in df])
    return by.transform("any") & ~by.transform("all")


def stage_note(df: pd.DataFrame, loss: str) -> str:
    """Which checkpoints a pair's row used and which it dropped, in words ("" if none)."""
    if loss not in df or "step" not in df or df.empty:
        return ""
    bad = _mismatched(df, loss)
    dropped = sorted(set(int(s) for s in df.loc[bad, "step"]))
    if not dropped:
        return ""
    kept = sorted(set(int(s) for s in df["step"]) - set(dropped))
    who = " and ".join(sorted(set(df.loc[bad & converged(df, loss), "norm"].astype(str))))
    return (f"stage-matched: compared at steps {', '.join(map(str, kept)) or 'none'}; step(s) "
            f"{', '.join(map(str, dropped))} dropped for the seeds where {who} had reached "
            f"{FLOOR:g} x its initial training loss (a converged net against an unconverged one)")


def pair_rows(df: pd.DataFrame, row) -> pd.DataFrame:
    """The rows of table ``df`` a ledger row compares: its experiment, its arm and baseline."""
    pair = [str(row.get("norm", "")), str(row.get("baseline", ""))]
    return df[(df["experiment"].astype(str) == str(row["experiment"]))
              & df["norm"].astype(str).isin(pair)]


def add_notes(ledger: pd.DataFrame, frames: dict[str, pd.DataFrame],
              tables: dict[str, str]) -> pd.DataFrame:
    """``ledger`` with each stage-matched row's :func:`stage_note` added to its ``note``
    (``tables``: each claim's table; only the tables of :data:`LOSS` are stage-matched)."""
    out = ledger.copy()
    if "experiment" not in out:
        return out
    for i, r in out.iterrows():
        table = tables.get(r["claim_id"])
        df = frames.get(table)
        if (table not in LOSS or df is None or df.empty or pd.isna(r.get("experiment"))
                or not {"experiment", "norm"} <= set(df)):
            continue
        rows = pair_rows(df, r)
        note = stage_note(rows, LOSS[table])
        if note:
            old = str(r.get("note", "") or "")
            out.at[i, "note"] = f"{old}; {note}" if old else note
    return out
