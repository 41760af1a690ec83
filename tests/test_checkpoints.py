"""Corrupt, truncated and foreign run files are named, never measured.

Checkpoint and resume files (``.pt``), per-run Parquet tables and dataset ``.npz`` files carry a
SHA-256 of their content, verified on load: a flipped byte or a truncated file raises
:class:`bnstudy.io.CorruptFile` naming the file and what to do; a pickle with Python objects is
"not a bnstudy checkpoints file" (PyTorch's advice to load it with ``weights_only=False`` is not
passed on); a corrupt ``resume.pt`` is discarded with a warning and the run starts afresh, ending
exactly like an uninterrupted run.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from specs import make_spec, measure_cli
from test_resume import Killed, _counting, assert_same_run

from bnstudy import data, io
from bnstudy.cli import main as cli
from bnstudy.tables import layout
from bnstudy.train import checkpoints
from bnstudy.train import loop as training

SPEC = make_spec(norm="batchnorm", training={"lr": 0.05, "momentum": 0.9, "batch_size": 16,
                                             "steps": 20, "eval_every": 5,
                                             "checkpoints": [0, 1, 5, 10, 15]})


@pytest.fixture(scope="module")
def run(star):
    return training.train(SPEC, star, "cpu")


def flip_middle_byte(path) -> None:
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))


def truncate(path) -> None:
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])


def assert_named(err, path, *words) -> None:
    msg = str(err.value)
    assert str(path) in msg, msg
    for w in words:
        assert w in msg, (w, msg)
    assert "weights_only" not in msg, msg


def test_checkpoints_roundtrip(run, tmp_path):
    path = tmp_path / "checkpoints.pt"
    checkpoints.save(run, path)
    back = checkpoints.load(path)
    assert back["spec"] == run["spec"] and checkpoints.steps(back) == checkpoints.steps(run)
    for a, b in zip(run["checkpoints"], back["checkpoints"], strict=True):
        for k in a["model"]:
            assert torch.equal(a["model"][k], b["model"][k])


@pytest.mark.parametrize("damage", [flip_middle_byte, truncate])
def test_damaged_checkpoints_are_named(run, tmp_path, damage):
    path = tmp_path / "checkpoints.pt"
    checkpoints.save(run, path)
    damage(path)
    with pytest.raises(io.CorruptFile) as err:
        checkpoints.load(path)
    assert_named(err, path, "corrupt", "delete it and rerun")


def test_checksum_catches_a_change_the_container_does_not(run, tmp_path):
    path = tmp_path / "checkpoints.pt"
    checkpoints.save(run, path)
    wrapper = torch.load(path, weights_only=True)
    payload = bytearray(wrapper["payload"])
    payload[len(payload) // 2] ^= 0x01  # a valid torch container, different content
    wrapper["payload"] = bytes(payload)
    torch.save(wrapper, path)
    with pytest.raises(io.CorruptFile) as err:
        checkpoints.load(path)
    assert_named(err, path, "does not match the checksum")


class Evil:
    def __reduce__(self):
        return (print, ("this must never run",))


@pytest.mark.parametrize("blob", [{"spec": {}, "hook": Evil()}, {"spec": {}, "checkpoints": []}],
                         ids=["malicious_pickle", "plain_torch_save"])
def test_a_foreign_file_is_not_loaded(tmp_path, blob, capsys):
    path = tmp_path / "checkpoints.pt"
    torch.save(blob, path)
    with pytest.raises(io.CorruptFile) as err:
        checkpoints.load(path)
    assert_named(err, path, "not a bnstudy checkpoints file", "will not be loaded")
    assert "this must never run" not in capsys.readouterr().out


def test_measure_verb_names_a_corrupt_checkpoint_without_traceback(run, star, tmp_path, capsys):
    data.save(star, tmp_path / "star.npz")
    rc, _ = measure_cli(tmp_path, "generalization", [run], tmp_path / "star.npz")
    assert rc == 0  # the intact file measures
    s = run["spec"].to_dict()
    path = Path(layout.run_file(tmp_path / "results", s["experiment"], s["norm"], s["seed"],
                                "checkpoints.pt"))
    capsys.readouterr()
    truncate(path)
    results, grid = tmp_path / "results", {s["experiment"]: {"norms": [s["norm"]],
                                                            "seeds": [s["seed"]]}}
    rc = cli.main(["measure", "generalization", "--results", str(results), "--experiment",
                   s["experiment"], "--grid", json.dumps(grid), "--data",
                   str(tmp_path / "star.npz"), "--device", "cpu",
                   "--out", str(tmp_path / "again" / "generalization.parquet")])
    err = capsys.readouterr().err
    assert rc == 2 and str(path) in err and "corrupt" in err and "Traceback" not in err


def _table(tmp_path):
    df = pd.DataFrame({"step": np.arange(2000), "loss": np.linspace(0, 1, 2000),
                       "split": ["train", "test"] * 1000, "acc": [np.nan] * 2000})
    path = tmp_path / "t.parquet"
    io.write_table(df, path, {"config_hash": "x"})
    return df, path


def test_table_roundtrip_verifies(tmp_path):
    df, path = _table(tmp_path)
    pd.testing.assert_frame_equal(io.read_table(path), df)


@pytest.mark.parametrize("damage", [flip_middle_byte, truncate])
def test_damaged_tables_are_named(tmp_path, damage):
    _, path = _table(tmp_path)
    damage(path)
    with pytest.raises(io.CorruptFile) as err:
        io.read_table(path)
    assert_named(err, path, "corrupt")


def test_table_checksum_catches_changed_values(tmp_path):
    import pyarrow.parquet as pq

    _, path = _table(tmp_path)
    table = pq.read_table(path)
    changed = table.set_column(1, "loss", [table["loss"].to_numpy() + 1e-9])
    stored = pq.read_metadata(path).metadata[io.CHECKSUM_KEY]  # the footer's checksum, kept
    with pq.ParquetWriter(path, changed.schema) as writer:
        writer.write_table(changed)
        writer.add_key_value_metadata({io.CHECKSUM_KEY: stored})
    with pytest.raises(io.CorruptFile) as err:
        io.read_table(path)
    assert_named(err, path, "do not match the checksum")


def flip_a_data_byte(path, array) -> None:
    """Flip a byte inside ``array``'s bytes in the file (the middle byte of an ``.npz`` may be
    zip header bytes that no reader uses)."""
    raw = bytearray(path.read_bytes())
    at = raw.find(array.tobytes()[:16])
    assert at > 0
    raw[at + 5] ^= 0xFF
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_damaged_datasets_are_named(star, tmp_path, damage):
    path = tmp_path / "star.npz"
    data.save(star, path)
    flip_a_data_byte(path, star.x_train) if damage == "flip" else truncate(path)
    with pytest.raises(io.CorruptFile) as err:
        data.load(path)
    assert_named(err, path, "corrupt")


def test_dataset_checksum_catches_changed_values(star, tmp_path):
    path = tmp_path / "star.npz"
    data.save(star, path)
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["x_train"] = arrays["x_train"] + np.float32(1e-3)
    np.savez(path, **arrays)
    with pytest.raises(io.CorruptFile) as err:
        data.load(path)
    assert_named(err, path, "does not match the checksum")


@pytest.mark.parametrize("damage", [flip_middle_byte, truncate])
def test_corrupt_resume_state_is_discarded_and_the_run_starts_afresh(
        star, run, tmp_path, monkeypatch, caplog, damage):
    path = tmp_path / "resume.pt"
    _counting(monkeypatch, crash_at=12)
    with pytest.raises(Killed):
        training.train(SPEC, star, "cpu", resume_path=path)
    damage(path)
    seen = _counting(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="bnstudy"):
        resumed = training.train(SPEC, star, "cpu", resume_path=path)
    assert seen["updates"] == SPEC["training"]["steps"], "did not start afresh"
    assert any("discarding the resume state" in r.message and str(path) in r.message
               for r in caplog.records), caplog.text
    assert_same_run(run, resumed)


def test_cuda_without_cuda_is_refused_before_the_data_is_read(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    rc = cli.main(["train", "--data", str(tmp_path / "missing.npz"), "--spec",
                   '{"experiment": "t", "dataset": "d", "model": "m", "norm": "none", "seed": 0,'
                   ' "model_config": {"arch": "mlp"}, "training": {"lr": 0.1, "steps": 2}}',
                   "--device", "cuda", "--out-checkpoints", str(tmp_path / "c.pt"),
                   "--out-history", str(tmp_path / "h.parquet")])
    err = capsys.readouterr().err
    assert rc == 2 and "device 'cuda'" in err and "0 CUDA device" in err, err
    assert "missing.npz" not in err and "Traceback" not in err
