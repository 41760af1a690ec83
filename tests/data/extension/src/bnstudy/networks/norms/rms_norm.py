"""RMSNorm (Zhang & Sennrich 2019), the extension guide's normalizer recipe followed in a test
fixture: one module, nothing else edited. Per sample, the features are divided by their root
mean square (over C for fc layers, over C, H, W for conv layers), then scaled by a learned
gain; no centering, no batch statistics, the same map in train and eval mode. Its statistics
are float32 under autocast (Float32Statistics: the registry refuses a layer without it)."""

from __future__ import annotations

import torch
from torch import nn

from bnstudy.networks.norms.float32 import Float32Statistics
from bnstudy.networks.norms.registry import Normalizer, check_eps, register

NORMALIZERS = ("rms_norm",)


class RMSNorm(Float32Statistics, nn.Module):
    def __init__(self, num_features: int, kind: str, eps: float = 1e-6):
        super().__init__()
        self.eps, self.kind = float(eps), kind
        self.weight = nn.Parameter(torch.ones(num_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dims = tuple(range(1, x.dim()))
        rms = torch.sqrt(x.pow(2).mean(dim=dims, keepdim=True) + self.eps)
        shape = (1, -1) + (1,) * (x.dim() - 2)
        return x / rms * self.weight.view(shape)


register(Normalizer(
    "rms_norm", lambda c, kind, **o: RMSNorm(c, kind, **o), options={"eps": 1e-6},
    check=check_eps, option_docs={"eps": "added to the mean square before the root"},
    description="RMSNorm: per-sample division by the root mean square"))
