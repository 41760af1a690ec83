"""Regular grids over a 2-D dataset's inputs: where the partition-density maps and boundaries
and BN jitter's decision-boundary maps evaluate a network.

The grid spans the bounding box of the train and test inputs, widened on each side by
``margin`` times the box's extent along that axis (:func:`extent`); :func:`grid` lays
``resolution`` points along each axis of it.
"""

from __future__ import annotations

import numpy as np


def extent(ds, margin: float) -> tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)`` per input axis: the bounding box of the train and test inputs, widened on
    each side by ``margin`` times its extent (the maps' and the boundary grid's extent)."""
    x = np.concatenate([ds.x_train.reshape(len(ds.x_train), -1),
                        ds.x_test.reshape(len(ds.x_test), -1)])
    if x.shape[1] != 2:
        raise ValueError(f"partition-density maps need 2-D inputs, got dimension {x.shape[1]}")
    lo, hi = x.min(0), x.max(0)
    pad = margin * (hi - lo)
    return lo - pad, hi + pad


def grid(ds, resolution: int, margin: float) -> np.ndarray:
    """``(resolution**2, 2)`` float32 grid points; x0 varies fastest."""
    lo, hi = extent(ds, margin)
    axes = [np.linspace(lo[d], hi[d], resolution) for d in range(2)]
    g0, g1 = np.meshgrid(*axes, indexing="xy")
    return np.stack([g0.ravel(), g1.ravel()], axis=1).astype(np.float32)
