"""Run specs like the workflow's (bnstudy.plan.Plan.run_spec), for tests that train directly."""

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
