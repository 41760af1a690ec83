"""Each job's cluster request (GPU, memory, time) is estimated from the study and overridable.

The estimate (:mod:`bnstudy.planning.resources`, :mod:`bnstudy.planning.job_resources`) grows with
the model,
the training length and a measure's options; a job asks for a GPU only when it is long on the
CPU and the study's device is not cpu; the config's ``resources:`` replaces it per rule; and the
Snakefile passes exactly the plan's requests to Snakemake (a dry run's job listing).
"""

from __future__ import annotations

import copy
import re

import harness
import pytest
import yaml

from bnstudy import model_size
from bnstudy.cli import main as cli
from bnstudy.config import resource_checks, study
from bnstudy.config.loader import ConfigError
from bnstudy.planning import resources
from bnstudy.planning.plan import Plan

SANTURKAR = harness.REPO / "config" / "studies" / "santurkar_paper.yaml"
STAR_RUN = {"experiment": "star", "norm": "none", "block": "0"}  # a train job of one seed
STAR_BLOCK = {"experiment": "star", "block": "0-1"}


def _plan(edit=None, **top) -> Plan:
    """The tiny study's plan, ``edit(cfg)`` applied and top-level keys replaced."""
    cfg = copy.deepcopy(harness.tiny_config())
    cfg.update(top)
    if edit is not None:
        edit(cfg)
    return Plan(study.check(cfg, local=False))


def _big(width=2048, steps=50000):
    """The star experiment with a wide MLP trained long (batch 64): hours on a CPU core."""
    def edit(cfg):
        cfg["models"]["mlp"].update(width=width, depth=6)
        cfg["trainings"]["sgd"].update(steps=steps, batch_size=64, eval_every=1000,
                                       checkpoints=[0, 1, 10, 1000])
    return edit


def _requests(plan: Plan) -> dict:
    return {(rule, tuple(sorted(w.items()))): plan.job_resources(rule, w)
            for rule, jobs in plan.resource_jobs().items() for w in jobs}


def test_a_bigger_model_asks_for_more_time_and_memory():
    small, big = _plan(_big(width=512), device="cpu"), _plan(_big(width=2048), device="cpu")
    a, b = small.job_resources("train", STAR_RUN), big.job_resources("train", STAR_RUN)
    assert b["runtime"] > a["runtime"] > resources.RUNTIME_FLOOR, (a, b)
    assert b["mem_mb"] > a["mem_mb"] > resources.MEM_FLOOR, (a, b)
    for rule in ("partition_density", "smoothness", "ics"):  # minutes: at the runtime floor
        a, b = small.job_resources(rule, STAR_BLOCK), big.job_resources(rule, STAR_BLOCK)
        assert b["runtime"] >= a["runtime"] and b["mem_mb"] > a["mem_mb"], (rule, a, b)
        slow, fast = (resources.seconds(p.job_work(rule, STAR_BLOCK), gpu=False)
                      for p in (big, small))
        assert slow > fast, (rule, slow, fast)


def test_more_steps_ask_for_more_time():
    short, long = _plan(_big(steps=50000), device="cpu"), _plan(_big(steps=200000), device="cpu")
    a, b = short.job_resources("train", STAR_RUN), long.job_resources("train", STAR_RUN)
    assert b["runtime"] > a["runtime"] and b["mem_mb"] >= a["mem_mb"], (a, b)


@pytest.mark.parametrize("measure, option, small, large", [
    ("partition_density", "n_points", 32, 4000),
    ("smoothness", "n_probes", 8, 400),
    ("ics", "probe_size", 32, 64),  # capped at the training set (64 points): more work anyway
])
def test_a_measures_options_size_its_request(measure, option, small, large):
    def with_option(value):
        def edit(cfg):
            _big()(cfg)
            cfg[measure][option] = value
        return _plan(edit, device="cpu").job_resources(measure, STAR_BLOCK)

    a, b = with_option(small), with_option(large)
    assert b["runtime"] >= a["runtime"] and (b["runtime"], b["mem_mb"]) != (a["runtime"],
                                                                             a["mem_mb"]), (a, b)


def test_only_long_jobs_ask_for_a_gpu_and_never_on_a_cpu_study():
    auto = _plan(_big(), device="auto")
    req = auto.job_resources("train", STAR_RUN)
    on_cpu = _plan(_big(), device="cpu").job_resources("train", STAR_RUN)
    assert req["gpu"] == 1 and req["runtime"] < on_cpu["runtime"], (req, on_cpu)
    # the other experiments' runs are small: no GPU, on the same device setting
    assert auto.job_resources("train", {"experiment": "dln", "norm": "batchnorm",
                                        "block": "0"})["gpu"] == 0
    assert all(r["gpu"] == 0 for r in _requests(_plan(_big(), device="cpu")).values())
    assert all(r["gpu"] == 0 for r in _requests(_plan(device="cuda")).values())  # all small


