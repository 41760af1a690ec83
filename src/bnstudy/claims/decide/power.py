"""Power in every ledger row: how many seeds the row would need, and what the current seeds resolve.

A row's verdict is decisive when its interval at its own level (``interval_level``: the study's
``ci``, or its replication look's ``1 - alpha_k``) clears the rule's boundary (0, or the margin:
:mod:`bnstudy.claims.decide.rules`), and it survives the multiplicity adjustment when its p-value
also clears Holm's threshold at its rank in the study's family
(:mod:`bnstudy.claims.decide.multiplicity`): ``alpha_k / (m - j + 1)`` for the ``j``-th smallest of
``m`` p-values. That is the **level used** (``power_level`` = 1 minus it; the row's own level for a
row outside the family), and the power columns are computed at it, as the one-sided paired t-test
towards the boundary at half of it. The distance that matters is the effect's distance from the
nearer boundary (:func:`distance`: ``|effect|`` for ``less`` / ``more``, ``|effect -+ margin|`` for
``no_more`` / ``no_less``, ``|margin - |effect||`` for ``equivalent``). With the paired differences'
standard deviation ``sd``:

- ``seeds_needed``: the smallest number of seeds ``n >= 2`` at which that test has 80% power
  (:data:`POWER`) for a true effect at the observed distance and spread,
  ``statsmodels.stats.power.TTestPower`` (paired = one-sample t on the differences). The
  observed ``d = distance / sd`` is noisy (a near-zero effect gives anything from tens to tens of
  thousands of seeds), so ``seeds_needed_low`` and ``seeds_needed_high`` give the seeds needed at
  the ends of the 90% confidence interval of ``d`` (the noncentral t interval of the observed
  t statistic); ``seeds_needed_high`` is infinite where that interval reaches the boundary.
  Infinite where the effect sits on the boundary (or beyond :data:`MAX_SEEDS`). A planning
  figure for normal differences: the ledger's interval is a little wider on skewed ones
  (:mod:`bnstudy.claims.decide.skew`), and a sequential row's later looks use their own levels;
- ``detectable_effect``: the smallest distance from the boundary that the current ``n`` seeds
  resolve with 80% power at the observed spread and the level used (in the effect's units).

All are NaN with fewer than two seeds or no spread estimate.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from bnstudy import lazy
from bnstudy.claims.decide import multiplicity

stats = lazy.module("scipy.stats")
smpower = lazy.module("statsmodels.stats.power")  # imported on first use (start-up cost)

POWER = 0.8
MAX_SEEDS = 100_000


def distance(rule: str, effect: float, margin: float) -> float:
    """The effect's distance from the nearer boundary of ``rule`` (margin ``margin``)."""
    if rule in ("less", "more"):
        return abs(effect)
    if rule == "no_less":
        return abs(effect + margin)
    if rule == "no_more":
        return abs(effect - margin)
    if rule == "equivalent":
        return abs(margin - abs(effect))
    raise ValueError(f"unknown rule {rule!r}; valid: less, more, no_less, no_more, equivalent")


def _power(d: float, n: int, alpha: float) -> float:
    return float(smpower.TTestPower().power(effect_size=d, nobs=n, alpha=alpha / 2,
                                            alternative="larger"))


def seeds_needed(rule: str, effect: float, sd: float, margin: float, level: float) -> float:
    """Seeds for 80% power at the observed ``effect`` and ``sd`` and the two-sided ``level``
    (see the module docstring)."""
    if not (np.isfinite(effect) and np.isfinite(sd)):
        return float("nan")
    dist = distance(rule, effect, margin)
    if dist == 0:
        return float("inf")
    if sd == 0:
        return 2.0
    return seeds_for(dist / sd, level)


def seeds_for(d: float, level: float) -> float:
    """The smallest ``n >= 2`` at which the one-sided t-test at ``(1 - level) / 2`` has 80%
    power for a standardized distance ``d`` (inf at 0 or beyond :data:`MAX_SEEDS`)."""
    d, alpha = abs(float(d)), 1.0 - level
    if not d > 0:
        return float("inf")
    lo, hi = 2, 2
    while _power(d, hi, alpha) < POWER:  # doubling, then bisection on the integer n
        lo, hi = hi, 2 * hi
        if hi > MAX_SEEDS:
            return float("inf")
    if hi == 2:
        return 2.0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if _power(d, mid, alpha) >= POWER else (mid, hi)
    return float(hi)


