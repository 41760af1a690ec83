"""2-D partition-density maps (BN-Explained Fig. 3): the density over a grid covering the data.

For datasets with 2-D inputs, :func:`bnstudy.measures.partition.compute.measure` also counts, at
every
point of a ``resolution x resolution`` grid, the units whose boundary crosses the neighbourhood of
radius ``map_radius`` around the point, with the same method, BN statistics and frame as the
point sets (``method`` and ``effective_radius`` columns, as in the point-set table). The grid
spans the bounding box of the train and test inputs, widened on each side by ``margin`` times the
box's extent along that axis (:mod:`bnstudy.data.grids`).

Each grid point gets one row per layer group: ``first`` (the first kinked layer), ``middle`` (the
kinked layer at position ``(L - 1) // 2``, 0-based, of the ``L`` kinked layers: the exact middle
for odd ``L``, the lower middle for even ``L``), ``last``, and ``all`` (the sum over every layer,
the whole partition boundary). The paper's figure uses layers 1, 7 and 11 of 11 and normalizes
each panel by its maximum; the plots do the same and print the maximum. Rows with ``group ==
"data"`` hold the 2-D training points and labels (``boundaries`` NaN) for drawing them over the map.
"""

from __future__ import annotations

import numpy as np


def groups(layers: list[int]) -> dict[str, list[int]]:
    """Column positions (into the per-layer count matrix) of each layer group."""
    n = len(layers)
    if n == 0:
        raise ValueError("no kinked layers: nothing to map")
    return {"first": [0], "middle": [(n - 1) // 2], "last": [n - 1], "all": list(range(n))}


def map_rows(points: np.ndarray, counts: np.ndarray, layers: list[int], radius: float,
             bn_statistics: str, method: str, effective_radius: float) -> list[dict]:
    """Rows (group, layer_index, x0, x1, boundaries, ...) for grid ``points`` and per-layer
    ``counts`` of shape ``(len(points), len(layers))``; ``layer_index`` 0 means all layers."""
    rows = []
    for name, cols in groups(layers).items():
        values = counts[:, cols].sum(1)
        layer_index = 0 if name == "all" else layers[cols[0]]
        rows += [{"group": name, "layer_index": layer_index, "x0": float(p[0]), "x1": float(p[1]),
                  "boundaries": float(v), "radius": float(radius),
                  "effective_radius": float(effective_radius), "method": method,
                  "bn_statistics": bn_statistics, "label": float("nan")}
                 for p, v in zip(points, values, strict=True)]
    return rows


def data_rows(ds, step: int) -> list[dict]:
    """The 2-D training points as ``group == "data"`` rows (``label`` = class or target)."""
    x = ds.x_train.reshape(len(ds.x_train), -1)
    y = np.asarray(ds.y_train, dtype=float).reshape(len(x), -1)[:, 0]
    return [{"step": step, "group": "data", "layer_index": -1, "x0": float(p[0]),
             "x1": float(p[1]), "boundaries": float("nan"), "radius": float("nan"),
             "effective_radius": float("nan"), "method": "n/a", "bn_statistics": "n/a",
             "label": float(v)} for p, v in zip(x, y, strict=True)]
