"""Dannemann & Junike's counterexample to Santurkar et al.'s Lemma 4.5, computed (Example 3.2).

Setting, taken from the paper as *inputs*: three samples x = (1,1), (1,2), (2,3) with labels
y = 2, 5, 13; one linear neuron ``<w, x>`` (zero bias, identity activation) followed by BN with
gamma = 1, beta = 0; the whole learning set is the batch (M = 3, biased variance, as in the
paper's Def. 2.6); the cost is the *summed* squared error ``C(w) = sum_i (phi(x_i) - y_i)^2``
without BN and ``C^(w)`` with BN. Everything else is computed:

- ``W*``: the plain least-squares optimum (``numpy.linalg.lstsq``; the paper: (1, 3)); the
  paper's initialization is ``W0 := W*``.
- The BN gradient at W*, four ways (``record = "gradient"``): autograd through a real
  ``torch.nn.BatchNorm1d(1, affine=False)`` in train mode (float64; ``method =
  "autograd_batchnorm1d"``), the analytic gradient of the general closed form
  ``C^(w) = sum_i (<w, x_i - xbar> / s(w) - y_i)^2``, ``s(w)^2 = w' S w + eps``, ``S`` the biased
  covariance of the x's, with ``dC^/dw = 2 sum_i r_i ((x_i - xbar)/s - <w, x_i - xbar> S w / s^3)``
  (``"closed_form"``), central finite differences of the paper's printed formula for ``C^``
  (``"finite_difference_paper_formula"``), and the value the paper prints, (-0.34, 0.11)
  (``"paper_reported"``, a reference, not a result). ``grad_dot_w`` is ``<grad, W*>``, which is
  0 for a scale-invariant loss (Euler).
- The BN optima (``record = "optimum"``): C^ depends on w only through its direction (eps = 0),
  so a scan of ``n_angles`` directions at radius ||W*|| (``record = "landscape"``) finds every
  local minimum, refined to a root of the angular derivative (``"bn_angle_scan"``); since BN's
  output is centered with unit variance, minimizing C^ also maximizes the correlation of
  ``<w, x_i - xbar>`` with y, whose maximizer is the centered least-squares solution
  (``"bn_centered_least_squares"``; here it fits exactly and gives w ~ (5, 3): 3 w1 = 5 w2).
- Gradient descent (``record = "trajectory"``: steps 0..100, then every ``record_every``-th;
  ``"final"``): full batch, plain SGD (no momentum), on C^ through the torch BN layer
  (``objective = "bn"``, ``lr``, ``steps``) and on C (``"plain"``, ``lr_plain``,
  ``steps_plain``), from init 0 = the paper's W0 = W* and ``n_inits`` seeded draws
  ``w0 ~ N(0, init_std^2 I)``, all inits at once as independent units of one layer.
  ``line_residual = 3 w1 - 5 w2``, ``line_residual_normalized`` = the same over
  ``sqrt(34) ||w||`` (sine of the angle to the line), ``angle_error_deg`` against the scan
  minimum (meaningful for ``bn`` rows only).
- Lemma 4.5 (``record = "lemma"``), for each init: ``lhs_closest = ||W0 - Wbn||^2``, Wbn
  the closest BN local optimum (the projection of W0 onto the optimal rays {t d: t > 0};
  ``||W0||^2`` when W0's projection is not positive, an infimum that is not attained),
  ``lhs_reached`` the same with the optimum GD actually reached from W0, and
  ``rhs = ||W0 - W*||^2 - (||W*||^2 - <W*, W0>)^2 / ||W*||^2``. The lemma claims
  ``lhs <= rhs`` whenever ``<W0, W*> > 0`` (``hypothesis``); at the paper's W0 = W* the right
  side is exactly 0 while the left side is not.

Choices the paper leaves open: torch refuses eps = 0 in train mode, so autograd and GD use
``eps`` (default 1e-12; the variance at W* is ~8, so the change is ~1e-13 relative), while the
closed form, the scan and the lemma use the paper's eps = 0. The GD settings and random inits
are ours. GD on a scale-invariant loss moves orthogonally to w, so ||w|| only grows and the
effective step lr / ||w||^2 shrinks; inits near the steep directions (C^'s angular gradient
reaches ~120 at unit norm) are kicked to large norms and then converge slowly, hence the
defaults: init_std = 3 (about ||W*||) and 10^4 steps at lr = 0.1. Runs on CPU in float64,
deterministic given ``seed``.

Options (config ``analyses: {dannemann: {...}}``), defaults in brackets: ``n_inits`` (int >= 0,
[8]), ``steps`` (int >= 1, [10000]), ``steps_plain`` (int >= 1, [3000]), ``lr`` (> 0, [0.1]),
``lr_plain`` (> 0, [0.025]; below 1 / 39.7, 39.7 the top eigenvalue of C's Hessian 2 X'X,
GD on C does not zigzag),
``seed`` (int >= 0, [0]), ``eps`` (> 0, [1e-12]), ``init_std`` (> 0, [3.0]),
``record_every`` (int >= 1, [20]), ``n_angles`` (int >= 16, [3600]), ``fd_step`` (> 0, [1e-6]).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.optimize import brentq
from torch import nn

# The paper's Example 3.2 (inputs): samples and labels.
X = np.array([[1.0, 1.0], [1.0, 2.0], [2.0, 3.0]])
Y = np.array([2.0, 5.0, 13.0])
PAPER_GRADIENT = (-0.34, 0.11)  # printed in the paper (2 decimals): a reference only
OPTIONS = {"n_inits": 8, "steps": 10000, "steps_plain": 3000, "lr": 0.1, "lr_plain": 0.025,
           "seed": 0, "eps": 1e-12, "init_std": 3.0, "record_every": 20, "n_angles": 3600,
           "fd_step": 1e-6}
_INTS = {"n_inits": 0, "steps": 1, "steps_plain": 1, "seed": 0, "record_every": 1,
         "n_angles": 16}


def parse_options(options: dict | None) -> dict:
    """Options with defaults filled in; bad values raise ValueError naming the valid range."""
    opts = dict(OPTIONS)
    opts.update(options or {})
    unknown = sorted(set(opts) - set(OPTIONS))
    if unknown:
        raise ValueError(f"unknown dannemann option(s) {unknown}; valid: {sorted(OPTIONS)}")
    for key, low in _INTS.items():
        v = opts[key]
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise ValueError(f"dannemann {key} must be an integer >= {low}, got {v!r}")
    for key in ("lr", "lr_plain", "eps", "init_std", "fd_step"):
        v = opts[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0 \
                or not math.isfinite(v):
            raise ValueError(f"dannemann {key} must be a finite number > 0, got {v!r}")
        opts[key] = float(v)
    return opts


# -- the two costs ---------------------------------------------------------------------------

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


def bn_neuron(w, eps: float) -> nn.Sequential:
    """The neuron as real torch layers: Linear(2, K, bias=False) -> BatchNorm1d(K, affine=False),
    one output unit per row of ``w`` (shape (2,) or (K, 2)); BN normalizes each unit over the
    batch on its own, so K units are K independent copies of the paper's neuron."""
    w = torch.as_tensor(np.atleast_2d(np.asarray(w, float)))
    net = nn.Sequential(nn.Linear(2, len(w), bias=False),
                        nn.BatchNorm1d(len(w), affine=False, eps=eps)).double().train()
    with torch.no_grad():
        net[0].weight.copy_(w)
    return net


