"""BN-Explained §5: mini-batch jitter of BatchNorm's statistics, against Proposition 2.

BN's ``mu_B, sigma_B^2`` are recomputed on every mini-batch, so they are random estimates of the
training set's statistics; Proposition 2 (eq. 13) gives their variance (formulas, their exact
finite-population form and the statistics in :mod:`bnstudy.measures.jitter.stats`). The jitter moves
the partition and the decision boundary from batch to batch (Fig. 6; the boundary part is in
:mod:`bnstudy.measures.jitter.maps`). Per checkpoint and configured batch size:

- Draws: ``n_batches`` (K) mini-batches of training-set indices from
  ``numpy.random.default_rng([seed, run seed, batch size])``: the same batches at every
  checkpoint of a run and for every normalizer of a seed (paired comparisons), different ones
  across seeds, so that the spread over seeds includes the Monte Carlo error of K batches.
  ``sampling="without_replacement"`` (default) draws each batch as a simple random sample without
  replacement, as one batch of the trainer's epoch permutations is; ``"with_replacement"`` draws
  iid indices, Proposition 2's iid setting. Batch sizes are capped at the training-set size
  (without replacement a batch of the whole set does not jitter: both variances are 0).
- Empirical: a train-mode forward of each batch on a private copy, a pre-hook on every BN layer
  recording the per-unit mean and *biased* variance (eq. (3): what BN divides by) of its input,
  over the batch and, for conv layers, H and W: exactly what training on that batch uses at every
  layer, the earlier layers normalized by the same batch's statistics. ``var_*_emp`` is their
  variance over the K batches (ddof=1). Ghost BN (noise-controlled BN) normalizes virtual batches
  of ``ghost_batch_size``; its statistics are those of the first virtual batch, so the batch size
  it uses (``batch_size_effective``) is that virtual batch's.
- Predicted, from the population: the training set, each BN layer's input computed with all
  earlier BN layers normalizing by their own whole-training-set statistics. This is an
  approximation beyond the first BN layer: in training the earlier layers are normalized by the
  same batch (which standardizes the deeper inputs within the batch) and jitter too; the ratios
  measure how far off it is, and there Proposition 2's iid assumption is a real prediction (the
  ledger's ``prop2_deep_*`` claims; at initialization of a depth-6, width-64 ReLU MLP on star2d
  the empirical variance of ``mu_B`` is 3-6% of the prediction and that of ``sigma_B^2``
  35-70%). At the first BN layer (input an affine map of the data) the batch is
  an exact sample of this population and ``var_*_pred`` is exact: the variance of ``mu_B`` and of
  BN's biased ``sigma_B^2`` for the configured sampling (with replacement: eq. (13), times
  ``((n - 1) / n)^2`` for ``sigma_B^2``; without: their finite-population form), so agreement
  there checks the measurement, not the proposition (the ledger labels those rows
  implementation checks).
  ``var_*_prop2`` is eq. (13) as printed (iid, unbiased ``s^2``), for comparison.
- Conv layers: ``n = |B| H W`` positions are treated as the samples (as BN counts them) and the
  population is all ``N H W`` positions; positions of one image are correlated, so Prop. 2 is only
  an approximation there. Noisy BN: the population pass uses its eval function (the noise's mean)
  while the batch statistics include the noise of earlier layers. Mean-only / variance-only BN:
  both statistics of the input are reported although each layer uses one. Other normalizers
  (LayerNorm, l_p norms, bn_init's frozen map, ...) have no ``_BatchNorm`` layer: not applicable.

Rows of table ``bn_jitter`` per (step, batch size, BN layer): means over units of the empirical
and predicted variances, ``ratio_*`` = mean empirical / mean predicted, ``median_ratio_*`` = the
median over units of the per-unit ratios; plus one ``layer="boundary"`` row per (step, batch size)
for 2-D classification data (:mod:`bnstudy.measures.jitter.maps`). A run without BN layers gets rows
with ``applicable = False``. The measure never changes the model it is given (deep copies).

Options (config section ``bn_jitter``): ``batch_sizes`` ([16, 256]), ``n_batches`` (K, 200),
``sampling`` ("without_replacement" | "with_replacement"), ``checkpoints`` ("all" | "first_last":
the run's checkpoints measured), ``realizations`` (R, 32: decision boundaries per batch size),
``grid_resolution`` (100) and ``grid_margin`` (0.1) of the boundary grid, ``map_resolution``
(40: the stored disagreement map) and ``map_realizations`` (8: the boundaries stored),
``map_seeds`` ("all", or the seeds whose runs get ``bn_jitter_boundary`` rows; the figure draws
the smallest seed, and the boundary summaries are computed for every run),
``boundary_resolution`` (400: the fine grid the stored boundaries are traced on,
:mod:`bnstudy.measures.jitter.cells`), ``seed`` (0), ``chunk_rows`` (65536: the most rows per
forward of the population and grid passes) and ``memory_budget_mb`` ("auto": half the CUDA
device's free memory, read when the measure runs, 2048 MiB on the CPU; or MiB), which sizes those
forwards from the model's per-row cost (:mod:`bnstudy.measures.jitter.budget`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict

import numpy as np
import torch
from torch import nn

from bnstudy.measures.jitter import budget
from bnstudy.measures.jitter import maps as bn_jitter_maps
from bnstudy.measures.jitter import stats as st
from bnstudy.measures.jitter.options import CHECKPOINTS, Options  # noqa: F401
from bnstudy.networks import memory, models
from bnstudy.networks.normalizers import batchnorm_modules
from bnstudy.networks.probe import training_mode, watch
from bnstudy.options import seed_selected
from bnstudy.train.loop import build

log = logging.getLogger("bnstudy")



def _layer_indices(model: nn.Module) -> list[int]:
    """1-based block index of every BN layer (its position among BN layers if not a block's)."""
    where = {id(b.norm): i for i, b in enumerate(models.blocks(model), start=1)}
    return [where.get(id(bn), j) for j, bn in enumerate(batchnorm_modules(model), start=1)]


def _ratio(a, b) -> float:
    return float(a / b) if b > 0 else float("nan")


def _layer_rows(emp, moments: list[st.Moments], n_eff: int, hw: list[int], opts: Options,
                layers: list[int]) -> list[dict]:
    rows = []
    for (mu, var), mom, h, li in zip(emp, moments, hw, layers, strict=True):
        n, big = n_eff * h, mom.count
        pmu, psig = st.predicted(mom.m2, mom.m4, n, big, opts.sampling)
        qmu, qsig = st.prop2(mom.m2, mom.m4, n)
        emu, esig = mu.var(0).numpy(), var.var(0).numpy()
        with np.errstate(divide="ignore", invalid="ignore"):
            rmu, rsig = emu / pmu, esig / psig
        rows.append({
            "layer": str(li), "layer_index": li, "units": len(emu), "samples_per_stat": n,
            "population": big, "var_mu_emp": float(emu.mean()), "var_mu_pred": float(pmu.mean()),
            "var_mu_prop2": float(qmu.mean()), "var_sigma2_emp": float(esig.mean()),
            "var_sigma2_pred": float(psig.mean()), "var_sigma2_prop2": float(qsig.mean()),
            "ratio_mu": _ratio(emu.mean(), pmu.mean()),
            "ratio_sigma2": _ratio(esig.mean(), psig.mean()),
            "median_ratio_mu": float(np.nanmedian(rmu)) if np.isfinite(rmu).any() else np.nan,
            "median_ratio_sigma2": (float(np.nanmedian(rsig)) if np.isfinite(rsig).any()
                                    else np.nan),
        })
    return rows


def _spatial(model: nn.Module, x: torch.Tensor) -> list[int]:
    """H * W of every BN layer's input (1 for fully connected layers)."""
    sizes: list[int] = []
    with watch(batchnorm_modules(model),
               lambda _j, z: sizes.append(int(np.prod(z.shape[2:], dtype=np.int64))),
               inputs=True), training_mode(model, False), torch.no_grad():
        model(x[:2])
    return sizes


def measure(model: nn.Module, ds, options: dict | Options | None = None,
            maps: bool = True, run_seed: int = 0) -> dict[str, list]:
    """Both tables' rows for one checkpoint's ``model`` (without the step column); ``maps``:
    whether to return the boundary-map rows (the summaries are always computed); ``run_seed``
    joins the seed of the batch draws."""
    opts = options if isinstance(options, Options) else Options.parse(options)
    dev = next(model.parameters()).device
    x = torch.as_tensor(ds.x_train, device=dev)
    two_d = bn_jitter_maps.applies(ds)
    if not batchnorm_modules(model):
        nan = float("nan")
        rows = [{"batch_size": b, "batch_size_effective": min(b, len(x)), "sampling": opts.sampling,
                 "n_batches": opts.n_batches, "layer": "n/a", "layer_index": 0, "applicable": False,
                 **{k: nan for k in bn_jitter_maps.SUMMARY_KEYS}} for b in opts.batch_sizes]
        return {"bn_jitter": rows, "bn_jitter_boundary": []}
    mb = memory.budget_mb(opts.memory_budget_mb, dev)  # "auto": read on this device, now
    rows_per_pass = budget.chunk_rows(model, tuple(x.shape[1:]), mb, opts.chunk_rows)
    moments, frozen = st.population_moments(model, x, rows_per_pass, int(mb * memory.MB))
    hw, layers = _spatial(frozen, x), _layer_indices(model)
    finite = all(bool(torch.isfinite(t).all()) for t in model.state_dict().values()
                 if t.is_floating_point())
    boundary = (bn_jitter_maps.Boundary(frozen, ds, opts, rows_per_pass) if two_d and finite
                else None)
    rows, map_rows = [], []
    for b in opts.batch_sizes:
        n_eff = st.effective_batch_size(model, min(b, len(x)))
        batches = st.draw_batches(len(x), n_eff, max(opts.n_batches, opts.realizations),
                               opts.sampling, opts.seed, run_seed)
        emp = st.batch_statistics(model, x, [i.to(dev) for i in batches])
        ids = {"batch_size": b, "batch_size_effective": n_eff, "sampling": opts.sampling,
               "n_batches": opts.n_batches, "applicable": True}
        first_k = [(mu[: opts.n_batches], var[: opts.n_batches]) for mu, var in emp]
        rows += [{**ids, **r} for r in _layer_rows(first_k, moments, n_eff, hw, opts, layers)]
        if boundary is not None:
            summary, grid_rows = boundary.realize(emp, maps)
            map_rows += [{"batch_size": b, **r} for r in grid_rows]
        elif two_d:  # non-finite weights (a diverging run): no boundary to speak of
            summary = {k: float("nan") for k in bn_jitter_maps.SUMMARY_KEYS}
        if two_d:
            rows.append({**ids, "layer": "boundary", "layer_index": 0, **summary})
    return {"bn_jitter": rows, "bn_jitter_boundary": map_rows}


def run(run: dict, ds, options: dict, device: torch.device) -> dict[str, list[dict]]:
    """``bn_jitter`` at the run's checkpoints (all, or the first and last)."""
    opts = Options.parse(options)
    cks = run["checkpoints"]
    if opts.checkpoints == "first_last":
        cks = [cks[0], cks[-1]] if len(cks) > 1 else cks
    t0, out = time.perf_counter(), {"bn_jitter": [], "bn_jitter_boundary": []}
    drawn = seed_selected(opts.map_seeds, run["spec"].seed)
    for i, ck in enumerate(cks):
        model = build(run["spec"], ds, device)
        model.load_state_dict(ck["model"])
        # maps at the first and last checkpoint only, of the seeds map_seeds names
        got = measure(model.train(), ds, opts, maps=drawn and i in (0, len(cks) - 1),
                      run_seed=run["spec"].seed)
        extra = {"step": int(ck["step"]), "diverged": bool(run["diverged"])}
        for table, rows in got.items():
            out[table] += [{**extra, **r} for r in rows]
    if drawn and bn_jitter_maps.applies(ds):
        out["bn_jitter_boundary"] += [{**r, "step": int(cks[0]["step"]),
                                       "diverged": bool(run["diverged"])}
                                      for r in bn_jitter_maps.data_rows(ds)]
    log.info("bn_jitter: %d checkpoints in %.2fs with options %s", len(cks),
             time.perf_counter() - t0, asdict(opts))
    return out
