"""An experiment's axes over swept entries, and the axis values every table carries as columns.

An experiment names its dataset, model and training (:data:`FAMILY_KEYS`). When such a key
names a swept entry (by the entry's own name, as written under ``sweep:``), the experiment runs
over every entry the sweep generated: one experiment per generated entry, whose axes (a
training's ``lr``, a model's ``width``, a dataset's ``alpha``) become axes of the experiment
(its generated names, its ``where``) and columns of every table. So a learning-rate sweep is one
``sweep:`` on the training, not one experiment per rate. :func:`bnstudy.config.sweeps.expand`
does the expanding; this module says which keys name swept entries (:func:`implicit`,
:func:`named_family`), that a name is neither an entry nor a swept one (:func:`check_references`)
and which axis values become each experiment's columns (:func:`experiment_axes`).

A column named like a table's own column would lose to it
(:func:`bnstudy.tables.aggregation.with_axes`
keeps a table's column: the training table's ``lr`` is the step's rate, after the schedule), so
a model's or training's axis named like a declared or identifying column is its entry's
section's prefix plus the axis: ``training_lr``, ``model_init``, as a dataset's ``seed`` is
``data_seed``. Names and ``where`` use the axis's own name (``lr``).
"""

from __future__ import annotations

from bnstudy.config.loader import fail
from bnstudy.config.sweep_checks import (
    FAMILY_KEYS,
    ID_COLUMNS,
    check_axis_kinds,
    check_column_value,
)

PREFIX = {"datasets": "data_", "models": "model_", "trainings": "training_",
          "experiments": "experiment_"}  # a renamed axis column: the section's prefix


def named_family(at: str, key: str, value, families: dict) -> list:
    """The entries the swept entry ``value`` generated, for an experiment's sweep axis ``key``
    given as one name (``sweep: {dataset: ts}``): ``[(generated name, its axis values)]``."""
    swept = families.get(FAMILY_KEYS[key], {})
    if value not in swept:
        fail(at, f"{value!r} is not a swept {key}; allowed: a list of {key} names or one of the "
                 f"swept {FAMILY_KEYS[key]} {sorted(swept)}")
    return swept[value]


def implicit(entry: dict, bound: set, families: dict) -> list[tuple[str, list]]:
    """``[(key, generated entries)]`` for each key of an experiment (after its own axes set
    theirs) that names a swept entry and is no swept-entry axis of its own (``bound``), in the
    order dataset, model, training: the experiment runs over each such entry's generations."""
    out = []
    for key, section in FAMILY_KEYS.items():
        value = entry.get(key)
        if key not in bound and isinstance(value, str) and value in families.get(section, {}):
            out.append((key, families[section][value]))
    return out


def names_swept(entry: dict, families: dict) -> bool:
    """Whether an experiment entry names a swept entry (and so expands without ``sweep:``)."""
    return bool(implicit(entry, set(), families))


def check_references(name: str, generated: dict, flat: dict, families: dict) -> None:
    """The dataset, model and training of each experiment the entry ``name`` generated
    (``generated``: generated name -> entry) are entries of the flat config; checked here only
    for a section with swept entries, whose names the error can list (the rest:
    :func:`bnstudy.config.study.check`)."""
    for gen, e in generated.items():
        for key, section in FAMILY_KEYS.items():
            value, swept = e.get(key), families.get(section, {})
            if swept and isinstance(value, str) and value not in flat.get(section, {}):
                also = f" (in the generated experiment {gen!r})" if gen != name else ""
                fail(f"experiments.{name}.{key}", f"{value!r} is not defined{also}; allowed: "
                     f"one of {sorted(flat.get(section, {}))}, or a swept {key} to run over "
                     f"every entry it generates: one of {sorted(swept)}")


def column(section: str, axis: str) -> str:
    """The table column of an axis of an entry of ``section`` (see the module docstring)."""
    from bnstudy import columns

    if axis in ID_COLUMNS or (section in ("models", "trainings") and
                              columns.declared(axis) is not None):
        return PREFIX[section] + axis
    return axis


def experiment_axes(flat: dict, record: dict) -> dict[str, dict]:
    """The sweep-axis values of each experiment of an expanded config: those of the generated
    dataset, model and training it runs on, then its own (``record`` from
    :func:`bnstudy.config.sweeps.expand`), each under its column's name (:func:`column`: a dataset's
    ``seed`` is ``data_seed``, an experiment's ``experiment_seed``, a training's ``lr``
    ``training_lr``). These become columns of every table (pooling over draws is a groupby). An
    experiment's ``dataset`` axis is the ``dataset`` column itself and is left out, as is a
    ``model`` or ``training`` axis over a swept entry (its axes are the columns). Experiments
    without axes are left out."""
    out = {}
    for name, e in flat.get("experiments", {}).items():
        values: dict = {}
        origin: dict = {}  # column -> the entry it comes from (named in errors)
        inherited: dict = {}  # axis -> value, from the entries the experiment runs on
        for key, section in FAMILY_KEYS.items():
            entry = e.get(key)
            axes = record.get(section, {}).get(entry, {}) if isinstance(entry, str) else {}
            for a, v in axes.items():
                _put(name, values, origin, column(section, a), v, f"{section}.{entry}")
                inherited[a] = v
        for a, v in record.get("experiments", {}).get(name, {}).items():
            section = FAMILY_KEYS.get(a)
            if section and v == e.get(a) and (a == "dataset" or v in record.get(section, {})):
                continue  # the dataset column itself, or a swept entry's name (its axes above)
            if a in inherited and inherited[a] == v:
                continue  # an axis of the entry it runs on (above)
            _put(name, values, origin, column("experiments", a), v, f"experiments.{name}")
        if values:
            out[name] = values
    check_axis_kinds(out)
    return out


def _put(experiment: str, values: dict, origin: dict, col: str, v, source: str) -> None:
    check_column_value(f"{source}.sweep ({col!r}, experiment {experiment!r})", v)
    if col in values and values[col] != v:
        fail(f"experiments.{experiment}", f"the sweep axis column {col!r} is {values[col]!r} "
             f"from {origin[col]} and {v!r} from {source}; allowed: distinct axis names (name "
             "one axis by its variants: {other_name: {variant: {key: value}}})")
    values[col], origin[col] = v, source
