"""BatchNorm's variants built from :mod:`bnstudy.networks.norms.layers`: ghost BN (virtual
batches), Santurkar's l_p normalizations, and Luo's weight normalization + mean-only or
variance-only BN."""

from __future__ import annotations

import math

from torch import nn

from bnstudy.networks.norms import layers as nl
from bnstudy.networks.norms.registry import (
    BN,
    Normalizer,
    check_eps,
    int_at_least,
    register,
    require,
    weight_norm,
)

NORMALIZERS = ("ghost_batchnorm", "l1norm", "l2norm", "linfnorm", "weightnorm_meanonly_bn",
               "weightnorm_varonly_bn")


def _lp(p: float):
    def build(c: int, kind: str, eps: float) -> nn.Module:
        return nl.LpBatchNorm(c, p, eps=eps)

    return build


register(Normalizer(
    "ghost_batchnorm", lambda c, kind, **o: nl.GhostBatchNorm(c, **o), **BN,
    options={"ghost_batch_size": 16},
    check=lambda o: require(o, "ghost_batch_size", int_at_least(2), "an int >= 2"),
    option_docs={"ghost_batch_size": "virtual batch size of the training-mode statistics"},
    description="BatchNorm over virtual batches (BN-Explained's noise-controlled BN)"))
for _name, _p in (("l1norm", 1.0), ("l2norm", 2.0), ("linfnorm", math.inf)):
    register(Normalizer(
        _name, _lp(_p), **BN, options={"eps": 1e-5}, check=check_eps,
        option_docs={"eps": "added to the batch's l_p scale before dividing by it"},
        description=f"Santurkar's l_{'inf' if _p == math.inf else int(_p)} normalization: "
                    "batch-mean centering, division by the batch average l_p norm"))
register(Normalizer(
    "weightnorm_meanonly_bn", lambda c, kind: nl.MeanOnlyBatchNorm(c), wrap=weight_norm,
    **BN, description="weight normalization + mean-only BN (Luo §5)"))
register(Normalizer(
    "weightnorm_varonly_bn", lambda c, kind: nl.VarOnlyBatchNorm(c), wrap=weight_norm,
    **BN, description="weight normalization + variance-only BN (Luo §5)"))
