"""What the ledger shows beside a row's verdict: the paper's own (absolute) quantity, and how a
verdict moves along a learning-rate axis.

- :func:`add_absolute`: Santurkar et al. plot the loss range and the gradient's l2 change along
  the gradient in absolute units (Figs. 4 and 10); the ``lipschitz`` and ``grad_pred`` paper
  tests decide on those, in early training. Beside the relative rows (``lipschitz_rel``,
  ``grad_pred_rel``: relative to the point's own loss and gradient norm, beyond the paper) the
  ledger gives the paired log ratio of the absolute quantity (``absolute_effect`` with its
  interval at the row's own level), computed on the same runs and the same stage-matched
  checkpoints (every one). ``beta_smooth`` is absolute already (its effect is repeated). Which
  one decides is stated by the claim's protocol (``decides``).
- :func:`add_lr_notes`: where a study runs the same claim on experiments that differ only in the
  learning rate (an lr axis), each of those rows' note states the verdicts along the axis, e.g.
  ``along the lr axis (after Holm): contradicted at this setting at lr 0.001, 0.003; supported
  at lr 0.01``,
  from the measured rows' adjusted verdicts.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bnstudy.claims.decide import outcomes as O
from bnstudy.claims.decide.rules import paired_effect
from bnstudy.claims.values import metrics as cm
from bnstudy.claims.values import stage

# the relative rows (beyond the paper) carry the paper's absolute quantity beside them (the
# absolute rows, lipschitz and grad_pred, are the paper tests themselves)
ABSOLUTE = {"lipschitz_rel": cm.smooth("loss_variation"),
            "grad_pred_rel": cm.smooth("grad_pred_max"), "beta_smooth": cm.smooth("beta_eff")}
COLUMNS = ("absolute_effect", "absolute_ci_low", "absolute_ci_high")


def add_absolute(ledger: pd.DataFrame, frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """``ledger`` with :data:`COLUMNS` for the smoothness rows of :data:`ABSOLUTE`."""
    out = ledger.copy()
    for col in COLUMNS:
        out[col] = np.nan
    df = frames.get("smoothness")
    if df is None or df.empty or "experiment" not in out or "experiment" not in df:
        return out
    for i, r in out[out["claim_id"].isin(list(ABSOLUTE))].iterrows():
        if r.get("verdict") == "not measured" or pd.isna(r.get("experiment")):
            continue
        pair = stage.pair_rows(df, r)
        v = ABSOLUTE[r["claim_id"]](pair)
        if v.empty:
            continue
        by = {n: s.droplevel([k for k in v.index.names if k != "seed"])
              for n, s in v.groupby(level="norm")}
        if str(r["norm"]) not in by or str(r["baseline"]) not in by:
            continue
        level = float(r.get("interval_level", 0.95))
        eff = paired_effect(by[str(r["norm"])], by[str(r["baseline"])], level)
        out.loc[i, list(COLUMNS)] = [eff["effect"], eff["ci_low"], eff["ci_high"]]
    return out


def add_lr_notes(ledger: pd.DataFrame, setups: dict | None) -> pd.DataFrame:
    """``ledger`` with the lr-axis sentence in the note of each row on such an axis."""
    out = ledger.copy()
    if not setups or "experiment" not in out:
        return out

    def same_but_lr(name: str) -> str | None:
        s = setups.get(name)
        if s is None:
            return None
        training = {k: v for k, v in s["training"].items() if k not in ("lr", "name")}
        return repr((s["dataset"], s["model"], sorted(training.items())))

    measured = out[out["verdict"].isin(O.OUTCOMES)]
    keys = measured["experiment"].astype(str).map(same_but_lr)
    for (_, _, _), g in measured.groupby([measured["claim_id"], measured["norm"].astype(str),
                                          keys]):
        lrs = {i: setups[str(e)]["training"].get("lr") for i, e in g["experiment"].items()}
        if len(set(lrs.values())) < 2:
            continue
        by_verdict: dict[str, list[float]] = {}
        col = "adjusted_verdict" if "adjusted_verdict" in out else "verdict"
        for i, lr in sorted(lrs.items(), key=lambda kv: kv[1]):
            by_verdict.setdefault(str(out.at[i, col]), []).append(lr)
        text = f"along the lr axis{' (after Holm)' if col != 'verdict' else ''}: " + "; ".join(
            f"{v} at lr {', '.join(f'{x:g}' for x in lr)}" for v, lr in by_verdict.items())
        for i in g.index:
            old = str(out.at[i, "note"] or "") if "note" in out else ""
            out.at[i, "note"] = f"{old}; {text}" if old else text
    return out
