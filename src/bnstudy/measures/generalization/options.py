"""Options of the ``generalization`` measure (torch-free; checked by
:meth:`bnstudy.options.Options.parse`). What each option means: :mod:`.compute`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from bnstudy import options

BN_STATISTICS = ("running", "recomputed")


@dataclass(frozen=True)
class Options(options.Options):
    """Train and test loss and accuracy at the last checkpoint, and their gaps (every study
    measures it)."""

    SECTION: ClassVar[str] = "generalization"
    ALWAYS: ClassVar[bool] = True  # every study measures generalization

    bn_statistics: str = options.choice("running", BN_STATISTICS)
