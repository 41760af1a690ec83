"""EXTENDING.md's measure and normalizer recipes, followed in a copy of the project: a throwaway
measure (tests/data/extension: its package and its plot module) and one config section give a
table, a figure and a report section through the tiny study; a throwaway normalizer (one module,
RMSNorm) named in an experiment's ``norms`` is trained, measured, tabled and drawn with no other
edit."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import harness
import pandas as pd
import pytest

FIXTURE = Path(__file__).parent / "data" / "extension"


# the code files EXTENDING.md's measure recipe touches, with its figure, report section and one
# claim (the fixture's, by role; the measure's own test is the author's): at most five
RECIPE = ("src/bnstudy/measures/<name>/__init__.py", "src/bnstudy/plots/<name>.py",
          "src/bnstudy/claims/declared.py", "tests/")  # and the measure's test module there
CLAIM = FIXTURE / "claim.txt"  # the one Claim(...) the recipe adds to claims/declared.py


def test_the_fixture_is_the_recipes_file_list():
    files = sorted(p.relative_to(FIXTURE).as_posix() for p in FIXTURE.rglob("*.py"))
    package = "/".join(("src", "bnstudy", "measures", "weight_norms", "__init__.py"))
    norm = "/".join(("src", "bnstudy", "networks", "norms", "rms_norm.py"))
    plot = "/".join(("src", "bnstudy", "plots", "weight_norms.py"))  # (in the fixture only)
    assert files == [package, norm, plot]
    recipe = (harness.REPO / "EXTENDING.md").read_text()
    for f in files:
        assert f.replace("weight_norms", "<name>").replace("rms_norm", "<name>") in recipe, f
    assert len(RECIPE) <= 5 and all(f in recipe for f in RECIPE)
    assert {package, plot} <= {f.replace("<name>", "weight_norms") for f in RECIPE}
    assert "Claim(" in CLAIM.read_text() and '"weight_norms"' in CLAIM.read_text()


_REGISTRY_NAMES = {"REGISTRY", "SOURCES", "CLAIMS", "FAMILIES", "SECTIONS"}
_REGISTRY_CALLS = {"names", "table_names", "measure_tables", "run_tables", "entry_modules"}
# checks of the whole tree a new file must also pass (no registry loop to find them by)
WHOLE_TREE = ("test_layout.py", "test_doc_references.py")


def _iterates_a_registry(node, names=frozenset()) -> bool:
    """Whether expression ``node`` reads a registry (normalizers, measures, analyses, claims,
    figures, the column dictionary's tables) or a variable in ``names`` assigned from one."""
    for n in ast.walk(node):
        if isinstance(n, (ast.Name, ast.Attribute)) and \
                getattr(n, "id", getattr(n, "attr", None)) in _REGISTRY_NAMES | names:
            return True
        if isinstance(n, ast.Call) and getattr(n.func, "attr", getattr(n.func, "id", None)) \
                in _REGISTRY_CALLS:
            return True
    return False


def _reads_a_registry(node, bound: frozenset) -> bool:
    """Whether ``node`` (a definition, with its decorators, parameters and body) reads a registry
    or a module-level name in ``bound`` (a fixture, helper or variable that does)."""
    if _iterates_a_registry(node, bound):
        return True
    params = getattr(node, "args", None)
    return isinstance(params, ast.arguments) and any(
        a.arg in bound for a in [*params.posonlyargs, *params.args, *params.kwonlyargs])


def _bound(tree: ast.Module) -> frozenset:
    """The module-level names whose definition reads a registry, directly or through another
    such name (to a fixed point): helpers, fixtures, parameter lists."""
    bound: set = set()
    while True:
        before = len(bound)
        for n in tree.body:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if _reads_a_registry(n, frozenset(bound)):
                    bound.add(n.name)
            elif isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None:
                if _iterates_a_registry(n.value, frozenset(bound)):
                    targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                    bound.update(t.id for t in targets if isinstance(t, ast.Name))
        if len(bound) == before:
            return frozenset(bound)


def registry_tests(root: Path) -> list[str]:
    """The tests under ``root`` that read a registry -- loop over one, are parametrized by one,
    or use a fixture, helper or variable that does -- as pytest node ids (``test_x.py::test_y``,
    a class whole), and every test of the :data:`WHOLE_TREE` modules: a recipe that needed an
    edit it does not name fails one of them."""
    out = []
    for path in sorted(root.glob("test_*.py")):
        if path.name in WHOLE_TREE:
            out.append(path.name)
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        bound = _bound(tree)
        out.extend(f"{path.name}::{n.name}" for n in tree.body
                   if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                   and n.name.startswith(("test", "Test")) and _reads_a_registry(n, bound))
    return out


def test_the_recipe_test_finds_every_test_that_iterates_a_registry():
    """Issue 33: a hand-kept list left out tests/test_autocast_stats.py, which a new normalizer
    without float32 statistics fails."""
    found = registry_tests(Path(__file__).parent)
    modules = {t.split("::")[0] for t in found}
    for name in ("test_autocast_stats.py", "test_normalizers.py", "test_normalizer_traits.py",
                 "test_column_docs.py", "test_claims_properties.py", "test_norm_colors.py",
                 "test_claims.py"):
        assert name in modules, name
    assert "test_kernels.py" not in modules  # no registry in it: not a recipe test
    # the float32 statistics rule, by the test that checks it; a test that reads no registry is
    # left out of a module that has some (the recipe's run pays for the tests it needs)
    assert ("test_autocast_stats.py::test_normalizer_statistics_are_float32_under_bf16_autocast"
            in found)
    assert "test_resume.py::test_sigkilled_cli_training_resumes_to_identical_outputs" not in found


@pytest.mark.workflow
def test_a_new_measure_runs_through_the_tiny_study(tmp_path_factory):
    source = harness.snapshot(tmp_path_factory)
    cfg = harness.only_experiments(harness.tiny_config(source), "star")
    cfg["weight_norms"] = {"ord": 2}
    cfg["experiments"]["star"]["norms"] = ["none", "batchnorm", "rms_norm"]
    # the new measure's figure beside one shipped family (the others: the tiny study's tests)
    harness.with_figures(cfg, "weight_norms", "training_curves")
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


def _tracked(root: Path) -> list[str]:
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=root,
                         capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip("needs git to list the project's files")
    return [f for f in out.stdout.splitlines() if (root / f).is_file()]


@pytest.mark.workflow
def test_the_recipes_files_are_all_a_new_measure_and_normalizer_need(tmp_path):
    """In a copy of the project plus the fixture's files (a measure's package and plot module,
    a normalizer's module, one claim on the measure's table) and nothing else hand-edited, the
    unit tests that loop over a registry (:func:`registry_tests`) pass. The one other file
    that changes is generated: results/README.md's column dictionary, rewritten by the command
    EXTENDING.md's recipe gives."""
    project = tmp_path / "project"
    for f in _tracked(harness.REPO):
        (project / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(harness.REPO / f, project / f)
    shutil.copytree(FIXTURE / "src", project / "src", dirs_exist_ok=True)
    ledger = project / "src" / "bnstudy" / "claims" / "declared.py"
    ledger.write_text(ledger.read_text() + CLAIM.read_text())
    env = {**os.environ, "PYTHONPATH": str(project / "src")}
    gen = subprocess.run([sys.executable, "-m", "bnstudy", "columns", "--readme",
                          "results/README.md"], cwd=project, env=env, capture_output=True,
                         text=True)
    assert gen.returncode == 0, gen.stderr[-3000:]
    assert "weight_norms" in (project / "results" / "README.md").read_text()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-m", "not workflow",
                           "-p", "no:cacheprovider",
                           *(f"tests/{t}" for t in registry_tests(project / "tests"))],
                          cwd=project, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    assert " passed" in proc.stdout
