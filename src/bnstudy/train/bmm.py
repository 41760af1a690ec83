"""The stacked forward pass of fully connected nets written out by hand: the same kernels
``torch.func.vmap`` runs, without its per-operation cost.

A step of K stacked seeds under ``vmap(functional_call(...))`` (:class:`bnstudy.train.stacked.
Stacked`) runs, on the physical ``[K, ...]`` tensors, a short list of kernels per layer: a ``bmm``
for a linear map (the bias added as ``bias.view(K, 1, out) + y``), one ``native_batch_norm`` over
the ``(B, K * C)`` view of the batch with unit affine parameters followed by ``* gamma + beta``
on the ``[K, C, B]`` view (functorch's batching rule for batch norm), the activation. The
wrapping and unwrapping of every tensor at every operation, and ``functional_call``'s swap of
the module's tensors, cost more than these kernels on the small nets of the studies (a 25-layer
deep linear net: a hundred small operations per step). :func:`program` reads a model once into
a list of those layers, and :func:`forward` runs it with the same kernels on the same tensor
layouts, so its output, its gradients (autograd records the same operations either way) and BN's
running statistics are bitwise those of the vmap path (``tests/test_block_training.py``).

Only what it can run exactly is taken: a fully connected :class:`bnstudy.networks.blocks.Net`
whose features are :class:`~bnstudy.networks.blocks.Block` s of ``nn.Linear``, an identity or
the package's ``BatchNorm1d`` (training mode, ``momentum`` set, running statistics tracked), and
ReLU, leaky ReLU or identity, and a linear or identity head; it runs in training mode, in
float32 without autocast (:meth:`~bnstudy.train.stacked.Stacked.losses` checks). Any other
model (:func:`program` returns ``None``) steps through vmap.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from bnstudy.networks.blocks import Block, Net
from bnstudy.networks.norms.layers import BatchNorm1d


@dataclass(frozen=True)
class Layer:
    """One layer of the program: the stacked tensors' indices it reads (``None``: absent)."""

    kind: str  # "linear", "bn", "relu", "leaky", "identity"
    weight: int | None = None
    bias: int | None = None
    running: tuple[int, int, int] | None = None  # mean, var, num_batches_tracked
    momentum: float = 0.0
    eps: float = 0.0
    slope: float = 0.0


def _linear(m: nn.Module, index: dict[str, int], name: str) -> Layer | None:
    if type(m) is not nn.Linear:
        return None
    return Layer("linear", index[f"{name}.weight"], index.get(f"{name}.bias"))


def _norm(m: nn.Module, index: dict[str, int], name: str) -> Layer | None:
    if type(m) is nn.Identity:
        return Layer("identity")
    if (type(m) is not BatchNorm1d or m.momentum is None
            or not m.track_running_stats or m.running_mean is None):
        return None
    affine = m.weight is not None
    return Layer("bn", index[f"{name}.weight"] if affine else None,
                 index[f"{name}.bias"] if m.bias is not None else None,
                 (index[f"{name}.running_mean"], index[f"{name}.running_var"],
                  index[f"{name}.num_batches_tracked"]), float(m.momentum), float(m.eps))


def _act(m: nn.Module) -> Layer | None:
    if type(m) is nn.ReLU:
        return Layer("relu")
    if type(m) is nn.LeakyReLU:
        return Layer("leaky", slope=float(m.negative_slope))
    return Layer("identity") if type(m) is nn.Identity else None


def program(model: nn.Module, names: list[str]) -> list[Layer] | None:
    """The layers of ``model`` over the stacked tensors named ``names`` (parameters then
    buffers, :class:`~bnstudy.train.stacked.Stacked`'s order), or ``None`` when some part of
    it is not one this module runs exactly."""
    if type(model) is not Net or model.conv:
        return None
    index = {n: i for i, n in enumerate(names)}
    layers: list[Layer] = []
    for i, block in enumerate(model.features):
        if type(block) is not Block or block.join is not None:
            return None
        parts = [_linear(block.linear, index, f"features.{i}.linear"),
                 _norm(block.norm, index, f"features.{i}.norm"), _act(block.act)]
        if any(p is None for p in parts):
            return None
        layers += [p for p in parts if p.kind != "identity"]
    if type(model.head) is not nn.Identity:
        head = _linear(model.head, index, "head")
        if head is None:
            return None
        layers.append(head)
    return layers


def _bn(h: torch.Tensor, layer: Layer, t: list[torch.Tensor]) -> torch.Tensor:
    k, b, c = h.shape
    mean, var, count = (t[i] for i in layer.running)
    count.add_(1)
    flat = h.permute(1, 0, 2).reshape(b, k * c)  # a view where one exists, as vmap
    one = torch.ones(k * c, dtype=h.dtype, device=h.device)
    zero = torch.zeros(k * c, dtype=h.dtype, device=h.device)
    y = torch.native_batch_norm(flat, one, zero, mean.view(k * c), var.view(k * c), True,
                                layer.momentum, layer.eps)[0]
    y = y.transpose(0, 1).view(k, c, b)
    if layer.weight is not None:
        y = y * t[layer.weight].view(k, c, 1)
    if layer.bias is not None:
        y = y + t[layer.bias].view(k, c, 1)
    return y.transpose(1, 2)


def forward(layers: list[Layer], tensors: list[torch.Tensor], xs: torch.Tensor) -> torch.Tensor:
    """The K stacked models' outputs ``[K, B, out]`` on their own inputs ``xs`` (``[K, B,
    ...]``); ``tensors``: the stacked parameters then buffers (BN's running statistics are
    updated in place, as a training step does)."""
    h = xs.reshape(xs.shape[0], xs.shape[1], -1)
    for layer in layers:
        if layer.kind == "linear":
            h = torch.bmm(h, tensors[layer.weight].transpose(1, 2))
            if layer.bias is not None:
                h = tensors[layer.bias].unsqueeze(1) + h
        elif layer.kind == "bn":
            h = _bn(h, layer, tensors)
        elif layer.kind == "relu":
            h = torch.relu(h)
        else:
            h = nn.functional.leaky_relu(h, layer.slope)
    return h
