# Rule job_arguments: write a job's growing arguments (its params) to its argument file.
# A script job starts one plain Python process (well under a second); a `run:` job would start
# a second Snakemake that parses the whole workflow again (3-6 s, once per such job).
from bnstudy.planning.arguments import write_arguments

write_arguments(
    snakemake.output[0],  # noqa: F821 (the object Snakemake gives a script)
    list(snakemake.params.arguments),  # noqa: F821
    snakemake.log[0],  # noqa: F821
)
