"""One declared type per column name (bnstudy.columns), applied where tables are written."""

import ast
import re
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from bnstudy import columns, io
from bnstudy.claims.values import metrics
from bnstudy.tables import aggregation

matplotlib.use("Agg")

IDS = {"experiment": "e", "dataset": "d", "model": "m", "norm": "batchnorm"}


def test_integer_columns_stored_as_float_come_out_int64():
    df = pd.DataFrame({"step": [0.0, 10.0], "seed": [1.0, 2.0], "n_params": np.array([3, 4.0]),
                       "batch_size": pd.array([16, 32], dtype="Int64")})
    out = columns.normalize("t", df)
    for c in df.columns:
        assert out[c].dtype == np.int64, c
    assert out["step"].tolist() == [0, 10]


def test_integer_columns_with_missing_values_are_nullable_int64():
    out = columns.normalize("t", pd.DataFrame({"step": [np.nan, 3.0], "n_seeds": [3, None]}))
    assert str(out["step"].dtype) == "Int64" and str(out["n_seeds"].dtype) == "Int64"
    assert out["step"].isna().tolist() == [True, False] and out["step"].iloc[1] == 3


@pytest.mark.parametrize("bad", [2.5, np.inf, "3", True])
def test_integer_column_refuses_what_is_no_whole_number(bad):
    df = pd.DataFrame({"step": pd.Series([1, bad], dtype=object)})
    with pytest.raises(ValueError, match=r"table 'tbl', column 'step' is declared integer "
                                         rf"\(bnstudy.columns\); value {re.escape(repr(bad))} "):
        columns.normalize("tbl", df)


def test_string_columns_hold_labels_and_integer_positions_as_decimal_text():
    df = pd.DataFrame({"norm": ["none", "batchnorm"], "point_set": [None, "train"],
                       "split": pd.Series([3.0, "test"], dtype=object)})
    out = columns.normalize("t", df)
    assert out["split"].tolist() == ["3", "test"]  # not "3.0"
    assert out["point_set"].isna().tolist() == [True, False]
    assert all(pd.api.types.is_string_dtype(out[c]) and out[c].dtype != object for c in df)
    with pytest.raises(ValueError, match=r"column 'norm' is declared a string.*1\.5"):
        columns.normalize("t", pd.DataFrame({"norm": [1.5]}))


def test_integer_layer_becomes_its_label_and_layer_index():
    df = pd.DataFrame({**{k: [v] * 3 for k, v in IDS.items()}, "layer": [1, 2, 3],
                       "layer_name": ["block1", "block2", "head"], "grad_cosine": [1.0, .9, .8]})
    out = columns.normalize("ics", df)
    assert out["layer"].tolist() == ["1", "2", "3"]
    assert out["layer_index"].dtype == np.int64 and out["layer_index"].tolist() == [1, 2, 3]
    assert list(out.columns).index("layer_index") == list(out.columns).index("layer") + 1
    assert df["layer"].dtype == np.int64  # the given frame is untouched
    # a table that has layer_index keeps it; its layer labels may be words and positions
    pd_like = pd.DataFrame({"layer": ["all", "1"], "layer_index": [0.0, 1.0]})
    out2 = columns.normalize("partition_density", pd_like)
    assert out2["layer"].tolist() == ["all", "1"] and out2["layer_index"].dtype == np.int64


def test_float_and_boolean_columns():
    df = pd.DataFrame({"loss": [1, 2], "diverged": [False, True],
                       "applicable": pd.Series([True, None], dtype=object)})
    out = columns.normalize("t", df)
    assert out["loss"].dtype == np.float64 and out["diverged"].dtype == np.bool_
    assert str(out["applicable"].dtype) == "boolean"
    assert out["applicable"].isna().tolist() == [False, True]
    with pytest.raises(ValueError, match="column 'diverged' is declared boolean"):
        columns.normalize("t", pd.DataFrame({"diverged": [0, 1]}))
    with pytest.raises(ValueError, match="column 'loss' is declared float"):
        columns.normalize("t", pd.DataFrame({"loss": ["1.0"]}))


