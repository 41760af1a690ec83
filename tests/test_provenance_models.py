"""Provenance records ``kernels`` the same in both process models (issue 50, item 6).

A job served by the fork server runs in a child of a process that imported torch; a job in its
own process imports torch only if it computes with it. The claims ledger (no torch) recorded the
CPU kernels when the fork server ran it and None otherwise. Now a table computed without torch
says so in both models, and a table computed with torch names its kernels in both.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import torch  # noqa: F401 (imported, as in a fork server's child)
from specs import make_spec

from bnstudy import data, io, provenance
from bnstudy.cli import main as cli


def _training() -> pd.DataFrame:
    return pd.DataFrame([{"experiment": "e", "dataset": "d", "model": "m", "norm": n, "seed": s,
                          "step": t, "split": split, "loss": 1.0 / (1 + t) + 0.01 * s,
                          "accuracy": 0.5, "lr": 0.1, "wall_time": 0.1 * t, "diverged": False}
                         for n in ("none", "batchnorm") for s in (0, 1, 2) for t in (0, 5)
                         for split in ("train", "test")])


def _own_process(argv) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BNSTUDY_FORKSERVER")}
    out = subprocess.run([sys.executable, "-m", "bnstudy", *argv], capture_output=True,
                         text=True, env={**env, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr


def test_kernels_are_recorded_alike_in_both_process_models(tmp_path, star):
    table = tmp_path / "training.parquet"
    io.write_table(_training(), table, io.provenance("h"))
    ledgers = [tmp_path / "served.parquet", tmp_path / "own.parquet"]
    assert cli.main(["claims", "--tables", str(table), "--out", str(ledgers[0])]) == 0
    _own_process(["claims", "--tables", str(table), "--out", str(ledgers[1])])
    kernels = [io.read_provenance(p)["kernels"] for p in ledgers]
    assert kernels == [provenance.NO_TORCH] * 2

    data.save(star, tmp_path / "star.npz")
    runs = [tmp_path / "served", tmp_path / "own"]
    argv = ["train", "--data", str(tmp_path / "star.npz"), "--spec", json.dumps(make_spec()),
            "--device", "cpu"]
    for run, go in zip(runs, (cli.main, _own_process), strict=True):
        rc = go([*argv, "--out-checkpoints", str(run / "checkpoints.pt"),
                 "--out-history", str(run / "history.parquet")])
        assert rc in (None, 0)
    trained = [io.read_provenance(r / "history.parquet")["kernels"] for r in runs]
    assert trained[0] == trained[1] and trained[0].startswith("ATen ")
