rule claims:
    input:
        get_all_tables(),
    output:
        res("tables", "claims.parquet"),
    log:
        log_file("claims.log"),
    group:
        "figures"
    conda:
        "../../environment.yml"
    params:
        ci=config["report"]["ci"],
        code=PLAN.code("claims"),
    shell:
        "python -m bnstudy claims --tables {input:q} --ci {params.ci:q} --out {output:q}"
        " > {log:q} 2>&1"
