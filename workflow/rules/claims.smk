rule claims:
    input:
        tables=get_ledger_tables(),
        arguments=arguments_file("claims"),
    output:
        report(
            res("tables", "claims.parquet"),
            caption="../report/table.rst",
            category="Tables",
        ),
    log:
        log_file("claims.log"),
    group:
        "figures"
    resources:
        gpu=get_gpu,
        mem_mb=get_mem_mb,
        runtime=get_runtime,
    params:
        ci=config["report"]["ci"],
        code=PLAN.code("claims"),
    shell:
        "python -m bnstudy claims --tables {input.tables:q} --ci {params.ci:q}"
        " @{input.arguments:q} --out {output:q}"
        " > {log:q} 2>&1"
