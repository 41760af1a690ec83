"""Options of the ``ics`` measure (torch-free; checked by
:meth:`bnstudy.options.Options.parse`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from bnstudy import options


@dataclass(frozen=True)
class Options(options.Options):
    """``probe_size``: training points in the fixed probe batch of distributional ICS;
    ``layers``: ``"all"`` or 1-based layer indices (negative from the head) to measure;
    ``activation_units``: units per hidden layer whose normalizer-output quantiles the
    ``ics_activations`` table follows over training (0: no such table rows)."""

    SECTION: ClassVar[str] = "ics"

    probe_size: int = options.at_least(256, 1)
    layers: object = "all"
    activation_units: int = options.at_least(
        3, 0, doc="units sampled (fixed seed, once per run) in every hidden layer whose "
                  "normalizer-output quantiles on the probe batch are tabled per checkpoint "
                  "(ics_activations, Santurkar Figs. 2 and 6); 0 turns that table off")

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
