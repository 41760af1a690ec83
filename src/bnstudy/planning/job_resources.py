"""The cluster request of every job of a study's plan (the rules' ``resources``).

A mixin of :class:`bnstudy.planning.plan.Plan` (it needs the plan's ``config``, ``experiments``,
:attr:`runs`, :attr:`measures`, :meth:`measure_experiments`, :attr:`tables`, :attr:`analyses`,
:attr:`figures`, :attr:`policies` and :attr:`max_rounds`). :meth:`job_resources` gives a job's
``{"gpu", "mem_mb", "runtime"}`` from its rule and wildcards, which is all Snakemake hands a
resource function (``workflow/rules/common.smk``: ``get_gpu``, ``get_mem_mb``,
``get_runtime``); the estimate is :func:`bnstudy.planning.resources.request` over the job's work,
and the
config's ``resources:`` entry for the rule replaces any of its values. A measure job's work is
its block's runs (every normalizer of the experiment: a replication round may measure fewer), so
it never depends on a round's record, and :meth:`resource_jobs` lists every job a study can
have, all its replication rounds taken (``python -m bnstudy check --cluster``).

``gpus_per_train_job`` (config) is an input of the estimate: the GPUs a train job asks for when
it needs one (0, the default, means 1); whether it needs one is the estimate's call, and
``resources: {train: {gpu: N}}`` forces it.
"""

from __future__ import annotations

import math
from functools import cached_property

from bnstudy import data, measures, model_size
from bnstudy.planning import resources
from bnstudy.tables import layout


def n_test(kind: str, options: dict | None) -> int:
    """The test-set size ``bnstudy.data.make(kind, options)`` gives, from the options alone."""
    o = data.check_options(kind, options)
    if kind == "digits":
        return math.ceil(o["test_fraction"] * data.DIGITS_SIZE)
    if kind in data.REAL_SIZES:
        full = data.REAL_SIZES[kind][1]
        return full if o.get("n_test") is None else min(o["n_test"], full)
    if kind in data.USER_KINDS:  # a user's file or folder: from its headers or listing
        return data.user.describe(kind, o)["n_test"]
    return int(o["n_test"])


