rule smoothness:
    input:
        data=run_dataset,
        checkpoints=run_out("checkpoints.pt"),
    output:
        smoothness=run_out("smoothness.parquet"),
        smoothness_probes=run_out("smoothness_probes.parquet"),
    params:
        options=measure_options("smoothness"),
        device=config["device"],
        code=measure_code("smoothness"),
    threads: config["threads"]
    log:
        "logs/smoothness/{experiment}/{norm}/seed{seed}.log",
    conda:
        "../../environment.yml"
    shell:
        "python -m bnstudy measure smoothness --data {input.data}"
        " --checkpoints {input.checkpoints} --options {params.options:q}"
        " --device {params.device} --threads {threads}"
        " --out smoothness={output.smoothness}"
        " smoothness_probes={output.smoothness_probes} > {log} 2>&1"
