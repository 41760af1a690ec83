rule partition_density:
    input:
        data=run_dataset,
        checkpoints=run_out("checkpoints.pt"),
    output:
        partition_density=run_out("partition_density.parquet"),
        partition_density_maps=run_out("partition_density_maps.parquet"),
    params:
        options=measure_options("partition_density"),
        device=config["device"],
        code=measure_code("partition_density"),
    threads: config["threads"]
    log:
        run_log("partition_density"),
    conda:
        "../../environment.yml"
    shell:
        "python -m bnstudy measure partition_density --data {input.data:q}"
        " --checkpoints {input.checkpoints:q} --options {params.options:q}"
        " --device {params.device:q} --threads {threads}"
        " --out partition_density={output.partition_density:q}"
        " partition_density_maps={output.partition_density_maps:q} > {log:q} 2>&1"
