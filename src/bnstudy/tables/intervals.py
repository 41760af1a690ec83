"""The one interval over seeds: the Student-t confidence interval of a mean, as the report's
tables (:func:`summarize`, :func:`format_mean_ci`), the figures' bands and the claims ledger use
it (:func:`t_half_width`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bnstudy import lazy
from bnstudy.tables.layout import GROUP

# scipy.stats takes most of a second to import; only the confidence intervals need it, not the
# aggregate verb nor the workflow planner (which imports the figure registry).
stats = lazy.module("scipy.stats")

def t_half_width(sd, n: int, level: float):
    """The half-width of the two-sided Student-t confidence interval at ``level`` of a mean of
    ``n`` values with standard deviation ``sd`` (the one interval the tables, figures, the
    claims ledger and the sequential simulation use): a float, or an array for an array of
    ``sd`` (one per simulated study)."""
    half = stats.t.ppf(0.5 + level / 2, n - 1) * np.asarray(sd, dtype=float) / np.sqrt(n)
    return float(half) if np.ndim(half) == 0 else half


def mean_ci(values, level: float = 0.95) -> tuple[float, float, float, int]:
    """Mean, and the half-width of the Student-t confidence interval, over finite values."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    n = len(v)
    if n == 0:
        return float("nan"), float("nan"), float("nan"), 0
    m = float(v.mean())
    if n == 1:
        return m, float("nan"), float("nan"), 1
    half = t_half_width(float(v.std(ddof=1)), n, level)
    return m, m - half, m + half, n


def summarize(df: pd.DataFrame, columns: list[str], by: list[str] | None = None,
              level: float = 0.95) -> pd.DataFrame:
    """Long table: one row per group and column with mean, CI bounds and number of seeds."""
    by = by or [c for c in GROUP if c in df.columns]
    rows = []
    for key, g in df.groupby(by, sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        for col in columns:
            m, lo, hi, n = mean_ci(g[col], level)
            ids = dict(zip(by, key, strict=True))
            rows.append({**ids, "quantity": col, "mean": m, "ci_low": lo, "ci_high": hi, "n": n,
                         "n_runs": len(g)})
    return pd.DataFrame(rows)


def format_mean_ci(row) -> str:
    """'mean ± half-width' with the half-width at two significant figures and the mean to the
    same decimal place (digits beyond the interval's precision say nothing): 9.808e-05 ±
    0.00038 prints as '0.00010 ± 0.00038'; very large or small values share an exponent."""
    m = row["mean"]
    if not np.isfinite(m):
        return "n/a"
    half = (row["ci_high"] - row["ci_low"]) / 2
    if not (np.isfinite(half) and half > 0):
        return f"{m:.4g}"
    last = int(np.floor(np.log10(half))) - 1  # decimal exponent of half's 2nd significant digit
    half = round(half, -last)
    top = max(abs(m), half)
    if -6 <= last <= 0 and top < 1e6:
        d = -last
        return f"{m:.{d}f} ± {half:.{d}f}"
    k = int(np.floor(np.log10(top)))
    d = max(k - last, 0)
    return f"({m / 10.0**k:.{d}f} ± {half / 10.0**k:.{d}f})e{k:+03d}"
