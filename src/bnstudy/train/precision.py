"""Training precision.

``precision`` (a training option): ``fp32`` (default) trains and evaluates in float32;
``bf16`` runs the forward passes of training and of the trainer's evaluations under
``torch.autocast(dtype=bfloat16)`` (matmuls and convolutions in bfloat16, losses in float32).
Every normalizer's statistics stay float32 under autocast (torch's BN, LayerNorm, GroupNorm by
themselves; the package's own layers by
:class:`bnstudy.networks.norms.float32.Float32Statistics`), so bf16 cannot make normalizers differ
by how they round. Parameters, gradients, optimizer state, checkpoints and every measure stay
float32: measures never use autocast. The option is part of the run spec, hence of each table's
provenance.

The optimizer and its fused CUDA path: :func:`bnstudy.train.loop.make_optimizer`.
"""

from __future__ import annotations

import contextlib

import torch

PRECISIONS = ("fp32", "bf16")


def check(value) -> None:
    """A ValueError naming a bad ``precision`` value of a training config."""
    if value not in PRECISIONS:
        raise ValueError(f"training precision={value!r}: allowed: {', '.join(PRECISIONS)}")


def autocast(device: torch.device, precision: str):
    """The context of a training or evaluation forward pass at ``precision``."""
    check(precision)
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)
