"""Run files bound to their place (issue 34, item 4; bnstudy.tables.binding).

A run's history copied over another run's passed ``verify`` and was aggregated as that run (seed
1 gone, seed 0 counted twice), and ``results.load(...).checkpoint(e, norm, 1)`` returned a
checkpoint whose spec said seed 0. Every run file now says which run (or block of seeds) it is
inside its checksum, and the aggregate, the measure jobs, ``results.load`` and the resume compare
that with where it lies, naming the file, what it says it is and where it lies.
"""

from __future__ import annotations

import json
import logging
import shutil

import pandas as pd
import pytest
from specs import make_spec

from bnstudy import io, results
from bnstudy.cli import main as cli
from bnstudy.tables import binding, layout
from bnstudy.train import resume

TRAINING = {"lr": 0.05, "momentum": 0.9, "batch_size": 16, "steps": 4, "eval_every": 2,
            "checkpoints": [0, 4]}
GRID = {"tiny": {"norms": ["batchnorm"], "seeds": [0, 1]}}


def _train(root, npz, seed, out_seed=None) -> int:
    spec = make_spec(norm="batchnorm", seed=seed, training=TRAINING, experiment="tiny")
    out = [layout.run_file(root, "tiny", "batchnorm", seed if out_seed is None else out_seed, f)
           for f in ("checkpoints.pt", "history.parquet")]
    return cli.main(["train", "--data", str(npz), "--spec", json.dumps(spec), "--device", "cpu",
                     "--out-checkpoints", out[0], "--out-history", out[1]])


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("study") / "results"
    npz = root / "data" / "star2d.npz"
    assert cli.main(["prepare-data", "--name", "star2d", "--kind", "star2d", "--options",
                     json.dumps({"n_train": 48, "n_test": 32, "seed": 0}),
                     "--out", str(npz)]) == 0
    for seed in (0, 1):
        assert _train(root, npz, seed) == 0
    return root


@pytest.fixture
def root(trained, tmp_path):
    out = tmp_path / "results"
    shutil.copytree(trained, out)
    return out


def _copy(root, name, src=0, dst=1):
    a, b = (root / "runs" / "tiny" / "batchnorm" / f"seed{s}" / name for s in (src, dst))
    b.write_bytes(a.read_bytes())  # byte for byte: the checksum holds
    return b


def _aggregate(root, name="history.parquet", grid=GRID, level="run"):
    return cli.main(["aggregate", "--results", str(root), "--name", name, "--grid",
                     json.dumps(grid), "--level", level, "--out",
                     str(root / "tables" / f"{name.split('.')[0]}.parquet")])


def test_an_intact_study_aggregates_every_seed_once(root):
    assert _aggregate(root) == 0
    df = io.read_table(root / "tables" / "history.parquet")
    assert sorted(set(df["seed"])) == [0, 1]


def test_a_history_copied_over_another_runs_is_refused_by_the_aggregate(root, capsys):
    path = _copy(root, "history.parquet")
    assert _aggregate(root) == 2
    err = capsys.readouterr().err
    assert (f"{path} says it is run tiny/batchnorm/seed0's file but lies in run "
            "tiny/batchnorm/seed1's place") in err
    assert not (root / "tables" / "history.parquet").exists()
    assert cli.main(["verify", str(root)]) == 1
    assert f"BAD {path}: " in capsys.readouterr().out


def test_a_checkpoints_file_copied_over_another_runs_is_refused_by_results_load(root):
    path = _copy(root, "checkpoints.pt")
    r = results.load(root)
    assert r.checkpoint("tiny", "batchnorm", 0).spec.seed == 0
    with pytest.raises(io.MisplacedFile, match="says it is run tiny/batchnorm/seed0's file but "
                       "lies in run tiny/batchnorm/seed1's place") as err:
        r.checkpoint("tiny", "batchnorm", 1)
    assert str(path) in str(err.value)


def test_a_measure_job_refuses_another_runs_checkpoints(root, capsys):
    _copy(root, "checkpoints.pt")
    out = layout.block_file(root, "tiny", [0, 1], "generalization.parquet")
    rc = cli.main(["measure", "generalization", "--results", str(root), "--experiment", "tiny",
                   "--grid", json.dumps(GRID), "--data", str(root / "data" / "star2d.npz"),
                   "--device", "cpu", "--out", out])
    assert rc == 2 and "lies in run tiny/batchnorm/seed1's place" in capsys.readouterr().err


