"""A normalizer of your own, outside the package: RMSNorm (Zhang & Sennrich 2019).

A study config names it by its file and attribute (EXTENDING.md, "Your own normalizer, without
forking"); examples/my_study.yaml runs it beside BatchNorm:

    normalizers:
      rms: {from: examples/my_norms.py:rms_norm, claims_as: batchnorm}

Per sample, the features are divided by their root mean square (over C for fc layers, over C, H,
W for conv layers), then scaled by a learned per-unit gain. Its statistics are float32 under
autocast (Float32Statistics: the registry refuses a layer without it).
"""

from __future__ import annotations

import torch
from torch import nn

from bnstudy.networks.norms.float32 import Float32Statistics
from bnstudy.networks.norms.registry import Normalizer, check_eps


class RMSNorm(Float32Statistics, nn.Module):
    def __init__(self, num_features: int, kind: str, eps: float = 1e-6):
        super().__init__()
        self.eps = float(eps)
        self.weight = nn.Parameter(torch.ones(num_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dims = tuple(range(1, x.dim()))
        rms = torch.sqrt(x.pow(2).mean(dim=dims, keepdim=True) + self.eps)
        return x / rms * self.weight.view((1, -1) + (1,) * (x.dim() - 2))


# the name is the config's key; options, checks and traits are declared here as for a built-in
rms_norm = Normalizer("rms", lambda c, kind, **o: RMSNorm(c, kind, **o), options={"eps": 1e-6},
                      check=check_eps, option_docs={"eps": "added to the mean square"},
                      description="RMSNorm: per-sample division by the root mean square")
