rule prepare_data:
    output:
        res("data/{dataset}.npz"),
    params:
        kind=dataset_kind,
        options=dataset_params,
        code=code_version("data"),
    log:
        "logs/prepare_data/{dataset}.log",
    conda:
        "../../environment.yml"
    shell:
        "python -m bnstudy prepare-data --name {wildcards.dataset} --kind {params.kind}"
        " --options {params.options:q} --out {output} > {log} 2>&1"