def _torch_data():
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


def _unit(theta: float) -> np.ndarray:
    return np.array([math.cos(theta), math.sin(theta)])


def landscape(n_angles: int, radius: float) -> tuple[np.ndarray, np.ndarray]:
    """C^ (eps = 0) at ``n_angles`` equally spaced directions of norm ``radius``."""
    theta = np.arange(n_angles) * (2 * math.pi / n_angles)
    return theta, np.array([bn_loss(radius * _unit(t)) for t in theta])


def angular_derivative(theta: float) -> float:
    """d C^(u(theta)) / d theta at unit radius (closed-form gradient dotted with u')."""
    return float(bn_grad(_unit(theta)) @ np.array([-math.sin(theta), math.cos(theta)]))


def scan_minima(theta: np.ndarray, loss: np.ndarray, radius: float) -> list[tuple[float, float]]:
    """Every circular grid local minimum, refined to the root of the angular derivative within
    one grid step (Brent; the loss itself is too flat there to locate better than ~1e-7 rad)."""
    step = theta[1] - theta[0]
    idx = np.flatnonzero((loss < np.roll(loss, 1)) & (loss <= np.roll(loss, -1)))
    out = []
    for i in idx:
        lo, hi = theta[i] - step, theta[i] + step
        t = theta[i]
        if angular_derivative(lo) < 0 < angular_derivative(hi):
            t = brentq(angular_derivative, lo, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps)
        t = math.atan2(math.sin(t), math.cos(t))
        out.append((t, bn_loss(radius * _unit(t))))
    return out


# -- gradient descent -------------------------------------------------------------------------

def gradient_descent(w0, objective: str, steps: int, lr: float, eps: float, every: int):
    """Full-batch GD (torch SGD, no momentum) from every row of ``w0`` (K, 2) at once: one
    output unit per init, each with its own loss, so the K runs do not interact. Returns
    [(step, W (K, 2), losses (K,)), ...] at steps 0..100, every ``every``-th step and the last,
    and the final per-init gradient norms."""
    x, y = _torch_data()
    w0 = np.atleast_2d(np.asarray(w0, float))
    net = bn_neuron(w0, eps) if objective == "bn" else nn.Sequential(
        nn.Linear(2, len(w0), bias=False)).double()
    lin = net[0]
    with torch.no_grad():
        lin.weight.copy_(torch.as_tensor(w0))
    opt = torch.optim.SGD(lin.parameters(), lr=lr, momentum=0.0)
    path = []
    for t in range(steps + 1):
        opt.zero_grad()
        losses = ((net(x) - y[:, None]) ** 2).sum(0)
        losses.sum().backward()
        if t <= 100 or t % every == 0 or t == steps:
            path.append((t, lin.weight.detach().numpy().copy(), losses.detach().numpy().copy()))
        if t < steps:
            opt.step()
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


