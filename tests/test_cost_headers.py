"""The paper configs' cost headers are generated from FLOP counts and kept current.

Each ``config/studies/*_paper.yaml`` carries a block between :data:`bnstudy.planning.cost.BEGIN`
and :data:`~bnstudy.planning.cost.END` that ``python -m bnstudy check --cluster --cost-header``
writes: the study's estimated GPU- and CPU-hours per stage (the cluster requests' work
estimates without margin, floors or caps) beside what ``check --cluster`` requests. These tests
check that the shipped blocks are what the code computes now, that the rewrite touches nothing
else, that the numbers are the hand computation from a model's multiply-accumulates at the
stated throughput, and that population normalization's refreshes are counted in training.
"""

from __future__ import annotations

import copy
import math
import re
import shutil
from functools import cache

import harness
import pytest

from bnstudy import data, model_size
from bnstudy.cli import main as cli
from bnstudy.config import study
from bnstudy.config.loader import ConfigError
from bnstudy.planning import cost as study_cost
from bnstudy.planning import resources
from bnstudy.planning.plan import Plan

STUDIES = harness.REPO / "config" / "studies"
PAPERS = ("santurkar_paper.yaml", "balestriero_paper.yaml", "luo_paper.yaml")


@cache
def _paper_plan(name: str) -> Plan:
    return Plan(study.check(study.load([str(STUDIES / name)]), local=False))


@cache
def _paper_block(name: str) -> str:
    """The cost block the code computes for paper config ``name`` (once per test process)."""
    return study_cost.block(_paper_plan(name))


def _shipped_block(text: str) -> str:
    lines = text.splitlines(keepends=True)
    bare = [line.rstrip("\n") for line in lines]
    begin, end = bare.index(study_cost.BEGIN), bare.index(study_cost.END)
    return "".join(lines[begin:end + 1])


@pytest.mark.parametrize("name", PAPERS)
def test_each_paper_configs_cost_block_is_what_the_code_computes_now(name):
    text = (STUDIES / name).read_text(encoding="utf-8")
    assert study_cost.BEGIN in text, f"{name} has no cost block"
    rerun = f"python -m bnstudy check --cluster --cost-header config/studies/{name}"
    assert _shipped_block(text) == _paper_block(name), (
        f"the cost block of config/studies/{name} is stale; rerun: {rerun}")


@pytest.mark.parametrize("name", PAPERS)
def test_the_block_states_the_requested_totals_check_cluster_prints(name, capsys):
    assert cli.main(["check", "--cluster", str(STUDIES / name)]) == 0
    out = capsys.readouterr().out
    gpu, cpu = re.search(r"requested in all: ([\d.]+) GPU-hours, ([\d.]+) CPU-hours",
                         out).groups()
    block = " ".join(_paper_block(name).replace("#", " ").split())
    assert f"requests {gpu} GPU-hours and {cpu} CPU-hours in all" in block, block
    assert f"{resources.GPU_FLOPS / 1e12:g} TFLOP/s float32" in block  # the throughput assumed


@pytest.mark.parametrize("name", PAPERS)
def test_the_readme_states_each_blocks_total(name):
    """studies/README.md's table of studies quotes each paper config's estimated GPU-hours and its
    requests: the numbers the block (checked above against the code) states."""
    block = " ".join(_paper_block(name).replace("#", " ").split())
    total = re.search(r" total +\d+ +[\d.]+ +([\d.]+) ", block).group(1)
    gpu = re.search(r"requests ([\d.]+) GPU-hours", block).group(1)
    study_name = name.removesuffix("_paper.yaml")
    row = next(line for line in (harness.REPO / "studies" / "README.md").read_text().splitlines()
               if line.startswith(f"| `{study_name}` |"))
    assert f"{total} GPU-hours estimated" in row and f"(requests: {gpu})" in row, (
        f"README's `{study_name}` row should quote {total} GPU-hours estimated "
        f"(requests: {gpu}): {row[-200:]}")


def test_the_rewrite_is_idempotent_and_keeps_every_other_byte(tmp_path, capsys):
    shutil.copy(STUDIES / "luo.yaml", tmp_path / "luo.yaml")  # the extends: target
    path = tmp_path / "luo_paper.yaml"
    shipped = (STUDIES / "luo_paper.yaml").read_bytes()
    stale = shipped.replace(b"#   total ", b"#   total 1", 1)
    assert stale != shipped
    path.write_bytes(stale)
    assert cli.main(["check", "--cost-header", str(path)]) == 0
    assert path.read_bytes() == shipped, "the rewrite must change the block and nothing else"
    assert "cost block rewritten" in capsys.readouterr().out
    assert cli.main(["check", "--cluster", "--cost-header", str(path)]) == 0
    assert path.read_bytes() == shipped and "cost block up to date" in capsys.readouterr().out


def test_a_block_is_inserted_after_the_first_paragraph_and_nothing_else_moves(tmp_path):
    para = "# A study.\r\n# Its second line.\r\n"  # Windows line ends: kept, and followed
    rest = "#\r\n# Another paragraph.\r\n\r\nresults: results/x   # as is\r\nthreads:    1\r\n"
    path = tmp_path / "study.yaml"
    path.write_bytes((para + rest).encode())
    plan = Plan(study.check(copy.deepcopy(harness.tiny_config()), local=False))
    assert study_cost.rewrite(path, plan) is True
    first = path.read_bytes().decode()
    block = study_cost.block(plan).replace("\n", "\r\n")
    assert first == para + "#\r\n" + block + rest
    assert study_cost.rewrite(path, plan) is False and path.read_bytes().decode() == first


