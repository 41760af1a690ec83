rule generalization:
    input:
        data=run_dataset,
        checkpoints=RUN_DIR + "/checkpoints.pt",
    output:
        RUN_DIR + "/generalization.parquet",
    params:
        options=json.dumps(config["generalization"], sort_keys=True),
        device=config["device"],
        code=code_version("generalization"),
    threads: config["threads"]
    log:
        "logs/generalization/{experiment}/{norm}/seed{seed}.log",
    conda:
        "../../environment.yml"
    shell:
        "python -m bnstudy measure generalization --data {input.data}"
        " --checkpoints {input.checkpoints} --options {params.options:q}"
        " --device {params.device} --threads {threads} --out {output} > {log} 2>&1"
