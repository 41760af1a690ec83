# Helpers shared by the rules: paths, the run grid, per-rule params, and config checks that go
# beyond the JSON schema (cross references, registry names). No rule lives here.

import hashlib
import json
import os
from pathlib import Path

from bnstudy import data as _data
from bnstudy import measures as _measures
from bnstudy import models as _models
from bnstudy import normalizers as _normalizers
from bnstudy import plots as _plots
from bnstudy import training as _training

R = config["results"]
SRC = Path(workflow.basedir) / "src" / "bnstudy"

# The package modules each stage's command imports. Their content hash is a param of the
# stage's rule, so editing a module reruns exactly the stages that use it (and, through
# their outputs, everything downstream); see README "What reruns when I change X".
# Measures list their modules in bnstudy.measures.REGISTRY, figure families in bnstudy.plots.
STAGE_CODE = {
    "data": ["data.py", "realdata.py", "io.py"],
    "train": ["training.py", "models.py", "normalizers.py", "checkpoints.py", "io.py"],
    "tables": ["tables.py", "io.py"],
    "plots": ["plots/__init__.py", "io.py"],
    "report": ["report.py", "tables.py", "io.py", "plots/__init__.py"],
}
# Measures run: those with a config section. Tables: training + every table they fill.
MEASURES = [m for m in _measures.REGISTRY if m in config]
TABLE_FILES = {"training": "history.parquet"}
TABLE_FILES.update({t: f"{t}.parquet" for m in MEASURES for t in _measures.REGISTRY[m].tables})
_plots.load_all()
FIGURES = {n: f for n, f in _plots.FAMILIES.items() if set(f.tables) <= set(TABLE_FILES)}


def code_version(stage, extra=()):
    h = hashlib.sha256()
    for rel in [*STAGE_CODE.get(stage, ()), *extra]:
        h.update(rel.encode())
        h.update((SRC / rel).read_bytes())
    return h.hexdigest()[:16]


def _fail(msg):
    raise ValueError(f"config error: {msg}")


def check_config(cfg):
    """Cross-reference and registry checks, before any job runs."""
    for name, ds in cfg["datasets"].items():
        if ds["kind"] not in _data.kinds():
            _fail(f"dataset {name!r}: unknown kind {ds['kind']!r}; valid: {_data.kinds()}")
    for name, m in cfg["models"].items():
        try:
            _models.ModelConfig.from_dict(m)
        except ValueError as e:
            _fail(f"model {name!r}: {e}")
    for name, t in cfg["trainings"].items():
        try:
            _training.TrainConfig.from_dict(t)
        except ValueError as e:
            _fail(f"training {name!r}: {e}")
    for name, e in cfg["experiments"].items():
        for key, table in (("dataset", "datasets"), ("model", "models"), ("training", "trainings")):
            if e[key] not in cfg[table]:
                _fail(f"experiment {name!r}: {key} {e[key]!r} is not defined; "
                      f"valid: {sorted(cfg[table])}")
        for norm in e["norms"]:
            if norm not in _normalizers.REGISTRY:
                _fail(f"experiment {name!r}: unknown normalizer {norm!r}; "
                      f"valid: {_normalizers.names()}")


check_config(config)

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


def res(*parts):
    """A path under the results directory."""
    return os.path.join(R, *parts)


def run_out(name):
    """A per-run file, as a pattern over the experiment, norm and seed wildcards."""
    return res("runs", "{experiment}", "{norm}", "seed{seed}", name)


def run_files(name, experiment=None):
    """Per-run file ``name`` for every run (of one experiment, if given)."""
    return [f"{R}/runs/{e}/{n}/seed{s}/{name}" for e, n, s in RUNS
            if experiment is None or e == experiment]


def dataset_params(wildcards):
    ds = config["datasets"][wildcards.dataset]
    return json.dumps(ds.get("options", {}), sort_keys=True)


def dataset_kind(wildcards):
    return config["datasets"][wildcards.dataset]["kind"]


def run_dataset(wildcards):
    return f"{R}/data/{EXPERIMENTS[wildcards.experiment]['dataset']}.npz"


def run_spec(wildcards):
    """The run spec (JSON): everything that determines the training run, and nothing else."""
    e = EXPERIMENTS[wildcards.experiment]
    spec = {
        "experiment": wildcards.experiment,
        "dataset": e["dataset"],
        "model": e["model"],
        "model_config": config["models"][e["model"]],
        "norm": wildcards.norm,
        "seed": int(wildcards.seed),
        "training": config["trainings"][e["training"]],
    }
    return json.dumps(spec, sort_keys=True)


def table_inputs(wildcards):
    return run_files(TABLE_FILES[wildcards.table])


def measure_options(name):
    """A measure's config section as JSON (its rule's only setting)."""
    return json.dumps(config[name], sort_keys=True)


def measure_code(name):
    return code_version(name, _measures.REGISTRY[name].code)


def figure_tables(wildcards):
    return [f"{R}/tables/{t}.parquet" for t in FIGURES[wildcards.family].tables]


def figure_code(wildcards):
    return code_version("plots", [f"plots/{FIGURES[wildcards.family].module}.py"])


def all_tables():
    return [f"{R}/tables/{t}.parquet" for t in TABLE_FILES]


def _applies(family, experiment):
    kinds = family.datasets
    return kinds is None or config["datasets"][EXPERIMENTS[experiment]["dataset"]]["kind"] in kinds


def all_figures():
    return [f"{R}/figures/{e}/{n}.png" for e in EXPERIMENTS for n, f in FIGURES.items()
            if _applies(f, e)]


def report_code():
    return code_version("report", sorted({f"plots/{f.module}.py" for f in FIGURES.values()}))


def final_outputs():
    return [f"{R}/report.html", *all_tables(), *all_figures()]
