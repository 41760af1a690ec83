"""Reading a study's config files strictly and checking them against the JSON schema.

:func:`read_yaml` rejects a key given twice in one mapping (plain YAML keeps the last silently)
and names the file, line and column of a syntax error; :func:`validate_schema` checks a config
against ``workflow/schemas/config.schema.yaml``, fills in its defaults, and reports the first
error as one paragraph (key path, bad value, what is allowed) instead of the schema and config.
Every failure is a :class:`ConfigError`; :func:`or_exit` turns one into a short message and exit
status 1. :mod:`bnstudy.config.study` adds the checks a schema cannot express.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

# shipped with the package (workflow/schemas/config.schema.yaml links here), so an installed
# package checks configs without the repository around it
SCHEMA = Path(__file__).resolve().with_name("schema.yaml")
# An entry's name (datasets, models, trainings, experiments, generated names): matched whole
# (re.fullmatch, never ``$``, which also matches before a final newline).
NAME = re.compile(r"[A-Za-z0-9_]+")
MAX_EXTENDS = 32  # the longest ``extends:`` chain, in files (a deeper one is an error)
SECTIONS = ("datasets", "models", "trainings", "experiments")  # whose entries may be swept


class ConfigError(ValueError):
    """A bad study config, as one short paragraph."""


def fail(path: str, msg: str):
    """Raise the ConfigError ``<path>: <msg>``."""
    raise ConfigError(f"{path}: {msg}" if path else msg)


# -- strict YAML ------------------------------------------------------------------------------

class _StrictLoader(yaml.SafeLoader):
    """A safe loader that rejects a key given twice in one mapping (merge keys ``<<`` may still
    be overridden, as YAML intends)."""

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            mark = key_node.start_mark
            if key in seen:
                raise ConfigError(f"{mark.name}, line {mark.line + 1}, column {mark.column + 1}: "
                                  f"duplicate key {key!r} (first given on line {seen[key]}); "
                                  "YAML keeps only the last, so give each key once")
            seen[key] = mark.line + 1
        return super().construct_mapping(node, deep)


def read_yaml(path: str | Path) -> dict:
    """A config file's content; a ConfigError names a missing file, a YAML syntax error's line
    and column, or a duplicate key."""
    path = Path(path)
    if not path.is_file():
        fail("", f"config file {str(path)!r} does not exist" + (
            " (it is a directory)" if path.is_dir() else ""))
    try:
        with open(path, encoding="utf-8") as fh:
            cfg = yaml.load(fh, Loader=_StrictLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        fail("", f"{path}{where}: YAML syntax error: {e.problem or e.context}")
    except yaml.YAMLError as e:
        fail("", f"{path}: not valid YAML ({e})")
    if not isinstance(cfg, dict):
        fail("", f"{path}: a config file must be a mapping of settings, got "
                 + ("an empty file" if cfg is None else type(cfg).__name__))
    return cfg


def check_files(paths) -> list[dict]:
    """Each config file read strictly (Snakemake's own loader keeps the last of duplicate keys)."""
    return [read_yaml(p) for p in paths]


# -- extends: -----------------------------------------------------------------------------------

def overlay(base: dict, over: dict) -> dict:
    """``over`` laid on ``base`` as ``extends:`` does (neither is changed): mappings merge key by
    key, recursively; a list or scalar replaces the base's value whole; ``null`` deletes the
    base's key (so ``extends:`` cannot set a value to null: give that in the base file). Keys
    keep the base's order; a key the base lacks goes after the key before it in ``over`` (before
    the key after it when none before it is the base's; at the end when ``over`` names no key
    of the base), so an empty mapping ``{}`` can name a key only to place a new one."""
    keys = list(base)
    order = list(over)
    for i, k in enumerate(order):
        if k in keys or over[k] is None:
            continue
        before = [keys.index(o) + 1 for o in reversed(order[:i]) if o in keys]
        after = [keys.index(o) for o in order[i + 1:] if o in keys]
        keys.insert((before or after or [len(keys)])[0], k)
    out = {}
    for k in keys:
        v = over.get(k, base.get(k))
        if k in over and v is None:
            continue
        if k in over and isinstance(v, dict):
            v = overlay(base[k] if isinstance(base.get(k), dict) else {}, v)
        out[k] = v
    return out


def read_study(path: str | Path, _chain: tuple = ()) -> dict:
    """A config file read strictly, with its ``extends: <file>`` chain resolved: the named file
    (relative to the extending file's folder) is read the same way and this file laid over it
    (:func:`overlay`). A missing file, a cycle or a bad ``extends`` value is a ConfigError
    naming the file and key, as is a chain of more than :data:`MAX_EXTENDS` files, and a
    setting this file gives that a sweep it extends overrides (:func:`check_swept_overrides`)."""
    path = Path(path)
    if len(_chain) >= MAX_EXTENDS:
        fail("", f"{path}: extends: the chain from {str(_chain[0])!r} is more than {MAX_EXTENDS} "
                 f"files deep; allowed: at most {MAX_EXTENDS} files (flatten the chain)")
    cfg = read_yaml(path)
    if "extends" not in cfg:
        return cfg
    ext = cfg.pop("extends")
    if not isinstance(ext, str) or not ext.strip():
        fail("", f"{path}: extends: got {ext!r}; allowed: the path of another study file, "
                 "relative to this file's folder")
    target = (path.parent / ext).resolve()
    chain = (*_chain, path.resolve())
    if target in chain:
        fail("", f"{path}: extends: {ext!r} is a cycle ("
                 + " -> ".join(map(str, (*chain, target))) + "); allowed: a file that does not "
                 "extend this one, directly or not")
    if not target.is_file():
        fail("", f"{path}: extends: {ext!r}: {str(target)!r} does not exist; allowed: the path "
                 "of another study file, relative to this file's folder")
    out = overlay(read_study(target, chain), cfg)
    check_swept_overrides(out, cfg, path)
    return out


def _swept_keys(axis: str, vals) -> set:
    """The keys a sweep axis sets in every entry it generates: its own (a list of values, or an
    experiment's swept dataset, model or training), or those every named variant sets."""
    if isinstance(vals, (list, str)):
        return {axis}
    variants = [v for v in vals.values() if isinstance(v, dict)] if isinstance(vals, dict) else []
    return set.intersection(*map(set, variants)) if variants else set()


def check_swept_overrides(merged: dict, over: dict, path) -> None:
    """``extends:`` merges an entry key by key, so a swept entry stays swept: a key the extending
    file ``over`` sets (a dataset's: in ``options``) that an axis of the merged entry's sweep sets
    in every generated entry would be ignored silently (its sweep's values win). That is a
    ConfigError naming the file, the key and the axis, unless the file gives that axis too."""
    for section in SECTIONS:
        entries, base = over.get(section), merged.get(section)
        for name, child in (entries.items() if isinstance(entries, dict) else ()):
            entry = base.get(name) if isinstance(base, dict) else None
            if not isinstance(child, dict) or not isinstance(entry, dict) or \
                    not isinstance(entry.get("sweep"), dict):
                continue
            own = child.get("options") if section == "datasets" else child
            own = {k: v for k, v in own.items() if v is not None} if isinstance(own, dict) else {}
            given = child.get("sweep") if isinstance(child.get("sweep"), dict) else {}
            for axis, vals in entry["sweep"].items():
                hidden = sorted(_swept_keys(axis, vals) & set(own))
                if axis in given or not hidden:
                    continue
                key = f"{section}.{name}." + ("options." if section == "datasets" else "")
                fail("", f"{path}: {key}{hidden[0]}: {own[hidden[0]]!r} would be ignored: the "
                         f"sweep axis {axis!r} of {section}.{name} ({vals!r}) sets it in every "
                         f"generated entry; allowed: give the axis here (sweep: {{{axis}: "
                         "...}), or drop the sweep (sweep: null)")


# -- the JSON schema ----------------------------------------------------------------------------

def _key_path(parts) -> str:
    return ".".join(str(p) for p in parts) or "(top level)"


def _allowed(error) -> str:
    """What the failed schema keyword allows, in words."""
    kw, val, sch = error.validator, error.validator_value, error.schema
    if kw == "additionalProperties":
        return f"the keys {sorted(sch.get('properties', {}))}" if "properties" in sch \
            else "no further keys"
    if kw == "required":
        return f"the keys {val} are required"
    if kw == "enum":
        return "one of " + ", ".join(map(repr, val))
    if kw == "const":
        return repr(val)
    if kw == "type":
        return f"a value of type {val}"
    if kw in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        op = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=",
              "exclusiveMaximum": "<"}[kw]
        return f"a number {op} {val}"
    if kw in ("anyOf", "oneOf"):
        return " or ".join(_describe(s) for s in val)
    if kw == "pattern":
        return sch.get("description") or f"text matching {val}"
    if kw == "propertyNames":
        return f"names matching {sch['propertyNames'].get('pattern', sch['propertyNames'])}"
    if kw in ("minItems", "maxItems", "minProperties", "uniqueItems", "multipleOf", "not"):
        return f"{kw} {val}"
    return f"{kw}: {val}"


