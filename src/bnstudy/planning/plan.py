"""The workflow's plan of a checked, flat study config: which jobs exist and what each is given.

``workflow/rules/common.smk`` builds one :class:`Plan` when the Snakefile is read and its
``get_*`` helpers only look things up here, so everything the rules compute is plain Python,
unit-tested without Snakemake (``tests/test_plan.py``). Importing this module does not import
torch or matplotlib (the measure, analysis and figure registries are torch-free contracts).

Jobs (see the README's job table):

- ``prepare_data``: one per dataset an experiment uses;
- ``train_<experiment>_<norm>_s<seeds>``: one per block of an arm's seeds (at most
  ``training_block``; one round's seeds: :mod:`bnstudy.planning.training`);
- each measure: one job per block of an experiment's seeds, over every normalizer of those
  seeds (the work per run is seconds, the start-up of a torch process is too); it writes one
  file per table under ``runs/<experiment>/seeds<block>/``. An experiment is one block of its
  seeds, or, with a replication policy, one block per round (the round's new seeds), so a round
  trains and measures only its new runs;
- ``replication_round`` (a checkpoint) per round of a study with replication policies: the
  ledger of the study as it stands and which experiments get the next round's seeds
  (:mod:`bnstudy.replication.rounds`); the plan reads the round files back
  (:meth:`bnstudy.replication.schedule.Rounds.looks`) to decide what the next round, the
  tables and the report hold;
  ``replication_table`` gathers them;
- ``aggregate``: one per table, the study-wide table with each experiment's sweep axes as
  columns;
- each figure family: one job drawing all of its figures;
- ``analysis`` per configured analysis, ``claims``, ``report``;
- ``job_arguments``: one per job whose arguments grow with the study (the aggregate jobs' run
  grid, a figure family's outputs, the report's config and figures): it writes them to a file,
  one argument per line, that the job's command names as ``@FILE``
  (:mod:`bnstudy.planning.arguments`), so no command line grows with the study.

What a job's ``code`` param hashes: its entry modules and, transitively, every package module
they import (:mod:`bnstudy.planning.codeversion`), so a change reruns exactly the jobs that run it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import cached_property

from bnstudy import analyses, measures, plots
from bnstudy.claims.declare import reads
from bnstudy.claims.say import deviations
from bnstudy.networks import norms
from bnstudy.planning.codeversion import code_version
from bnstudy.planning.figures import Figures
from bnstudy.planning.job_resources import Resources
from bnstudy.planning.training import Training
from bnstudy.replication.schedule import Rounds
from bnstudy.tables import layout

# The package modules each fixed stage's command imports (entries of its code hash).
STAGE_CODE = {
    "data": ("data/__init__.py", "data/files.py", "io.py"),
    # and the module of the run's normalizer: Plan.train_code
    "train": ("train/loop.py", "networks/models.py", "networks/normalizers.py",
              "train/checkpoints.py", "io.py"),
    "tables": ("tables/aggregation.py", "io.py"),
    "plots": ("plots/__init__.py", "io.py"),
    "report": ("report/build.py", "tables/intervals.py", "io.py", "plots/__init__.py"),
    "analyses": ("analyses/__init__.py", "io.py"),
    "claims": ("claims/ledger.py", "io.py"),
    "rounds": ("replication/rounds.py", "io.py"),
}
HISTORY = "training"  # the table of training histories (per-run files history.parquet)
REPLICATION = "replication"  # the table of replication rounds (tables/replication.parquet)


def _json(value) -> str:
    return json.dumps(value, sort_keys=True)


@dataclass
class Plan(Rounds, Figures, Resources, Training):
    """The jobs of one study: ``config`` is the flat config :func:`bnstudy.config.study.check`
    returned, ``results`` its results directory (normalised: one spelling per path)."""

    config: dict

    def __post_init__(self):
        self.results = os.path.normpath(self.config["results"])
        self.experiments = self.config["experiments"]
        self.axes = self.config.get("sweep_axes", {})
        self.use_rounds(self._read_round_file)
        plots.load_all()

    # -- paths -----------------------------------------------------------------------------
    def res(self, *parts) -> str:
        return os.path.join(self.results, *parts)

    def log(self, rule: str, *parts) -> str:
        return self.res("logs", rule, *parts)

    def run_file(self, experiment, norm, seed, name: str) -> str:
        return layout.run_file(self.results, experiment, norm, seed, name)

    # -- runs and measures -------------------------------------------------------------------
    @cached_property
    def runs(self) -> list[tuple[str, str, int]]:
        """The declared runs (a replicated experiment's: its first round's)."""
        return [(e, n, s) for e, x in self.experiments.items() for n in x["norms"]
                for s in (self.policies[e].seeds(x["seeds"], 0) if e in self.policies
                          else x["seeds"])]

    def dataset_kind(self, experiment: str) -> str:
        return self.config["datasets"][self.experiments[experiment]["dataset"]]["kind"]

    def experiment_measures(self, experiment: str) -> list[str]:
        """Measures run on an experiment: those with a config section that apply to its data
        kind, restricted to the experiment's ``measures`` list when it has one."""
        kind, chosen = self.dataset_kind(experiment), self.experiments[experiment].get("measures")
        on = [m for m, spec in measures.REGISTRY.items()
              if m in self.config and spec.applies_to(kind)]
        return on if chosen is None else [m for m in on if m in chosen]

    @cached_property
    def measures(self) -> list[str]:
        return sorted({m for e in self.experiments for m in self.experiment_measures(e)})

    def measure_experiments(self, measure: str) -> list[str]:
        return [e for e in self.experiments if measure in self.experiment_measures(e)]

    @cached_property
    def table_measure(self) -> dict[str, str]:
        return {t: m for m in self.measures for t in measures.REGISTRY[m].tables}

    @cached_property
    def tables(self) -> list[str]:
        return [HISTORY, *self.table_measure]

    @cached_property
    def analyses(self) -> list[str]:
        return sorted(self.config.get("analyses", {}))

    # -- per-job values ----------------------------------------------------------------------
    def grid(self, experiments, looks: dict[str, int] | None = None) -> dict:
        """``{experiment: {"norms", "seeds", "blocks", "block_norms"[, "axes"]}}``: the runs,
        blocks of seeds with each block's normalizers (and sweep axes) of the given experiments,
        as the aggregate and measure commands take them; a replicated experiment's at ``looks``
        (default: where it stopped)."""
        if looks is None and any(e in self.policies for e in experiments):
            looks = self.looks()
        out = {}
        for e in experiments:
            look = None if e not in self.policies else looks[e]
            blocks = self.blocks(e, look)
            out[e] = {"norms": list(self.experiments[e]["norms"]),
                      "seeds": [s for b in blocks for s in b], "blocks": blocks,
                      "block_norms": self.block_norms(e, look)}
            if e in self.axes:
                out[e]["axes"] = self.axes[e]
        return out

    def block_grid(self, experiment: str, label: str) -> dict:
        """The grid of one block of an experiment's seeds (a measure job's runs)."""
        seeds = layout.label_seeds(label)
        policy = self.policies.get(experiment)
        planned = self.planned_blocks(experiment)
        if seeds not in planned:
            raise ValueError(f"seeds {label!r} are not a block of experiment {experiment!r}; "
                             f"its blocks: {[layout.seeds_label(b) for b in planned]}")
        # block j's normalizers are in round j - 1's record, read only once the block is asked
        # for (a round's jobs exist once the round before it is done)
        norms = (list(self.experiments[experiment]["norms"]) if policy is None else
                 self.block_norms(experiment, planned.index(seeds))[-1])
        out = {"norms": norms, "seeds": seeds}
        if experiment in self.axes:
            out["axes"] = self.axes[experiment]
        return {experiment: out}

    def run_spec(self, experiment: str, norm: str, seed) -> str:
        """Everything that determines a training run, and nothing else (JSON)."""
        e = self.experiments[experiment]
        model = dict(self.config["models"][e["model"]])
        opts = model.pop("norm_options", {}).get(norm)  # only this run's normalizer's options
        if opts:
            model["norm_options"] = {norm: opts}
        own = (self.config.get("normalizers") or {}).get(norm)  # a user's normalizer
        return _json({"experiment": experiment, "dataset": e["dataset"], "model": e["model"],
                      "model_config": model, "norm": norm, "seed": int(seed),
                      "training": self.config["trainings"][e["training"]],
                      **({"normalizer_from": own["from"]} if own else {})})

    def dataset_file(self, experiment: str) -> str:
        return self.res("data", f"{self.experiments[experiment]['dataset']}.npz")

    def checkpoints(self, experiment: str, label: str) -> list[str]:
        return layout.grid_files(self.results, self.block_grid(experiment, label),
                                 "checkpoints.pt")

    def measure_outputs(self, measure: str) -> dict[str, str]:
        """A measure job's outputs, ``{table: pattern over {experiment} and {block}}``."""
        return {t: os.path.join(self.results, "runs", "{experiment}", "seeds{block}",
                                f"{t}.parquet")
                for t in measures.REGISTRY[measure].tables}

    def measure_options(self, measure: str) -> str:
        return _json(self.config.get(measure, {}))

    def table_experiments(self, table: str) -> list[str]:
        return (list(self.experiments) if table == HISTORY
                else self.measure_experiments(self.table_measure[table]))

    def table_inputs(self, table: str, looks: dict[str, int] | None = None) -> list[str]:
        """A table's parts (its experiments' runs or blocks, at ``looks``: default final)."""
        grid = self.grid(self.table_experiments(table), looks)
        if table == HISTORY:
            return layout.grid_files(self.results, grid, "history.parquet")
        return layout.experiment_files(self.results, grid, f"{table}.parquet")

    def table_grid(self, table: str) -> str:
        return _json(self.grid(self.table_experiments(table)))

    def table_level(self, table: str) -> str:
        """Where a table's parts live: ``run`` (per-run files) or ``experiment``."""
        return "run" if table == HISTORY else "experiment"

    def table_file(self, table: str) -> str:
        return "history.parquet" if table == HISTORY else f"{table}.parquet"

    # -- arguments that grow with the study, passed in files -----------------------------------
    @cached_property
    def argument_jobs(self) -> list[str]:
        """The jobs whose arguments go in a file (:meth:`job_arguments`)."""
        return [*(f"aggregate_{t}" for t in self.tables), *(f"plot_{f}" for f in self.figures),
                "report", "claims", *(f"round{k}" for k in range(self.max_rounds))]

    def job_arguments(self, job: str) -> list[str]:
        """The arguments of ``job`` (one of :attr:`argument_jobs`) that grow with the study."""
        kind, _, name = job.partition("_")
        if kind == "aggregate" and name in self.tables:
            return ["--grid", self.table_grid(name)]
        if job == "claims":
            return ["--plans", _json(self.plans()),
                    "--setup", _json(deviations.setups(self.config))]
        if job.startswith("round") and job[5:].isdigit() and int(job[5:]) < self.max_rounds:
            return self.round_arguments(int(job[5:]))
        if kind == "plot" and name in self.figures:
            return ["--out", *(f"{e}={p}" for e, p in self.figure_outputs(name).items())]
        if job == "report":
            return ["--config", _json(self.config), "--figures", *self.all_figures()]
        raise ValueError(f"unknown job {job!r}; valid: {self.argument_jobs}")

    def arguments_file(self, job: str) -> str:
        return self.res("jobs", f"{job}.args")

    def all_tables(self) -> list[str]:
        extra = [REPLICATION] if self.policies else []
        return [self.res("tables", f"{t}.parquet") for t in [*self.tables, *self.analyses,
                                                               *extra]]

    def ledger_tables(self) -> list[str]:
        """The tables the claims job reads (:data:`bnstudy.claims.declare.reads.TABLES`)."""
        return [self.res("tables", f"{t}.parquet") for t in [*self.tables, *self.analyses]
                if t in reads.TABLES]

    # -- code versions -----------------------------------------------------------------------
    def code(self, stage: str, extra=()) -> str:
        return code_version([*STAGE_CODE.get(stage, ()), *extra])

    def train_code(self, norm: str, model: str | None = None) -> str:
        """A train job's code version: the training stage's modules and the module that defines
        the run's normalizer (:func:`bnstudy.networks.norms.entry_modules`; the registry
        imports the others dynamically, so their code is not in the stage's): a new or changed
        normalizer reruns only the runs that use it. A user's model (``model``'s ``from``,
        :mod:`bnstudy.networks.user_models`) adds its file's content the same way."""
        from bnstudy import user_code

        own = (self.config.get("normalizers") or {}).get(norm)
        mine = (self.config["models"].get(model) or {}).get("from") if model else None
        extra = user_code.source_digest(mine) if mine else ""
        if own:  # a user's normalizer: its file's content (bnstudy.networks.external)
            return self.code("train") + user_code.source_digest(own["from"]) + extra
        entry = norms.entry_modules().get(norm)
        return self.code("train", [entry] if entry else []) + extra

    def measure_code(self, measure: str) -> str:
        return code_version([measures.REGISTRY[measure].source])

    def analysis_code(self, analysis: str) -> str:
        return self.code("analyses", [analyses.REGISTRY[analysis].source])

    def figure_code(self, name: str) -> str:
        return self.code("plots", [f"plots/{self.figures[name].module}.py"])

    def report_code(self) -> str:
        # every plot module: figure families and the report sections they register
        return self.code("report", sorted(f"plots/{m}.py" for m in plots.MODULES))

    def job_counts(self) -> dict[str, int]:
        """How many jobs of each rule the study runs, its replication rounds as the round files
        record them (the README's counts blocks, rewritten by ``bnstudy ledger --readme``)."""
        counts: dict[str, int] = {"prepare_data": len({x["dataset"]
                                                        for x in self.experiments.values()})}
        grid = self.grid(self.experiments)
        counts["train"] = self.train_job_count(grid)
        for m in self.measures:
            counts[m] = sum(len(grid[e]["blocks"]) for e in self.measure_experiments(m))
        rounds = len(self.round_files())
        counts.update({"replication_round": rounds, "replication_table": int(bool(rounds)),
                       "aggregate": len(self.tables), "analysis": len(self.analyses),
                       **{f"plot_{f}": 1 for f in self.figures}, "claims": 1, "report": 1})
        # the argument files: every job of argument_jobs but the rounds not taken
        counts["job_arguments"] = len(self.argument_jobs) - (self.max_rounds - rounds)
        counts["all"] = 1
        return {k: v for k, v in counts.items() if v}

    def final_outputs(self) -> list[str]:
        return [self.res("report.html"), self.res("tables", "claims.parquet"),
                *self.all_tables(), *self.all_figures()]
