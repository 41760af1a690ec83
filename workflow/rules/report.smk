rule report:
    input:
        tables=get_all_tables(),
        claims=res("tables", "claims.parquet"),
        figures=get_all_figures(),
    output:
        report(res("report.html"), caption="../report/report.rst", category="Report"),
    log:
        log_file("report.log"),
    group:
        "figures"
    conda:
        "../../environment.yml"
    params:
        config=json.dumps(config, sort_keys=True),
        code=PLAN.report_code(),
    shell:
        "python -m bnstudy report --config {params.config:q}"
        " --tables {input.tables:q} {input.claims:q} --figures {input.figures:q}"
        " --out {output:q} > {log:q} 2>&1"
