"""What a study config's sweeps may be, checked before anything is expanded
(:mod:`bnstudy.config.sweeps`).

- the shape: every entry of ``datasets``, ``models``, ``trainings`` and ``experiments`` is a
  mapping under a name matched whole by :data:`bnstudy.config.loader.NAME` (a string: a YAML
  ``5:`` is the integer 5); a sweep's axes are named like Python identifiers (:data:`AXIS`,
  matched whole); its variants are named by strings or integers; a swept dataset's ``options``
  is a mapping; the loader's own key ``sweep_axes`` is not given by hand (:data:`RESERVED_KEYS`);
- the size: the entries a section expands to are counted from the axes' lengths before any is
  built (an experiment's axes over swept entries by the entries each generates), and more than
  ``limits.experiments`` (default :data:`MAX_EXPERIMENTS`) is an error;
- the columns: every axis an experiment runs over becomes a column of every table
  (:func:`bnstudy.config.sweep_experiments.experiment_axes`). A dataset's or experiment's axis is a
  column under its own name, so it may not be named like a declared table column
  (:data:`bnstudy.columns.TYPES`, other than the identifying ones the loader renames); a model's
  or training's axis is named by a key of the entry (``lr``), so one named like a declared
  column is renamed instead (``training_lr``). Axis values that reach a column are scalars of
  one kind (numbers, strings or booleans; lists are rejected, as Parquet would store them as
  neither): a dataset's or experiment's axes are checked here, a model's or training's where an
  experiment runs on it (an unused sweep of ``checkpoints`` lists is no column).

Every error is a :class:`~bnstudy.config.loader.ConfigError` naming the entry, the bad value and
what is allowed.
"""

from __future__ import annotations

import math
import re

from bnstudy.config.loader import NAME, SECTIONS, fail

SWEEP_KEYS = ("sweep", "name", "where")
AXIS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # matched whole
RESERVED_KEYS = ("sweep_axes",)  # written by the loader (bnstudy.config.study.load)
MAX_EXPERIMENTS = 10_000  # the default of limits.experiments: entries per section
# the tables' identifying columns: axes named like them are renamed (data_seed, experiment_seed)
ID_COLUMNS = ("experiment", "dataset", "model", "norm", "seed", "step", "split", "layer")
COLUMN_SECTIONS = ("datasets", "experiments")  # whose axes are table columns under their names
# an experiment's keys that name entries of these sections: they may name a swept entry
FAMILY_KEYS = {"dataset": "datasets", "model": "models", "training": "trainings"}


def max_entries(cfg: dict) -> int:
    """``limits.experiments``: the most entries a section may expand to."""
    limits = cfg.get("limits")
    n = limits.get("experiments", MAX_EXPERIMENTS) if isinstance(limits, dict) else \
        MAX_EXPERIMENTS
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        fail("limits.experiments", f"got {n!r}; allowed: an integer >= 1 (default "
                                   f"{MAX_EXPERIMENTS})")
    return n


def check_shape(cfg: dict) -> None:
    """The raw config's sections and sweeps have the shapes :func:`bnstudy.config.sweeps.expand`
    reads (see the module docstring)."""
    for key in RESERVED_KEYS:
        if key in cfg:
            fail(key, "is written by the loader from the entries' sweep: axes, not by hand; "
                      "allowed: leave it out (declare axes with sweep:)")
    for section in SECTIONS:
        entries = cfg.get(section)
        if entries is None:
            continue  # the schema names a missing section
        if not isinstance(entries, dict):
            fail(section, f"got {entries!r}; allowed: a mapping of name -> entry")
        for name, entry in entries.items():
            if not isinstance(name, str) or not NAME.fullmatch(name):
                fail(f"{section}.{name!r}", f"the name {name!r} ({type(name).__name__}) is not "
                     "allowed; allowed: a text of letters, digits and '_' (quote a number)")
            if not isinstance(entry, dict):
                fail(f"{section}.{name}", f"got {entry!r}; allowed: a mapping of settings")
            if "sweep" in entry:
                _check_sweep(section, name, entry)


