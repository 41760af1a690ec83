"""The cross-polytope test of the partition-density measure (``method: polytope``).

The neighbourhood of a point ``x`` is the cross-polytope of radius ``r`` with the ``2k``
vertices ``x +- r v_j`` along a fixed orthonormal frame ``v_1..v_k`` (:func:`frame`). A unit
counts when its pre-activation takes both strictly positive and strictly negative values over the
vertices (a vertex exactly on the boundary does not make a crossing); one batched forward pass
over all vertices of all points, with a hook on every counted block's pre-activation
(``block.preact``: the normalizer's output, plus the skip in a residual join). For an
affine unit the test is exact for the polytope: its hyperplane meets the polytope's interior iff
``|h(x)| < r max_j |h(x + v_j) - h(x)|``. :mod:`bnstudy.measures.partition.compute` documents how
this
relates to the paper's epsilon-ball and to the default ``distance`` test.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from bnstudy.networks.probe import watch


def frame(dim: int, n_vertices: int, seed: int) -> torch.Tensor:
    """The ``(k, dim)`` orthonormal frame, ``k = min(n_vertices // 2, dim)``, from ``seed``."""
    k = min(n_vertices // 2, dim)
    g = torch.randn(dim, k, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    q, r = torch.linalg.qr(g)
    q = q * torch.sign(torch.diagonal(r))
    return q.T.contiguous().float()



@dataclass
class Counts:
    counts: torch.Tensor  # (points, layers) float, NaN where pre-activations are not finite
    layers: list[int]  # 1-based block index of each column
    neurons: list[int]  # neurons per layer
    forwards: int  # forward passes made
    rows: int  # vertices evaluated


@torch.no_grad()
def crossing_counts(net: nn.Module, layers: list, centers: torch.Tensor, radii: torch.Tensor,
                    directions: torch.Tensor, chunk_rows: int = 65536) -> Counts:
    """Per center and layer, the units whose pre-activation (``block.preact``'s output) changes
    sign over the vertices ``centers[i] +- radii[i] * directions[j]``; ``layers``: the
    ``(1-based index, block)`` pairs to count (:func:`bnstudy.networks.probe.kinked_blocks`).
    ``net`` is used as given (freeze it first); hooks are removed afterwards."""
    if not layers:
        raise ValueError("no layer with a kinked activation to count: no partition")
    signs = torch.cat([directions, -directions]).to(centers.device)
    nv = len(signs)
    per = max(1, chunk_rows // nv)
    state: dict = {"counts": [None] * len(layers), "neurons": [0] * len(layers)}

    def count(j: int, h: torch.Tensor) -> None:
        h = h.reshape(state["n"], nv, -1)
        hi, lo = h.amax(1), h.amin(1)
        got = ((hi > 0) & (lo < 0)).sum(1).float()
        # NaN/inf anywhere in a point's vertices makes this sum non-finite (float64: finite
        # float32 values cannot overflow it); cheaper than isfinite over (points, neurons)
        spread = (hi.double() - lo.double()).sum(1)
        got[~torch.isfinite(spread)] = float("nan")
        state["counts"][j], state["neurons"][j] = got, h.shape[2]

    out = torch.empty(len(centers), len(layers))
    forwards = 0
    with watch([b.preact for _, b in layers], count):  # each block's pre-activation, as it runs
        for i in range(0, len(centers), per):
            c, r = centers[i: i + per], radii[i: i + per]
            state["n"] = len(c)
            net((c[:, None, :] + r[:, None, None] * signs[None]).reshape(-1, c.shape[1]))
            forwards += 1
            out[i: i + len(c)] = torch.stack(state["counts"], 1).cpu()
    return Counts(out, [i for i, _ in layers], state["neurons"], forwards, len(centers) * nv)
