"""Loss-landscape smoothness along the gradient (Santurkar et al. 2018, §3.2, Fig. 4, Fig. 11,
App. A.2.2).

At every checkpoint step ``t`` with weights ``w = W^t`` and that step's recorded mini-batch
``B`` (the batch update ``t`` uses, with the random crops and flips update ``t`` drew when the
run trains with ``augment: true``), let ``L`` be the mean training loss on ``B`` (cross-entropy
or MSE, exactly the loss training minimizes, without weight decay) and ``g = ∇L(w)``. For step
sizes ``η = m · lr_t`` over the multipliers ``m`` (``lr_t`` is the learning rate update ``t``
used: the run's schedule at step ``t``, :mod:`bnstudy.train.schedules`, recorded in the ``lr``
column) the measure probes the points ``w - η g`` and records

- the loss ``L(w - η g)`` at each probe; ``loss_min``/``loss_max`` over the probes are the "loss
  variation" band of Fig. 4(a) (the loss at ``w`` itself is the separate ``loss`` column);
- gradient predictiveness: ``grad_diff = ‖∇L(w - η g) - g‖₂`` at each probe (Fig. 4(b),
  Fig. 11), ``grad_pred_max`` its maximum over the probes;
- effective β-smoothness: ``beta_eff = max_probes ‖∇L(w - η g) - g‖₂ / ‖η g‖₂`` (Fig. 4(c));
- optionally the top Hessian eigenvalue of ``L`` at ``w``
(:mod:`bnstudy.measures.smoothness.hessian`).

Choices the paper leaves open, fixed here:

- Parameters: ``w`` and ``g`` are the concatenation of every trainable parameter tensor the
  optimizer updates (weights and biases of every linear/conv map including the head, BN/LN/GN
  affine parameters; for weight normalization its ``g`` and ``v``), and all norms are global
  ℓ2 norms over that concatenation. The probe direction is the plain mini-batch gradient, not
  the optimizer's momentum/weight-decay update direction.
- Multipliers: ``n_probes`` values from ``multipliers = [min, max]`` (the paper: [1/2, 4] for
  nonlinear nets, [1/100, 30] for the DLN; ``multipliers_by_arch`` overrides the range per model
  arch), spaced geometrically (``spacing: log``, default) or evenly (``linear``); the endpoints are
  included (``n_probes: 1`` probes ``min`` only). The paper does not say how many probes or how
  they are spaced. (Fig. 4's caption caps VGG at 0.4x the step size while App. A.2.2 states
  [1/2, 4]; the default follows App. A.2.2, as the issue asks.) ``lr_t`` is the scheduled SGD
  learning rate of the checkpoint's step (the run's ``lr`` when the schedule is constant), so
  with momentum 0 the probe at ``m = 1`` is exactly the next step's weights.
- BN statistics (``bn_statistics``, recorded in every row): ``batch`` (default, the paper's
  setting) evaluates every point in train mode, so each BN layer normalizes with the mini-batch
  statistics of ``B`` at that point's weights (they change along the line, as they would in
  training); ``running`` evaluates in eval mode with the checkpoint's running averages.
  Stochastic normalizers (noisy BN) draw, in train mode, the noise of the checkpoint's step in
  every pass (:mod:`bnstudy.networks.norms.noisy`): all probes see the one function of that step,
  so the loss and gradient differences along the line are the landscape's, not fresh noise's
  (a probe step of 0 gives a zero gradient difference, for every normalizer).
  Either way the model is never run: every pass runs on a private deep copy (parameters, BN
  buffers, train/eval flags), whose parameters are overwritten in place with each probe point.
  The model's weights, ``.grad``, BN running buffers and modes stay as they were. (A copy with
  in-place writes costs ~1.2x a plain forward+backward on the small study models, against ~2x
  for ``torch.func.functional_call``'s per-call re-parametrization.)
- Non-finite values (probes beyond a blow-up) are kept as they are in the probe table; the
  maxima treat NaN as +inf (an unbounded variation), and ``nonfinite_probes`` counts them.
- ``beta_eff`` is NaN when ``η‖g‖ = 0`` (a zero gradient or ``lr = 0``).

Cost per checkpoint: ``1 + n_probes`` forward+backward passes on ``B`` (the pass-count floor),
plus, when the Hessian is on, at most ``hessian_iters`` Hessian-vector products (Lanczos steps,
:mod:`.hessian`; each is one double-backward through the graph of the first pass, which is then
built with ``create_graph``). The Hessian is skipped (NaN) for models with more than
``hessian_max_params`` parameters.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from bnstudy.measures.smoothness import hessian
from bnstudy.measures.smoothness.options import BN_STATISTICS, SPACINGS, Options  # noqa: F401
from bnstudy.networks.hessian import gradient_and_hvp
from bnstudy.train import augment, checkpoints, schedules
from bnstudy.train.loop import loss_fn


@dataclass
class LineResult:
    """What :func:`probe_line` measured; ``passes`` counts forward+backward passes."""

    loss: float  # L(w)
    grad_norm: float  # ‖g‖
    probes: list[dict]  # multiplier, eta, distance, loss, grad_diff, beta
    passes: int
    hessian: hessian.EigenResult | None = None


class Objective:
    """A scalar loss of some leaf tensors, evaluated at flat points of their concatenation.

    ``loss()`` computes the loss from the current values of ``leaves`` (e.g. a private copy of a
    model whose parameters are the leaves); :meth:`set` writes a flat point into the leaves.
    """

    def __init__(self, loss: Callable[[], torch.Tensor], leaves: Sequence[torch.Tensor]):
        self.loss, self.leaves = loss, list(leaves)

    def get(self) -> torch.Tensor:
        return torch.cat([p.detach().reshape(-1) for p in self.leaves])

    @torch.no_grad()
    def set(self, flat: torch.Tensor) -> None:
        offset = 0
        for p in self.leaves:
            p.copy_(flat[offset: offset + p.numel()].view_as(p))
            offset += p.numel()

    def value_and_grad(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Loss and flat gradient at the current point: one forward+backward pass."""
        loss = self.loss()
        grads = torch.autograd.grad(loss, self.leaves)
        return loss.detach(), torch.cat([g.reshape(-1) for g in grads])


