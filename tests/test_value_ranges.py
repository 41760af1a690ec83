"""Values no run can produce are refused on every read (issue 50, item 1).

A run's ``history.parquet`` rewritten through the project's own writer (a valid checksum) with
``loss = inf`` and ``diverged = False``, or ``accuracy = -inf``, went through aggregate, claims,
plots and the report. The one reader now checks each column against its declared range
(:mod:`bnstudy.tables.ranges`) and names the file, the column, the row's keys and the value.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from bnstudy import columns, io
from bnstudy.cli import main as cli
from bnstudy.tables import binding, layout, ranges


def history(**change) -> pd.DataFrame:
    rows = [{"experiment": "e", "dataset": "d", "model": "m", "norm": "batchnorm", "seed": 0,
             "step": t, "split": split, "loss": 1.0 / (1 + t), "accuracy": 0.5, "lr": 0.1,
             "wall_time": 0.1 * t, "diverged": False}
            for t in (0, 5) for split in ("train", "test")]
    df = pd.DataFrame(rows)
    for column, value in change.items():
        df.loc[3, column] = value
    return df


def written(tmp_path, df, name="history.parquet"):
    path = Path(layout.run_file(tmp_path, "e", "batchnorm", 0, name))
    io.write_table(df, path, {**io.provenance("h"), binding.KEY: binding.run_place(
        "e", "batchnorm", 0)})
    return path


def test_an_intact_history_and_a_diverged_one_are_read(tmp_path):
    assert len(io.read_table(written(tmp_path, history()))) == 4
    df = history()
    df["diverged"] = True
    bad = {**df.iloc[-1].to_dict(), "step": 7, "split": "batch", "loss": math.inf,
           "accuracy": math.nan}
    df = pd.concat([df, pd.DataFrame([bad])], ignore_index=True)
    assert io.read_table(written(tmp_path, df))["diverged"].all()


@pytest.mark.parametrize(("change", "column", "value"), [
    ({"loss": math.inf}, "loss", "inf"),
    ({"loss": math.nan}, "loss", "nan"),
    ({"loss": -0.5}, "loss", "-0.5"),
    ({"accuracy": -math.inf}, "accuracy", "-inf"),
    ({"accuracy": 1.5}, "accuracy", "1.5"),
    ({"wall_time": math.inf}, "wall_time", "inf"),
])
def test_an_impossible_value_with_a_valid_checksum_is_refused(tmp_path, change, column, value):
    path = written(tmp_path, history(**change))
    with pytest.raises(io.ImpossibleValue) as e:
        io.read_table(path)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(str(path))
    assert f"column {column!r} holds {value}" in msg
    assert "experiment='e'" in msg and "seed=0" in msg and "step=5" in msg
    assert "split='test'" in msg


def test_diverged_must_match_a_non_finite_loss(tmp_path):
    df = history()
    df["diverged"] = True  # every loss finite: no run stops so
    with pytest.raises(io.ImpossibleValue, match="column 'diverged'.*no non-finite loss"):
        io.read_table(written(tmp_path, df))


def test_aggregate_and_claims_refuse_it_with_one_line(tmp_path, capsys):
    path = written(tmp_path, history(loss=math.inf))
    out = tmp_path / "tables" / "training.parquet"
    grid = {"e": {"norms": ["batchnorm"], "seeds": [0]}}
    assert cli.main(["aggregate", "--results", str(tmp_path), "--name", "history.parquet",
                     "--grid", json.dumps(grid), "--out", str(out)]) != 0
    err = capsys.readouterr().err.strip()
    assert str(path) in err and "'loss' holds inf" in err and "Traceback" not in err
    assert not out.exists()
    io.write_table(history(accuracy=-math.inf), out, io.provenance("h"))
    claims = tmp_path / "tables" / "claims.parquet"
    assert cli.main(["claims", "--tables", str(out), "--out", str(claims)]) != 0
    err = capsys.readouterr().err.strip()
    assert str(out) in err and "'accuracy' holds -inf" in err and not claims.exists()


def test_a_wrong_dtype_names_the_file(tmp_path, monkeypatch):
    df = history()
    df["seed"] = "zero"
    monkeypatch.setattr(columns, "normalize", lambda table, d: d)  # a writer that skips it
    path = written(tmp_path, df)
    monkeypatch.undo()
    with pytest.raises(io.CorruptFile) as e:
        io.read_table(path)
    assert str(e.value).startswith(f"{path}: ") and "'seed'" in str(e.value)


def test_every_declaration_is_a_range_of_a_declared_column():
    names = set(columns.types()) | {c for _, c, _ in columns.declarations()}
    for table, cols in ranges.declared().items():
        for column, rng in cols.items():
            assert column in names, (table, column)
            assert isinstance(rng, ranges.Range)


def test_counts_and_zero_to_one_values_are_read_off_the_meanings(tmp_path):
    assert ranges.ranges("bn_jitter")["n_batches"] == ranges.NONNEGATIVE
    assert ranges.ranges("teacher_student")["P"] == ranges.NONNEGATIVE
    assert ranges.ranges("generalization")["test_accuracy"] == ranges.FRACTION
    df = pd.DataFrame({"experiment": ["e"], "norm": ["none"], "seed": [0], "step": [0],
                       "n_points": [-3]})
    path = tmp_path / "partition_density.parquet"
    io.write_table(df, path, io.provenance("h"))
    with pytest.raises(io.ImpossibleValue, match="column 'n_points' holds -3"):
        io.read_table(path)
