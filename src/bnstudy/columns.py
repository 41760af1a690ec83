"""One declared type per table column name, the same in every table the study writes.

A column name means one thing everywhere, so it has one type everywhere (:data:`TYPES`):

- identifiers and labels are strings (``str``): ``experiment``, ``norm``, ``split``, ... and
  ``layer``, the layer's *label*: the decimal position (``"3"``) or a word for rows that are no
  single layer (``"all"`` in partition_density, ``"boundary"`` and ``"n/a"`` in bn_jitter);
- ``layer_index`` is the layer's integer position (1 = first; 0 for rows that are no single
  layer, -1 for partition_density_maps' data points), ``layer_name`` the module's name (ics);
  readers that order or compare layers numerically use ``layer_index``;
- steps, seeds, counts, sizes and indices are integers: ``int64``, or pandas' nullable ``Int64``
  when the column has missing values (rows the quantity does not apply to); in Parquet both
  are ``int64`` (with nulls);
- flags are ``bool`` (nullable ``boolean`` when missing values occur);
- measured quantities shared by several tables are ``float64``.

:func:`normalize` casts a table's declared columns to their type; every table goes through it
where it is written (:func:`bnstudy.tables.aggregation.aggregate`), and readers of tables written
before
(``layer`` was the integer position in ics) may pass them through it too: it is idempotent.
Columns not declared keep their type, but an object column mixing strings with other values is
refused (Parquet would store it as neither).

What each column means, table by table and with its units, is :mod:`bnstudy.column_docs` (the
column dictionary of ``results/README.md``): a name declared here needs a meaning there, which
``tests/test_column_docs.py`` checks.
"""

from __future__ import annotations

import numbers

import numpy as np
import pandas as pd

STRING, INTEGER, FLOAT, BOOLEAN = "string", "integer", "float", "boolean"

_STRING = (
    "experiment", "dataset", "model", "norm", "split", "layer", "layer_name", "point_set",
    "method", "group", "kind", "record", "bn_statistics", "sampling", "convention",
    "activation", "objective", "init_label", "quantity", "verdict", "claim_id", "claim",
    "paper", "note", "rule", "role", "baseline", "curve", "arch", "adjusted_verdict",
    "protocol", "deviations", "training_schedule",
)
_INTEGER = (
    "step", "seed", "data_seed", "n_seeds", "n_runs", "layer_index", "n_layers", "batch_size",
    "batch_size_effective", "n_batches", "n_directions", "n_params", "n_points", "n_probes",
    "n_inits", "n_angles", "nonfinite_probes", "neurons", "probe_size", "realization",
    "realizations", "samples_per_stat", "units", "population", "no_boundary",
    "hessian_iterations", "init", "sample", "n_minima", "label", "shift_from_step", "N", "P",
    "train_batch_size", "unit", "resolution",
)
_BOOLEAN = (
    "diverged", "applicable", "hessian_converged", "holds_closest", "holds_reached",
    "hypothesis", "lr_batch_scaled", "input_standardized",
)
# shared by several tables (a count in partition_density_maps' ``boundaries`` is a mean in
# partition_density's, so it is a float in both)
_FLOAT = (
    "loss", "accuracy", "lr", "wall_time", "radius", "boundaries", "effective_radius", "value",
    "x0", "x1", "grad_norm", "epochs", "dropout", "gamma_sq",
)

TYPES: dict[str, str] = {
    **dict.fromkeys(_STRING, STRING), **dict.fromkeys(_INTEGER, INTEGER),
    **dict.fromkeys(_BOOLEAN, BOOLEAN), **dict.fromkeys(_FLOAT, FLOAT),
}


def declared(column: str) -> str | None:
    """The declared type of ``column`` (:data:`STRING`, :data:`INTEGER`, :data:`FLOAT`,
    :data:`BOOLEAN`), or None when the name is not declared."""
    return TYPES.get(column)


