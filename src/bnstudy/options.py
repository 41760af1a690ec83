"""Typed options: the one mechanism that checks a measure's (or analysis's) config section.

A measure declares its options as a frozen dataclass deriving from :class:`Options`: each field
has a type and a default, and may carry ``choices`` (the valid values) or ``minimum`` in its
metadata (:func:`choice`, :func:`at_least`). :meth:`Options.parse` turns a config section into an
instance, checking, in this order: unknown keys (named, with the valid ones), each field's type
(YAML lists become tuples), its choices, minimum and ``check`` (a field's own test, returning
why a value is bad), then the class's own cross-field rules
(:meth:`Options.validate`). Every error is a ``ValueError`` that names the section, the key, the
bad value and what is valid. The workflow checks every configured section this way before any
job runs (:mod:`bnstudy.config.study`), and the CLI parses once at its edge, so measure code only
ever sees a checked, typed instance.

The options are declared here only: the config schema's section of a measure is derived from
its class (:meth:`Options.json_schema`: the keys, their types, choices, minimums, defaults and
descriptions, a field's ``doc`` metadata), so the strict key check and the defaults the config
is filled with are the class's own; the checks beyond type, choice and minimum are ``parse``'s.
"""

from __future__ import annotations

import math
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any, ClassVar


def choice(default, choices, doc: str = "", **kw):
    """A field whose value must be one of ``choices``."""
    return field(default=default, metadata={"choices": tuple(choices), "doc": doc}, **kw)


def at_least(default, minimum, doc: str = "", **kw):
    """A numeric field whose value must be ``>= minimum``."""
    return field(default=default, metadata={"minimum": minimum, "doc": doc}, **kw)


_JSON_TYPES = {"bool": "boolean", "int": "integer", "float": "number", "str": "string",
               "tuple": "array", "dict": "object"}


def plain(value):
    """A default as JSON/YAML has it (tuples as lists, recursively)."""
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def checked(cls, d: dict | None, what: str) -> dict:
    """A copy of ``d``; a ValueError names unknown keys and the valid ones for ``what``."""
    d = dict(d or {})
    known = [f.name for f in fields(cls)]
    unknown = sorted(set(d) - set(known))
    if unknown:
        raise ValueError(f"unknown {what} option(s) {unknown}; valid: {known}")
    return d


def _kind(annotation: str) -> str:
    """The checked kind of a field from its (string) annotation: 'bool', 'int', 'float', 'str',
    'tuple', 'dict' or 'any'."""
    a = annotation.replace(" ", "")
    for kind in ("bool", "int", "float", "str", "tuple", "dict"):
        if a == kind or a.startswith(f"{kind}["):
            return kind
    return "any"


def _bad(section: str, key: str, value, why: str) -> ValueError:
    shown = list(value) if isinstance(value, tuple) else value
    return ValueError(f"{section}.{key}={shown!r}: {why}")


def _typed(section: str, key: str, kind: str, value):
    if kind == "tuple":
        if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
            raise _bad(section, key, value, "need a list")
        return tuple(value)
    if kind == "bool" and not isinstance(value, bool):
        raise _bad(section, key, value, "need true or false")
    if kind == "int" and (isinstance(value, bool) or not isinstance(value, int)):
        raise _bad(section, key, value, "need an integer")
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
            raise _bad(section, key, value, "need a number")
        return float(value)
    if kind == "str" and not isinstance(value, str):
        raise _bad(section, key, value, "need a string")
    if kind == "dict" and not isinstance(value, dict):
        raise _bad(section, key, value, "need a mapping")
    return value


