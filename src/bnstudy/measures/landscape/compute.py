"""Loss-landscape slices (Li et al. 2018, §4-5) and Hessian spectra (Yao et al. 2020) at a
run's checkpoints.

The loss ``L`` is the mean training loss (cross-entropy or MSE, as trained, without weight
decay) over a fixed sample of ``sample_size`` training points: a subset drawn once per run
from the run's seed plus ``seed`` (no augmentation). BN statistics (``bn_statistics``, in every
row): ``batch`` evaluates in train mode, each batch-statistics layer normalizing with the
statistics of the whole sample at that point's weights; ``running`` in eval mode with the
checkpoint's running averages. Stochastic layers (noisy BN, dropout) draw the noise of the
checkpoint's step in every pass, so every point sees one function.

Directions (Li et al. §4, ``net_plotter.normalize_directions_for_weights``): a Gaussian
direction ``d`` over every trainable parameter tensor, then, for each tensor ``W`` of two or more
dimensions, each filter ``d_i`` (a slice along dim 0: a conv's output channel, a linear map's
output unit) rescaled to ``d_i ||W_i|| / (||d_i|| + 1e-10)``, so that the slice's scale is the
weights' own and scale-invariant (BN) and plain networks are compared on one footing. The
parameters of normalizer layers (BN/LN/GN affine, every parameter of a block's ``norm``) are
zero in ``d``; other 1-D tensors (biases) are zero too (``bias: zero``, Li et al.'s
``ignore='biasbn'``) or copies of the weights (``bias: weights``). The raw Gaussian draws come
from one CPU generator seeded with the run's seed and ``seed``, so the same config gives the same
directions (the 1-D random line is the 2-D grid's first axis; the second direction is the next
draw); they are filter-normalized at each checkpoint against that checkpoint's weights.

Slices: ``random``: ``L(w + a d)`` for ``a`` over ``line_points`` evenly spaced values of
``line_range``; ``interpolation``: ``L(w0 + a (w - w0))`` over ``interpolation_range`` (``w0``
the initialization, the step-0 checkpoint; not drawn at the initialization itself, where the
line is a point, nor for a run without a step-0 checkpoint); grid: ``L(w + a d1 + b d2)`` on the
``grid_points`` x ``grid_points`` grid over ``grid_range`` squared. Only the parameters move;
buffers (running averages) stay the checkpoint's.

The model is never run: points are evaluated on a private copy, in chunks of ``chunk`` points
per ``torch.func.vmap`` over ``functional_call`` (``batching: vmap``; batch statistics are
computed without touching running buffers there), or one in-place write and forward per point
(``batching: loop``, and wherever vmap cannot run the model: a stochastic normalizer's
generator). On one CPU thread vmap was 2-3x faster than the loop for the 25-layer DLN, about
as fast for the digits MLP (``benchmarks/bench_landscape.py``). Cost per checkpoint: one forward
pass on the sample per point (the floor), batched. Curvature (:mod:`.curvature`): one forward and
backward with ``create_graph``, then one Hessian-vector product per Hutchinson sample and per
Lanczos step of each density run; the top-k are the largest Ritz values of the first run (one
run for them alone when ``density_runs`` is 0). Lanczos keeps its basis, ``lanczos_steps`` x
the parameter count in float64: above ``hessian_max_params`` parameters only the trace is
estimated (``hessian_top`` NaN, no spectrum rows).
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch import nn

from bnstudy.measures.landscape import curvature
from bnstudy.networks import normalizers
from bnstudy.networks.blocks import blocks
from bnstudy.train import checkpoints
from bnstudy.train.evaluation import loss_fn

TABLES = ("landscape", "landscape_grid", "landscape_curvature", "landscape_spectrum",
          "landscape_blocks")  # the contract's (compute does not import its package)

EPS = 1e-10  # Li et al.'s filter-norm guard


def derived_seed(*parts: int) -> int:
    """One integer seed from the run's seed and the measure's (stable across platforms)."""
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1)[0])


def normalizer_parameters(model: nn.Module) -> set[str]:
    """Names of the parameters that belong to normalizer layers (a block's ``norm`` or any
    torch norm layer)."""
    norms = {id(b.norm) for b in blocks(model)}
    torch_norms = (nn.modules.batchnorm._NormBase, nn.LayerNorm, nn.GroupNorm)
    out = set()
    for mname, m in model.named_modules():
        if id(m) in norms or isinstance(m, torch_norms):
            out.update(f"{mname}.{p}" if mname else p for p, _ in m.named_parameters())
    return out


def trainable(model: nn.Module) -> dict[str, torch.Tensor]:
    return {n: p for n, p in model.named_parameters() if p.requires_grad}


def raw_direction(weights: dict[str, torch.Tensor], gen: torch.Generator) -> dict:
    return {n: torch.randn(w.shape, generator=gen, dtype=torch.float64).to(w.device, w.dtype)
            for n, w in weights.items()}


def filter_normalize(direction: dict, weights: dict, norm_names: set[str], bias: str = "zero"
                     ) -> dict[str, torch.Tensor]:
    """Li et al.'s filter normalization of ``direction`` against ``weights`` (see the module)."""
    out = {}
    for n, w in weights.items():
        w, d = w.detach(), direction[n]
        if n in norm_names:
            out[n] = torch.zeros_like(w)
        elif w.dim() <= 1:
            out[n] = torch.zeros_like(w) if bias == "zero" else w.clone()
        else:
            wn = w.reshape(w.shape[0], -1).norm(dim=1)
            dn = d.reshape(d.shape[0], -1).norm(dim=1)
            out[n] = d * (wn / (dn + EPS)).view(-1, *([1] * (w.dim() - 1)))
    return out


