# The HTML report (bnstudy.report), and beside it the claims ledger and the summary tables as
# CSV, which Snakemake's own report (snakemake --report) shows. The paper-scale configs are
# inputs: the report states what each would run and its estimated cost (bnstudy.report.scale);
# so are the figures' vector copies (a plots.formats change then redraws every figure).


rule report:
    input:
        tables=get_all_tables(),
        claims=res("tables", "claims.parquet"),
        figures=get_all_figures(),
        arguments=arguments_file("report"),
        paper=get_paper_configs(),
        exports=get_figure_exports(),
    output:
        html=report(res("report.html"), caption="../report/report.rst", category="Report"),
        ledger=report(
            res("report_tables", "ledger.csv"),
            caption="../report/ledger.rst",
            category="Report",
            labels={"table": "claims ledger"},
        ),
        summaries=report(
            res("report_tables", "summaries.csv"),
            caption="../report/summaries.rst",
            category="Report",
            labels={"table": "summaries over seeds"},
        ),
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
        " --paper-configs {input.paper:q} --out {output.html:q} > {log:q} 2>&1"
