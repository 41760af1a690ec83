"""The Salimans-Kingma-style CNN of Luo et al. §5 (App. A): ``conv(3,32)-conv(3,32)-conv(3,64)-
conv(3,64)-pool(2,2)-fc(512)-fc(10)``.

Each ``conv(3, c)`` is a block ``conv3x3 (padding 1, so the convs keep the image size; the paper
does not say) -> norm -> act``, ``pool(2,2)`` a 2x2 max-pool of stride 2, ``fc(512)`` a fully
connected block ``linear -> norm ("fc" kind) -> act`` on the flattened pooled features, and
``fc(10)`` the linear head. The normalizer is injected into all five hidden blocks, as in the
other models. ``width_mult`` scales the four conv widths and the fc width (like ``vgg``'s), so a
CPU study can shrink it; ``dropout`` adds a :class:`~bnstudy.networks.blocks.StepDropout` after
each hidden block. On 32x32 inputs the fc block has 64 * 16 * 16 inputs (8.4M of its 8.7M
parameters at full width); on the 8x8 digits 64 * 4 * 4.
"""

from __future__ import annotations

from torch import nn

from bnstudy.networks.blocks import Block, Net, activation, with_dropout

CONVS = (32, 32, 64, 64)
FC = 512


def cnn(cfg, nz, input_shape, out_dim: int) -> Net:
    """Luo et al.'s §5 CNN (module docstring), widths times ``cfg.width_mult``."""
    if len(input_shape) != 3:
        raise ValueError(f"cnn needs (C, H, W) inputs, got input shape {tuple(input_shape)}")
    if min(input_shape[1:]) < 2:
        raise ValueError(f"cnn's 2x2 pool needs images of at least 2x2, got {tuple(input_shape)}")
    c, h, w = (int(v) for v in input_shape)
    layers: list[nn.Module] = []
    for spec in CONVS:
        width = max(1, round(spec * cfg.width_mult))
        conv = nz.wrap(nn.Conv2d(c, width, 3, padding=1, bias=nz.linear_bias))
        layers.append(Block(conv, nz.layer(width, "conv"), activation(cfg.slope)))
        c = width
    layers.append(nn.MaxPool2d(2))
    layers.append(nn.Flatten())
    fc = max(1, round(FC * cfg.width_mult))
    lin = nz.wrap(nn.Linear(c * (h // 2) * (w // 2), fc, bias=nz.linear_bias))
    layers.append(Block(lin, nz.layer(fc, "fc"), activation(cfg.slope)))
    features = nn.Sequential(*with_dropout(layers, cfg.dropout))
    return Net(features, nn.Linear(fc, out_dim), input_shape, conv=True, pool=False)
