"""Normalizer statistics in float32 under autocast (``precision: bf16``,
:mod:`bnstudy.train.precision`).

Under ``torch.autocast`` the convolutions and matmuls before a normalization layer return
bfloat16. torch's own BN, LayerNorm and GroupNorm then still compute their statistics in float32;
a layer written with ``mean``/``var``/``@`` would compute them in bfloat16 (and population
normalization's ``w^T C w`` as an autocast matmul), so the training precision could make
normalizers differ by how they round. :class:`Float32Statistics` is the package's layers' guard.
"""

from __future__ import annotations

import torch

LOW_PRECISION = (torch.bfloat16, torch.float16)


class Float32Statistics:
    """A normalization layer (mixin, before ``nn.Module``) that computes in float32 under
    autocast: a bfloat16/float16 input is cast to float32 and the layer runs with autocast off,
    so its statistics (and the normalization) are float32 whatever the training precision
    (torch's own BN, LayerNorm and GroupNorm keep float32 statistics under autocast too); the
    output returns in the input's dtype. Outside autocast, on float32 inputs, it is the plain
    call: nothing changes."""

    def __call__(self, x: torch.Tensor, *args, **kwargs):
        low = x.dtype in LOW_PRECISION
        if not low and not torch.is_autocast_enabled(x.device.type):
            return super().__call__(x, *args, **kwargs)
        with torch.autocast(x.device.type, enabled=False):
            y = super().__call__(x.float() if low else x, *args, **kwargs)
        return y.to(x.dtype) if low else y
