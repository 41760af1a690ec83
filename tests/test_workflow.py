"""Snakemake end to end on the tiny study (.test/config.yaml): the results contract, reruns
after config changes, bad input, lint, determinism."""

from __future__ import annotations

import json
import re
from dataclasses import fields
from pathlib import Path

import harness
import numpy as np
import pandas as pd
import pytest
import yaml
from harness import dry_run, job_counts, snakemake, tiny_config, write_config

from bnstudy import io, measures
from bnstudy.claims.say import deviations
from bnstudy.config import study
from bnstudy.planning.plan import Plan
from bnstudy.tables import layout

TRAINING_COLUMNS = ["dataset", "model", "norm", "seed", "step", "split", "loss", "accuracy",
                    "diverged"]
GENERALIZATION_COLUMNS = ["dataset", "model", "norm", "seed", "train_loss", "test_loss",
                          "loss_gap", "train_accuracy", "test_accuracy", "accuracy_gap",
                          "diverged"]
PROVENANCE_KEYS = ["config_hash", "bnstudy_version", "torch_version", "device", "git_commit"]
MEASURE_RULES = set(measures.REGISTRY)


def _a_change(measure: str, section: dict | None) -> dict:
    """One valid change of a measure's options relative to ``section`` (the tiny study's), from
    its options class alone (a new measure needs no case here): its ``seed`` + 1, else another
    of a field's choices, else a flag flipped, else an integer + 1."""
    cls = measures.REGISTRY[measure].options
    now = cls.parse(section).to_dict()
    fs = fields(cls)
    if "seed" in now:
        return {"seed": now["seed"] + 1}
    for f in fs:
        if "choices" in f.metadata:
            return {f.name: next(c for c in f.metadata["choices"] if c != now[f.name])}
    for f in fs:
        if isinstance(now[f.name], bool):
            return {f.name: not now[f.name]}
    for f in fs:
        if isinstance(now[f.name], int):
            return {f.name: now[f.name] + 1}
    raise AssertionError(f"measure {measure!r} has no option a test can change")


MEASURE_CHANGES = {m: _a_change(m, tiny_config().get(m)) for m in sorted(measures.REGISTRY)}


def _plan(cfg: dict) -> Plan:
    return Plan(study.check(cfg))


# -- the tiny study itself (no Snakemake) ------------------------------------------------------

def test_tiny_study_runs_every_measure_and_analysis(tmp_path):
    """Every registered measure runs in the workflow tests' tiny study: with the section
    .test/config.yaml gives it, else with its default options (harness.tiny_config), so a new
    measure needs no edit there; and every analysis of the default study is made."""
    default = yaml.safe_load((harness.REPO / "config" / "config.yaml").read_text())
    tiny = tiny_config()
    assert set(measures.REGISTRY) <= set(tiny)
    assert set(tiny.get("analyses", {})) == set(default.get("analyses", {}))
    path = write_config(tmp_path / "config.yaml", tiny)
    plan = _plan(study.load([path]))
    # every registered measure runs on at least one experiment, every analysis is made
    assert plan.measures == sorted(measures.REGISTRY)
    assert plan.analyses == sorted(default.get("analyses", {}))


def test_every_measure_has_a_valid_config_change():
    tiny = tiny_config()
    assert set(MEASURE_CHANGES) == MEASURE_RULES
    for m, change in MEASURE_CHANGES.items():
        cls = measures.REGISTRY[m].options
        before = cls.parse(tiny.get(m)).to_dict()
        after = cls.parse({**(tiny.get(m) or {}), **change}).to_dict()
        assert before != after, m


# -- the tiny study run ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def local(tmp_path_factory) -> dict:
    return harness.local_study(tmp_path_factory)


@pytest.fixture(scope="module")
def project(local):
    return local["project"]


@pytest.fixture(scope="module")
def full_plan(project) -> list[dict]:
    """Every job of the tiny study with its files (a forced dry run): the study's DAG."""
    return dry_run(project, "--forceall")


@pytest.fixture(scope="module")
def plan(project) -> Plan:
    return _plan(study.load([project / "config" / "config.yaml"]))


