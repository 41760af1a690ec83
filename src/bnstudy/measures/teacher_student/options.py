"""Options of the ``teacher_student`` measure (torch-free; checked by
:meth:`bnstudy.options.Options.parse`). What each option means: :mod:`.compute`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from bnstudy import options
from bnstudy.measures.teacher_student.curves import BN_CURVES
from bnstudy.theory.luo import CONVENTIONS


@dataclass(frozen=True)
class Options(options.Options):
    """Luo et al. §4 teacher-student generalization error against the closed forms
    (teacher_student datasets); omit the section to skip the measure."""

    SECTION: ClassVar[str] = "teacher_student"

    bn_statistics: str = options.choice("running", ("running", "recomputed"))
    bn_curve: str = options.choice("shrinkage", BN_CURVES)
    convention: str = options.choice("loss", CONVENTIONS)
    zeta_exact: bool = False
    checkpoints: str = options.choice("all", ("all", "last"))
    erm: bool = True
