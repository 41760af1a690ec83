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
    path = run / "history.parquet"
    return io.read_table(path)["loss"].to_numpy(), io.read_provenance(path)


def test_another_kernel_branch_trains_to_the_same_numbers(setup):
    pinned, prov = _train(setup, "pinned", {})
    other, _ = _train(setup, "other", OTHER_BRANCH)
    assert pinned.tobytes() == other.tobytes()
    unpinned, native = _train(setup, "unpinned", {**OTHER_BRANCH, "BNSTUDY_KERNELS": "native"})
    assert unpinned.tobytes() != pinned.tobytes()  # the branches do differ
    # the history says which branches computed it: MKL grants its AVX2 branch on Intel CPUs
    # only and runs AUTO elsewhere (seen on an AMD EPYC), which the provenance then says
    assert prov["cpu"] and prov["kernels"].startswith("ATen AVX2, MKL ")
    assert prov["kernels"].endswith(", oneDNN <= AVX2")
    assert ("MKL AVX2,STRICT," in prov["kernels"]
            or "MKL AUTO,STRICT (asked AVX2,STRICT)," in prov["kernels"])
    assert native["kernels"].startswith("ATen DEFAULT, MKL COMPATIBLE")  # (not asked: granted)
    assert "asked" not in native["kernels"]


@pytest.mark.parametrize("asked", ["COMPATIBLE", "COMPATIBLE,STRICT", "AVX2,STRICT"])
def test_the_mkl_branch_is_the_one_mkl_reports(asked):
    """bnstudy.provenance.mkl_branch reads MKL's own getter: COMPATIBLE is granted on every
    x86-64 CPU, AVX2 on Intel CPUs only (else MKL runs AUTO, with the STRICT flag kept)."""
    out = subprocess.run([sys.executable, "-c", "import bnstudy, torch; torch.ones(2, 2) @ "
                          "torch.ones(2, 2); from bnstudy import provenance as p; "
                          "print(p.mkl_branch()); print(p.kernels())"],
                         env={**os.environ, "BNSTUDY_KERNELS": "native", "MKL_CBWR": asked},
                         capture_output=True, text=True, check=True).stdout.split("\n")
    if asked.startswith("COMPATIBLE"):
        assert out[0] == asked and f"MKL {asked}" in out[1] and "asked" not in out[1]
    else:
        assert out[0] in ("AVX2,STRICT", "AUTO,STRICT")
        assert (f"MKL {out[0]} (asked AVX2,STRICT)" in out[1]) == (out[0] != asked)


def test_mkl_branch_names():
    from bnstudy import provenance

    assert provenance.mkl_branch_name(10 | provenance.MKL_STRICT) == "AVX2,STRICT"
    assert provenance.mkl_branch_name(2) == "AUTO" and provenance.mkl_branch_name(3) == \
        "COMPATIBLE"
    assert provenance.mkl_branch_name(99) == "99"


def test_pin_kernels_sets_the_avx2_branch(monkeypatch):
    for k in (*bnstudy.PINNED_KERNELS, "BNSTUDY_KERNELS"):
        monkeypatch.delenv(k, raising=False)
    assert bnstudy.pin_kernels()
    assert {k: os.environ[k] for k in bnstudy.PINNED_KERNELS} == bnstudy.PINNED_KERNELS
    monkeypatch.setenv("BNSTUDY_KERNELS", "native")
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    assert not bnstudy.pin_kernels() and os.environ["ATEN_CPU_CAPABILITY"] == "default"
