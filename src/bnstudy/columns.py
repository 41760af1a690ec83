"""One declared type per table column name, the same in every table the study writes.

A column name means one thing everywhere, so it has one type everywhere (:data:`TYPES`,
:func:`types`). The types are declared where the columns are: each table's ``COLUMNS``
dictionary (a measure's in its package, :mod:`bnstudy.measures`; the runs' identifying columns
and the study tables' in :mod:`bnstudy.column_docs.study_columns`) gives a column as its meaning,
``"..."``, or as ``(kind, "...")`` with kind ``"string"``, ``"integer"``, ``"float"`` or
``"boolean"``. A name declared by one table has that type in every table (a plain meaning
elsewhere takes it); a name declared with two kinds is an error (:func:`types`). Nothing here
lists column names. The conventions:

- identifiers and labels are strings (``str``): ``experiment``, ``norm``, ``split``, ... and
  ``layer``, the layer's *label*: the decimal position (``"3"``) or a word for rows that are no
  single layer (``"all"`` in partition_density, ``"boundary"`` and ``"n/a"`` in bn_jitter);
- ``layer_index`` is the layer's integer position (1 = first; 0 for rows that are no single
  layer, -1 for partition_density_maps' data points), ``layer_name`` the module's name (ics);
  readers that order or compare layers numerically use ``layer_index``; a numeric ``layer`` is
  refused, with what to write instead (only the ics table, which wrote its integer position as
  ``layer`` before the label existed, is upgraded: :data:`LEGACY_INTEGER_LAYER`);
- steps, seeds, counts, sizes and indices are integers: ``int64``, or pandas' nullable ``Int64``
  when the column has missing values (rows the quantity does not apply to); in Parquet both
  are ``int64`` (with nulls);
- flags are ``bool`` (nullable ``boolean`` when missing values occur);
- measured quantities shared by several tables are ``float64``.

:func:`normalize` casts a table's declared columns to their type; every table goes through it
where it is written (:func:`bnstudy.tables.aggregation.aggregate`, :func:`bnstudy.io.write_table`),
and readers of tables written before may pass them through it too: it is idempotent. Columns not
declared keep their type, but an object column mixing strings with other values is refused
(Parquet would store it as neither). Importing this module is cheap (numpy, pandas): the
declarations are read when a type is first asked for.

What each column means, table by table and with its units, is :mod:`bnstudy.column_docs` (the
column dictionary of ``results/README.md``), rendered from the same declarations.
"""

from __future__ import annotations

import functools
import numbers

import numpy as np
import pandas as pd

STRING, INTEGER, FLOAT, BOOLEAN = "string", "integer", "float", "boolean"
KINDS = (STRING, INTEGER, FLOAT, BOOLEAN)
# a table that wrote its layer's position as an integer ``layer`` before the label existed (read
# back through normalize, they are upgraded; any other table's integer ``layer`` is an error)
LEGACY_INTEGER_LAYER = ("ics",)


def entry(table: str, column: str, value) -> tuple[str | None, str]:
    """``(kind, meaning)`` of one column entry of a ``COLUMNS`` dictionary: ``"meaning"`` (no
    declared kind: the type declared for the name by another table, else the type the code
    writes) or ``(kind, "meaning")`` with ``kind`` one of :data:`KINDS`."""
    if isinstance(value, str):
        return None, value
    if (isinstance(value, tuple) and len(value) == 2 and value[0] in KINDS
            and isinstance(value[1], str)):
        return value[0], value[1]
    raise TypeError(f"table {table!r}, column {column!r}: an entry of COLUMNS is its meaning "
                    f"(a string) or (kind, meaning) with kind one of {', '.join(KINDS)}; got "
                    f"{value!r}")


def declarations():
    """``(table, column, entry)`` of every column entry the package declares: the runs'
    identifying columns (table ``runs``), the study tables' and the names no written table
    carries (table ``other``) in :mod:`bnstudy.column_docs.study_columns`, and each measure's
    ``COLUMNS`` (:mod:`bnstudy.measures`)."""
    from bnstudy import measures
    from bnstudy.column_docs import study_columns

    groups = [("runs", study_columns.RUN_IDS), *study_columns.COLUMNS.items(),
              *((t, c) for m in measures.REGISTRY.values() for t, c in m.columns.items()),
              ("other", study_columns.OTHER)]
    for table, cols in groups:
        for column, value in cols.items():
            yield table, column, value


@functools.cache
def types() -> dict[str, str]:
    """``{column: kind}`` of every name some table declares a kind for (:func:`declarations`);
    a name declared with two kinds is an error naming both tables."""
    out: dict[str, tuple[str, str]] = {}
    for table, column, value in declarations():
        kind = entry(table, column, value)[0]
        if kind is None:
            continue
        first = out.setdefault(column, (kind, table))
        if first[0] != kind:
            raise TypeError(f"column {column!r} is declared {kind} in table {table!r} but "
                            f"{first[0]} in table {first[1]!r}: a column name has one type in "
                            "every table (rename one, or declare the same kind)")
    return {c: k for c, (k, _) in out.items()}


def __getattr__(name: str):
    if name == "TYPES":  # derived when first asked for: the declarations import the registry
        return types()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def declared(column: str) -> str | None:
    """The declared type of ``column`` (:data:`STRING`, :data:`INTEGER`, :data:`FLOAT`,
    :data:`BOOLEAN`), or None when the name is not declared."""
    return types().get(column)


def normalize(table: str, df: pd.DataFrame) -> pd.DataFrame:
    """A copy of table ``table``'s ``df`` with every declared column cast to its declared type.

    A numeric ``layer`` is refused with what to write (``"layer": str(i)`` and ``"layer_index":
    i``), except in the tables of :data:`LEGACY_INTEGER_LAYER` without ``layer_index``, where it
    becomes its decimal label and the position goes to ``layer_index``. A value that does not
    fit its column's type (a step of 2.5, a label of 1.5, a string among integers) raises a
    ValueError naming the table, the column and the value.
    """
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"table {table!r}: expected a pandas DataFrame, got {type(df).__name__}")
    out = df.copy()
    if "layer" in out and _numeric(out["layer"]):
        if table not in LEGACY_INTEGER_LAYER or "layer_index" in out:
            raise ValueError(
                f"table {table!r}, column 'layer' holds numbers ({out['layer'].dtype}); "
                "'layer' is the layer's label, a string: write \"layer\": str(i) (or a word "
                "such as \"all\") and the integer position in \"layer_index\": i "
                "(bnstudy.columns)")
        out.insert(out.columns.get_loc("layer") + 1, "layer_index", out["layer"])
    for col in out.columns:
        kind = types().get(col)
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
                         "column holds one type (declare its kind in the table's COLUMNS: "
                         "(kind, meaning), bnstudy.columns)")
