"""Reading a study's config files strictly and checking them against the JSON schema.

:func:`read_yaml` rejects a key given twice in one mapping (plain YAML keeps the last silently),
a file of more than :data:`MAX_VALUES` values with its aliases expanded, and text that is not
UTF-8, and names the file, line and column of a syntax error; :func:`validate_schema` checks a
config against ``workflow/schemas/config.schema.yaml``, fills in its defaults, and reports the
first error as one paragraph (key path, bad value, what is allowed) instead of the schema and
config.
Every failure is a :class:`ConfigError`; :func:`or_exit` turns one into a short message and exit
status 1. :mod:`bnstudy.config.study` adds the checks a schema cannot express.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

from bnstudy.config import paths
from bnstudy.config.schema_errors import allowed, bad_value, key_path

# shipped with the package (workflow/schemas/config.schema.yaml links here), so an installed
# package checks configs without the repository around it
SCHEMA = Path(__file__).resolve().with_name("schema.yaml")
# An entry's name (datasets, models, trainings, experiments, generated names): matched whole
# (re.fullmatch, never ``$``, which also matches before a final newline).
NAME = re.compile(r"[A-Za-z0-9_]+")
MAX_EXTENDS = 32  # the longest ``extends:`` chain, in files (a deeper one is an error)
# the most values (mappings, lists, keys and scalars) one config file may hold, its YAML aliases
# (*name) and merge keys (<<) expanded: an "alias bomb" of a few lines holds billions
MAX_VALUES = 100_000
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

    def construct_document(self, node):
        """The document, once its size with aliases expanded is at most :data:`MAX_VALUES`
        (counted on the parsed nodes, before anything is built)."""
        if yaml_values(node, MAX_VALUES) > MAX_VALUES:
            raise ConfigError(f"{self.name}: holds more than {MAX_VALUES:,} values with its YAML "
                              f"aliases (*name) and merge keys (<<) expanded; allowed: at most "
                              f"{MAX_VALUES:,} (fewer aliases of aliases)")
        return super().construct_document(node)


def yaml_values(node, cap: int) -> int:
    """How many values the YAML ``node`` holds with every alias expanded (each shared node
    counted where it is used), counting stops past ``cap``; linear in the distinct nodes."""
    memo: dict[int, int] = {}

    def size(n) -> int:
        if id(n) not in memo:
            memo[id(n)] = cap + 1  # a node inside itself (a recursive alias) counts as too many
            total = 1
            for child in (n.value if isinstance(n, yaml.SequenceNode) else
                          [x for pair in n.value for x in pair]
                          if isinstance(n, yaml.MappingNode) else ()):
                total += size(child)
                if total > cap:
                    break
            memo[id(n)] = min(total, cap + 1)
        return memo[id(n)]

    return size(node)


def read_yaml(path: str | Path) -> dict:
    """A config file's content; a ConfigError names a missing file, a YAML syntax error's line
    and column, or a duplicate key."""
    path = Path(path)
    problem = paths.link_problem(path)
    if problem or not path.is_file():
        fail("", f"config file {str(path)!r} " + (problem or "does not exist") + (
            " (it is a directory)" if path.is_dir() else ""))
    try:
        with open(path, encoding="utf-8") as fh:
            cfg = yaml.load(fh, Loader=_StrictLoader)  # noqa: S506 (a SafeLoader subclass)
    except UnicodeDecodeError:
        fail("", f"{path}: {_not_utf8(path.read_bytes())}")
    except RecursionError:
        fail("", f"{path}: nested too deeply to read; allowed: a config of fewer nested levels")
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


def _not_utf8(raw: bytes) -> str:
    """Where ``raw`` (a file's bytes) stops being UTF-8 text, in words."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        column = e.start - raw.rfind(b"\n", 0, e.start)
        return (f"line {line}, column {column}: byte {raw[e.start]:#04x} is not UTF-8 text; "
                "allowed: a config file saved as UTF-8 (convert it, e.g. iconv -f latin1 -t "
                "utf-8)")
    return "not UTF-8 text; allowed: a config file saved as UTF-8"


def check_files(files) -> list[dict]:
    """Each config file read strictly (Snakemake's own loader keeps the last of duplicate keys)."""
    return [read_yaml(p) for p in files]


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
    (relative to the extending file's folder; ``~`` expanded) is read the same way and this file
    laid over it (:func:`overlay`). A missing file, a link loop, a cycle or a bad ``extends``
    value is a ConfigError naming the file and key, as is a chain of more than
    :data:`MAX_EXTENDS` files, and a setting this file gives that a sweep it extends overrides
    (:func:`check_swept_overrides`)."""
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
    problem = paths.link_problem(path.parent / paths.expand(ext))
    if problem:
        fail("", f"{path}: extends: {ext!r}: {problem}; allowed: the path of another study file")
    target = (path.parent / paths.expand(ext)).resolve()
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
        fail(key_path(error.absolute_path), f"{bad_value(error)}; allowed: {allowed(error)}")
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

