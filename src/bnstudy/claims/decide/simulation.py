"""Monte Carlo of the sequential rule (:mod:`bnstudy.claims.decide.sequential`): the verdicts it
reaches on simulated paired differences (normal, skewed, heavy-tailed, or with seeds that blow up)
and where it stops. The error and power rates that module's docstring gives come from
:func:`simulate`; the tests check them. The rule is the ledger's
(:mod:`bnstudy.claims.decide.robust`); ``rule_bounds`` picks the skew-corrected t interval alone
(the rule before issue 46) to compare.

A distribution's "true effect" has two readings for the rule's two parts, the mean and the
pseudo-median (the Hodges-Lehmann target); they agree for symmetric laws. :func:`centres` gives
both for a standardized law, so that a test can put either on a boundary: the least favourable
law for a wrong "supported" under ``less`` has the smaller of the two at 0, for a wrong
"contradicted" the larger.
"""

from __future__ import annotations

import numpy as np

from bnstudy.claims.decide import robust
from bnstudy.claims.decide import skew as sk
from bnstudy.claims.decide.rules import RULES
from bnstudy.claims.decide.sequential import (
    DEFAULT_SPENDING,
    check_rounds,
    look_alphas,
    verdict_codes,
)


def boundary(rule: str, margin: float) -> float:
    """A true effect exactly on the rule's null boundary (the upper one for ``equivalent``)."""
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; valid: {', '.join(RULES)}")
    return {"less": 0.0, "more": 0.0, "no_less": -margin}.get(rule, float(margin))


DISTS = ("normal", "t3", "t2", "exponential", "-exponential", "lognormal", "-lognormal",
         "blowup", "-blowup")
BLOWUP = 15.0  # a blow-up seed's shift, in units of the other seeds' spread


def draw(dist: str, rng, size) -> np.ndarray:
    """Standardized draws (mean 0, sd 1) of ``dist``: normal, Student t with 3 degrees of
    freedom (symmetric, heavy-tailed), centred exponential (skewness 2) or lognormal (sigma 1,
    skewness 6.2); a leading ``-`` mirrors it (negative skew). Not standardized: ``t2`` (t with
    2 degrees of freedom, no variance; scale 1) and ``blowup`` (normal, each seed with
    probability 1/6 shifted by :data:`BLOWUP`, then centred on its mean)."""
    if dist not in DISTS:
        raise ValueError(f"unknown dist {dist!r}; valid: {', '.join(DISTS)}")
    sign, name = (-1.0, dist[1:]) if dist.startswith("-") else (1.0, dist)
    if name == "normal":
        return rng.normal(size=size)
    if name == "t2":
        return rng.standard_t(2, size=size)
    if name == "blowup":
        z = rng.normal(size=size) + BLOWUP * (rng.random(size=size) < 1 / 6)
        return sign * (z - BLOWUP / 6)
    if name == "t3":
        return rng.standard_t(3, size=size) / np.sqrt(3.0)
    if name == "exponential":
        return sign * (rng.exponential(size=size) - 1.0)
    m, v = np.exp(0.5), (np.e - 1.0) * np.e
    return sign * (rng.lognormal(0.0, 1.0, size=size) - m) / np.sqrt(v)


def centres(dist: str, size: int = 400_000, seed: int = 12345) -> tuple[float, float]:
    """(mean, pseudo-median) of :func:`draw`'s law ``dist`` (the pseudo-median, the median of
    ``(X + X') / 2``, by Monte Carlo; the mean is 0 by construction, but t2's is estimated the
    same way for symmetry of the code)."""
    rng = np.random.default_rng(seed)
    a, b = draw(dist, rng, size), draw(dist, rng, size)
    return 0.0, float(np.median((a + b) / 2))


