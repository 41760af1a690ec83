"""Shared checking of a measure's options dict against its options dataclass."""

from __future__ import annotations

from dataclasses import fields


def checked(cls, d: dict | None, what: str) -> dict:
    """A copy of ``d``; a ValueError names unknown keys and the valid ones for ``what``."""
    d = dict(d or {})
    known = [f.name for f in fields(cls)]
    unknown = sorted(set(d) - set(known))
    if unknown:
        raise ValueError(f"unknown {what} option(s) {unknown}; valid: {known}")
    return d


def tuples(d: dict, keys, what: str) -> dict:
    """``d`` with the list options ``keys`` made tuples; a string or scalar is named as an error."""
    for key in keys:
        if key in d:
            v = d[key]
            if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
                raise ValueError(f"{what} {key} must be a list, got {v!r}")
            d[key] = tuple(v)
    return d
