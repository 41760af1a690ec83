"""Run specs like the workflow's (bnstudy.planning.plan.Plan.run_spec), for tests that train
directly."""

from __future__ import annotations


def make_spec(norm="batchnorm", seed=0, model=None, training=None, **ids):
    """A run spec like the workflow's, for tests."""
    return {
        "experiment": ids.get("experiment", "t"),
        "dataset": ids.get("dataset", "star2d"),
        "model": ids.get("model", "m"),
        "model_config": model or {"arch": "mlp", "depth": 3, "width": 16},
        "norm": norm,
        "seed": seed,
        "training": training or {"lr": 0.05, "momentum": 0.9, "batch_size": 16, "steps": 20,
                                 "eval_every": 5, "checkpoints": [0, 1, 2, 10]},
    }


def measure_cli(tmp_path, measure, runs, data_file, options=None, experiment_runs=None):
    """Run ``python -m bnstudy measure`` in-process as the workflow does: the run files laid out
    under ``tmp_path/results`` by their specs' ids, the experiment's grid on the command line,
    one ``<table>.parquet`` per table of the measure under ``tmp_path/out``. ``runs``: run dicts
    of one experiment. Returns ``(exit code, {table: path})``."""
    import json

    from bnstudy import measures
    from bnstudy.cli import main as cli
    from bnstudy.tables import layout
    from bnstudy.train import checkpoints

    results = tmp_path / "results"
    grid = {}
    for run in runs:
        s = run["spec"]
        entry = grid.setdefault(s.experiment, {"norms": [], "seeds": []})
        entry["norms"] += [s.norm] if s.norm not in entry["norms"] else []
        entry["seeds"] += [s.seed] if s.seed not in entry["seeds"] else []
        path = layout.run_file(results, s.experiment, s.norm, s.seed, "checkpoints.pt")
        checkpoints.save(run, path)
    (experiment,) = grid
    outs = {t: tmp_path / "out" / f"{t}.parquet" for t in measures.get(measure).tables}
    argv = ["measure", measure, "--results", str(results), "--experiment", experiment,
            "--grid", json.dumps(grid), "--data", str(data_file), "--device", "cpu",
            *(["--options", json.dumps(options)] if options is not None else []),
            "--out", *map(str, outs.values())]
    return cli.main(argv), outs


def sweep_config(**sections) -> dict:
    """A one-experiment study (gaussian_linear, mlp, batchnorm, seed 0) with top-level sections
    replaced by ``sections``: what the sweep tests expand."""
    base = {"datasets": {"g": {"kind": "gaussian_linear", "options": {"dim": 4}}},
            "models": {"m": {"arch": "mlp"}}, "trainings": {"t": {"lr": 0.1, "steps": 5}},
            "experiments": {"e": {"dataset": "g", "model": "m", "training": "t",
                                  "norms": ["batchnorm"], "seeds": [0]}}}
    base.update(sections)
    return base
