rule generalization:
    input:
        data=run_dataset,
        checkpoints=run_out("checkpoints.pt"),
    output:
        generalization=run_out("generalization.parquet"),
    params:
        options=measure_options("generalization"),
        device=config["device"],
        code=measure_code("generalization"),
    threads: config["threads"]
    log:
        run_log("generalization"),
    conda:
        "../../environment.yml"
    shell:
        "python -m bnstudy measure generalization --data {input.data:q}"
        " --checkpoints {input.checkpoints:q} --options {params.options:q}"
        " --device {params.device:q} --threads {threads}"
        " --out generalization={output.generalization:q} > {log:q} 2>&1"
