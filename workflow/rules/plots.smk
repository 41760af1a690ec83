rule plot:
    input:
        figure_tables,
    output:
        report(
            res("figures", "{experiment}", "{family}.png"),
            caption="../report/figure.rst",
            category="{experiment}",
            subcategory="{family}",
        ),
    params:
        options=json.dumps(config["plots"], sort_keys=True),
        code=figure_code,
    log:
        log_file("plot", "{experiment}", "{family}.log"),
    conda:
        "../../environment.yml"
    shell:
        "python -m bnstudy plot {wildcards.family:q} --table {input:q}"
        " --experiment {wildcards.experiment:q} --options {params.options:q}"
        " --out {output:q} > {log:q} 2>&1"


rule plot_study:
    input:
        figure_tables,
    output:
        report(
            res("figures", "study", "{family}.png"),
            caption="../report/figure_study.rst",
            category="Study",
            subcategory="{family}",
        ),
    params:
        options=json.dumps(config["plots"], sort_keys=True),
        code=figure_code,
    log:
        log_file("plot", "study", "{family}.log"),
    conda:
        "../../environment.yml"
    shell:
        "python -m bnstudy plot {wildcards.family:q} --table {input:q}"
        " --options {params.options:q} --out {output:q} > {log:q} 2>&1"
