"""The normalization layers and the normalizer registry's entries, one module per family.

:func:`entry_modules` reads, without importing torch, which module defines each registered
normalizer (its ``NORMALIZERS`` tuple): the workflow's code hash of a training run covers its own
normalizer's module (:meth:`bnstudy.planning.plan.Plan.train_code`).
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

HERE = Path(__file__).resolve().parent


@cache
def entry_modules() -> dict[str, str]:
    """normalizer name -> its module's file, relative to ``src/bnstudy``."""
    out: dict[str, str] = {}
    for path in sorted(HERE.glob("*.py")):
        for node in ast.parse(path.read_text(), str(path)).body:
            if (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and getattr(node.targets[0], "id", None) == "NORMALIZERS"):
                for name in ast.literal_eval(node.value):
                    if name in out:
                        raise ValueError(f"normalizer {name!r} is named by {out[name]} and "
                                         f"{path.name}")
                    out[name] = f"networks/norms/{path.name}"
    return out
