"""Shared fixtures: small datasets; single-threaded torch for stable timings (specs: specs.py)."""

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

