"""A column's allowed values (:class:`Range`), declared beside its type by the column modules and
checked on every read by :mod:`bnstudy.tables.ranges`. A leaf: it imports nothing of bnstudy, so
that the declarations can be read by everything that checks them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Range:
    """Allowed values of one column (see the module's docstring)."""

    low: float | None = None
    high: float | None = None
    finite: bool = False
    unless: str | None = None
    marks: str | None = None

    def describe(self) -> str:
        parts = []
        if self.finite:
            parts.append("finite" + (f" unless {self.unless}" if self.unless else ""))
        if self.low is not None and self.high is not None:
            parts.append(f"in [{self.low:g}, {self.high:g}]")
        elif self.low is not None:
            parts.append(f">= {self.low:g}")
        elif self.high is not None:
            parts.append(f"<= {self.high:g}")
        if self.marks:
            parts.append(f"true exactly in a run with a non-finite {self.marks}")
        return ", ".join(parts) or "any value"


NONNEGATIVE = Range(low=0)
FRACTION = Range(low=0, high=1)
FINITE = Range(finite=True)
