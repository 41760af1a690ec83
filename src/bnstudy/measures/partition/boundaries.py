"""Exact partition boundaries on a fine 2-D grid: the lines of BN-Explained Fig. 3.

The density maps (:mod:`bnstudy.measures.partition.maps`) count, on a coarse grid, the units
whose boundary passes within ``map_radius`` of a point: good for counts, but a blurred picture
of the partition. The paper's Fig. 3 draws the partition itself, as lines: each layer's
boundaries ``{x : h_{l,k}(x) = 0}`` (``h`` the unit's pre-activation, ``block.preact``'s output:
the normalizer's output before the activation) and their union, the whole network's partition.
This module draws them at line resolution:

- The grid: ``boundary_resolution`` (``R``, default 400) cells per axis over the maps' extent
  (:func:`bnstudy.data.grids.extent`: the train and test inputs' bounding box
  widened by ``map_margin``); the pre-activations of every kinked layer's units are evaluated
  at the ``(R + 1) x (R + 1)`` cell corners.
- A cell is a boundary cell of layer ``l`` when some unit of ``l`` changes sign (``h > 0``
  against ``h <= 0``, ReLU's active set) between two horizontally or vertically adjacent corners
  of the cell. A unit whose sign differs among the four corners changes it along one of the
  four edges, so this is "the unit's signs at the corners are not all equal". For a first-layer
  unit (affine once BN is frozen) it is exactly "its line crosses the cell" (up to a corner
  lying exactly on the line), so every marked cell's centre lies within half a cell diagonal
  of the line and every line crossing the extent marks the cells along it. A deeper,
  folded boundary that enters and leaves a cell through the same edge (a bend smaller than a
  cell) is missed. An edge with a non-finite pre-activation at either end marks nothing: a
  diverged checkpoint draws no lines.
- ``all``: the union over the kinked layers, the whole network's partition (a cell of every
  layer's partition is a cell of it).
- BN is frozen exactly as for the density maps (the same frozen copy,
  :func:`bnstudy.networks.probe.frozen_copy`, ``bn_statistics``), so the lines are the
  boundaries of one fixed function of the input.
- Which runs: the table is written where the density maps are (2-D inputs, ``maps: true``), for
  every run, at its first and last checkpoint (what the figure draws: the first seed's
  initialization and last checkpoint; any seed can be drawn). Only boundary cells are rows: the
  default star MLP (depth 6, width 64) at R = 400 had 2.7e5 (no normalizer) to 5.0e5 (BN) rows
  at initialization, 0.3-0.5 MB of Parquet per checkpoint; the default R = 200 has about a
  quarter of that, still a line at the report's width (a panel is about 330 pixels wide).
  ``boundary_resolution: 0`` writes no rows. The training points are rows of their own
  (``layer == "data"``, ``label`` their class), as in the maps table.
- Chunking: the corners are evaluated in bands of whole grid rows, at most the measure's rows per
  pass (:mod:`bnstudy.measures.partition.budget`), under ``torch.no_grad``, with hooks on the
  frozen copy (removed afterwards); a band's pre-activations are reduced to edge marks before
  the next band (only the band before's last row is kept), so the activations held at once do
  not grow with ``R``. The marks do not depend on the banding except through the network's
  own float32 arithmetic, and the bands are fixed by the options: the same options give the
  same rows.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from bnstudy.data import grids
from bnstudy.measures.partition.options import Options
from bnstudy.networks.probe import capture

DATA = "data"


def applies(ds, opts: Options) -> bool:
    """Whether the boundary table has rows for ``ds``: 2-D inputs, maps on, resolution > 0."""
    dim = int(np.prod(ds.x_train.shape[1:]))
    return bool(opts.maps) and opts.boundary_resolution > 0 and dim == 2


def corners(ds, resolution: int, margin: float) -> tuple[np.ndarray, np.ndarray]:
    """The ``resolution + 1`` cell corners along each axis (float64), over the maps' extent."""
    lo, hi = grids.extent(ds, margin)
    return tuple(np.linspace(float(lo[d]), float(hi[d]), resolution + 1) for d in range(2))


