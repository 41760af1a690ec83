"""Partition density: how many partition boundaries cross a small neighbourhood of a point.

A ReLU/leaky-ReLU network is a continuous piecewise-affine spline; its input-space partition
boundary is the union of the folded hyperplanes ``F_{l,k} = {x : h_{l,k}(x) = 0}``, one per hidden
unit, where ``h_{l,k}`` is the unit's pre-activation (after the normalizer, before the activation;
BN-Explained eqs. (10)-(11); in a residual block whose skip joins before the second activation, the
sum of the normalizer's output and the skip: ``block.preact``'s output). BN-Explained §3.3 (Figs.
3-4) measures how densely these boundaries concentrate around a point by counting the folded
hyperplanes passing through an epsilon-ball of radius ``r`` centred on it. A unit is one element of
a block's pre-activation: a neuron of a fully connected layer, one output channel at one spatial
position of a conv layer; a layer is a block whose activation has a kink at 0 (ReLU, leaky-ReLU
with slope != 1); max-pooling kinks and the linear head are not counted. The count is per unit
(folded hyperplane ``F_{l,k}``), not per facet ``F_{l,k,omega}`` as in the paper's Fig. 3 wording.
Two methods (``method``, recorded per row):

- ``distance`` (default): a unit counts at ``x`` when ``|h(x)| < r ||grad_x h(x)||``, i.e. the
  distance ``|h(x)| / ||grad_x h(x)||`` from ``x`` to the zero set of the unit's local affine piece
  is below ``r`` (:mod:`bnstudy.measures.partition.distance`; exact gradients by forward-mode AD,
  one pass
  over ``points x D`` rows, all radii from the same pass). For a first-layer unit (affine once BN
  is frozen) this is exactly "its hyperplane crosses the epsilon-ball of radius ``r``", in any
  input dimension ``D``. For deeper units it is exact while the boundary stays in the region where
  the network is affine around ``x``, and a first-order estimate beyond it (the folded hyperplane
  bends where it meets earlier boundaries). A unit with a zero gradient never counts. The
  estimate is biased upwards in deeper layers: against dense sampling of the ball in D = 2 (the
  star data, r = 0.03) the deeper layers' first-order counts are 1.01-1.04 times the dense ones
  for BN nets and 1.06-1.20 times for zero-bias nets, so a deeper-layer comparison of BN with
  zero-bias nets leans towards the zero-bias nets by up to that much.
- ``polytope``: the cross-polytope of radius ``r`` with the ``2k`` vertices ``x +- r v_j`` along a
  fixed orthonormal frame ``v_1..v_k``, ``k = min(n_vertices / 2, D)`` (the Q factor, signs fixed
  by diag(R) > 0, of a ``D x k`` standard Gaussian drawn from ``seed``; the same frame for every
  point, checkpoint and run of a dataset). A unit counts when its pre-activation takes both
  strictly positive and strictly negative values over the vertices (one forward pass over all
  vertices). For a first-layer unit the test is ``|h(x)| < r max_j |grad h . v_j|``: the
  epsilon-ball of radius ``r max_j |grad h . v_j| / ||grad h||``, which shrinks with ``D``
  (about 0.9 r for D = 2, 0.27 r for 64-D digits with 20 directions, 0.04 r for CIFAR's 3072).
  A deeper folded hyperplane that enters and leaves the polytope between the same vertices is
  missed (along a line: an even number of crossings).
- ``effective_radius``: the epsilon-ball radius the count stands for: ``r`` for ``distance``;
  for ``polytope`` ``r`` times the mean over the first kinked layer's units of
  ``max_j |grad h . v_j| / ||grad h||``, the gradient taken at the training inputs' mean (exact
  for an affine first layer).
- A network without kinked layers (the deep linear network) has no partition: its rows say
  ``applicable = False`` with NaN values.
- Reported per layer (1-based block index) and in total (``layer = "all"``) as the mean count per
  point (``boundaries``), its standard deviation over points (``boundaries_std``, ddof=1) and
  ``fraction`` = mean count / the layer's number of neurons (units, or channels x positions for
  conv layers). A point whose pre-activations are not finite (a diverging run) counts as NaN.
  ``n_directions``: the polytope's ``k`` directions, or ``D`` for ``distance`` (the whole
  gradient).
- Point sets (``n_points`` each, default 100 as in the paper's Fig. 4; drawn from
  ``numpy.random.default_rng([seed, set index])``, identical for every checkpoint and run):
  ``train`` and ``test`` are random subsets without replacement (all points if fewer);
  ``random`` points are Gaussian with the training data's per-feature mean and standard deviation
  (ddof=0), the paper's "random images scaled to the same mean and variance". Radii are absolute
  distances in input units (the data as the dataset kind gives them), one list for all point
  sets.
- BN statistics (``bn_statistics``, recorded per row; ``"n/a"`` for networks without BatchNorm):
  ``train_set`` (default; the paper's "BN statistics are obtained from the full training set"):
  the mean and biased variance of every BN layer's input over the whole training set at the
  checkpoint's weights, each layer computed with all earlier BN layers already normalizing with
  their own full-set statistics (a full-batch train-mode pass), then frozen as a fixed affine map
  (:func:`bnstudy.networks.probe.frozen_copy`);
  ``batch``: the same over the step's recorded mini-batch; ``running``: the stored running
  buffers (eval mode). Freezing makes the network one fixed function of its input, so the counts do
  not depend on which points share a forward pass. LayerNorm/GroupNorm normalize each input by its
  own statistics, so their pre-activations are not piecewise affine in ``x``; both tests are
  applied unchanged (the distance is then a first-order estimate even in the first layer).
- Memory: every pass runs over chunks of rows sized from ``memory_budget_mb`` (default
  ``"auto"``: half the CUDA device's free memory, read when the measure runs, or 2048 MiB on the
  CPU; or a number of MiB) by the model's estimated activation bytes per row, at most
  ``chunk_rows`` (:mod:`bnstudy.measures.partition.budget`); the counts do not depend on the
  chunking.
- ``input_standardized`` (per row): whether the dataset's images were standardized per channel
  (:mod:`bnstudy.data.images`); radii are in those input units.
- At every checkpoint of the run (step 0 is the initialization). For 2-D inputs also a map over a
  ``map_resolution`` x ``map_resolution`` grid covering the train and test data (see
  :mod:`bnstudy.measures.partition.maps`; :mod:`bnstudy.data.grids`), and the exact boundaries,
  per layer and all layers, on a ``boundary_resolution`` x ``boundary_resolution`` grid of cells
  over the same extent (:mod:`bnstudy.measures.partition.boundaries`), for the runs whose seed
  ``map_seeds`` names (default ``"all"``; the figures draw the smallest seed, so a study can
  name that one alone: the maps are most of this measure's cost on 2-D data).

The measure never changes the model it is given: it works on a deep copy.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, replace

import numpy as np
import torch
from torch import nn

from bnstudy.data import grids
from bnstudy.measures.partition import boundaries as partition_boundaries
from bnstudy.measures.partition import budget
from bnstudy.measures.partition import distance as partition_distance
from bnstudy.measures.partition import maps as partition_maps
from bnstudy.measures.partition.options import METHODS, POINT_SETS, Options  # noqa: F401
from bnstudy.measures.partition.polytope import crossing_counts, frame
from bnstudy.networks import memory
from bnstudy.networks.normalizers import batch_statistics_layers
from bnstudy.networks.probe import frozen_copy, kinked_blocks
from bnstudy.options import seed_selected
from bnstudy.train.loop import build

log = logging.getLogger("bnstudy")

NO_BN = "n/a"


def point_sets(ds, opts: Options) -> dict[str, np.ndarray]:
    """The measured points (flat float32 arrays), the same for every checkpoint of a dataset."""
    xtr = ds.x_train.reshape(len(ds.x_train), -1).astype(np.float32)
    xte = ds.x_test.reshape(len(ds.x_test), -1).astype(np.float32)
    out = {}
    for i, name in enumerate(POINT_SETS):
        if name not in opts.point_sets:
            continue
        rng = np.random.default_rng([opts.seed, i])
        if name == "random":
            z = rng.standard_normal((opts.n_points, xtr.shape[1]))
            out[name] = (xtr.mean(0) + xtr.std(0) * z).astype(np.float32)
        else:
            x = xtr if name == "train" else xte
            out[name] = x[np.sort(rng.choice(len(x), min(opts.n_points, len(x)), replace=False))]
    return out


def count_blocks(net: nn.Module, opts: Options, sets: dict, grid, directions: torch.Tensor,
                 dev, rows: int | None = None):
    """Per-layer counts of every (point set, radius) block ``(points, layers)`` and of the map
    grid (or None), the layers, their units and the passes/rows made, by ``opts.method``, in
    passes of at most ``rows`` rows (default ``opts.chunk_rows``)."""
    rows = opts.chunk_rows if rows is None else rows
    layers = kinked_blocks(net)
    blocks, maps = {}, None
    if opts.method == "distance":
        norms = [b.preact for _, b in layers]
        stats: dict = {}
        x = torch.as_tensor(np.concatenate([sets[s] for s in opts.point_sets]), device=dev)
        counts, neurons = partition_distance.distance_counts(net, norms, x, opts.radii, rows,
                                                             stats)
        start = 0
        for s in opts.point_sets:
            n = len(sets[s])
            for i, r in enumerate(opts.radii):
                blocks[(s, float(r))] = counts[start: start + n, i]
            start += n
        if grid is not None:
            maps = partition_distance.distance_counts(
                net, norms, torch.as_tensor(grid, device=dev), [opts.map_radius], rows,
                stats)[0][:, 0]
        return blocks, maps, [i for i, _ in layers], neurons, stats["forwards"], stats["rows"]
    centers = [sets[s] for s in opts.point_sets for _ in opts.radii]
    radii = [np.full(len(sets[s]), r, dtype=np.float32) for s in opts.point_sets
             for r in opts.radii]
    if grid is not None:
        centers.append(grid)
        radii.append(np.full(len(grid), opts.map_radius, dtype=np.float32))
    c = crossing_counts(net, layers, torch.as_tensor(np.concatenate(centers), device=dev),
                        torch.as_tensor(np.concatenate(radii), device=dev), directions, rows)
    start = 0
    for s in opts.point_sets:
        for r in opts.radii:
            blocks[(s, float(r))] = c.counts[start: start + len(sets[s])]
            start += len(sets[s])
    maps = None if grid is None else c.counts[start:]
    return blocks, maps, c.layers, c.neurons, c.forwards, c.rows


def measure(model: nn.Module, ds, options: dict | Options | None = None,
            batch: torch.Tensor | None = None, boundaries: bool = True
            ) -> dict[str, list[dict]]:
    """Partition density of ``model`` (one checkpoint) on ``ds``; ``batch``: the step's batch
    indices (needed for ``bn_statistics='batch'``); ``boundaries``: whether to trace the exact
    boundaries too (2-D maps). Rows of every table, without the step."""
    opts = options if isinstance(options, Options) else Options.parse(options)
    t0 = time.perf_counter()
    dev = next(model.parameters()).device
    has_bn = bool(batch_statistics_layers(model))
    stats = opts.bn_statistics if has_bn else NO_BN
    sets = point_sets(ds, opts)
    method = {"method": opts.method, "bn_statistics": stats,
              "input_standardized": bool(ds.meta.get("standardized", False))}
    if not kinked_blocks(model):
        nan = float("nan")
        return {"partition_density": [
            {"layer": "all", "layer_index": 0, "point_set": s, "radius": float(r),
             "effective_radius": nan, "boundaries": nan, "boundaries_std": nan, "fraction": nan,
             "neurons": 0, "n_points": len(sets[s]), "n_directions": 0, **method,
             "applicable": False} for s in opts.point_sets for r in opts.radii],
            "partition_density_maps": [], "partition_boundaries": []}
    xtr = torch.as_tensor(ds.x_train, device=dev).reshape(len(ds.x_train), -1)
    mb = memory.budget_mb(opts.memory_budget_mb, dev)  # "auto": read on this device, now
    rows_per_pass = budget.chunk_rows(model, xtr.shape[1], mb, opts.chunk_rows)
    # the statistics pass keeps within the measure's memory budget too
    net = frozen_copy(model, opts.bn_statistics, xtr, batch, rows_per_pass, int(mb * budget.MB))
    directions = frame(xtr.shape[1], opts.n_vertices, opts.seed).to(dev)
    grid = None
    if opts.maps and xtr.shape[1] == 2:
        grid = grids.grid(ds, opts.map_resolution, opts.map_margin)
    blocks, map_counts, layers, neurons, forwards, nrows = count_blocks(
        net, opts, sets, grid, directions, dev, rows_per_pass)
    if opts.method == "distance":
        shrink, n_dir = 1.0, xtr.shape[1]
    else:
        shrink = partition_distance.polytope_shrink(
            net, kinked_blocks(net)[0][1].preact, xtr.mean(0, keepdim=True), directions,
            rows_per_pass)
        n_dir = len(directions)
    rows = []
    total = sum(neurons)
    for (s, r), block in blocks.items():
        block, n = block.double(), len(block)
        cols = [(str(li), li, block[:, j], neurons[j]) for j, li in enumerate(layers)]
        cols.append(("all", 0, block.sum(1), total))
        for name, li, v, units in cols:
            mean = float(v.mean())
            rows.append({"layer": name, "layer_index": li, "point_set": s, "radius": r,
                         "effective_radius": r * shrink, "boundaries": mean,
                         "boundaries_std": float(v.std()) if n > 1 else float("nan"),
                         "fraction": mean / units, "neurons": units, "n_points": n,
                         "n_directions": n_dir, **method, "applicable": True})
    maps = [] if grid is None else partition_maps.map_rows(
        grid, map_counts.numpy(), layers, opts.map_radius, stats, opts.method,
        opts.map_radius * shrink)
    lines = [] if grid is None or not opts.boundary_resolution or not boundaries else \
        partition_boundaries.boundary_rows(net, kinked_blocks(net), ds, opts, stats, rows_per_pass)
    log.info("partition_density (%s): %d forward pass(es) over %d rows (<= %d per pass, "
             "budget %.0f MiB), %d layers, %.2fs", opts.method, forwards, nrows, rows_per_pass,
             mb, len(layers), time.perf_counter() - t0)
    return {"partition_density": rows, "partition_density_maps": maps,
            "partition_boundaries": lines}


def run(run: dict, ds, options: dict, device: torch.device) -> dict[str, list[dict]]:
    """Partition density at every checkpoint of ``run``; map and boundary rows (and the 2-D
    training points they are drawn over) for 2-D inputs."""
    opts = Options.parse(options)
    if not seed_selected(opts.map_seeds, run["spec"].seed):
        opts = replace(opts, maps=False)  # the summaries only: no map or boundary rows
    density, maps, lines = [], [], []
    t0 = time.perf_counter()
    ends = {run["checkpoints"][0]["step"], run["checkpoints"][-1]["step"]} \
        if run["checkpoints"] else set()
    for ck in run["checkpoints"]:
        # The model and batch of the checkpoint, as checkpoints.restore gives them, without the
        # optimizer, which this measure does not use.
        model = build(run["spec"], ds, device)
        model.load_state_dict(ck["model"])
        # the exact boundaries at the first and last checkpoint only: what the figure draws
        out = measure(model.train(), ds, opts, batch=ck["batch"].to(device),
                      boundaries=ck["step"] in ends)
        extra = {"step": int(ck["step"]), "diverged": bool(run["diverged"])}
        density += [{**extra, **row} for row in out["partition_density"]]
        maps += [{**extra, **row} for row in out["partition_density_maps"]]
        lines += [{**extra, **row} for row in out["partition_boundaries"]]
    first = run["checkpoints"][0]["step"] if run["checkpoints"] else 0
    if maps:
        maps += [{**row, "diverged": bool(run["diverged"])}
                 for row in partition_maps.data_rows(ds, first)]
    if maps and partition_boundaries.applies(ds, opts):  # maps: a network with a partition
        lines += [{**row, "diverged": bool(run["diverged"])} for row in
                  partition_boundaries.data_rows(ds, first, opts.boundary_resolution)]
    log.info("partition_density: %d checkpoints in %.2fs with options %s",
             len(run["checkpoints"]), time.perf_counter() - t0, asdict(opts))
    return {"partition_density": density, "partition_density_maps": maps,
            "partition_boundaries": lines}
