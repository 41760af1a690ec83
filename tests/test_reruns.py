"""Stage-precise reruns: after a complete tiny run, editing a module reruns exactly its stages.

Each rule's ``code`` param hashes the package modules its stage runs, transitively
(bnstudy.planning.codeversion, entries in bnstudy.planning.plan). These tests edit one module in a
copy of the
project and read the jobs and reasons of ``snakemake -n``. The expected plan is computed, not
hard-coded: the rules whose code covers the module (the test's own reading of the imports, from
each stage's entry modules) plus every job downstream of them in the study's DAG (read from the
input/output files of a forced dry run). So:

- a measure's implementation module reruns that measure's job of every experiment it runs on
  (and any measure importing the module), its tables, their figures, and what reads all tables
  (claims, report) -- no training, no other measure;
- the model, training and normalizer modules rerun training and everything downstream;
- a figure module reruns only its family's ``plot_<family>`` job and the report;
  plots/__init__.py every figure; a new figure module adds its family's job and reruns the
  report (and the report's argument file: the list of figures), nothing else.

The edited stage must rerun for "Params have changed" (its code hash), the rest for "Input files
updated by another job". Edits are undone after each case (the hash is of content).
"""

from __future__ import annotations

import os
from pathlib import Path

import harness
import pytest
from harness import downstream, dry_run, job_counts, job_keys, snakemake

from bnstudy import analyses, measures, plots
from bnstudy.networks import norms
from bnstudy.planning.codeversion import closure
from bnstudy.planning.plan import STAGE_CODE

pytestmark = pytest.mark.workflow

SRC = Path(measures.__file__).resolve().parent.parent  # src/bnstudy


@pytest.fixture(scope="module")
def local_study(tmp_path_factory) -> dict:
    return harness.local_study(tmp_path_factory)


@pytest.fixture(scope="module")
def full_plan(local_study) -> list[dict]:
    """Every job of the tiny study with its files (a forced dry run): the study's DAG."""
    jobs = dry_run(local_study["project"], "--forceall")
    assert job_counts(jobs)["train"] >= 1, jobs
    return jobs


def _edited(project: Path, module: str) -> list[dict]:
    """The dry-run jobs after appending a comment line to ``src/bnstudy/<module>``."""
    path = project / "src" / "bnstudy" / module
    original = path.read_bytes()
    try:
        path.write_bytes(original + b"\n# edited by test_reruns\n")
        return dry_run(project)
    finally:
        path.write_bytes(original)


def _entries() -> dict[str, list[str]]:
    """Each rule's code entry modules (what the plan hashes; the analysis rule: all analyses)."""
    plots.load_all()
    out = {"prepare_data": STAGE_CODE["data"], "train": STAGE_CODE["train"],
           "aggregate": STAGE_CODE["tables"], "claims": STAGE_CODE["claims"],
           "report": [*STAGE_CODE["report"], *(f"plots/{m}.py" for m in plots.MODULES)],
           "analysis": [*STAGE_CODE["analyses"],
                        *(a.source for a in analyses.REGISTRY.values())]}
    out.update({m: [spec.source] for m, spec in measures.REGISTRY.items()})
    out.update({f"plot_{n}": [*STAGE_CODE["plots"], f"plots/{f.module}.py"]
                for n, f in plots.FAMILIES.items()})
    return {rule: list(e) for rule, e in out.items()}


def _users(module: str, project: Path) -> set[str]:
    """The rules whose code (their entry modules and what those import) includes ``module``."""
    src = project / "src" / "bnstudy"
    return {rule for rule, entries in _entries().items()
            if module in harness.imported_modules(entries, src)}


def _assert_plan(got: list[dict], full: list[dict], users: set[str]) -> None:
    """``got`` is exactly the jobs of the ``users`` rules plus everything downstream of them;
    the direct jobs rerun for changed params (their code hash) -- Snakemake names only the
    updated inputs when a job has both reasons --, the others for updated inputs and never for
    params."""
    direct = [j for j in full if j["rule"] in users]
    expected = job_keys(downstream(full, lambda j: j["rule"] in users))
    assert direct, f"the case selects no job of the tiny study ({sorted(users)})"
    assert job_keys(got) == expected, (
        f"unexpected reruns:\n  extra:   {sorted(set(job_keys(got)) - set(expected))}\n"
        f"  missing: {sorted(set(expected) - set(job_keys(got)))}")
    _assert_reasons(got, lambda j: j["rule"] in users)


