# Helpers shared by the rules: paths, the run grid and per-rule params (the config is checked
# completely in bnstudy.study, called from the Snakefile, before this file is read). No rule
# lives here.

import hashlib
import json
import os
from pathlib import Path

from bnstudy import analyses as _analyses
from bnstudy import measures as _measures
from bnstudy import plots as _plots
from bnstudy import tables as _tables


# The results directory, normalised (``out/``, ``./out`` and ``out//`` are all ``out``) so that
# every path built from it has one spelling. The schema refuses what cannot be a Snakemake path
# or a command-line value (empty, control characters, braces, a leading '-'); any other
# character is safe in the commands, which shell-quote every path (``{...:q}``).
R = os.path.normpath(config["results"])
SRC = Path(workflow.basedir) / "src" / "bnstudy"

# The package modules each stage's command imports. Their content hash is a param of the
# stage's rule, so editing a module reruns exactly the stages that use it (and, through
# their outputs, everything downstream); see README "What reruns when I change X".
# Measures list their modules in bnstudy.measures.REGISTRY, figure families in bnstudy.plots.
STAGE_CODE = {
    "data": ["data/__init__.py", "data/files.py", "io.py"],
    "train": ["train/loop.py", "networks/models.py", "networks/normalizers.py",
              "train/checkpoints.py", "io.py"],
    "tables": ["tables.py", "io.py"],
    "plots": ["plots/__init__.py", "io.py"],
    "report": ["report/build.py", "tables.py", "io.py", "plots/__init__.py"],
    "analyses": ["analyses/__init__.py", "io.py"],
    "claims": ["claims/ledger.py", "io.py"],
}
# Measures run: those with a config section, on the experiments that do not exclude them
# (an experiment's `measures` list, default all) whose dataset kind they apply to.
# Tables: training + every table they fill.
def experiment_measures(name):
    e = config["experiments"][name]
    kind = config["datasets"].get(e["dataset"], {}).get("kind")  # checked in check_config
    chosen = e.get("measures")
    configured = [m for m, spec in _measures.REGISTRY.items()
                  if m in config and spec.applies_to(kind)]
    return configured if chosen is None else [m for m in configured if m in chosen]


MEASURES = sorted({m for e in config["experiments"] for m in experiment_measures(e)})
TABLE_MEASURE = {t: m for m in MEASURES for t in _measures.REGISTRY[m].tables}
TABLE_FILES = {"training": "history.parquet"}
TABLE_FILES.update({t: f"{t}.parquet" for t in TABLE_MEASURE})
# Analyses run: those named in the config's `analyses` section; one table each.
ANALYSES = sorted(config.get("analyses", {}))
_plots.load_all()
_AVAILABLE = set(TABLE_FILES) | set(ANALYSES)
FIGURES = {n: f for n, f in _plots.FAMILIES.items() if set(f.tables) <= _AVAILABLE}


def _module_file(parts):
    """``src/bnstudy``-relative file of the module or package ``parts``, or None."""
    base = Path(*parts) if parts else Path()
    for cand in (base.with_name(f"{base.name}.py") if parts else None, base / "__init__.py"):
        if cand is not None and (SRC / cand).is_file():
            return cand.as_posix()
    return None


def _package_imports(rel):
    """Package modules that ``src/bnstudy/<rel>`` imports (anywhere in it; static imports)."""
    import ast

    here, found = list(Path(rel).parent.parts), set()
    for node in ast.walk(ast.parse((SRC / rel).read_text(), rel)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + 1]
            elif (node.module or "").split(".")[0] == "bnstudy":
                base = []
            else:
                continue
            mod = [p for p in (node.module or "").split(".") if p]
            mod = mod[1:] if not node.level else mod
            for alias in node.names:  # `from pkg import submodule` or `from mod import name`
                found.add(_module_file([*base, *mod, alias.name]) or _module_file([*base, *mod]))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "bnstudy":
                    found.add(_module_file(alias.name.split(".")[1:]))
    return found - {None}


def code_version(stage, extra=()):
    """Hash of the stage's modules and, transitively, every package module they import (so a
    module added behind an import, e.g. a normalizer's layers, counts without listing it)."""
    todo, seen = [*STAGE_CODE.get(stage, ()), *extra], set()
    while todo:
        rel = todo.pop()
        if rel not in seen:
            seen.add(rel)
            todo.extend(_package_imports(rel))
    h = hashlib.sha256()
    for rel in sorted(seen):
        h.update(rel.encode())
        h.update((SRC / rel).read_bytes())
    return h.hexdigest()[:16]


EXPERIMENTS = config["experiments"]
RUNS = [(e, n, s) for e, x in EXPERIMENTS.items() for n in x["norms"] for s in x["seeds"]]
ALL_NORMS = sorted({n for _, n, _ in RUNS})
USED_DATASETS = sorted({x["dataset"] for x in EXPERIMENTS.values()})


def _alt(values):
    return "|".join(sorted(map(str, values)))


