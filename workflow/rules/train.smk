# One rule per planned train job (bnstudy.planning.training): a block of at most
# `training_block` seeds of one arm (experiment x normalizer; with replication, of one round's
# new seeds), trained together in one process, each seed's files under runs/ as before. Every
# block a replication round could schedule has its rule (rounds are checkpoints), with concrete
# per-seed outputs. The rules are named train_<experiment>_<norm>_s<seeds> (train_star_none_s0to2): force or stop at
# training with --forcerun/--until $(snakemake --list-rules | grep ^train_), or name a run's
# files (--forcerun results/runs/<e>/<norm>/seed<s>/checkpoints.pt reruns its block). Its priority
# is the block's estimated CPU-seconds, so that of the blocks ready at once the longest start first.

for _train in PLAN.train_jobs:

    rule:
        name:
            _train
        input:
            data=get_train_dataset(_train),
        output:
            **get_train_outputs(_train),
        log:
            get_train_log(_train),
        priority: get_train_priority(_train)
        threads: config["threads"]
        resources:
            gpu=get_gpu,
            mem_mb=get_mem_mb,
            runtime=get_runtime,
        params:
            **get_train_params(_train),
            device=config["device"],
        shell:
            "python -m bnstudy train --data {input.data:q} --spec {params.specs:q}"
            " --device {params.device:q} --threads {threads} --resume {params.resume:q}"
            " --out-checkpoints {output.checkpoints:q} --out-history {output.history:q}"
            " > {log:q} 2>&1"