@dataclass(frozen=True)
class Options:
    """Base of typed options; subclasses set ``SECTION`` (the config section's name)."""

    SECTION: ClassVar[str] = "options"
    # a measure whose section is filled in with its defaults when the config omits it (the
    # measure always runs); others run only where the config has their section
    ALWAYS: ClassVar[bool] = False

    @classmethod
    def json_schema(cls) -> dict:
        """The config section's JSON schema, derived from the fields (keys, types, choices,
        minimums, defaults, descriptions); strict: unknown keys are refused."""
        props = {}
        for f in fields(cls):
            p: dict[str, Any] = {}
            kind = _kind(str(f.type))
            if kind in _JSON_TYPES:
                p["type"] = _JSON_TYPES[kind]
            if "choices" in f.metadata:
                p["enum"] = list(plain(f.metadata["choices"]))
            if "minimum" in f.metadata:
                p["minimum"] = f.metadata["minimum"]
            if f.default is not MISSING:
                p["default"] = plain(f.default)
            elif f.default_factory is not MISSING:
                p["default"] = plain(f.default_factory())
            if f.metadata.get("doc"):
                p["description"] = f.metadata["doc"]
            props[f.name] = p
        doc = (cls.__doc__ or "").strip().split("\n\n")[0]
        if doc.startswith(f"{cls.__name__}("):  # the signature dataclass writes: no docstring
            doc = ""
        out = {"type": "object", "additionalProperties": False, "properties": props,
               "description": " ".join(doc.split()) or f"the {cls.SECTION} options"}
        if cls.ALWAYS:
            out["default"] = {}
        return out

    @classmethod
    def parse(cls, d: dict | Options | None) -> Options:
        """A checked instance from a config section (``None``: all defaults)."""
        if isinstance(d, cls):
            return d
        if d is not None and not isinstance(d, dict):
            raise ValueError(f"{cls.SECTION} options must be a mapping, got {d!r}")
        d = checked(cls, d, cls.SECTION)
        for f in fields(cls):
            if f.name not in d:
                continue
            v = _typed(cls.SECTION, f.name, _kind(str(f.type)), d[f.name])
            if "choices" in f.metadata and v not in f.metadata["choices"]:
                raise _bad(cls.SECTION, f.name, v,
                           f"valid choices: {', '.join(map(str, f.metadata['choices']))}")
            if "minimum" in f.metadata and not v >= f.metadata["minimum"]:
                raise _bad(cls.SECTION, f.name, v, f"need a value >= {f.metadata['minimum']}")
            why = f.metadata["check"](v) if "check" in f.metadata else None
            if why:
                raise _bad(cls.SECTION, f.name, v, why)
            d[f.name] = v
        missing = [f.name for f in fields(cls)
                   if f.name not in d and f.default is MISSING and f.default_factory is MISSING]
        if missing:
            raise ValueError(f"{cls.SECTION} options lack {missing}")
        o = cls(**d)
        o.validate()
        return o

    def validate(self) -> None:
        """Cross-field rules and value checks beyond type, choices and minimum (override)."""

    def fail(self, key: str, why: str) -> None:
        """Raise the standard error for option ``key``."""
        raise _bad(self.SECTION, key, getattr(self, key), why)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


MAP_SEEDS_DOC = ("2-D maps: the seeds whose runs get map and boundary rows (a list of seed "
                 "numbers; \"all\": every run); the figures draw the smallest seed, the "
                 "summaries are computed for every run")


def seeds_field(doc: str = MAP_SEEDS_DOC):
    """A field naming a subset of a study's seeds: ``"all"`` (the default) or a list of
    distinct non-negative seed numbers (checked by :meth:`Options.parse`, :func:`seeds_problem`)."""
    return field(default="all", metadata={"doc": doc, "check": seeds_problem})


def seeds_problem(value) -> str | None:
    """Why ``value`` is not ``"all"`` or a non-empty list of distinct ints >= 0 (None: it is)."""
    if value == "all":
        return None
    ok = (isinstance(value, (list, tuple)) and len(value) > 0
          and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)
          and len(set(value)) == len(value))
    return None if ok else "need \"all\" or a non-empty list of distinct seed numbers >= 0"


def seed_selected(value, seed: int) -> bool:
    """Whether run seed ``seed`` is among the seeds ``value`` names (:func:`seeds_field`)."""
    return value == "all" or int(seed) in value


def config_key(default, schema: dict, doc: str = "", config: str | None = None,
               key: str | None = None, **kw):
    """A dataclass field that declares one key of a study config's entries (a model's, a
    training's): its default (``MISSING``: none), JSON-schema fragment, description and
    ``config`` mode (``required``; ``filled``: the default is written into the config; None:
    optional, nothing written); ``key``: the config's name for it when that is not the field's
    (a Python keyword: ``from``). :func:`bnstudy.config.entries.entry_schema` generates the
    entry's schema from these fields."""
    meta = ({"schema": schema, "doc": doc} | ({"config": config} if config else {})
            | ({"key": key} if key else {}))
    return field(default=default, metadata=meta, **kw)
