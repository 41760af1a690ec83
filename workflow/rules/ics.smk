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
        run_log("ics"),
    conda:
        "../../environment.yml"
    shell:
        "python -m bnstudy measure ics --data {input.data:q}"
        " --checkpoints {input.checkpoints:q} --options {params.options:q}"
        " --device {params.device:q} --threads {threads}"
        " --out ics={output.ics:q} > {log:q} 2>&1"
