"""A training run killed mid-way and restarted ends exactly like an uninterrupted run.

``training.train(..., resume_path=...)`` saves the whole trainer state at every checkpoint step;
a restart continues from the latest one. Two ways of killing it are tested:

- in-process: the optimizer raises at update ``n`` (a crash at an exact step, for every
  normalizer -- on an MLP, or a small VGG for those that need convolutions --, including
  chained crashes), then training is called again;
- a real ``SIGKILL`` of the ``python -m bnstudy train`` process once its resume file holds a
  mid-run checkpoint, then the same command again (what a SLURM retry does).

Equality is exact: every checkpoint (weights, BN buffers, momentum buffers, batch indices) and
every history row except ``wall_time``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
from specs import make_spec

from bnstudy import data, io
from bnstudy.networks import normalizers
from bnstudy.train import checkpoints
from bnstudy.train import loop as training

TRAINING = {"lr": 0.05, "momentum": 0.9, "batch_size": 16, "steps": 20, "eval_every": 5,
            "checkpoints": [0, 1, 5, 10, 15]}
MODEL = {"arch": "mlp", "depth": 3, "width": 16}


_MAKE_OPTIMIZER = training.make_optimizer


class Killed(Exception):
    """Stands for the job being killed."""


def _counting(monkeypatch, crash_at=None) -> dict:
    """Patch the trainer's optimizer: count updates; raise Killed before update ``crash_at``."""
    seen = {"updates": 0}

    def make_optimizer(model, cfg):
        opt = _MAKE_OPTIMIZER(model, cfg)
        step = opt.step

        def counted_step(*args, **kwargs):
            if crash_at is not None and seen["updates"] == crash_at:
                raise Killed
            seen["updates"] += 1
            return step(*args, **kwargs)

        opt.step = counted_step
        return opt

    monkeypatch.setattr(training, "make_optimizer", make_optimizer)
    return seen


def assert_same_run(a: dict, b: dict) -> None:
    assert [c["step"] for c in a["checkpoints"]] == [c["step"] for c in b["checkpoints"]]
    for ca, cb in zip(a["checkpoints"], b["checkpoints"], strict=True):
        assert torch.equal(ca["batch"], cb["batch"]), ca["step"]
        assert ca["model"].keys() == cb["model"].keys()
        for k in ca["model"]:
            assert torch.equal(ca["model"][k], cb["model"][k]), (ca["step"], k)
        sa, sb = ca["optimizer"]["state"], cb["optimizer"]["state"]
        assert sa.keys() == sb.keys(), ca["step"]
        for k in sa:
            for name in sa[k]:
                assert torch.equal(torch.as_tensor(sa[k][name]), torch.as_tensor(sb[k][name]))
    ha = pd.DataFrame(a["history"]).drop(columns="wall_time")
    hb = pd.DataFrame(b["history"]).drop(columns="wall_time")
    pd.testing.assert_frame_equal(ha, hb, check_exact=True)
    assert a["diverged"] == b["diverged"]


def _spec(norm):
    return make_spec(norm=norm, model=MODEL, training=TRAINING)


CONV = {"arch": "vgg", "channels": [4, "M", 8, "M"]}
CONV_ONLY = ("instancenorm",)  # normalizers over spatial dimensions: a small VGG on 8x8 digits


@pytest.fixture(scope="module")
def digit_images():
    return data.make("digits", {"seed": 0, "image": True})


@pytest.mark.parametrize("norm", sorted(normalizers.REGISTRY))
def test_crash_and_resume_equals_uninterrupted(norm, star, digit_images, tmp_path,
                                               monkeypatch):
    ds = digit_images if norm in CONV_ONLY else star
    spec = make_spec(norm=norm, model=CONV if norm in CONV_ONLY else MODEL, training=TRAINING)
    full = training.train(spec, ds, "cpu")
    path = tmp_path / "resume.pt"
    # crash before update 12: the latest checkpoint is step 10, so 10 updates are redone
    _counting(monkeypatch, crash_at=12)
    with pytest.raises(Killed):
        training.train(spec, ds, "cpu", resume_path=path)
    assert io.load_pt(path, training.RESUME_KIND)["step"] == 10
    seen = _counting(monkeypatch)
    resumed = training.train(spec, ds, "cpu", resume_path=path)
    assert seen["updates"] == TRAINING["steps"] - 10, "the restart did not resume from step 10"
    assert_same_run(full, resumed)


