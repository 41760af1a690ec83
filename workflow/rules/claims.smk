rule claims:
    input:
        get_all_tables(),
    output:
        res("tables", "claims.parquet"),
    params:
        ci=config["report"]["ci"],
        code=PLAN.code("claims"),
    group:
        "figures"
    log:
        log_file("claims.log"),
    conda:
        "../../environment.yml"
    shell:
        "python -m bnstudy claims --tables {input:q} --ci {params.ci:q} --out {output:q}"
        " > {log:q} 2>&1"