def test_gpus_per_train_job_is_the_count_of_a_train_job_that_needs_one():
    plan = _plan(_big(), device="auto", gpus_per_train_job=2)
    assert plan.job_resources("train", STAR_RUN)["gpu"] == 2
    assert plan.job_resources("train", {"experiment": "dln", "norm": "batchnorm",
                                        "block": "0"})["gpu"] == 0
    assert plan.job_resources("partition_density", STAR_BLOCK)["gpu"] in (0, 1)


def test_an_override_replaces_the_estimate_for_its_rule_only():
    base = _requests(_plan())
    over = _requests(_plan(resources={"train": {"runtime": 777},
                                      "partition_density": {"gpu": 1, "mem_mb": 3000}}))
    assert base.keys() == over.keys()
    for key, req in over.items():
        rule = key[0]
        if rule == "train":
            assert req == {**base[key], "runtime": 777}
        elif rule == "partition_density":
            assert req["gpu"] == 1 and req["mem_mb"] == 3000, req
        else:
            assert req == base[key], key
    forced = _plan(_big(), device="auto", resources={"train": {"gpu": 0}})
    assert forced.job_resources("train", STAR_RUN)["gpu"] == 0


@pytest.mark.parametrize("entry, named", [
    ({"trian": {"gpu": 1}}, ["resources.trian", "'train'", "allowed"]),
    ({"train": {"gpus": 1}}, ["resources.train", "gpus"]),
    ({"train": {"runtime": 0}}, ["resources.train.runtime", "0"]),
    ({"train": {"mem_mb": "8G"}}, ["resources.train.mem_mb", "8G"]),
    ({"smoothness": {"gpu": -1}}, ["resources.smoothness.gpu", "-1"]),
    ({"train": {}}, ["resources.train"]),
])
def test_bad_overrides_are_refused_naming_the_value_and_the_choices(entry, named):
    cfg = copy.deepcopy(harness.tiny_config())
    cfg["resources"] = entry
    with pytest.raises(ConfigError) as err:
        study.check(cfg, local=False)
    for text in named:
        assert text in str(err.value), str(err.value)


def test_resources_check_refuses_what_the_schema_lets_through():
    """The module's own check, for configs checked without the schema file."""
    rules = ["train", "smoothness"]
    for bad, text in (({"nope": {"gpu": 1}}, "allowed: ['smoothness', 'train']"),
                      ({"train": {"gpu": True}}, "got True"),
                      ({"train": {"disk_mb": 5}}, "allowed: ['gpu', 'mem_mb', 'runtime']")):
        with pytest.raises(ConfigError, match=re.escape(text)):
            resource_checks.check({"resources": bad}, rules)


