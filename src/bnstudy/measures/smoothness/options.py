"""Options of the ``smoothness`` measure (torch-free; checked by
:meth:`bnstudy.options.Options.parse`, with the probe ranges' own rules)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import ClassVar

import numpy as np

from bnstudy import options
from bnstudy.networks.archs import ARCHS

SPACINGS = ("log", "linear")
BN_STATISTICS = ("batch", "running")


def _range(value, what: str) -> tuple[float, float]:
    try:
        lo, hi = (float(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a pair [min, max] of numbers, got {value!r}") from None
    if not (0 < lo <= hi and math.isfinite(hi)):
        raise ValueError(f"{what} must satisfy 0 < min <= max < inf, got {value!r}")
    return lo, hi


@dataclass(frozen=True)
class Options(options.Options):
    """Loss-landscape smoothness along the gradient (Santurkar 3.2, App. A.2.2): loss
    variation, gradient predictiveness, effective beta-smoothness; omit the section to skip
    the measure."""

    SECTION: ClassVar[str] = "smoothness"

    multipliers: tuple = (0.5, 4.0)
    multipliers_by_arch: dict = field(default_factory=lambda: {"dln": (0.01, 30.0)})
    n_probes: int = 8
    spacing: str = "log"
    bn_statistics: str = "batch"
    hessian: bool = False
    hessian_iters: int = 50
    hessian_tol: float = 1e-2
    hessian_max_params: int = 200_000
    seed: int = 0

    @classmethod
    def parse(cls, d: dict | Options | None) -> Options:
        if isinstance(d, cls):
            return d
        d = options.checked(cls, d, "smoothness")
        if "multipliers" in d:
            d["multipliers"] = _range(d["multipliers"], "smoothness.multipliers")
        if "multipliers_by_arch" in d:
            by = d["multipliers_by_arch"] or {}
            bad = sorted(set(by) - set(ARCHS))
            if bad:
                raise ValueError(f"smoothness.multipliers_by_arch: unknown arch(s) {bad}; "
                                 f"valid choices: {', '.join(ARCHS)}")
            d["multipliers_by_arch"] = {
                a: _range(r, f"smoothness.multipliers_by_arch.{a}") for a, r in by.items()}
        o = cls(**d)
        if o.spacing not in SPACINGS:
            raise ValueError(f"smoothness.spacing={o.spacing!r}: valid choices: "
                             f"{', '.join(SPACINGS)}")
        if o.bn_statistics not in BN_STATISTICS:
            raise ValueError(f"smoothness.bn_statistics={o.bn_statistics!r}: valid choices: "
                             f"{', '.join(BN_STATISTICS)}")
        for name, low in (("n_probes", 1), ("hessian_iters", 1), ("seed", 0)):
            v = getattr(o, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ValueError(f"smoothness.{name}={v!r}: need an integer >= {low}")
        if (isinstance(o.hessian_max_params, bool) or not isinstance(o.hessian_max_params, int)
                or o.hessian_max_params < 0):
            raise ValueError(f"smoothness.hessian_max_params={o.hessian_max_params!r}: need an "
                             "integer >= 0")
        if not (isinstance(o.hessian_tol, (int, float)) and o.hessian_tol >= 0):
            raise ValueError(f"smoothness.hessian_tol={o.hessian_tol!r}: need a number >= 0")
        if not isinstance(o.hessian, bool):
            raise ValueError(f"smoothness.hessian={o.hessian!r}: need true or false")
        return o

    def multiplier_values(self, arch: str | None = None) -> np.ndarray:
        """The probe multipliers ``m`` for a model arch (per-arch range, else the default)."""
        lo, hi = self.multipliers_by_arch.get(arch, self.multipliers)
        space = np.geomspace if self.spacing == "log" else np.linspace
        return space(lo, hi, self.n_probes)

    def to_dict(self) -> dict:
        return asdict(self)
