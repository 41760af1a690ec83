"""Options of the ``bn_jitter`` measure (torch-free; checked by
:meth:`bnstudy.options.Options.parse`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from bnstudy import options
from bnstudy.networks import memory

SAMPLING = ("without_replacement", "with_replacement")
CHECKPOINTS = ("all", "first_last")


@dataclass(frozen=True)
class Options(options.Options):
    """BN mini-batch jitter (BN-Explained 5, Prop. 2, Fig. 6): the statistics and decision
    boundary over mini-batches; omit the section to skip the measure (what each option
    means: config/README.md)."""

    SECTION: ClassVar[str] = "bn_jitter"

    batch_sizes: tuple = (16, 256)
    n_batches: int = 200
    sampling: str = "without_replacement"
    checkpoints: str = "all"
    realizations: int = 32
    grid_resolution: int = 100
    grid_margin: float = 0.1
    map_resolution: int = 40
    map_realizations: int = 8
    map_seeds: str | tuple = options.seeds_field()
    boundary_resolution: int = options.at_least(
        200, 2, doc="2-D classification data: grid points per axis of the fine grid whose "
        "boundary cells trace each drawn decision boundary (bn_jitter_boundary's population "
        "and realization rows)")
    seed: int = 0
    chunk_rows: int = 65536  # the most rows of a forward; memory_budget_mb may allow fewer
    memory_budget_mb: str | float = field(default=memory.AUTO, metadata={"doc": (
        "MiB a forward of the population pass or the boundary grids may hold (estimated "
        "activations and float64 copies): \"auto\" (a share of the CUDA device's free memory, "
        "2048 on the CPU) or a positive number")})

    def validate(self) -> None:
        def bad(key, why):
            self.fail(key, why)

        def is_int(v, lo):
            return isinstance(v, int) and not isinstance(v, bool) and v >= lo

        if (not self.batch_sizes or not all(is_int(b, 2) for b in self.batch_sizes)
                or len(set(self.batch_sizes)) != len(self.batch_sizes)):
            bad("batch_sizes", "need a non-empty list of distinct ints >= 2")
        for key, lo in (("n_batches", 2), ("realizations", 1), ("grid_resolution", 2),
                        ("map_resolution", 2), ("map_realizations", 0), ("seed", 0),
                        ("chunk_rows", 1)):
            if not is_int(getattr(self, key), lo):
                bad(key, f"need an int >= {lo}")
        if self.sampling not in SAMPLING:
            bad("sampling", f"valid choices: {list(SAMPLING)}")
        if self.checkpoints not in CHECKPOINTS:
            bad("checkpoints", f"valid choices: {list(CHECKPOINTS)}")
        if not memory.is_budget(self.memory_budget_mb):
            bad("memory_budget_mb", memory.VALID)
        m = self.grid_margin
        if isinstance(m, bool) or not isinstance(m, (int, float)) or not 0 <= m < float("inf"):
            bad("grid_margin", "need a finite number >= 0")
