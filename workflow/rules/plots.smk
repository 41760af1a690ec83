# One rule per figure family the study draws (bnstudy.plots; plots.families may choose some),
# named plot_<family>: one job reads the family's tables once and draws all of its figures (one
# per experiment, or one for the study), as PNG and the plots.formats copies. Its params are the
# plots settings but families (a change to plots.formats, dpi, width or style redraws every
# figure; choosing families draws or drops only theirs), the hash of the family's module and its
# caption (what Snakemake's report shows for each of its figures).

for _family in PLAN.figures:

    rule:
        name:
            f"plot_{_family}"
        input:
            tables=PLAN.figure_tables(_family),
            arguments=arguments_file(f"plot_{_family}"),
        output:
            get_figure_report_files(_family),
        log:
            log_file("plot", f"{_family}.log"),
        group:
            "figures"
        resources:
            gpu=get_gpu,
            mem_mb=get_mem_mb,
            runtime=get_runtime,
        params:
            family=_family,
            options=PLAN.plot_options(),
            code=PLAN.figure_code(_family),
            caption=PLAN.figure_caption(_family),
        shell:
            "python -m bnstudy plot {params.family:q} --table {input.tables:q}"
            " --options {params.options:q} @{input.arguments:q} > {log:q} 2>&1"
