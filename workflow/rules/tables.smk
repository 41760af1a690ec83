# The command names the runs (the grid, a few bytes per experiment) rather than their files: the
# file list outgrows Linux's limit on one argument (128 KiB) at a few thousand runs. The verb
# finds each run's file with bnstudy.tables.run_file, as run_out/table_inputs do here.
rule aggregate:
    input:
        table_inputs,
    output:
        res("tables", "{table}.parquet"),
    params:
        results=results_dir,
        name=table_file,
        grid=table_grid,
        code=code_version("tables"),
    log:
        log_file("aggregate", "{table}.log"),
    conda:
        "../../environment.yml"
    shell:
        "python -m bnstudy aggregate --results {params.results:q} --name {params.name:q}"
        " --grid {params.grid:q} --out {output:q} > {log:q} 2>&1"
