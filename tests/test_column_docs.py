"""The column dictionary (bnstudy.column_docs) against the tables the code writes, and the
generated block of results/README.md.

The written tables come from the package's own writing paths on a tiny study: the ``train`` and
``measure`` verbs on one BatchNorm run on 2-D classification data (every measure's branches: BN
layers, the decision-boundary rows, the partition maps) and one single-unit teacher-student run,
the dannemann analysis at small options, the claims ledger and a replication round over a small
smoothness table. Each table's columns must be exactly those documented for it, with the
documented types, so the dictionary can neither miss a column nor keep one the code dropped.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from specs import make_spec, measure_cli

from bnstudy import analyses, column_docs, columns, data, io, measures
from bnstudy.claims import ledger
from bnstudy.cli import main as cli
from bnstudy.replication import rounds
from bnstudy.train import checkpoints

README = Path(__file__).resolve().parents[1] / "results" / "README.md"
# small options: every column, little work
OPTIONS = {
    "ics": {"probe_size": 16},
    "smoothness": {"n_probes": 2, "hessian": True, "hessian_iters": 3},
    "partition_density": {"radii": [0.1], "n_points": 8, "map_resolution": 4},
    "bn_jitter": {"batch_sizes": [8], "n_batches": 4, "realizations": 2, "grid_resolution": 8,
                  "map_resolution": 4, "map_realizations": 1},
    "teacher_student": {"erm": True},
}
TRAIN = {"lr": 0.05, "batch_size": 16, "steps": 2, "eval_every": 1, "checkpoints": [0, 1, 2]}


def _train(tmp: Path, ds, spec: dict):
    """The train verb's run file and history table of ``spec`` on ``ds``."""
    data_file, run_dir = tmp / f"{spec['dataset']}.npz", tmp / spec["dataset"]
    data.save(ds, data_file)
    argv = ["train", "--data", str(data_file), "--spec", json.dumps(spec), "--device", "cpu",
            "--out-checkpoints", str(run_dir / "checkpoints.pt"),
            "--out-history", str(run_dir / "history.parquet")]
    assert cli.main(argv) == 0
    return checkpoints.load(run_dir / "checkpoints.pt"), data_file, run_dir / "history.parquet"


def _smoothness(seeds: int = 4) -> pd.DataFrame:
    """A smoothness table on which BN measures smoother: the ledger's measured rows."""
    return pd.DataFrame([{"experiment": "e", "dataset": "d", "model": "m", "norm": norm,
                          "seed": seed, "step": step, "beta_eff": beta + 0.1 * seed,
                          "grad_pred_max": beta, "loss_min": 1.0, "loss_max": 1.0 + beta,
                          "loss": 1.0, "grad_norm": 1.0}
                         for norm, beta in (("batchnorm", 1.0), ("none", 10.0))
                         for seed in range(seeds) for step in (0, 10)])


def _replication(tmp: Path, frames: dict, monkeypatch) -> pd.DataFrame:
    """The replication table of one round over ``frames``, as the rounds' verbs write it."""
    monkeypatch.setattr(rounds, "frames", lambda *_a: frames)
    grid = {"e": {"norms": ["batchnorm", "none"], "seeds": [0, 1, 2, 3]}}
    record = rounds.decide(str(tmp), 0, grid, {}, {"e": {"rounds": [4, 8]}}, 0.95)
    rounds.write(record, str(tmp / "round0.json"))
    return rounds.table([str(tmp / "round0.json")], str(tmp / "replication.parquet"))


@pytest.fixture(scope="module")
def written(tmp_path_factory, star) -> dict[str, pd.DataFrame]:
    """``{table: the table as written}`` for every table of :func:`column_docs.table_names`."""
    tmp = tmp_path_factory.mktemp("columns")
    bn = make_spec("batchnorm", model={"arch": "mlp", "depth": 2, "width": 8}, training=TRAIN)
    ts_ds = data.make("teacher_student", {"N": 6, "alpha": 4.0, "S": 0.25, "n_test": 64})
    ts = make_spec("batchnorm", dataset="ts", training=TRAIN,
                   model={"arch": "mlp", "depth": 1, "width": 1, "slope": 1.0})
    runs = {"star2d": _train(tmp, star, bn), "ts": _train(tmp, ts_ds, ts)}
    out = {"training": io.read_table(runs["star2d"][2])}
    for name, m in measures.REGISTRY.items():
        run, data_file, _ = runs["star2d" if m.applies_to("star2d") else "ts"]
        code, files = measure_cli(tmp / name, name, [run], data_file, OPTIONS.get(name, {}))
        assert code == 0, name
        out.update({t: io.read_table(p) for t, p in files.items()})
    dannemann = analyses.get("dannemann")
    rows = dannemann.run({"n_inits": 1, "steps": 3, "steps_plain": 3, "n_angles": 64,
                          "record_every": 1})
    io.write_table(pd.DataFrame(rows), tmp / "dannemann.parquet", io.provenance("h", "cpu"))
    out["dannemann"] = io.read_table(tmp / "dannemann.parquet")
    frames = {"smoothness": _smoothness(), "dannemann": out["dannemann"]}
    io.write_table(ledger.evaluate(frames), tmp / "claims.parquet", io.provenance("h", "cpu"))
    out["claims"] = io.read_table(tmp / "claims.parquet")
    with pytest.MonkeyPatch.context() as mp:
        _replication(tmp, frames, mp)
    out["replication"] = io.read_table(tmp / "replication.parquet")
    return out