def _norm(d: dict) -> float:
    return float(sum(t.double().pow(2).sum() for t in d.values()).sqrt())


class Slicer:
    """Loss at ``origin + sum_j c_j d_j`` for rows ``c`` of a coefficient matrix, on a private
    copy of ``model``."""

    def __init__(self, model: nn.Module, x, y, task: str, bn_statistics: str, step: int,
                 chunk: int):
        self.lf, self.x, self.y, self.chunk = loss_fn(task), x, y, chunk
        self.twin = copy.deepcopy(model)
        self.twin.train(bn_statistics == "batch")
        normalizers.set_step(self.twin, step)
        self.names = list(trainable(self.twin))

    @torch.no_grad()
    def losses(self, origin: dict, dirs: list[dict], coeffs: np.ndarray) -> np.ndarray:
        c = torch.as_tensor(np.asarray(coeffs, dtype=np.float64))
        if self.chunk > 0:
            try:
                return self._vmapped(origin, dirs, c)
            except (RuntimeError, NotImplementedError, ValueError):
                pass  # a layer vmap cannot batch (a generator, an in-place buffer update)
        return self._looped(origin, dirs, c)

    def _vmapped(self, origin, dirs, c) -> np.ndarray:
        from torch.func import functional_call, vmap

        net = copy.deepcopy(self.twin)
        if net.training:  # batch statistics without running buffers: nothing written
            for m in net.modules():
                if isinstance(m, nn.modules.batchnorm._BatchNorm):
                    m.track_running_stats = False
                    m.running_mean = m.running_var = m.num_batches_tracked = None
        buffers = dict(net.named_buffers())
        stacked = {n: torch.stack([d[n] for d in dirs]) for n in self.names}
        dtype = origin[self.names[0]].dtype

        def loss(k: torch.Tensor) -> torch.Tensor:
            params = {n: origin[n] + torch.tensordot(k, stacked[n], dims=1) for n in self.names}
            return self.lf(functional_call(net, (params, buffers), (self.x,)), self.y)

        out = vmap(loss, chunk_size=self.chunk)(c.to(self.x.device, dtype))
        return out.double().cpu().numpy()

    def _looped(self, origin, dirs, c) -> np.ndarray:
        params = trainable(self.twin)
        moving = [n for n in self.names if any(bool(d[n].any()) for d in dirs)]
        for n in self.names:  # tensors zero in every direction stay at the origin
            params[n].copy_(origin[n])
        out = []
        for k in c.tolist():
            for n in moving:  # origin + sum_j k_j d_j, written in place
                params[n].copy_(origin[n])
                for kj, d in zip(k, dirs, strict=True):
                    if kj:
                        params[n].add_(d[n], alpha=kj)
            out.append(self.lf(self.twin(self.x), self.y).double())
        return torch.stack(out).cpu().numpy()


