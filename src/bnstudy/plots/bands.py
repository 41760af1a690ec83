"""Seed bands in each quantity's own geometry.

A Student-t interval of the arithmetic mean over 3 seeds (t = 4.30) easily reaches below zero;
drawn on a log axis such a band fills to the panel's bottom and hides the lines, and a band of a
cosine can run outside [-1, 1]. :func:`band` picks the estimator and the interval from where
the quantity lives:

- a positive quantity spanning more than ``ratio`` (drawn on a log axis): the geometric mean
  and the exponentiated Student-t interval of ``log(value)`` (values that are not positive
  cannot sit on a log axis and are left out);
- a bounded quantity (``bounds=(a, b)``: a cosine in [-1, 1], an accuracy or a fraction in
  [0, 1]): the mean, and the Student-t interval of ``atanh`` of the value mapped to (-1, 1),
  mapped back (Fisher's z for a correlation-like cosine; for [0, 1] it is the logit's
  interval, up to a factor of 2), so the band stays inside the bounds;
- otherwise: the mean and its Student-t interval (:func:`bnstudy.plots.style.seed_ci`).
"""

from __future__ import annotations

import numpy as np

from bnstudy.tables.intervals import mean_ci

GEOMETRY = ("on a log axis the line is the geometric mean over seeds and the band the 95% "
            "Student-t CI of the log, exponentiated; a cosine's or a fraction's band is the CI "
            "on Fisher's z scale, mapped back, so every band stays in its quantity's range")
EDGE = 1e-6  # how close to a bound a mapped value may come (atanh is infinite at +-1)


def _finite(values) -> np.ndarray:
    v = np.asarray(values, dtype=float)
    return v[np.isfinite(v)]


def geo_mean(values) -> float:
    """exp(mean(log v)) over the positive finite values."""
    v = _finite(values)
    v = v[v > 0]
    return float(np.exp(np.log(v).mean())) if len(v) else float("nan")


def log_ci(values) -> tuple[float, float]:
    """The Student-t interval of log(v), exponentiated (positive finite values)."""
    v = _finite(values)
    v = v[v > 0]
    m, lo, hi, n = mean_ci(np.log(v))
    if n == 0:
        return float("nan"), float("nan")
    return (float(np.exp(m)),) * 2 if n == 1 else (float(np.exp(lo)), float(np.exp(hi)))


def bounded_ci(low: float, high: float):
    """An errorbar callable: the interval of atanh(v mapped to (-1, 1)), mapped back."""

    def ci(values) -> tuple[float, float]:
        v = _finite(values)
        u = np.clip(2 * (v - low) / (high - low) - 1, -1 + EDGE, 1 - EDGE)
        m, lo, hi, n = mean_ci(np.arctanh(u))
        if n == 0:
            return float("nan"), float("nan")
        if n == 1:
            lo = hi = m
        back = [low + (np.tanh(z) + 1) * (high - low) / 2 for z in (lo, hi)]
        return float(back[0]), float(back[1])

    return ci


def band(values, *, bounds: tuple[float, float] | None = None,
         ratio: float = 50.0) -> tuple[dict, bool]:
    """seaborn's ``estimator``/``errorbar`` for ``values`` in their geometry, and whether
    their axis is logarithmic: no negative values, and the positive ones spanning more than
    ``ratio`` (zeros, which a log axis cannot show, left out; ``ratio=0``: any quantity whose
    values are all positive)."""
    from bnstudy.plots.style import seed_ci

    if bounds is not None:
        return {"estimator": "mean", "errorbar": bounded_ci(*bounds)}, False
    v = _finite(values)
    pos = v[v > 0]
    if (len(pos) and (v >= 0).all() and (len(pos) == len(v) or ratio > 0)
            and pos.max() / pos.min() > ratio):
        return {"estimator": geo_mean, "errorbar": log_ci}, True
    return {"estimator": "mean", "errorbar": seed_ci}, False
