"""The ledger's adjusted verdicts: Holm's step-down correction over a study's measured test rows.

A study's ledger is a family of 20-40 intervals, each read at level ``1 - alpha`` (``ci``,
0.95 by default); without a correction some decisive verdicts are expected by chance alone.
Each measured row gets the p-value of its own rule's decision (:func:`rule_p_value`), chosen so
that the per-row verdict is decisive exactly when ``p < alpha``:

- ``less`` / ``more``: the two one-sided tests of the mean effect against 0 that the row's
  interval implies (:func:`bnstudy.claims.decide.skew.one_sided_p`: the larger of the paired
  t-test's and Hall's skewness-corrected one's), one per decisive verdict (``supported``: the
  interval lies below 0 for ``less``; ``not supported``: it lies above), each at ``alpha / 2`` as
  the two-sided interval implies; the row's p-value is ``2 min(p_supported, p_not_supported)``;
- ``no_less`` / ``no_more``: the same against the margin point ``-margin`` / ``+margin``;
- ``equivalent``: TOST for ``supported`` (``p_supported = max`` of the one-sided tests that
  the mean exceeds ``-margin`` and lies below ``+margin``) and the one-sided test beyond the
  nearer margin for ``not supported``; again ``p = 2 min(...)``.

The p-values of the study's measured rows whose role is not ``implementation check`` (those hold
by construction and test the measurement, not a paper) are adjusted together by Holm's
step-down method (Holm 1979; :func:`holm`, the arithmetic of
``statsmodels.stats.multitest.multipletests(method="holm")``, which its tests compare with),
which controls the family-wise error rate at ``alpha`` under any dependence between rows. A
row's ``adjusted_verdict`` is its verdict where the adjusted p-value is below ``alpha`` and
``inconclusive`` otherwise (the direction cannot change: the adjusted p-value is a multiple of
the row's own). Rows without a p-value (fewer than two seeds, not measured, Dannemann's exact
computation) are not in the family and keep their verdict.

A row read at a sequential look (``interval_level`` below ``level``: its experiment added seeds
in replication rounds, :mod:`bnstudy.claims.decide.sequential`) enters the family with its p-value
scaled by ``alpha / alpha_k`` (capped at 1): decisive exactly when its own look's interval is,
and a valid p-value whatever look the study stopped at (the union bound over the planned looks),
so Holm's guarantee holds over rounds too.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bnstudy.claims.decide import outcomes as O
from bnstudy.claims.decide import skew as sk

FAMILY_EXCLUDED_ROLES = ("implementation check",)


def holm(p) -> np.ndarray:
    """Holm's step-down adjusted p-values of ``p``, in its order: the ``i``-th smallest (from 0)
    of ``m`` times ``m - i``, the running maximum of those, capped at 1. The same arithmetic as
    statsmodels' ``multipletests(method="holm")``, without its ``gc.collect()`` on every call: a
    full garbage collection, 0.13 s in a process holding torch, on every ledger (each claims
    job, each replication round, each ledger a test computes). Over one p-value: that
    p-value."""
    p = np.asarray(p, dtype=float)
    order = np.argsort(p)
    adjusted = np.maximum.accumulate(p[order] * np.arange(len(p), 0, -1))
    adjusted[adjusted > 1] = 1
    out = np.empty_like(adjusted)
    out[order] = adjusted
    return out


def rule_p_value(rule: str, effect: float, sd: float, n: int, margin: float,
                 skew: float = 0.0) -> float:
    """The p-value of ``rule``'s decision on a paired effect with mean ``effect``, standard
    deviation ``sd`` and sample skewness ``skew`` over ``n`` seeds: the verdict at level
    ``1 - alpha`` is decisive iff it is below ``alpha``. NaN with fewer than two seeds or a
    non-finite mean or spread."""
    if n is None or pd.isna(n) or n < 2 or not (np.isfinite(effect) and np.isfinite(sd)):
        return float("nan")
    n = int(n)
    g = float(skew) if skew is not None and np.isfinite(skew) else 0.0
    if rule in ("less", "more", "no_less", "no_more"):
        c = {"less": 0.0, "more": 0.0, "no_less": -margin, "no_more": margin}[rule]
        below, above = sk.one_sided_p(float(effect), float(sd), g, n, c)
        return min(1.0, 2.0 * min(below, above))
    if rule == "equivalent":
        below_lo, above_lo = sk.one_sided_p(float(effect), float(sd), g, n, -margin)
        below_hi, above_hi = sk.one_sided_p(float(effect), float(sd), g, n, margin)
        p_supported = max(above_lo, below_hi)  # TOST
        p_not = min(below_lo, above_hi)
        return min(1.0, 2.0 * min(p_supported, p_not))
    raise ValueError(f"unknown rule {rule!r}; valid: less, more, no_less, no_more, equivalent")


P_COLUMNS = {"p_supported": O.SUPPORTED, "p_contradicted": O.CONTRADICTED,
             "p_absent": O.ABSENT}


def _row_p(r, rule) -> tuple[float, dict]:
    """A row's p-value (twice the smallest of its outcomes' one-sided p-values, the rule's own:
    :func:`bnstudy.claims.decide.rules.outcome_p`) and those one-sided p-values by outcome; a row
    without them (an older ledger) gets the t part's :func:`rule_p_value` alone."""
    own = {O_: float(r[c]) for c, O_ in P_COLUMNS.items()
           if c in r and r[c] is not None and pd.notna(r[c])}
    if own:
        return min(1.0, 2.0 * min(own.values())), own
    p = float("nan") if rule is None or "effect" not in r else rule_p_value(
        rule[0], r.get("effect_mean", r.get("effect", np.nan)), r.get("effect_sd", np.nan),
        r.get("n_seeds", np.nan), rule[1], r.get("effect_skew", 0.0))
    return p, {}


