# Paths and get_* helpers for the rules. The logic behind them (which jobs exist, what each is
# given, code versions) is bnstudy.planning.plan, unit-tested without Snakemake; this file only looks
# things up there. The config was checked completely (bnstudy.config.study) before this file is read.
# Nothing here imports torch or matplotlib.

import json

from bnstudy.planning.plan import Plan

PLAN = Plan(config)
R = PLAN.results  # normalised: ``out/``, ``./out`` and ``out//`` are all ``out``


def _alt(values):
    return "|".join(sorted(map(str, values))) or "-"


wildcard_constraints:
    experiment=_alt(PLAN.experiments),
    norm=_alt({n for _, n, _ in PLAN.runs}),
    seed=r"\d+",
    dataset=_alt(config["datasets"]),
    table=_alt(PLAN.tables),
    analysis=_alt(PLAN.analyses),
    job=_alt(PLAN.argument_jobs),
    block=r"\d+(-\d+)?(_\d+(-\d+)?)*",
    round=r"\d+",


def res(*parts):
    """A path under the results directory."""
    return PLAN.res(*parts)


def log_file(rule, *parts):
    """A rule's log, under the results directory (each study keeps its own logs)."""
    return PLAN.log(rule, *parts)


def _round_record(k):
    """Round k's record (bnstudy.replication.rounds): a checkpoint, so Snakemake runs the round
    first when its file is missing and then re-evaluates the jobs that read it."""
    return PLAN.read_round(checkpoints.replication_round.get(round=k).output[0])


PLAN.use_rounds(_round_record)


def get_results(wildcards):
    return R


# The run's jobs, read when it starts (the Snakefile's onstart: whether a fork server pays off,
# bnstudy.forkserver.worth_starting): the rules of the jobs to run and whether one of them is a
# checkpoint; (None, True) where this Snakemake keeps its DAG elsewhere.
def get_jobs_to_run():
    dag = getattr(workflow, "dag", None)
    if dag is None or not hasattr(dag, "needrun_jobs"):
        return None, True
    jobs = list(dag.needrun_jobs())
    checkpoints = any(getattr(job, "is_checkpoint", True) for job in jobs)
    return [job.rule.name for job in jobs], checkpoints


# A job's cluster request, estimated from the study (bnstudy.planning.job_resources; the config's
# resources: section overrides it per rule). Snakemake passes the rule's name as `rulename`.
def get_gpu(wildcards, rulename):
    return PLAN.job_resources(rulename, wildcards)["gpu"]


def get_mem_mb(wildcards, rulename):
    return PLAN.job_resources(rulename, wildcards)["mem_mb"]


def get_runtime(wildcards, rulename):
    return PLAN.job_resources(rulename, wildcards)["runtime"]


def get_dataset_kind(wildcards):
    return config["datasets"][wildcards.dataset]["kind"]


def get_dataset_options(wildcards):
    return json.dumps(config["datasets"][wildcards.dataset].get("options", {}), sort_keys=True)


def get_run_dataset(wildcards):
    return PLAN.dataset_file(wildcards.experiment)


def get_train_dataset(job):
    return PLAN.dataset_file(PLAN.train_jobs[job][0])


def get_train_outputs(job):
    return PLAN.train_outputs(job)


def get_train_priority(job):
    return PLAN.train_priority(job)


def get_train_log(job):
    return PLAN.train_log(job)


def get_train_params(job):
    return PLAN.train_params(job)


def get_block_checkpoints(wildcards):
    return PLAN.checkpoints(wildcards.experiment, wildcards.block)


def get_block_grid(wildcards):
    return json.dumps(PLAN.block_grid(wildcards.experiment, wildcards.block), sort_keys=True)


def get_round_inputs(wildcards):
    return PLAN.round_inputs(int(wildcards.round))


def get_round_arguments(wildcards):
    return PLAN.arguments_file(f"round{wildcards.round}")


def get_round_files(wildcards):
    return PLAN.round_files()


def get_job_rounds(wildcards):
    return PLAN.job_rounds(wildcards.job)


def get_measure_outputs(measure):
    return PLAN.measure_outputs(measure)


def get_measure_experiments(measure):
    return _alt(PLAN.measure_experiments(measure))


def get_table_inputs(wildcards):
    return PLAN.table_inputs(wildcards.table)


def get_table_file(wildcards):
    return PLAN.table_file(wildcards.table)


def get_table_level(wildcards):
    return PLAN.table_level(wildcards.table)


def get_table_code(wildcards):
    return PLAN.code("tables")


def get_analysis_options(wildcards):
    return json.dumps(config["analyses"][wildcards.analysis], sort_keys=True)


def get_analysis_code(wildcards):
    return PLAN.analysis_code(wildcards.analysis)


def get_job_arguments(wildcards):
    """The arguments of a job that grow with the study (bnstudy.planning.plan.Plan.job_arguments)."""
    return PLAN.job_arguments(wildcards.job)


def arguments_file(job):
    """The file holding a job's growing arguments, named on its command line as @FILE."""
    return PLAN.arguments_file(job)


def get_all_tables():
    return PLAN.all_tables()


def get_ledger_tables():
    return PLAN.ledger_tables()


def get_all_figures():
    return PLAN.all_figures()


def get_figure_report_files(family):
    """A figure family's files, registered with Snakemake's report (snakemake --report): each
    figure under its family, captioned with the family's caption (workflow/report/figure.rst),
    labelled by family, experiment and format (bnstudy.planning.figures)."""
    caption = "../report/figure.rst"
    register = report  # (a name of its own: snakefmt reads "report" as the directive)
    return [
        register(f, caption=caption, category="Figures", subcategory=family, labels=label)
        for f, label in PLAN.figure_report_entries(family)
    ]


def get_final_outputs():
    return PLAN.final_outputs()


def get_figure_exports():
    """Every figure's plots.formats copies (PDF, SVG): inputs of the report, so that a formats
    change asks for the new files and redraws the figures (Snakemake checks the params of a job
    only when every output has metadata, and a job's missing outputs only when requested)."""
    return [f for name in PLAN.figures for f in PLAN.figure_files(name) if not f.endswith(".png")]


def get_paper_configs():
    """The paper-scale study configs (config/studies/*_paper.yaml) beside the Snakefile."""
    studies = Path(workflow.basedir) / "config" / "studies"
    return sorted(str(p) for p in studies.glob("*_paper.yaml"))
