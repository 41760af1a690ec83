"""The values a table's columns can hold, checked on every read (:func:`bnstudy.io.read_table`).

A table's checksum guards its bytes against corruption, not against values no run can produce
(a history rewritten with ``loss = inf`` and ``diverged = False``, an accuracy of ``-inf``). So
each table declares its columns' value ranges next to their types, as ``RANGES = {table:
{column: Range(...)}}``: the study tables' in :mod:`bnstudy.column_docs.study_columns` (where
table ``"all"`` holds the names that mean one thing in every table: a seed, a step), and a
measure's in its package's ``columns`` module (beside its ``COLUMNS``); besides, a column
whose meaning says it is a count (``(count)``) is non-negative and one whose meaning says ``0 to
1`` lies in [0, 1] (:func:`_from_meanings`). :func:`check` reads them, and the one reader
raises a violation as :class:`bnstudy.io.ImpossibleValue`: one line naming the file, the column,
the row's keys and the value.

A :class:`Range` allows missing values (NaN, null: "does not apply", such as a regression's
accuracy) unless ``finite`` is set, which refuses NaN and both infinities; ``low`` and ``high``
bound the value (an infinity beyond them is refused too). ``unless`` names a boolean column whose
true rows are exempt from ``finite`` (a diverged run's non-finite loss), and ``marks`` makes a
boolean column the flag of a run's non-finite values: a run (the rows sharing its identifying
columns) has it true exactly when column ``marks`` holds a non-finite value in it.
"""

from __future__ import annotations

import functools
import importlib
from pathlib import Path

from bnstudy import lazy
from bnstudy.tables.value_range import FINITE, FRACTION, NONNEGATIVE, Range  # noqa: F401

# imported on first use: the declarations (read by the column modules) need neither
np = lazy.module("numpy")
pd = lazy.module("pandas")

# a table's per-run file named otherwise than the table (bnstudy.planning.plan.table_file)
FILE_TABLES = {"history": "training"}
RUN_KEYS = ("experiment", "dataset", "model", "norm", "seed")
ROW_KEYS = (*RUN_KEYS, "step", "split", "checkpoint", "layer", "claim_id", "record")


class Violation(ValueError):
    """A value outside its column's declared range (the reader, :func:`bnstudy.io.read_table`,
    raises it as :class:`bnstudy.io.ImpossibleValue`, a corrupt file)."""




@functools.cache
def declared() -> dict[str, dict[str, Range]]:
    """``{table: {column: Range}}`` of every declaration (table ``"all"``: every table)."""
    from bnstudy import measures
    from bnstudy.column_docs import study_columns

    out: dict[str, dict[str, Range]] = {}
    sources = [getattr(study_columns, "RANGES", {})]
    for m in measures.REGISTRY.values():
        try:
            mod = importlib.import_module(f"{m.module.__name__}.columns")
        except ModuleNotFoundError:
            continue
        sources.append(getattr(mod, "RANGES", {}))
    for table, column, rng in _from_meanings():
        out.setdefault(table, {})[column] = rng
    for source in sources:  # declared ranges win over the ones read off the meanings
        for table, cols in source.items():
            for column, rng in cols.items():
                if not isinstance(rng, Range):
                    raise TypeError(f"table {table!r}, column {column!r}: a RANGES entry is a "
                                    f"bnstudy.tables.ranges.Range, got {rng!r}")
                out.setdefault(table, {})[column] = rng
    return out


def _from_meanings():
    """``(table, column, Range)`` read off the column dictionary's words: a count (``(count``)
    is non-negative, a value ``0 to 1`` lies in [0, 1] (missing values allowed)."""
    from bnstudy import columns

    for table, column, value in columns.declarations():
        meaning = columns.entry(table, column, value)[1]
        if "0 to 1" in meaning:
            yield table, column, FRACTION
        elif "(count" in meaning:
            yield table, column, NONNEGATIVE


def table_of(path: str | Path) -> str:
    """The table a file holds, by its name (``history.parquet``: ``training``)."""
    stem = Path(path).stem
    return FILE_TABLES.get(stem, stem)


def ranges(table: str) -> dict[str, Range]:
    """The ranges that apply to ``table``'s columns."""
    d = declared()
    return {**d.get("all", {}), **d.get(table, {})}


def _values(s):
    if pd.api.types.is_bool_dtype(s):
        return s.to_numpy(dtype="float64", na_value=np.nan)
    if not pd.api.types.is_numeric_dtype(s):
        return None
    return s.to_numpy(dtype="float64", na_value=np.nan)


def _flags(df, column: str):
    s = df[column]
    if not pd.api.types.is_bool_dtype(s):
        return np.zeros(len(s), dtype=bool)
    return s.to_numpy(dtype=bool, na_value=False)


def _at(df, column: str, row: int):
    value = df[column].iloc[row]
    return value.item() if hasattr(value, "item") else value


def _refuse(path, df, column: str, row: int, rng: Range, why: str = ""):
    keys = ", ".join(f"{k}={_at(df, k, row)!r}" for k in ROW_KEYS
                     if k in df.columns and k != column)
    value = _at(df, column, row)
    extra = (f" and {rng.unless}={_at(df, rng.unless, row)!r}"
             if rng.unless and rng.unless in df.columns else "")
    raise Violation(
        f"{path}: column {column!r} holds {value!r} in the row ({keys or 'row ' + str(row)})"
        f"{extra}, outside its declared range ({rng.describe()}{why}; "
        f"bnstudy.tables.ranges): no run writes that")


def check(path: str | Path, df, table: str | None = None) -> None:
    """Refuse (:class:`Violation`) a value of ``df`` outside its column's declared range."""
    declared_here = ranges(table or table_of(path))
    for column, rng in declared_here.items():
        if column not in df.columns:
            continue
        v = _values(df[column])
        if v is None:
            continue
        present = ~np.isnan(v)
        bad = np.zeros(len(v), dtype=bool)
        if rng.finite:
            bad |= ~np.isfinite(v)
            if rng.unless and rng.unless in df.columns:
                bad &= ~_flags(df, rng.unless)
        with np.errstate(invalid="ignore"):
            if rng.low is not None:
                bad |= present & (v < rng.low)
            if rng.high is not None:
                bad |= present & (v > rng.high)
        if bad.any():
            _refuse(path, df, column, int(np.flatnonzero(bad)[0]), rng)
        if rng.marks and rng.marks in df.columns:
            _check_marks(path, df, column, rng)


def _check_marks(path, df, column: str, rng: Range) -> None:
    """A run's flag ``column`` is true exactly when its ``rng.marks`` column is non-finite."""
    v = _values(df[rng.marks])
    if v is None:
        return
    keys = [k for k in RUN_KEYS if k in df.columns]
    nonfinite = pd.Series(~np.isfinite(v), index=df.index)
    flag = pd.Series(_flags(df, column), index=df.index)
    run_has = (nonfinite.groupby([df[k] for k in keys], sort=False).transform("any")
               if keys else pd.Series(bool(nonfinite.any()), index=df.index))
    wrong = (flag != run_has).to_numpy()
    bad = np.flatnonzero(wrong & nonfinite.to_numpy()) if (wrong & nonfinite.to_numpy()).any() \
        else np.flatnonzero(wrong)
    if len(bad):
        row = int(bad[0])
        why = (f": its run has no non-finite {rng.marks}" if flag.iloc[row] else
               f": its run has a non-finite {rng.marks}")
        _refuse(path, df, column, row, rng, why)
