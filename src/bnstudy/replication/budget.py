"""Rounds to a budget: the looks a replication budget buys, and how far a round may skip ahead.

A replication policy may state a **budget** instead of its rounds
(:mod:`bnstudy.replication.policy`): ``budget: {seeds: 24}`` (seeds per arm) or ``budget:
{cpu_minutes: 30}`` (the CPU-minutes the experiment's runs may cost, every look taken). The looks
are planned from it before any data, as a pure function of the config (:func:`looks`): doubling
from ``start`` (default :data:`START`) while the budget allows, the last look what the budget
buys (``{seeds: 20}`` from 3: 3, 6, 12, 20). A CPU-minute budget is first turned into seeds per
arm with the cost model's estimate of one seed of every arm of the experiment (its training runs
and its measures on the config's threads: :func:`seeds_for_minutes`, the estimate from
``bnstudy.planning.budget``), so the same config always plans the same looks; the alpha
spending over them (:mod:`bnstudy.claims.decide.sequential`) is fixed before the first seed.

A round need not stop at the next look: :func:`next_look` lets it skip ahead to the first
planned look with at least the seeds the experiment's undecided rows need (``seeds_needed`` at
the row's nearer boundary, 0 or the margin: :mod:`bnstudy.claims.decide.power`), capped at the last.
Skipping is valid: the looks and their alphas were fixed before any data, and a skipped look's
alpha is simply not spent (never moved to a later look). :func:`shortfall_words` is what a row
says when the budget cannot buy what it needs.
"""

from __future__ import annotations

import math

START = 3  # the first look of a budget without a start
KINDS = ("seeds", "cpu_minutes")


def parse(budget, where: str = "replication.budget") -> tuple[str, float]:
    """``(kind, amount)`` of a budget mapping: exactly one of ``seeds`` (an integer >= 2) or
    ``cpu_minutes`` (a number > 0); a key set to null is dropped (so that a config that extends
    another can swap one kind for the other: mappings merge)."""
    if isinstance(budget, dict):
        budget = {k: v for k, v in budget.items() if v is not None}
    if not isinstance(budget, dict) or len(budget) != 1 or next(iter(budget)) not in KINDS:
        raise ValueError(f"{where}: must be one of {{seeds: N}} or {{cpu_minutes: X}}, got "
                         f"{budget!r}")
    kind, amount = next(iter(budget.items()))
    if kind == "seeds" and not (isinstance(amount, int) and not isinstance(amount, bool)
                                and amount >= 2):
        raise ValueError(f"{where}: seeds must be an integer >= 2 (seeds per arm), got "
                         f"{amount!r}")
    if kind == "cpu_minutes" and not (isinstance(amount, (int, float))
                                      and not isinstance(amount, bool) and amount > 0
                                      and math.isfinite(amount)):
        raise ValueError(f"{where}: cpu_minutes must be a number > 0, got {amount!r}")
    return kind, float(amount) if kind == "cpu_minutes" else int(amount)


def looks(start: int, seeds: int) -> tuple[int, ...]:
    """The planned looks from ``start`` to a budget of ``seeds`` per arm: doubling, the last
    look the budget itself (``looks(3, 20) == (3, 6, 12, 20)``; ``looks(3, 3) == (3,)``)."""
    if not (isinstance(start, int) and start >= 2):
        raise ValueError(f"start must be an integer >= 2, got {start!r}")
    if seeds < start:
        raise ValueError(f"a budget of {seeds} seeds per arm buys less than the first look "
                         f"({start} seeds); allowed: at least {start}")
    out = [start]
    while out[-1] < seeds:
        out.append(min(2 * out[-1], seeds))
    return tuple(out)


def seeds_for_minutes(minutes: float, seed_minutes: float, cap: int) -> int:
    """Seeds per arm a budget of ``minutes`` CPU-minutes buys when one seed of every arm costs
    ``seed_minutes`` (at most ``cap``, the study's ``limits.seeds``)."""
    if not seed_minutes > 0:
        return int(cap)
    return int(min(cap, math.floor(minutes / seed_minutes + 1e-9)))


def next_look(rounds, look: int, need: float) -> int:
    """The look a round takes an open experiment to from ``look`` (0-based): the first planned
    look with at least ``need`` seeds (the largest ``seeds_needed`` of its undecided rows; NaN
    or <= the next look's seeds: the next look), never beyond the last."""
    rounds = tuple(rounds)
    last = len(rounds) - 1
    if look >= last:
        return last
    nxt = look + 1
    if need is None or not need == need or need <= rounds[nxt]:  # NaN: no estimate
        return nxt
    for j in range(nxt, last + 1):
        if rounds[j] >= need:
            return j
    return last


def row_need(seeds_needed, seeds_needed_margin=math.nan) -> float:
    """The seeds a row needs to be decided at either boundary (0 or the margin): the smaller
    of the two estimates that are known; NaN when neither is."""
    known = [float(x) for x in (seeds_needed, seeds_needed_margin)
             if x is not None and not (isinstance(x, float) and math.isnan(x))]
    return min(known) if known else math.nan


def shortfall_words(need: float, buys: int) -> str:
    """What an undecided row says when its budget cannot buy the seeds it needs."""
    if math.isinf(need):
        return (f"undecided: no seed count decides it at the observed effect (on the boundary); "
                f"the budget buys {buys} seeds per arm")
    return (f"undecided: needs about {math.ceil(need)} seeds per arm, the budget buys {buys}")


def row_budget(row, budgets: dict, arm_budgets: dict | None = None) -> int | None:
    """The seeds per arm a ledger row's budget buys: its experiment's last planned look (a
    contrast row over two experiments: the smaller), or an arm's own smaller budget where the
    row compares that arm (``arm_budgets``: experiment -> {norm: seeds}); None without one."""
    arm_budgets = arm_budgets or {}
    base = row.get("baseline")
    exps = [e for e in (row.get("experiment"), base) if isinstance(e, str) and e in budgets]
    norms = [n for n in (row.get("norm"), None if base in budgets else base)
             if isinstance(n, str)]
    own = [min([budgets[e], *(arm_budgets.get(e, {}).get(n, budgets[e]) for n in norms)])
           for e in exps]
    return min(own) if own else None


def add_shortfalls(ledger, budgets: dict, arm_budgets: dict | None = None):
    """``ledger`` with the words of every undecided measured row (after the multiplicity
    adjustment) over a budgeted experiment whose need (:func:`row_need`) exceeds the seeds per
    arm its budget buys (:func:`row_budget`: ``budgets``, experiment -> the last planned look,
    and ``arm_budgets``, an arm's own smaller one; a contrast row over two experiments takes the
    smaller): :func:`shortfall_words` appended to ``in_words`` and put in ``note``. Rows without
    a budget are left as they are."""
    if not budgets or "seeds_needed" not in ledger:
        return ledger
    out = ledger.copy()
    verdict = out.get("adjusted_verdict", out["verdict"])
    for i, r in out.iterrows():
        if verdict[i] != "undecided":
            continue
        buys = row_budget(r, budgets, arm_budgets)
        need = row_need(r.get("seeds_needed"), r.get("seeds_needed_margin", math.nan))
        if buys is None or not need > buys:
            continue
        words = shortfall_words(need, buys)
        text = r.get("in_words")
        out.at[i, "in_words"] = f"{text}; {words}" if isinstance(text, str) and text else words
        note = r.get("note")
        out.at[i, "note"] = f"{note}; {words}" if isinstance(note, str) and note else words
    return out
