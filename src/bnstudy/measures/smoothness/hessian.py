"""Top Hessian eigenvalue by power iteration on Hessian-vector products (double backward).

The Hessian is never formed. :func:`hvp_operator` differentiates a scalar loss once with
``create_graph=True`` and returns ``v -> H v`` as one extra backward pass through that graph per
call (Pearlmutter's trick), so ``k`` iterations cost one forward + backward + ``k``
double-backward passes.

:func:`top_eigenvalue` runs plain power iteration from a seeded Gaussian start vector. Power
iteration converges to the *dominant* eigenvalue (largest magnitude), read off as the Rayleigh
quotient ``v^T H v`` of the normalized iterate, sign included. The *top* (largest algebraic)
eigenvalue is that same number when it is non-negative; when the dominant eigenvalue is negative
(negative curvature dominates), a second power iteration on the shifted operator
``H - lambda_dom I`` (whose eigenvalues ``lambda_i - lambda_dom`` are all >= 0) gives
``lambda_max - lambda_dom``, hence ``lambda_max``.

Convergence is judged on the eigen-residual ``‖H v - lambda v‖₂`` of the normalized iterate,
which bounds the distance from ``lambda`` to the nearest eigenvalue of the symmetric ``H``: an
iteration stops when it is at most ``tol`` times the spectral radius estimate ``|lambda_dom|``.
(The change of the Rayleigh quotient between iterations is not used: it can be tiny while the
shifted iteration is still far from its limit.) Otherwise it stops after ``iters`` products and
the result is flagged as not converged; ``iterations`` counts the products of both phases.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

Vector = list[torch.Tensor]  # one tensor per parameter tensor


def dot(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> torch.Tensor:
    return sum((x * y).sum() for x, y in zip(a, b, strict=True))


def norm(a: Sequence[torch.Tensor]) -> torch.Tensor:
    return dot(a, a).sqrt()


def hvp_operator(loss: torch.Tensor, params: Sequence[torch.Tensor]
                 ) -> tuple[Vector, Callable[[Vector], Vector]]:
    """The gradient of ``loss`` w.r.t. ``params`` (detached) and the operator ``v -> H v``.

    ``loss`` must be built from ``params`` (leaf tensors with ``requires_grad``).
    """
    grads = torch.autograd.grad(loss, list(params), create_graph=True)

    def hvp(v: Vector) -> Vector:
        out = torch.autograd.grad(grads, list(params), grad_outputs=list(v), retain_graph=True,
                                  allow_unused=True)
        return [torch.zeros_like(p) if o is None else o.detach()
                for o, p in zip(out, params, strict=True)]

    return [g.detach() for g in grads], hvp


@dataclass(frozen=True)
class EigenResult:
    top: float  # largest algebraic eigenvalue
    dominant: float  # eigenvalue of largest magnitude (signed)
    iterations: int  # Hessian-vector products used in all
    converged: bool


def _power(hvp: Callable[[Vector], Vector], v: Vector, iters: int, tol: float,
           shift: float = 0.0) -> tuple[float, int, bool]:
    """Dominant eigenvalue of ``H - shift I`` from start ``v`` (normalized here)."""
    n = float(norm(v))
    v = [x / n for x in v]
    lam = float("nan")
    for k in range(1, iters + 1):
        hv = hvp(v)
        if shift:
            hv = [h - shift * x for h, x in zip(hv, v, strict=True)]
        lam = float(dot(v, hv))
        size = float(norm(hv))
        residual = float(norm([h - lam * x for h, x in zip(hv, v, strict=True)]))
        if not (math.isfinite(size) and math.isfinite(residual)):
            return float("nan"), k, False
        # |lambda_true - (lam + shift)| <= residual for some eigenvalue of the symmetric H;
        # scale: the spectral radius estimate (|lam| unshifted, |shift| = |lambda_dom| shifted).
        if residual <= tol * (abs(shift) if shift else abs(lam)):
            return lam, k, True
        v = [h / size for h in hv]
    return lam, iters, False


def top_eigenvalue(hvp: Callable[[Vector], Vector], like: Sequence[torch.Tensor],
                   iters: int = 20, tol: float = 1e-3, seed: int = 0) -> EigenResult:
    """Top eigenvalue of the symmetric operator ``hvp`` over tensors shaped like ``like``.

    The start vector is drawn on the CPU from ``torch.Generator().manual_seed(seed)`` (the same
    on every device), then moved to each tensor's device and dtype.
    """
    if iters < 1:
        raise ValueError(f"power iteration needs iters >= 1, got {iters}")
    gen = torch.Generator().manual_seed(int(seed))
    v0 = [torch.randn(p.shape, generator=gen, dtype=torch.float64).to(p.device, p.dtype)
          for p in like]
    dom, used, ok = _power(hvp, v0, iters, tol)
    if not dom < 0:  # non-negative (or NaN): the dominant eigenvalue is the top one
        return EigenResult(dom, dom, used, ok)
    shifted, used2, ok2 = _power(hvp, v0, iters, tol, shift=dom)
    return EigenResult(shifted + dom, dom, used + used2, ok and ok2)
