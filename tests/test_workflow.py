"""Snakemake end to end on a tiny config: the results contract, reruns, bad input, lint."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from workflow_utils import copy_workflow, planned_jobs, snakemake, tiny_config, write_config

from bnstudy import io

pytestmark = pytest.mark.workflow

TRAINING_COLUMNS = ["dataset", "model", "norm", "seed", "step", "split", "loss", "accuracy",
                    "diverged"]
GENERALIZATION_COLUMNS = ["dataset", "model", "norm", "seed", "train_loss", "test_loss",
                          "loss_gap", "train_accuracy", "test_accuracy", "accuracy_gap",
                          "diverged"]
PROVENANCE_KEYS = ["config_hash", "bnstudy_version", "torch_version", "device", "git_commit"]
TIMING = ["wall_time"]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    wd = copy_workflow(tmp_path_factory.mktemp("wf"))
    write_config(wd / "tiny.yaml", tiny_config())
    snakemake(wd, "--cores", "2", "--configfile", "tiny.yaml")
    return wd


def test_tables_follow_the_contract(study):
    tr = pd.read_parquet(study / "results/tables/training.parquet")
    ge = pd.read_parquet(study / "results/tables/generalization.parquet")
    assert set(TRAINING_COLUMNS) <= set(tr.columns)
    assert set(GENERALIZATION_COLUMNS) <= set(ge.columns)
    assert len(ge) == 5 and set(ge["norm"]) == {"none", "batchnorm"}
    assert set(tr["split"]) == {"train", "test"}
    assert sorted(tr["step"].unique()) == [0, 5, 10, 15, 20]
    star = ge[ge["dataset"] == "star2d"]
    assert star["test_accuracy"].between(0, 1).all()
    assert ge.loc[ge["dataset"] == "gaussian_linear", "test_accuracy"].isna().all()
    np.testing.assert_allclose(ge["loss_gap"], ge["test_loss"] - ge["train_loss"], rtol=1e-9)
    # the generalization table's final numbers are those of the history's last evaluation
    last = tr[(tr["step"] == 20) & (tr["split"] == "test")]
    last = last.set_index(["experiment", "norm", "seed"])
    g = ge.set_index(["experiment", "norm", "seed"])
    np.testing.assert_allclose(g["test_loss"], last.loc[g.index, "loss"], rtol=1e-5)


def test_every_table_carries_provenance(study):
    for path in (study / "results").rglob("*.parquet"):
        prov = io.read_provenance(path)
        assert all(k in prov for k in PROVENANCE_KEYS), path
        assert prov["device"] == "cpu"


def test_report_is_self_contained(study):
    html = (study / "results/report.html").read_text()
    figures = list((study / "results/figures").rglob("*.png"))
    assert len(figures) >= 5  # training + generalization per experiment, a study figure
    assert html.count("data:image/png;base64,") == len(figures)
    assert "src=\"http" not in html and "<link" not in html
    for text in ("Training", "Generalization", "Study configuration", "Provenance", "±"):
        assert text in html


def test_same_config_same_tables(study):
    snakemake(study, "--cores", "2", "--configfile", "tiny.yaml", "--config",
              "results=results2", "--until", "aggregate")
    for table in ("training", "generalization"):
        a = pd.read_parquet(study / f"results/tables/{table}.parquet")
        b = pd.read_parquet(study / f"results2/tables/{table}.parquet")
        cols = [c for c in a.columns if c not in TIMING]
        pd.testing.assert_frame_equal(a[cols], b[cols])


def test_complete_run_has_nothing_left_to_do(study):
    assert planned_jobs(study, "--configfile", "tiny.yaml") == {}


def test_changing_plot_or_report_settings_reruns_no_training(study):
    cfg = tiny_config(plots={"dpi": 60}, report={"title": "another title"})
    write_config(study / "plots.yaml", cfg)
    jobs = planned_jobs(study, "--configfile", "plots.yaml")
    assert "train" not in jobs and "generalization" not in jobs and "aggregate" not in jobs
    per_experiment = [p for p in (study / "results/figures").rglob("*.png")
                      if p.parent.name != "study"]
    assert jobs["plot"] == len(per_experiment) and jobs["report"] == 1


def test_changing_generalization_settings_reruns_no_training(study):
    cfg = tiny_config(generalization={"bn_statistics": "recomputed"})
    write_config(study / "gen.yaml", cfg)
    jobs = planned_jobs(study, "--configfile", "gen.yaml")
    assert "train" not in jobs
    assert jobs["generalization"] == 5 and jobs["report"] == 1


def test_changing_training_settings_reruns_that_experiment_only(study):
    cfg = tiny_config()
    cfg["trainings"]["gd"]["lr"] = 0.02
    write_config(study / "lr.yaml", cfg)
    jobs = planned_jobs(study, "--configfile", "lr.yaml")
    assert jobs["train"] == 1 and jobs["generalization"] == 1


@pytest.mark.parametrize("patch, message", [
    ({"experiments": {"x": {"dataset": "star2d", "model": "mlp", "training": "sgd",
                            "norms": ["batchnrom"], "seeds": [0]}}},
     "unknown normalizer 'batchnrom'; allowed: .*'batchnorm'"),
    ({"experiments": {"x": {"dataset": "stars", "model": "mlp", "training": "sgd",
                            "norms": ["none"], "seeds": [0]}}},
     "'stars' is not defined; allowed: .*'star2d'"),
    ({"experiments": {"x": {"dataset": "star2d", "model": "mlp", "training": "sgd",
                            "norms": ["none"], "seeds": [0], "measures": ["teacher_student"]}}},
     "measure 'teacher_student' needs a dataset of kind \\['teacher_student'\\], dataset "
     "'star2d' is 'star2d'"),
    ({"trainings": {"sgd": {"lr": -1, "steps": 10}}}, "lr"),
    ({"device": "gpu"}, "gpu"),
])
def test_bad_config_fails_before_any_job_naming_the_value(study, patch, message):
    import re

    cfg = tiny_config(**patch)
    write_config(study / "bad.yaml", cfg)
    out = snakemake(study, "-n", "--configfile", "bad.yaml", check=False)
    assert out.returncode != 0
    assert re.search(message, out.stdout + out.stderr), out.stdout + out.stderr


def test_lint_is_clean(study):
    out = snakemake(study, "--lint", "--configfile", "tiny.yaml", check=False)
    assert out.returncode == 0, out.stdout + out.stderr


def test_provenance_hash_tracks_the_run_spec(study):
    a = io.read_provenance(study / "results/runs/star/none/seed0/history.parquet")
    b = io.read_provenance(study / "results/runs/star/none/seed1/history.parquet")
    assert a["config_hash"] != b["config_hash"]
    json.dumps(a)
