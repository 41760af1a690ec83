"""A dataset kind's declared option (type and range) and the error that names a bad one: what
:data:`bnstudy.data.OPTIONS` is made of, checked with the rest of a study config.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Option:
    """One declared dataset option: its type and range (checked with the rest of the config)."""

    type: str  # int | number | bool | str
    minimum: float | None = None
    exclusive_min: bool = False
    maximum: float | None = None  # exclusive
    nullable: bool = False
    even: bool = False
    choices: tuple[str, ...] = ()  # for type str: the valid values (empty: any string)

    def allowed(self) -> str:
        if self.choices:
            return "one of " + ", ".join(self.choices)
        what = {"int": "an integer", "number": "a finite number", "bool": "true or false",
                "str": "a string"}[self.type]
        if self.even:
            what = "an even integer"
        if self.minimum is not None:
            what += f" {'>' if self.exclusive_min else '>='} {self.minimum}"
        if self.maximum is not None:
            what += f" and < {self.maximum}"
        return what + (" or null" if self.nullable else "")

    def ok(self, v) -> bool:
        if v is None:
            return self.nullable
        if self.type == "bool":
            return isinstance(v, bool)
        if self.type == "str":
            return isinstance(v, str) and (not self.choices or v in self.choices)
        if isinstance(v, bool) or not isinstance(v, int if self.type == "int" else (int, float)):
            return False
        if not math.isfinite(v) or (self.even and v % 2):
            return False
        if self.minimum is not None and (v <= self.minimum if self.exclusive_min
                                         else v < self.minimum):
            return False
        return self.maximum is None or v < self.maximum


class BadOption(ValueError):
    """A dataset option that is unknown or outside its declared type and range."""

    def __init__(self, kind: str, key: str, value, allowed: str):
        self.kind, self.key, self.value, self.allowed = kind, key, value, allowed
        super().__init__(f"bad options for dataset {kind!r}: {key}={value!r}; allowed: {allowed}")
