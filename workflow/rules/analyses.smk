rule analysis:
    output:
        res("tables", "{analysis}.parquet"),
    params:
        options=get_analysis_options,
        code=get_analysis_code,
    log:
        log_file("analysis", "{analysis}.log"),
    conda:
        "../../environment.yml"
    shell:
        "python -m bnstudy analysis {wildcards.analysis:q} --options {params.options:q}"
        " --out {output:q} > {log:q} 2>&1"