@pytest.mark.parametrize("text, named", [
    (f"# x\n{study_cost.BEGIN}\n{study_cost.BEGIN}\n{study_cost.END}\n", "2 begin and 1 end"),
    (f"# x\n{study_cost.END}\n{study_cost.BEGIN}\n", "1 begin and 1 end"),
    ("results: x\n", "first line is a comment"),
])
def test_a_malformed_file_is_refused_naming_it(text, named, tmp_path):
    with pytest.raises(ConfigError, match=re.escape(named)) as err:
        study_cost.with_block(text, "new\n", "some.yaml")
    assert "some.yaml" in str(err.value)


@pytest.mark.parametrize("args", [["--merge", "a.yaml", "b.yaml"], ["--all", "a.yaml"], []])
def test_cost_header_needs_the_files_it_rewrites(args, capsys):
    assert cli.main(["check", "--cost-header", *args]) == 2
    assert "--cost-header rewrites the block of each config file" in capsys.readouterr().err


# -- the numbers, by hand -----------------------------------------------------------------------

# The tiny study's star MLP (depth 3, width 16) on star2d's 2-D inputs with 2 classes: its MACs
# and activations per sample, counted by hand.
MACS = 2 * 16 + 16 * 16 + 16 * 16 + 16 * 2  # 576
ACTIVATIONS = 3 * (16 + 16 + 16) + 2  # each block's linear, norm (identity) and ReLU; the head
# one forward sample (bnstudy.planning.resources: 4 per activation)
FLOPS = 2 * MACS + 4 * ACTIVATIONS
BYTES = 4 * (2 + ACTIVATIONS)  # its input and activations, float32
N_TRAIN = N_TEST = 64
STEPS, BATCH, EVALS = 20, 16, 20 // 5 + 1


def _star_plan(norms=("none", "batchnorm"), pn=None) -> Plan:
    """The tiny study's star experiment alone, its train jobs on a GPU (a ``resources:``
    override: the estimate alone would keep so small a job on the CPU)."""
    cfg = harness.only_experiments(copy.deepcopy(harness.tiny_config()), "star")
    cfg["experiments"]["star"]["norms"] = list(norms)
    if pn is not None:
        cfg["models"]["mlp"]["norm_options"] = {"population_norm": pn}
    cfg.update(device="auto", resources={"train": {"gpu": 1}})
    return Plan(study.check(cfg, local=False))


def _stage(plan, name):
    return {s.name: s for s in study_cost.stages(plan)}[name]


def test_per_stage_hours_are_the_hand_computation_from_the_macs():
    cfg = harness.tiny_config()
    star = cfg["datasets"]["star2d"]
    assert data.shape(star["kind"], star["options"]) == ((2,), 2)
    size = model_size.size(cfg["models"]["mlp"], (2,), 2)
    assert (size.macs, size.activations) == (MACS, ACTIVATIONS)
    plan = _star_plan()
    r = resources
    runs, jobs = 2 * 2, 2  # norms x seeds; a train job per norm (its block of 2 seeds)
    # a run: its steps (forward + backward of a batch) and 5 evaluations of both splits
    passes = STEPS * BATCH * 3 + EVALS * (N_TRAIN + N_TEST)
    calls = STEPS + EVALS * math.ceil((N_TRAIN + N_TEST) / r.EVAL_CHUNK)
    gpu_s = (r.START_SECONDS + r.GPU_START_SECONDS + 2 * calls * r.CALL_SECONDS
             + 2 * passes * (FLOPS / r.GPU_FLOPS + BYTES / r.GPU_BYTES))  # a job of 2 runs
    train = _stage(plan, "train")
    assert train.jobs == jobs
    assert train.flops == pytest.approx(runs * passes * FLOPS)
    assert train.gpu_hours == pytest.approx(jobs * gpu_s / 3600)
    assert train.cpu_hours == pytest.approx(jobs * gpu_s / 3600)  # 1 thread held per job
    # generalization (running BN statistics): one pass over both splits per run, on the CPU
    ckpts = len({0, 1, 10, STEPS})
    g_passes, g_calls = runs * (N_TRAIN + N_TEST), runs * (2 + ckpts)
    cpu_s = (r.START_SECONDS + g_calls * r.CALL_SECONDS
             + g_passes * (FLOPS / r.CPU_FLOPS + BYTES / r.CPU_BYTES))
    gen = _stage(plan, "generalization")
    assert (gen.jobs, gen.gpu_hours) == (1, 0.0)
    assert gen.flops == pytest.approx(g_passes * FLOPS)
    assert gen.cpu_hours == pytest.approx(cpu_s / 3600)
    rows = study_cost.stages(plan)
    assert [s.name for s in rows] == ["train", *plan.measures, study_cost.REST]
    assert all(s.flops > 0 for s in rows[:-1]), rows  # every measure's FLOPs are counted


@pytest.mark.parametrize("every", [1, 5, 10])
def test_pn_refreshes_are_counted_in_training_and_scale_with_1_over_refresh_every(every):
    plan = _star_plan(("none", "population_norm"), {"n_samples": 32, "refresh_every": every})
    refresh = _stage(plan, study_cost.REFRESH_ROW)
    refreshes = STEPS // every + 1  # before steps 0, every, ..., STEPS (bnstudy.train.loop)
    flops = 2 * refreshes * 32 * resources.REFRESH * FLOPS  # 2 seeds of the PN arm
    assert refresh.jobs == 1 and refresh.flops == pytest.approx(flops)  # the PN arm: one job
    train = _stage(plan, "train")
    assert train.flops == pytest.approx(4 * (STEPS * BATCH * 3 + EVALS * 128) * FLOPS + flops)
    assert 0 < refresh.gpu_hours < train.gpu_hours
    assert study_cost.REFRESH_ROW in study_cost.block(plan)
    assert study_cost.REFRESH_ROW not in study_cost.block(_star_plan())
