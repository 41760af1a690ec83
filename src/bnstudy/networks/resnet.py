"""Residual networks for small images, with the normalizer injected into every conv layer.

``width`` (the model config's, 64 in the papers) is the first stage's channels; the later stages
have 2, 4 and 8 times as many, so a CPU study shrinks a whole ResNet with one number. Every conv
is ``nz.wrap(Conv2d(..., bias=nz.linear_bias))`` followed by ``nz.layer(channels, "conv")``, as in
the other models; :mod:`bnstudy.networks.blocks` says what a layer of a residual block is.
``dropout`` adds a :class:`~bnstudy.networks.blocks.StepDropout` after each residual block (Luo
et al. §5, Fig. 2g-h: 0.1 after each residual block of a ResNet18).

- ``resnet9``: Page's DAWNBench ResNet9 (myrtle.ai, "How to train your ResNet"): prep
  ``conv(w)``; layer1 ``conv(2w)``, 2x2 max-pool, residual of two ``conv(2w)``; layer2
  ``conv(4w)``, pool; layer3 ``conv(8w)``, pool, residual of two ``conv(8w)``; global max-pool
  (Page's 4x4 max-pool on 32x32 inputs), a bias-free linear head whose output is scaled by 0.125.
  Each conv is a block ``conv3x3 -> norm -> ReLU`` (pool after the activation); the residual adds
  its input *after* the second block's activation (``add="post"``). BN-Explained uses it for
  partition density at initialization (Fig. 4) and the jitter experiment (§5).
- ``resnet18``: the CIFAR ResNet18 (He et al. 2016 BasicBlocks with a 3x3 stride-1 stem and no
  stem pooling, as in the widely used CIFAR variant, e.g. kuangliu/pytorch-cifar): stem
  ``conv3x3(w)``; four stages of two BasicBlocks of widths ``w, 2w, 4w, 8w``, stride 2 in the
  first block of stages 2-4; global average pooling; linear head. A BasicBlock is
  ``ReLU(norm(conv(block1(x))) + s(x))`` (``add="pre"``) with a projection shortcut ``s`` =
  ``conv1x1(stride) -> norm`` where the width or resolution changes, else the identity. With BN
  and ``width: 64`` it has 11,173,962 parameters (Luo et al. §5).

Both work on 8x8 inputs too (the digits images): resnet9's three 2x2 pools take 8x8 to 1x1 and
its final pool is global, resnet18's three stride-2 stages take 8x8 to 1x1 before the global
average; so the CPU studies use them as they are, shrunk with ``width`` (e.g. 8), rather than a
separate small architecture. Inputs must be at least 8x8 (resnet9: every pool halves).
"""

from __future__ import annotations

import torch
from torch import nn

from bnstudy.networks.blocks import Block, Net, Residual, activation, with_dropout
from bnstudy.networks.pooling import GlobalMaxPool

RESNET9_HEAD_SCALE = 0.125


class ScaledLinear(nn.Linear):
    """A linear map whose output is multiplied by a fixed ``scale`` (ResNet9's ``Mul(0.125)``)."""

    def __init__(self, d_in: int, d_out: int, scale: float, bias: bool = False):
        super().__init__(d_in, d_out, bias=bias)
        self.scale = float(scale)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, scale={self.scale}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) * self.scale


def _conv_block(nz, c_in: int, c_out: int, slope: float, kernel: int = 3, stride: int = 1,
                act: nn.Module | None = None, join: bool = False) -> Block:
    conv = nz.wrap(nn.Conv2d(c_in, c_out, kernel, stride=stride, padding=kernel // 2,
                             bias=nz.linear_bias))
    return Block(conv, nz.layer(c_out, "conv"), activation(slope) if act is None else act,
                 join=join)


def _image_shape(arch: str, input_shape, min_side: int) -> int:
    if len(input_shape) != 3:
        raise ValueError(f"{arch} needs (C, H, W) inputs, got input shape {tuple(input_shape)}")
    if min(input_shape[1:]) < min_side:
        raise ValueError(f"{arch} needs images of at least {min_side}x{min_side}, got input "
                         f"shape {tuple(input_shape)}")
    return int(input_shape[0])


def resnet9(cfg, nz, input_shape, out_dim: int) -> Net:
    """Page's ResNet9 (module docstring), first-stage width ``cfg.width``."""
    c = _image_shape("resnet9", input_shape, 8)
    w, s = cfg.width, cfg.slope

    def residual(ch: int) -> Residual:
        return Residual(_conv_block(nz, ch, ch, s), _conv_block(nz, ch, ch, s), add="post")

    layers = [_conv_block(nz, c, w, s),
              _conv_block(nz, w, 2 * w, s), nn.MaxPool2d(2), residual(2 * w),
              _conv_block(nz, 2 * w, 4 * w, s), nn.MaxPool2d(2),
              _conv_block(nz, 4 * w, 8 * w, s), nn.MaxPool2d(2), residual(8 * w)]
    features = nn.Sequential(*with_dropout(layers, cfg.dropout, Residual), GlobalMaxPool())
    head = ScaledLinear(8 * w, out_dim, RESNET9_HEAD_SCALE, bias=False)
    return Net(features, head, input_shape, conv=True, pool=False)


def basic_block(nz, c_in: int, c_out: int, stride: int, slope: float) -> Residual:
    """He et al.'s BasicBlock: two 3x3 conv blocks, the skip added before the second ReLU."""
    first = _conv_block(nz, c_in, c_out, slope, stride=stride)
    second = _conv_block(nz, c_out, c_out, slope, join=True)
    shortcut = None
    if stride != 1 or c_in != c_out:
        shortcut = _conv_block(nz, c_in, c_out, slope, kernel=1, stride=stride, act=nn.Identity())
    return Residual(first, second, shortcut, add="pre")


def resnet18(cfg, nz, input_shape, out_dim: int) -> Net:
    """The CIFAR ResNet18 (module docstring), first-stage width ``cfg.width``."""
    c = _image_shape("resnet18", input_shape, 1)
    w, s = cfg.width, cfg.slope
    layers: list[nn.Module] = [_conv_block(nz, c, w, s)]
    c_in = w
    for stage, c_out in enumerate((w, 2 * w, 4 * w, 8 * w)):
        for i in range(2):
            layers.append(basic_block(nz, c_in, c_out, 2 if stage > 0 and i == 0 else 1, s))
            c_in = c_out
    features = nn.Sequential(*with_dropout(layers, cfg.dropout, Residual))
    return Net(features, nn.Linear(c_in, out_dim), input_shape, conv=True)
