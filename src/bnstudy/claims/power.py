"""Power in every ledger row: how many seeds the row would need, and what the current seeds resolve.

A row's verdict is decisive when its ``1 - alpha`` Student-t interval over the paired per-seed
effects clears the rule's boundary (0, or the margin: :mod:`bnstudy.claims.rules`), i.e. when
the one-sided paired t-test towards that boundary rejects at ``alpha / 2``. The distance that
matters is the effect's distance from the nearer boundary (:func:`distance`: ``|effect|`` for
``less`` / ``more``, ``|effect -+ margin|`` for ``no_more`` / ``no_less``, ``|margin - |effect||``
for ``equivalent``). With the paired differences' standard deviation ``sd``:

- ``seeds_needed``: the smallest number of seeds ``n >= 2`` at which that one-sided test has
  80% power (:data:`POWER`) for a true effect at the observed distance and spread,
  ``statsmodels.stats.power.TTestPower`` (paired = one-sample t on the differences). A planning
  estimate: the observed effect and spread stand in for the true ones (an optimistic guess when
  the effect is noisy), at the row's own level before the multiplicity adjustment
  (:mod:`bnstudy.claims.multiplicity` makes an adjusted verdict need somewhat more); for
  ``equivalent`` at ``|effect| < margin`` it is the power against the nearer margin (TOST needs
  both, a little more where the two margins are close in ``sd`` units). Infinite where the
  effect sits on the boundary (distance 0, or beyond :data:`MAX_SEEDS`);
- ``detectable_effect``: the smallest distance from the boundary that the current ``n`` seeds
  resolve with 80% power at the observed spread (in the effect's units).

Both are NaN with fewer than two seeds or no spread estimate.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from bnstudy import lazy

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
    """Seeds for 80% power at the observed ``effect`` and ``sd`` (see the module docstring)."""
    if not (np.isfinite(effect) and np.isfinite(sd)):
        return float("nan")
    dist = distance(rule, effect, margin)
    if dist == 0:
        return float("inf")
    if sd == 0:
        return 2.0
    d, alpha = dist / sd, 1.0 - level
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


def detectable_effect(sd: float, n: int, level: float) -> float:
    """The smallest distance from the boundary that ``n`` seeds resolve with 80% power."""
    if n is None or pd.isna(n) or n < 2 or not np.isfinite(sd):
        return float("nan")
    d = smpower.TTestPower().solve_power(effect_size=None, nobs=int(n),
                                         alpha=(1.0 - level) / 2, power=POWER,
                                         alternative="larger")
    return float(d) * sd


def add_columns(ledger: pd.DataFrame, level: float,
                rules: dict[str, tuple[str, float]]) -> pd.DataFrame:
    """``ledger`` with ``seeds_needed`` and ``detectable_effect`` for every measured row."""
    out = ledger.copy()
    need, detect = [], []
    for _, r in out.iterrows():
        rule, n = rules.get(r["claim_id"]), r.get("n_seeds", np.nan)
        eff, sd = r.get("effect", np.nan), r.get("effect_sd", np.nan)
        if rule is None or pd.isna(n) or n < 2:
            need.append(math.nan)
            detect.append(math.nan)
            continue
        need.append(seeds_needed(rule[0], eff, sd, rule[1], level))
        detect.append(detectable_effect(sd, int(n), level))
    out["seeds_needed"] = need
    out["detectable_effect"] = detect
    return out