def test_repeated_crashes_and_a_crash_at_a_checkpoint(star, tmp_path, monkeypatch):
    spec = _spec("batchnorm")
    full = training.train(spec, star, "cpu")
    path = tmp_path / "resume.pt"
    # killed right at checkpoint 5 (before its update), then again right after checkpoint 15
    for crash_at, latest in ((5, 5), (11, 15)):
        _counting(monkeypatch, crash_at=crash_at)
        with pytest.raises(Killed):
            training.train(spec, star, "cpu", resume_path=path)
        assert io.load_pt(path, training.RESUME_KIND)["step"] == latest
    seen = _counting(monkeypatch)
    resumed = training.train(spec, star, "cpu", resume_path=path)
    assert seen["updates"] == TRAINING["steps"] - 15
    assert_same_run(full, resumed)


def test_a_resume_file_from_another_run_is_ignored(star, linear_ds, tmp_path, monkeypatch):
    path = tmp_path / "resume.pt"
    _counting(monkeypatch, crash_at=12)
    with pytest.raises(Killed):
        training.train(_spec("batchnorm"), star, "cpu", resume_path=path)
    seen = _counting(monkeypatch)
    # another spec (seed): starts afresh
    other = make_spec(norm="batchnorm", seed=1, model=MODEL, training=TRAINING)
    assert_same_run(training.train(other, star, "cpu"),
                    training.train(other, star, "cpu", resume_path=path))
    assert seen["updates"] == 2 * TRAINING["steps"]
    # the same spec on other data (a dataset whose options changed): starts afresh too
    moved = data.make("star2d", {"n_train": 64, "n_test": 64, "seed": 1})
    seen["updates"] = 0
    _counting(monkeypatch, crash_at=12)
    with pytest.raises(Killed):
        training.train(_spec("batchnorm"), star, "cpu", resume_path=path)
    seen = _counting(monkeypatch)
    assert_same_run(training.train(_spec("batchnorm"), moved, "cpu"),
                    training.train(_spec("batchnorm"), moved, "cpu", resume_path=path))
    assert seen["updates"] == 2 * TRAINING["steps"]


def test_a_resume_file_from_other_code_is_ignored(star, tmp_path, monkeypatch):
    """A job rerun because its code changed must not continue the old code's state."""
    spec, path = _spec("batchnorm"), tmp_path / "resume.pt"
    _counting(monkeypatch, crash_at=12)
    with pytest.raises(Killed):
        training.train(spec, star, "cpu", resume_path=path)
    # the same package with one module edited: the key hashes the package next to __file__
    pkg = tmp_path / "bnstudy"
    shutil.copytree(Path(training.__file__).parent, pkg,
                    ignore=shutil.ignore_patterns("__pycache__"))
    with open(pkg / "models.py", "a") as f:
        f.write("\n# edited\n")
    monkeypatch.setattr(training, "__file__", str(pkg / "training.py"))
    seen = _counting(monkeypatch)
    training.train(spec, star, "cpu", resume_path=path)
    assert seen["updates"] == TRAINING["steps"], "resumed a state saved by other code"


