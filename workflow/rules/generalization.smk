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
        "logs/generalization/{experiment}/{norm}/seed{seed}.log",
    conda:
        "../../environment.yml"
    shell:
        "python -m bnstudy measure generalization --data {input.data}"
        " --checkpoints {input.checkpoints} --options {params.options:q}"
        " --device {params.device} --threads {threads}"
        " --out generalization={output.generalization} > {log} 2>&1"
