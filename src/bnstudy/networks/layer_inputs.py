"""Stream the inputs of one module of a network over a data set, in chunks.

Population statistics (precise BN, population norm, Proposition 2's moments, bn_init) all need
the input of one layer over the whole training set, layer after layer; the forward pass stops
at that layer, so nothing after it is computed.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn


class _Stop(Exception):
    """Raised by the hook once the module's input is captured: skip the rest of the forward."""


def for_each_input(model: nn.Module, x: torch.Tensor, chunk: int,
                   grab: Callable[[torch.Tensor], None], module: nn.Module) -> None:
    """Run ``x`` through ``model`` in chunks, calling ``grab`` on ``module``'s input only."""
    def hook(mod, inp):
        grab(inp[0])
        raise _Stop

    handle = module.register_forward_pre_hook(hook)
    try:
        for i in range(0, len(x), chunk):
            try:
                model(x[i: i + chunk])
            except _Stop:
                pass
    finally:
        handle.remove()
