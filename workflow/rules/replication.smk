# Replication rounds (bnstudy.replication): an experiment with a replication policy adds seeds
# in planned rounds until its claims are decided. Round k is a checkpoint: once every run of the
# study's state at round k is trained and measured, it computes the ledger as it stands and
# records which experiments get round k + 1's seeds; Snakemake then re-evaluates the jobs that
# read it (the next round, the tables), so a round trains and measures only its new runs, the
# same locally and on a cluster, and a finished study reruns nothing.


checkpoint replication_round:
    input:
        parts=get_round_inputs,
        arguments=get_round_arguments,
    output:
        res("rounds", "round{round}.json"),
    log:
        log_file("replication_round", "round{round}.log"),
    resources:
        gpu=get_gpu,
        mem_mb=get_mem_mb,
        runtime=get_runtime,
    params:
        results=get_results,
        ci=config["report"]["ci"],
        code=PLAN.code("rounds"),
    shell:
        "python -m bnstudy replication-round --results {params.results:q}"
        " --round {wildcards.round:q} @{input.arguments:q} --ci {params.ci:q}"
        " --out {output:q} > {log:q} 2>&1"


rule replication_table:
    input:
        get_round_files,
    output:
        report(
            res("tables", "replication.parquet"),
            caption="../report/table.rst",
            category="Tables",
        ),
    log:
        log_file("replication_table.log"),
    resources:
        gpu=get_gpu,
        mem_mb=get_mem_mb,
        runtime=get_runtime,
    params:
        code=PLAN.code("rounds"),
    shell:
        "python -m bnstudy replication-table --rounds {input:q} --out {output:q} > {log:q} 2>&1"
