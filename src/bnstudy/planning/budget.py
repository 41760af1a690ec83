"""What a replication budget costs, and what ``check`` prints about it.

A ``cpu_minutes`` budget (:mod:`bnstudy.replication.budget`) is turned into seeds per arm with
:func:`seed_minutes`: the cost model's CPU time (:func:`bnstudy.planning.resources.seconds`, on
the config's ``threads``, a local job's start :data:`bnstudy.planning.cost.LOCAL_START`) of one
seed of every arm of the experiment, its training runs and its measures, times
:data:`CALIBRATION`. It depends on the config alone (never on the machine that plans it), so the
looks are fixed before any data. It is an estimate for "this kind of machine", the 2-core
development VM the cost model's local figures describe, and an upper one: every arm is counted
in every round, where a later round trains only the arms its undecided rows compare.

:data:`CALIBRATION` scales the cost model's conservative CPU throughputs to the measured run of
the default study (2026-12-06, 283 jobs, 16.4 CPU-min of user time and 1.3 of system time on the
slower of the two development VMs; ``benchmarks/README.md``, which also records its recheck on
the smaller default study of 096a775: 0.62). The cost model's CPU time of the jobs that run
actually ran (training and measure jobs of the rounds taken, the arms each round trained,
:func:`taken_minutes`, its shipped round files read) is 30.6 CPU-min against the whole study's
measured 17.7 (``python benchmarks/bench_budget.py`` prints the model's figure): the factor
17.7 / 30.6 = 0.58. The measured figure includes the tables, figures and report, so the factor
is if anything too high (an upper estimate still). One factor for every job kind: the
measurement has no per-stage split.
"""

from __future__ import annotations

from bnstudy.planning import cost, resources

CALIBRATION = 17.7 / 30.6  # measured CPU-min / the cost model's, the default study (see above)


def _cpu_seconds(work: resources.Work, threads: int) -> float:
    """CPU-seconds of one local job of ``work`` on ``threads`` threads (its start the fork
    server's, :data:`bnstudy.planning.cost.LOCAL_START`)."""
    secs = resources.seconds(work, False, threads) - resources.START_SECONDS + cost.LOCAL_START
    return secs * threads


def experiment_measures(plan, experiment: str) -> list[str]:
    return [m for m in plan.measures if experiment in plan.measure_experiments(m)]


def arms_minutes(plan, experiment: str, norms, seeds: int = 1) -> float:
    """The cost model's CPU-minutes (uncalibrated) of ``seeds`` seeds of the arms ``norms``:
    a train job of one seed per arm and seed (no credit for batching), each measure's block
    over them."""
    threads = max(1, int(plan.config["threads"]))
    total = 0.0
    for norm in norms:
        work = plan.job_work("train", {"experiment": experiment, "norm": norm, "block": "0"})
        total += seeds * _cpu_seconds(work, threads)
    if norms:
        size, n_train, n_te, training = plan._experiment(experiment)
        for m in experiment_measures(plan, experiment):
            opts = plan._measure_options(m)
            work = resources.measure_work(m, opts, size, n_train, n_te, training)
            total += _cpu_seconds(work.times(len(norms) * seeds), threads)
    return total / 60


def seed_minutes(plan, experiment: str) -> float:
    """CPU-minutes one seed of every arm of ``experiment`` costs (see the module docstring)."""
    return CALIBRATION * arms_minutes(plan, experiment, plan.experiments[experiment]["norms"])


def look_minutes(plan, experiment: str, seeds: int) -> float:
    """CPU-minutes (calibrated) of ``experiment`` at a look of ``seeds`` seeds per arm, every
    arm counted, an arm with a budget of its own (the policy's ``arms``) at most at it."""
    x, policy = plan.experiments[experiment], plan.policies[experiment]
    if not policy.arms:
        return seeds * seed_minutes(plan, experiment)
    return CALIBRATION * sum(min(seeds, policy.arm_seeds(n))
                             * arms_minutes(plan, experiment, [n]) for n in x["norms"])


def taken_minutes(plan) -> float:
    """The cost model's CPU-minutes (uncalibrated) of the training and measure jobs the study
    ran, its round files read: each block of seeds on the arms that block trained."""
    total = 0.0
    for e, x in plan.experiments.items():
        norms = plan.block_norms(e) if e in plan.policies else [x["norms"]]
        for block, arms in zip(plan.blocks(e), norms, strict=False):
            total += arms_minutes(plan, e, arms, len(block))
    return total


def lines(plan) -> list[str]:
    """What ``check`` prints about the study's replication: each replicated experiment's
    budget, its looks, seeds per arm and estimated CPU-minutes at each look."""
    if not plan.policies:
        return ["replication: none (every experiment runs its declared seeds)"]
    out, total = [], 0.0
    for e, p in plan.policies.items():
        per = seed_minutes(plan, e)
        if p.budget:
            kind, amount = p.budget
            said = (f"{amount} seeds per arm" if kind == "seeds"
                    else f"{amount:g} CPU-minutes (one seed of every arm: about {per:.2g})")
            head = f"budget {said}"
        else:
            head = "rounds as listed (no budget)"
        looks = ", ".join(f"{n} seeds/arm ~{look_minutes(plan, e, n):.1f} CPU-min"
                          for n in p.rounds)
        own = "".join(f"; {norm} at most {n} seeds (its own budget)" for norm, n in p.arms)
        out.append(f"replication {e}: {head}; {len(p.rounds)} looks: {looks}{own}")
        total += look_minutes(plan, e, p.rounds[-1])
    out.append(f"replication in all: at most ~{total:.0f} CPU-min of training and measures at "
               "every replicated experiment's last look, every arm (the cost model's estimate "
               "for this kind of machine, the 2-core development VM, scaled by "
               f"{CALIBRATION:.2f}: bnstudy.planning.budget)")
    return out