def d_interval(dist: float, sd: float, n: int, coverage: float = 0.9) -> tuple[float, float]:
    """The ``coverage`` confidence interval of the standardized distance ``dist / sd`` from ``n``
    paired seeds: the noncentral-t interval of the observed t statistic ``sqrt(n) dist / sd``
    (the lower end clipped at 0)."""
    from scipy.optimize import brentq

    t, df, tail = np.sqrt(n) * dist / sd, n - 1, (1 - coverage) / 2
    if not t < 1e3:  # beyond the noncentral t's numerics: its normal approximation
        z, se = stats.norm.ppf(1 - tail), np.sqrt(1 / n + (dist / sd) ** 2 / (2 * df))
        return max(0.0, dist / sd - z * se), dist / sd + z * se

    def at(p):  # the noncentrality whose cdf at t is p (decreasing in the noncentrality)
        f = lambda nc: stats.nct.cdf(t, df, nc) - p  # noqa: E731
        if f(0.0) < 0:
            return 0.0
        hi = t + 10.0 + 2 * abs(t)
        while f(hi) > 0:
            hi *= 2
        return brentq(f, 0.0, hi)

    return at(1 - tail) / np.sqrt(n), at(tail) / np.sqrt(n)


def detectable_effect(sd: float, n: int, level: float) -> float:
    """The smallest distance from the boundary that ``n`` seeds resolve with 80% power."""
    if n is None or pd.isna(n) or n < 2 or not np.isfinite(sd):
        return float("nan")
    d = smpower.TTestPower().solve_power(effect_size=None, nobs=int(n),
                                         alpha=(1.0 - level) / 2, power=POWER,
                                         alternative="larger")
    return float(d) * sd


def used_levels(ledger: pd.DataFrame, level: float,
                rules: dict[str, tuple[str, float]]) -> pd.Series:
    """Each row's level after the multiplicity adjustment (see the module docstring): ``1 -
    alpha_k / (m - j + 1)`` in the family, its own ``interval_level`` (or ``level``) outside."""
    own = (pd.to_numeric(ledger["interval_level"], errors="coerce").fillna(level)
           if "interval_level" in ledger else pd.Series(level, index=ledger.index))
    adj = multiplicity.adjust(ledger, level, rules) if "verdict" in ledger else None
    if adj is None:
        return own
    role = adj["role"] if "role" in adj else pd.Series("test", index=adj.index)
    family = adj["p_value"].notna() & ~role.isin(multiplicity.FAMILY_EXCLUDED_ROLES)
    m = int(family.sum())
    rank = adj.loc[family, "p_value"].rank(method="first")  # j = 1 for the smallest p
    out = own.copy()
    out[family] = 1.0 - (1.0 - own[family]) / (m - rank + 1)
    return out


def margin_seeds(rule: str, effect: float, sd: float, margin: float, level: float) -> float:
    """Seeds for 80% power against the other boundary of a directional rule with a margin:
    the distance of the effect from the margin point (``-margin`` for ``less``, ``+margin`` for
    ``more``), where *absent at this setting* is decided; NaN for other rules or no margin."""
    if rule not in ("less", "more") or not margin > 0:
        return math.nan
    point = -margin if rule == "less" else margin
    return seeds_needed("no_more", effect - point, sd, 0.0, level)


def add_columns(ledger: pd.DataFrame, level: float,
                rules: dict[str, tuple[str, float]]) -> pd.DataFrame:
    """``ledger`` with ``power_level``, ``seeds_needed`` (and its ``_low`` / ``_high`` range)
    and ``detectable_effect`` for every measured row."""
    out = ledger.copy()
    used = used_levels(out, level, rules)
    cols = {c: [] for c in ("power_level", "seeds_needed", "seeds_needed_low",
                            "seeds_needed_high", "seeds_needed_margin", "detectable_effect")}
    for i, r in out.iterrows():
        rule, n = rules.get(r["claim_id"]), r.get("n_seeds", np.nan)
        eff = r.get("effect_mean", r.get("effect", np.nan))
        eff = r.get("effect", np.nan) if eff is None or pd.isna(eff) else eff
        sd = r.get("effect_sd", np.nan)
        if rule is None or pd.isna(n) or n < 2:
            for v in cols.values():
                v.append(math.nan)
            continue
        lv = float(used[i])
        need = seeds_needed(rule[0], eff, sd, rule[1], lv)
        low = high = need
        if np.isfinite(eff) and np.isfinite(sd) and sd > 0:
            d_lo, d_hi = d_interval(distance(rule[0], eff, rule[1]), sd, int(n))
            low, high = seeds_for(d_hi, lv), seeds_for(d_lo, lv)
        cols["power_level"].append(lv)
        cols["seeds_needed"].append(need)
        cols["seeds_needed_low"].append(low)
        cols["seeds_needed_high"].append(high)
        cols["seeds_needed_margin"].append(margin_seeds(rule[0], eff, sd, rule[1], lv))
        cols["detectable_effect"].append(detectable_effect(sd, int(n), lv))
    for c, v in cols.items():
        out[c] = v
    return out
