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
        "logs/bn_jitter/{experiment}/{norm}/seed{seed}.log",
    conda:
        "../../environment.yml"
    shell:
        "python -m bnstudy measure bn_jitter --data {input.data}"
        " --checkpoints {input.checkpoints} --options {params.options:q}"
        " --device {params.device} --threads {threads}"
        " --out bn_jitter={output.bn_jitter}"
        " bn_jitter_boundary={output.bn_jitter_boundary} > {log} 2>&1"
