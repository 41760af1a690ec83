"""Sweeps: a study config's entries declared as axes, expanded into the flat form.

An entry of ``datasets``, ``models``, ``trainings`` or ``experiments`` may hold

- ``sweep``: a mapping of axes, each one of

  - a list of values: each sets the entry's key of the axis's name (for a dataset: its option of
    that name, in ``options``);
  - a mapping of named variants, ``{variant name: {key: value, ...}}``: each sets several keys
    at once (a dataset's: options); the variant's name is the axis's value in names;
  - for an experiment's ``dataset`` axis only, the name of a swept dataset entry: one value per
    dataset it generates, whose own axes are then axes of the experiment too (names, ``where``);

- ``name``: a template of the generated names, ``{axis}`` standing for the axis's value in its
  filesystem-safe form (:func:`fmt`: 0.5 -> ``0p5``, 2.0 -> ``2``, -1 -> ``m1``, True ->
  ``true``); without it, the entry's name followed by ``_<axis><value>`` per axis (for a
  dataset axis: ``_<dataset name>``);
- ``where``: a mapping ``{axis: value or list of values}`` that a combination must match to be
  kept (all its axes), or a list of such mappings (any of them).

:func:`expand` generates one entry per combination (the product of the axes, the first axis
outermost), in place of the swept entry; values keep their YAML types (2.0 stays a float). A
config without sweeps is returned unchanged (as a copy). Errors are ConfigErrors naming the
entry, the axis and the value.
"""

from __future__ import annotations

import copy
import itertools

import yaml

from bnstudy import sweep_checks
from bnstudy.config_file import NAME, SCHEMA, fail
from bnstudy.sweep_checks import ID_COLUMNS, SECTIONS, SWEEP_KEYS  # noqa: F401 (re-exported)

SAFE_NAME = NAME  # generated names are matched whole (re.fullmatch)


def fmt(value) -> str:
    """An axis value as it appears in generated names: ints and integral floats as integers
    (2.0 -> ``2``), other floats with ``p`` for the point and ``m`` for a minus (-0.25 ->
    ``m0p25``, 1e-05 -> ``1em05``), booleans ``true``/``false``, a list its items joined by
    ``_``, a string as given."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        value = int(value)
    if isinstance(value, (int, float)):
        return repr(value).replace("-", "m").replace("+", "").replace(".", "p")
    if isinstance(value, list):
        return "_".join(fmt(v) for v in value)
    return str(value)


def _keys(section: str, entry: dict, where: str) -> list[str]:
    """The keys an axis or variant may set: a dataset kind's options, else the schema's keys of
    the section's entries."""
    if section == "datasets":
        from bnstudy import data

        kind = entry.get("kind")
        if kind not in data.OPTIONS:
            fail(f"{where}.kind", f"got {kind!r}; allowed: one of {sorted(data.OPTIONS)} "
                                  "(a swept dataset needs its kind to check the axes)")
        return sorted(data.OPTIONS[kind])
    schema = yaml.safe_load(SCHEMA.read_text())
    return sorted(schema["properties"][section]["additionalProperties"]["properties"])


def _axes(section: str, name: str, entry: dict, families: dict) -> list[tuple]:
    """The entry's axes as (axis, kind, values): kind 'list', 'variants' or 'family'."""
    where = f"{section}.{name}.sweep"
    sweep = entry["sweep"]
    if not isinstance(sweep, dict) or not sweep:
        fail(where, f"got {sweep!r}; allowed: a non-empty mapping of axis name -> list of values")
    allowed = _keys(section, entry, f"{section}.{name}")
    out = []
    for axis, vals in sweep.items():
        at = f"{where}.{axis}"
        if section == "experiments" and axis == "dataset" and isinstance(vals, str):
            if vals not in families:
                fail(at, f"{vals!r} is not a swept dataset; allowed: a list of dataset names or "
                         f"one of the swept datasets {sorted(families)}")
            out.append((axis, "family", families[vals]))
            continue
        if not isinstance(vals, (list, dict)):
            fail(at, f"got {vals!r}; allowed: a list of values or a mapping of named variants")
        if not vals:
            fail(at, f"the axis {axis!r} is empty ({vals!r}); allowed: at least one value")
        if isinstance(vals, list):
            if axis not in allowed:
                fail(at, f"axis {axis!r} (values {vals!r}) is not an option of the entry; "
                         f"allowed: {allowed}, or a mapping of named variants")
            out.append((axis, "list", vals))
            continue
        for variant, keys in vals.items():
            if not isinstance(keys, dict):
                fail(f"{at}.{variant}", f"got {keys!r}; allowed: a mapping of {allowed}")
            bad = sorted(set(keys) - set(allowed))
            if bad:
                fail(f"{at}.{variant}", f"{bad} are not options of the entry; allowed: {allowed}")
        out.append((axis, "variants", vals))
    return out


def _matches(values: dict, where, at: str) -> bool:
    rules = where if isinstance(where, list) else [where]
    keep = False
    for rule in rules:
        if not isinstance(rule, dict) or not rule:
            fail(at, f"got {rule!r}; allowed: a mapping of axis -> value or list of values, "
                     "or a list of such mappings")
        for axis, want in rule.items():
            if axis not in values:
                fail(f"{at}.{axis}", f"axis {axis!r} (value {want!r}) is not an axis of the "
                                     f"sweep; allowed: {sorted(values)}")
        keep = keep or all(values[a] in (w if isinstance(w, list) else [w])
                           for a, w in rule.items())
    return keep


