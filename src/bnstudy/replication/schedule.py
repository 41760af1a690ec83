"""The replication rounds of a study's plan: which seeds each replicated experiment holds.

An experiment with a replication policy (:mod:`bnstudy.replication.policy`) starts with its
first round's seeds; after round ``k`` the ``replication_round`` checkpoint records which
experiments go on (:mod:`bnstudy.replication.rounds`), and this mixin of
:class:`bnstudy.planning.plan.Plan` reads those records back in order (:meth:`Rounds.looks`): the
seeds
and blocks of every experiment at any round's state, the round files a job depends on, and a
round job's inputs and arguments. The records are read through a reader the workflow sets
(:meth:`Rounds.use_rounds`: Snakemake's checkpoint, which runs a missing round first); plain
Python reads the files under ``<results>/rounds/``.
"""

from __future__ import annotations

import json
from functools import cached_property

from bnstudy.claims.declare import reads
from bnstudy.replication.policy import Policy, policies


def _json(value) -> str:
    return json.dumps(value, sort_keys=True)


class Rounds:
    """Needs ``config``, ``experiments``, :meth:`res`, :attr:`tables`, :meth:`table_inputs`,
    :meth:`table_file`, :meth:`table_level`, :meth:`table_experiments` and :meth:`grid` of the
    plan it is mixed into."""

    def round_file(self, k) -> str:
        return self.res("rounds", f"round{k}.json")

    @cached_property
    def policies(self) -> dict[str, Policy]:
        """The replication policy of each experiment that has one (its own ``replication``, else
        the study's: :func:`bnstudy.replication.policy.policies`; a ``cpu_minutes`` budget
        priced by the plan's :meth:`seed_minutes`)."""
        return policies(self.config, getattr(self, "seed_minutes", None))

    def plans(self) -> dict:
        """``{experiment: {"rounds", "spending"}}`` of the replicated experiments (JSON-able),
        with ``"arms"`` (normalizer -> its own budget) where the policy gives an arm one."""
        return {e: {"rounds": list(p.rounds), "spending": p.spending,
                    **({"arms": dict(p.arms)} if p.arms else {})}
                for e, p in self.policies.items()}

    def use_rounds(self, reader) -> None:
        """Read round ``k``'s record with ``reader(k)`` (the workflow's reader goes through
        Snakemake's checkpoint, which schedules the round when its file is missing)."""
        self._reader = reader

    @staticmethod
    def read_round(path: str) -> dict:
        from bnstudy.replication.rounds import read

        return read(path)

    def _read_round_file(self, k) -> dict:
        return self.read_round(self.round_file(k))

    def _walk(self, upto: int | None = None) -> tuple[dict[str, int], list[int], set[str]]:
        """(each replicated experiment's look, the rounds read, the experiments still open):
        the rounds' records read in order while an experiment goes on (or for ``upto``
        rounds). A record may take an experiment past several looks at once (its
        ``next_look``: :func:`bnstudy.replication.budget.next_look`); an older record without
        one goes to the next look. Every experiment's last look has a round too (it decides
        nothing; it records the verdicts it stopped with)."""
        look = {e: 0 for e in self.policies}
        open_, read, k = set(self.policies), [], 0
        while open_ and (upto is None or k < upto):
            record = self._reader(k)
            read.append(k)
            for e in sorted(open_):
                last = look[e] == len(self.policies[e].rounds) - 1
                x = record["experiments"].get(e, {})
                if x.get("continue") and not last:
                    look[e] = min(max(int(x.get("next_look", look[e] + 1)), look[e] + 1),
                                  len(self.policies[e].rounds) - 1)
                else:
                    open_.discard(e)
            k += 1
        return look, read, open_

    def looks(self) -> dict[str, int]:
        """The look each replicated experiment stopped at (reading every round it took)."""
        return self._walk()[0]

    def round_files(self) -> list[str]:
        """The round files of every round the study takes."""
        return [self.round_file(k) for k in self._walk()[1]]

    def seeds(self, experiment: str, look: int | None = None) -> list[int]:
        """An experiment's seeds: declared, or its policy's at ``look`` (default: its last)."""
        x = self.experiments[experiment]
        policy = self.policies.get(experiment)
        if policy is None:
            return list(x["seeds"])
        return policy.seeds(x["seeds"], self.looks()[experiment] if look is None else look)

    def blocks(self, experiment: str, look: int | None = None) -> list[list[int]]:
        """The experiment's blocks of seeds up to ``look``: one per round (its new seeds)."""
        policy = self.policies.get(experiment)
        if policy is None:
            return [self.seeds(experiment)]
        look = self.looks()[experiment] if look is None else look
        seeds = policy.seeds(self.experiments[experiment]["seeds"], look)
        ends = policy.rounds[: look + 1]
        return [seeds[a:b] for a, b in zip((0, *ends[:-1]), ends, strict=True)]

    def planned_blocks(self, experiment: str) -> list[list[int]]:
        """Every block of seeds the experiment can have, all its planned rounds taken (no round
        file is read): what a measure job may be asked for, what a cluster may run."""
        policy = self.policies.get(experiment)
        return self.blocks(experiment, None if policy is None else len(policy.rounds) - 1)

    def block_norms(self, experiment: str, look: int | None = None) -> list[list[str]]:
        """The normalizers of each of the experiment's blocks up to ``look``: every one of its
        normalizers in the first block; in round ``k + 1``'s block, the arms that round ``k``'s
        undecided rows compare (its record's ``norms``; every look a round added takes that
        round's), so a round trains no arm that no undecided row reads (the default study's
        LayerNorm arm), and no arm beyond its own budget (the policy's ``arms``)."""
        norms = list(self.experiments[experiment]["norms"])
        if experiment not in self.policies:
            return [norms]
        look = self.looks()[experiment] if look is None else look
        added = self._added(experiment, look)
        policy = self.policies[experiment]
        out = [norms]
        for j in range(1, look + 1):
            arms = self._reader(added.get(j, j - 1))["experiments"].get(experiment, {}).get(
                "norms")
            # an arm takes no look beyond its own budget (the policy's arms)
            out.append([n for n in norms if (not arms or n in arms)
                        and policy.arm_seeds(n) >= policy.rounds[j]])
        return out

    def _added(self, experiment: str, look: int) -> dict[int, int]:
        """``{look: round}``: the round whose record took ``experiment`` to each of its looks
        1 .. ``look`` (reading only those rounds' records: a round's own arguments may ask)."""
        last = len(self.policies[experiment].rounds) - 1
        added, at, k = {}, 0, 0
        while at < min(look, last):
            x = self._reader(k)["experiments"].get(experiment, {})
            if not x.get("continue"):
                break
            to = min(max(int(x.get("next_look", at + 1)), at + 1), last)
            added.update({j: k for j in range(at + 1, to + 1)})
            at, k = to, k + 1
        return added

    def state(self, k: int) -> dict[str, int]:
        """The looks of the study's state at round ``k``: open experiments at the look the
        rounds before ``k`` took them to, the others at the look they stopped at."""
        return self._walk(upto=k)[0]

    @cached_property
    def max_rounds(self) -> int:
        return max((len(p.rounds) for p in self.policies.values()), default=0)

    def job_rounds(self, job: str) -> list[str]:
        """The round files a job's arguments are read from (the seeds the rounds added)."""
        if not self.policies:
            return []
        if job.startswith("aggregate_"):
            return self.round_files()
        if job.startswith("round") and job[5:].isdigit():
            return [self.round_file(k) for k in self._walk(upto=int(job[5:]))[1]]
        return []

    @property
    def round_tables(self) -> list[str]:
        """The tables a round's ledger reads (:data:`bnstudy.claims.declare.reads.TABLES`), not the
        figure-only ones."""
        return [t for t in self.tables if t in reads.TABLES]

    def round_inputs(self, k: int) -> list[str]:
        """Every part of the ledger's tables at round ``k``'s state (the round's ledger reads
        them)."""
        looks = self.state(k)
        return [f for t in self.round_tables for f in self.table_inputs(t, looks)]

    def round_arguments(self, k: int) -> list[str]:
        looks, _, open_ = self._walk(upto=k)
        spec = {t: {"file": self.table_file(t), "level": self.table_level(t),
                    "experiments": self.table_experiments(t)} for t in self.round_tables}
        return ["--grid", _json(self.grid(self.experiments, looks)), "--tables", _json(spec),
                "--plans", _json(self.plans()), "--open", _json(sorted(open_))]