def adjusted_outcome(verdict: str, own: dict, factor: float, alpha: float) -> str:
    """The outcome a row keeps after the adjustment: each of its outcomes' one-sided p-values
    (``own``) times ``factor`` (Holm's multiplier times the look's scaling) against
    ``alpha / 2``; supported before contradicted before absent (an absent p-value can decide a
    row whose contradicted one does not survive); both directions at once is undecided. A row
    without ``own`` keeps its verdict where ``factor``-scaled p passes, as before."""
    passed = [o for o in (O.SUPPORTED, O.CONTRADICTED, O.ABSENT)
              if o in own and own[o] * factor < alpha / 2]
    if O.SUPPORTED in passed and O.CONTRADICTED in passed:
        return O.UNDECIDED
    return passed[0] if passed else O.UNDECIDED


def adjust(ledger: pd.DataFrame, level: float, rules: dict[str, tuple[str, float]]) -> pd.DataFrame:
    """``ledger`` with ``p_value``, ``p_adjusted`` (Holm over the family) and ``adjusted_verdict``;
    ``rules`` maps a claim id to its (rule, margin)."""
    alpha = 1.0 - level
    out = ledger.copy()
    if "verdict" in out:
        out["verdict"] = [O.outcome(v) if isinstance(v, str) else v for v in out["verdict"]]
    p, owns = [], []
    for _, r in out.iterrows():
        pv, own = _row_p(r, rules.get(r["claim_id"]))
        p.append(pv)
        owns.append(own)
    scale = np.ones(len(out))
    if "interval_level" in out:  # sequential looks: p scaled by alpha / alpha_k
        own_level = pd.to_numeric(out["interval_level"], errors="coerce").fillna(level).to_numpy()
        scale = alpha / np.maximum(1.0 - own_level, 1e-300)
    out["p_value"] = np.minimum(1.0, np.asarray(p, dtype=float) * scale)
    role = out["role"] if "role" in out else pd.Series("test", index=out.index)
    family = out["p_value"].notna() & ~role.isin(FAMILY_EXCLUDED_ROLES)
    out["p_adjusted"] = np.nan
    if family.any():
        out.loc[family, "p_adjusted"] = holm(out.loc[family, "p_value"].to_numpy())
    adjusted = []
    for k, (i, r) in enumerate(out.iterrows()):
        v = r["verdict"]
        if not family[i] or v not in O.DECIDED and not owns[k]:
            adjusted.append(v)
            continue
        if not owns[k]:  # an older ledger's row: its verdict, where the adjusted p passes
            adjusted.append(v if r["p_adjusted"] < alpha else O.UNDECIDED)
            continue
        holm_factor = r["p_adjusted"] / r["p_value"] if r["p_value"] > 0 else 1.0
        adjusted.append(adjusted_outcome(v, owns[k], scale[k] * max(holm_factor, 1.0), alpha))
    out["adjusted_verdict"] = adjusted
    return out
