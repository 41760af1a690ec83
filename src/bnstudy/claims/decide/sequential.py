"""Verdicts that stay valid when seeds are added in rounds and a claim stops once it is decided.

Looking at a claim's interval after every round of seeds and stopping as soon as it clears the
boundary inflates the error rate: each look is another chance for a fixed-level interval to miss.
This module uses a **group-sequential alpha split over the planned looks**: a claim's planned
rounds are cumulative seed counts fixed before any data (e.g. ``[3, 6, 12, 24]``); at look ``k``
the paired per-seed differences of the first ``rounds[k]`` seeds give the ledger's interval
(:func:`bnstudy.claims.decide.robust.bounds` since issue 46: the Student-t interval widened for
skewed differences, :func:`bnstudy.claims.decide.skew.bounds`, and the exact signed-rank interval,
each at half the look's alpha, intersected; the table below predates the signed-rank part, whose
simulated rates are in ``tests/test_robust_rule.py``) at level ``1 - alpha_k``, where the
overall ``alpha = 1 - level`` is split over the ``K`` looks (:func:`look_alphas`) by an
alpha-spending function ``A(t)`` of the information fraction
``t_k = n_k / n_K``, ``alpha_k = A(t_k) - A(t_{k-1})``:

- ``obf`` (the default): O'Brien-Fleming-shaped, ``A(t) = 2 - 2 Phi(z_{1-alpha/2} / sqrt(t))``
  (Lan & DeMets 1983). Almost nothing on the first looks (``[3, 6, 12, 24]`` at 95%: alpha_k =
  3e-8, 9e-5, 0.0055, 0.044), so a decision at 3 or 6 seeds needs an overwhelming effect;
- ``equal``: ``alpha_k = alpha / K`` (Bonferroni over the looks, Pocock-like);
- ``linear``: ``A(t) = alpha t``.

**Guarantee.** The ``alpha_k`` sum to ``alpha``, so by the union bound all the planned looks'
intervals cover the true mean paired difference *simultaneously* with probability at least
``level`` whenever each look's interval has its nominal coverage (exactly for normal
differences with the Student-t part; to first order in ``n^-1/2`` for skewed ones with Hall's
part): the intervals form a confidence sequence over the planned looks, valid whatever rule
decides when to stop among them. Every wrong verdict of :func:`bnstudy.claims.decide.rules.verdict`
needs an interval that misses the truth, so the chance of a wrong decisive verdict over all
rounds is at most ``1 - level`` up to that approximation.

**Why this rule (simulated by :mod:`bnstudy.claims.decide.simulation`, 20,000 repetitions per case,
rule ``less`` at the boundary, wrong-decisive rate, either sign of skew alike).** Looks
``[3, 6, 12, 24]``:

=====================  ======  ===========  ===========  ==============
rule                   normal  t_3 (sym.)   exponential  lognormal(s=1)
=====================  ======  ===========  ===========  ==============
Student-t, equal        4.0%     3.1%         14.0%        22.5%
Student-t, obf          4.6%     3.7%          9.7%        15.6%
Hall alone, obf         4.8%     7.1%          6.3%         9.3%
hull (shipped), equal   2.9%     2.4%          8.1%        12.8%
hull (shipped), obf     4.0%     3.6%          5.2%         8.1%
=====================  ======  ===========  ===========  ==============

With the shipped rule the other shipped plans give: ``[3, 6, 12]`` 3.8 / 3.4 / 6.6 / 10.6%,
``[3, 6]`` 3.6 / 2.8 / 7.7 / 11.9%, ``[5, 10]`` 3.7 / 3.4 / 6.6 / 10.8%, ``[3, 6, 12, 24, 48]``
4.2 / 4.0 / 4.1 / 6.3%. Most of the remaining error is at the last look (a single 5% interval at
12 seeds misses 6-9% on lognormal differences): skew that strong is flagged in the ledger
(:func:`bnstudy.claims.decide.skew.skew_flag`). Power on a real effect (normal, d_z = 1.5) is kept:
``[3, 6, 12]`` decides 98.5% (Student-t with the equal split: 98.2%), ``[5, 10]`` 95.6%
(96.6%), ``[3, 6]`` 69% (71%).
Experiments mostly run to their last round, and the O'Brien-Fleming shape spends the alpha
there, where the seeds are; the price is almost no stopping at the first look.

:func:`decide` gives the decision at the current look: the verdict of the look's interval, and
whether to stop (decided, or the last planned round reached) or run the next round's seeds.
Seeds beyond the last completed round are not used: a look happens only at a planned count.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bnstudy.claims.decide import outcomes as O
from bnstudy.claims.decide import robust
from bnstudy.claims.decide import skew as sk
from bnstudy.claims.decide.rules import RULES, verdict

SPENDING = ("obf", "equal", "linear")
DEFAULT_SPENDING = "obf"
CODES = {1: O.SUPPORTED, -1: O.CONTRADICTED, 2: O.ABSENT, 0: O.UNDECIDED}


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


def look_alphas(rounds, level: float = 0.95, spending: str = DEFAULT_SPENDING) -> np.ndarray:
    """The two-sided error ``alpha_k`` of each planned look; they sum to ``1 - level``."""
    rounds = check_rounds(rounds)
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    alpha = 1.0 - level
    if spending == "equal":
        return np.full(len(rounds), alpha / len(rounds))
    if spending == "linear":
        return alpha * np.diff((0, *rounds)) / rounds[-1]
    if spending == "obf":
        t = np.asarray(rounds, dtype=float) / rounds[-1]
        spent = 2.0 * sk.stats.norm.sf(sk.stats.norm.ppf(1 - alpha / 2) / np.sqrt(t))
        spent[-1] = alpha  # exactly alpha in all
        return np.diff((0.0, *spent))
    raise ValueError(f"unknown spending {spending!r}; valid: {', '.join(SPENDING)}")


def look_index(rounds, n_seeds: int) -> int:
    """The current look (0-based): the last planned round with at most ``n_seeds`` seeds."""
    rounds = check_rounds(rounds)
    if n_seeds < rounds[0]:
        raise ValueError(f"{n_seeds} seeds are fewer than the first planned round "
                         f"({rounds[0]}; rounds {list(rounds)}): no look is due yet")
    return int(np.searchsorted(rounds, n_seeds, side="right")) - 1


def row_look(rounds, n_seeds: int) -> int:
    """The look a row's ``n_seeds`` paired seeds were taken at: the first planned round with at
    least that many (fewer than planned when runs failed), at most the last."""
    rounds = check_rounds(rounds)
    return min(int(np.searchsorted(rounds, max(int(n_seeds), 0), side="left")), len(rounds) - 1)


class StopLevels(dict):
    """Each replicated experiment's stopping look's level (a plain ``{experiment: level}``),
    with every planned look's level in :attr:`looks` (``{experiment: (rounds, levels)}``): a row
    over arms that stopped at an earlier look is read at that look's level
    (:class:`bnstudy.claims.pairing.Levels`)."""

    def __init__(self, stop: dict, looks: dict, budgets: dict | None = None,
                 arm_budgets: dict | None = None):
        super().__init__(stop)
        self.looks = dict(looks)
        self.budgets = dict(budgets or {})  # {experiment: seeds per arm of its last look}
        self.arm_budgets = dict(arm_budgets or {})  # {experiment: {norm: its own budget}}


def interval_levels(plans: dict, seeds: dict, level: float = 0.95) -> StopLevels:
    """The level of each replicated experiment's intervals: ``plans`` maps an experiment to its
    ``{"rounds": [...], "spending": ...}``, ``seeds`` an experiment to the seeds it ran (the
    count of its stopping look); the look's level ``1 - alpha_k``. An experiment with fewer
    seeds than its first round has no look (a failed study) and is left out. ``budgets``:
    each planned experiment's last look, the seeds per arm its plan buys; ``arm_budgets``: the
    arms with a smaller budget of their own (a plan's ``"arms"``)."""
    out, looks = {}, {}
    budgets = {e: check_rounds(p["rounds"])[-1] for e, p in plans.items()}
    arm_budgets = {e: dict(p["arms"]) for e, p in plans.items() if p.get("arms")}
    for e, p in plans.items():
        if e not in seeds or int(seeds[e]) < check_rounds(p["rounds"])[0]:
            continue
        k = look_index(p["rounds"], int(seeds[e]))
        each = 1.0 - look_alphas(p["rounds"], level, p.get("spending", DEFAULT_SPENDING))
        out[e] = float(each[k])
        looks[e] = (check_rounds(p["rounds"])[: k + 1], tuple(float(v) for v in each[: k + 1]))
    return StopLevels(out, looks, budgets, arm_budgets)


@dataclass(frozen=True)
class Decision:
    """The decision at one look of a claim's planned rounds."""

    rule: str
    margin: float
    rounds: tuple[int, ...]
    look: int  # 0-based index into rounds
    n_seeds: int  # finite paired differences used at this look
    effect: float
    skew: float  # their sample skewness (bnstudy.claims.decide.skew)
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
        return self.verdict != O.UNDECIDED or self.final

    @property
    def next_seeds(self) -> int | None:
        """Cumulative seeds of the next round when the claim goes on; None when it stops."""
        return None if self.stop else self.rounds[self.look + 1]

    def guarantee(self) -> str:
        return (f"look {self.look + 1} of {len(self.rounds)} (rounds {list(self.rounds)}): "
                f"the rule's interval (robust.bounds) at level {self.look_level:.4g}; all "
                f"looks' intervals cover the true effect together with probability >= "
                f"{self.level:g} (alpha split over looks)")


def decide(rule: str, diffs, rounds, margin: float = 0.0, level: float = 0.95,
           spending: str = DEFAULT_SPENDING) -> Decision:
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
    n, lo, hi, g = len(x), np.nan, np.nan, sk.sample_skew(x)
    est = robust.hodges_lehmann(x) if n else np.nan
    if n >= 2:
        lo, hi = robust.bounds(x, 1 - float(alphas[k]))
    return Decision(rule, float(margin), rounds, k, n, est, g, lo, hi, 1 - float(alphas[k]),
                    float(level), verdict(rule, lo, hi, margin))


def decide_summary(rule: str, effect: float, sd: float, n_seeds: int, rounds, look: int,
                   margin: float = 0.0, level: float = 0.95, spending: str = DEFAULT_SPENDING,
                   skew: float = 0.0) -> Decision:
    """The decision at planned look ``look`` (0-based) from a ledger row's summary: the mean
    paired difference ``effect``, its standard deviation ``sd``, its sample skewness ``skew``
    (the ledger's ``effect_skew``; 0, the Student-t interval, when unknown) and the ``n_seeds``
    differences it was computed on (fewer than ``rounds[look]`` when runs failed; never more)."""
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; valid: {', '.join(RULES)}")
    rounds = check_rounds(rounds)
    alphas = look_alphas(rounds, level, spending)
    if not 0 <= look < len(rounds):
        raise ValueError(f"look {look!r} is not a planned look; valid: 0 .. {len(rounds) - 1}")
    if n_seeds > rounds[look]:
        raise ValueError(f"{n_seeds} seeds at look {look} exceed its planned {rounds[look]}")
    lo = hi = np.nan
    skew = float(skew) if skew is not None and np.isfinite(skew) else 0.0
    if n_seeds >= 2 and np.isfinite(effect) and np.isfinite(sd):
        lo, hi = sk.bounds(float(effect), float(sd), skew, int(n_seeds), 1 - float(alphas[look]))
    return Decision(rule, float(margin), rounds, look, int(n_seeds), float(effect), skew, lo, hi,
                    1 - float(alphas[look]), float(level), verdict(rule, lo, hi, margin))


def verdict_codes(rule: str, lo, hi, margin: float) -> np.ndarray:
    """:func:`bnstudy.claims.decide.rules.verdict` on arrays: 1 supported, -1 contradicted, 2 absent
    (a directional rule with a margin), 0 undecided."""
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    absent = np.zeros(lo.shape, dtype=bool)
    if rule == "less":
        sup, nsup = hi < 0, lo > 0
        absent = (margin > 0) & (lo > -margin)
    elif rule == "more":
        sup, nsup = lo > 0, hi < 0
        absent = (margin > 0) & (hi < margin)
    elif rule == "no_less":
        sup, nsup = lo > -margin, hi < -margin
    elif rule == "no_more":
        sup, nsup = hi < margin, lo > margin
    elif rule == "equivalent":
        sup, nsup = (-margin < lo) & (hi < margin), (hi < -margin) | (lo > margin)
    else:
        raise ValueError(f"unknown rule {rule!r}; valid: {', '.join(RULES)}")
    ok = np.isfinite(lo) & np.isfinite(hi) & (lo <= hi)
    return np.where(ok & sup, 1, np.where(ok & nsup, -1, np.where(ok & absent, 2, 0)))
