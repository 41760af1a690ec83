"""The ledger's decision rule on paired differences: a Bonferroni split fixed before any data.

A row's paired per-seed differences are decided by two tests, each at half the row's level,
and the row is decided when either decides (Bonferroni keeps the pair at the row's level):

- the skewness-corrected t interval of their **mean** (:func:`bnstudy.claims.decide.skew.bounds`, at
  level ``1 - alpha / 2``), the rule the ledger used alone until issue 46: powerful at few seeds
  on well-behaved differences;
- the exact **Wilcoxon signed-rank** interval of their **Hodges-Lehmann shift** (the median of
  the Walsh averages ``(d_i + d_j) / 2``, ``i <= j``), at level ``1 - alpha / 2``: its ends are
  order statistics of the Walsh averages read at the quantiles of the exact signed-rank
  distribution (:func:`walsh_bounds`), so one seed that blows up moves it by one rank, not by
  its size. Exact at any seed count (its attained level is at or above the nominal one).

The row's interval is the **intersection** of the two (:func:`bounds`): its lower end lies above
a point ``c`` exactly when either test rejects "the effect is at most ``c``" at its half level,
so every verdict read from it (:mod:`bnstudy.claims.decide.rules`) is the combination's decision,
and the ledger's ``effect`` is the Hodges-Lehmann estimate (the mean stays as ``effect_mean``).
Both parts estimate the same point when the differences are symmetric; on skewed differences
the mean and the pseudo-median differ, and a decision then says that one of them lies beyond
the boundary. :func:`one_sided_p` gives the combination's p-values, consistent with the
interval (:mod:`bnstudy.claims.decide.multiplicity`). Why this rule, and its simulated error rates:
the simulation tests (``tests/test_robust_rule.py``) and ``/work/notes/issue46.md``.
"""

from __future__ import annotations

import functools

import numpy as np

from bnstudy.claims.decide import skew as sk

MAX_EXACT = 200  # seeds up to which the signed-rank distribution is computed exactly


