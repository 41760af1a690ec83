"""Per-layer weight norms at every checkpoint (a throwaway measure: tests/test_extension.py adds
it to a copy of the project as EXTENDING.md's recipe says, and runs the tiny study with it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from bnstudy import options

NAME = "weight_norms"
TABLES = ("weight_norms",)
DATASET_KINDS = None
ROWS = {"weight_norms": "one row per run, checkpoint and weight matrix"}
COLUMNS = {"weight_norms": {
    "step": "the checkpoint's step (0: the initialization)",
    "layer_name": "the weight's name in the model's state dict",
    "weight_norm": "the weight's Frobenius norm (ord 2) or largest absolute entry (ord 0)",
}}


@dataclass(frozen=True)
class Options(options.Options):
    """Frobenius (ord 2) or max-abs (ord 0) norm of each weight matrix at every checkpoint."""

    SECTION: ClassVar[str] = "weight_norms"

    ord: int = options.choice(2, (0, 2), doc="2: Frobenius norm; 0: largest absolute entry")


def run(run: dict, data, opts: Options, device) -> dict[str, list[dict]]:
    import torch

    opts = Options.parse(opts)
    rows = []
    for ck in run["checkpoints"]:
        for name, w in ck["model"].items():
            if name.endswith("weight") and w.dim() >= 2:
                value = w.norm() if opts.ord == 2 else w.abs().max()
                rows.append({"step": int(ck["step"]), "layer_name": name,
                             "weight_norm": float(value.to(torch.float64))})
    return {"weight_norms": rows}
