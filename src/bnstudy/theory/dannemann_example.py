"""Dannemann & Junike's Example 3.2 as computations: the data, the plain and BN losses and
their gradients, the BN landscape over directions, gradient descent on either loss, and
Lemma 4.5's two sides. :mod:`bnstudy.analyses.dannemann` documents the choices and builds the
table from these functions."""

from __future__ import annotations

import math

import numpy as np

# The paper's Example 3.2 (inputs): samples and labels.
X = np.array([[1.0, 1.0], [1.0, 2.0], [2.0, 3.0]])
Y = np.array([2.0, 5.0, 13.0])
PAPER_GRADIENT = (-0.34, 0.11)  # printed in the paper (2 decimals): a reference only


def plain_loss(w) -> float:
    """C(w) = sum_i (<w, x_i> - y_i)^2."""
    return float(((X @ np.asarray(w, float) - Y) ** 2).sum())


def bn_loss(w, eps: float = 0.0) -> float:
    """C^(w) from the general closed form (biased batch variance, gamma = 1, beta = 0)."""
    w = np.asarray(w, float)
    xc = X - X.mean(0)
    s = math.sqrt(w @ (xc.T @ xc / len(X)) @ w + eps)
    return float(((xc @ w / s - Y) ** 2).sum())


def bn_grad(w, eps: float = 0.0) -> np.ndarray:
    """The analytic gradient of :func:`bn_loss` (formula in the module docstring)."""
    w = np.asarray(w, float)
    xc = X - X.mean(0)
    cov = xc.T @ xc / len(X)
    s = math.sqrt(w @ cov @ w + eps)
    a = xc @ w
    r = a / s - Y
    return 2.0 * (r[:, None] * (xc / s - np.outer(a, cov @ w) / s**3)).sum(0)


def paper_loss(w) -> float:
    """C^(w) exactly as printed in the paper (Example 3.2, eps = 0)."""
    w1, w2 = float(w[0]), float(w[1])
    q = math.sqrt(2 * w1**2 + 6 * w1 * w2 + 6 * w2**2)
    return ((-w1 - 3 * w2) / q - 2) ** 2 + (-w1 / q - 5) ** 2 + ((2 * w1 + 3 * w2) / q - 13) ** 2


def finite_difference(f, w, h: float) -> np.ndarray:
    w = np.asarray(w, float)
    e = np.eye(len(w)) * h
    return np.array([(f(w + e[k]) - f(w - e[k])) / (2 * h) for k in range(len(w))])


def bn_neuron(w, eps: float):
    """The neuron as real torch layers: Linear(2, K, bias=False) -> BatchNorm1d(K, affine=False),
    one output unit per row of ``w`` (shape (2,) or (K, 2)); BN normalizes each unit over the
    batch on its own, so K units are K independent copies of the paper's neuron."""
    import torch
    from torch import nn

    w = torch.as_tensor(np.atleast_2d(np.asarray(w, float)))
    net = nn.Sequential(nn.Linear(2, len(w), bias=False),
                        nn.BatchNorm1d(len(w), affine=False, eps=eps)).double().train()
    with torch.no_grad():
        net[0].weight.copy_(w)
    return net


def _torch_data():
    import torch

    return torch.as_tensor(X), torch.as_tensor(Y)


def autograd_bn(w, eps: float) -> tuple[float, np.ndarray]:
    """C^ and its gradient by autograd through :func:`bn_neuron` in train mode."""
    x, y = _torch_data()
    net = bn_neuron(w, eps)
    loss = ((net(x).squeeze(1) - y) ** 2).sum()
    loss.backward()
    return float(loss.detach()), net[0].weight.grad.view(-1).numpy().copy()


# -- optima -----------------------------------------------------------------------------------

def plain_optimum() -> np.ndarray:
    return np.linalg.lstsq(X, Y, rcond=None)[0]


def centered_lstsq_direction() -> np.ndarray:
    """argmax_w corr(<w, x - xbar>, y): the least-squares fit of centered y on centered x."""
    return np.linalg.lstsq(X - X.mean(0), Y - Y.mean(), rcond=None)[0]