@functools.cache
def _upper_tail(n: int) -> np.ndarray:
    """``P(W+ >= t)`` for ``t = 0 .. n (n + 1) / 2`` under the null (no ties): the exact
    signed-rank distribution by counting subsets of ``{1..n}`` by their sum."""
    if n > MAX_EXACT:
        raise ValueError(f"{n} paired seeds exceed the exact signed-rank limit {MAX_EXACT}")
    counts = np.zeros(n * (n + 1) // 2 + 1)
    counts[0] = 1.0
    for k in range(1, n + 1):
        counts[k:] = counts[k:] + counts[:-k].copy()
    pmf = counts / 2.0 ** n
    return np.minimum(1.0, np.cumsum(pmf[::-1])[::-1])


def critical(n: int, alpha_side: float) -> int:
    """The smallest count ``t`` with ``P(W+ >= t) < alpha_side``; ``n (n + 1) / 2 + 1`` (never)
    where even all-positive differences do not reach it."""
    tail = _upper_tail(int(n))
    hit = np.nonzero(tail < alpha_side)[0]
    return int(hit[0]) if len(hit) else len(tail)


def walsh(x) -> np.ndarray:
    """The sorted Walsh averages of the last axis of ``x`` (one row per simulated study)."""
    x = np.asarray(x, dtype=float)
    i, j = np.triu_indices(x.shape[-1])
    return np.sort((x[..., i] + x[..., j]) / 2.0, axis=-1)


def hodges_lehmann(x) -> float | np.ndarray:
    """The Hodges-Lehmann estimate: the median of the Walsh averages."""
    w = walsh(x)
    out = np.median(w, axis=-1) if w.shape[-1] else np.full(w.shape[:-1], np.nan)
    return float(out) if np.ndim(out) == 0 else out


def walsh_bounds(x, level):
    """The exact signed-rank interval at ``level`` (two-sided) of the shift of ``x``'s last
    axis: the ``t``-th smallest and largest Walsh averages, ``t`` :func:`critical` at
    ``(1 - level) / 2``; infinite where no count reaches it (too few seeds)."""
    x = np.asarray(x, dtype=float)
    n = x.shape[-1]
    w = walsh(x)
    t = critical(n, (1.0 - np.asarray(level, dtype=float)) / 2) if n else 1
    m = w.shape[-1]
    if t > m or n == 0:
        shape = w.shape[:-1]
        lo, hi = np.full(shape, -np.inf), np.full(shape, np.inf)
    else:
        lo, hi = w[..., m - t], w[..., t - 1]
    if np.ndim(lo) == 0:
        return float(lo), float(hi)
    return lo, hi


def bounds(x, level):
    """The rule's interval at ``level`` on the differences ``x`` (finite values, last axis):
    the intersection of the skew-corrected t interval and the exact signed-rank one, each at
    ``1 - (1 - level) / 2``. ``(nan, nan)`` with fewer than two values; an empty intersection
    (the two parts disagree) is returned as it is (``lo > hi``): no verdict reads it as
    decisive in both directions, :func:`bnstudy.claims.decide.rules.verdict` calls it undecided."""
    x = np.asarray(x, dtype=float)
    n = x.shape[-1]
    half = 1.0 - (1.0 - np.asarray(level, dtype=float)) / 2
    if n < 2:
        shape = x.shape[:-1]
        nan = np.full(shape, np.nan)
        return (float("nan"),) * 2 if not shape else (nan, nan.copy())
    mean = x.mean(axis=-1)
    sd = x.std(axis=-1, ddof=1)
    d = x - mean[..., None]
    m2 = (d * d).mean(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        g = np.where(m2 > 0, (d ** 3).mean(axis=-1) / np.maximum(m2, 1e-300) ** 1.5, 0.0)
    if n < 3:
        g = np.zeros_like(g)
    t_lo, t_hi = sk.bounds(mean, sd, g, n, half)
    w_lo, w_hi = walsh_bounds(x, half)
    lo, hi = np.maximum(t_lo, w_lo), np.minimum(t_hi, w_hi)
    if np.ndim(lo) == 0:
        return float(lo), float(hi)
    return lo, hi


def walsh_p(x, c: float) -> tuple[float, float]:
    """(p that the shift lies below ``c``, p that it lies above ``c``): the exact one-sided
    signed-rank p-values of ``x - c``, counting the Walsh averages strictly beyond ``c`` (ties
    count against the test), consistent with :func:`walsh_bounds`."""
    x = np.asarray(x, dtype=float)
    n = len(x)
    if n == 0:
        return 1.0, 1.0
    w = walsh(x)
    tail = _upper_tail(n)
    return float(tail[int((w < c).sum())]), float(tail[int((w > c).sum())])


def one_sided_p(x, c: float) -> tuple[float, float]:
    """(p below ``c``, p above ``c``) of the combination: twice the smaller of the t part's
    (:func:`bnstudy.claims.decide.skew.one_sided_p`) and the signed-rank part's, capped at 1, so
    that ``p_above(c) < alpha / 2`` exactly when :func:`bounds`' lower end at ``1 - alpha`` lies
    above ``c`` (up to the t part's numerics)."""
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    n = len(x)
    if n < 2:
        return float("nan"), float("nan")
    g = sk.sample_skew(x) if n >= 3 else 0.0
    sd = float(x.std(ddof=1))
    if sd > 0:
        t_below, t_above = sk.one_sided_p(float(x.mean()), sd, g, n, c)
    else:
        t_below, t_above = (float(x.mean() >= c), float(x.mean() <= c))
    w_below, w_above = walsh_p(x, c)
    return min(1.0, 2 * min(t_below, w_below)), min(1.0, 2 * min(t_above, w_above))


def one_sided_p_many(x, c: float) -> tuple[np.ndarray, np.ndarray]:
    """:func:`one_sided_p` for each row of ``x`` (simulated studies, all values finite, at least
    three per row): arrays ``(p below c, p above c)``."""
    x = np.asarray(x, dtype=float)
    n = x.shape[-1]
    mean = x.mean(axis=-1)
    sd = np.maximum(x.std(axis=-1, ddof=1), 1e-300)
    d = x - mean[..., None]
    m2 = (d * d).mean(axis=-1)
    g = np.where(m2 > 0, (d ** 3).mean(axis=-1) / np.maximum(m2, 1e-300) ** 1.5, 0.0)
    t = (mean - c) / (sd / np.sqrt(n))
    h = sk.transform(t, g, n)
    t_below = np.maximum(sk.stats.t.cdf(t, n - 1), sk.stats.t.cdf(h, n - 1))
    t_above = np.maximum(sk.stats.t.sf(t, n - 1), sk.stats.t.sf(h, n - 1))
    w = walsh(x)
    tail = _upper_tail(n)
    w_below, w_above = tail[(w < c).sum(axis=-1)], tail[(w > c).sum(axis=-1)]
    return (np.minimum(1.0, 2 * np.minimum(t_below, w_below)),
            np.minimum(1.0, 2 * np.minimum(t_above, w_above)))