def test_sigkilled_cli_training_resumes_to_identical_outputs(tmp_path):
    """The train verb as the workflow runs it, killed with SIGKILL mid-run, then rerun."""
    ds = data.make("star2d", {"n_train": 64, "n_test": 64, "seed": 0})
    npz = tmp_path / "star.npz"
    data.save(ds, npz)
    steps = 1500  # a second or more: a window to kill it in after the step-500 checkpoint
    spec = make_spec(norm="batchnorm", model=MODEL, training={
        **TRAINING, "steps": steps, "eval_every": 100, "checkpoints": [0, 500, 1000]})
    resume = tmp_path / "resume.pt"
    out_ckpt, out_hist = tmp_path / "checkpoints.pt", tmp_path / "history.parquet"
    cmd = [sys.executable, "-m", "bnstudy", "train", "--data", str(npz), "--spec",
           json.dumps(spec), "--device", "cpu", "--threads", "1", "--resume", str(resume),
           "--out-checkpoints", str(out_ckpt), "--out-history", str(out_hist)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if resume.exists() and io.load_pt(resume, training.RESUME_KIND)["step"] >= 500:
                break
            time.sleep(0.02)
        assert proc.poll() is None, f"training ended before it could be killed: " \
                                    f"{proc.stdout.read().decode()[-2000:]}"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert resume.exists() and not out_ckpt.exists() and not out_hist.exists()
    killed_at = io.load_pt(resume, training.RESUME_KIND)["step"]
    rerun = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert not resume.exists(), "the resume file must be deleted after success"
    full = training.train(spec, data.load(npz), "cpu")
    run = checkpoints.load(out_ckpt)
    assert_same_run(full, {**run, "history": pd.read_parquet(out_hist)[
        ["step", "split", "loss", "accuracy", "lr", "wall_time"]].to_dict("records")})
    assert killed_at in (500, 1000)


def _train_processes(project: Path) -> list[int]:
    """PIDs of the ``bnstudy train`` processes running in ``project`` (started by this test's
    Snakemake: their command line names the project's results)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:  # the process ended meanwhile
            continue
        if args[1:4] == [b"-m", b"bnstudy", b"train"]:
            try:
                here = Path(f"/proc/{cmdline.parent.name}/cwd").resolve()
            except OSError:
                continue
            if here == project.resolve():
                found.append(int(cmdline.parent.name))
    return found


@pytest.mark.workflow
def test_workflow_resumes_a_killed_train_job(tmp_path_factory):
    """The default profile's retry of a train job killed mid-run (SIGKILL of its process, as
    the out-of-memory killer does) resumes from its resume file, in the same Snakemake command,
    and ends with the history and checkpoints of an uninterrupted run. The tiny study cut to
    one star run of 1500 steps (long enough to be killed after its step-500 checkpoint), no
    measures."""
    import harness

    cfg = harness.only_experiments(harness.tiny_config(), "star")
    cfg["experiments"]["star"].update(norms=["batchnorm"], seeds=[0], measures=[])
    cfg["trainings"]["sgd"].update(steps=1500, eval_every=100, checkpoints=[0, 500, 1000])
    project = harness.copy_project(tmp_path_factory.mktemp("resume") / "project",
                                   source=harness.snapshot(tmp_path_factory), config=cfg)
    run = project / "results" / "runs" / "star" / "batchnorm" / "seed0"
    target = "results/tables/training.parquet"
    proc = subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "1", target],
                            cwd=project, env=harness.env(project), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    killed = None
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None and killed is None:
            resume = run / "resume.pt"
            if resume.exists() and io.load_pt(resume, training.RESUME_KIND)["step"] >= 500:
                for pid in _train_processes(project):
                    os.kill(pid, signal.SIGKILL)
                    killed = pid
            time.sleep(0.05)
        out, _ = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    assert killed is not None, f"the train job ended before it could be killed:\n{out[-3000:]}"
    assert proc.returncode == 0, out[-6000:]
    log = project / "results" / "logs" / "train" / "star" / "batchnorm" / "seeds0.log"  # block
    assert "resuming from" in log.read_text(), log.read_text()[-2000:]
    assert not (run / "resume.pt").exists()
    # the same study uninterrupted, into another results directory
    harness.snakemake(project, "--cores", "1", "results_ref/tables/training.parquet",
                      "--config", "results=results_ref")
    ref = project / "results_ref" / "runs" / "star" / "batchnorm" / "seed0"
    a, b = checkpoints.load(run / "checkpoints.pt"), checkpoints.load(ref / "checkpoints.pt")
    history = [pd.read_parquet(d / "history.parquet") for d in (run, ref)]
    assert_same_run({**a, "history": history[0].to_dict("records")},
                    {**b, "history": history[1].to_dict("records")})
    harness.assert_tables_equal(harness.read_tables(project / "results"),
                                harness.read_tables(project / "results_ref"))
