"""The network's building blocks: a hidden layer ``Block`` (linear/conv -> norm -> act), residual
blocks made of them, dropout after blocks, the ``Net`` container (features, then head) and the
walks over them that measures use.

What a *layer* is for the measures: one :class:`Block` (its linear/conv map, its normalizer and
its activation), input to output; the head is the last layer. ``blocks`` lists them, ``maps``
their linear/conv maps. A block's *pre-activation* is the output of :attr:`Block.preact`: the
normalizer's output, or, for the block that closes a residual connection before its activation,
the sum ``norm(linear(x)) + skip`` (its :class:`Join`), i.e. always the tensor the activation
folds. Partition density hooks ``preact``; ICS groups each block's parameters (``linear`` and
``norm``) as one layer.

Residual blocks (:class:`Residual`) are made of Blocks only, so every parameter belongs to
exactly one layer:

- ``add="pre"`` (He et al.'s BasicBlock, ResNet18): ``act(norm2(conv2(block1(x))) + s(x))``. The
  skip is added before the second block's activation, inside the second block (its ``join``), so
  that block's pre-activation (what partition density counts) is the sum. ``s`` is the identity,
  or a projection shortcut when the width or resolution changes: a Block
  ``conv1x1 -> norm -> identity`` of its own (a layer with a linear activation, like the DLN's,
  so it has no kink to count; its normalizer is injected like every other, and the trainer's
  normalizer hooks, e.g. population norm's statistics, treat it as any block). Order of the
  layers: first block, shortcut, second block (the shortcut feeds the second block's
  pre-activation).
- ``add="post"`` (Page's ResNet9): ``x + block2(block1(x))``, the sum taken after the second
  block's activation: both blocks are plain, and the addition, linear, adds no kink.

Dropout (:class:`StepDropout`) sits between blocks, never inside one; it draws its mask like a
stochastic normalizer (the noise of the training step, :mod:`bnstudy.networks.norms.noisy`), so
the passes a measure makes at one checkpoint (ICS's G and G', smoothness probes) see one mask.
"""

from __future__ import annotations

import torch
from torch import nn

from bnstudy.networks.norms.noisy import StepNoise
from bnstudy.networks.pooling import global_avg_pool

RESIDUAL_ADDS = ("pre", "post")


class Join(nn.Module):
    """``h + skip``: the pre-activation of a block that closes a residual connection."""

    def forward(self, h: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        return h + skip


class Block(nn.Module):
    """One hidden layer: ``linear/conv -> norm [+ skip] -> act``; ``join=True`` for the second
    block of a residual block whose skip is added before the activation."""

    def __init__(self, linear: nn.Module, norm: nn.Module, act: nn.Module, join: bool = False):
        super().__init__()
        self.linear, self.norm, self.act = linear, norm, act
        self.join = Join() if join else None
        if hasattr(norm, "bind"):  # a norm computed from the map's weights (population_norm)
            norm.bind(linear)

    @property
    def preact(self) -> nn.Module:
        """The module whose output is this block's pre-activation (what ``act`` folds)."""
        return self.norm if self.join is None else self.join

    def forward(self, x: torch.Tensor, skip: torch.Tensor | None = None) -> torch.Tensor:
        h = self.norm(self.linear(x))
        if self.join is not None:
            if skip is None:
                raise ValueError("this block closes a residual connection: it needs the skip")
            h = self.join(h, skip)
        elif skip is not None:
            raise ValueError("this block has no residual join: it takes no skip")
        return self.act(h)


class Residual(nn.Module):
    """A residual block of two Blocks (and an optional projection shortcut Block)."""

    def __init__(self, first: Block, second: Block, shortcut: Block | None = None,
                 add: str = "pre"):
        super().__init__()
        if add not in RESIDUAL_ADDS:
            raise ValueError(f"unknown residual add {add!r}; valid choices: "
                             f"{', '.join(RESIDUAL_ADDS)}")
        if (second.join is not None) != (add == "pre"):
            need = "with" if add == "pre" else "without"
            raise ValueError(f"add={add!r} needs a second block {need} a join")
        if shortcut is not None and add == "post":
            raise ValueError("a post-activation residual (add='post') has an identity skip")
        self.add = add
        self.first = first
        self.shortcut = shortcut  # registered between the blocks: the layers' order
        self.second = second

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.first(x)
        if self.add == "post":
            return x + self.second(h)
        return self.second(h, skip=x if self.shortcut is None else self.shortcut(x))


class StepDropout(StepNoise, nn.Module):
    """Dropout of probability ``p`` whose training-mode mask is a function of (seed, step).

    ``noise_seed`` starts at 0; the model builder draws it after initializing the weights, so a
    model with dropout has the same initial weights as without."""

    def __init__(self, p: float):
        super().__init__()
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p < 1:
            raise ValueError(f"dropout probability {p!r}: allowed: a number in (0, 1)")
        self.p = float(p)
        self.register_buffer("noise_seed", torch.zeros((), dtype=torch.long))
        self.register_buffer("noise_step", torch.zeros((), dtype=torch.long))

    def extra_repr(self) -> str:
        return f"p={self.p}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return x
        keep = torch.rand(x.shape, generator=self.generator(x.device), device=x.device,
                          dtype=x.dtype) >= self.p
        return x * keep / (1 - self.p)


def with_dropout(modules: list[nn.Module], p: float, after: type | tuple = Block
                 ) -> list[nn.Module]:
    """``modules`` with a :class:`StepDropout` after each module of type ``after`` (blocks; the
    residual blocks of a ResNet); unchanged for ``p = 0``."""
    out: list[nn.Module] = []
    for m in modules:
        out.append(m)
        if p > 0 and isinstance(m, after):
            out.append(StepDropout(p))
    return out


class Net(nn.Module):
    """``features`` (blocks, pools) then ``head``; flattens inputs for fully connected nets.
    Conv nets get ``(N, C, H, W)`` inputs; ``pool=True`` global-average-pools the features'
    output, ``pool=False`` takes it as it is (features that end flat: the ``cnn``, ``resnet9``)."""

    def __init__(self, features: nn.Sequential, head: nn.Module, input_shape, conv: bool,
                 pool: bool = True):
        super().__init__()
        self.features, self.head = features, head
        self.input_shape, self.conv, self.pool = tuple(input_shape), conv, pool

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.conv:
            x = x.reshape(x.shape[0], *self.input_shape)
            h = self.features(x)
            if self.pool:
                h = global_avg_pool(h)
        else:
            h = self.features(x.reshape(x.shape[0], -1))
        return self.head(h)


def blocks(model: nn.Module) -> list[Block]:
    """The hidden blocks of a model, input to output (a residual block's: first, shortcut,
    second)."""
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