def test_undeclared_columns_keep_their_type_but_may_not_mix_strings():
    df = pd.DataFrame({"grad_cosine": [1.0, 0.5], "whatever": [1, 2]})
    out = columns.normalize("t", df)
    assert out.dtypes.equals(df.dtypes)
    with pytest.raises(ValueError, match=r"column 'mixed' mixes strings.*int.*str"):
        columns.normalize("t", pd.DataFrame({"mixed": pd.Series(["a", 1], dtype=object)}))


def test_normalize_is_idempotent_and_every_declared_type_is_known():
    df = pd.DataFrame({"layer": [1, 2], "step": [np.nan, 1.0], "norm": ["a", "b"]})
    once = columns.normalize("ics", df)  # the one table that wrote integer layers
    twice = columns.normalize("ics", once)
    pd.testing.assert_frame_equal(once, twice)
    assert set(columns.TYPES.values()) == {columns.STRING, columns.INTEGER, columns.FLOAT,
                                           columns.BOOLEAN}
    assert columns.declared("layer") == columns.STRING and columns.declared("nope") is None
    with pytest.raises(TypeError, match="expected a pandas DataFrame"):
        columns.normalize("t", [{"step": 1}])


def _measure(monkeypatch, name: str, cols: dict):
    """Register a measure whose one table ``name`` has the columns ``cols`` (its COLUMNS)."""
    from bnstudy import measures

    m = measures.Measure(name, lambda *a: {}, measures.REGISTRY["ics"].options, (name,), None,
                         measures.REGISTRY["ics"].module, {name: cols}, {name: "a row"})
    monkeypatch.setitem(measures.REGISTRY, name, m)
    columns.types.cache_clear()


@pytest.fixture
def fresh_types():
    columns.types.cache_clear()
    yield
    columns.types.cache_clear()


def test_a_measures_columns_declare_their_types(fresh_types, monkeypatch):
    """Issue 33: a new measure's flag column is declared where the measure documents it, and
    bnstudy.columns derives its types from those declarations (no hand-kept lists)."""
    _measure(monkeypatch, "sparsity", {"step": "the checkpoint's step",
                                       "all_dead": ("boolean", "whether every unit is zero"),
                                       "n_dead": ("integer", "units never active (count)"),
                                       "dead_fraction": "fraction of units never active"})
    assert columns.declared("all_dead") == columns.BOOLEAN
    assert columns.declared("n_dead") == columns.INTEGER
    assert columns.declared("step") == columns.INTEGER  # declared by the other tables
    assert columns.declared("dead_fraction") is None  # undeclared: the type the code writes
    out = columns.normalize("sparsity", pd.DataFrame({"all_dead": pd.Series([True, False],
                                                                            dtype=object),
                                                      "n_dead": [1.0, 2.0]}))
    assert out["all_dead"].dtype == np.bool_ and out["n_dead"].dtype == np.int64
    tree = ast.parse(Path(columns.__file__).read_text())
    lists = [n for n in ast.walk(tree) if isinstance(n, (ast.Tuple, ast.List, ast.Set))
             and sum(isinstance(e, ast.Constant) and isinstance(e.value, str)
                     and e.value in columns.TYPES for e in n.elts) >= 3]
    assert not lists, "bnstudy.columns keeps a hand list of column names"


def test_two_kinds_for_one_name_or_a_bad_entry_are_refused(fresh_types, monkeypatch):
    _measure(monkeypatch, "sparsity", {"step": ("float", "the step")})
    with pytest.raises(TypeError, match=r"column 'step' is declared float in table 'sparsity' "
                                        r"but integer in table 'training'"):
        columns.types()
    _measure(monkeypatch, "sparsity", {"dead": ("bool", "whether")})
    with pytest.raises(TypeError, match=r"table 'sparsity', column 'dead': an entry of COLUMNS "
                                        r"is its meaning \(a string\) or \(kind, meaning\)"):
        columns.types()


