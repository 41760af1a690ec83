"""Luo's gamma decay for population normalization: the per-unit ``zeta`` of Eq. 3 / App. C.4.

Replacing a PN layer's population statistics ``mu_P, sigma_P`` by those of a random batch of
``M`` samples perturbs each unit's output ``hbar = gamma n + beta`` (``n = (h - mu_P) /
sigma_P``) by ``delta = gamma (a n + b)``, with ``a = sigma_P / sigma_B - 1`` and ``b = (mu_P -
mu_B) / sigma_B``. Luo's Eq. 3 / App. C.4 is the second-order part of the expected loss increase,
``Q = E[L(hbar + delta) - L(hbar) - dL . delta]`` (the first-order part, App. C.1's ``R^f``, is
dropped), written as ``sum_i zeta_i gamma_i^2``. Choices the paper leaves open:

- Batch noise: ``(a_i, b_i)`` is zero-mean with covariance ``Cov_j(v_j) / M``, ``v_j = (qbar_j / 2,
  nbar_j)`` per unit, where ``nbar_j, qbar_j`` are the means of ``n`` and ``n^2`` over sample
  ``j``'s positions (first order in ``1/sqrt(M)``; ``O(1/M^2)`` dropped). For a dense unit the
  diagonal is Luo's ``(rho + 2)/(4M)`` (``rho``: excess kurtosis) and ``1/M``; for a conv channel
  it is smaller (BN pools the correlated positions of ``M`` samples). The covariance *between*
  units of a layer is kept: units are correlated (after training strongly), and their batch
  noise is then too; Luo's text reads ``I(gamma)`` as a matrix for several neurons ("BN would
  penalize correlations among neurons"). Noise of different layers is independent (C.4 isolates
  each layer).
- Curvature, two parts. (1) The generalized Gauss-Newton part ``J^T H_out J`` (``J``: per-sample
  Jacobian of the output with respect to the units' ``(gamma, beta)``; ``H_out``: the loss's
  Hessian in the output, ``diag(p) - p p^T`` for softmax cross-entropy, ``(2/d) I`` for the
  regression loss, squared error averaged over ``d`` outputs). Its expectation under the noise is
  exact: ``Q_GN = 1/2 tr(G C)`` per layer, one backward pass per output. For a single GLM unit it
  is Eq. 3 with ``I(gamma) = mean_j A''(hbar_j) n_j^2``, the curvature form C.1 derives (the
  squared gradient equals it only in expectation over the labels: for regression, only at unit
  residual variance); for the linear student it is C.3's ``3/(2M)`` of the unhalved squared error.
  (2) The rest, chiefly the kinks of the ReLUs the perturbation crosses (zero in any Hessian at a
  point, but ``O(1/M)`` in the expected increase): estimated with ``probes`` antithetic Gaussian
  probes ``+-eps`` of the noise covariance, drawn for all layers at once, as ``1/4 eps .
  (dL(hbar + eps) - dL(hbar - eps))`` minus the same probe's Gauss-Newton value (a control
  variate with known mean, which removes the noise of the Gauss-Newton part). ``probes = 0``
  keeps the Gauss-Newton part only (exact for networks with smooth or identity activations).
- Per unit, ``zeta_i gamma_i^2`` is unit ``i``'s share ``1/2 gamma_i dQ/dgamma_i`` of the
  quadratic form ``Q`` (for a quadratic ``Q`` the shares sum to ``Q`` and ``2 zeta_i gamma_i`` is
  its gradient at the refresh). A unit's share can be negative (``Q`` itself is not);
  ``gamma_i = 0`` keeps the unit's own diagonal term.
- ``zeta`` is in units of the training loss (the mean over samples) the decay is added to.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

PROBES = 4  # default number of antithetic probe pairs (population_norm's zeta_probes)


def _noise(n: torch.Tensor) -> torch.Tensor:
    """Per sample, each unit's mean of ``n^2 / 2`` and of ``n`` over its positions: (N, 2u)."""
    nd = n.double()
    dims = tuple(range(2, n.dim()))
    qbar = (nd * nd).mean(dims) if dims else nd * nd
    nbar = nd.mean(dims) if dims else nd
    return torch.cat([qbar / 2, nbar], 1)