def _describe(s: dict) -> str:
    if "const" in s:
        return repr(s["const"])
    if "enum" in s:
        return "one of " + ", ".join(map(repr, s["enum"]))
    bits = [s.get("type", "value")]
    for kw, op in (("minimum", ">="), ("exclusiveMinimum", ">")):
        if kw in s:
            bits.append(f"{op} {s[kw]}")
    return " ".join(map(str, bits))


def _bad_value(error) -> str:
    if error.validator == "additionalProperties":
        known = set(error.schema.get("properties", {}))
        extra = sorted(k for k in error.instance if k not in known)
        return f"unknown key(s) {extra}"
    if error.validator == "required":
        return error.message
    text = repr(error.instance)
    return "got " + (text if len(text) <= 80 else text[:77] + "...")


def validate_schema(cfg: dict, schema: str | Path = SCHEMA,
                    sections: dict[str, dict] | None = None,
                    dataset_kinds: list[str] | None = None,
                    entries: dict[str, dict] | None = None) -> dict:
    """``cfg`` validated against the JSON schema, defaults filled in (in place, as Snakemake's
    ``validate`` does); a ConfigError names the key path, bad value and what is allowed.
    ``sections``, ``dataset_kinds`` and ``entries``: the parts of the schema declared where
    they belong, laid into the file's by :func:`bnstudy.config.entries.complete`."""
    from jsonschema import Draft202012Validator, validators
    from jsonschema.exceptions import best_match

    from bnstudy.config.entries import complete

    schema_doc = complete(yaml.safe_load(Path(schema).read_text()), str(schema), sections,
                          dataset_kinds, entries)
    props = Draft202012Validator.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, sch):
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if "default" in sub:
                    instance.setdefault(name, sub["default"])
        yield from props(validator, properties, instance, sch)

    cls = validators.extend(Draft202012Validator, {"properties": set_defaults})
    error = best_match(cls(schema_doc).iter_errors(cfg))
    if error is not None:
        if error.validator in ("anyOf", "oneOf") and error.context:
            deepest = max(error.context, key=lambda e: len(e.absolute_path))
            if len(deepest.absolute_path) > len(error.absolute_path):
                error = deepest
        fail(_key_path(error.absolute_path), f"{_bad_value(error)}; allowed: {_allowed(error)}")
    return cfg


def merged(configs: list[dict]) -> dict:
    """Config files merged as Snakemake merges ``--configfile`` files (nested keys updated)."""
    def update(a: dict, b: dict) -> dict:
        for k, v in b.items():
            a[k] = update(dict(a[k]), v) if isinstance(v, dict) and isinstance(a.get(k),
                                                                                 dict) else v
        return a

    out: dict = {}
    for c in configs:
        update(out, c)
    return out


def or_exit(func, *args, **kwargs):
    """``func(*args, **kwargs)``; on a ConfigError print it and exit 1 (no traceback)."""
    try:
        return func(*args, **kwargs)
    except ConfigError as e:
        print(f"bnstudy config error: {e}", file=sys.stderr)
        sys.exit(1)

