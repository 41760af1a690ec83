"""One reader for every table, with its checksum, at every entry point (issue 34, item 3).

The plot jobs, ``compare`` and ``ledger`` read tables with ``pd.read_parquet``, skipping the
checksum: a flipped byte in ``tables/training.parquet`` redrew the training curves from the
corrupt table (a 1e27 loss band), and ``compare`` printed differences from a corrupt ledger as if
they were real. Every entry point now reads through :func:`bnstudy.io.read_table`; each is fuzzed
here with flipped bytes spread over the file (the flips of tests/test_io_fuzz.py): an intact
table is read, and every flip is refused, naming the file, never read as a different table.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bnstudy import io, results
from bnstudy.cli import main as cli
from bnstudy.replication import rounds
from bnstudy.tables import binding, layout

SRC = Path(__file__).resolve().parent.parent / "src" / "bnstudy"
PATTERNS = (0x01, 0xFF)


def training(seeds=(0, 1)) -> pd.DataFrame:
    rows = [{"experiment": "e", "dataset": "d", "model": "m", "norm": n, "seed": s, "step": t,
             "split": split, "loss": 1.0 / (1 + t) + 0.01 * s, "accuracy": 0.5 + 0.01 * t,
             "lr": 0.1, "wall_time": 0.1 * t, "diverged": False}
            for n in ("none", "batchnorm") for s in seeds for t in (0, 5, 10)
            for split in ("train", "test")]
    return pd.DataFrame(rows)


def flips(path: Path):
    """Each flipped copy of ``path`` in turn (spread over the file, both ends included, two
    patterns), written in place; the original is put back afterwards."""
    raw = path.read_bytes()
    n = len(raw)
    at = sorted({0, 1, 7, n // 2, n - 8, n - 2, n - 1, *(n * i // 16 for i in range(16))})
    try:
        for i in at:
            for pattern in PATTERNS:
                flipped = bytearray(raw)
                flipped[i] ^= pattern
                path.write_bytes(bytes(flipped))
                yield i, pattern
    finally:
        path.write_bytes(raw)


def refused_by_cli(argv, path, capsys, rc=2, where="err") -> None:
    """``argv`` runs on the intact ``path``, and exits ``rc`` naming it for every flip."""
    assert cli.main(argv) in (0, 1)
    capsys.readouterr()
    for i, pattern in flips(path):
        got = cli.main(argv)
        text = getattr(capsys.readouterr(), where)
        assert got == rc and str(path) in text and "corrupt" in text, (i, pattern, got, text)
        assert "Traceback" not in text


def refused_by_call(read, path) -> None:
    read(path)
    for i, pattern in flips(path):
        with pytest.raises(io.CorruptFile) as err:
            read(path)
        assert str(path) in str(err.value), (i, pattern)


@pytest.fixture
def study(tmp_path):
    """A results directory: two runs' histories, the aggregated training table, a ledger."""
    root = tmp_path / "results"
    for seed in (0, 1):
        io.write_table(training([seed]).query("norm == 'none'"),
                       layout.run_file(root, "e", "none", seed, "history.parquet"),
                       {"config_hash": "h", binding.KEY: binding.run_place("e", "none", seed)})
    tables = root / "tables"
    io.write_table(training(), tables / "training.parquet", {"config_hash": "h"})
    ics = pd.DataFrame([{"experiment": "e", "dataset": "d", "model": "m", "norm": n, "seed": s,
                         "step": t, "layer_index": k, "grad_cosine": 0.9 - 0.01 * (s + t + k)}
                        for n in ("none", "batchnorm") for s in (0, 1, 2) for t in (0, 5)
                        for k in (1, 2, 3)])
    io.write_table(ics, tables / "ics.parquet", {"config_hash": "h"})
    assert cli.main(["claims", "--tables", str(tables / "training.parquet"),
                     str(tables / "ics.parquet"), "--out", str(tables / "claims.parquet")]) == 0
    return root


