"""The ``ics_activations`` table: how the distribution of a layer's activations moves over training
(Santurkar et al. 2018, Figs. 1c, 2 and 6; App. A.2.1: "we sample random activations from any
given layer ... and plot its distribution over the batch dimension for fully connected layers,
and over the batch, height, width dimension for convolutional layers").

Santurkar's argument is visual: "noisy" BN (time-varying noise added to every batch-normalized
activation) has *complete distributional instability* yet trains as well as BN. The scalar
shifts of the ``ics`` table (mean |Δμ|, |Δσ²|) average that picture away; this table keeps it,
as a few quantiles of a few units per layer at every checkpoint. Choices the paper leaves open:

- *The activation* is the output of each hidden :class:`~bnstudy.networks.blocks.Block`'s
  normalizer (``block.norm``): the batch-normalized activation before the nonlinearity, with
  noisy BN's noise; for a network without a normalizer (``norm`` is the identity) the
  linear/conv output at the same place. In a block that closes a residual connection it is the
  normalizer's output, before the skip is added.
- *The batch* is the fixed probe batch of distributional ICS (the first ``probe_size`` training
  points, the same at every checkpoint), passed forward in train mode as training does: BN
  normalizes with the probe batch's own statistics, and noisy BN (and dropout) draws the noise
  of the checkpoint's step (:mod:`bnstudy.networks.norms.noisy`: the noise is a function of the
  layer's seed and the step, not of how many passes ran). So the same run gives the same rows,
  and a noisy-BN unit's distribution moves with the noise its training step drew.
- *The units* (features; channels of conv maps, their values over batch, height and width) are
  ``activation_units`` per layer, drawn once per run without replacement from a fixed seed
  (:data:`UNIT_SEED` and the layer's position), and kept for every checkpoint. The draw depends
  only on the layer's width, so runs of one architecture follow the same units whatever their
  normalizer or seed.
- *The distribution* is summarized by the quantiles :data:`QUANTILES` (numpy's default linear
  interpolation, in float64) of the unit's values: the median and the 25-75% and 5-95% ranges.

The pass runs on a deep copy of the model, so the measured model, its BN running buffers and
its train/eval mode are untouched; it adds one probe forward per checkpoint to the ICS measure.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch import nn

from bnstudy.measures.ics.options import Options
from bnstudy.networks.probe import preactivations
from bnstudy.train import checkpoints

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
UNIT_SEED = 20180529  # fixed: the same units in every run of an architecture


def sample_units(widths: list[int], k: int) -> list[np.ndarray]:
    """For each layer (``widths``: its units), ``min(k, width)`` distinct unit indices, sorted,
    drawn from :data:`UNIT_SEED` and the layer's 0-based position."""
    return [np.sort(np.random.default_rng([UNIT_SEED, i]).choice(w, size=min(k, w),
                                                                 replace=False))
            for i, w in enumerate(widths)]


def normalizer_outputs(model: nn.Module, probe: torch.Tensor) -> list[torch.Tensor]:
    """The output of every hidden block's normalizer on ``probe``, input to output, from one
    train-mode forward of a deep copy of ``model`` (pure: the model is not touched)."""
    net = copy.deepcopy(model).train()
    with torch.no_grad():
        return preactivations(net, probe, site="norm", first=True)


def unit_values(h: torch.Tensor, units: np.ndarray) -> np.ndarray:
    """``(len(units), n)`` float64 values of ``units`` in a normalizer output ``h`` of shape
    (N, C) or (N, C, H, W): over the batch, and height and width for conv maps."""
    per_unit = h.transpose(0, 1).reshape(h.shape[1], -1)
    return per_unit[torch.as_tensor(units, dtype=torch.long, device=h.device)].double().cpu(
    ).numpy()


def checkpoint_rows(step: int, outputs: list[torch.Tensor], units: list[np.ndarray],
                    probe_size: int) -> list[dict]:
    """The table's rows at one checkpoint: per layer, unit and quantile."""
    rows = []
    for i, (h, picked) in enumerate(zip(outputs, units, strict=True)):
        values = unit_values(h, picked)
        qs = np.quantile(values, QUANTILES, axis=1)  # (quantile, unit)
        for u, unit in enumerate(picked):
            rows += [{"step": step, "layer_index": i + 1, "layer_name": f"block{i + 1}",
                      "units": int(h.shape[1]), "unit": int(unit), "quantile": q,
                      "value": float(qs[k, u]), "samples_per_stat": int(values.shape[1]),
                      "probe_size": probe_size}
                     for k, q in enumerate(QUANTILES)]
    return rows


def run_activations(run: dict, ds, options: Options, device: torch.device) -> list[dict]:
    """``ics_activations`` rows for every checkpoint of a run (none for ``activation_units:
    0``), on the probe batch of :func:`bnstudy.measures.ics.compute.run_ics`."""
    opts = Options.parse(options)
    if opts.activation_units == 0:
        return []
    xtr = torch.as_tensor(ds.x_train, device=device)
    probe_size = min(opts.probe_size, len(xtr))
    probe = xtr[:probe_size]
    rows, units = [], None
    for idx in range(len(run["checkpoints"])):
        r = checkpoints.restore(run, idx, ds, device)
        outputs = normalizer_outputs(r.model, probe)
        if units is None:  # once per run: the same units at every checkpoint
            units = sample_units([int(h.shape[1]) for h in outputs], opts.activation_units)
        rows += checkpoint_rows(r.step, outputs, units, probe_size)
    return rows
