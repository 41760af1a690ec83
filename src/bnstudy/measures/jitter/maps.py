"""Decision-boundary jitter (BN-Explained Fig. 6) for 2-D classification data.

For each realization ``r < realizations`` of :mod:`bnstudy.measures.jitter.compute`'s seeded
mini-batches, the
network's BN layers are frozen at the statistics that batch gives every layer in a train-mode
forward (mean and biased variance; ghost BN: its first virtual batch) and the predicted class is
evaluated in eval mode on a ``grid_resolution`` x ``grid_resolution`` grid spanning the train and
test inputs (widened by ``grid_margin`` times the extent on each side; the partition-density
maps' grid, :mod:`bnstudy.data.grids`). So each realization is the function training on that
batch computes, for every grid point at once. Per grid point: the majority class over the
realizations (ties: the lowest class index) and the fraction of realizations that disagree with
it.

Summary (one ``layer = "boundary"`` row per step and batch size of table ``bn_jitter``):

- ``band_fraction``: the fraction of grid points where at least one realization disagrees with
  the majority, the "jitter band" swept by the boundary; ``band_area`` is that fraction times
  the grid's area (input units squared); ``disagreement_mean``: the mean disagreement over the
  grid. Both depend on the grid's extent, which is the same for every run of a dataset.
- ``margin_mean``: the margin proxy, the mean over realizations of the mean over training
  points of the Euclidean distance to the nearest boundary point of that realization; boundary
  points are the midpoints between 4-neighbour grid points of different predicted class, so
  distances are resolution-limited (error up to half a grid step, ``grid_step``, the mean of the
  two axes' spacings). ``margin_std``: its standard deviation over realizations (ddof=1);
  ``margin_population``: the same for the network frozen at whole-training-set statistics (the
  function BN converges to without jitter). A realization whose grid holds a single class has no
  boundary there (margin NaN, counted in ``no_boundary``).

Table ``bn_jitter_boundary`` (drawn as Fig. 6) holds, at the first and last measured checkpoint
only: ``kind = "disagreement"``, a ``map_resolution`` x ``map_resolution`` subsample of the grid
(``value``: disagreement, ``label``: majority class); the decision boundary as the boundary cells
of a finer ``boundary_resolution`` grid over the same extent (:mod:`.cells`: cell centres, so
the figure draws lines, not pixels), ``kind = "population"`` under whole-training-set statistics
(repeated per batch size) and ``"realization"`` under realization ``realization <
map_realizations``; and ``kind = "data"``: the training points (``label``).
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from scipy.spatial import cKDTree
from torch import nn

from bnstudy.data import grids
from bnstudy.measures.jitter import cells as fine_cells
from bnstudy.networks.normalizers import batchnorm_modules
from bnstudy.networks.norms.layers import set_mean_var

SUMMARY_KEYS = ("band_fraction", "band_area", "disagreement_mean", "margin_mean", "margin_std",
                "margin_population", "no_boundary", "realizations", "grid_step")


def applies(ds) -> bool:
    """Whether the dataset gets decision-boundary maps: 2-D inputs, classification."""
    return ds.task == "classification" and int(np.prod(ds.input_shape)) == 2


def vote(classes: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Majority class and disagreement fraction per column of ``classes`` (realizations, points)."""
    counts = np.stack([(classes == c).sum(0) for c in range(n_classes)])
    return counts.argmax(0), 1.0 - counts.max(0) / len(classes)


