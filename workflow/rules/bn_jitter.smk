rule bn_jitter:
    input:
        data=run_dataset,
        checkpoints=run_out("checkpoints.pt"),
    output:
        bn_jitter=run_out("bn_jitter.parquet"),
        bn_jitter_boundary=run_out("bn_jitter_boundary.parquet"),
    params:
        options=measure_options("bn_jitter"),
        device=config["device"],
        code=measure_code("bn_jitter"),
    threads: config["threads"]
    log:
        run_log("bn_jitter"),
    conda:
        "../../environment.yml"
    shell:
        "python -m bnstudy measure bn_jitter --data {input.data:q}"
        " --checkpoints {input.checkpoints:q} --options {params.options:q}"
        " --device {params.device:q} --threads {threads}"
        " --out bn_jitter={output.bn_jitter:q}"
        " bn_jitter_boundary={output.bn_jitter_boundary:q} > {log:q} 2>&1"
