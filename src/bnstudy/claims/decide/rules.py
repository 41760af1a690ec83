"""The ledger's verdict rules and the paired effect they are applied to.

The effect of a claim is paired by seed: for each seed, the claim's per-run quantity of the arm
minus the baseline's (:func:`paired_effect`); the ledger reports the rule's own estimate (the
Hodges-Lehmann shift) and interval (:mod:`bnstudy.claims.decide.robust`: the skew-corrected t
interval and the exact signed-rank one, each at half the level, intersected), the mean
(``effect_mean``), the differences' sample skewness and Cohen's d_z. The verdict comes from the
interval alone (:func:`verdict`; the words are :mod:`bnstudy.claims.decide.outcomes`'):

- ``less`` ("X reduces Y"): supported if the CI lies below 0, contradicted at this setting if it
  lies above 0, and, with a margin ``m > 0`` (the smallest effect of interest the claim
  declares), absent at this setting if it lies above ``-m`` (every effect at least ``m`` in the
  paper's direction excluded: Lakens' one-sided equivalence test);
- ``more``: the mirror image;
- ``no_less`` ("X does not reduce Y"): supported if the CI lies above ``-margin``, contradicted
  if it lies below ``-margin``;
- ``no_more`` ("X is not worse than Y", on a quantity where lower is better): supported if the
  CI lies below ``margin``, contradicted if it lies above ``margin``;
- ``equivalent``: supported if the CI lies inside ``[-margin, margin]``, contradicted if it lies
  outside it entirely;

and undecided otherwise (an interval that is not finite, or empty because the rule's two parts
disagree, included).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bnstudy.claims.decide import outcomes as O
from bnstudy.claims.decide import robust, skew

RULES = ("less", "more", "no_less", "no_more", "equivalent")

RULE_TEXT = {
    "less": "supported iff the CI of the effect lies below 0; contradicted iff above 0",
    "more": "supported iff the CI of the effect lies above 0; contradicted iff below 0",
    "no_less": "supported iff the CI lies above -{m:.3g}; contradicted iff below -{m:.3g}",
    "no_more": "supported iff the CI lies below {m:.3g}; contradicted iff above {m:.3g}",
    "equivalent": "supported iff the CI lies inside ±{m:.3g}; contradicted iff outside it",
}
ABSENT_TEXT = {"less": "; absent iff it lies above -{m:.3g} (the margin)",
               "more": "; absent iff it lies below {m:.3g} (the margin)"}
DIRECTIONAL = ("less", "more")


def rule_text(rule: str, margin: float) -> str:
    """The ledger's ``rule`` column: when each outcome is reached."""
    extra = ABSENT_TEXT[rule] if rule in DIRECTIONAL and margin > 0 else ""
    return (RULE_TEXT[rule] + extra).format(m=margin)


def verdict(rule: str, lo: float, hi: float, margin: float) -> str:
    """The verdict of ``rule`` (margin ``margin``) on the confidence interval ``[lo, hi]``."""
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; valid: {', '.join(RULES)}")
    if not (np.isfinite(lo) and np.isfinite(hi)) or lo > hi:
        return O.UNDECIDED
    sup, con, absent = O.SUPPORTED, O.CONTRADICTED, O.UNDECIDED
    if rule == "less":
        if margin > 0 and lo > -margin and hi >= 0 and lo <= 0:
            return O.ABSENT
        return sup if hi < 0 else con if lo > 0 else absent
    if rule == "more":
        if margin > 0 and hi < margin and lo <= 0 and hi >= 0:
            return O.ABSENT
        return sup if lo > 0 else con if hi < 0 else absent
    if rule == "no_less":
        return sup if lo > -margin else con if hi < -margin else absent
    if rule == "no_more":
        return sup if hi < margin else con if lo > margin else absent
    if -margin < lo and hi < margin:
        return sup
    return con if hi < -margin or lo > margin else absent


def paired_effect(a: pd.Series, b: pd.Series, level: float) -> dict:
    """The rule's estimate (``effect``: Hodges-Lehmann) and interval
    (:func:`bnstudy.claims.decide.robust.bounds`), the mean (``effect_mean``), d_z (mean / sd),
    standard deviation (``effect_sd``) and sample skewness (``effect_skew``) of a - b over the
    seeds both have (finite values only)."""
    diff = (a - b).dropna()
    diff = diff[np.isfinite(diff)]
    n = len(diff)
    x = diff.to_numpy(dtype=float)
    out = {"effect": robust.hodges_lehmann(x) if n else np.nan,
           "effect_mean": float(x.mean()) if n else np.nan, "ci_low": np.nan, "ci_high": np.nan,
           "cohens_dz": np.nan, "effect_sd": np.nan, "effect_skew": np.nan, "n_seeds": n}
    if n >= 2:
        sd, g = float(diff.std(ddof=1)), skew.sample_skew(diff)
        lo, hi = robust.bounds(x, level)
        m = out["effect_mean"]
        out.update(ci_low=lo, ci_high=hi, effect_sd=sd, effect_skew=g,
                   cohens_dz=(m / sd if sd > 0 else np.inf * np.sign(m) if m != 0 else np.nan))
    return out


def outcome_p(rule: str, x, margin: float) -> dict:
    """The one-sided p-values of each decisive outcome of ``rule`` on the differences ``x``
    (:func:`bnstudy.claims.decide.robust.one_sided_p`), consistent with :func:`verdict` on the
    interval at any level ``1 - alpha``: an outcome is reached iff its p-value is below
    ``alpha / 2`` (``equivalent``'s supported: the larger of the two, TOST). Keys ``p_supported``,
    ``p_contradicted`` and ``p_absent`` (NaN where the rule has no such outcome)."""
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    nan = float("nan")
    if len(x) < 2:
        return {"p_supported": nan, "p_contradicted": nan, "p_absent": nan}
    if rule in ("less", "more"):
        below, above = robust.one_sided_p(x, 0.0)
        sup, con = (below, above) if rule == "less" else (above, below)
        absent = nan
        if margin > 0:
            b, a = robust.one_sided_p(x, -margin if rule == "less" else margin)
            absent = a if rule == "less" else b
        return {"p_supported": sup, "p_contradicted": con, "p_absent": absent}
    if rule in ("no_less", "no_more"):
        below, above = robust.one_sided_p(x, -margin if rule == "no_less" else margin)
        sup, con = (above, below) if rule == "no_less" else (below, above)
        return {"p_supported": sup, "p_contradicted": con, "p_absent": nan}
    if rule == "equivalent":
        below_lo, above_lo = robust.one_sided_p(x, -margin)
        below_hi, above_hi = robust.one_sided_p(x, margin)
        return {"p_supported": max(above_lo, below_hi), "p_contradicted": min(below_lo, above_hi),
                "p_absent": nan}
    raise ValueError(f"unknown rule {rule!r}; valid: {', '.join(RULES)}")
