rule train:
    input:
        data=get_run_dataset,
    output:
        checkpoints=run_out("checkpoints.pt"),
        history=run_out("history.parquet"),
    log:
        log_file("train", "{experiment}", "{norm}", "seed{seed}.log"),
    threads: config["threads"]
    resources:
        gpu=get_gpu,
        mem_mb=get_mem_mb,
        runtime=get_runtime,
    params:
        spec=get_run_spec,
        device=config["device"],
        resume=run_out("resume.pt"),
        code=get_train_code,
    shell:
        "python -m bnstudy train --data {input.data:q} --spec {params.spec:q}"
        " --device {params.device:q} --threads {threads} --resume {params.resume:q}"
        " --out-checkpoints {output.checkpoints:q} --out-history {output.history:q}"
        " > {log:q} 2>&1"
