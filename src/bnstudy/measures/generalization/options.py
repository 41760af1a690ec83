"""Options of the ``generalization`` measure (torch-free; checked by
:meth:`bnstudy.options.Options.parse`). What each option means: :mod:`.compute`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from bnstudy import options

BN_STATISTICS = ("running", "recomputed")


@dataclass(frozen=True)
class Options(options.Options):
    SECTION: ClassVar[str] = "generalization"

    bn_statistics: str = options.choice("running", BN_STATISTICS)