def probe_line(objective: Objective, step_size: float, multipliers,
               hessian_opts: dict | None = None) -> LineResult:
    """Probe ``objective`` along ``-g`` from its current point ``w``.

    ``hessian_opts`` (``iters``, ``tol``, ``seed``) turns on the top eigenvalue's Lanczos
    iteration at ``w`` (run first: the probes then move the leaves). The leaves are back at
    ``w`` on return.
    """
    w = objective.get()
    eig = None
    if hessian_opts is not None:
        base = objective.loss()
        g_list, hvp = gradient_and_hvp(base, objective.leaves)
        eig = hessian.top_eigenvalue(hvp, g_list, **hessian_opts)
        base, g = base.detach(), torch.cat([t.reshape(-1) for t in g_list])
        del hvp  # frees the double-backward graph before the leaves change
    else:
        base, g = objective.value_and_grad()
    gnorm = g.double().norm()
    losses, diffs = [], []
    try:
        for m in multipliers:
            objective.set(w - float(m) * float(step_size) * g)
            loss, grad = objective.value_and_grad()
            losses.append(loss.double())
            diffs.append((grad - g).double().norm())
    finally:
        objective.set(w)
    # One device-to-host transfer for everything (no per-probe synchronization on CUDA).
    vals = torch.stack([base.double(), gnorm, *losses, *diffs]).tolist()
    base_loss, gn, n = vals[0], vals[1], len(losses)
    probes = []
    for i, m in enumerate(multipliers):
        eta = float(m) * float(step_size)
        diff, dist = vals[2 + n + i], eta * gn
        probes.append({"multiplier": float(m), "eta": eta, "distance": dist,
                       "loss": vals[2 + i], "grad_diff": diff,
                       "beta": diff / dist if dist > 0 else float("nan")})
    return LineResult(base_loss, gn, probes, 1 + n, eig)


def _max(values) -> float:
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return float("nan")
    return float(np.max(np.where(np.isnan(v), np.inf, v)))


