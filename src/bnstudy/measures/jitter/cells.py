"""Decision-boundary cells on a fine grid: BN-Explained Fig. 6's boundaries drawn as lines.

The jitter summaries (:mod:`bnstudy.measures.jitter.maps`) classify a ``grid_resolution`` grid
for every realization; stored and drawn at that resolution a boundary is a staircase of coarse
pixels, and the spread of several realizations (the jitter the figure shows) is lost in the
pixels. Here the network is classified on a finer ``boundary_resolution`` x
``boundary_resolution`` grid over the same extent (the train and test inputs, widened by
``grid_margin``), and only the *boundary cells* are kept: a cell is the square between four
neighbouring grid points, and it is on the boundary when the predicted class differs between
two of its horizontally or vertically adjacent corners (any number of classes). A decision
boundary that crosses a cell separates two of its corners, so every boundary cell's centre lies
within half a cell diagonal of the boundary, and every point of the boundary inside the grid
lies in (or on the edge of) a boundary cell: the cells trace the boundary to half a diagonal.
About ``resolution`` cells per boundary crossing the grid, so the table stays small while the
figure can draw each realization as a thin line (:mod:`bnstudy.plots.bn_jitter`).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from bnstudy.data import grids


def boundary_cells(classes: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Centres ``(M, 2)`` of the cells between grid points whose corners are not all of one
    class; ``classes[i1, i0]`` is the class at ``(xs[i0], ys[i1])``. Row-major (x0 fastest)."""
    c = np.asarray(classes)
    if c.ndim != 2 or c.shape != (len(ys), len(xs)):
        raise ValueError(f"classes of shape {c.shape} do not match the grid "
                         f"({len(ys)}, {len(xs)})")
    h = c[:, :-1] != c[:, 1:]  # horizontally adjacent points differ
    v = c[:-1, :] != c[1:, :]  # vertically adjacent points differ
    cell = h[:-1, :] | h[1:, :] | v[:, :-1] | v[:, 1:]
    i1, i0 = np.nonzero(cell)
    xs, ys = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    return np.stack([(xs[i0] + xs[i0 + 1]) / 2, (ys[i1] + ys[i1 + 1]) / 2], axis=1)


class FineGrid:
    """The fine grid of one dataset and the boundary cells of a network's classes on it."""

    def __init__(self, ds, resolution: int, margin: float, chunk_rows: int):
        if resolution < 2:
            raise ValueError(f"boundary_resolution={resolution!r}: need an int >= 2")
        self.res, self.chunk_rows = resolution, chunk_rows
        self.grid = grids.grid(ds, resolution, margin)
        self.xs = self.grid[:resolution, 0].astype(float)
        self.ys = self.grid[::resolution, 1].astype(float)

    @torch.no_grad()
    def cells(self, net: nn.Module) -> np.ndarray:
        """Boundary-cell centres of ``net``'s predicted class (argmax; ``net`` in eval mode,
        unchanged)."""
        dev = next(net.parameters()).device
        g = torch.as_tensor(self.grid, device=dev)
        out = [net(g[i: i + self.chunk_rows]).argmax(1).cpu()
               for i in range(0, len(g), self.chunk_rows)]
        classes = torch.cat(out).numpy().reshape(self.res, self.res)
        return boundary_cells(classes, self.xs, self.ys)


def rows(kind: str, realization: int, centres: np.ndarray) -> list[dict]:
    """Table rows of boundary cells (``value`` and ``label`` NaN: a cell has no one class)."""
    nan = float("nan")
    return [{"kind": kind, "realization": realization, "x0": float(p[0]), "x1": float(p[1]),
             "value": nan, "label": nan} for p in centres]