def curvature_rows(model: nn.Module, x, y, task: str, opts, step: int, seed: int
                   ) -> tuple[list[dict], list[dict], list[dict]]:
    """Rows of ``landscape_curvature``, ``landscape_spectrum`` and ``landscape_blocks`` at the
    model's weights."""
    twin = copy.deepcopy(model)
    twin.train(opts.bn_statistics == "batch")
    normalizers.set_step(twin, step)
    named = trainable(twin)
    leaves = list(named.values())
    hvp = curvature.hvp_operator(loss_fn(task)(twin(x), y), leaves)
    per_draw, sizes = curvature.hutchinson(hvp, leaves, opts.trace_samples, seed)
    n = int(sizes.sum())
    # Lanczos holds a (steps x n) float64 basis: above hessian_max_params, the trace only.
    # The top-k are the largest Ritz values of the first SLQ run (one run for them alone when
    # density_runs is 0): its Lanczos converges at the spectrum's edges from any start.
    lanczos = n <= opts.hessian_max_params and (opts.top_k or opts.density_runs)
    runs = curvature.density(hvp, leaves, max(opts.density_runs, 1), opts.lanczos_steps,
                             seed + 1) if lanczos else []
    top, res = np.array([]), np.array([])
    if runs and opts.top_k:
        theta, _, resid = runs[0]
        order = np.argsort(theta)[::-1][: opts.top_k]
        top, res = theta[order], resid[order]
    trace, se = curvature.mean_se(per_draw.sum(axis=1))
    rows = [{"n_params": n, "trace": trace, "trace_se": se, "trace_samples": opts.trace_samples,
             "hessian_top": float(top[0]) if len(top) else float("nan")}]
    blocks = []
    if opts.trace_blocks:
        for j, name in enumerate(named):
            t, s = curvature.mean_se(per_draw[:, j])
            blocks.append({"block": name, "n_params": int(sizes[j]), "trace": t,
                           "trace_se": s, "trace_samples": opts.trace_samples})
    nan = float("nan")
    spectrum = [{"kind": "top", "run": 0, "rank": i + 1, "eigenvalue": float(v), "weight": nan,
                 "residual": float(r)} for i, (v, r) in enumerate(zip(top, res, strict=True))]
    for r, (theta, w, resid) in enumerate(runs[: opts.density_runs]):
        order = np.argsort(theta)[::-1]
        spectrum += [{"kind": "density", "run": r, "rank": i + 1, "eigenvalue": float(theta[j]),
                      "weight": float(w[j]), "residual": float(resid[j])}
                     for i, j in enumerate(order)]
    return rows, spectrum, blocks


def select(steps: list[int], which: str) -> list[int]:
    """Checkpoint indices for ``all``, ``first``, ``last``, ``first_last``, ``none``."""
    idx = list(range(len(steps)))
    if not idx or which == "none":
        return []
    return {"all": idx, "first": idx[:1], "last": idx[-1:],
            "first_last": sorted({idx[0], idx[-1]})}[which]


def _initial(run: dict, device) -> dict[str, torch.Tensor] | None:
    """The step-0 checkpoint's weights; None without one (a rebuilt model would miss the
    training's own initialization hooks: data-span init, bn_init)."""
    for ck in run["checkpoints"]:
        if int(ck["step"]) == 0:
            return {k: v.to(device) for k, v in ck["model"].items()}
    return None