def unit_vector(theta: float) -> np.ndarray:
    return np.array([math.cos(theta), math.sin(theta)])


def landscape(n_angles: int, radius: float) -> tuple[np.ndarray, np.ndarray]:
    """C^ (eps = 0) at ``n_angles`` equally spaced directions of norm ``radius``."""
    theta = np.arange(n_angles) * (2 * math.pi / n_angles)
    return theta, np.array([bn_loss(radius * unit_vector(t)) for t in theta])


def angular_derivative(theta: float) -> float:
    """d C^(u(theta)) / d theta at unit radius (closed-form gradient dotted with u')."""
    return float(bn_grad(unit_vector(theta)) @ np.array([-math.sin(theta), math.cos(theta)]))


def scan_minima(theta: np.ndarray, loss: np.ndarray, radius: float) -> list[tuple[float, float]]:
    """Every circular grid local minimum, refined to the root of the angular derivative within
    one grid step (Brent; the loss itself is too flat there to locate better than ~1e-7 rad)."""
    from scipy.optimize import brentq  # noqa: I001 (scipy.optimize: 0.4 s; only here)

    step = theta[1] - theta[0]
    idx = np.flatnonzero((loss < np.roll(loss, 1)) & (loss <= np.roll(loss, -1)))
    out = []
    for i in idx:
        lo, hi = theta[i] - step, theta[i] + step
        t = theta[i]
        if angular_derivative(lo) < 0 < angular_derivative(hi):
            t = brentq(angular_derivative, lo, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps)
        t = math.atan2(math.sin(t), math.cos(t))
        out.append((t, bn_loss(radius * unit_vector(t))))
    return out


# -- gradient descent -------------------------------------------------------------------------

def gradient_descent(w0, objective: str, steps: int, lr: float, eps: float, every: int):
    """Full-batch GD (SGD's update, no momentum) from every row of ``w0`` (K, 2) at once: one
    output unit per init, each with its own loss, so the K runs do not interact. Returns
    [(step, W (K, 2), losses (K,)), ...] at steps 0..100, every ``every``-th step and the last,
    and the final per-init gradient norms."""
    import torch
    from torch import nn

    x, y = _torch_data()
    w0 = np.atleast_2d(np.asarray(w0, float))
    net = bn_neuron(w0, eps) if objective == "bn" else nn.Sequential(
        nn.Linear(2, len(w0), bias=False)).double()
    lin = net[0]
    with torch.no_grad():
        lin.weight.copy_(torch.as_tensor(w0))
    path = []
    for t in range(steps + 1):
        lin.weight.grad = None
        losses = ((net(x) - y[:, None]) ** 2).sum(0)
        losses.sum().backward()
        if t <= 100 or t % every == 0 or t == steps:
            path.append((t, lin.weight.detach().numpy().copy(), losses.detach().numpy().copy()))
        if t < steps:  # torch.optim.SGD's update without momentum, bitwise (one line: no
            with torch.no_grad():  # optimizer object, no torch._dynamo import for it)
                lin.weight.add_(lin.weight.grad, alpha=-lr)
    return path, lin.weight.grad.norm(dim=1).numpy().copy()


def angle_deg(w) -> float:
    return math.degrees(math.atan2(float(w[1]), float(w[0])))


def wrap_deg(a: float) -> float:
    return (a + 180.0) % 360.0 - 180.0


def closest_on_rays(w0: np.ndarray, directions: list[np.ndarray]) -> float:
    """Squared distance from w0 to the union of open rays {t d: t > 0} (an infimum)."""
    return min(float(np.sum((w0 - max(float(w0 @ d), 0.0) * d) ** 2)) for d in directions)


def lemma_rhs(w0: np.ndarray, w_star: np.ndarray) -> float:
    return float(np.sum((w0 - w_star) ** 2) - (w_star @ w_star - w_star @ w0) ** 2
                 / (w_star @ w_star))
