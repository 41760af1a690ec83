rule train:
    input:
        data=run_dataset,
    output:
        checkpoints=run_out("checkpoints.pt"),
        history=run_out("history.parquet"),
    params:
        spec=run_spec,
        device=config["device"],
        resume=run_out("resume.pt"),
        code=code_version("train"),
    threads: config["threads"]
    resources:
        gpu=config["gpus_per_train_job"],
    log:
        "logs/train/{experiment}/{norm}/seed{seed}.log",
    conda:
        "../../environment.yml"
    shell:
        "python -m bnstudy train --data {input.data} --spec {params.spec:q}"
        " --device {params.device} --threads {threads} --resume {params.resume}"
        " --out-checkpoints {output.checkpoints} --out-history {output.history} > {log} 2>&1"
