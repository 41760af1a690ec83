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
