# bnstudy: what do normalization layers do to a deep network?
# This file is the table of contents: config + validation, the stages, and the final target.

from snakemake.utils import min_version, validate

min_version("9.0")


# The default study, unless --configfile names another: a study file replaces it whole
# (Snakemake would otherwise merge the two, mixing their experiments).
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


validate(config, "workflow/schemas/config.schema.yaml")


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/generalization.smk"
include: "workflow/rules/partition_density.smk"
include: "workflow/rules/ics.smk"
include: "workflow/rules/smoothness.smk"
include: "workflow/rules/bn_jitter.smk"
include: "workflow/rules/teacher_student.smk"
include: "workflow/rules/analyses.smk"
include: "workflow/rules/tables.smk"
include: "workflow/rules/plots.smk"
include: "workflow/rules/claims.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        final_outputs(),
    default_target: True