def test_the_dictionary_documents_exactly_the_tables_the_code_writes():
    registered = {t for m in measures.REGISTRY.values() for t in m.tables}
    assert set(column_docs.measure_tables()) == registered
    assert sorted(column_docs.documented()) == sorted(column_docs.table_names())
    with pytest.raises(ValueError, match="table 'nope' has no column meanings.*study_columns"):
        column_docs.meanings("nope")


def test_every_declared_column_and_every_documented_one_has_a_meaning():
    described = {c: m for t in column_docs.table_names()
                 for c, m in column_docs.meanings(t).items()}
    described.update(column_docs.OTHER)
    missing = sorted(c for c in columns.TYPES if not described.get(c, "").strip())
    assert not missing, f"declared in bnstudy.columns without a meaning: {missing}"
    empty = sorted(c for c, m in described.items() if not isinstance(m, str) or not m.strip())
    assert not empty
    assert all(columns.declared(c) for c in column_docs.OTHER)


@pytest.mark.parametrize("table", column_docs.table_names())
def test_every_written_column_is_documented_for_its_table(written, table):
    got, doc = set(written[table].columns), set(column_docs.meanings(table))
    assert not sorted(got - doc), f"{table}: written but not documented (bnstudy.column_docs)"
    assert not sorted(doc - got), f"{table}: documented but not written"


def _is(kind: str, s: pd.Series) -> bool:
    v = s.dropna()
    if kind == columns.STRING:
        return all(isinstance(x, str) for x in v)
    if kind == columns.INTEGER:
        return pd.api.types.is_integer_dtype(s) and not pd.api.types.is_bool_dtype(s)
    if kind == columns.BOOLEAN:
        return pd.api.types.is_bool_dtype(s) or all(isinstance(x, (bool, np.bool_)) for x in v)
    return s.dtype == np.float64


@pytest.mark.parametrize("table", column_docs.table_names())
def test_written_types_are_the_documented_ones(written, table):
    df = written[table]
    wrong = {c: str(df[c].dtype) for c in df if c in column_docs.meanings(table)
             and not _is(column_docs.kind(c)[0], df[c])}
    assert not wrong, f"{table}: types differ from bnstudy.column_docs.kind: {wrong}"


def test_undeclared_columns_are_marked_and_declared_ones_not():
    assert column_docs.kind("beta_eff") == (columns.FLOAT, False)
    assert column_docs.kind("round") == (columns.INTEGER, False)
    assert column_docs.kind("layer") == (columns.STRING, True)
    text = column_docs.markdown()
    assert "| `beta_eff` | float\\* |" in text and "| `layer` | string |" in text
    assert "### `smoothness`" in text and "\\|\\|g\\|\\|_2" in text  # pipes cannot end a cell
    for line in text.splitlines():
        if line.startswith("| `"):
            assert line.replace("\\|", "").count("|") == 4, line


def test_the_readme_block_is_what_the_generator_writes():
    text = README.read_text(encoding="utf-8")
    assert column_docs.rewrite(text, str(README)) == text, (
        "results/README.md's column block is stale: run "
        "`python -m bnstudy columns --readme results/README.md`")


def test_rewrite_replaces_the_block_only_and_needs_exactly_one(tmp_path):
    doc = tmp_path / "R.md"
    doc.write_text(f"# head\n\n{column_docs.BEGIN}\nold\n{column_docs.END}\n\ntail\n")
    assert column_docs.rewrite_file(doc) is True
    text = doc.read_text()
    assert text == (f"# head\n\n{column_docs.BEGIN}\n{column_docs.markdown()}"
                    f"{column_docs.END}\n\ntail\n")
    assert column_docs.rewrite_file(doc) is False and doc.read_text() == text
    for bad in ("no block\n", text + text):
        with pytest.raises(ValueError, match="exactly one column block"):
            column_docs.rewrite(bad, "R.md")


def test_columns_verb_prints_or_rewrites(tmp_path, capsys):
    assert cli.main(["columns"]) == 0
    assert capsys.readouterr().out == column_docs.markdown()
    doc = tmp_path / "R.md"
    doc.write_text(f"{column_docs.BEGIN}\n{column_docs.END}\n")
    assert cli.main(["columns", "--readme", str(doc)]) == 0
    assert column_docs.markdown() in doc.read_text() and capsys.readouterr().out == ""
    assert cli.main(["columns", "--readme", str(tmp_path / "missing.md")]) == 2
