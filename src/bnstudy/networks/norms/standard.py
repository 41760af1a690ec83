"""The standard normalizers: none, BatchNorm (learned or fixed affine), LayerNorm, GroupNorm,
InstanceNorm, weight normalization, and BN-Explained's bias-initialization baselines."""

from __future__ import annotations

from torch import nn

from bnstudy.networks.norms import layers as nl
from bnstudy.networks.norms.registry import (
    BN,
    Normalizer,
    identity,
    int_at_least,
    number_at_least,
    register,
    require,
    weight_norm,
)

NORMALIZERS = ("none", "batchnorm", "batchnorm_fixed_affine", "layernorm", "groupnorm",
               "instancenorm", "weightnorm", "zero_bias", "random_bias")


def _batchnorm(affine: bool):
    def build(c: int, kind: str) -> nn.Module:
        cls = nl.BatchNorm1d if kind == "fc" else nl.BatchNorm2d
        return cls(c, affine=affine)

    return build


def _layernorm(c: int, kind: str) -> nn.Module:
    if kind == "fc":
        return nn.LayerNorm(c)
    # Channel-and-space layer norm for conv maps: GroupNorm with one group is exactly that.
    return nn.GroupNorm(1, c)


def _groupnorm(c: int, kind: str, groups: int = 8) -> nn.Module:
    g = groups
    while c % g:
        g -= 1
    return nn.GroupNorm(g, c)


def _instancenorm(c: int, kind: str) -> nn.Module:
    if kind != "conv":
        raise ValueError("instancenorm normalizes each channel over H, W of one sample: it needs "
                         "conv layers (arch vgg), not fully connected ones")
    return nn.InstanceNorm2d(c, affine=True)


register(Normalizer("none", identity, description="no normalization (the 'standard' network)"))
register(Normalizer("batchnorm", _batchnorm(affine=True), **BN,
                    description="BatchNorm with learned gamma and beta (Ioffe & Szegedy)"))
register(Normalizer(
    "batchnorm_fixed_affine", _batchnorm(affine=False), **BN,
    description="BatchNorm with gamma=1, beta=0 not learned (BN-Explained's setting)"))
register(Normalizer("layernorm", _layernorm, description="LayerNorm over features"))
register(Normalizer(
    "groupnorm", _groupnorm, options={"groups": 8},
    check=lambda o: require(o, "groups", int_at_least(1), "an int >= 1"),
    option_docs={"groups": "the number of groups: the largest divisor of the width <= groups"},
    description="GroupNorm (the largest divisor of the width <= groups, 8 by default)"))
register(Normalizer("instancenorm", _instancenorm, linear_bias=False,
                    description="InstanceNorm (per sample and channel over H, W; conv only)"))
register(Normalizer(
    "weightnorm", identity, wrap=weight_norm,
    description="weight normalization w = g v/||v|| of each linear/conv map (Salimans)"))
register(Normalizer("zero_bias", identity, bias_init="zero",
                    description="no normalization, zero biases (BN-Explained §3.3)"))
register(Normalizer(
    "random_bias", identity, bias_init="random", options={"bias_std": None},
    check=lambda o: require(o, "bias_std", lambda v: v is None or number_at_least(0)(v),
                            "null or a number >= 0"),
    option_docs={"bias_std": "the biases' standard deviation (null: the model config's bias_std)"},
    description="no normalization, biases ~ N(0, bias_std^2) (BN-Explained §3.3)"))