def _combinations(section: str, name: str, entry: dict, families: dict):
    """(generated name, axis values, entry) per kept combination."""
    axes = _axes(section, name, entry, families)
    body = {k: v for k, v in entry.items() if k not in SWEEP_KEYS}
    template = entry.get("name")
    if template is not None and not isinstance(template, str):
        fail(f"{section}.{name}.name", f"got {template!r}; allowed: a text such as "
                                        "'ts_a{alpha}_d{seed}'")
    choices = [[(axis, kind, v) for v in (vals if kind != "variants" else list(vals))]
               for axis, kind, vals in axes]
    for combo in itertools.product(*choices):
        values, words, out = {}, {}, copy.deepcopy(body)
        target = out.setdefault("options", {}) if section == "datasets" else out
        parts = [name]
        for axis, kind, v in combo:
            if kind == "family":
                ds_name, ds_values = v
                clash = sorted(set(ds_values) & ({a for a, _, _ in axes} | set(values)))
                if clash:
                    fail(f"{section}.{name}.sweep.dataset", f"the dataset's axes {clash} are "
                         "axes of this entry too; allowed: distinct axis names")
                values.update(ds_values)
                words.update({a: fmt(x) for a, x in ds_values.items()})
                values[axis], words[axis] = ds_name, ds_name
                target[axis] = ds_name
                parts.append(ds_name)
                continue
            values[axis], words[axis] = v, fmt(v)
            parts.append(f"{axis}{fmt(v)}")
            if kind == "list":
                target[axis] = copy.deepcopy(v)
            else:
                target.update(copy.deepcopy(_variants(axes, axis)[v]))
        if "where" in entry and not _matches(values, entry["where"], f"{section}.{name}.where"):
            continue
        if template is None:
            gen = "_".join(parts)
        else:
            try:
                gen = template.format(**words)
            except KeyError as e:
                fail(f"{section}.{name}.name", f"{{{e.args[0]}}} in {template!r} is not an "
                                               f"axis; allowed: {sorted(words)}")
            except (ValueError, IndexError, AttributeError, TypeError) as e:
                fail(f"{section}.{name}.name", f"{template!r} is not a valid template ({e})")
        if not SAFE_NAME.fullmatch(gen):
            fail(f"{section}.{name}", f"generated name {gen!r} (axis values {values}) is not "
                                      "filesystem-safe; allowed: letters, digits and '_'")
        yield gen, values, out


def _variants(axes: list, axis: str) -> dict:
    """The named variants of ``axis``."""
    return next(vals for a, kind, vals in axes if a == axis)


def expand(cfg: dict, record: dict | None = None) -> dict:
    """The config with every swept entry replaced by the entries it generates (see the module
    docstring); ``cfg`` is not changed. With ``record``, the axis values of every generated
    entry are stored there, ``record[section][generated name] = {axis: value}``. Shapes and
    sizes are checked first (:mod:`bnstudy.sweep_checks`): nothing past ``limits.experiments``
    is built."""
    sweep_checks.check_shape(cfg)
    cap = sweep_checks.max_entries(cfg)
    out = dict(cfg)
    families: dict = {}  # swept dataset entry -> [(generated name, its axis values)]
    for section in SECTIONS:
        entries = cfg.get(section)
        if not isinstance(entries, dict):
            continue
        sweep_checks.check_size(section, entries, {k: len(v) for k, v in families.items()}, cap)
        flat: dict = {}
        origin: dict = {}
        for name, entry in entries.items():
            if not isinstance(entry, dict) or not any(k in entry for k in SWEEP_KEYS):
                gens = [(name, None, entry)]
            elif "sweep" not in entry:
                fail(f"{section}.{name}", "'name' and 'where' are sweep settings; allowed: "
                                          "them only next to 'sweep'")
            else:
                gens = list(_combinations(section, name, entry, families))
                if not gens:
                    fail(f"{section}.{name}.where", f"{entry['where']!r} keeps no combination "
                                                    "of the sweep; allowed: a filter that "
                                                    "matches at least one")
                if section == "datasets":
                    families[name] = [(g, v) for g, v, _ in gens]
            for gen, values, e in gens:
                if gen in flat:
                    fail(f"{section}.{name}", f"generated name {gen!r} (axis values {values}) "
                         f"is given twice (also by {origin[gen]!r}); allowed: a name template "
                         "that tells every combination apart")
                flat[gen], origin[gen] = e, name
                if record is not None and values:
                    record.setdefault(section, {})[gen] = values
        out[section] = flat
    return out


def experiment_axes(flat: dict, record: dict) -> dict[str, dict]:
    """The sweep-axis values of each experiment of an expanded config: its own axes and those of
    the swept dataset it runs on (``record`` from :func:`expand`). These become columns of every
    table (pooling over draws is a groupby). An axis named like a table's identifying column is
    renamed: a dataset's ``seed`` axis (the data draw) is ``data_seed``, an experiment's is
    ``experiment_seed``; an experiment's ``dataset`` axis is the ``dataset`` column itself and is
    left out. Experiments without axes are left out."""
    out = {}
    for name, e in flat.get("experiments", {}).items():
        own = record.get("datasets", {}).get(e.get("dataset"), {})
        values = {(f"data_{a}" if a in ID_COLUMNS else a): v for a, v in own.items()}
        for a, v in record.get("experiments", {}).get(name, {}).items():
            if (a == "dataset" and v == e.get("dataset")) or (a in own and own[a] == v):
                continue  # the dataset column itself, or the dataset's axis (above)
            values[f"experiment_{a}" if a in ID_COLUMNS else a] = v
        if values:
            out[name] = values
    sweep_checks.check_axis_kinds(out)
    return out
