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
        "logs/partition_density/{experiment}/{norm}/seed{seed}.log",
    conda:
        "../../environment.yml"
    shell:
        "python -m bnstudy measure partition_density --data {input.data}"
        " --checkpoints {input.checkpoints} --options {params.options:q}"
        " --device {params.device} --threads {threads}"
        " --out partition_density={output.partition_density}"
        " partition_density_maps={output.partition_density_maps} > {log} 2>&1"
