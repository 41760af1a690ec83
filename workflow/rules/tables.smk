# No command line grows with the study: the arguments that do (the run grid of an aggregate job,
# a figure family's outputs, the report's config and figures) are written to a file, one per
# line, that the command names as @FILE (Linux refuses one argument over 128 KiB: the grid of
# about 1,260 experiments). The file changes when they do (params), rerunning the job.
rule job_arguments:
    input:
        get_job_rounds,
    output:
        res("jobs", "{job}.args"),
    log:
        log_file("job_arguments", "{job}.log"),
    localrule: True
    params:
        arguments=get_job_arguments,
    script:
        "../scripts/write_arguments.py"


# The grid names the runs rather than their files; the verb finds each part with
# bnstudy.tables.layout, as the plan does here, and adds the sweep axes as columns.
rule aggregate:
    input:
        parts=get_table_inputs,
        arguments=arguments_file("aggregate_{table}"),
    output:
        report(
            res("tables", "{table}.parquet"),
            caption="../report/table.rst",
            category="Tables",
        ),
    log:
        log_file("aggregate", "{table}.log"),
    group:
        "tables"
    resources:
        gpu=get_gpu,
        mem_mb=get_mem_mb,
        runtime=get_runtime,
    params:
        results=get_results,
        name=get_table_file,
        level=get_table_level,
        code=get_table_code,
    shell:
        "python -m bnstudy aggregate --results {params.results:q} --name {params.name:q}"
        " @{input.arguments:q} --level {params.level:q} --out {output:q} > {log:q} 2>&1"
