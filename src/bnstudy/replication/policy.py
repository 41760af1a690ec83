"""A replication policy and the round-by-round decision of which experiments get more seeds.

A policy (``replication: {rounds: [3, 6, 12, 24]}``, ``{start: 3, max: 24}`` or ``{budget:
{seeds: 24}}`` / ``{budget: {cpu_minutes: 30}}``, per experiment or for the whole study) fixes
the planned cumulative seed counts before any data: ``rounds``, or doubling from ``start`` until
``max`` or until what the ``budget`` buys (:mod:`bnstudy.replication.budget`; one way or
another: two together are refused, so that no reader has to guess which wins), and the alpha
``spending`` over them
(:mod:`bnstudy.claims.decide.sequential`). ``arms: {population_norm: 5}`` gives a costly arm a
smaller budget of its own, one of the planned looks: that arm takes no seeds beyond it, and a
row that compares it stops there (:meth:`Policy.arm_seeds`; a futility stop, so it spends no
alpha). Round ``k``'s seeds are the experiment's declared seeds followed by the next unused
integers, the first ``rounds[k]`` of them (:meth:`Policy.seeds`), so the rounds a study takes
are a function of its config and its numbers alone.

After round ``k``, :func:`continuing` reads that round's ledger: an experiment goes on to round
``k + 1`` iff one of its measured rows is still undecided at look ``k`` (the sequential
decision at the look's split level, from the row's ``effect``, ``effect_sd`` and ``n_seeds``)
and a round is left; an experiment without a measured row stops.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pandas as pd

from bnstudy.claims.decide import outcomes, sequential
from bnstudy.replication import budget as planned

KEYS = ("start", "max", "rounds", "budget", "spending", "arms")


@dataclass(frozen=True)
class Policy:
    rounds: tuple[int, ...]
    spending: str = sequential.DEFAULT_SPENDING
    budget: tuple = ()  # (kind, amount) of a budget policy: bnstudy.replication.budget
    arms: tuple = ()  # ((normalizer, seeds), ...): arms with a smaller budget of their own

    def arm_seeds(self, norm: str) -> int:
        """The most seeds arm ``norm`` takes: its own budget, else the last look's."""
        return dict(self.arms).get(norm, self.rounds[-1])

    @classmethod
    def parse(cls, d: dict, where: str = "replication", seed_minutes: float | None = None,
              cap: int = 256) -> Policy:
        """The policy of mapping ``d``; a ``cpu_minutes`` budget buys ``amount /
        seed_minutes`` seeds per arm (``seed_minutes``: the cost model's CPU-minutes of one
        seed of every arm; None: not known here, the looks run to ``cap``, the most the
        budget could buy, for the bounds checks), never more than ``cap``."""
        if not isinstance(d, dict):
            raise ValueError(f"{where}: must be a mapping with keys {', '.join(KEYS)}, got {d!r}")
        bad = sorted(set(d) - set(KEYS))
        if bad:
            raise ValueError(f"{where}: unknown key(s) {bad}; valid: {', '.join(KEYS)}")
        start, top = d.get("start"), d.get("max")
        rounds = d.get("rounds")
        both = [k for k in ("start", "max") if d.get(k) is not None]
        if rounds is not None and both:
            raise ValueError(f"{where}: give either rounds (every round's cumulative seed "
                             f"count) or start and max (rounds doubling from start to max), not "
                             f"both: got rounds={rounds!r} and "
                             f"{' and '.join(f'{k}={d[k]!r}' for k in both)}; drop "
                             f"{' and '.join(both)}, or rounds")
        if d.get("budget") is not None:
            return cls._with_arms(cls._of_budget(d, where, seed_minutes, cap), d, where)
        if rounds is None:
            if not (isinstance(start, int) and isinstance(top, int) and 2 <= start <= top):
                raise ValueError(f"{where}: without rounds, start and max must be integers with "
                                 f"2 <= start <= max, got start={start!r}, max={top!r}")
            rounds = [start]
            while rounds[-1] < top:
                rounds.append(min(2 * rounds[-1], top))
        return cls._with_arms(cls(cls._checked(rounds, where), cls._spending(d, where)), d,
                              where)

    @classmethod
    def _with_arms(cls, policy: Policy, d: dict, where: str) -> Policy:
        """``policy`` with the arms' own budgets of ``d["arms"]``: each one of its looks."""
        arms = d.get("arms")
        if arms is None:
            return policy
        if not isinstance(arms, dict) or not arms:
            raise ValueError(f"{where}.arms: must be a mapping normalizer -> seeds (one of the "
                             f"planned looks {list(policy.rounds)}), got {arms!r}")
        for norm, n in arms.items():
            if isinstance(n, bool) or n not in policy.rounds:
                raise ValueError(f"{where}.arms.{norm}: {n!r} is not one of the planned looks; "
                                 f"valid: {', '.join(map(str, policy.rounds))}")
        return dataclasses.replace(policy, arms=tuple(sorted(arms.items())))

    @staticmethod
    def _checked(rounds, where: str) -> tuple[int, ...]:
        try:
            return sequential.check_rounds(rounds)
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None

    @staticmethod
    def _spending(d: dict, where: str) -> str:
        spending = d.get("spending", sequential.DEFAULT_SPENDING)
        if spending not in sequential.SPENDING:
            raise ValueError(f"{where}: unknown spending {spending!r}; "
                             f"valid: {', '.join(sequential.SPENDING)}")
        return spending

    @classmethod
    def _of_budget(cls, d: dict, where: str, seed_minutes, cap: int) -> Policy:
        other = [k for k in ("rounds", "max") if d.get(k) is not None]
        if other:
            raise ValueError(f"{where}: give either budget (the looks doubling from start to "
                             f"what it buys) or {' and '.join(other)}, not both: got "
                             f"budget={d['budget']!r} and "
                             f"{' and '.join(f'{k}={d[k]!r}' for k in other)}; drop "
                             f"{' and '.join(other)}, or budget")
        kind, amount = planned.parse(d["budget"], f"{where}.budget")
        start = d.get("start", planned.START)
        if kind == "seeds":
            seeds = amount
        elif seed_minutes is None:
            seeds = max(int(cap), start if isinstance(start, int) else 2)
        else:
            seeds = planned.seeds_for_minutes(amount, seed_minutes, cap)
        try:
            rounds = planned.looks(start, seeds)
        except ValueError as e:
            cost = (f" (one seed of every arm: about {seed_minutes:.2g} CPU-minutes)"
                    if kind == "cpu_minutes" else "")
            raise ValueError(f"{where}.budget: {e}{cost}") from None
        return cls(cls._checked(rounds, where), cls._spending(d, where), (kind, amount))

    def seeds(self, declared, look: int) -> list[int]:
        """The experiment's seeds at round ``look``: its ``declared`` seeds, then the next
        integers above them, the first ``rounds[look]``."""
        if not 0 <= look < len(self.rounds):
            raise ValueError(f"round {look!r} is not planned; valid: 0 .. {len(self.rounds) - 1}")
        out = list(dict.fromkeys(int(s) for s in declared))
        nxt = max(out, default=-1) + 1
        while len(out) < self.rounds[look]:
            out.append(nxt)
            nxt += 1
        return out[: self.rounds[look]]


