"""A workflow job's process: it ends with the Snakemake that started it (:mod:`lifeline`), and
it is the one writer of its run directory (:mod:`run_writer`)."""
