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

Options (config ``analyses: {dannemann: {...}}``): the fields of :class:`Options`, each with
its default, range and meaning; an error names ``analyses.dannemann.<key>``, the bad value and
the valid range.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import ClassVar

import numpy as np

from bnstudy import options
from bnstudy.theory import dannemann_example as ex

NAME = "dannemann"


def _positive(default: float, doc: str):
    """A float field that must be finite and > 0 (checked by :meth:`Options.validate`)."""
    return field(default=default, metadata={"doc": f"{doc} (a finite number > 0)",
                                            "positive": True})


@dataclass(frozen=True)
class Options(options.Options):
    """The counterexample's settings: gradient descent on both costs, the random inits, the
    landscape scan and the numerical steps (the paper's setting itself is fixed)."""

    SECTION: ClassVar[str] = "analyses.dannemann"

    n_inits: int = options.at_least(
        8, 0, doc="seeded random inits w0 ~ N(0, init_std^2 I), besides the paper's W0 = W*")
    steps: int = options.at_least(10000, 1, doc="full-batch GD steps on the BN cost C^")
    steps_plain: int = options.at_least(3000, 1, doc="full-batch GD steps on the plain cost C")
    lr: float = _positive(0.1, "GD learning rate on C^")
    lr_plain: float = _positive(
        0.025, "GD learning rate on C; below 1 / 39.7 (39.7 the top eigenvalue of C's Hessian "
               "2 X'X) GD on C does not zigzag")
    seed: int = options.at_least(0, 0, doc="seed of the random inits")
    eps: float = _positive(
        1e-12, "BN eps of the torch layer (autograd and GD; torch refuses 0 in train mode); "
               "the closed form, the scan and the lemma use the paper's eps = 0")
    init_std: float = _positive(3.0, "standard deviation of the random inits (||W*|| ~ 3.2)")
    record_every: int = options.at_least(
        20, 1, doc="trajectory rows: steps 0..100, then every record_every-th step")
    n_angles: int = options.at_least(
        3600, 16, doc="directions at radius ||W*|| scanned for C^'s local minima")
    fd_step: float = _positive(
        1e-6, "central-difference step of the paper-formula gradient")

    def validate(self) -> None:
        for f in fields(self):
            if f.metadata.get("positive") and not 0 < getattr(self, f.name) < math.inf:
                self.fail(f.name, "need a finite number > 0")


# -- the two costs ---------------------------------------------------------------------------

def _gradient_rows(w_star: np.ndarray, eps: float, h: float) -> list[dict]:
    loss_t, g_t = ex.autograd_bn(w_star, eps)
    rows = [("autograd_batchnorm1d", g_t, loss_t),
            ("closed_form", ex.bn_grad(w_star), ex.bn_loss(w_star)),
            ("finite_difference_paper_formula", ex.finite_difference(ex.paper_loss, w_star, h),
             ex.paper_loss(w_star)),
            ("paper_reported", np.array(ex.PAPER_GRADIENT), float("nan"))]
    return [{"record": "gradient", "method": m, "objective": "bn", "w1": w_star[0],
             "w2": w_star[1], "grad_w1": g[0], "grad_w2": g[1], "grad_norm": float(np.hypot(*g)),
             "grad_dot_w": float(g @ w_star), "loss": loss} for m, g, loss in rows]


def run(opts: Options | dict | None = None) -> list[dict]:
    """All rows of the ``dannemann`` table (see the module docstring for the records), from
    parsed options (a config section is parsed here too: ``Options.parse`` is idempotent)."""
    o = Options.parse(opts)
    w_star = ex.plain_optimum()
    radius = float(np.linalg.norm(w_star))
    rows = [{"record": "data", "sample": i, "x1": ex.X[i, 0], "x2": ex.X[i, 1], "y": ex.Y[i]}
            for i in range(len(ex.X))]
    rows += _gradient_rows(w_star, o.eps, o.fd_step)
    rows.append({"record": "optimum", "method": "plain_least_squares", "objective": "plain",
                 "w1": w_star[0], "w2": w_star[1], "angle_deg": ex.angle_deg(w_star),
                 "loss": ex.plain_loss(w_star), "bn_loss_at": ex.bn_loss(w_star)})
    d = ex.centered_lstsq_direction()
    rows.append({"record": "optimum", "method": "bn_centered_least_squares", "objective": "bn",
                 "w1": d[0], "w2": d[1], "angle_deg": ex.angle_deg(d), "loss": ex.bn_loss(d),
                 "line_residual": 3 * d[0] - 5 * d[1]})
    theta, scan = ex.landscape(o.n_angles, radius)
    rows += [{"record": "landscape", "objective": "bn", "angle_deg": math.degrees(t),
              "loss": v, "radius": radius} for t, v in zip(theta, scan, strict=True)]
    minima = ex.scan_minima(theta, scan, radius)
    for t, v in minima:
        u = ex.unit_vector(t)
        rows.append({"record": "optimum", "method": "bn_angle_scan", "objective": "bn",
                     "w1": u[0], "w2": u[1], "angle_deg": math.degrees(t), "loss": v,
                     "line_residual": 3 * u[0] - 5 * u[1], "n_minima": len(minima)})
    directions = [ex.unit_vector(t) for t, _ in minima]
    target = math.degrees(min(minima, key=lambda m: m[1])[0])
    rng = np.random.default_rng(o.seed)
    inits = np.array([w_star] + [rng.normal(0.0, o.init_std, 2)
                                 for _ in range(o.n_inits)])
    base = [{"init": i, "init_label": "paper W0 = W*" if i == 0 else "random", "w0_1": w0[0],
             "w0_2": w0[1]} for i, w0 in enumerate(inits)]
    reached = {}
    for objective, lr, steps in (("bn", o.lr, o.steps),
                                 ("plain", o.lr_plain, o.steps_plain)):
        path, gnorm = ex.gradient_descent(inits, objective, steps, lr, o.eps, o.record_every)
        rows += [{"record": "trajectory", "objective": objective, **b, "step": t, "w1": w[i, 0],
                  "w2": w[i, 1], "loss": v[i], "angle_deg": ex.angle_deg(w[i])}
                 for i, b in enumerate(base) for t, w, v in path]
        _, wf, vf = path[-1]
        reached[objective] = wf
        for i, (b, w) in enumerate(zip(base, wf, strict=True)):
            res = 3 * w[0] - 5 * w[1]
            rows.append({"record": "final", "objective": objective, **b, "step": steps, "lr": lr,
                         "w1": w[0], "w2": w[1], "loss": vf[i], "grad_norm": gnorm[i],
                         "angle_deg": ex.angle_deg(w),
                         "angle_error_deg": ex.wrap_deg(ex.angle_deg(w) - target),
                         "line_residual": res,
                         "line_residual_normalized": res / (math.sqrt(34.0) * np.linalg.norm(w)),
                         "dist_to_wstar": float(np.linalg.norm(w - w_star))})
    for i, (b, w0) in enumerate(zip(base, inits, strict=True)):
        lhs, lhs_gd, rhs = (ex.closest_on_rays(w0, directions),
                            float(np.sum((w0 - reached["bn"][i]) ** 2)), ex.lemma_rhs(w0, w_star))
        rows.append({"record": "lemma", **b, "inner_w0_wstar": float(w0 @ w_star),
                     "hypothesis": bool(w0 @ w_star > 0), "lhs_closest": lhs,
                     "lhs_reached": lhs_gd, "rhs": rhs, "holds_closest": bool(lhs <= rhs),
                     "holds_reached": bool(lhs_gd <= rhs)})
    return rows
