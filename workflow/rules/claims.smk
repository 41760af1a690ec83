rule claims:
    input:
        all_tables(),
    output:
        res("tables/claims.parquet"),
    params:
        ci=config["report"]["ci"],
        code=code_version("claims"),
    log:
        "logs/claims.log",
    conda:
        "../../environment.yml"
    shell:
        "python -m bnstudy claims --tables {input} --ci {params.ci} --out {output} > {log} 2>&1"
