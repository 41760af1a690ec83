rule prepare_data:
    output:
        res("data", "{dataset}.npz"),
    log:
        log_file("prepare_data", "{dataset}.log"),
    resources:
        gpu=get_gpu,
        mem_mb=get_mem_mb,
        runtime=get_runtime,
    params:
        kind=get_dataset_kind,
        options=get_dataset_options,
        code=PLAN.code("data"),
    shell:
        "python -m bnstudy prepare-data --name {wildcards.dataset:q} --kind {params.kind:q}"
        " --options {params.options:q} --out {output:q} > {log:q} 2>&1"
