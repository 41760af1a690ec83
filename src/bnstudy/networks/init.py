"""A built model's initial weights: the config's ``init`` and ``bias_init`` drawn into every map
(:func:`initialize`, called by :func:`bnstudy.networks.models.build_model`), and ``init_span:
data``, which projects them onto the span of the training inputs (:func:`init_in_data_span`,
called by the training loop, which has the data).

A weight-normalized map (``nn.utils.parametrizations.weight_norm``) is drawn in its direction
``v``, and its scale ``g`` is then set to ``||v||`` per output unit, so that its weight equals
the drawn ``v``."""

from __future__ import annotations

import torch
from torch import nn

from bnstudy.networks.blocks import Net, maps


def _base(module: nn.Module) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The raw weight (weight norm's direction v when reparametrized) and bias."""
    p = getattr(module, "parametrizations", None)
    weight = p.weight.original1 if p is not None and "weight" in p else module.weight
    return weight, module.bias


def _rescale_weight_norm(module: nn.Module, w: torch.Tensor) -> None:
    """Weight norm's ``g = ||w||`` per output unit (nothing for a map without weight norm)."""
    p = getattr(module, "parametrizations", None)
    if p is not None and "weight" in p:
        dims = tuple(range(1, w.dim()))
        p.weight.original0.copy_(torch.linalg.vector_norm(w, dim=dims, keepdim=True))


@torch.no_grad()
def initialize(net: Net, cfg) -> None:
    """Draw every map's weight by ``cfg.init`` and set its bias by ``cfg.bias_init`` (a
    :class:`bnstudy.networks.models.ModelConfig`; ``default`` keeps torch's own draw)."""
    for m in maps(net):
        w, b = _base(m)
        if cfg.init == "kaiming":
            nn.init.kaiming_normal_(w, a=cfg.slope, nonlinearity="leaky_relu")
        elif cfg.init == "xavier":
            nn.init.xavier_normal_(w)
        elif cfg.init == "orthogonal":
            nn.init.orthogonal_(w)
        if b is not None and cfg.bias_init == "zero":
            b.zero_()
        elif b is not None and cfg.bias_init == "random":
            b.normal_(0.0, cfg.bias_std)
        # weight norm: start with g = ||v|| per output unit so w equals the initialized v
        _rescale_weight_norm(m, w)


@torch.no_grad()
def init_in_data_span(net: Net, cfg, x) -> None:
    """``init_span: data``: project each map's initial weight (weight norm's direction ``v``,
    then ``g = ||v||`` as at initialization) onto the span of the training inputs ``x`` (rows, an
    array or tensor; float64 eigendecomposition of the smaller Gram matrix on the CPU, rank by
    the usual tolerance); no-op for ``all`` (``x`` is not touched)."""
    if cfg.init_span == "all":
        return
    x = torch.as_tensor(x).detach().cpu().reshape(len(x), -1).double()
    small = x.shape[0] < x.shape[1]
    gram = x @ x.T if small else x.T @ x
    ev, vec = torch.linalg.eigh(gram)
    keep = ev > ev.max() * max(x.shape) * torch.finfo(torch.float64).eps
    basis = x.T @ vec[:, keep] / ev[keep].sqrt() if small else vec[:, keep]  # orthonormal
    for m in maps(net):
        w, _ = _base(m)
        flat = w.detach().reshape(w.shape[0], -1).double().cpu()
        w.copy_(((flat @ basis) @ basis.T).reshape(w.shape).to(w.device, w.dtype))
        _rescale_weight_norm(m, w)
