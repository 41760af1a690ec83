"""A full disk: every write dies with one line naming the file and the cause, leaves nothing
partial, and the rerun resumes.

The writers (:func:`bnstudy.io.write_table`, :func:`bnstudy.io.save_pt`, :func:`bnstudy.data.save`)
write through :func:`bnstudy.io.atomic_path`, which turns a disk error (``ENOSPC``...) into
:class:`bnstudy.io.WriteFailed`; the command line prints it as one line. These tests make the
disk full by replacing ``open`` in the writing module with one whose files take a few bytes and
then raise ``OSError(ENOSPC)``.
"""

from __future__ import annotations

import errno
import json
import logging
import os

import pandas as pd
import pytest
import torch
from specs import make_spec

from bnstudy import data, io
from bnstudy.cli import main as cli
from bnstudy.train import checkpoints
from bnstudy.train import loop as training

FULL = os.strerror(errno.ENOSPC)  # "No space left on device"


def disk_full(match: str = ""):
    """An ``open`` whose files opened for writing (with ``match`` in their path) take 10 bytes,
    then raise ``OSError(ENOSPC)``."""
    real = open

    def fake(file, mode="r", *args, **kwargs):
        fh = real(file, mode, *args, **kwargs)
        if "w" not in mode or match not in str(file):
            return fh

        class Full:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                fh.close()

            def write(self, b):
                fh.write(bytes(b)[:10])
                fh.flush()
                raise OSError(errno.ENOSPC, FULL)

            def __getattr__(self, name):
                return getattr(fh, name)

        return Full()

    return fake


def assert_one_line(err, path) -> None:
    msg = str(err.value)
    assert msg.startswith(f"cannot write {path}: {FULL}"), msg
    assert "\n" not in msg and isinstance(err.value, OSError) and err.value.errno == errno.ENOSPC


@pytest.mark.parametrize("writer", ["table", "pt", "dataset"])
def test_a_full_disk_names_the_file_and_leaves_the_old_one(tmp_path, monkeypatch, star, writer):
    path = tmp_path / {"table": "t.parquet", "pt": "c.pt", "dataset": "d.npz"}[writer]

    def write():
        if writer == "table":
            io.write_table(pd.DataFrame({"step": [1, 2]}), path, {"config_hash": "h"})
        elif writer == "pt":
            io.save_pt({"w": torch.ones(2)}, path, "checkpoints")
        else:
            data.save(star, path)

    write()
    before = path.read_bytes()
    monkeypatch.setattr(data if writer == "dataset" else io, "open", disk_full(), raising=False)
    with pytest.raises(io.WriteFailed) as err:
        write()
    assert_one_line(err, path)
    assert path.read_bytes() == before  # the finished file is kept, nothing partial beside it
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_train_on_a_full_disk_says_one_line_and_the_rerun_resumes(
        tmp_path, monkeypatch, star, capsys, caplog):
    data.save(star, tmp_path / "star.npz")
    out = tmp_path / "runs"
    args = ["train", "--data", str(tmp_path / "star.npz"), "--spec", json.dumps(make_spec()),
            "--device", "cpu", "--resume", str(out / "resume.pt"),
            "--out-checkpoints", str(out / "checkpoints.pt"),
            "--out-history", str(out / "history.parquet")]
    monkeypatch.setattr(io, "open", disk_full("checkpoints.pt"), raising=False)
    # exit status ENOSPC: Snakemake shows it even when the job's log, on the full disk, is empty
    assert cli.main(args) == errno.ENOSPC
    err = capsys.readouterr().err
    assert err == (f"bnstudy train: error: cannot write {out / 'checkpoints.pt'}: {FULL} "
                   f"(errno {errno.ENOSPC}); nothing partial was left: fix the cause and rerun, "
                   "finished files are kept\n")
    assert not (out / "checkpoints.pt").exists() and (out / "resume.pt").exists()
    assert not [p for p in out.iterdir() if ".tmp" in p.name]
    monkeypatch.undo()
    with caplog.at_level(logging.INFO, logger="bnstudy"):
        assert cli.main(args) == 0
    assert "resuming from" in caplog.text
    assert not (out / "resume.pt").exists()
    resumed = checkpoints.load(out / "checkpoints.pt")
    whole = training.train(make_spec(), star, "cpu")  # the uninterrupted run
    assert checkpoints.steps(resumed) == checkpoints.steps(whole) == [0, 1, 2, 10, 20]
    for a, b in zip(resumed["checkpoints"], whole["checkpoints"], strict=True):
        assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
