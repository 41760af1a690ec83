# The command names the runs (the grid, a few bytes per experiment) rather than their files: the
# file list outgrows Linux's limit on one argument (128 KiB) at a few thousand runs. The verb
# finds each part with bnstudy.tables, as the plan does here, and adds the sweep axes as columns.
rule aggregate:
    input:
        get_table_inputs,
    output:
        res("tables", "{table}.parquet"),
    log:
        log_file("aggregate", "{table}.log"),
    group:
        "tables"
    conda:
        "../../environment.yml"
    params:
        results=get_results,
        name=get_table_file,
        grid=get_table_grid,
        level=get_table_level,
        code=get_table_code,
    shell:
        "python -m bnstudy aggregate --results {params.results:q} --name {params.name:q}"
        " --grid {params.grid:q} --level {params.level:q} --out {output:q} > {log:q} 2>&1"