def _check_sweep(section: str, name: str, entry: dict) -> None:
    where = f"{section}.{name}"
    sweep = entry["sweep"]
    if not isinstance(sweep, dict) or not sweep:
        fail(f"{where}.sweep", f"got {sweep!r}; allowed: a non-empty mapping of axis name -> "
                               "list of values")
    if section == "datasets" and not isinstance(entry.get("options", {}), dict):
        fail(f"{where}.options", f"got {entry['options']!r}; allowed: a mapping of the kind's "
                                 "options (or leave it out)")
    for axis, vals in sweep.items():
        if not isinstance(axis, str) or not AXIS.fullmatch(axis):
            fail(f"{where}.sweep", f"axis name {axis!r} ({type(axis).__name__}) is not allowed; "
                                   "allowed: a name of letters, digits and '_', not starting "
                                   "with a digit")
        if section in COLUMN_SECTIONS:
            _check_column_name(f"{where}.sweep.{axis}", axis)
        if isinstance(vals, dict):
            for variant in vals:
                if isinstance(variant, bool) or not isinstance(variant, (str, int)):
                    fail(f"{where}.sweep.{axis}", f"variant name {variant!r} "
                         f"({type(variant).__name__}) is not allowed; allowed: a text or an "
                         "integer")
            if section in COLUMN_SECTIONS:
                _check_values(f"{where}.sweep.{axis}", list(vals))
        elif isinstance(vals, list) and section in COLUMN_SECTIONS:
            _check_values(f"{where}.sweep.{axis}", vals)


def _check_column_name(at: str, axis: str) -> None:
    from bnstudy import columns

    if axis not in ID_COLUMNS and columns.declared(axis) is not None:
        fail(at, f"the axis {axis!r} would shadow the table column {axis!r} (declared in "
                 "bnstudy.columns: every table may carry it); allowed: an axis name that is no "
                 "declared column, e.g. 'sweep_" + axis + "'")


def _kind(v) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "text"
    return type(v).__name__


def check_column_value(at: str, v) -> None:
    """An axis value that becomes a table cell: a finite number, a text or a boolean."""
    kind = _kind(v)
    if kind not in ("boolean", "number", "text") or (kind == "number" and not math.isfinite(v)):
        fail(at, f"value {v!r} ({type(v).__name__}) cannot be a table column; allowed: "
                 "numbers, texts or booleans (give a list-valued setting as named "
                 "variants: {name: {key: [...]}})")


def _check_values(at: str, values: list) -> None:
    """An axis that becomes a table column: scalars of one kind."""
    kinds = {}
    for v in values:
        check_column_value(at, v)
        kinds.setdefault(_kind(v), v)
    if len(kinds) > 1:
        fail(at, f"values {values!r} mix {sorted(kinds)}; allowed: values of one kind (a table "
                 "column holds one type)")


def check_axis_kinds(axes: dict) -> None:
    """The experiments' axes (:func:`bnstudy.config.sweeps.experiment_axes`): each axis holds values
    of one kind across every experiment (two entries may both have an axis ``width``)."""
    seen: dict = {}
    for experiment, values in axes.items():
        for axis, v in values.items():
            first = seen.setdefault(axis, (experiment, v))
            if _kind(first[1]) != _kind(v):
                fail(f"experiments.{experiment}", f"the sweep axis {axis!r} is {v!r} here but "
                     f"{first[1]!r} in experiment {first[0]!r}; allowed: values of one kind per "
                     "axis (a table column holds one type)")


def expanded_size(section: str, entry: dict, families: dict) -> int:
    """How many entries ``entry`` expands to before its ``where`` filter (1 unless swept), an
    upper bound where a variant replaces a swept entry the experiment names;
    ``families[section][name]``: how many entries the swept entry ``name`` generates."""
    if not isinstance(entry, dict):
        return 1
    sweep = entry["sweep"] if isinstance(entry.get("sweep"), dict) else {}
    experiment = section == "experiments"

    def size(key, value) -> int:  # entries an experiment's key naming ``value`` stands for
        family = families.get(FAMILY_KEYS.get(key), {}) if experiment else {}
        return family.get(value, 1) if isinstance(value, str) else 1

    n = 1
    for axis, vals in sweep.items():
        if isinstance(vals, str):
            n *= size(axis, vals)
        elif isinstance(vals, list):
            n *= max(sum(size(axis, v) for v in vals), 1)
        elif isinstance(vals, dict):
            n *= max(sum(math.prod(size(k, x) for k, x in v.items()) if isinstance(v, dict)
                         else 1 for v in vals.values()), 1)
    if experiment:  # the keys no list or family axis sets: swept entries named directly
        for key in FAMILY_KEYS:
            if not isinstance(sweep.get(key), (str, list)):
                n *= size(key, entry.get(key))
    return n


def check_size(section: str, entries: dict, families: dict, cap: int) -> None:
    """The section expands to at most ``cap`` entries (counted, not built); ``families`` as
    for :func:`expanded_size`."""
    sizes = {name: expanded_size(section, e, families) for name, e in entries.items()}
    total = sum(sizes.values())
    if total > cap:
        big = max(sizes, key=sizes.get)
        fail(section, f"the sweeps expand to {total:,} entries ({section}.{big}: "
                      f"{sizes[big]:,}), more than limits.experiments = {cap:,}; allowed: at "
                      f"most {cap:,} (fewer axis values, or raise limits.experiments)")
