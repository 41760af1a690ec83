rule ics:
    input:
        data=run_dataset,
        checkpoints=run_out("checkpoints.pt"),
    output:
        ics=run_out("ics.parquet"),
    params:
        options=measure_options("ics"),
        device=config["device"],
        code=measure_code("ics"),
    threads: config["threads"]
    log:
        "logs/ics/{experiment}/{norm}/seed{seed}.log",
    conda:
        "../../environment.yml"
    shell:
        "python -m bnstudy measure ics --data {input.data}"
        " --checkpoints {input.checkpoints} --options {params.options:q}"
        " --device {params.device} --threads {threads}"
        " --out ics={output.ics} > {log} 2>&1"
