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
        run_log("smoothness"),
    conda:
        "../../environment.yml"
    shell:
        "python -m bnstudy measure smoothness --data {input.data:q}"
        " --checkpoints {input.checkpoints:q} --options {params.options:q}"
        " --device {params.device:q} --threads {threads}"
        " --out smoothness={output.smoothness:q}"
        " smoothness_probes={output.smoothness_probes:q} > {log:q} 2>&1"
