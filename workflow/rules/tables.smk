rule aggregate:
    input:
        table_inputs,
    output:
        res("tables/{table}.parquet"),
    params:
        code=code_version("tables"),
    log:
        "logs/aggregate/{table}.log",
    conda:
        "../../environment.yml"
    shell:
        "python -m bnstudy aggregate --inputs {input} --out {output} > {log} 2>&1"
