"""Hessian-vector products, seeded probe vectors and the Lanczos iteration, shared by the
smoothness measure (the top Hessian eigenvalue) and the landscape measure (trace, top-k and
density).

The Hessian is never formed: :func:`gradient_and_hvp` differentiates a scalar loss once with
``create_graph=True`` and returns ``v -> H v`` as one more backward pass through that graph per
call (Pearlmutter's trick). Vectors are lists of tensors, one per parameter tensor (a *block*).

:func:`lanczos` runs the Lanczos iteration with full re-orthogonalization (after the three-term
recurrence, every new vector is orthogonalized twice against all earlier ones, in float64, as
PyHessian does) from a start vector normalized here. The tridiagonal ``T`` it builds has Ritz
values ``theta_i`` (its eigenvalues) and vectors ``s_i``; ``|beta s_i[-1]|`` bounds the
eigen-residual ``||H y_i - theta_i y_i||`` of each Ritz pair, so a Ritz value with a small one is
within it of an eigenvalue of the symmetric ``H``. It ends after ``steps`` products, at a
breakdown (an invariant subspace, ``beta`` below :data:`BREAKDOWN` of ``T``'s scale: the Ritz
values are then exact), when a product is not finite (every Ritz value NaN), or when the
caller's ``stop(theta, residuals)`` says so after a step (the smoothness measure's tolerance).

Random vectors (:func:`draw`) are drawn on the CPU from the caller's seeded generator in float64
and moved to each tensor's device and dtype, so the same seed gives the same numbers on any
device.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

Vector = list[torch.Tensor]  # one tensor per parameter tensor
HVP = Callable[[Vector], Vector]
Stop = Callable[[np.ndarray, np.ndarray], bool]
BREAKDOWN = 1e-10  # relative size of beta below which Lanczos has found an invariant subspace


def gradient_and_hvp(loss: torch.Tensor, params: Sequence[torch.Tensor]) -> tuple[Vector, HVP]:
    """The gradient of ``loss`` w.r.t. the leaf tensors ``params`` (detached) and ``v -> H v``."""
    params = list(params)
    grads = torch.autograd.grad(loss, params, create_graph=True)

    def hvp(v: Vector) -> Vector:
        out = torch.autograd.grad(grads, params, grad_outputs=list(v), retain_graph=True,
                                  allow_unused=True)
        return [torch.zeros_like(p) if o is None else o.detach()
                for o, p in zip(out, params, strict=True)]

    return [g.detach() for g in grads], hvp


def draw(like: Sequence[torch.Tensor], gen: torch.Generator, rademacher: bool = False
         ) -> Vector:
    """A Gaussian (or Rademacher: its signs) vector shaped like ``like``, drawn from ``gen``."""
    out = []
    for p in like:
        z = torch.randn(p.shape, generator=gen, dtype=torch.float64)
        out.append((torch.sign(z) if rademacher else z).to(p.device, p.dtype))
    return out


def flat(v: Sequence[torch.Tensor]) -> torch.Tensor:
    return torch.cat([t.reshape(-1).double() for t in v])


def split(vec: torch.Tensor, like: Sequence[torch.Tensor]) -> Vector:
    out, i = [], 0
    for p in like:
        out.append(vec[i: i + p.numel()].view(p.shape).to(p.dtype))
        i += p.numel()
    return out


@dataclass(frozen=True)
class Ritz:
    theta: np.ndarray  # Ritz values, ascending
    weights: np.ndarray  # s_i[0]^2: Gauss quadrature weights of the start vector (sum 1)
    residuals: np.ndarray  # |beta s_i[-1]|: each pair's eigen-residual bound
    products: int  # Hessian-vector products used
    exact: bool  # ended at an invariant subspace (the Ritz values are eigenvalues)
    stopped: bool  # ``stop`` ended it


def _ritz(alphas: list[float], betas: list[float], beta: float
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    t = np.diag(alphas) + np.diag(betas, 1) + np.diag(betas, -1)
    theta, s = np.linalg.eigh(t)  # ascending
    return theta, s[0] ** 2, np.abs(beta * s[-1])


def lanczos(hvp: HVP, v0: Vector, steps: int, stop: Stop | None = None) -> Ritz:
    """At most ``steps`` Lanczos steps from ``v0`` (see the module docstring). The basis is kept
    in float64 as one (steps, n) matrix on ``v0``'s device."""
    if steps < 1:
        raise ValueError(f"the Lanczos iteration needs steps >= 1, got {steps}")
    like = list(v0)
    v = flat(v0)
    v = v / v.norm()
    basis = torch.zeros(steps, v.numel(), dtype=torch.float64, device=v.device)
    alphas: list[float] = []
    betas: list[float] = []
    beta = 0.0
    for j in range(steps):
        basis[j] = v
        w = flat(hvp(split(v, like)))
        alpha = float(w @ v)
        if not math.isfinite(alpha):
            return _nan(j + 1)
        alphas.append(alpha)
        w = w - alpha * v - (beta * basis[j - 1] if j else 0.0)
        done = basis[: j + 1]
        for _twice in range(2):  # full re-orthogonalization
            w = w - done.T @ (done @ w)
        beta = float(w.norm())
        if not math.isfinite(beta):
            return _nan(j + 1)
        scale = max(abs(a) for a in alphas) + max(betas, default=0.0)
        exact = beta <= BREAKDOWN * max(scale, 1e-30)
        last = exact or j + 1 == steps
        if last or stop is not None:
            theta, weights, res = _ritz(alphas, betas, beta)
            stopped = not exact and stop is not None and bool(stop(theta, res))
            if last or stopped:
                return Ritz(theta, weights, res, j + 1, bool(exact), stopped)
        betas.append(beta)
        v = w / beta
    raise AssertionError("unreachable: the last step returns")


def _nan(products: int) -> Ritz:
    nan = np.array([math.nan])
    return Ritz(nan, nan, nan, products, False, False)
