"""The normalizer registry: every normalization layer the study compares, by name.

Models never test for a normalizer by name. They receive a :class:`Normalizer` (the
``norm_layer`` pattern) and call it at each hidden layer::

    lin = norm.wrap(nn.Linear(d_in, d_out, bias=norm.linear_bias))
    block = [lin, norm.layer(d_out, "fc"), activation]

``layer(num_features, kind)`` builds the module that sits between the linear/conv map and the
activation (``kind`` is ``"fc"`` for (N, C) inputs and ``"conv"`` for (N, C, H, W) inputs);
``wrap(module)`` may reparametrize the linear/conv map itself (weight normalization does);
``linear_bias`` says whether that map keeps its own bias (BN's beta makes it redundant, and
BN-Explained's fixed-affine BN has no bias at all).

Adding a normalizer is one :func:`register` call. Unknown names fail with the list of valid ones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from torch import nn
from torch.nn.utils import parametrizations


def _identity_wrap(module: nn.Module) -> nn.Module:
    return module


@dataclass(frozen=True)
class Normalizer:
    """A named normalization scheme, injected into models."""

    name: str
    build: Callable[[int, str], nn.Module]
    wrap: Callable[[nn.Module], nn.Module] = _identity_wrap
    linear_bias: bool = True
    description: str = ""
    uses_batch_statistics: bool = False
    options: dict = field(default_factory=dict)

    def layer(self, num_features: int, kind: str) -> nn.Module:
        if kind not in ("fc", "conv"):
            raise ValueError(f"layer kind must be 'fc' or 'conv', got {kind!r}")
        return self.build(num_features, kind)


REGISTRY: dict[str, Normalizer] = {}


def register(norm: Normalizer) -> Normalizer:
    if norm.name in REGISTRY:
        raise ValueError(f"normalizer {norm.name!r} is already registered")
    REGISTRY[norm.name] = norm
    return norm


def get(name: str) -> Normalizer:
    try:
        return REGISTRY[name]
    except KeyError:
        valid = ", ".join(sorted(REGISTRY))
        raise ValueError(f"unknown normalizer {name!r}; valid choices: {valid}") from None


def names() -> list[str]:
    return sorted(REGISTRY)


def _batchnorm(affine: bool) -> Callable[[int, str], nn.Module]:
    def build(c: int, kind: str) -> nn.Module:
        cls = nn.BatchNorm1d if kind == "fc" else nn.BatchNorm2d
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


def _identity(c: int, kind: str) -> nn.Module:
    return nn.Identity()


def _weight_norm(module: nn.Module) -> nn.Module:
    return parametrizations.weight_norm(module, name="weight", dim=0)


register(Normalizer("none", _identity, description="no normalization (the 'standard' network)"))
register(
    Normalizer(
        "batchnorm",
        _batchnorm(affine=True),
        linear_bias=False,
        uses_batch_statistics=True,
        description="BatchNorm with learned gamma and beta (Ioffe & Szegedy)",
    )
)
register(
    Normalizer(
        "batchnorm_fixed_affine",
        _batchnorm(affine=False),
        linear_bias=False,
        uses_batch_statistics=True,
        description="BatchNorm with gamma=1, beta=0 not learned (BN-Explained's setting)",
    )
)
register(Normalizer("layernorm", _layernorm, description="LayerNorm over features"))
register(Normalizer("groupnorm", _groupnorm, description="GroupNorm (8 groups or fewer)"))
register(
    Normalizer(
        "weightnorm",
        _identity,
        wrap=_weight_norm,
        description="weight normalization w = g v/||v|| of each linear/conv map (Salimans)",
    )
)


def batchnorm_modules(model: nn.Module) -> list[nn.modules.batchnorm._BatchNorm]:
    """All BatchNorm layers of a model (the layers whose buffers measures must leave alone)."""
    return [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
