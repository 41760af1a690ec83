# One rule per registered measure that the study runs (bnstudy.measures: adding a measure adds
# its rule here, with no edit), named like the measure, so `--forcerun smoothness` works. A job
# measures every run of one block of an experiment's seeds (all of them, or one replication
# round's new seeds): its params are the measure's config section and the hash of its code, so a
# change to either reruns exactly this measure's jobs, and a round measures only its new runs.
# On a cluster, all measures of one experiment go in one cluster job (group
# measures_<experiment>; ignored locally).

for _measure in PLAN.measures:

    rule:
        name:
            _measure
        input:
            data=get_run_dataset,
            checkpoints=get_block_checkpoints,
        output:
            **get_measure_outputs(_measure),
        log:
            log_file(_measure, "{experiment}", "seeds{block}.log"),
        wildcard_constraints:
            experiment=get_measure_experiments(_measure),
        group:
            "measures_{experiment}"
        threads: config["threads"]
        resources:
            gpu=get_gpu,
            mem_mb=get_mem_mb,
            runtime=get_runtime,
        params:
            measure=_measure,
            results=get_results,
            grid=get_block_grid,
            options=PLAN.measure_options(_measure),
            device=config["device"],
            code=PLAN.measure_code(_measure),
        shell:
            "python -m bnstudy measure {params.measure:q} --results {params.results:q}"
            " --experiment {wildcards.experiment:q} --grid {params.grid:q}"
            " --data {input.data:q} --options {params.options:q}"
            " --device {params.device:q} --threads {threads}"
            " --out {output:q} > {log:q} 2>&1"