def _assert_reasons(got: list[dict], direct) -> None:
    """The ``direct`` jobs of ``got`` rerun for changed params (their code hash) or, when they
    also have updated inputs, for those (Snakemake then names only the inputs); every other job
    for updated inputs and never for params."""
    remade = {f for j in got for f in j["output"]}
    for j in got:
        changed = "Params have changed since last execution" in j["reason"]
        updated = "Input files updated by another job" in j["reason"]
        assert updated == bool(remade.intersection(j["input"])), j
        if direct(j):
            assert changed or updated, j
        else:
            assert updated and not changed, j


def test_train_jobs_carry_their_priority(local_study, full_plan):
    """Snakemake is given each train job's priority (its block's estimated CPU-seconds,
    ``Plan.train_priority``): the dry run prints it for every train job, and no other job has
    one."""
    from bnstudy.config import study
    from bnstudy.planning.plan import Plan

    cfg = study.load([local_study["project"] / "config" / "config.yaml"])
    plan = Plan(study.check(cfg, local=False))
    trains = [j for j in full_plan if j["rule"] == "train"]
    assert trains
    for job in trains:
        assert job.get("priority") == [str(plan.train_priority(job["name"]))], job
    assert not [j for j in full_plan if j["rule"] != "train" and "priority" in j]


def test_complete_run_is_up_to_date(local_study):
    proc = snakemake(local_study["project"], "-n")
    assert "Nothing to be done" in proc.stdout + proc.stderr, proc.stdout[-3000:]


def _measure_module(measure: str) -> str:
    """The measure's implementation (its subpackage's compute module), else its contract."""
    source = measures.REGISTRY[measure].source
    compute = Path(source).parent / "compute.py"
    return compute.as_posix() if (SRC / compute).is_file() else source


@pytest.mark.parametrize("measure", sorted(measures.REGISTRY))
def test_editing_a_measure_module_reruns_only_that_measure(local_study, full_plan, measure):
    if not any(j["rule"] == measure for j in full_plan):
        pytest.skip(f"measure {measure!r} is not in the tiny study (no config section)")
    module = _measure_module(measure)
    users = _users(module, local_study["project"])  # generalization: also teacher_student
    assert measure in users
    assert not users & {"train", "prepare_data", "analysis", "aggregate"}, users
    got = _edited(local_study["project"], module)
    _assert_plan(got, full_plan, users)
    # one job per experiment the measure runs on, and no job of another measure
    assert sorted(j["wildcards"]["experiment"] for j in got if j["rule"] == measure) == sorted(
        j["wildcards"]["experiment"] for j in full_plan if j["rule"] == measure)
    rules = {j["rule"] for j in got}
    assert not rules & ({"train", "prepare_data", "analysis"} | set(measures.REGISTRY) - users)
    tables = {t for m in users for t in measures.REGISTRY[m].tables}
    assert {j["wildcards"]["table"] for j in got if j["rule"] == "aggregate"} <= tables
    plots.load_all()
    for rule in rules:
        if rule.startswith("plot_"):  # only figures drawn from the rerun tables, or from the
            # ledger they feed (the forest plot: issue 46) where the ledger reruns
            drawn = set(plots.FAMILIES[rule.removeprefix("plot_")].tables)
            assert drawn & tables or (drawn == {"claims"} and "claims" in rules), rule


