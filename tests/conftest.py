"""Shared fixtures: small datasets and models, single-threaded torch for stable timings."""

from __future__ import annotations

import pytest
import torch

from bnstudy import data

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def star():
    return data.make("star2d", {"n_train": 64, "n_test": 64, "seed": 0})


@pytest.fixture(scope="session")
def linear_ds():
    return data.make("gaussian_linear", {"n_train": 64, "n_test": 32, "dim": 4, "seed": 0})


@pytest.fixture(scope="session")
def digits():
    return data.make("digits", {"seed": 0})


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
