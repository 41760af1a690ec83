"""The package pins the CPU kernels (bnstudy.pin_kernels) so that a run's numbers do not depend
on which kernel branch the CPU would pick: the same run under another branch preset in the
environment trains to bitwise the same history; with the pin switched off, that branch differs
(so the test can fail)."""

import json
import os
import subprocess
import sys

import pytest

import bnstudy
from bnstudy import io
from bnstudy.config import study
from bnstudy.planning.plan import Plan

pytestmark = pytest.mark.skipif(not bnstudy._has_avx2(), reason="needs an x86-64 CPU with AVX2")
OTHER_BRANCH = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("kernels")
    data = root / "digits.npz"
    subprocess.run([sys.executable, "-m", "bnstudy", "prepare-data", "--name", "digits",
                    "--kind", "digits", "--options", json.dumps({"test_fraction": 0.25,
                                                                 "seed": 0}),
                    "--out", str(data)], check=True, capture_output=True)
    cfg = study.check(study.load(["config/config.yaml"]), local=False)
    spec = json.loads(Plan(cfg).run_spec("digits", "batchnorm", 0))
    spec["training"].update(steps=40, eval_every=20, checkpoints=[0, 20])
    return root, data, json.dumps(spec)


def _train(setup, tag, env):
    root, data, spec = setup
    run = root / tag / "runs" / "digits" / "batchnorm" / "seed0"
    run.mkdir(parents=True)
    full = {k: v for k, v in os.environ.items() if k not in (*OTHER_BRANCH, "BNSTUDY_KERNELS")}
    subprocess.run([sys.executable, "-m", "bnstudy", "train", "--data", str(data), "--spec",
                    spec, "--out-checkpoints", str(run / "checkpoints.pt"), "--out-history",
                    str(run / "history.parquet")], check=True, capture_output=True,
                   env={**full, "BNSTUDY_FORKSERVER": "0", **env})
    return io.read_table(run / "history.parquet")["loss"].to_numpy()


def test_another_kernel_branch_trains_to_the_same_numbers(setup):
    pinned = _train(setup, "pinned", {})
    other = _train(setup, "other", OTHER_BRANCH)
    assert pinned.tobytes() == other.tobytes()
    unpinned = _train(setup, "unpinned", {**OTHER_BRANCH, "BNSTUDY_KERNELS": "native"})
    assert unpinned.tobytes() != pinned.tobytes()  # the branches do differ


def test_pin_kernels_sets_the_avx2_branch(monkeypatch):
    for k in (*bnstudy.PINNED_KERNELS, "BNSTUDY_KERNELS"):
        monkeypatch.delenv(k, raising=False)
    assert bnstudy.pin_kernels()
    assert {k: os.environ[k] for k in bnstudy.PINNED_KERNELS} == bnstudy.PINNED_KERNELS
    monkeypatch.setenv("BNSTUDY_KERNELS", "native")
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    assert not bnstudy.pin_kernels() and os.environ["ATEN_CPU_CAPABILITY"] == "default"