def _train_modules():
    """The modules every training run runs on: the loop, the model's, the registry and the
    normalizer modules it imports statically (the modules that only define normalizers are
    imported by discovery and hashed per run: :func:`_entry_modules`)."""
    shared = closure([*STAGE_CODE["train"], "train/config.py", "train/spec.py"])
    norms_dir = sorted(p.relative_to(SRC).as_posix() for p in (SRC / "networks/norms").glob("*.py")
                       if p.name != "__init__.py")
    return ["networks/models.py", "train/loop.py", "train/config.py", "train/spec.py",
            "networks/normalizers.py", *(m for m in norms_dir if m in shared)]


def _entry_modules():
    """The normalizer modules that not every training run imports: those that define
    normalizers (found by discovery) and the layers only they import."""
    shared = set(_train_modules())
    return sorted(p.relative_to(SRC).as_posix() for p in (SRC / "networks/norms").glob("*.py")
                  if p.name != "__init__.py" and p.relative_to(SRC).as_posix() not in shared)


@pytest.mark.parametrize("module", _train_modules())
def test_editing_model_or_training_code_reruns_training_and_downstream(local_study, full_plan,
                                                                       module):
    users = _users(module, local_study["project"])  # and the measures that run model code
    assert "train" in users, f"training's code hash does not cover {module}"
    got = _edited(local_study["project"], module)
    _assert_plan(got, full_plan, users)
    assert job_counts(got)["train"] == job_counts(full_plan)["train"]
    assert not any(j["rule"] in ("prepare_data", "analysis") for j in got)


@pytest.mark.parametrize("module", _entry_modules())
def test_editing_a_normalizers_module_reruns_only_its_runs(local_study, full_plan, module):
    """A module that defines normalizers (or that only they import) is in the code hash of their
    runs only: editing it reruns those runs' training (for changed params) and what reads them,
    nothing else (no run of the tiny study uses the variants: nothing reruns) -- but for a
    stage whose own code imports it (claims reads population_norm's default options for the
    ledger's deviations), which reruns with its downstream."""
    names = {n for n, m in norms.entry_modules().items() if module in closure([m])}
    readers = _users(module, local_study["project"]) - {"train"}
    got = _edited(local_study["project"], module)

    def own(j):
        return (j["rule"] == "train" and j["wildcards"]["norm"] in names) or j["rule"] in readers

    assert job_keys(got) == job_keys(downstream(full_plan, own))
    _assert_reasons(got, own)
    assert not any(j["rule"] == "train" and not own(j) for j in got)


def test_adding_a_normalizer_reruns_nothing(local_study):
    """A new normalizer's module joins the registry by discovery; no run uses it yet."""
    path = local_study["project"] / "src" / "bnstudy" / "networks" / "norms" / "throwaway.py"
    path.write_text(
        "from bnstudy.networks.norms.registry import Normalizer, identity, register\n"
        "NORMALIZERS = ('throwaway_norm',)\n"
        "register(Normalizer('throwaway_norm', identity, description='a test entry'))\n")
    try:
        assert dry_run(local_study["project"]) == []
    finally:
        path.unlink()


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
    users = _users(module, local_study["project"])
    assert "report" in users  # the report's code hash covers every figure module
    assert all(r == "report" or r.startswith("plot_") for r in users), users
    got = _edited(local_study["project"], module)
    _assert_plan(got, full_plan, users)
    assert {j["rule"] for j in got} <= {r for r in users}
    if module == "plots/__init__.py":  # the shared code: every figure family
        assert {j["rule"] for j in got} == {j["rule"] for j in full_plan
                                             if j["rule"].startswith("plot_")} | {"report"}


# A figure family added as its own module: it draws the training table with training_curves'
# scope and datasets (one figure per experiment, teacher-student experiments skipped).
NEW_FAMILY = "throwaway_training_loss"
NEW_FAMILY_MODULE = f'''"""A throwaway figure family (tests/test_reruns.py)."""

from bnstudy.plots import Family, figure, finish, register


def draw(frames, options):
    fig, axes = figure(1, 1)
    axes[0, 0].plot(frames[0]["step"], frames[0]["loss"], ".")
    return finish(fig)


register(Family("{NEW_FAMILY}", draw, tables=("training",), module="throwaway_plot",
                skip_datasets=("teacher_student",), caption="Training loss (a test figure)."))
'''


