"""Decision boundaries drawn as lines from their boundary cells (the Fig. 6 panels' helper).

The ``bn_jitter_boundary`` table stores each boundary as the centres of the cells of a fine
regular grid that it crosses (:mod:`bnstudy.measures.jitter.cells`), not as a class image: one
line per realization is what the figure compares, and a contour of a coarse class image is a
staircase. Neighbouring cells of one boundary are joined by segments, giving a polyline that
follows the boundary to half a cell diagonal. The grid's spacing is not a column: it is the
smallest gap between distinct cell coordinates of a panel (all its boundaries together lie on
one lattice), per axis, the other axis's when one axis has a single value.

Each boundary is one NaN-separated path, stroked once, so a transparent line does not darken
where its own segments meet; overlapping realizations do darken, which is the jitter's picture.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bnstudy import lazy

mcolors = lazy.module("matplotlib.colors")
mimage = lazy.module("matplotlib.image")

REALIZATION = "#b5179e"  # magenta: apart from the class colours of the data points
POPULATION = "#1a1a1a"


def spacing(values) -> float:
    """The lattice spacing of ``values``: the smallest gap between distinct values (NaN for
    fewer than two distinct values)."""
    u = np.unique(np.asarray(values, dtype=float))
    if len(u) < 2:
        return float("nan")
    gaps = np.diff(u)
    gaps = gaps[gaps > 1e-6 * (u[-1] - u[0])]  # equal centres computed alike differ by 0
    return float(gaps.min())


def steps(cells: pd.DataFrame) -> tuple[float, float]:
    """The grid spacing ``(s0, s1)`` of the cells of one panel (``x0``, ``x1``); an axis with
    one value takes the other's, and a single cell gets 1 (nothing to join)."""
    s0, s1 = spacing(cells["x0"]), spacing(cells["x1"])
    s0, s1 = (s1 if np.isnan(s0) else s0), (s0 if np.isnan(s1) else s1)
    return (1.0, 1.0) if np.isnan(s0) else (s0, s1)


def path(x0, x1, s0: float, s1: float) -> tuple[np.ndarray, np.ndarray]:
    """One boundary's polyline: NaN-separated segments joining each cell to its right and
    upper neighbours, and to a diagonal neighbour only where no shared edge neighbour already
    joins them (no small triangles on a staircase)."""
    x0, x1 = np.asarray(x0, dtype=float), np.asarray(x1, dtype=float)
    if len(x0) == 0:
        return np.empty(0), np.empty(0)
    i0 = np.rint((x0 - x0.min()) / s0).astype(np.int64)
    i1 = np.rint((x1 - x1.min()) / s1).astype(np.int64)
    width = int(i1.max()) + 3
    key = np.unique(i0 * width + i1 + 1)
    i0, i1 = key // width, key % width - 1

    def has(d0: int, d1: int) -> np.ndarray:
        return np.isin(key + d0 * width + d1, key)

    right, up, down = has(1, 0), has(0, 1), has(0, -1)
    links = [(right, 1, 0), (up, 0, 1), (has(1, 1) & ~right & ~up, 1, 1),
             (has(1, -1) & ~right & ~down, 1, -1)]
    xs, ys = [], []
    for keep, d0, d1 in links:
        a0, a1 = x0.min() + i0[keep] * s0, x1.min() + i1[keep] * s1
        nan = np.full(len(a0), np.nan)
        xs.append(np.stack([a0, a0 + d0 * s0, nan], axis=1).ravel())
        ys.append(np.stack([a1, a1 + d1 * s1, nan], axis=1).ravel())
    return np.concatenate(xs), np.concatenate(ys)


def draw(ax, cells: pd.DataFrame, s0: float, s1: float, **line) -> None:
    """``cells`` (one boundary's ``x0``, ``x1``) as one line on ``ax`` (``line``: Line2D
    properties)."""
    xs, ys = path(cells["x0"], cells["x1"], s0, s1)
    if len(xs):
        ax.plot(xs, ys, solid_capstyle="round", solid_joinstyle="round", **line)


def disagreement(ax, sub: pd.DataFrame):
    """The coarse disagreement map in light greys (white: none, grey: half), one fixed scale
    for every panel so that the panels compare; each pixel centred on its grid point (the map
    is a subsample of the grid, not evenly spaced to the last digit), the axes limits the
    grid's extent, which the fine grid of the boundaries shares. None: no map."""
    dis = sub[sub["kind"] == "disagreement"].pivot_table(index="x1", columns="x0", values="value")
    if dis.empty:
        return None
    x, y = dis.columns.to_numpy(float), dis.index.to_numpy(float)
    cmap = mcolors.LinearSegmentedColormap.from_list("light_greys", ["white", "0.7"])
    image = mimage.NonUniformImage(ax, interpolation="nearest", cmap=cmap,
                                   extent=(x.min(), x.max(), y.min(), y.max()),
                                   norm=mcolors.Normalize(0.0, 0.5), zorder=0)
    image.set_data(x, y, dis.to_numpy(float))
    ax.add_image(image)
    ax.set_xlim(x.min(), x.max())
    ax.set_ylim(y.min(), y.max())
    return image


def boundaries(ax, sub: pd.DataFrame) -> None:
    """Each realization's boundary a thin transparent line, the population's a thick dark one
    (their boundary cells on the fine grid, joined)."""
    cells = sub[sub["kind"].isin(("realization", "population"))]
    if cells.empty:
        return
    s0, s1 = steps(cells)
    for _, real in cells[cells["kind"] == "realization"].groupby("realization"):
        draw(ax, real, s0, s1, color=REALIZATION, lw=0.8, alpha=0.45, zorder=2)
    draw(ax, cells[cells["kind"] == "population"], s0, s1, color=POPULATION, lw=1.8, zorder=3)
