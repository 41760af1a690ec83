# The HTML report (bnstudy.report), and beside it the claims ledger and the summary tables as
# CSV, which Snakemake's own report (snakemake --report) shows. The paper-scale configs are
# inputs: the report states what each would run and its estimated cost (bnstudy.report.scale);
# so are the figures' vector copies (a plots.formats change then redraws every figure).


def get_figure_exports():
    """Every figure's plots.formats copies (PDF, SVG): inputs of the report, so that a formats
    change asks for the new files and redraws the figures (Snakemake checks the params of a job
    only when every output has metadata, and a job's missing outputs only when requested)."""
    return [f for name in PLAN.figures for f in PLAN.figure_files(name) if not f.endswith(".png")]


def get_paper_configs():
    """The paper-scale study configs (config/studies/*_paper.yaml) beside the Snakefile."""
    studies = Path(workflow.basedir) / "config" / "studies"
    return sorted(str(p) for p in studies.glob("*_paper.yaml"))


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
