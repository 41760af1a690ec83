"""EXTENDING.md's measure recipe, followed in a copy of the project: a throwaway measure
(tests/data/extension: its package and its plot module) and one config section, nothing else,
give a table, a figure and a report section through the tiny study."""

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
    plot = "/".join(("src", "bnstudy", "plots", "weight_norms.py"))  # (in the fixture only)
    assert files == [package, plot]
    recipe = (harness.REPO / "EXTENDING.md").read_text()
    for f in files:
        assert f.replace("weight_norms", "<name>") in recipe, f


@pytest.mark.workflow
def test_a_new_measure_runs_through_the_tiny_study(tmp_path_factory):
    source = harness.snapshot(tmp_path_factory)
    cfg = harness.only_experiments(harness.tiny_config(source), "star")
    cfg["weight_norms"] = {"ord": 2}
    project = harness.copy_project(tmp_path_factory.mktemp("extension") / "project",
                                   source=source, config=cfg)
    shutil.copytree(FIXTURE / "src", project / "src", dirs_exist_ok=True)
    harness.snakemake(project, "--cores", "2")
    res = project / "results"
    df = pd.read_parquet(res / "tables" / "weight_norms.parquet")
    assert set(df["norm"]) == {"none", "batchnorm"} and (df["weight_norm"] > 0).all()
    assert {"experiment", "seed", "step", "layer_name"} <= set(df.columns)
    assert (res / "figures" / "star" / "weight_norms.png").stat().st_size > 1000
    html = (res / "report.html").read_text()
    assert "Weight norms" in html and "Per-layer weight norms." in html
    # a bad value of its option is refused before any job, naming the option
    cfg["weight_norms"] = {"ord": 3}
    harness.write_config(project / "config" / "config.yaml", {**cfg, "results": "results"})
    proc = harness.snakemake(project, "-n", check=False)
    assert proc.returncode != 0 and "weight_norms.ord" in proc.stdout + proc.stderr
