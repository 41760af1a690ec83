"""A JSON-schema error of a study config in words: the key path, the bad value and what the
failed keyword allows (:func:`bnstudy.config.loader.validate_schema` makes one paragraph of
them)."""

from __future__ import annotations

import difflib


def key_path(parts) -> str:
    """The dotted key path of ``parts`` (list indices as numbers)."""
    return ".".join(str(p) for p in parts) or "(top level)"


def allowed(error) -> str:
    """What the failed schema keyword allows, in words."""
    kw, val, sch = error.validator, error.validator_value, error.schema
    if kw == "additionalProperties":
        if "properties" not in sch:
            return "no further keys"
        keys = sorted(sch["properties"])
        near = sorted({m for k in error.instance if k not in keys
                       for m in difflib.get_close_matches(str(k), keys, n=1)})
        hint = f" (did you mean {', '.join(near)}?)" if near else ""
        return f"the keys {', '.join(keys)}{hint}"
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
        return " or ".join(describe(s) for s in val)
    if kw == "pattern":
        return sch.get("description") or f"text matching {val}"
    if kw == "propertyNames":
        return f"names matching {sch['propertyNames'].get('pattern', sch['propertyNames'])}"
    if kw in ("minItems", "maxItems", "minProperties", "uniqueItems", "multipleOf", "not"):
        return f"{kw} {val}"
    return f"{kw}: {val}"


def describe(s: dict) -> str:
    """One schema alternative (of anyOf, oneOf) in words."""
    if "const" in s:
        return repr(s["const"])
    if "enum" in s:
        return "one of " + ", ".join(map(repr, s["enum"]))
    bits = [s.get("type", "value")]
    for kw, op in (("minimum", ">="), ("exclusiveMinimum", ">")):
        if kw in s:
            bits.append(f"{op} {s[kw]}")
    return " ".join(map(str, bits))


def bad_value(error) -> str:
    """The value that failed, in words (its repr cut at 80 characters)."""
    if error.validator == "additionalProperties":
        known = set(error.schema.get("properties", {}))
        extra = sorted((k for k in error.instance if k not in known), key=str)
        return f"unknown key(s) {extra}"
    if error.validator == "required":
        return error.message
    text = repr(error.instance)
    return "got " + (text if len(text) <= 80 else text[:77] + "...")