def normalize(table: str, df: pd.DataFrame) -> pd.DataFrame:
    """A copy of table ``table``'s ``df`` with every declared column cast to its declared type.

    An integer ``layer`` (a layer's position, as ics wrote it) becomes its decimal label, and
    the position goes to ``layer_index`` when the table has none. A value that does not fit its
    column's type (a step of 2.5, a label of 1.5, a string among integers) raises a ValueError
    naming the table, the column and the value.
    """
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"table {table!r}: expected a pandas DataFrame, got {type(df).__name__}")
    out = df.copy()
    if "layer" in out and "layer_index" not in out and _numeric(out["layer"]):
        out.insert(out.columns.get_loc("layer") + 1, "layer_index", out["layer"])
    for col in out.columns:
        kind = TYPES.get(col)
        where = f"table {table!r}, column {col!r}"
        if kind == STRING:
            out[col] = _as_string(out[col], where)
        elif kind == INTEGER:
            out[col] = _as_integer(out[col], where)
        elif kind == FLOAT:
            out[col] = _as_float(out[col], where)
        elif kind == BOOLEAN:
            out[col] = _as_boolean(out[col], where)
        elif out[col].dtype == object:
            _check_object(out[col], where)
    return out


def _numeric(s: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)


def _bad(where: str, value, kind: str):
    value = value.item() if isinstance(value, np.generic) else value
    return ValueError(f"{where} is declared {kind} (bnstudy.columns); value {value!r} "
                      f"({type(value).__name__}) is not one")


def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_))


def _is_real(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))


def _first(s: pd.Series):
    present = s[s.notna()]
    return present.iloc[0] if len(present) else s.dtype


def _as_string(s: pd.Series, where: str) -> pd.Series:
    if pd.api.types.is_string_dtype(s) and s.dtype != object:
        return s.astype("str")

    def one(v):
        if isinstance(v, str):
            return v
        if _is_int(v):
            return str(int(v))
        if _is_real(v) and float(v).is_integer():
            return str(int(v))  # a position stored as float: "3", not "3.0"
        raise _bad(where, v, "a string (or an integer position)")

    present = s.notna()
    values = [one(v) if ok else None for v, ok in zip(s.tolist(), present.tolist(), strict=True)]
    return pd.Series(values, index=s.index, dtype="str", name=s.name)


def _as_integer(s: pd.Series, where: str) -> pd.Series:
    if pd.api.types.is_bool_dtype(s) or (pd.api.types.is_string_dtype(s) and s.dtype != object):
        raise _bad(where, _first(s), "integer")
    if pd.api.types.is_integer_dtype(s):
        return s.astype("int64") if s.notna().all() else s.astype("Int64")
    if s.dtype == object:
        for v in s[s.notna()]:
            if not _is_real(v):
                raise _bad(where, v, "integer")
    v = s.astype("float64")
    present = v.notna()
    fine = np.isfinite(v[present]) & (v[present] == np.round(v[present]))
    if not fine.all():
        raise _bad(where, v[present][~fine].iloc[0], "integer")
    return v.astype("int64") if present.all() else v.astype("Int64")


def _as_float(s: pd.Series, where: str) -> pd.Series:
    if pd.api.types.is_bool_dtype(s):
        raise _bad(where, _first(s), "float")
    if pd.api.types.is_numeric_dtype(s):
        return s.astype("float64")
    for v in s[s.notna()]:
        if not _is_real(v):
            raise _bad(where, v, "float")
    return s.astype("float64")


def _as_boolean(s: pd.Series, where: str) -> pd.Series:
    if pd.api.types.is_bool_dtype(s):
        return s.astype("bool") if s.notna().all() else s.astype("boolean")
    for v in s[s.notna()]:
        if not isinstance(v, (bool, np.bool_)):
            raise _bad(where, v, "boolean")
    return s.astype("bool") if s.notna().all() else s.astype("boolean")


def _check_object(s: pd.Series, where: str) -> None:
    kinds = {type(v).__name__ for v in s[s.notna()]}
    if "str" in kinds and len(kinds) > 1:
        raise ValueError(f"{where} mixes strings with other values ({sorted(kinds)}); a "
                         "column holds one type (declare it in bnstudy.columns.TYPES)")
