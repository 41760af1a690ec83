rule report:
    input:
        tables=get_all_tables(),
        claims=res("tables", "claims.parquet"),
        figures=get_all_figures(),
        arguments=arguments_file("report"),
    output:
        report(res("report.html"), caption="../report/report.rst", category="Report"),
    log:
        log_file("report.log"),
    group:
        "figures"
    resources:
        gpu=get_gpu,
        mem_mb=get_mem_mb,
        runtime=get_runtime,
    params:
        code=PLAN.report_code(),
    shell:
        "python -m bnstudy report @{input.arguments:q}"
        " --tables {input.tables:q} {input.claims:q}"
        " --out {output:q} > {log:q} 2>&1"
