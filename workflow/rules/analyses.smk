rule analysis:
    output:
        res("tables/{analysis}.parquet"),
    params:
        options=analysis_options,
        code=analysis_code,
    log:
        "logs/analysis/{analysis}.log",
    conda:
        "../../environment.yml"
    shell:
        "python -m bnstudy analysis {wildcards.analysis} --options {params.options:q}"
        " --out {output} > {log} 2>&1"