class Resources:
    @cached_property
    def _requests(self) -> dict:
        return {}  # (rule, wildcards) -> its request

    @cached_property
    def _facts(self) -> dict:
        return {}  # (what, name...) -> its value, worked out once per plan (:meth:`_once`)

    def _once(self, key: tuple, compute):
        """``compute()``, kept under ``key`` for the plan's life: a study's thousands of jobs
        share a few datasets, experiments, models and measure sections."""
        if key not in self._facts:
            self._facts[key] = compute()
        return self._facts[key]

    def _dataset(self, name: str) -> tuple[tuple, int, int, int]:
        """``(input shape, out_dim, n_train, n_test)`` of a dataset entry."""
        def compute():
            ds = self.config["datasets"][name]
            shape, out_dim = data.shape(ds["kind"], ds.get("options"))
            return (shape, out_dim, data.n_train(ds["kind"], ds.get("options")),
                    n_test(ds["kind"], ds.get("options")))

        return self._once(("dataset", name), compute)

    def _experiment(self, experiment: str):
        """``(model size, n_train, n_test, training)`` of an experiment (sizes counted once per
        model and input shape)."""
        x = self.experiments[experiment]
        shape, out_dim, n_train, n_te = self._dataset(x["dataset"])
        size = self._once(("size", x["model"], tuple(shape), out_dim), lambda: model_size.size(
            self.config["models"][x["model"]], shape, out_dim))
        return size, n_train, n_te, self.config["trainings"][x["training"]]

    def _measure_options(self, measure: str):
        """The measure's parsed options (its config section)."""
        return self._once(("options", measure), lambda: measures.REGISTRY[measure].options.parse(
            self.config.get(measure, {})))

    def job_work(self, rule: str, wildcards: dict) -> resources.Work:
        """The work of one job of ``rule`` (:class:`bnstudy.planning.resources.Work`)."""
        if rule == "train":  # a block of one arm's seeds (bnstudy.planning.training)
            size, n_train, n_te, training = self._experiment(wildcards["experiment"])
            entry = self.config["models"][self.experiments[wildcards["experiment"]]["model"]]
            seeds = len(layout.label_seeds(wildcards["block"]))
            return resources.train_work(size, n_train, n_te, training,
                                        model_size.refresh(entry, wildcards["norm"]), seeds)
        if rule in measures.REGISTRY:
            e = wildcards["experiment"]
            size, n_train, n_te, training = self._experiment(e)
            opts = self._measure_options(rule)
            runs = len(self.experiments[e]["norms"]) * len(layout.label_seeds(wildcards["block"]))
            return resources.measure_work(rule, opts, size, n_train, n_te, training).times(runs)
        if rule == "prepare_data":
            shape, _, n_train, n_te = self._dataset(wildcards["dataset"])
            return resources.data_work(math.prod(shape), n_train, n_te)
        if rule == "aggregate":
            return resources.summary_work(self._max_runs)
        if rule in ("replication_round", "claims", "report"):  # every table's parts
            return resources.summary_work(self._max_runs * len(self.tables), 0.05)
        return resources.summary_work(len(self.experiments))

    @cached_property
    def _max_runs(self) -> int:
        return sum(len(x["norms"]) * sum(map(len, self.planned_blocks(e)))
                   for e, x in self.experiments.items())

    def seed_minutes(self, experiment: str) -> float:
        """CPU-minutes one seed of every arm of ``experiment`` costs on this kind of machine
        (:func:`bnstudy.planning.budget.seed_minutes`): what prices a ``cpu_minutes`` budget."""
        from bnstudy.planning import budget

        return budget.seed_minutes(self, experiment)

    def job_resources(self, rule: str, wildcards) -> dict:
        """``{"gpu", "mem_mb", "runtime"}`` of one job of ``rule`` (``wildcards``: its
        wildcards as a mapping)."""
        wildcards = dict(wildcards.items())  # a Snakemake Wildcards object or a dict
        if rule in self.train_jobs:  # a generated train rule (no wildcards): stage train
            rule, wildcards = "train", self.train_wildcards(rule)
        key = (rule, tuple(sorted(wildcards.items())))
        cache = self._requests
        if key not in cache:
            job = rule in ("train", *measures.REGISTRY)
            override = (self.config.get("resources") or {}).get(rule)
            cache[key] = resources.request(
                self.job_work(rule, wildcards), self.config["device"],
                self.config["threads"] if job else 1,
                self.config.get("gpus_per_train_job", 0) if rule == "train" else 1, override)
        return cache[key]

    def resource_jobs(self) -> dict[str, list[dict]]:
        """``{rule: [wildcards of each job]}``: every job a cluster runs, every replication
        round taken (the local ``job_arguments`` jobs are left out)."""
        used = dict.fromkeys(x["dataset"] for x in self.experiments.values())
        out = {"prepare_data": [{"dataset": d} for d in used],
               "train": [self.train_wildcards(name) for name in self.train_jobs]}
        for m in self.measures:
            out[m] = [{"experiment": e, "block": layout.seeds_label(b)}
                      for e in self.measure_experiments(m) for b in self.planned_blocks(e)]
        out["analysis"] = [{"analysis": a} for a in self.analyses]
        out["aggregate"] = [{"table": t} for t in self.tables]
        out["replication_round"] = [{"round": str(k)} for k in range(self.max_rounds)]
        out["replication_table"] = [{}] if self.policies else []
        for f in self.figures:
            out[f"plot_{f}"] = [{}]
        out["claims"], out["report"] = [{}], [{}]
        return {rule: jobs for rule, jobs in out.items() if jobs}

    def _requests_by_rule(self) -> tuple[dict, dict]:
        """Every job's request by rule, and the CPU threads of each rule's jobs."""
        rows = {rule: [self.job_resources(rule, w) for w in jobs]
                for rule, jobs in self.resource_jobs().items()}
        return rows, {r: self.config["threads"] for r in ("train", *self.measures)}

    def resource_table(self) -> str:
        """What ``check --cluster`` prints (:func:`bnstudy.planning.resources.table`)."""
        rows, threads = self._requests_by_rule()
        return resources.table(rows, threads, set(self.config.get("resources") or {}))

    def requested_hours(self) -> tuple[float, float]:
        """(GPU-hours, CPU-hours) the study's requests ask for in all (the table's last line)."""
        return resources.requested_hours(*self._requests_by_rule())
