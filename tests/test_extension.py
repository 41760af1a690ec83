"""EXTENDING.md's measure and normalizer recipes, followed in a copy of the project: a throwaway
measure (tests/data/extension: its package and its plot module) and one config section give a
table, a figure and a report section through the tiny study; a throwaway normalizer (one module,
RMSNorm) named in an experiment's ``norms`` is trained, measured, tabled and drawn with no other
edit."""

from __future__ import annotations

import shutil
from pathlib import Path

import harness
import pandas as pd
import pytest

FIXTURE = Path(__file__).parent / "data" / "extension"


def test_the_fixture_is_the_recipes_file_list():
    files = sorted(p.relative_to(FIXTURE).as_posix() for p in FIXTURE.rglob("*.py"))
    package = "/".join(("src", "bnstudy", "measures", "weight_norms", "__init__.py"))
    norm = "/".join(("src", "bnstudy", "networks", "norms", "rms_norm.py"))
    plot = "/".join(("src", "bnstudy", "plots", "weight_norms.py"))  # (in the fixture only)
    assert files == [package, norm, plot]
    recipe = (harness.REPO / "EXTENDING.md").read_text()
    for f in files:
        assert f.replace("weight_norms", "<name>").replace("rms_norm", "<name>") in recipe, f


@pytest.mark.workflow
def test_a_new_measure_runs_through_the_tiny_study(tmp_path_factory):
    source = harness.snapshot(tmp_path_factory)
    cfg = harness.only_experiments(harness.tiny_config(source), "star")
    cfg["weight_norms"] = {"ord": 2}
    cfg["experiments"]["star"]["norms"] = ["none", "batchnorm", "rms_norm"]
    project = harness.copy_project(tmp_path_factory.mktemp("extension") / "project",
                                   source=source, config=cfg)
    shutil.copytree(FIXTURE / "src", project / "src", dirs_exist_ok=True)
    harness.snakemake(project, "--cores", "2")
    res = project / "results"
    df = pd.read_parquet(res / "tables" / "weight_norms.parquet")
    assert set(df["norm"]) == {"none", "batchnorm", "rms_norm"} and (df["weight_norm"] > 0).all()
    # the new normalizer's runs are trained and measured like any other arm
    train = pd.read_parquet(res / "tables" / "training.parquet")
    assert train.loc[train["norm"] == "rms_norm", "seed"].nunique() == len(
        cfg["experiments"]["star"]["seeds"])
    for table in ("ics", "smoothness", "partition_density"):
        assert "rms_norm" in set(pd.read_parquet(res / "tables" / f"{table}.parquet")["norm"])
    assert {"experiment", "seed", "step", "layer_name"} <= set(df.columns)
    assert (res / "figures" / "star" / "weight_norms.png").stat().st_size > 1000
    html = (res / "report.html").read_text()
    assert "Weight norms" in html and "Per-layer weight norms." in html
    # a bad value of its option is refused before any job, naming the option
    cfg["weight_norms"] = {"ord": 3}
    harness.write_config(project / "config" / "config.yaml", {**cfg, "results": "results"})
    proc = harness.snakemake(project, "-n", check=False)
    assert proc.returncode != 0 and "weight_norms.ord" in proc.stdout + proc.stderr
