"""Monte Carlo of the sequential rule (:mod:`bnstudy.claims.sequential`): the verdicts it reaches
on simulated paired differences, normal or skewed, and where it stops. The error and power
rates that module's docstring gives come from :func:`simulate`; the tests check them."""

from __future__ import annotations

import numpy as np

from bnstudy.claims import skew as sk
from bnstudy.claims.rules import RULES
from bnstudy.claims.sequential import DEFAULT_SPENDING, check_rounds, look_alphas, verdict_codes


def boundary(rule: str, margin: float) -> float:
    """A true effect exactly on the rule's null boundary (the upper one for ``equivalent``)."""
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; valid: {', '.join(RULES)}")
    return {"less": 0.0, "more": 0.0, "no_less": -margin}.get(rule, float(margin))


DISTS = ("normal", "t3", "exponential", "-exponential", "lognormal", "-lognormal")


def draw(dist: str, rng, size) -> np.ndarray:
    """Standardized draws (mean 0, sd 1) of ``dist``: normal, Student t with 3 degrees of
    freedom (symmetric, heavy-tailed), centred exponential (skewness 2) or lognormal (sigma 1,
    skewness 6.2); a leading ``-`` mirrors it (negative skew)."""
    if dist not in DISTS:
        raise ValueError(f"unknown dist {dist!r}; valid: {', '.join(DISTS)}")
    sign, name = (-1.0, dist[1:]) if dist.startswith("-") else (1.0, dist)
    if name == "normal":
        return rng.normal(size=size)
    if name == "t3":
        return rng.standard_t(3, size=size) / np.sqrt(3.0)
    if name == "exponential":
        return sign * (rng.exponential(size=size) - 1.0)
    m, v = np.exp(0.5), (np.e - 1.0) * np.e
    return sign * (rng.lognormal(0.0, 1.0, size=size) - m) / np.sqrt(v)


def simulate(rule: str, effect: float, sd: float, rounds, margin: float = 0.0,
             level: float = 0.95, spending: str = DEFAULT_SPENDING, reps: int = 20_000,
             seed: int = 0, dist: str = "normal") -> dict:
    """Monte Carlo of the sequential policy on paired differences of mean ``effect`` and standard
    deviation ``sd``, distributed as ``dist`` (:func:`draw`): the rates of each final verdict,
    the rate of stopping at each look, and the expected seeds used (the stopping look's count;
    the last round's when never decided). Vectorized; deterministic in ``seed``."""
    rounds = check_rounds(rounds)
    alphas = look_alphas(rounds, level, spending)
    x = effect + sd * draw(dist, np.random.default_rng(seed), (reps, rounds[-1]))
    s1, s2, s3 = (np.cumsum(x ** p, axis=1) for p in (1, 2, 3))
    code = np.zeros(reps, dtype=int)
    used = np.full(reps, rounds[-1])
    stop_at = np.zeros(len(rounds))
    open_ = np.ones(reps, dtype=bool)
    for k, (n, a) in enumerate(zip(rounds, alphas, strict=True)):
        mean = s1[:, n - 1] / n
        m2 = np.maximum(s2[:, n - 1] / n - mean * mean, 0.0)
        m3 = s3[:, n - 1] / n - 3 * mean * s2[:, n - 1] / n + 2 * mean ** 3
        with np.errstate(divide="ignore", invalid="ignore"):
            g = np.where(m2 > 0, m3 / m2 ** 1.5, 0.0) if n >= 3 else np.zeros(reps)
        lo, hi = sk.bounds(mean, np.sqrt(m2 * n / (n - 1)), g, n, 1 - a)
        c = verdict_codes(rule, lo, hi, margin)
        now = open_ & (c != 0)
        code[now], used[now] = c[now], n
        stop_at[k] = now.mean()
        open_ &= ~now
    return {"supported": float((code == 1).mean()), "not_supported": float((code == -1).mean()),
            "inconclusive": float((code == 0).mean()), "decisive": float((code != 0).mean()),
            "stop_at": stop_at, "expected_seeds": float(used.mean()), "reps": reps}
