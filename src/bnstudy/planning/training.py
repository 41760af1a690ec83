"""Train jobs as blocks of seeds: which exist, what each trains and writes.

A train job trains a block of one arm's seeds (an experiment's normalizer) in one process
(``python -m bnstudy train --spec S1 S2 ...``, :func:`bnstudy.train.loop.train_block`): the
experiment's seeds (with a replication policy, one round's new seeds:
:meth:`bnstudy.replication.schedule.Rounds.planned_blocks`) cut into chunks of at most the
config's ``training_block`` seeds. Each seed's files stay per run
(``runs/<experiment>/<norm>/seed<s>/``), so measures, tables and the ledger read them unchanged.

Snakemake wants every output of a rule to carry all its wildcards, so ``workflow/rules/train.smk``
declares one rule per planned block (every block any replication round could schedule, each arm
of its experiment: a round's arms are known only once the round before it is done), named
``train_<experiment>_<norm>_s<seeds>``
(:data:`PREFIX`; seeds 0-15 as ``s0to15``), with concrete per-seed outputs.
Resources, costs and counts see these jobs as the stage ``train`` with the wildcards
``{"experiment", "norm", "block"}`` (:meth:`Training.train_wildcards`).
"""

from __future__ import annotations

import re
from functools import cached_property

from bnstudy.planning import resources
from bnstudy.tables import layout

PREFIX = "train_"  # every train rule's name starts with it (snakemake --list-rules | grep)
DEFAULT_BLOCK = 16  # benchmarks/bench_seeds.py: the config schema's default of training_block


def chunks(seeds, size: int) -> list[list[int]]:
    """``seeds`` in order, cut into consecutive chunks of at most ``size`` (balanced: sizes
    differ by at most one, so 17 seeds at 16 are 9 + 8, not 16 + 1)."""
    seeds = list(seeds)
    if size < 1:
        raise ValueError(f"training_block must be a positive integer, got {size!r}")
    n = -(-len(seeds) // size) if seeds else 0
    out, start = [], 0
    for i in range(n):
        k = len(seeds) // n + (i < len(seeds) % n)
        out.append(seeds[start:start + k])
        start += k
    return out


def rule_name(experiment: str, norm: str, seeds) -> str:
    """A train rule's name: a Python identifier (Snakemake's rule names) naming the block."""
    raw = f"{PREFIX}{experiment}_{norm}_s{layout.seeds_label(seeds).replace('-', 'to')}"
    return re.sub(r"\W", "_", raw)


class Training:
    """Mixin of :class:`bnstudy.planning.plan.Plan`: its train jobs."""

    @property
    def training_block(self) -> int:
        return int(self.config.get("training_block", DEFAULT_BLOCK))

    def train_blocks(self, experiment: str, seeds) -> list[list[int]]:
        """One round's (or an unreplicated experiment's) seeds, as train jobs' blocks."""
        return chunks(seeds, self.training_block)

    @cached_property
    def train_jobs(self) -> dict[str, tuple[str, str, list[int]]]:
        """``{rule name: (experiment, norm, seeds)}`` of every train job any round could run."""
        out: dict[str, tuple[str, str, list[int]]] = {}
        for e, x in self.experiments.items():
            for n in x["norms"]:
                for block in self.planned_blocks(e):
                    for seeds in self.train_blocks(e, block):
                        name = rule_name(e, n, seeds)
                        if name in out:
                            raise ValueError(f"train rule name {name!r} is not unique: rename "
                                             f"experiment {e!r} or normalizer {n!r}")
                        out[name] = (e, n, seeds)
        return out

    def train_wildcards(self, name: str) -> dict:
        """The stage-``train`` wildcards of a train rule (resources, costs)."""
        e, n, seeds = self.train_jobs[name]
        return {"experiment": e, "norm": n, "block": layout.seeds_label(seeds)}

    def train_outputs(self, name: str) -> dict[str, list[str]]:
        e, n, seeds = self.train_jobs[name]
        return {f: [self.run_file(e, n, s, f"{f}.{ext}") for s in seeds]
                for f, ext in (("checkpoints", "pt"), ("history", "parquet"))}

    def train_params(self, name: str) -> dict:
        """A train job's params: its runs' specs and resume files, its code version."""
        e, n, seeds = self.train_jobs[name]
        return {"specs": [self.run_spec(e, n, s) for s in seeds],
                "resume": [self.run_file(e, n, s, "resume.pt") for s in seeds],
                "code": self.train_code(n, self.experiments[e]["model"])}

    def train_priority(self, name: str) -> int:
        """A train job's Snakemake ``priority``: the cost model's CPU-seconds of its block
        (:func:`bnstudy.planning.resources.seconds`, at least 1). Of the jobs ready at once (a
        replication round's blocks), Snakemake starts the highest first, so the longest blocks
        start first (longest-processing-time scheduling) and a long block left last does not
        keep a round waiting on one core while the others idle. Only the order of jobs changes:
        a seed's numbers never depend on when its block runs."""
        work = self.job_work("train", self.train_wildcards(name))
        return max(1, round(resources.seconds(work, False, max(1, int(self.config["threads"])))))

    def train_log(self, name: str) -> str:
        e, n, seeds = self.train_jobs[name]
        return self.log("train", e, n, f"seeds{layout.seeds_label(seeds)}.log")

    def train_job_count(self, grid: dict) -> int:
        """How many train jobs the runs of ``grid`` (:meth:`grid`: blocks and their arms) take."""
        return sum(len(self.train_blocks(e, b)) * len(norms)
                   for e, g in grid.items()
                   for b, norms in zip(g["blocks"], g["block_norms"], strict=True))
