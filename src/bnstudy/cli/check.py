"""The ``check`` verb: a study config checked before any job, what it runs, how long it should
take on this machine, what its replication budgets buy, and (``--cluster``, ``--cost-header``)
what its jobs ask a scheduler for."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def _runs(plan) -> str:
    """'N training runs', and with replication policies the most the rounds can add."""
    first = len(plan.runs)  # a replicated experiment's first round
    top = sum(plan.policies[e].arm_seeds(n) if e in plan.policies else len(x["seeds"])
              for e, x in plan.experiments.items() for n in x["norms"])
    return (f"{first} training runs" if top == first else
            f"{first} training runs in the first round, at most {top} after the replication "
            f"rounds")


def _time_here(plan) -> str:
    """How long the study should take on this machine (bnstudy.planning.cost.on_this_machine),
    in one line."""
    from bnstudy.planning import cost as study_cost
    from bnstudy.planning.budget import CALIBRATION
    from bnstudy.train import loop as training

    try:
        gpu = training.resolve_device(plan.config["device"]).type != "cpu"
    except ValueError:
        gpu = False
    cores = os.cpu_count() or 1
    t = study_cost.on_this_machine(plan, cores, gpu, CALIBRATION)
    where = f"{cores} CPU cores" + (" and a GPU" if gpu else ", no GPU")
    return (f"should take at most {study_cost.duration(t['wall'])} on this machine ({where}; "
            f"`snakemake --cores {cores}`: {t['jobs']} jobs, "
            f"{study_cost.duration(t['serial']).removeprefix('about ')} one at a time), "
            "estimated from FLOP counts and the cost model's conservative throughputs "
            f"(bnstudy.planning.cost) scaled by {CALIBRATION:.2f}, the default study's "
            "measured CPU time against the model's (bnstudy.planning.budget), every planned "
            "replication round and arm included")


def cmd_check(a) -> None:
    from bnstudy.config import study
    from bnstudy.planning import budget
    from bnstudy.planning import cost as study_cost
    from bnstudy.planning.plan import Plan

    if a.cost_header and (a.merge or a.all or not a.configfiles):
        raise ValueError("--cost-header rewrites the block of each config file it is given: "
                         "name the files, without --merge or --all")
    files = a.configfiles or ["config/config.yaml"]
    if a.all:
        files = [*files, *sorted(str(p) for p in Path("config/studies").glob("*.yaml"))]
    groups = [files] if a.merge else [[f] for f in dict.fromkeys(files)]
    bad = []
    for group in groups:
        name = " + ".join(map(str, group))
        try:
            cfg = study.check(study.load(group), local=not (a.cluster or a.cost_header))
        except (ValueError, FileNotFoundError) as e:
            if len(groups) == 1:
                raise
            print(f"{name}: error: {e}", file=sys.stderr)
            bad.append(name)
            continue
        plan = Plan(cfg)  # one plan per config: every line below reads it
        print(f"{name}: config OK ({len(cfg['experiments'])} experiments, {_runs(plan)})")
        if not (a.cluster or a.cost_header):
            print(f"{name}: {_time_here(plan)}")
        for line in budget.lines(plan):  # what the replication budget buys
            print(f"{name}: {line}")
        if a.cluster:  # what each rule's jobs ask a scheduler for (bnstudy.planning.job_resources)
            print(plan.resource_table())
        if a.cost_header:  # the header's generated cost block (bnstudy.planning.cost)
            changed = study_cost.rewrite(group[0], plan)
            print(f"{name}: cost block {'rewritten' if changed else 'up to date'}")
    if bad:
        raise ValueError(f"{len(bad)} of {len(groups)} configs failed: {', '.join(bad)}")

