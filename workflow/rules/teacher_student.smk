rule teacher_student:
    input:
        data=run_dataset,
        checkpoints=run_out("checkpoints.pt"),
    output:
        teacher_student=run_out("teacher_student.parquet"),
    params:
        options=measure_options("teacher_student"),
        device=config["device"],
        code=measure_code("teacher_student"),
    threads: config["threads"]
    log:
        run_log("teacher_student"),
    conda:
        "../../environment.yml"
    shell:
        "python -m bnstudy measure teacher_student --data {input.data:q}"
        " --checkpoints {input.checkpoints:q} --options {params.options:q}"
        " --device {params.device:q} --threads {threads}"
        " --out teacher_student={output.teacher_student:q} > {log:q} 2>&1"
