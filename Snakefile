# bnstudy: what do normalization layers do to a deep network?
# This file is the table of contents: config + validation, the stages, and the final target.

from snakemake.utils import min_version, validate

min_version("9.0")


configfile: "config/config.yaml"


validate(config, "workflow/schemas/config.schema.yaml")


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/generalization.smk"
include: "workflow/rules/tables.smk"
include: "workflow/rules/plots.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        final_outputs(),
    default_target: True
