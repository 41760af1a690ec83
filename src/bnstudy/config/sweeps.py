"""Sweeps: a study config's entries declared as axes, expanded into the flat form.

An entry of ``datasets``, ``models``, ``trainings`` or ``experiments`` may hold

- ``sweep``: a mapping of axes, each one of

  - a list of values: each sets the entry's key of the axis's name (for a dataset: its option of
    that name, in ``options``);
  - a mapping of named variants, ``{variant name: {key: value, ...}}``: each sets several keys
    at once (a dataset's: options); the variant's name is the axis's value in names;
  - for an experiment's ``dataset``, ``model`` or ``training`` axis only, the name of a swept
    entry of that section: one value per entry it generates, whose own axes are then axes of
    the experiment too (names, ``where``);

- ``name``: a template of the generated names, ``{axis}`` standing for the axis's value in its
  filesystem-safe form (:func:`fmt`: 0.5 -> ``0p5``, 2.0 -> ``2``, -1 -> ``m1``, True ->
  ``true``); without it, the entry's name followed by ``_<axis><value>`` per axis (for an axis
  over a swept entry: ``_<generated name>``);
- ``where``: a mapping ``{axis: value or list of values}`` that a combination must match to be
  kept (all its axes), or a list of such mappings (any of them).

An experiment whose ``dataset``, ``model`` or ``training`` names a swept entry (directly, or set
so by one of its axes) runs over every entry that sweep generates without a ``sweep:`` of its
own (:mod:`bnstudy.config.sweep_experiments`): such axes come after the experiment's own, in
the order dataset, model, training, and its ``name`` and ``where`` may use their axes. An
experiment that names a plain entry is unchanged.

:func:`expand` generates one entry per combination (the product of the axes, the first axis
outermost), in place of the swept entry; values keep their YAML types (2.0 stays a float). A
config without sweeps is returned unchanged (as a copy). Errors are ConfigErrors naming the
entry, the axis and the value.
"""

from __future__ import annotations

import copy
import itertools

import yaml

from bnstudy.config import sweep_checks, sweep_experiments
from bnstudy.config.entries import entry_schemas
from bnstudy.config.loader import NAME, SCHEMA, fail
from bnstudy.config.sweep_checks import FAMILY_KEYS, ID_COLUMNS, SECTIONS, SWEEP_KEYS  # noqa: F401
from bnstudy.config.sweep_experiments import experiment_axes  # noqa: F401 (re-exported: study.load)

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
    """The keys an axis or variant may set: a dataset kind's options, a model's or training's
    keys (generated from ModelConfig's and TrainConfig's fields: :func:`entry_schemas`), else
    the schema file's keys of the section's entries (an experiment's)."""
    if section == "datasets":
        from bnstudy import data

        kind = entry.get("kind")
        if kind not in data.OPTIONS:
            fail(f"{where}.kind", f"got {kind!r}; allowed: one of {sorted(data.OPTIONS)} "
                                  "(a swept dataset needs its kind to check the axes)")
        return sorted(data.OPTIONS[kind])
    if section in ("models", "trainings"):  # (imported only then: the classes import torch)
        return sorted(entry_schemas()[section]["properties"])
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
        if section == "experiments" and axis in FAMILY_KEYS and isinstance(vals, str):
            out.append((axis, "family", sweep_experiments.named_family(at, axis, vals, families)))
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
    axes = _axes(section, name, entry, families) if "sweep" in entry else []
    body = {k: v for k, v in entry.items() if k not in SWEEP_KEYS}
    template = entry.get("name")
    if template is not None and not isinstance(template, str):
        fail(f"{section}.{name}.name", f"got {template!r}; allowed: a text such as "
                                        "'ts_a{alpha}_d{seed}'")
    own = {a for a, _, _ in axes}
    bound = {a for a, kind, _ in axes if kind == "family"}
    choices = [[(axis, kind, v) for v in (vals if kind != "variants" else list(vals))]
               for axis, kind, vals in axes]
    for combo in itertools.product(*choices):
        values, words, out = {}, {}, copy.deepcopy(body)
        target = out.setdefault("options", {}) if section == "datasets" else out
        parts = [name]
        for axis, kind, v in combo:
            if kind == "family":
                _add_family(f"{section}.{name}.sweep.{axis}", axis, v, values, words, own)
                target[axis] = v[0]
                parts.append(v[0])
                continue
            values[axis], words[axis] = v, fmt(v)
            parts.append(f"{axis}{fmt(v)}")
            if kind == "list":
                target[axis] = copy.deepcopy(v)
            else:
                target.update(copy.deepcopy(_variants(axes, axis)[v]))
        swept = sweep_experiments.implicit(out, bound, families) \
            if section == "experiments" else []
        for picks in itertools.product(*[[(key, g) for g in gens] for key, gens in swept]):
            vals, wds, done, names = dict(values), dict(words), copy.deepcopy(out), list(parts)
            for key, pick in picks:
                _add_family(f"{section}.{name}.{key}", key, pick, vals, wds, own)
                done[key] = pick[0]
                names.append(pick[0])
            gen = _generated(section, name, entry, template, vals, wds, names)
            if gen is not None:
                yield gen, vals, done


