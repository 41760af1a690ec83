"""Distances from a point to the hidden units' boundaries, for the partition-density measure.

For a hidden unit with pre-activation ``h(x)`` (``block.preact``'s output; for a conv layer one
unit per output channel x spatial position), ``d(x) = |h(x)| / ||grad_x h(x)||`` is the distance
from ``x`` to the zero set of the unit's local affine piece. In the region where the network is
affine around ``x`` (no earlier boundary crossed) it is the exact Euclidean distance to the unit's
boundary ``F = {h = 0}``; beyond that region ``F`` folds and ``d`` is a first-order estimate. For
a first-layer unit (an affine ``h`` when BN is frozen) it is exact everywhere, so "``d(x) < r``"
is exactly "the hyperplane crosses the open epsilon-ball of radius ``r`` around ``x``", whatever
the input dimension. A unit with a zero gradient (constant around ``x``) is never counted; a unit
with ``h(x) = 0`` and a non-zero gradient always is.

The gradients of all units of all layers are the rows of the input Jacobian. They are computed
exactly by forward-mode automatic differentiation (``torch.autograd.forward_ad``): one batched
forward pass over ``points x D`` rows, row ``(i, j)`` the point ``x_i`` with tangent ``e_j``,
and the squared derivatives summed over ``j`` per unit; ``chunk_rows`` bounds the rows of one
pass (points and tangent directions are chunked). Works for any network the forward-mode rules
of PyTorch cover (linear, conv, BN frozen or not, LayerNorm, max-pooling, ...). The network is
used as given (freeze BN first) and never changed; hooks are removed afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import nn
from torch.autograd import forward_ad

from bnstudy.networks.probe import watch


def _chunks(n_points: int, n_tangents: int, chunk_rows: int):
    """(point slice, tangent slice) pairs covering all pairs, at most ``chunk_rows`` rows each."""
    m = min(n_tangents, chunk_rows)
    per = max(1, chunk_rows // m)
    for i in range(0, n_points, per):
        for j in range(0, n_tangents, m):
            yield slice(i, min(i + per, n_points)), slice(j, min(j + m, n_tangents))


def directional(net: nn.Module, norms: list[nn.Module], x: torch.Tensor,
                tangents: torch.Tensor | None, chunk_rows: int, stats: dict | None = None
                ) -> Iterator[tuple[slice, slice, list[tuple[torch.Tensor, torch.Tensor]]]]:
    """Per (point chunk, tangent chunk): per module in ``norms``, its outputs ``h`` at the chunk's
    points ``(n, units)`` and their derivatives ``(n, m, units)`` along the chunk's tangents
    (rows of ``tangents``; ``None``: the ``D`` coordinate axes). ``stats`` counts the passes
    (``forwards``) and rows (``rows``) made."""
    d = x.shape[1]
    nt = d if tangents is None else len(tangents)
    out: list = [None] * len(norms)

    def unpack(k: int, h: torch.Tensor) -> None:
        primal, tangent = forward_ad.unpack_dual(h)
        out[k] = (primal, tangent)

    with watch(norms, unpack):
        for ps, ts in _chunks(len(x), nt, chunk_rows):
            n, m = ps.stop - ps.start, ts.stop - ts.start
            if tangents is None:
                t = torch.zeros(m, d, device=x.device, dtype=x.dtype)
                t[torch.arange(m), torch.arange(ts.start, ts.stop)] = 1.0
            else:
                t = tangents[ts].to(x)
            rows = x[ps, None, :].expand(n, m, d).reshape(-1, d).contiguous()
            with torch.no_grad(), forward_ad.dual_level():
                net(forward_ad.make_dual(rows, t[None].expand(n, m, d).reshape(-1, d).contiguous()))
                res = []
                for primal, tangent in out:
                    if tangent is None:  # the unit does not depend on x at all
                        tangent = torch.zeros_like(primal)
                    res.append((primal.reshape(n, m, -1)[:, 0], tangent.reshape(n, m, -1)))
            if stats is not None:
                stats["forwards"] = stats.get("forwards", 0) + 1
                stats["rows"] = stats.get("rows", 0) + n * m
            yield ps, ts, res


def distance_counts(net: nn.Module, norms: list[nn.Module], centers: torch.Tensor,
                    radii, chunk_rows: int = 65536, stats: dict | None = None
                    ) -> tuple[torch.Tensor, list[int]]:
    """``(points, len(radii), layers)`` float counts: per center, radius ``r`` and module of
    ``norms``, the units with ``|h(x)| < r ||grad_x h(x)||``; NaN where a point's pre-activations
    or gradients of that layer are not finite. Also the number of units of each module."""
    r = torch.as_tensor(list(radii), dtype=torch.float64, device=centers.device)
    out = torch.empty(len(centers), len(r), len(norms))
    acc: list = []
    for ps, ts, res in directional(net, norms, centers, None, chunk_rows, stats):
        if ts.start == 0:
            acc = [(h.double(), torch.zeros_like(h, dtype=torch.float64)) for h, _ in res]
        for (_, sq), (_, dh) in zip(acc, res, strict=True):
            sq += dh.double().square().sum(1)
        if ts.stop < centers.shape[1]:
            continue
        for k, (h, sq) in enumerate(acc):
            g = sq.sqrt()
            count = (h.abs()[:, None] < r[None, :, None] * g[:, None]).sum(2).float()
            # NaN/inf anywhere makes the float64 sum non-finite (float32 squares cannot overflow)
            count[~torch.isfinite(h.sum(1) + sq.sum(1))] = float("nan")
            out[ps, :, k] = count.cpu()
    return out, [h.shape[1] for h, _ in acc]


def polytope_shrink(net: nn.Module, norm: nn.Module, x: torch.Tensor, directions: torch.Tensor,
                    chunk_rows: int = 65536) -> float:
    """Mean over the units of ``norm`` (with a non-zero gradient at the point ``x``, shape
    ``(1, D)``) of ``max_j |grad h . v_j| / ||grad h||``: the cross-polytope of radius ``r`` along
    the rows ``v_j`` of ``directions`` catches an affine unit's hyperplane exactly when the
    epsilon-ball of radius ``r`` times this ratio does. NaN when no unit has a gradient."""
    sq, top = None, None
    for _, _, [(_, dh)] in directional(net, [norm], x, None, chunk_rows):
        part = dh.double().square().sum(1)[0]
        sq = part if sq is None else sq + part
    for _, _, [(_, dh)] in directional(net, [norm], x, directions, chunk_rows):
        part = dh.double().abs().amax(1)[0]
        top = part if top is None else torch.maximum(top, part)
    live = sq > 0
    if not bool(live.any()):
        return float("nan")
    return float((top[live] / sq[live].sqrt()).mean())