def boundary_points(classes: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Midpoints between 4-neighbours of different class on a grid; ``classes[i1, i0]`` is the
    class at ``(xs[i0], ys[i1])``. Returns ``(M, 2)``."""
    h = np.nonzero(classes[:, :-1] != classes[:, 1:])
    v = np.nonzero(classes[:-1, :] != classes[1:, :])
    pts_h = np.stack([(xs[h[1]] + xs[h[1] + 1]) / 2, ys[h[0]]], axis=1)
    pts_v = np.stack([xs[v[1]], (ys[v[0]] + ys[v[0] + 1]) / 2], axis=1)
    return np.concatenate([pts_h, pts_v])


def mean_distance(classes: np.ndarray, xs: np.ndarray, ys: np.ndarray,
                  points: np.ndarray) -> float:
    """Mean over ``points`` of the distance to the nearest boundary point (NaN: no boundary)."""
    b = boundary_points(classes, xs, ys)
    if len(b) == 0:
        return float("nan")
    return float(cKDTree(b).query(points)[0].mean())


def _subsample(resolution: int, size: int) -> np.ndarray:
    return np.unique(np.round(np.linspace(0, resolution - 1, min(size, resolution))).astype(int))


class Boundary:
    """The grid, the population boundary, and the realizations of one checkpoint."""

    def __init__(self, frozen: nn.Module, ds, opts, rows: int | None = None):
        """``rows``: grid points per forward (the measure sizes it from its memory budget;
        default ``opts.chunk_rows``)."""
        self.opts, self.res = opts, opts.grid_resolution
        self.rows = opts.chunk_rows if rows is None else rows
        self.net = copy.deepcopy(frozen).eval()  # its BN buffers are set per realization
        self.bns = batchnorm_modules(self.net)
        self.dev = next(self.net.parameters()).device
        self.grid = grids.grid(ds, self.res, opts.grid_margin)
        self.xs, self.ys = self.grid[: self.res, 0].astype(float), self.grid[:: self.res, 1].astype(
            float)
        self.points = ds.x_train.reshape(len(ds.x_train), -1).astype(float)
        self.n_classes = ds.out_dim
        self.frozen = frozen  # whole-training-set statistics; never changed here
        self.fine = fine_cells.FineGrid(ds, opts.boundary_resolution, opts.grid_margin,
                                        self.rows)
        self._population_cells: np.ndarray | None = None  # computed when first drawn
        self.population = self.classes(frozen)
        self.margin_population = mean_distance(self.population.reshape(self.res, self.res),
                                               self.xs, self.ys, self.points)
        keep = _subsample(self.res, opts.map_resolution)
        self.map_index = (keep[:, None] * self.res + keep[None, :]).ravel()  # (i1, i0) pairs

    @torch.no_grad()
    def classes(self, net: nn.Module) -> np.ndarray:
        g = torch.as_tensor(self.grid, device=self.dev)
        out = [net(g[i: i + self.rows]).argmax(1).cpu() for i in range(0, len(g), self.rows)]
        return torch.cat(out).numpy().astype(np.int64)

    def realize(self, emp: list[tuple[torch.Tensor, torch.Tensor]],
                maps: bool = True) -> tuple[dict, list[dict]]:
        """Summary and (if ``maps``) map rows from per-layer ``(K, C)`` batch statistics (the
        first R are used)."""
        r_count = self.opts.realizations
        drawn = min(self.opts.map_realizations, r_count) if maps else 0
        classes = np.empty((r_count, len(self.grid)), dtype=np.int64)
        cells = []  # the drawn realizations' boundary cells on the fine grid
        for r in range(r_count):
            for bn, (mu, var) in zip(self.bns, emp, strict=True):
                set_mean_var(bn, mu[r], var[r])
            classes[r] = self.classes(self.net)
            if r < drawn:
                cells.append(self.fine.cells(self.net))
        majority, disagreement = vote(classes, self.n_classes)
        margins = np.array([mean_distance(c.reshape(self.res, self.res), self.xs, self.ys,
                                          self.points) for c in classes])
        finite = margins[np.isfinite(margins)]
        area = float((self.xs[-1] - self.xs[0]) * (self.ys[-1] - self.ys[0]))
        band = float((disagreement > 0).mean())
        summary = {
            "band_fraction": band, "band_area": band * area,
            "disagreement_mean": float(disagreement.mean()),
            "margin_mean": float(finite.mean()) if len(finite) else float("nan"),
            "margin_std": float(finite.std(ddof=1)) if len(finite) > 1 else float("nan"),
            "margin_population": self.margin_population,
            "no_boundary": int((~np.isfinite(margins)).sum()), "realizations": r_count,
            "grid_step": float((np.diff(self.xs).mean() + np.diff(self.ys).mean()) / 2),
        }
        if not maps:
            return summary, []
        idx, pts = self.map_index, self.grid[self.map_index]
        rows = [_row("disagreement", -1, p, d, m) for p, d, m in
                zip(pts, disagreement[idx], majority[idx], strict=True)]
        if self._population_cells is None:
            self._population_cells = self.fine.cells(self.frozen)
        rows += fine_cells.rows("population", -1, self._population_cells)
        for r, centres in enumerate(cells):
            rows += fine_cells.rows("realization", r, centres)
        return summary, rows


def _row(kind: str, realization: int, p, value, label) -> dict:
    return {"kind": kind, "realization": realization, "x0": float(p[0]), "x1": float(p[1]),
            "value": float(value), "label": float(label)}


def data_rows(ds) -> list[dict]:
    """The 2-D training points (``kind = "data"``, ``label`` = class, ``batch_size`` 0)."""
    x = ds.x_train.reshape(len(ds.x_train), -1)
    return [{"batch_size": 0, **_row("data", -1, p, np.nan, y)}
            for p, y in zip(x, np.asarray(ds.y_train), strict=True)]
