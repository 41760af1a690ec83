"""Verdicts that stay valid when seeds are added in rounds and a claim stops once it is decided.

Looking at a claim's interval after every round of seeds and stopping as soon as it clears the
boundary inflates the error rate: each look is another chance for a fixed-level interval to miss.
This module uses a **group-sequential alpha split over the planned looks**: a claim's planned
rounds are cumulative seed counts fixed before any data (e.g. ``[3, 6, 12, 24]``); at look ``k``
the paired per-seed differences of the first ``rounds[k]`` seeds give a Student-t interval at
level ``1 - alpha_k``, where the overall ``alpha = 1 - level`` is split over the ``K`` looks
(:func:`look_alphas`):

- ``equal`` (the default): ``alpha_k = alpha / K`` (Bonferroni over the looks, a conservative
  Pocock-like equal split);
- ``linear``: ``alpha_k`` proportional to the seeds the look adds, ``alpha * (n_k - n_{k-1}) /
  n_K`` (the linear alpha-spending function, applied by the same union bound: spends little at
  the first looks, where few seeds rarely decide anyway).

**Guarantee.** Every per-look interval has two-sided error ``alpha_k`` and the ``alpha_k`` sum to
``alpha``, so by the union bound all the planned looks' intervals cover the true mean paired
difference *simultaneously* with probability at least ``level`` (for normal differences; the
Student-t approximation otherwise): the intervals form a confidence sequence over the planned
looks, valid whatever rule decides when to stop among them. Every wrong verdict of
:func:`bnstudy.claims.rules.verdict` (``supported`` or ``not supported`` where the truth says
otherwise, e.g. any decisive verdict when the true effect lies exactly on the boundary: 0 for
``less`` / ``more``, the margin for the others) needs an interval that misses the truth, so the
chance of a wrong decisive verdict over all rounds is at most ``1 - level``. The union bound
ignores the looks' correlation, so the real rate is below it (:func:`simulate` measures it).

:func:`decide` gives the decision at the current look: the verdict of the look's interval, and
whether to stop (decided, or the last planned round reached) or run the next round's seeds.
Seeds beyond the last completed round are not used: a look happens only at a planned count.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bnstudy.claims.rules import RULES, verdict
from bnstudy.tables.intervals import t_half_width

SPENDING = ("equal", "linear")
CODES = {1: "supported", -1: "not supported", 0: "inconclusive"}


def check_rounds(rounds) -> tuple[int, ...]:
    """``rounds`` as a tuple of ints: strictly increasing cumulative seed counts, each >= 2."""
    try:
        out = tuple(int(r) for r in rounds)
    except (TypeError, ValueError):
        raise ValueError(f"rounds must be a list of seed counts, got {rounds!r}") from None
    if not out or any(r != float(v) for r, v in zip(out, rounds, strict=True)):
        raise ValueError(f"rounds must be a non-empty list of integer seed counts, got {rounds!r}")
    if out[0] < 2 or any(b <= a for a, b in zip(out, out[1:], strict=False)):
        raise ValueError(f"rounds must be strictly increasing cumulative seed counts >= 2 "
                         f"(e.g. [3, 6, 12, 24]), got {list(out)}")
    return out


def look_alphas(rounds, level: float = 0.95, spending: str = "equal") -> np.ndarray:
    """The two-sided error ``alpha_k`` of each planned look; they sum to ``1 - level``."""
    rounds = check_rounds(rounds)
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    alpha = 1.0 - level
    if spending == "equal":
        return np.full(len(rounds), alpha / len(rounds))
    if spending == "linear":
        return alpha * np.diff((0, *rounds)) / rounds[-1]
    raise ValueError(f"unknown spending {spending!r}; valid: {', '.join(SPENDING)}")


def look_index(rounds, n_seeds: int) -> int:
    """The current look (0-based): the last planned round with at most ``n_seeds`` seeds."""
    rounds = check_rounds(rounds)
    if n_seeds < rounds[0]:
        raise ValueError(f"{n_seeds} seeds are fewer than the first planned round "
                         f"({rounds[0]}; rounds {list(rounds)}): no look is due yet")
    return int(np.searchsorted(rounds, n_seeds, side="right")) - 1


def interval_levels(plans: dict, seeds: dict, level: float = 0.95) -> dict[str, float]:
    """The level of each replicated experiment's intervals: ``plans`` maps an experiment to its
    ``{"rounds": [...], "spending": ...}``, ``seeds`` an experiment to the seeds it ran (the
    count of its stopping look); the look's level ``1 - alpha_k``. An experiment with fewer
    seeds than its first round has no look (a failed study) and is left out."""
    out = {}
    for e, p in plans.items():
        if e not in seeds or int(seeds[e]) < check_rounds(p["rounds"])[0]:
            continue
        k = look_index(p["rounds"], int(seeds[e]))
        out[e] = 1.0 - float(look_alphas(p["rounds"], level, p.get("spending", "equal"))[k])
    return out


@dataclass(frozen=True)
class Decision:
    """The decision at one look of a claim's planned rounds."""

    rule: str
    margin: float
    rounds: tuple[int, ...]
    look: int  # 0-based index into rounds
    n_seeds: int  # finite paired differences used at this look
    effect: float
    ci_low: float
    ci_high: float
    look_level: float  # the per-look interval's level, 1 - alpha_k
    level: float  # the overall level the looks together guarantee
    verdict: str

    @property
    def final(self) -> bool:
        return self.look == len(self.rounds) - 1

    @property
    def stop(self) -> bool:
        """Decided, or the last planned round reached."""
        return self.verdict != "inconclusive" or self.final

    @property
    def next_seeds(self) -> int | None:
        """Cumulative seeds of the next round when the claim goes on; None when it stops."""
        return None if self.stop else self.rounds[self.look + 1]

    def guarantee(self) -> str:
        return (f"look {self.look + 1} of {len(self.rounds)} (rounds {list(self.rounds)}): "
                f"interval at level {self.look_level:.4g}; all looks' intervals cover the true "
                f"effect together with probability >= {self.level:g} (alpha split over looks)")


