"""Stage-precise reruns: after a complete tiny run, editing a module reruns exactly its stages.

Each rule's ``code`` param hashes the package modules its stage runs, transitively
(``code_version`` in workflow/rules/common.smk). These tests edit one module in a copy of the
project and read the jobs and reasons of ``snakemake -n``. The expected plan is computed, not
hard-coded: the stages the module belongs to (from the registries) plus every job downstream of
them in the study's DAG (read from the input/output files of a forced dry run). So:

- a measure's own module reruns that measure (and any measure importing the module), its
  tables, their figures, and what reads all tables (claims, report) -- no training, no other
  measure;
- models.py, training.py and the normalizer modules rerun training and everything downstream;
- a figure module reruns only its figures and the report; plots/__init__.py every figure.

The edited stage must rerun for "Params have changed" (its code hash), the rest for "Input files
updated by another job". Edits are undone after each case (the hash is of content).
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest
import tiny_study
from tiny_study import downstream, job_keys, planned_jobs, snakemake

from bnstudy import measures, plots

pytestmark = pytest.mark.workflow

PLOT_RULES = ("plot", "plot_study")
SRC = Path(measures.__file__).parent


@pytest.fixture(scope="module")
def local_study(tmp_path_factory) -> dict:
    return tiny_study.local_study(tmp_path_factory)


@pytest.fixture(scope="module")
def full_plan(local_study) -> list[dict]:
    """Every job of the tiny study with its files (a forced dry run): the study's DAG."""
    proc = snakemake(local_study["project"], "-n", "--forceall")
    jobs = planned_jobs(proc.stdout + proc.stderr)
    assert Counter(j["rule"] for j in jobs)["train"] >= 1, proc.stdout[-3000:]
    return jobs


def _edited(project: Path, module: str) -> list[dict]:
    """The dry-run jobs after appending a comment line to ``src/bnstudy/<module>``."""
    path = project / "src" / "bnstudy" / module
    original = path.read_bytes()
    try:
        path.write_bytes(original + b"\n# edited by test_reruns\n")
        proc = snakemake(project, "-n")
        return planned_jobs(proc.stdout + proc.stderr)
    finally:
        path.write_bytes(original)


def _assert_plan(got: list[dict], full: list[dict], direct) -> None:
    """``got`` is exactly the jobs ``direct`` selects plus everything downstream of them; the
    direct jobs rerun for changed params (their code hash) -- Snakemake names only the updated
    inputs when a job has both reasons --, the others for updated inputs and never for params."""
    expected = job_keys(downstream(full, direct))
    assert expected, "the case selects no job of the tiny study"
    assert job_keys(got) == expected, (
        f"unexpected reruns:\n  extra:   {sorted(set(job_keys(got)) - set(expected))}\n"
        f"  missing: {sorted(set(expected) - set(job_keys(got)))}")
    remade = {f for j in got for f in j["output"]}
    for j in got:
        changed = "Params have changed since last execution" in j["reason"]
        updated = "Input files updated by another job" in j["reason"]
        assert updated == bool(remade.intersection(j["input"])), j
        if direct(j):
            assert changed or updated, j
        else:
            assert updated and not changed, j


def test_complete_run_is_up_to_date(local_study):
    proc = snakemake(local_study["project"], "-n")
    assert "Nothing to be done" in proc.stdout + proc.stderr, proc.stdout[-3000:]


def _users(module: str, project: Path) -> set[str]:
    """The measures whose code (their modules and what those import) includes ``module``."""
    src = project / "src" / "bnstudy"
    return {n for n, m in measures.REGISTRY.items()
            if module in tiny_study.imported_modules(m.code, src)}


@pytest.mark.parametrize("measure", sorted(measures.REGISTRY))
def test_editing_a_measure_module_reruns_only_that_measure(local_study, full_plan, measure):
    if not any(j["rule"] == measure for j in full_plan):
        pytest.skip(f"measure {measure!r} is not in the tiny config (no config section)")
    module = measures.get(measure).code[0]  # the measure's own module comes first
    users = _users(module, local_study["project"])  # e.g. generalization.py: also teacher_student
    assert measure in users
    got = _edited(local_study["project"], module)
    _assert_plan(got, full_plan, lambda j: j["rule"] in users)
    rules = {j["rule"] for j in got}
    assert not rules & ({"train", "prepare_data", "analysis"} | set(measures.REGISTRY) - users)
    tables = {t for m in users for t in measures.get(m).tables}
    assert {j["wildcards"]["table"] for j in got if j["rule"] == "aggregate"} <= tables
    plots.load_all()
    for j in got:
        if j["rule"] in PLOT_RULES:  # only figures drawn from the rerun tables
            assert set(plots.FAMILIES[j["wildcards"]["family"]].tables) & tables, j


def _train_modules():
    """The modules training runs on: its own, the model's, and every normalizer module."""
    return ["models.py", "training.py", *sorted(p.name for p in SRC.glob("norm*.py"))]


@pytest.mark.parametrize("module", _train_modules())
def test_editing_model_or_training_code_reruns_training_and_downstream(local_study, full_plan,
                                                                       module):
    users = _users(module, local_study["project"])  # measures that run model code themselves
    got = _edited(local_study["project"], module)
    _assert_plan(got, full_plan, lambda j: j["rule"] == "train" or j["rule"] in users)
    assert Counter(j["rule"] for j in got)["train"] == Counter(
        j["rule"] for j in full_plan)["train"]
    assert not any(j["rule"] in ("prepare_data", "analysis") for j in got)


def _plot_module_cases():
    plots.load_all()
    modules = sorted({f.module for f in plots.FAMILIES.values()})
    # one family module (the generalization figures, if present) and the shared plotting code
    family_module = "generalization" if "generalization" in modules else modules[0]
    return [pytest.param(f"plots/{family_module}.py", id=family_module),
            pytest.param("plots/__init__.py", id="plots_init"),
            # a report section's text and findings only: the report reruns, no figure
            pytest.param("plots/teacher_student_findings.py", id="report_section")]


@pytest.mark.parametrize("module", _plot_module_cases())
def test_editing_plotting_code_reruns_only_plots_and_report(local_study, full_plan, module):
    plots.load_all()
    src = local_study["project"] / "src" / "bnstudy"
    families = {n for n, f in plots.FAMILIES.items() if module in tiny_study.imported_modules(
        [f"plots/{f.module}.py", "plots/__init__.py"], src)}
    got = _edited(local_study["project"], module)
    # the report's code hash covers every figure module (it embeds their report sections)
    _assert_plan(got, full_plan, lambda j: j["rule"] == "report" or (
        j["rule"] in PLOT_RULES and j["wildcards"]["family"] in families))
    assert {j["rule"] for j in got} <= {*PLOT_RULES, "report", "all"}


def test_snakemake_report_builds_offline(local_study):
    """Snakemake's own HTML report of the complete run, with every proxy pointing nowhere."""
    out = local_study["project"] / "results" / "snakemake_report.html"
    nowhere = "http://127.0.0.1:9"
    proc = snakemake(local_study["project"], "--report", str(out), extra_env={
        "http_proxy": nowhere, "https_proxy": nowhere, "HTTP_PROXY": nowhere,
        "HTTPS_PROXY": nowhere, "no_proxy": "", "NO_PROXY": ""})
    html = out.read_text()
    assert out.stat().st_size > 50_000, proc.stderr[-2000:]
    assert "training_curves.png" in html
    assert "<script src=\"http" not in html and "<link href=\"http" not in html
    os.remove(out)