def _jacobian(g: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """d output_k / d (gamma, beta) per sample, from ``g = d output_k / d hbar``: (N, 2u)."""
    dims = tuple(range(2, n.dim()))
    jg = (g * n).sum(dims) if dims else g * n
    jb = g.sum(dims) if dims else g
    return torch.cat([jg, jb], 1).double()


def _loss_sum(pred: torch.Tensor, y: torch.Tensor, task: str) -> torch.Tensor:
    if task == "classification":
        return F.cross_entropy(pred, y, reduction="sum")
    return ((pred - y) ** 2).reshape(len(pred), -1).mean(1).sum()


def _run(model, pairs, x, hook):
    """``model(x)`` with ``hook(layer_index, pn, inp, out)`` as forward hook on every PN layer."""
    handles = [pn.register_forward_hook(lambda mod, inp, out, k=k: hook(k, mod, inp, out))
               for k, (_, pn) in enumerate(pairs)]
    try:
        return model(x)
    finally:
        for h in handles:
            h.remove()


def _covariances(model, pairs, x, m: int, chunk: int) -> list[torch.Tensor]:
    """Per layer, the covariance of the batch noise ``(a, b)`` of its units (size 2u)."""
    sums = [[0, 0.0, 0.0] for _ in pairs]

    def grab(k, mod, inp, out):
        v = _noise(mod.normalized(inp[0]))
        s = sums[k]
        s[0], s[1], s[2] = s[0] + len(v), s[1] + v.sum(0), s[2] + v.T @ v

    with torch.no_grad():
        for i in range(0, len(x), chunk):
            _run(model, pairs, x[i: i + chunk], grab)
    out = []
    for n, s, ss in sums:
        mean = s / n
        out.append((ss / n - torch.outer(mean, mean)) / m)
    return out


def _gauss_newton(model, pairs, x, y, task, chunk, probes):
    """Per layer: the summed Gauss-Newton matrix ``sum_j J_j^T H_out J_j`` in (gamma, beta)
    coordinates, and for each probe (in those coordinates) ``eps . (G eps) / 2`` per entry.
    ``H_out = diag(c) - [classification] p p^T`` with ``c = p`` (softmax) or ``2/d``; one output
    at a time, so memory is (samples x units) per layer."""
    gn = [0.0 for _ in pairs]
    cv = [torch.zeros_like(e) for e in probes]
    for i in range(0, len(x), chunk):
        outs, norms = [], []

        def keep(k, mod, inp, out, outs=outs, norms=norms):
            outs.append(out)
            norms.append(mod.normalized(inp[0]).detach())

        pred = _run(model, pairs, x[i: i + chunk], keep)
        pred = pred.reshape(len(pred), -1)
        d, soft = pred.shape[1], task == "classification"
        c = (F.softmax(pred.detach().double(), 1) if soft
             else torch.full(pred.shape, 2 / d, dtype=torch.float64))
        sq = [0.0 for _ in pairs]  # sum_k (c_k J_k)^T J_k
        mean = [0.0 for _ in pairs]  # sum_k p_k J_k (classification)
        cw = [0.0 for _ in pairs]  # sum_k (c_k w_k)^T J_k, w_k: the probes' output change
        pw = 0.0  # sum_k p_k w_k
        for k in range(d):
            grads = torch.autograd.grad(pred[:, k].sum(), outs, retain_graph=k < d - 1)
            jk = [_jacobian(g, n) for n, g in zip(norms, grads, strict=True)]  # (N, 2u) each
            ck = c[:, k: k + 1]
            wk = sum(j @ e.T for j, e in zip(jk, probes, strict=True)) if probes else None
            for layer, j in enumerate(jk):
                sq[layer] = sq[layer] + (ck * j).T @ j
                if soft:
                    mean[layer] = mean[layer] + ck * j
                if probes:
                    cw[layer] = cw[layer] + (ck * wk).T @ j
            if probes and soft:
                pw = pw + ck * wk
        for layer in range(len(pairs)):
            gn[layer] = gn[layer] + sq[layer] - (mean[layer].T @ mean[layer] if soft else 0.0)
            if probes:
                gw = cw[layer] - (pw.T @ mean[layer] if soft else 0.0)  # (R, 2u): G eps
                cv[layer] += probes[layer] * gw / 2
    return gn, cv


def _probe_terms(model, pairs, x, y, task, chunk, probes, t):
    """For each probe ``eps`` (gamma, beta coordinates) and its point ``t`` on the segment:
    ``eps . (dL(t eps) - dL(-t eps)) / 2``."""
    terms = [torch.zeros_like(e) for e in probes]
    for r in range(len(probes[0])):
        diff = [0.0 for _ in pairs]
        for sign in (1.0, -1.0):
            leaves = [(sign * t[r] * e[r]).to(x.dtype).requires_grad_(True) for e in probes]

            def shift(k, mod, inp, out, leaves=leaves):
                n = mod.normalized(inp[0]).detach()
                u = n.shape[1]
                sh = (1, -1) + (1,) * (n.dim() - 2)
                return out + n * leaves[k][:u].view(sh) + leaves[k][u:].view(sh)

            for i in range(0, len(x), chunk):
                pred = _run(model, pairs, x[i: i + chunk], shift)
                grads = torch.autograd.grad(_loss_sum(pred, y[i: i + chunk], task), leaves)
                for layer, g in enumerate(grads):
                    diff[layer] = diff[layer] + sign * g.double()
        for layer, e in enumerate(probes):
            terms[layer][r] = e[r] * diff[layer] / 2
    return terms


def curvature_zeta(model, pairs, x, y, task: str, m: int, chunk: int, probes: int,
                   gen: torch.Generator) -> None:
    """Set each PN unit's ``zeta`` (``pairs``: (block, PopulationNorm)) over the inputs ``x``,
    labels ``y``, for BN batch size ``m``, with ``probes`` probes drawn from ``gen``."""
    if task not in ("classification", "regression"):
        raise ValueError(f"population_norm zeta='eq3': unknown task {task!r}; valid choices: "
                         "classification, regression")
    if m < 2 or probes < 0:
        raise ValueError(f"population_norm zeta='eq3' needs a batch size >= 2 and probes >= 0, "
                         f"got {m} and {probes}")
    covs = _covariances(model, pairs, x, m, chunk)
    gammas = [pn.weight.detach().double() for _, pn in pairs]
    draws = []  # probes in (gamma, beta) coordinates: eps_(a, b) scaled by gamma
    for c, gamma in zip(covs, gammas, strict=True):
        jitter = 1e-12 * float(c.diagonal().mean().clamp_min(1e-30))
        chol = torch.linalg.cholesky(c + jitter * torch.eye(len(c), dtype=c.dtype))
        eps = torch.randn(probes, len(c), generator=gen, dtype=torch.float64) @ chol.T
        draws.append(eps * torch.cat([gamma, gamma]))
    gn, cv = _gauss_newton(model, pairs, x, y, task, chunk, draws if probes else [])
    # stratified points on the segment: E_t[eps . (dL(t eps) - dL(-t eps))] / 2 is the symmetric
    # second difference (L(eps) + L(-eps) - 2 L(0)) / 2 (kinks included); for its Gauss-Newton
    # part it is t eps . G eps
    t = torch.rand(probes, generator=gen, dtype=torch.float64)
    t = (torch.arange(probes, dtype=torch.float64) + t) / max(probes, 1)
    extra = _probe_terms(model, pairs, x, y, task, chunk, draws, t) if probes else None
    with torch.no_grad():
        for layer, (_, pn) in enumerate(pairs):
            u, gamma = pn.weight.numel(), gammas[layer]
            k2 = covs[layer] * gn[layer] / len(x)  # E[(a, b)(a, b)^T] * G, per entry pair
            kmat = k2[:u, :u] + k2[:u, u:] + k2[u:, :u] + k2[u:, u:]  # Q = gamma^T kmat gamma / 2
            share = gamma * (kmat @ gamma) / 2  # zeta_i gamma_i^2
            if probes:
                rest = ((extra[layer] - 2 * t[:, None] * cv[layer]) / len(x)).mean(0)
                share = share + rest[:u] + rest[u:]
            safe = gamma.abs() > 1e-6
            zeta = torch.where(safe, share / torch.where(safe, gamma * gamma, 1.0),
                               kmat.diagonal() / 2)
            pn.zeta.copy_(zeta.to(pn.zeta.dtype))