def test_a_block_table_says_its_block_and_a_copy_is_refused(root, capsys):
    block = {"tiny": {"norms": ["batchnorm"], "seeds": [0], "blocks": [[0], [1]]}}
    outs = [layout.block_file(root, "tiny", [s], "generalization.parquet") for s in (0, 1)]
    for s, out in zip((0, 1), outs, strict=True):
        grid = {"tiny": {"norms": ["batchnorm"], "seeds": [s]}}
        assert cli.main(["measure", "generalization", "--results", str(root), "--experiment",
                         "tiny", "--grid", json.dumps(grid), "--data",
                         str(root / "data" / "star2d.npz"), "--device", "cpu",
                         "--out", out]) == 0
    assert io.read_provenance(outs[1])["place"] == {"experiment": "tiny", "seeds": [1]}
    block["tiny"]["seeds"] = [0, 1]
    assert _aggregate(root, "generalization.parquet", block, "experiment") == 0
    capsys.readouterr()
    with open(outs[1], "wb") as fh:
        fh.write(open(outs[0], "rb").read())
    assert _aggregate(root, "generalization.parquet", block, "experiment") == 2
    assert (f"{outs[1]} says it is block tiny/seeds0's file but lies in block tiny/seeds1's "
            "place") in capsys.readouterr().err


def test_a_block_table_that_names_no_block_is_refused(root, capsys):
    out = layout.block_file(root, "tiny", [0, 1], "generalization.parquet")
    io.write_table(pd.DataFrame({"experiment": ["tiny"], "seed": [0]}), out,
                   {"config_hash": "h"})  # an older bnstudy's table: no place
    assert _aggregate(root, "generalization.parquet", GRID, "experiment") == 2
    assert f"{out} does not say which run it belongs to" in capsys.readouterr().err


def test_train_refuses_to_write_into_another_runs_place(root, capsys):
    before = (root / "runs/tiny/batchnorm/seed1/history.parquet").read_bytes()
    assert _train(root, root / "data" / "star2d.npz", 0, out_seed=1) == 2
    err = capsys.readouterr().err
    assert "is run tiny/batchnorm/seed1's place, but this job writes run tiny/batchnorm/seed0's " \
           "file" in err
    assert (root / "runs/tiny/batchnorm/seed1/history.parquet").read_bytes() == before
    spec = make_spec(norm="batchnorm", seed=0, training=TRAINING, experiment="tiny")
    resume_file = layout.run_file(root, "tiny", "batchnorm", 1, "resume.pt")
    assert cli.main(["train", "--data", str(root / "data" / "star2d.npz"), "--spec",
                     json.dumps(spec), "--device", "cpu", "--resume", resume_file,
                     "--out-checkpoints", str(root / "c.pt"), "--out-history",
                     str(root / "h.parquet")]) == 2
    assert f"{resume_file} is run tiny/batchnorm/seed1's place" in capsys.readouterr().err


def test_a_resume_state_copied_from_another_run_is_discarded(tmp_path, caplog):
    here = tmp_path / "runs" / "e" / "none"
    src, dst = here / "seed0" / "resume.pt", here / "seed1" / "resume.pt"
    io.save_pt({"key": "k", "place": binding.run_place("e", "none", 0)}, src,
               resume.RESUME_KIND)
    dst.parent.mkdir(parents=True)
    dst.write_bytes(src.read_bytes())
    with caplog.at_level(logging.WARNING, logger="bnstudy"):
        assert resume.load(dst, "k", None, None, None) is None
    assert "says it is run e/none/seed0's file but lies in run e/none/seed1's place" in caplog.text
    assert not dst.exists() and src.exists()


@pytest.mark.parametrize("path,place", [
    ("r/runs/e/bn/seed3/history.parquet", {"experiment": "e", "norm": "bn", "seed": 3}),
    ("runs/e/bn/seed0/checkpoints.pt", {"experiment": "e", "norm": "bn", "seed": 0}),
    ("r/runs/e/seeds0-2_5/ics.parquet", {"experiment": "e", "seeds": [0, 1, 2, 5]}),
    ("r/runs/runs/seeds1/ics.parquet", {"experiment": "runs", "seeds": [1]}),
    ("r/tables/training.parquet", None), ("r/data/star.npz", None),
    ("r/runs/e/bn/seedx/history.parquet", None), ("r/runs/e/seeds2-1/ics.parquet", None)])
def test_the_place_of_a_path(path, place):
    assert binding.place_of(path) == place


def test_a_claim_must_be_a_whole_place():
    assert binding.claimed_by_table({"config": make_spec(seed=2)}) == binding.run_place(
        "t", "batchnorm", 2)
    for bad in ({"experiment": "e"}, {"experiment": "e", "norm": "n", "seed": "x"},
                {"experiment": "e", "norm": "n", "seed": True}, [1], "e/n/seed0"):
        assert binding.claimed_by_table({"place": bad}) is None
        assert binding.claimed_by_run_file({"place": bad}) is None
    with pytest.raises(io.MisplacedFile, match="does not say which run"):
        binding.check("r/runs/e/n/seed0/history.parquet", None)
    binding.check("r/tables/training.parquet", None)  # no place to check outside runs/
