"""``python -m bnstudy verify [RESULTS]`` checks every checksummed file of a study.

A byte changed on disk that keeps the file's mtime is invisible to Snakemake ("Nothing to be
done"); the verb reads every table, run file, resume state and dataset, names the bad ones and
the command that writes them again, and exits 1 when any is bad.
"""

from __future__ import annotations

import os

import pandas as pd
import pytest
import torch

from bnstudy import data, io, verify
from bnstudy.cli import main as cli


def write_run(root, seed: int, norm: str = "batchnorm") -> None:
    """A run's files as the train job writes them: each says which run it is (its spec, the
    resume state's place: bnstudy.tables.binding)."""
    run = root / "runs" / "star" / norm / f"seed{seed}"
    ids = {"experiment": "star", "norm": norm, "seed": seed}
    io.save_pt({"spec": ids, "w": torch.ones(3)}, run / "checkpoints.pt", "checkpoints")
    io.save_pt({"step": 1, "place": ids}, run / "resume.pt", "resume state")
    frame = pd.DataFrame({"step": [0, 1], "loss": [1.0, 0.5 + seed]})
    io.write_table(frame, run / "history.parquet", {"config_hash": "h", "config": ids})


@pytest.fixture
def study(tmp_path, star):
    root = tmp_path / "results"
    data.save(star, root / "data" / "star2d.npz")
    write_run(root, 0)
    frame = pd.DataFrame({"step": [0, 1], "loss": [1.0, 0.5]})
    io.write_table(frame, root / "tables" / "training.parquet", {"config_hash": "h"})
    (root / "figures").mkdir()
    (root / "figures" / "a.png").write_bytes(b"not checked")
    (root / "tables" / ".training.parquet.tmp123").write_bytes(b"a writer's temporary")
    return root


def flip_keeping_mtime(path) -> None:
    st = path.stat()
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 3] ^= 0x01
    path.write_bytes(bytes(raw))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_a_good_study_verifies(study, capsys):
    assert cli.main(["verify", str(study)]) == 0
    out = capsys.readouterr().out
    assert "5 checksummed files (tables, run files, datasets), 5 good, 0 bad" in out
    assert "BAD" not in out


@pytest.mark.parametrize("name", ["tables/training.parquet", "runs/star/batchnorm/seed0/"
                                  "history.parquet", "runs/star/batchnorm/seed0/checkpoints.pt",
                                  "data/star2d.npz"])
def test_a_flipped_byte_is_named_with_what_to_rerun(study, capsys, name):
    path = study / name
    flip_keeping_mtime(path)
    assert cli.main(["verify", str(study)]) == 1
    out = capsys.readouterr().out
    assert "4 good, 1 bad" in out
    assert f"BAD {path}: " in out and "corrupt" in out
    assert f"snakemake --cores 1 --forcerun {path}\n" in out and f"rm {path}" in out


@pytest.mark.parametrize("name", ["resume.pt", "resume.ckpt10.pt"])
def test_a_truncated_resume_state_is_named_as_discardable(study, capsys, name):
    path = study / "runs/star/batchnorm/seed0" / name
    if not path.exists():  # a checkpoint file of the resume state (bnstudy.train.resume)
        io.save_pt({"step": 10, "place": {"experiment": "star", "norm": "batchnorm", "seed": 0}},
                   path, "resume checkpoint")
    path.write_bytes(path.read_bytes()[:100])
    assert cli.main(["verify", str(study)]) == 1
    out = capsys.readouterr().out
    assert f"BAD {path}" in out and "--forcerun" not in out
    assert "discarded by its train job" in out and f"rm {path}" in out


def test_verify_checks_every_suffix_and_skips_temporaries(study):
    names = sorted(p.relative_to(study).as_posix() for p in verify.files(study))
    assert names == ["data/star2d.npz", "runs/star/batchnorm/seed0/checkpoints.pt",
                     "runs/star/batchnorm/seed0/history.parquet",
                     "runs/star/batchnorm/seed0/resume.pt", "tables/training.parquet"]


def test_a_missing_results_directory_is_one_line(tmp_path, capsys):
    assert cli.main(["verify", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert "nope' does not exist" in err and "Traceback" not in err


# -- issue 34: a run's file copied over another run's is intact, but not that run's -----------

@pytest.mark.parametrize("name", ["history.parquet", "checkpoints.pt", "resume.pt"])
def test_a_run_file_copied_over_another_runs_is_named(study, capsys, name):
    write_run(study, 1)
    src, dst = (study / f"runs/star/batchnorm/seed{s}" / name for s in (0, 1))
    assert cli.main(["verify", str(study)]) == 0
    capsys.readouterr()
    dst.write_bytes(src.read_bytes())  # byte for byte: its checksum holds
    assert cli.main(["verify", str(study)]) == 1
    out = capsys.readouterr().out
    assert "1 bad" in out
    assert (f"BAD {dst}: {dst} says it is run star/batchnorm/seed0's file but lies in run "
            f"star/batchnorm/seed1's place") in out
    assert f"rm {dst}" in out


def test_a_file_in_another_normalizers_place_is_named(study, capsys):
    write_run(study, 0, norm="none")
    src = study / "runs/star/batchnorm/seed0/history.parquet"
    dst = study / "runs/star/none/seed0/history.parquet"
    dst.write_bytes(src.read_bytes())
    assert cli.main(["verify", str(study)]) == 1
    assert ("says it is run star/batchnorm/seed0's file but lies in run star/none/seed0's "
            "place") in capsys.readouterr().out


def test_a_run_file_that_names_no_run_is_refused(study, capsys):
    path = study / "runs/star/batchnorm/seed0/history.parquet"
    io.write_table(pd.DataFrame({"step": [0]}), path, {"config_hash": "h"})
    assert cli.main(["verify", str(study)]) == 1
    assert f"{path} does not say which run it belongs to" in capsys.readouterr().out


class _Payload:  # a Python object: weights_only=True refuses to unpickle it
    pass


def test_a_pickle_bearing_checkpoint_is_named_by_its_kind(tmp_path):
    """Issue 50, item 6: a correctly checksummed wrapper around a pickled Python object was
    called "not a bnstudy None file" by verify."""
    from bnstudy import io, verify

    path = tmp_path / "checkpoints.pt"
    io.save_pt({"model": _Payload()}, path, "run")
    why = verify.check_file(path)
    assert why is not None and "None" not in why
    assert why.startswith(f"{path} is not a bnstudy run file (it holds Python objects")