def test_a_numeric_layer_is_refused_with_what_to_write():
    """Issue 33: an integer ``layer`` used to become a label and an inserted ``layer_index``,
    which the column test then blamed the author for writing."""
    df = pd.DataFrame({"step": [0, 0], "layer": [1, 2], "value": [0.5, 0.7]})
    with pytest.raises(ValueError, match=r"table 'sparsity', column 'layer' holds numbers.*"
                                         r"write \"layer\": str\(i\).*\"layer_index\": i"):
        columns.normalize("sparsity", df)
    with pytest.raises(ValueError, match="holds numbers"):  # beside a layer_index as well
        columns.normalize("ics", df.assign(layer_index=[1, 2]))
    fine = columns.normalize("sparsity", df.assign(layer=["1", "2"], layer_index=[1, 2]))
    assert fine["layer"].tolist() == ["1", "2"]


def _write_run(path, rows):
    io.write_table(pd.DataFrame(rows), path, io.provenance("h", "cpu"))


def test_aggregate_writes_every_table_with_the_declared_types(tmp_path):
    """The study's writing path (aggregation.aggregate): per-run files with a float step and an
    integer layer come out as int64 step, string layer and int64 layer_index, in the file."""
    runs = []
    for seed in (0, 1):
        p = tmp_path / f"run{seed}" / "ics.parquet"  # the table's name: ics wrote integer layers
        p.parent.mkdir()
        _write_run(p, [{**IDS, "seed": seed, "step": float(s), "layer": layer,
                        "layer_name": f"block{layer}", "shift_from_step": np.nan if s == 0 else 0}
                       for s in (0, 5) for layer in (1, 2)])
        runs.append(p)
    out = tmp_path / "ics.parquet"
    df = aggregation.aggregate(runs, out)
    schema = pq.read_schema(out)
    assert str(schema.field("step").type) == "int64" and str(schema.field("seed").type) == "int64"
    assert str(schema.field("layer").type) in ("string", "large_string")
    assert str(schema.field("layer_index").type) == "int64"
    assert str(schema.field("shift_from_step").type) == "int64"
    back = io.read_table(out)
    assert back["step"].dtype == np.int64 and back["layer_index"].dtype == np.int64
    assert str(back["shift_from_step"].dtype) == "Int64"
    assert sorted(back["layer"].unique()) == ["1", "2"] and df["layer"].tolist() == back[
        "layer"].tolist()


def _ics_table(layer_one_cosine=0.0):
    rows = [{**IDS, "norm": norm, "seed": seed, "step": step, "layer": layer,
             "layer_name": f"block{layer}",
             "grad_cosine": layer_one_cosine if layer == 1 else 0.9,
             "grad_l2_diff": 0.1 * layer, "grad_rel_diff": 0.2, "step_mean_shift": 0.1,
             "mean_shift": 0.2, "step_var_shift": 0.1, "var_shift": 0.2,
             "update_replay_error": np.nan}
            for norm in ("none", "batchnorm") for seed in (0, 1) for step in (0, 10)
            for layer in (1, 2, 3)]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("written", [False, True], ids=["as_measured", "as_written"])
def test_ics_claim_metric_leaves_out_layer_one_in_either_form(written):
    """Layer 1 has G' = G by definition; the metric must leave it out whether the table has the
    old integer layer or the written string layer (which != 1 would not exclude)."""
    df = _ics_table(layer_one_cosine=-5.0)
    df = columns.normalize("ics", df) if written else df
    got = metrics.ics(df)
    assert np.allclose(got.to_numpy(), np.log(0.1 + metrics.ICS_FLOOR))


def test_ics_figures_and_findings_read_the_written_table():
    from bnstudy.plots import ics as plots_ics

    df = columns.normalize("ics", _ics_table())
    assert plots_ics.representative_layers(df) == [2, 3]
    fig = plots_ics.draw_depth([df], {})
    xs = {float(x) for ax in fig.axes for line in ax.get_lines() for x in line.get_xdata()}
    assert xs == {2.0, 3.0}  # layer 1 left out, layers placed by their position
    text = plots_ics.findings({"ics": df})
    assert "Means over layers 2..k" in text
    matplotlib.pyplot.close(fig)