def decide(rule: str, diffs, rounds, margin: float = 0.0, level: float = 0.95,
           spending: str = "equal") -> Decision:
    """The decision at the current look on the paired per-seed differences ``diffs`` (in seed
    order; non-finite entries are failed runs and are dropped after truncation to the look's
    planned seed count)."""
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; valid: {', '.join(RULES)}")
    rounds = check_rounds(rounds)
    alphas = look_alphas(rounds, level, spending)
    x = np.asarray(diffs, dtype=float).ravel()
    k = look_index(rounds, len(x))
    x = x[: rounds[k]]
    x = x[np.isfinite(x)]
    n, lo, hi = len(x), np.nan, np.nan
    mean = float(x.mean()) if n else np.nan
    if n >= 2:
        half = t_half_width(float(x.std(ddof=1)), n, 1 - float(alphas[k]))
        lo, hi = mean - half, mean + half
    return Decision(rule, float(margin), rounds, k, n, mean, lo, hi, 1 - float(alphas[k]),
                    float(level), verdict(rule, lo, hi, margin))


def decide_summary(rule: str, effect: float, sd: float, n_seeds: int, rounds, look: int,
                   margin: float = 0.0, level: float = 0.95, spending: str = "equal") -> Decision:
    """The decision at planned look ``look`` (0-based) from a ledger row's summary: the mean
    paired difference ``effect``, its standard deviation ``sd`` and the ``n_seeds`` differences
    it was computed on (fewer than ``rounds[look]`` when runs failed; never more)."""
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; valid: {', '.join(RULES)}")
    rounds = check_rounds(rounds)
    alphas = look_alphas(rounds, level, spending)
    if not 0 <= look < len(rounds):
        raise ValueError(f"look {look!r} is not a planned look; valid: 0 .. {len(rounds) - 1}")
    if n_seeds > rounds[look]:
        raise ValueError(f"{n_seeds} seeds at look {look} exceed its planned {rounds[look]}")
    lo = hi = np.nan
    if n_seeds >= 2 and np.isfinite(effect) and np.isfinite(sd):
        half = t_half_width(float(sd), int(n_seeds), 1 - float(alphas[look]))
        lo, hi = effect - half, effect + half
    return Decision(rule, float(margin), rounds, look, int(n_seeds), float(effect), lo, hi,
                    1 - float(alphas[look]), float(level), verdict(rule, lo, hi, margin))


def verdict_codes(rule: str, lo, hi, margin: float) -> np.ndarray:
    """:func:`bnstudy.claims.rules.verdict` on arrays: 1 supported, -1 not supported, 0 else."""
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    if rule == "less":
        sup, nsup = hi < 0, lo > 0
    elif rule == "more":
        sup, nsup = lo > 0, hi < 0
    elif rule == "no_less":
        sup, nsup = lo > -margin, hi < -margin
    elif rule == "no_more":
        sup, nsup = hi < margin, lo > margin
    elif rule == "equivalent":
        sup, nsup = (-margin < lo) & (hi < margin), (hi < -margin) | (lo > margin)
    else:
        raise ValueError(f"unknown rule {rule!r}; valid: {', '.join(RULES)}")
    finite = np.isfinite(lo) & np.isfinite(hi)
    return np.where(finite & sup, 1, np.where(finite & nsup, -1, 0))


def boundary(rule: str, margin: float) -> float:
    """A true effect exactly on the rule's null boundary (the upper one for ``equivalent``)."""
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; valid: {', '.join(RULES)}")
    return {"less": 0.0, "more": 0.0, "no_less": -margin}.get(rule, float(margin))


def simulate(rule: str, effect: float, sd: float, rounds, margin: float = 0.0,
             level: float = 0.95, spending: str = "equal", reps: int = 20_000,
             seed: int = 0) -> dict:
    """Monte Carlo of the sequential policy on normal paired differences (mean ``effect``,
    standard deviation ``sd``): the rates of each final verdict, the rate of stopping at each
    look, and the expected seeds used (the stopping look's count; the last round's when never
    decided). Vectorized; deterministic in ``seed``."""
    rounds = check_rounds(rounds)
    alphas = look_alphas(rounds, level, spending)
    x = np.random.default_rng(seed).normal(effect, sd, size=(reps, rounds[-1]))
    s1, s2 = np.cumsum(x, axis=1), np.cumsum(x * x, axis=1)
    code = np.zeros(reps, dtype=int)
    used = np.full(reps, rounds[-1])
    stop_at = np.zeros(len(rounds))
    open_ = np.ones(reps, dtype=bool)
    for k, (n, a) in enumerate(zip(rounds, alphas, strict=True)):
        mean = s1[:, n - 1] / n
        var = np.maximum(s2[:, n - 1] - n * mean * mean, 0.0) / (n - 1)
        half = t_half_width(np.sqrt(var), n, 1 - a)
        c = verdict_codes(rule, mean - half, mean + half, margin)
        now = open_ & (c != 0)
        code[now], used[now] = c[now], n
        stop_at[k] = now.mean()
        open_ &= ~now
    return {"supported": float((code == 1).mean()), "not_supported": float((code == -1).mean()),
            "inconclusive": float((code == 0).mean()), "decisive": float((code != 0).mean()),
            "stop_at": stop_at, "expected_seeds": float(used.mean()), "reps": reps}
