"""Options of the ``partition_density`` measure (torch-free; checked by
:meth:`bnstudy.options.Options.parse`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

from bnstudy import options
from bnstudy.networks import memory

POINT_SETS = ("train", "test", "random")
METHODS = ("distance", "polytope")
BN_STATISTICS = ("train_set", "batch", "running")


@dataclass(frozen=True)
class Options(options.Options):
    """Partition density (BN-Explained 3.3, Figs. 3-4): hidden units whose boundary passes
    within radius r of the data, test and random points; omit the section to skip the
    measure (what each option means: config/README.md)."""

    SECTION: ClassVar[str] = "partition_density"

    radii: tuple = (0.01, 0.03, 0.1)
    method: str = "distance"
    n_vertices: int = 40
    n_points: int = 100
    point_sets: tuple = POINT_SETS
    bn_statistics: str = "train_set"
    seed: int = 0
    chunk_rows: int = 65536  # the most rows of a pass; memory_budget_mb may allow fewer
    memory_budget_mb: str | float = field(default=memory.AUTO, metadata={"doc": (
        "MiB a pass's estimated activations may hold: \"auto\" (a share of the CUDA device's "
        "free memory, 2048 on the CPU) or a positive number")})
    maps: bool = True
    map_seeds: str | tuple = options.seeds_field()
    map_resolution: int = 60
    map_radius: float = 0.03
    map_margin: float = 0.1
    boundary_resolution: int = options.at_least(
        200, 0, doc="2-D maps: cells per axis of the exact boundary grid (partition_boundaries "
        "table); 0: no boundary table")

    def validate(self) -> None:
        def bad(key, why):
            self.fail(key, why)

        if not self.radii or not all(_positive(r) for r in self.radii):
            bad("radii", "need a non-empty list of positive finite numbers")
        if not isinstance(self.n_vertices, int) or self.n_vertices < 2 or self.n_vertices % 2:
            bad("n_vertices", "need an even integer >= 2 (two vertices per direction)")
        for key in ("n_points", "chunk_rows", "seed"):
            if not isinstance(getattr(self, key), int) or getattr(self, key) < (key != "seed"):
                bad(key, "need a " + ("non-negative" if key == "seed" else "positive") + " int")
        wrong = [s for s in self.point_sets if s not in POINT_SETS]
        if not self.point_sets or wrong or len(set(self.point_sets)) != len(self.point_sets):
            bad("point_sets", f"need distinct names among valid choices {list(POINT_SETS)}")
        if not memory.is_budget(self.memory_budget_mb):
            bad("memory_budget_mb", memory.VALID)
        if self.method not in METHODS:
            bad("method", f"valid choices: {list(METHODS)}")
        if self.bn_statistics not in BN_STATISTICS:
            bad("bn_statistics", f"valid choices: {list(BN_STATISTICS)}")
        if not isinstance(self.maps, bool):
            bad("maps", "need true or false")
        if not isinstance(self.map_resolution, int) or self.map_resolution < 2:
            bad("map_resolution", "need an int >= 2")
        if not _positive(self.map_radius):
            bad("map_radius", "need a positive finite number")
        if not (isinstance(self.map_margin, (int, float)) and 0 <= self.map_margin < math.inf):
            bad("map_margin", "need a finite number >= 0")


def _positive(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < math.inf