@pytest.mark.workflow
def test_one_job_per_measure_and_experiment_writing_experiment_tables(full_plan, plan):
    """Each measure is a rule named like it, with one job per block of seeds of each experiment
    it runs on (the tiny study replicates nothing: one block of all seeds), writing
    ``runs/<experiment>/seeds<block>/<table>.parquet`` for each of its tables and logging to
    ``logs/<measure>/<experiment>/seeds<block>.log``; each figure family one ``plot_<family>``
    job."""
    for m in plan.measures:
        jobs = [j for j in full_plan if j["rule"] == m]
        assert sorted(j["wildcards"]["experiment"] for j in jobs) == sorted(
            plan.measure_experiments(m)), m
        for j in jobs:
            e, b = j["wildcards"]["experiment"], j["wildcards"]["block"]
            assert b == layout.seeds_label(plan.experiments[e]["seeds"]), j
            assert sorted(j["output"]) == sorted(
                f"results/runs/{e}/seeds{b}/{t}.parquet" for t in measures.REGISTRY[m].tables), j
            assert j["log"] == [f"results/logs/{m}/{e}/seeds{b}.log"], j
            # the job reads every checkpoint of its experiment's runs, and nothing per run else
            x = plan.experiments[e]
            assert sorted(f for f in j["input"] if f.endswith(".pt")) == sorted(
                f"results/runs/{e}/{n}/seed{s}/checkpoints.pt" for n in x["norms"]
                for s in x["seeds"]), j
    plots = sorted(j["rule"] for j in full_plan if j["rule"].startswith("plot_"))
    assert plots == sorted(f"plot_{f}" for f in plan.figures)
    assert all(j["log"] == [f"results/logs/plot/{j['rule'][5:]}.log"] for j in full_plan
               if j["rule"].startswith("plot_"))
    counts = job_counts(full_plan)
    # one train job per block of an arm's seeds (harness: rule "train", wildcard "block")
    assert counts["train"] == len(plan.train_jobs) and counts["aggregate"] == len(plan.tables)
    assert sorted((j["wildcards"]["experiment"], j["wildcards"]["norm"], s) for j in full_plan
                  if j["rule"] == "train" for s in layout.label_seeds(j["wildcards"]["block"])
                  ) == sorted(plan.runs)


@pytest.mark.workflow
def test_run_folders_hold_only_training_files(local, plan):
    runs = local["results"] / "runs"
    per_run = {p.name for e, n, s in plan.runs for p in (runs / e / n / f"seed{s}").iterdir()}
    assert per_run == {"checkpoints.pt", "history.parquet"}
    for e in plan.experiments:
        label = layout.seeds_label(plan.experiments[e]["seeds"])
        assert not list((runs / e).glob("*.parquet")), e
        found = {p.name for p in (runs / e / f"seeds{label}").glob("*.parquet")}
        assert found == {f"{t}.parquet" for m in plan.experiment_measures(e)
                         for t in measures.REGISTRY[m].tables}, e


@pytest.mark.workflow
def test_tables_follow_the_contract(local, plan):
    res = local["results"]
    tr = pd.read_parquet(res / "tables/training.parquet")
    ge = pd.read_parquet(res / "tables/generalization.parquet")
    assert set(TRAINING_COLUMNS) <= set(tr.columns)
    assert set(GENERALIZATION_COLUMNS) <= set(ge.columns)
    assert len(ge) == len(plan.runs)  # one row per run: its last checkpoint
    assert set(ge["norm"]) == {n for _, n, _ in plan.runs}
    assert set(tr["split"]) == {"train", "test"}
    for e, x in plan.experiments.items():
        t = plan.config["trainings"][x["training"]]
        steps = sorted(tr.loc[tr["experiment"] == e, "step"].unique())
        assert steps == list(range(0, t["steps"] + 1, t["eval_every"])), e
    star = ge[ge["dataset"] == "star2d"]
    assert len(star) and star["test_accuracy"].between(0, 1).all()
    regression = ge["dataset"].isin(["gaussian_linear", "ts_tiny"])
    assert regression.sum() == 2 and ge.loc[regression, "test_accuracy"].isna().all()
    np.testing.assert_allclose(ge["loss_gap"], ge["test_loss"] - ge["train_loss"], rtol=1e-9)
    # the generalization table's final numbers are those of the history's last evaluation
    final = tr.groupby("experiment")["step"].transform("max")
    last = tr[(tr["step"] == final) & (tr["split"] == "test")]
    last = last.set_index(["experiment", "norm", "seed"])
    g = ge.set_index(["experiment", "norm", "seed"])
    np.testing.assert_allclose(g["test_loss"], last.loc[g.index, "loss"], rtol=1e-5)


@pytest.mark.workflow
def test_every_table_carries_provenance(local):
    paths = list(local["results"].rglob("*.parquet"))
    assert len(paths) > 20
    for path in paths:
        prov = io.read_provenance(path)
        assert all(k in prov for k in PROVENANCE_KEYS), path
        assert prov["device"] == "cpu"