def rule_bounds(x, level):
    """The skew-corrected t interval alone on rows of ``x``: the rule before issue 46."""
    n = x.shape[-1]
    mean, sd = x.mean(axis=-1), x.std(axis=-1, ddof=1)
    d = x - mean[..., None]
    m2 = (d * d).mean(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        g = np.where(m2 > 0, (d ** 3).mean(axis=-1) / m2 ** 1.5, 0.0) if n >= 3 else 0 * mean
    return sk.bounds(mean, sd, g, n, level)


def simulate(rule: str, effect: float, sd: float, rounds, margin: float = 0.0,
             level: float = 0.95, spending: str = DEFAULT_SPENDING, reps: int = 20_000,
             seed: int = 0, dist: str = "normal", bounds=robust.bounds,
             stop_after: int | None = None) -> dict:
    """Monte Carlo of the sequential policy on paired differences of mean ``effect`` and standard
    deviation ``sd``, distributed as ``dist`` (:func:`draw`): the rates of each final verdict,
    the rate of stopping at each look, and the expected seeds used (the stopping look's count;
    the last round's when never decided). ``stop_after``: the last look a row takes (an arm's
    own budget, ``replication: {arms: ...}``; the looks and their alphas stay those planned).
    Vectorized; deterministic in ``seed``."""
    rounds = check_rounds(rounds)
    alphas = look_alphas(rounds, level, spending)
    last = len(rounds) - 1 if stop_after is None else min(int(stop_after), len(rounds) - 1)
    x = effect + sd * draw(dist, np.random.default_rng(seed), (reps, rounds[last]))
    code = np.zeros(reps, dtype=int)
    used = np.full(reps, rounds[last])
    stop_at = np.zeros(len(rounds))
    open_ = np.ones(reps, dtype=bool)
    for k, (n, a) in enumerate(zip(rounds[: last + 1], alphas[: last + 1], strict=True)):
        lo, hi = bounds(x[:, :n], 1 - a)
        c = verdict_codes(rule, lo, hi, margin)
        now = open_ & (c != 0)
        code[now], used[now] = c[now], n
        stop_at[k] = now.mean()
        open_ &= ~now
    return {"supported": float((code == 1).mean()), "not_supported": float((code == -1).mean()),
            "absent": float((code == 2).mean()),
            "inconclusive": float((code == 0).mean()), "decisive": float((code != 0).mean()),
            "stop_at": stop_at, "expected_seeds": float(used.mean()), "reps": reps}


def wrong_rate(rule: str, margin: float, dist: str, rounds, reps: int = 20_000, seed: int = 0,
               level: float = 0.95, spending: str = DEFAULT_SPENDING, bounds=robust.bounds,
               at: float | None = None) -> float:
    """The rate of wrong decisive verdicts of a one-sided ``rule`` (not ``equivalent``) on law
    ``dist`` (sd scale 1) at its boundary (``at``: another boundary, e.g. the margin point of a
    directional rule, where *absent* is then the wrong outcome), each wrong outcome at its
    least favourable shift (see the module docstring): a wrong *supported* where both the mean
    and the pseudo-median lie on the boundary's other side, the nearer one on it; likewise a
    wrong *contradicted* (or *absent*)."""
    if rule == "equivalent":
        raise ValueError("wrong_rate takes a one-sided rule; valid: less, more, no_less, no_more")
    b = boundary(rule, margin) if at is None else float(at)
    mean, pm = centres(dist)
    low, high = min(mean, pm), max(mean, pm)
    below = rule in ("less", "no_more")  # supported below the boundary
    args = dict(margin=margin, level=level, spending=spending, reps=reps, dist=dist,
                bounds=bounds)
    both_above = simulate(rule, b - low, 1.0, rounds, seed=seed, **args)
    both_below = simulate(rule, b - high, 1.0, rounds, seed=seed + 1, **args)
    if at is not None:  # the margin point: absent (or contradicted) is wrong on the paper side
        paper = both_below if rule == "less" else both_above
        return paper["absent"] + paper["not_supported"]
    if below:
        return both_above["supported"] + both_below["not_supported"]
    return both_below["supported"] + both_above["not_supported"]
