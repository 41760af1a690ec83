"""Options of the ``ics`` measure (torch-free; checked by
:meth:`bnstudy.options.Options.parse`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from bnstudy import options


@dataclass(frozen=True)
class Options(options.Options):
    """``probe_size``: training points in the fixed probe batch of distributional ICS;
    ``layers``: ``"all"`` or 1-based layer indices (negative from the head) to measure."""

    SECTION: ClassVar[str] = "ics"

    probe_size: int = options.at_least(256, 1)
    layers: object = "all"

    def validate(self) -> None:
        layers = self.layers
        if isinstance(layers, list):
            object.__setattr__(self, "layers", tuple(layers))
            layers = self.layers
        if layers != "all" and not (
            isinstance(layers, tuple) and layers
            and all(isinstance(k, int) and not isinstance(k, bool) and k != 0 for k in layers)
        ):
            self.fail("layers", "need 'all' or a non-empty list of non-zero layer indices "
                                "(1-based, negative from the head)")