def _gradient_rows(w_star: np.ndarray, eps: float, h: float) -> list[dict]:
    loss_t, g_t = autograd_bn(w_star, eps)
    rows = [("autograd_batchnorm1d", g_t, loss_t),
            ("closed_form", bn_grad(w_star), bn_loss(w_star)),
            ("finite_difference_paper_formula", finite_difference(paper_loss, w_star, h),
             paper_loss(w_star)),
            ("paper_reported", np.array(PAPER_GRADIENT), float("nan"))]
    return [{"record": "gradient", "method": m, "objective": "bn", "w1": w_star[0],
             "w2": w_star[1], "grad_w1": g[0], "grad_w2": g[1], "grad_norm": float(np.hypot(*g)),
             "grad_dot_w": float(g @ w_star), "loss": loss} for m, g, loss in rows]


def run(options: dict) -> list[dict]:
    """All rows of the ``dannemann`` table (see the module docstring for the records)."""
    o = parse_options(options)
    w_star = plain_optimum()
    radius = float(np.linalg.norm(w_star))
    rows = [{"record": "data", "sample": i, "x1": X[i, 0], "x2": X[i, 1], "y": Y[i]}
            for i in range(len(X))]
    rows += _gradient_rows(w_star, o["eps"], o["fd_step"])
    rows.append({"record": "optimum", "method": "plain_least_squares", "objective": "plain",
                 "w1": w_star[0], "w2": w_star[1], "angle_deg": angle_deg(w_star),
                 "loss": plain_loss(w_star), "bn_loss_at": bn_loss(w_star)})
    d = centered_lstsq_direction()
    rows.append({"record": "optimum", "method": "bn_centered_least_squares", "objective": "bn",
                 "w1": d[0], "w2": d[1], "angle_deg": angle_deg(d), "loss": bn_loss(d),
                 "line_residual": 3 * d[0] - 5 * d[1]})
    theta, scan = landscape(o["n_angles"], radius)
    rows += [{"record": "landscape", "objective": "bn", "angle_deg": math.degrees(t),
              "loss": v, "radius": radius} for t, v in zip(theta, scan, strict=True)]
    minima = scan_minima(theta, scan, radius)
    for t, v in minima:
        u = _unit(t)
        rows.append({"record": "optimum", "method": "bn_angle_scan", "objective": "bn",
                     "w1": u[0], "w2": u[1], "angle_deg": math.degrees(t), "loss": v,
                     "line_residual": 3 * u[0] - 5 * u[1], "n_minima": len(minima)})
    directions = [_unit(t) for t, _ in minima]
    target = math.degrees(min(minima, key=lambda m: m[1])[0])
    rng = np.random.default_rng(o["seed"])
    inits = np.array([w_star] + [rng.normal(0.0, o["init_std"], 2)
                                 for _ in range(o["n_inits"])])
    base = [{"init": i, "init_label": "paper W0 = W*" if i == 0 else "random", "w0_1": w0[0],
             "w0_2": w0[1]} for i, w0 in enumerate(inits)]
    reached = {}
    for objective, lr, steps in (("bn", o["lr"], o["steps"]),
                                 ("plain", o["lr_plain"], o["steps_plain"])):
        path, gnorm = gradient_descent(inits, objective, steps, lr, o["eps"], o["record_every"])
        rows += [{"record": "trajectory", "objective": objective, **b, "step": t, "w1": w[i, 0],
                  "w2": w[i, 1], "loss": v[i], "angle_deg": angle_deg(w[i])}
                 for i, b in enumerate(base) for t, w, v in path]
        _, wf, vf = path[-1]
        reached[objective] = wf
        for i, (b, w) in enumerate(zip(base, wf, strict=True)):
            res = 3 * w[0] - 5 * w[1]
            rows.append({"record": "final", "objective": objective, **b, "step": steps, "lr": lr,
                         "w1": w[0], "w2": w[1], "loss": vf[i], "grad_norm": gnorm[i],
                         "angle_deg": angle_deg(w),
                         "angle_error_deg": wrap_deg(angle_deg(w) - target),
                         "line_residual": res,
                         "line_residual_normalized": res / (math.sqrt(34.0) * np.linalg.norm(w)),
                         "dist_to_wstar": float(np.linalg.norm(w - w_star))})
    for i, (b, w0) in enumerate(zip(base, inits, strict=True)):
        lhs, lhs_gd, rhs = (closest_on_rays(w0, directions),
                            float(np.sum((w0 - reached["bn"][i]) ** 2)), lemma_rhs(w0, w_star))
        rows.append({"record": "lemma", **b, "inner_w0_wstar": float(w0 @ w_star),
                     "hypothesis": bool(w0 @ w_star > 0), "lhs_closest": lhs,
                     "lhs_reached": lhs_gd, "rhs": rhs, "holds_closest": bool(lhs <= rhs),
                     "holds_reached": bool(lhs_gd <= rhs)})
    return rows