@torch.no_grad()
def cell_masks(net: nn.Module, preacts: list[nn.Module], axes, rows: int) -> np.ndarray:
    """``(len(preacts), R, R)`` booleans, ``[layer, i1, i0]``: whether some unit of the layer
    (the output of each module in ``preacts``) changes sign along an edge of cell ``(i0, i1)``
    of the grid whose corners are ``axes`` (``R + 1`` values each). ``net`` is used as given
    (freeze BN first) in bands of at most ``rows`` corners; hooks are removed afterwards."""
    a0, a1 = axes
    n0, n1, n_layers = len(a0), len(a1), len(preacts)
    p = next(net.parameters())
    x0 = torch.as_tensor(a0, device=p.device).to(p.dtype)
    hedge = np.zeros((n_layers, n1, n0 - 1), dtype=bool)  # [l, corner row, cell column]
    vedge = np.zeros((n_layers, n1 - 1, n0), dtype=bool)  # [l, cell row, corner column]
    prev: list = [None] * n_layers  # (sign, finite) of the last corner row of the band before
    band = max(1, rows // n0)
    with capture(preacts) as out:  # each layer's last output: this band's pre-activations
        for start in range(0, n1, band):
            stop = min(start + band, n1)
            k = stop - start
            x1 = torch.as_tensor(a1[start:stop], device=p.device).to(p.dtype)
            out.clear()
            net(torch.stack([x0[None, :].expand(k, n0), x1[:, None].expand(k, n0)], -1)
                .reshape(-1, 2))
            missing = sorted(set(range(n_layers)) - set(out))
            if missing:
                raise RuntimeError(f"layers {missing} are not on the forward path")
            for j in range(n_layers):
                h = out[j].reshape(k, n0, -1)
                # finite corners: one float64 sum per corner (finite float32 cannot overflow it)
                pos, ok = h > 0, torch.isfinite(h.sum(-1, dtype=torch.float64))
                hedge[j, start:stop] = ((pos[:, 1:] != pos[:, :-1]).any(-1)
                                        & ok[:, 1:] & ok[:, :-1]).cpu().numpy()
                first = start
                if prev[j] is not None:
                    pos, ok = torch.cat([prev[j][0], pos]), torch.cat([prev[j][1], ok])
                    first = start - 1
                if len(pos) > 1:
                    vedge[j, first:stop - 1] = ((pos[1:] != pos[:-1]).any(-1)
                                                & ok[1:] & ok[:-1]).cpu().numpy()
                prev[j] = (pos[-1:], ok[-1:])
    return hedge[:, :-1] | hedge[:, 1:] | vedge[:, :, :-1] | vedge[:, :, 1:]


def boundary_rows(net: nn.Module, layers: list, ds, opts: Options, bn_statistics: str,
                  rows: int) -> list[dict]:
    """One row per boundary cell of each kinked layer (``layers``: ``(1-based index, block)``
    pairs of ``net``) and of their union (``layer == "all"``), cells in row-major order (x0
    fastest), without the step."""
    res = opts.boundary_resolution
    axes = corners(ds, res, opts.map_margin)
    masks = cell_masks(net, [b.preact for _, b in layers], axes, rows)
    # one float object per cell centre coordinate, shared by its rows (a run has ~10^6 rows)
    c0, c1 = (((a[:-1] + a[1:]) / 2).tolist() for a in axes)
    groups = [(str(i), i, masks[j]) for j, (i, _) in enumerate(layers)]
    groups.append(("all", 0, masks.any(0)))
    out, res_f, nan = [], float(res), float("nan")
    for name, index, mask in groups:
        i1, i0 = np.nonzero(mask)
        out += [{"layer": name, "layer_index": index, "x0": c0[u], "x1": c1[v],
                 "resolution": res_f, "bn_statistics": bn_statistics, "label": nan}
                for u, v in zip(i0.tolist(), i1.tolist(), strict=True)]
    return out


def data_rows(ds, step: int, resolution: int) -> list[dict]:
    """The 2-D training points as ``layer == "data"`` rows (``label``: class or target)."""
    x = ds.x_train.reshape(len(ds.x_train), -1)
    y = np.asarray(ds.y_train, dtype=float).reshape(len(x), -1)[:, 0]
    return [{"step": step, "layer": DATA, "layer_index": -1, "x0": float(p[0]),
             "x1": float(p[1]), "resolution": float(resolution), "bn_statistics": "n/a",
             "label": float(v)} for p, v in zip(x, y, strict=True)]
