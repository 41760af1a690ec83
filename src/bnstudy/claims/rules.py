"""The ledger's verdict rules and the paired effect they are applied to.

The effect of a claim is paired by seed: for each seed, the claim's per-run quantity of the arm
minus the baseline's (:func:`paired_effect`); the ledger reports its mean, its confidence interval
over seeds (the Student-t interval widened for skewed differences, :mod:`bnstudy.claims.skew`),
the differences' sample skewness and Cohen's d_z. The verdict comes from the interval alone
(:func:`verdict`):

- ``less`` ("X reduces Y"): supported if the CI lies below 0, not supported if it lies above 0;
- ``more``: the mirror image;
- ``no_less`` ("X does not reduce Y"): supported if the CI lies above ``-margin``, not supported
  if it lies below ``-margin``;
- ``no_more`` ("X is not worse than Y", on a quantity where lower is better): supported if the
  CI lies below ``margin``, not supported if it lies above ``margin``;
- ``equivalent``: supported if the CI lies inside ``[-margin, margin]``, not supported if it lies
  outside it entirely;

and inconclusive otherwise (an interval that is not finite included).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bnstudy.claims import skew

RULES = ("less", "more", "no_less", "no_more", "equivalent")

RULE_TEXT = {
    "less": "supported iff the CI of the effect lies below 0; not supported iff above 0",
    "more": "supported iff the CI of the effect lies above 0; not supported iff below 0",
    "no_less": "supported iff the CI lies above -{m:.3g}; not supported iff below -{m:.3g}",
    "no_more": "supported iff the CI lies below {m:.3g}; not supported iff above {m:.3g}",
    "equivalent": "supported iff the CI lies inside ±{m:.3g}; not supported iff outside it",
}


def verdict(rule: str, lo: float, hi: float, margin: float) -> str:
    """The verdict of ``rule`` (margin ``margin``) on the confidence interval ``[lo, hi]``."""
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; valid: {', '.join(RULES)}")
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "inconclusive"
    if rule == "less":
        return "supported" if hi < 0 else "not supported" if lo > 0 else "inconclusive"
    if rule == "more":
        return "supported" if lo > 0 else "not supported" if hi < 0 else "inconclusive"
    if rule == "no_less":
        return "supported" if lo > -margin else "not supported" if hi < -margin else "inconclusive"
    if rule == "no_more":
        return "supported" if hi < margin else "not supported" if lo > margin else "inconclusive"
    if -margin < lo and hi < margin:
        return "supported"
    return "not supported" if hi < -margin or lo > margin else "inconclusive"


def paired_effect(a: pd.Series, b: pd.Series, level: float) -> dict:
    """Mean, interval (:func:`bnstudy.claims.skew.bounds`), d_z, standard deviation
    (``effect_sd``) and sample skewness (``effect_skew``) of a - b over the seeds both have
    (finite values only)."""
    diff = (a - b).dropna()
    diff = diff[np.isfinite(diff)]
    n = len(diff)
    out = {"effect": float(diff.mean()) if n else np.nan, "ci_low": np.nan, "ci_high": np.nan,
           "cohens_dz": np.nan, "effect_sd": np.nan, "effect_skew": np.nan, "n_seeds": n}
    if n >= 2:
        sd, g = float(diff.std(ddof=1)), skew.sample_skew(diff)
        lo, hi = skew.bounds(out["effect"], sd, g, n, level)
        out.update(ci_low=lo, ci_high=hi, effect_sd=sd, effect_skew=g,
                   cohens_dz=(out["effect"] / sd if sd > 0 else np.inf * np.sign(out["effect"])
                              if out["effect"] != 0 else np.nan))
    return out
