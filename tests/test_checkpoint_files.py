"""The resume state on disk: one file per checkpoint, written once (:mod:`bnstudy.train.resume`).

The resume file used to carry every earlier checkpoint and was rewritten whole at each one (a
VGG11 run with nine checkpoints: a 500 MB file, 22 s of CPU). Now each checkpoint goes once to
``resume.ckpt<step>.pt`` beside ``resume.pt``, which holds only the latest trainer state and the
list of those steps. Checked here: the writes per file, a resume file that does not grow with the
checkpoints, a killed run that resumes to the uninterrupted run's ``checkpoints.pt`` and history
through the train verb (and leaves no file of its resume state behind), and a damaged checkpoint
file that makes the restart begin afresh, with a warning, and still end identical.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
import torch
from specs import make_spec
from test_resume import Killed, _counting, assert_same_run

from bnstudy import data, io
from bnstudy.cli import main as cli
from bnstudy.train import checkpoints, resume
from bnstudy.train import loop as training

STEPS = [0, 1, 5, 10, 15]
SPEC = make_spec(norm="batchnorm", model={"arch": "mlp", "depth": 3, "width": 64}, training={
    "lr": 0.05, "momentum": 0.9, "batch_size": 16, "steps": 20, "eval_every": 5,
    "checkpoints": STEPS})
STATE_KEYS = {"key", "step", "model", "optimizer", "checkpoint_steps", "history", "elapsed",
              "sampler", "torch_rng", "pending_batch"}


@pytest.fixture(scope="module")
def full(star):
    return training.train(SPEC, star, "cpu")


def _recording(monkeypatch) -> list[tuple[str, int]]:
    """Record every ``bnstudy.io.save_pt`` as (file name, size written)."""
    writes, save_pt = [], io.save_pt

    def recorded(obj, path, kind):
        save_pt(obj, path, kind)
        writes.append((Path(path).name, Path(path).stat().st_size))

    monkeypatch.setattr(io, "save_pt", recorded)
    return writes


def assert_identical(a, b, where="") -> None:
    """``a`` and ``b`` nested alike, every tensor equal bit for bit (dtype and shape too)."""
    assert type(a) is type(b), where
    if torch.is_tensor(a):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            assert_identical(a[k], b[k], f"{where}/{k}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_identical(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


def _bytes(state: dict) -> int:
    return sum(t.numel() * t.element_size() for t in state.values() if torch.is_tensor(t))


def test_each_checkpoint_file_is_written_once_and_the_resume_file_stays_small(
        star, full, tmp_path, monkeypatch):
    path = tmp_path / "resume.pt"
    writes = _recording(monkeypatch)
    _counting(monkeypatch, crash_at=12)  # killed after checkpoint 10: step 10 is replayed
    with pytest.raises(Killed):
        training.train(SPEC, star, "cpu", resume_path=path)
    _counting(monkeypatch)
    resumed = training.train(SPEC, star, "cpu", resume_path=path)
    assert_same_run(full, resumed)
    count = Counter(name for name, _ in writes)
    assert {n: c for n, c in count.items() if n != "resume.pt"} == {
        f"resume.ckpt{s}.pt": 1 for s in STEPS}, count
    # the resume state at every checkpoint before the last; the replayed step 10 writes it again
    assert count["resume.pt"] == len(STEPS) + 1
    # from step 1 on, once the optimizer holds its momentum buffers: only the history grows
    sizes = [size for name, size in writes if name == "resume.pt"][1:]
    one_checkpoint = _bytes(full["checkpoints"][0]["model"])
    assert max(sizes) - min(sizes) < one_checkpoint, sizes
    blob = io.load_pt(path, training.RESUME_KIND)
    assert set(blob) == STATE_KEYS and blob["checkpoint_steps"] == STEPS
    on_disk = sorted(p.name for p in tmp_path.iterdir())
    assert on_disk == sorted(["resume.pt", *(f"resume.ckpt{s}.pt" for s in STEPS)])
    for ck in full["checkpoints"][:-1]:
        saved = io.load_pt(resume.checkpoint_path(path, ck["step"]), resume.CHECKPOINT_KIND)
        assert_identical(ck, saved["checkpoint"], f"step {ck['step']}")


def _cli(star, tmp_path, out: Path) -> list[str]:
    data.save(star, tmp_path / "star.npz")
    return ["train", "--data", str(tmp_path / "star.npz"), "--spec", json.dumps(SPEC),
            "--device", "cpu", "--resume", str(out / "resume.pt"),
            "--out-checkpoints", str(out / "checkpoints.pt"),
            "--out-history", str(out / "history.parquet")]


def _outputs(out: Path):
    """What the run file holds (its spec as JSON) and the history but for wall times."""
    run = checkpoints.load(out / "checkpoints.pt")
    history = pd.read_parquet(out / "history.parquet").drop(columns="wall_time")
    return {**run, "spec": run["spec"].to_dict()}, history


@pytest.mark.parametrize("killed_after", [5, 10])
def test_a_killed_train_verb_resumes_to_identical_outputs_and_leaves_nothing(
        star, tmp_path, monkeypatch, caplog, killed_after):
    whole, out = tmp_path / "whole", tmp_path / "run"
    assert cli.main(_cli(star, tmp_path, whole)) == 0
    assert sorted(p.name for p in whole.iterdir()) == ["checkpoints.pt", "history.parquet"]
    args = _cli(star, tmp_path, out)
    _counting(monkeypatch, crash_at=killed_after + 1)
    with pytest.raises(Killed):
        cli.main(args)
    assert io.load_pt(out / "resume.pt", training.RESUME_KIND)["step"] == killed_after
    # leftovers a killed write or another run may leave: removed with the resume state
    (out / ".resume.ckpt15.pt.tmp4242").write_bytes(b"half")
    (out / ".resume.pt.tmp4242").write_bytes(b"half")
    io.save_pt({"key": "another run", "checkpoint": {}}, out / "resume.ckpt99.pt",
               resume.CHECKPOINT_KIND)
    seen = _counting(monkeypatch)
    with caplog.at_level(logging.INFO, logger="bnstudy"):
        assert cli.main(args) == 0
    assert f"resuming from {out / 'resume.pt'} at step {killed_after}" in caplog.text
    assert seen["updates"] == SPEC["training"]["steps"] - killed_after
    assert sorted(p.name for p in out.iterdir()) == ["checkpoints.pt", "history.parquet"]
    (run_a, hist_a), (run_b, hist_b) = _outputs(whole), _outputs(out)
    # the content bit for bit (the pickle's bytes may not be: it shares equal strings as it
    # finds them, and the resumed checkpoints' strings were read back from their files)
    assert_identical(run_a, run_b)
    assert [c["step"] for c in run_b["checkpoints"]] == [*STEPS, 20]
    pd.testing.assert_frame_equal(hist_a, hist_b, check_exact=True)


def _flip(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))


def _another_runs(path: Path) -> None:
    blob = io.load_pt(path, resume.CHECKPOINT_KIND)
    io.save_pt({**blob, "key": "another run"}, path, resume.CHECKPOINT_KIND)


@pytest.mark.parametrize("damage, what", [
    (_flip, "corrupt"), (lambda p: p.write_bytes(p.read_bytes()[:99]),
                                             "corrupt or truncated"),
    (Path.unlink, "which is missing"), (_another_runs, "holds no checkpoint of step 5"),
])
def test_a_damaged_checkpoint_file_restarts_afresh_and_ends_identical(
        star, full, tmp_path, monkeypatch, caplog, damage, what):
    path = tmp_path / "resume.pt"
    _counting(monkeypatch, crash_at=12)
    with pytest.raises(Killed):
        training.train(SPEC, star, "cpu", resume_path=path)
    damage(tmp_path / "resume.ckpt5.pt")
    seen = _counting(monkeypatch)
    writes = _recording(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="bnstudy"):
        resumed = training.train(SPEC, star, "cpu", resume_path=path)
    assert seen["updates"] == SPEC["training"]["steps"], "did not start afresh"
    warned = [r.message for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "discarding the resume state" in warned[0], caplog.text
    assert str(path) in warned[0] and "resume.ckpt5.pt" in warned[0] and what in warned[0]
    assert_same_run(full, resumed)
    # the fresh start wrote every checkpoint file anew, once each
    assert Counter(n for n, _ in writes if n != "resume.pt") == {
        f"resume.ckpt{s}.pt": 1 for s in STEPS}