def _cluster_rows(capsys, path) -> tuple[dict[str, list[str]], str]:
    assert cli.main(["check", "--cluster", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("rule "))
    rows = {line.split()[0]: line.split()[1:] for line in lines[head + 1:-1]}
    return rows, lines[-1]


@pytest.mark.parametrize("path", [harness.REPO / "config" / "config.yaml", SANTURKAR],
                         ids=["default", "santurkar_paper"])
def test_check_cluster_prints_a_row_for_every_rule(capsys, path):
    rows, total = _cluster_rows(capsys, path)
    plan = Plan(study.check(study.load([path]), local=False))
    want = {"prepare_data", "train", "aggregate", "claims", "report", *plan.measures,
            *(f"plot_{f}" for f in plan.figures)}
    want |= {"replication_round", "replication_table"} if plan.policies else set()
    want |= {"analysis"} if plan.analyses else set()
    assert set(rows) == want
    # one train job per block of an arm's seeds (bnstudy.planning.training), every run in one
    runs = sum(len(x["norms"]) * sum(map(len, plan.planned_blocks(e)))
               for e, x in plan.experiments.items())
    assert int(rows["train"][0]) == len(plan.train_jobs) < runs
    gpu_hours = float(re.search(r"([\d.]+) GPU-hours", total).group(1))
    if path == SANTURKAR:  # the CIFAR runs need a GPU, the DLN's do not
        assert rows["train"][1] == "0-1" and gpu_hours > 1, (rows["train"], total)
    else:  # the default study is small: no GPU anywhere
        assert gpu_hours == 0 and all(r[1] == "0" for r in rows.values()), rows


def test_model_size_counts_like_torchs_flop_counter():
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from bnstudy.networks import models

    entry = {"arch": "vgg", "channels": [8, "M", 16, "M"], "init": "kaiming"}
    got = model_size.size(entry, (3, 16, 16), 10)
    net = models.build_model(models.ModelConfig.from_dict(entry), "none", (3, 16, 16), 10)
    with FlopCounterMode(display=False) as counter:
        net.eval()(torch.zeros(1, 3, 16, 16))
    assert got.macs == counter.get_total_flops() // 2
    assert got.params == sum(p.numel() for p in net.parameters())
    mlp = model_size.size({"arch": "mlp", "depth": 3, "width": 16}, (2,), 4)
    # depth 3: three hidden maps (2->16, 16->16, 16->16) and the head (16->4)
    assert mlp.macs == 2 * 16 + 2 * 16 * 16 + 16 * 4 and mlp.inputs == 2 and mlp.layers == 4


def test_the_slurm_profile_sets_no_per_rule_numbers():
    """Every request comes from the study; the profile keeps only its ADAPT hints."""
    profile = yaml.safe_load((harness.REPO / "workflow/profiles/slurm/config.yaml").read_text())
    for rule, values in (profile.get("set-resources") or {}).items():
        assert not set(values) & set(resources.KEYS), (rule, values)
    assert not set(profile.get("default-resources") or {}) & set(resources.KEYS)


_JOB = re.compile(r"^\s*(?:local)?(?:rule|checkpoint) (\w+):$")


def _listed_resources(output: str) -> list[tuple[str, dict, dict]]:
    """``(rule, wildcards, resources)`` of each job a dry run lists."""
    jobs = []
    for line in output.splitlines():
        m = _JOB.match(line)
        if m:
            jobs.append((m.group(1), {}, {}))
            continue
        key, _, value = line.strip().partition(": ")
        if jobs and key in ("wildcards", "resources"):
            jobs[-1][1 if key == "wildcards" else 2].update(
                kv.split("=", 1) for kv in value.split(", "))
    return jobs


@pytest.mark.workflow
def test_the_snakefile_passes_the_plans_requests(tmp_path):
    project = harness.copy_project(tmp_path / "project")
    (project / "data" / "cifar10").mkdir(parents=True)
    (project / "data" / "cifar10" / "cifar-10-binary.tar.gz").touch()  # the check's file
    out = harness.snakemake(project, "-n", "--configfile", "config/studies/santurkar_paper.yaml")
    plan = Plan(study.check(study.load([SANTURKAR]), local=False))
    jobs = [j for j in _listed_resources(out.stdout + out.stderr)
            if j[0] not in ("all", "job_arguments")]
    assert {j[0] for j in jobs} >= {"prepare_data", "aggregate", "report", "ics"}
    # the first round's train jobs (later rounds' blocks are planned rules, run once decided)
    assert set() < {j[0] for j in jobs if j[0].startswith("train_")} <= set(plan.train_jobs)
    for rule, wildcards, listed in jobs:
        want = plan.job_resources(rule, wildcards)
        assert {k: int(listed[k]) for k in resources.KEYS} == want, (rule, wildcards, listed)
    assert any(listed["gpu"] == "1" for _, _, listed in jobs)


def test_luos_unit_students_run_on_cpu_cores_and_never_ask_for_a_gpu():
    """Issue 22, item 7: Luo's single-unit students (arch: unit, 4096 weights) are bound by
    per-step overhead, so each of luo_paper's 234 runs asks for CPU cores only, never for a GPU
    of its own; the same study's ResNet18 runs (§5) do ask for one."""
    paper = harness.REPO / "config" / "studies" / "luo_paper.yaml"
    plan = Plan(study.check(study.load([str(paper)]), local=False))
    cfg = plan.config
    arch = {e: cfg["models"][cfg["experiments"][e]["model"]]["arch"] for e in plan.experiments}
    train = plan.resource_jobs()["train"]
    unit = [w for w in train if arch[w["experiment"]] == "unit"]
    assert len(unit) >= 234, len(unit)
    assert all(plan.job_resources("train", w)["gpu"] == 0 for w in unit)
    assert any(plan.job_resources("train", w)["gpu"] == 1 for w in train
               if arch[w["experiment"]] != "unit")