wildcard_constraints:
    experiment=_alt(EXPERIMENTS),
    norm=_alt(ALL_NORMS),
    seed=r"\d+",
    dataset=_alt(config["datasets"]),
    table=_alt(TABLE_FILES),
    family=_alt(FIGURES),
    analysis=_alt(ANALYSES or ["-"]),


# Every path the rules use is built here, by res() (under the normalised results directory)
# and by bnstudy.tables.run_file (a run's files, also used by the aggregate verb): one spelling.
def res(*parts):
    """A path under the results directory."""
    return os.path.join(R, *parts)


def results_dir(wildcards):
    """The results directory, as a params function (the linter rejects a literal path prefix)."""
    return R


def log_file(rule, *parts):
    """A rule's log, under the results directory (each study keeps its own logs)."""
    return res("logs", rule, *parts)


def run_out(name):
    """A per-run file, as a pattern over the experiment, norm and seed wildcards."""
    return _tables.run_file(R, "{experiment}", "{norm}", "{seed}", name)


def run_log(rule):
    """A per-run job's log, as a pattern over the experiment, norm and seed wildcards."""
    return log_file(rule, "{experiment}", "{norm}", "seed{seed}.log")


def dataset_params(wildcards):
    ds = config["datasets"][wildcards.dataset]
    return json.dumps(ds.get("options", {}), sort_keys=True)


def dataset_kind(wildcards):
    return config["datasets"][wildcards.dataset]["kind"]


def run_dataset(wildcards):
    return res("data", f"{EXPERIMENTS[wildcards.experiment]['dataset']}.npz")


def _model_config(name, norm):
    """A model's config with only this run's normalizer options (so that changing one
    normalizer's options reruns only that normalizer's runs)."""
    m = dict(config["models"][name])
    opts = m.pop("norm_options", {}).get(norm)
    if opts:
        m["norm_options"] = {norm: opts}
    return m


def run_spec(wildcards):
    """The run spec (JSON): everything that determines the training run, and nothing else."""
    e = EXPERIMENTS[wildcards.experiment]
    spec = {
        "experiment": wildcards.experiment,
        "dataset": e["dataset"],
        "model": e["model"],
        "model_config": _model_config(e["model"], wildcards.norm),
        "norm": wildcards.norm,
        "seed": int(wildcards.seed),
        "training": config["trainings"][e["training"]],
    }
    return json.dumps(spec, sort_keys=True)


def _table_grid(table):
    """The runs a table summarises: those of the experiments that run its measure."""
    measure = TABLE_MEASURE.get(table)
    return {e: {"norms": x["norms"], "seeds": x["seeds"]} for e, x in EXPERIMENTS.items()
            if measure is None or measure in experiment_measures(e)}


def table_inputs(wildcards):
    """A table's per-run files (the DAG's edges; the command gets the grid, not the list)."""
    return _tables.grid_files(R, _table_grid(wildcards.table), TABLE_FILES[wildcards.table])


def table_grid(wildcards):
    return json.dumps(_table_grid(wildcards.table), sort_keys=True)


def table_file(wildcards):
    return TABLE_FILES[wildcards.table]


def measure_options(name):
    """A measure's config section as JSON (its rule's only setting; {} when the measure is off,
    in which case no job of its rule is requested)."""
    return json.dumps(config.get(name, {}), sort_keys=True)


def measure_code(name):
    return code_version(name, _measures.REGISTRY[name].code)


def figure_tables(wildcards):
    return [res("tables", f"{t}.parquet") for t in FIGURES[wildcards.family].tables]


def figure_code(wildcards):
    return code_version("plots", [f"plots/{FIGURES[wildcards.family].module}.py"])


def all_tables():
    return [res("tables", f"{t}.parquet") for t in [*TABLE_FILES, *ANALYSES]]


def analysis_options(wildcards):
    return json.dumps(config["analyses"][wildcards.analysis], sort_keys=True)


def analysis_code(wildcards):
    return code_version("analyses", _analyses.REGISTRY[wildcards.analysis].code)


def _applies(family, experiment):
    kinds = family.datasets
    measured = {TABLE_MEASURE.get(t) for t in family.tables} - {None}
    if not measured <= set(experiment_measures(experiment)):
        return False
    kind = config["datasets"][EXPERIMENTS[experiment]["dataset"]]["kind"]
    if family.in_experiment is not None and not family.in_experiment(config, experiment):
        return False  # the options leave the rows this figure draws empty
    return (kinds is None or kind in kinds) and kind not in family.skip_datasets


def all_figures():
    per_experiment = [res("figures", e, f"{n}.png") for e in EXPERIMENTS
                      for n, f in FIGURES.items() if f.scope == "experiment" and _applies(f, e)]
    study = [res("figures", "study", f"{n}.png") for n, f in FIGURES.items()
             if f.scope == "study" and (f.in_study is None or f.in_study(config))]
    return per_experiment + study


def report_code():
    # every plot module: figure families and the report sections (text, findings) they register
    return code_version("report", sorted(f"plots/{m}.py" for m in _plots.MODULES))


def final_outputs():
    return [res("report.html"), res("tables", "claims.parquet"), *all_tables(), *all_figures()]