def _argument_job(job: str):
    return lambda j: j["rule"] == "job_arguments" and j["wildcards"].get("job") == job


def _figure_dirs(job: dict) -> set[str]:
    return {Path(f).parent.name for f in job["output"] if f.endswith(".png")}


def test_adding_a_figure_module_reruns_only_its_family_and_the_report(local_study, full_plan):
    """A new figure module joins the registry by discovery (bnstudy.plots): it adds its family's
    job (and that job's argument file) and changes the report (its code hash covers every plot
    module; its inputs and argument file list every figure). No other job's code hash covers it
    (plots/__init__.py imports the modules dynamically): nothing else reruns."""
    plots_dir = local_study["project"] / "src" / "bnstudy" / "plots"
    path = plots_dir / "throwaway_plot.py"
    path.write_text(NEW_FAMILY_MODULE)
    try:
        got = dry_run(local_study["project"])
    finally:
        path.unlink()
        for cached in (plots_dir / "__pycache__").glob("throwaway_plot.*"):
            cached.unlink()
    rule = f"plot_{NEW_FAMILY}"
    # one job drawing a figure for each experiment training_curves draws (same scope and skip)
    (new,) = [j for j in got if j["rule"] == rule]
    (curves,) = [j for j in full_plan if j["rule"] == "plot_training_curves"]
    assert _figure_dirs(new) == _figure_dirs(curves) != set(), new
    assert "Missing output files" in new["reason"], new
    # expected: the new job and its argument file, the report's argument file (the figure list
    # changes) and everything downstream of that file in the study's DAG (the report)
    assert len([j for j in full_plan if _argument_job("report")(j)]) == 1
    expected = {("job_arguments", ("job", rule)), (rule,)} | set(
        job_keys(downstream(full_plan, _argument_job("report"))))
    assert sorted(job_keys(got)) == sorted(expected), job_keys(got)
    rules = {j["rule"] for j in got}
    assert "report" in rules and rules <= {"job_arguments", rule, "report"}, rules
    assert not rules & {"train", "prepare_data", "aggregate", "analysis", "claims",
                        *measures.REGISTRY}
    (args,) = [j for j in got if _argument_job("report")(j)]
    assert "Params have changed since last execution" in args["reason"], args
    (report,) = [j for j in got if j["rule"] == "report"]
    assert set(new["output"]) & set(report["input"]), report
    assert "Input files updated by another job" in report["reason"], report


@pytest.mark.parametrize("module", ["training"])
def test_editing_a_figure_module_reruns_only_its_families_and_the_report(local_study,
                                                                         full_plan, module):
    """Editing one plot module changes the code hash of its own families (and of any family
    whose module imports it) and the report's, nothing else: exactly those jobs rerun, the
    figures for changed params (no argument file changes), the report for redrawn figures."""
    plots.load_all()
    src = local_study["project"] / "src" / "bnstudy"
    users = {f"plot_{n}" for n, f in plots.FAMILIES.items()
             if f"plots/{module}.py" in harness.imported_modules([f"plots/{f.module}.py"], src)}
    drawn = {j["rule"] for j in full_plan if j["rule"].startswith("plot_")}
    own = {f"plot_{n}" for n, f in plots.FAMILIES.items() if f.module == module}
    assert own & drawn, f"the tiny study draws no family of plots/{module}.py"
    got = _edited(local_study["project"], f"plots/{module}.py")
    assert sorted(j["rule"] for j in got) == sorted((users & drawn) | {"report"})
    for j in got:  # the figures for their code hash; the report also for the redrawn figures
        reason = ("Input files updated by another job" if j["rule"] == "report" else
                  "Params have changed since last execution")
        assert reason in j["reason"], j


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
    # every figure and every table is registered (report()), under its category
    results = local_study["project"] / "results"
    for f in [*(results / "figures").rglob("*.png"), *(results / "tables").glob("*.parquet")]:
        assert f.name in html, f
    assert "Figures" in html and "Tables" in html
    assert "<script src=\"http" not in html and "<link href=\"http" not in html
    os.remove(out)