def summarize(line: LineResult) -> dict:
    """The per-checkpoint summary row of a :class:`LineResult`."""
    losses = [p["loss"] for p in line.probes]
    finite = [x for x in losses if math.isfinite(x)]
    betas = [p["beta"] for p in line.probes]
    eig = line.hessian
    nan = float("nan")
    return {
        "loss": line.loss, "grad_norm": line.grad_norm,
        "loss_min": min(finite) if finite else nan, "loss_max": _max(losses),
        "grad_pred_max": _max([p["grad_diff"] for p in line.probes]),
        "beta_eff": nan if all(math.isnan(b) for b in betas) else _max(betas),
        "nonfinite_probes": len(losses) - len(finite),
        "hessian_top": eig.top if eig else nan,
        "hessian_dominant": eig.dominant if eig else nan,
        "hessian_iterations": eig.iterations if eig else 0,
        "hessian_converged": bool(eig.converged) if eig else False,
    }


def measure(model: nn.Module, x: torch.Tensor, y: torch.Tensor, task: str, step_size: float,
            options: Options | dict | None = None, arch: str | None = None, *,
            owned: bool = False) -> tuple[dict, list[dict], LineResult]:
    """Smoothness of ``model``'s loss on the batch ``(x, y)`` along its gradient.

    Returns the summary row, the probe rows and the raw :class:`LineResult`. Every pass runs on
    a private copy of the model (parameters and BN buffers), so the model itself, its ``.grad``,
    its buffers and its train/eval flags are never touched. ``owned=True`` skips the copy (about
    one to a few forward+backward passes' worth of time on the small study models): only for a
    model the caller discards or reloads afterwards; its weights end where they started, but its
    mode, BN buffers and parameter version counters change.
    """
    opts = options if isinstance(options, Options) else Options.parse(options)
    lf = loss_fn(task)
    twin = model if owned else copy.deepcopy(model)
    twin.train(opts.bn_statistics == "batch")
    leaves = [p for p in twin.parameters() if p.requires_grad]
    n_params = sum(p.numel() for p in leaves)
    hopts = None
    if opts.hessian and n_params <= opts.hessian_max_params:
        hopts = {"iters": opts.hessian_iters, "tol": opts.hessian_tol, "seed": opts.seed}
    # In train mode BN also updates the copy's running buffers; they are never read there.
    objective = Objective(lambda: lf(twin(x), y), leaves)
    line = probe_line(objective, step_size, opts.multiplier_values(arch), hopts)
    common = {"bn_statistics": opts.bn_statistics}
    row = {**summarize(line), "lr": float(step_size), "n_probes": len(line.probes),
           "n_params": n_params, **common}
    return row, [{**p, **common} for p in line.probes], line


def run(run: dict, ds, options: dict, device: torch.device) -> dict[str, list[dict]]:
    """The measure over every checkpoint of a run: tables ``smoothness`` and
    ``smoothness_probes``."""
    opts = Options.parse(options)
    spec = run["spec"]
    lr_at = schedules.from_config(spec.training, len(ds.x_train))
    arch = spec.model_config.arch
    xtr = torch.as_tensor(ds.x_train)
    ytr = torch.as_tensor(ds.y_train)
    rows, probe_rows = [], []
    # One model for the whole run, reloaded at each checkpoint (weights and BN buffers): it is
    # private to this function, so the measure may use it in place (``owned``).
    model = checkpoints.restore(run, 0, ds, device).model if run["checkpoints"] else None
    for ck in run["checkpoints"]:
        model.load_state_dict(ck["model"])
        idx = ck["batch"].cpu()
        step = int(ck["step"])
        x = augment.update_inputs(xtr[idx], spec, step, ds.input_shape).to(device)
        y = ytr[idx].to(device)
        row, probes, _ = measure(model, x, y, ds.task, lr_at(step), opts, arch, owned=True)
        extra = {"step": step, "diverged": bool(run["diverged"])}
        rows.append({**extra, **row})
        probe_rows.extend({**extra, **p} for p in probes)
    return {"smoothness": rows, "smoothness_probes": probe_rows}