def policies(cfg: dict, seed_minutes=None) -> dict[str, Policy]:
    """Each experiment's policy: its own ``replication``, else the study's (``false`` or none:
    no policy). A policy that does not parse raises, naming where it is. ``seed_minutes(name)``
    gives an experiment's CPU-minutes per seed of every arm, for a ``cpu_minutes`` budget (a
    budget applies to each experiment that takes it, a study-wide one to each alone)."""
    from bnstudy.config import bounds

    cap = bounds.limit(cfg, "seeds")
    default = cfg.get("replication")
    if default:
        Policy.parse(default, "replication", None, cap)
    out, shared = {}, set()
    for name, x in cfg["experiments"].items():
        d = x.get("replication", default)
        if d:
            cost = None
            if seed_minutes is not None and isinstance(d.get("budget"), dict) and (
                    d["budget"].get("cpu_minutes") is not None):
                cost = seed_minutes(name)
            where = f"experiments.{name}.replication"
            out[name] = Policy.parse(d, where, cost, cap)
            if "replication" in x:
                _arms_known(out[name], x["norms"], where)
            else:
                shared |= set(x["norms"])
    if default and shared:
        _arms_known(Policy.parse(default, "replication", None, cap), sorted(shared),
                    "replication")
    return out


def _arms_known(policy: Policy, norms, where: str) -> None:
    """An arm's own budget names one of the normalizers the policy's experiments train."""
    for norm, _ in policy.arms:
        if norm not in norms:
            raise ValueError(f"{where}.arms: {norm!r} is not a normalizer of the experiments "
                             f"it applies to; valid: {', '.join(norms)}")


def continuing(ledger: pd.DataFrame, rules: dict[str, tuple[str, float]],
               policies: dict[str, Policy], look: int, level: float = 0.95) -> dict[str, bool]:
    """For each experiment with a policy: whether it gets round ``look + 1``'s seeds, from the
    ledger of round ``look`` (``rules``: claim id -> (rule, margin))."""
    need = {"claim_id", "experiment", "effect", "effect_sd", "n_seeds"} - set(ledger)
    if need:
        raise ValueError(f"the ledger has no column {', '.join(sorted(need))}")
    out = {}
    for exp, policy in policies.items():
        rows = ledger[(ledger["experiment"] == exp) & ledger["claim_id"].isin(rules.keys())
                      & (ledger["n_seeds"] >= 2)]
        open_ = False
        for _, r in rows.iterrows():
            rule, margin = rules[r["claim_id"]]
            d = sequential.decide_summary(rule, r.get("effect_mean", r["effect"]), r["effect_sd"],
                                          int(r["n_seeds"]), policy.rounds, look, margin, level,
                                          policy.spending, r.get("effect_skew", 0.0))
            # the row's own verdict is the rule's (bnstudy.claims.decide.robust) at its look's
            # level; the summary's t part alone decides for a ledger without one
            decided = (outcomes.outcome(r["verdict"]) in outcomes.DECIDED
                       if isinstance(r.get("verdict"), str) else d.verdict in outcomes.DECIDED)
            open_ |= not (decided or d.final)
        out[exp] = open_
    return out
