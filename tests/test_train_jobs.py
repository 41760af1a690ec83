"""bnstudy.planning.training: train jobs are blocks of one arm's seeds (of one replication
round), at most ``training_block`` each, with each seed's files where they always were."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bnstudy.config import study
from bnstudy.config.loader import ConfigError
from bnstudy.planning import resources, training
from bnstudy.planning.plan import Plan
from bnstudy.tables import layout

ROOT = Path(__file__).resolve().parents[1]


def _plan(**top) -> Plan:
    cfg = study.load([ROOT / "config/config.yaml"])
    cfg.update(top)
    return Plan(study.check(cfg, local=False))


def test_chunks_are_balanced_consecutive_and_at_most_the_block_size():
    assert training.chunks(range(5), 16) == [[0, 1, 2, 3, 4]]
    assert training.chunks(range(17), 16) == [list(range(9)), list(range(9, 17))]
    assert training.chunks([3, 4, 5, 6], 1) == [[3], [4], [5], [6]]
    assert training.chunks([], 4) == []
    for n in range(1, 40):
        for size in (1, 2, 3, 7, 16):
            parts = training.chunks(range(n), size)
            assert [s for p in parts for s in p] == list(range(n))
            assert max(map(len, parts)) <= size and len(parts) == -(-n // size)
            assert max(map(len, parts)) - min(map(len, parts)) <= 1


@pytest.mark.parametrize("size", [1, 2, 16])
def test_train_jobs_cover_every_planned_run_once(size):
    plan = _plan(training_block=size)
    runs = sorted((e, n, s) for e, n, seeds in plan.train_jobs.values() for s in seeds)
    planned = sorted((e, n, s) for e, x in plan.experiments.items() for n in x["norms"]
                     for b in plan.planned_blocks(e) for s in b)
    assert runs == planned and len(set(runs)) == len(runs)
    for name, (e, n, seeds) in plan.train_jobs.items():
        assert name.startswith(training.PREFIX) and name.isidentifier() and len(seeds) <= size
        # within one replication round's block: a round trains only its new seeds
        assert any(set(seeds) <= set(b) for b in plan.planned_blocks(e))
        out = plan.train_outputs(name)
        assert out["checkpoints"] == [plan.run_file(e, n, s, "checkpoints.pt") for s in seeds]
        assert out["history"] == [plan.run_file(e, n, s, "history.parquet") for s in seeds]
        params = plan.train_params(name)
        assert [int(__import__("json").loads(p)["seed"]) for p in params["specs"]] == seeds
        assert params["specs"] == [plan.run_spec(e, n, s) for s in seeds]


def test_a_train_rule_is_sized_as_its_block():
    plan = _plan(training_block=2)
    name, (e, n, seeds) = next((k, v) for k, v in plan.train_jobs.items() if len(v[2]) == 2)
    wild = {"experiment": e, "norm": n, "block": layout.seeds_label(seeds)}
    assert plan.train_wildcards(name) == wild
    assert plan.job_resources(name, {}) == plan.job_resources("train", wild)
    one = plan.job_work("train", {**wild, "block": str(seeds[0])})
    two = plan.job_work("train", wild)
    assert two.passes == 2 * one.passes and two.device_bytes == 2 * one.device_bytes


def test_job_counts_count_train_jobs(tmp_path):
    """The default study as its recorded rounds left it (studies/default, copied into a marked
    results folder): every block of seeds it took is at most 12 seeds, so one train job per arm
    and block at 16, one per run at 1."""
    res = tmp_path / "results"
    shutil.copytree(ROOT / "studies/default/rounds", res / "rounds")
    (res / ".bnstudy-results").touch()
    small, big = (_plan(training_block=k, results=str(res), results_anywhere=True)
                  for k in (1, 16))
    grid = big.grid(big.experiments)
    runs = len(layout.grid_files(big.results, grid, "x"))
    assert small.job_counts()["train"] == runs
    assert big.job_counts()["train"] == sum(len(norms) for g in grid.values()
                                            for norms in g["block_norms"]) < runs


@pytest.mark.parametrize("bad", [0, -1, "16", 1.5])
def test_a_bad_training_block_is_refused_in_one_line(bad):
    with pytest.raises(ConfigError, match="training_block") as err:
        _plan(training_block=bad)
    assert "\n" not in str(err.value).strip()


def test_longer_blocks_have_higher_priority():
    """A train rule's Snakemake priority is its block's estimated CPU-seconds: of the blocks a
    round makes ready at once, the longest start first. luo's §5: PN's block (its statistics
    re-estimated every 20 steps) before BN's of the same seeds, BN's ResNet18 before its CNN,
    ten seeds before five."""
    cfg = study.load([ROOT / "config/config.yaml", ROOT / "config/studies/luo.yaml"])
    plan = Plan(study.check(cfg, local=False))
    pri = {plan.train_jobs[k][:2] + (len(plan.train_jobs[k][2]),): plan.train_priority(k)
           for k in plan.train_jobs}
    assert all(isinstance(v, int) and v >= 1 for v in pri.values())
    pn, bn = pri[("resnet18_m128", "population_norm", 5)], pri[("resnet18_m128", "batchnorm", 5)]
    assert pn > 1.5 * bn
    assert bn > pri[("cnn", "batchnorm", 5)]
    assert pri[("resnet18_m128", "batchnorm", 10)] > bn
    # the order follows the cost model's estimate exactly (no second ranking to drift from it)
    for name in plan.train_jobs:
        work = plan.job_work("train", plan.train_wildcards(name))
        assert plan.train_priority(name) == max(1, round(resources.seconds(work, False, 1)))
