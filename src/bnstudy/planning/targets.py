"""A run that reports success has made its targets: checked at its end (the Snakefile's
``onsuccess``).

Snakemake can end a run that has checkpoints and group jobs early, with exit status 0 and some
targets never made: after a checkpoint updates the DAG, a group's jobs can be submitted twice,
in two groups, and the jobs behind them are then counted as done without having run
(snakemake#823, snakemake-executor-plugin-slurm#253; Snakemake 9.27 with the SLURM plugin 2.8
here: "76 of 60 steps (127%) done", no claims table, no figures, no report). A study's replication
rounds are checkpoints and the slurm profile groups the measure, table and figure jobs, so a
cluster run can meet it. :func:`exit_if_missing` turns that silent end into a failed run that
names what is missing and what to do (run the same command again: Snakemake makes what is
missing and nothing else).

The targets are Snakemake's own (``workflow.dag.targetjobs``, kept up to date through checkpoint
updates and ``--until``/``--omit-from``): a target job's output files, or the input files of a
target rule without outputs (``rule all``). Snakemake's ``dag.derived_targetfiles`` says the same
but keeps what it found at its first use, which can come before a checkpoint's update, so
:func:`missing` reads the jobs themselves.
"""

from __future__ import annotations

import os
import sys

SHOWN = 10  # missing files named in the message; the rest are counted


def missing(target_jobs) -> list[str]:
    """The files of ``target_jobs`` (Snakemake jobs, or anything with ``output`` and ``input``
    lists of paths) that do not exist, sorted."""
    files = {os.fspath(f) for job in target_jobs for f in (job.output or job.input)}
    return sorted(f for f in files if not os.path.exists(f))


def exit_if_missing(target_jobs) -> None:
    """Exit 1 with a message when a target of the run is missing; nothing when all exist."""
    gone = missing(target_jobs)
    if not gone:
        return
    more = f" and {len(gone) - SHOWN} more" if len(gone) > SHOWN else ""
    print(f"bnstudy: Snakemake ended with success but without making {len(gone)} of the run's "
          f"target files: {', '.join(gone[:SHOWN])}{more}. This is a known Snakemake bug with "
          "checkpoints and group jobs (snakemake#823). Run the same command again: it makes "
          "what is missing.", file=sys.stderr)
    sys.exit(1)
