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
(:mod:`bnstudy.claims.values.metrics`) to the compared pair's rows, so both arms of a seed are
averaged over the same checkpoints.

:func:`early` keeps the early-training checkpoints: those at step <= :data:`EARLY` (a quarter)
of the experiment's last checkpoint step, its first checkpoint (step 0) always among them.
Santurkar et al. read their landscape differences in early training: the plain net's loss
"has a very wide range of values along the direction of the gradient, especially in the initial
phases of training" ("in the later stages, the network is already close to convergence"; §3.2,
Fig. 4a), and the gradient predictiveness differs by "close to two orders of magnitude ...
especially early in training" (Fig. 4b). The paper tests of those two quantities
(``lipschitz``, ``grad_pred``) therefore average over the early checkpoints only; the other
smoothness rows keep every checkpoint. The window is declared here, before any data, as a
fraction of the schedule (the paper names no step); :func:`early` is applied before
:func:`matched`, so the window is the protocol's schedule, not what stage matching leaves.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

FLOOR = 1e-2
EARLY = 0.25  # the early-training window: steps <= EARLY x the experiment's last checkpoint
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


def early(df: pd.DataFrame) -> pd.DataFrame:
    """``df``'s rows at the early-training checkpoints of their experiment: step <= :data:`EARLY`
    x its last checkpoint step, and its first checkpoint whatever the schedule (so a run always
    has one early checkpoint: step 0, at initialization)."""
    if "step" not in df or df.empty:
        return df
    step = df["step"].astype(float)
    by = df["experiment"] if "experiment" in df else pd.Series(0, index=df.index)
    last = step.groupby(by).transform("max")
    first = step.groupby(by).transform("min")
    return df[((step <= EARLY * last) | (step == first)).to_numpy()]


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


def early_note(df: pd.DataFrame) -> str:
    """Which checkpoints :func:`early` kept from ``df``, in words ("" if it kept them all)."""
    if "step" not in df or df.empty:
        return ""
    kept = sorted(set(int(s) for s in early(df)["step"]))
    every = sorted(set(int(s) for s in df["step"]))
    if kept == every:
        return ""
    return (f"early training: steps {', '.join(map(str, kept))} of "
            f"{', '.join(map(str, every))} (step <= {EARLY:g} x the last checkpoint, as "
            "Santurkar et al. read it)")


def pair_rows(df: pd.DataFrame, row) -> pd.DataFrame:
    """The rows of table ``df`` a ledger row compares: its experiment, its arm and baseline."""
    pair = [str(row.get("norm", "")), str(row.get("baseline", ""))]
    return df[(df["experiment"].astype(str) == str(row["experiment"]))
              & df["norm"].astype(str).isin(pair)]


def add_notes(ledger: pd.DataFrame, frames: dict[str, pd.DataFrame],
              tables: dict[str, str], early_claims=()) -> pd.DataFrame:
    """``ledger`` with each stage-matched row's :func:`stage_note` added to its ``note``
    (``tables``: each claim's table; only the tables of :data:`LOSS` are stage-matched); the
    rows of ``early_claims`` (claim ids whose metric reads early training only) also say which
    checkpoints that kept (:func:`early_note`), and are stage-matched over those."""
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
        notes = [stage_note(rows, LOSS[table])]
        if r["claim_id"] in early_claims:
            notes = [early_note(rows), stage_note(early(rows), LOSS[table])]
        note = "; ".join(n for n in notes if n)
        if note:
            old = str(r.get("note", "") or "")
            out.at[i, "note"] = f"{old}; {note}" if old else note
    return out