def test_aggregate(study, capsys):
    path = Path(layout.run_file(study, "e", "none", 1, "history.parquet"))
    grid = {"e": {"norms": ["none"], "seeds": [0, 1]}}
    refused_by_cli(["aggregate", "--results", str(study), "--name", "history.parquet",
                    "--grid", json.dumps(grid), "--out", str(study / "tables" / "h.parquet")],
                   path, capsys)


def test_a_replication_rounds_tables(study):
    path = Path(layout.run_file(study, "e", "none", 0, "history.parquet"))
    grid = {"e": {"norms": ["none"], "seeds": [0, 1]}}
    spec = {"training": {"file": "history.parquet", "level": "run", "experiments": ["e"]}}
    refused_by_call(lambda p: rounds.frames(str(study), grid, spec), path)


def test_claims(study, capsys):
    path = study / "tables" / "training.parquet"
    refused_by_cli(["claims", "--tables", str(path), "--out", str(study / "c.parquet")],
                   path, capsys)


def test_plot(study, capsys):
    """The issue's case: a flipped byte in the training table, then the training curves."""
    path = study / "tables" / "training.parquet"
    refused_by_cli(["plot", "training_curves", "--table", str(path), "--options",
                    json.dumps({"dpi": 30}), "--out", f"e={study / 'figures' / 'e.png'}"],
                   path, capsys)


def test_report(study, capsys):
    path = study / "tables" / "training.parquet"
    png = study / "figures" / "training_curves" / "e.png"
    assert cli.main(["plot", "training_curves", "--table", str(path), "--options",
                     json.dumps({"dpi": 30}), "--out", f"e={png}"]) == 0
    config = {"experiments": {"e": {"dataset": "d", "model": "m", "norms": ["none", "batchnorm"],
                                    "seeds": [0, 1]}}, "report": {"title": "t"}}
    refused_by_cli(["report", "--config", json.dumps(config), "--tables", str(path),
                    str(study / "tables" / "claims.parquet"), "--figures", str(png),
                    "--out", str(study / "report.html")], path, capsys)


@pytest.mark.parametrize("verb", ["compare", "ledger"])
def test_compare_and_ledger(study, capsys, verb):
    path = study / "tables" / "claims.parquet"
    refused_by_cli([verb, str(study), str(study)] if verb == "compare" else [verb, str(study)],
                   path, capsys)


def test_variance(study, capsys):
    path = study / "tables" / "ics.parquet"
    refused_by_cli(["variance", str(path)], path, capsys)


def test_verify(study, capsys):
    path = study / "tables" / "claims.parquet"
    refused_by_cli(["verify", str(study)], path, capsys, rc=1, where="out")


def test_results_load(study):
    path = study / "tables" / "training.parquet"
    refused_by_call(lambda p: results.load(study)["training"], path)
    refused_by_call(lambda p: results.load(study).provenance("training"), path)


def test_a_flipped_loss_is_never_drawn(study, capsys):
    """The exact issue: a value turned into 1e27 by one byte is refused, not plotted."""
    path = study / "tables" / "training.parquet"
    raw = bytearray(path.read_bytes())
    value = np.float64(1.0).tobytes()  # step 0's loss of seed 0
    at = raw.find(value)
    assert at >= 0
    raw[at + 7] ^= 0x04  # the exponent: 1.0 -> ~1e77
    path.write_bytes(bytes(raw))
    out = study / "figures" / "e.png"
    assert cli.main(["plot", "training_curves", "--table", str(path), "--out", f"e={out}"]) == 2
    assert f"{path} is corrupt" in capsys.readouterr().err and not out.exists()


# every reader of a table or a .pt file in the package goes through bnstudy.io
READS = re.compile(r"\bread_parquet\b|\bpq\.read_table\b|\bParquetFile\b|\btorch\.load\b|"
                   r"\bread_schema\b|\bpq\.read_metadata\b")


def test_no_table_is_read_outside_the_checked_reader():
    found = sorted(str(p.relative_to(SRC)) for p in SRC.rglob("*.py")
                   if READS.search(p.read_text()) and p.name != "io.py")
    assert found == []