@pytest.mark.workflow
def test_report_is_self_contained(local, plan):
    html = (local["results"] / "report.html").read_text()
    figures = list((local["results"] / "figures").rglob("*.png"))
    assert sorted(map(str, figures)) == sorted(
        str(local["project"] / p) for p in plan.all_figures())
    assert html.count("data:image/png;base64,") == len(figures)
    assert "src=\"http" not in html and "<link" not in html
    for text in ("Training", "Generalization", "Study configuration", "Provenance", "±"):
        assert text in html


@pytest.mark.workflow
def test_complete_run_has_nothing_left_to_do(project):
    proc = snakemake(project, "-n")
    assert "Nothing to be done" in proc.stdout + proc.stderr, proc.stdout[-3000:]


@pytest.mark.workflow
def test_same_config_same_tables(local):
    """Determinism: the study again into another results directory, every measure's table and
    the training table equal (all but timing columns) to the first run's. Both runs' jobs ran
    in a fork server of their own (bnstudy.forkserver); that a job in its own process writes
    bitwise what a served one writes is tests/test_forkserver.py's (training and measures)."""
    project = local["project"]
    snakemake(project, "--cores", "2", "--config", "results=results2", "--until", "aggregate")
    log = (project / "results2" / "logs" / "forkserver.log").read_text()
    assert re.search(r"^\S+ \S+ measure \(pid \d+\): exit 0", log, re.M), log[-2000:]
    again = harness.read_tables(project / "results2")
    first = harness.read_tables(local["results"])
    assert len(again) >= 1 + len(MEASURE_RULES), sorted(again)
    harness.assert_tables_equal({t: first[t] for t in again}, again)


@pytest.mark.workflow
def test_local_jobs_ran_in_the_fork_server_and_it_ended(local):
    """The run's torch, table and figure jobs started from the fork server (not from a fresh
    interpreter each: bnstudy.forkserver), all with exit status 0, and no server is left (in
    the project the run ran in: the tests read a copy of it)."""
    project = local["ran_in"]
    text = (local["results"] / "logs" / "forkserver.log").read_text()
    served = re.findall(r"^\S+ \S+ (\S+) \(pid \d+\): exit (-?\d+), \d+\.\d\d CPU-s$", text,
                        re.M)
    assert {"measure", "aggregate", "plot", "claims", "report"} <= {v for v, _ in served}, text
    assert all(code == "0" for _, code in served), text
    left = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
            here = Path(f"/proc/{cmdline.parent.name}/cwd").resolve()
        except OSError:
            continue
        if args[1:3] == [b"-m", b"bnstudy.forkserver.server"] and here == project.resolve():
            left.append(cmdline.parent.name)
    assert not left, f"fork servers left running: {left}"


def _config_jobs(project, name: str, cfg: dict) -> list[dict]:
    write_config(project / f"{name}.yaml", cfg)
    return dry_run(project, "--configfile", f"{name}.yaml")


@pytest.mark.workflow
def test_changing_plot_or_report_settings_reruns_only_figures_and_report(project, plan):
    cfg = tiny_config(project, results="results")
    cfg["plots"]["dpi"] = 70
    cfg["report"]["title"] = "another title"
    counts = job_counts(_config_jobs(project, "plots", cfg))
    # the report's config travels in its argument file (rule job_arguments), rewritten first
    assert counts == {**{f"plot_{f}": 1 for f in plan.figures}, "report": 1,
                      "job_arguments": 1}, counts


@pytest.mark.workflow
def test_choosing_figure_families_redraws_no_figure(project, plan):
    """``plots.families`` in a finished study: only the report is made again (its argument
    file lists the figures); the chosen families' figures are up to date, the others are not
    drawn."""
    cfg = tiny_config(project, results="results")
    harness.with_figures(cfg, *list(plan.figures)[:2])
    counts = job_counts(_config_jobs(project, "families", cfg))
    assert counts == {"report": 1, "job_arguments": 1}, counts


