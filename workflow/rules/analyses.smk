rule analysis:
    output:
        report(
            res("tables", "{analysis}.parquet"),
            caption="../report/table.rst",
            category="Tables",
        ),
    log:
        log_file("analysis", "{analysis}.log"),
    resources:
        gpu=get_gpu,
        mem_mb=get_mem_mb,
        runtime=get_runtime,
    params:
        options=get_analysis_options,
        code=get_analysis_code,
    shell:
        "python -m bnstudy analysis {wildcards.analysis:q} --options {params.options:q}"
        " --out {output:q} > {log:q} 2>&1"
