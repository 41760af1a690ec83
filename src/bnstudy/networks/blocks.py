"""The network's building blocks: a hidden layer ``Block`` (linear/conv -> norm -> act), the
``Net`` container (features, then head) and the walks over them that measures use.

What a *layer* is for the measures: one :class:`Block` (its linear/conv map, its normalizer and
its activation), input to output; the head is the last layer. ``blocks`` lists them, ``maps``
their linear/conv maps.
"""

from __future__ import annotations

import torch
from torch import nn


class Block(nn.Module):
    """One hidden layer: ``linear/conv -> norm -> act``."""

    def __init__(self, linear: nn.Module, norm: nn.Module, act: nn.Module):
        super().__init__()
        self.linear, self.norm, self.act = linear, norm, act
        if hasattr(norm, "bind"):  # a norm computed from the map's weights (population_norm)
            norm.bind(linear)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.norm(self.linear(x)))


class Net(nn.Module):
    """``features`` (blocks, pools) then ``head``; flattens inputs for fully connected nets."""

    def __init__(self, features: nn.Sequential, head: nn.Module, input_shape, conv: bool):
        super().__init__()
        self.features, self.head = features, head
        self.input_shape, self.conv = tuple(input_shape), conv

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.conv:
            x = x.reshape(x.shape[0], *self.input_shape)
            h = self.features(x)
            h = torch.flatten(nn.functional.adaptive_avg_pool2d(h, 1), 1)
        else:
            h = self.features(x.reshape(x.shape[0], -1))
        return self.head(h)


def blocks(model: nn.Module) -> list[Block]:
    """The hidden blocks of a model, input to output."""
    return [m for m in model.modules() if isinstance(m, Block)]


def maps(model: nn.Module) -> list[nn.Module]:
    """The linear/conv maps, input to output: each block's, then the head unless it has no
    weights (the ``unit`` student has none)."""
    head = [model.head] if next(model.head.parameters(), None) is not None else []
    return [b.linear for b in blocks(model)] + head


def activation(slope: float) -> nn.Module:
    if slope == 1:
        return nn.Identity()
    return nn.ReLU() if slope == 0 else nn.LeakyReLU(slope)