@pytest.mark.workflow
@pytest.mark.parametrize("measure", sorted(MEASURE_CHANGES))
def test_changing_a_measures_settings_reruns_only_that_measure(project, plan, full_plan,
                                                               measure):
    """A measure's config section is its jobs' params: changing it reruns that measure's job of
    every experiment it runs on, and what reads their tables -- no training, no other
    measure."""
    if measure not in plan.measures:
        pytest.skip(f"{measure!r} is not in the tiny study")
    cfg = tiny_config(project, results="results")
    cfg[measure] = {**cfg[measure], **MEASURE_CHANGES[measure]}
    jobs = _config_jobs(project, f"m_{measure}", cfg)
    direct = [j for j in jobs if j["rule"] == measure]
    assert sorted(j["wildcards"]["experiment"] for j in direct) == sorted(
        plan.measure_experiments(measure))
    assert all("Params have changed" in j["reason"] for j in direct), direct
    assert not {j["rule"] for j in jobs} & ({"train", "prepare_data", "analysis"}
                                            | MEASURE_RULES - {measure})
    expected = harness.job_keys(harness.downstream(full_plan, lambda j: j["rule"] == measure))
    # the report prints the study's config, which travels in the report's argument file (rule
    # job_arguments): any config change rewrites that file, as it reruns the report
    expected = [*expected, ("job_arguments", ("job", "report"))]
    # the claims job's arguments carry the setting its rows' deviations name (the smoothness
    # probe range: bnstudy.claims.say.deviations.SETUP_MEASURES)
    if measure in deviations.SETUP_MEASURES:
        expected.append(("job_arguments", ("job", "claims")))
    assert harness.job_keys(jobs) == sorted(expected)


@pytest.mark.workflow
def test_changing_training_settings_reruns_that_experiment_only(project, plan):
    cfg = tiny_config(project, results="results")
    cfg["trainings"]["gd"]["lr"] = 0.02  # the dln experiment's training
    jobs = _config_jobs(project, "lr", cfg)
    counts = job_counts(jobs)
    assert counts["train"] == 1
    per_experiment = [j for j in jobs if j["rule"] == "train" or j["rule"] in MEASURE_RULES]
    assert {j["wildcards"]["experiment"] for j in per_experiment} == {"dln"}
    assert sorted(j["rule"] for j in per_experiment if j["rule"] != "train") == sorted(
        plan.experiment_measures("dln"))


def _patched(project, section: str, value) -> dict:
    cfg = tiny_config(project, results="results")
    cfg[section] = {**cfg[section], **value} if isinstance(value, dict) else value
    return cfg


@pytest.mark.workflow
@pytest.mark.parametrize("section, value, message", [
    ("experiments", {"x": {"dataset": "star2d", "model": "mlp", "training": "sgd",
                           "norms": ["batchnrom"], "seeds": [0]}},
     "unknown normalizer 'batchnrom'; allowed: .*'batchnorm'"),
    ("experiments", {"x": {"dataset": "stars", "model": "mlp", "training": "sgd",
                           "norms": ["none"], "seeds": [0]}},
     "'stars' is not defined; allowed: .*'star2d'"),
    ("experiments", {"x": {"dataset": "star2d", "model": "mlp", "training": "sgd",
                           "norms": ["none"], "seeds": [0], "measures": ["teacher_student"]}},
     "measure 'teacher_student' needs a dataset of kind \\['teacher_student'\\], dataset "
     "'star2d' is 'star2d'"),
    ("trainings", {"sgd": {"lr": -1, "steps": 10}}, "lr"),
    ("device", "gpu", "gpu"),
    ("plots", {"families": ["training_curve"]},
     "plots.families: unknown figure families \\['training_curve'\\]; allowed: "
     ".*'training_curves'"),
])
def test_bad_config_fails_before_any_job_naming_the_value(project, section, value, message):
    write_config(project / "bad.yaml", _patched(project, section, value))
    out = snakemake(project, "-n", "--configfile", "bad.yaml", check=False)
    assert out.returncode != 0
    assert re.search(message, out.stdout + out.stderr), out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr


# The one lint the workflow answers by design: it runs in one environment (README, "Quick
# start"), so no rule names a per-job conda environment or container.
ONE_ENVIRONMENT = "Specify a conda environment or container for each rule."


@pytest.mark.workflow
def test_lint_is_clean(project):
    """`snakemake --lint` finds nothing but the per-rule software-environment recommendation:
    the lints it prints are ``* <title>:`` lines under ``Lints for rule ...`` headings."""
    out = snakemake(project, "--lint", check=False)
    text = out.stdout + out.stderr
    lints = re.findall(r"^\s+\* (.+?):?$", text, re.M)
    rules = re.findall(r"^Lints for rule (\S+)", text, re.M)
    assert set(lints) <= {ONE_ENVIRONMENT}, text
    assert len(lints) == len(rules) and "Lints for snakefile" not in text, text


@pytest.mark.workflow
def test_provenance_hash_tracks_the_run_spec(local):
    runs = local["results"] / "runs" / "star" / "none"
    a = io.read_provenance(runs / "seed0" / "history.parquet")
    b = io.read_provenance(runs / "seed1" / "history.parquet")
    assert a["config_hash"] != b["config_hash"]
    json.dumps(a)