def measure(model: nn.Module, x, y, task: str, opts, step: int, seed: int, w0: dict | None,
            lines: bool = True, grid: bool = True) -> dict[str, list[dict]]:
    """The four tables' rows at ``model``'s weights (``w0``: the initialization's parameters,
    None: no interpolation line); ``model`` is not changed."""
    common = {"bn_statistics": opts.bn_statistics, "sample_size": int(len(x))}
    weights = {n: p.detach().clone() for n, p in trainable(model).items()}
    gen = torch.Generator().manual_seed(seed)
    norm_names = normalizer_parameters(model)
    d1, d2 = (filter_normalize(raw_direction(weights, gen), weights, norm_names, opts.bias)
              for _ in range(2))
    chunk = opts.chunk if opts.batching == "vmap" else 0
    slicer = Slicer(model, x, y, task, opts.bn_statistics, step, chunk)
    out = {t: [] for t in TABLES}
    if lines and opts.line_points:
        a = np.linspace(*opts.line_range, opts.line_points)
        size = _norm(d1)
        out["landscape"] += [{"line": "random", "coord": float(ai), "distance": abs(ai) * size,
                              "loss": float(v)}
                             for ai, v in zip(a, slicer.losses(weights, [d1], a[:, None]),
                                              strict=True)]
    if lines and opts.interpolation_points and w0 is not None:
        start = {n: w0[n].to(weights[n].dtype) for n in weights}
        d = {n: weights[n] - start[n] for n in weights}
        a = np.linspace(*opts.interpolation_range, opts.interpolation_points)
        size = _norm(d)
        out["landscape"] += [{"line": "interpolation", "coord": float(ai),
                              "distance": abs(ai) * size, "loss": float(v)}
                             for ai, v in zip(a, slicer.losses(start, [d], a[:, None]),
                                              strict=True)]
    if grid and opts.grid_points:
        g = np.linspace(*opts.grid_range, opts.grid_points)
        aa, bb = np.meshgrid(g, g, indexing="ij")
        c = np.stack([aa.ravel(), bb.ravel()], axis=1)
        out["landscape_grid"] = [{"coord_1": float(ai), "coord_2": float(bi), "loss": float(v)}
                                 for (ai, bi), v in zip(c, slicer.losses(weights, [d1, d2], c),
                                                        strict=True)]
    if lines and opts.curvature:
        (out["landscape_curvature"], out["landscape_spectrum"],
         out["landscape_blocks"]) = curvature_rows(
            model, x, y, task, opts, step, seed)
    return {t: [{"step": step, **r, **common} for r in rows] for t, rows in out.items()}


def run(run: dict, ds, opts, device: torch.device) -> dict[str, list[dict]]:
    """The measure at the checkpoints ``checkpoints`` (1-D lines, curvature) and
    ``grid_checkpoints`` (2-D grid) select."""
    spec = run["spec"]
    seed = derived_seed(spec.seed, opts.seed)
    steps = checkpoints.steps(run)
    on_lines, on_grid = select(steps, opts.checkpoints), select(steps, opts.grid_checkpoints)
    out = {t: [] for t in TABLES}
    todo = sorted(set(on_lines) | set(on_grid))
    if not todo:
        return out
    xtr, ytr = torch.as_tensor(ds.x_train), torch.as_tensor(ds.y_train)
    n = min(opts.sample_size, len(xtr))
    idx = torch.randperm(len(xtr), generator=torch.Generator().manual_seed(seed))[:n]
    x, y = xtr[idx].to(device), ytr[idx].to(device)
    model = checkpoints.restore(run, 0, ds, device).model
    init = _initial(run, device)
    for i in todo:
        ck = run["checkpoints"][i]
        model.load_state_dict(ck["model"])
        step = int(ck["step"])
        w0 = None if step == 0 else init
        rows = measure(model, x, y, ds.task, opts, step, seed, w0, lines=i in on_lines,
                       grid=i in on_grid)
        for t, r in rows.items():
            out[t] += r
    return out