def _add_family(at: str, key: str, pick: tuple, values: dict, words: dict, own: set) -> None:
    """An experiment's ``key`` set to the generated entry ``pick`` = (name, its axis values):
    those axes join the experiment's (distinct names), and ``key`` is the generated name unless
    an axis of the experiment already set it (``training: [sgd, ...]``: its value stays)."""
    gen, axes = pick
    clash = sorted(set(axes) & (own | set(values) | {key}))
    if clash:
        fail(at, f"the axes {clash} of {key} {gen!r} are axes of this entry (or of another "
                 f"swept entry it runs on) too: {sorted(own | set(values))}; allowed: distinct "
                 "axis names")
    values.update(axes)
    words.update({a: fmt(x) for a, x in axes.items()})
    if key not in values:
        values[key], words[key] = gen, gen


def _generated(section: str, name: str, entry: dict, template, values: dict, words: dict,
               parts: list) -> str | None:
    """The generated name of a combination, or None when ``where`` drops it."""
    if "where" in entry and not _matches(values, entry["where"], f"{section}.{name}.where"):
        return None
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
    return gen


def _variants(axes: list, axis: str) -> dict:
    """The named variants of ``axis``."""
    return next(vals for a, kind, vals in axes if a == axis)


def expand(cfg: dict, record: dict | None = None) -> dict:
    """The config with every swept entry replaced by the entries it generates, and every
    experiment over swept entries by one per combination (see the module docstring); ``cfg`` is
    not changed. With ``record``, the axis values of every generated entry are stored there,
    ``record[section][generated name] = {axis: value}``. Shapes and sizes are checked first
    (:mod:`bnstudy.config.sweep_checks`): nothing past ``limits.experiments`` is built."""
    sweep_checks.check_shape(cfg)
    cap = sweep_checks.max_entries(cfg)
    out = dict(cfg)
    families: dict = {}  # section -> swept entry -> [(generated name, its axis values)]
    for section in SECTIONS:
        entries = cfg.get(section)
        if not isinstance(entries, dict):
            continue
        sweep_checks.check_size(section, entries, {s: {k: len(v) for k, v in f.items()}
                                                   for s, f in families.items()}, cap)
        flat: dict = {}
        origin: dict = {}
        for name, entry in entries.items():
            swept = "sweep" in entry or (section == "experiments" and
                                         sweep_experiments.names_swept(entry, families))
            if not swept and any(k in entry for k in SWEEP_KEYS):
                fail(f"{section}.{name}", "'name' and 'where' are sweep settings; allowed: "
                                          "them only next to 'sweep' (or in an experiment that "
                                          "names a swept entry)")
            if not swept:
                gens = [(name, None, entry)]
            else:
                gens = list(_combinations(section, name, entry, families))
                if not gens:
                    fail(f"{section}.{name}.where", f"{entry['where']!r} keeps no combination "
                                                    "of the sweep; allowed: a filter that "
                                                    "matches at least one")
                if section != "experiments":
                    families.setdefault(section, {})[name] = [(g, v) for g, v, _ in gens]
            if section == "experiments":
                sweep_experiments.check_references(name, {g: e for g, _, e in gens}, out,
                                                   families)
            for gen, values, e in gens:
                if gen in flat:
                    fail(f"{section}.{name}", f"generated name {gen!r} (axis values {values}) "
                         f"is given twice (also by {origin[gen]!r}); allowed: a name template "
                         "that tells every combination apart")
                flat[gen], origin[gen] = e, name
                if record is not None and values:
                    record.setdefault(section, {})[gen] = values
        _check_ambiguous(section, origin, families)
        out[section] = flat
    return out


def _check_ambiguous(section: str, origin: dict, families: dict) -> None:
    """A generated name that is also another swept entry's name: an experiment naming it would
    mean either."""
    for gen, name in origin.items():
        if gen != name and gen in families.get(section, {}):
            fail(f"{section}.{name}", f"generated name {gen!r} is also the name of the swept "
                                      f"entry {section}.{gen}; allowed: names that tell them "
                                      "apart (a name template)")
