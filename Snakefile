# bnstudy: what do normalization layers do to a deep network?
# This file is the table of contents: config + validation, the stages, and the final target.

from pathlib import Path

from snakemake.utils import min_version

from bnstudy import forkserver
from bnstudy.jobs import lifeline

from bnstudy.planning import lock as results_lock, targets
from bnstudy.config import loader, study

min_version("9.0")


# The default study, unless --configfile names another: a study file replaces it whole
# (Snakemake would otherwise merge the two, mixing their experiments). Each config file is read
# again strictly (duplicate keys, YAML errors with line and column) with its `extends:` chain,
# --config overrides merged in and the sweeps expanded (bnstudy.config.study.load); that flat config
# replaces Snakemake's own reading and is checked completely (bnstudy.config.study): a bad config ends
# the run before any job, with one short message. A CUDA device is checked here only when jobs
# run on this machine. A config this code checked before is not built again (check_cached:
# bnstudy.keyed_cache; every cluster job parses this file twice).
_flat = loader.or_exit(
    study.load,
    workflow.overwrite_configfiles or ["config/config.yaml"],
    workflow.config_settings.config,
)
config.clear()
config.update(_flat)
loader.or_exit(
    study.check_cached,
    config,
    local=workflow.local_exec,
    schema=Path(workflow.basedir) / "workflow/schemas/config.schema.yaml",
)
# One study per results directory (bnstudy.planning.lock): another study's results are refused
# here, dry runs included; a run that starts work records its study there and holds its lock.
_files = workflow.overwrite_configfiles or ["config/config.yaml"]
loader.or_exit(results_lock.check, config, _files)


# Local jobs start from a process that has imported torch and the package (bnstudy.forkserver;
# BNSTUDY_FORKSERVER=0 turns it off), when the run has jobs enough to pay for it: ended with the
# run.
onstart:
    loader.or_exit(results_lock.claim, config, _files)
    # local jobs end with this Snakemake, even a killed one (bnstudy.jobs.lifeline)
    lifeline.export(workflow.local_exec)
    forkserver.start(workflow.local_exec, log_file("forkserver.log"), *get_jobs_to_run())


# A run that ends "successfully" without its targets (a Snakemake bug with checkpoints and group
# jobs, bnstudy.planning.targets) fails instead, naming them.
onsuccess:
    forkserver.stop()
    targets.exit_if_missing(workflow.dag.targetjobs)


onerror:
    forkserver.stop()


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/measures.smk"
include: "workflow/rules/analyses.smk"
include: "workflow/rules/tables.smk"
include: "workflow/rules/replication.smk"
include: "workflow/rules/plots.smk"
include: "workflow/rules/claims.smk"
include: "workflow/rules/report.smk"


rule all:
    default_target: True
    input:
        get_final_outputs(),
