"""What the columns of the partition_density measure's tables mean, with units: its part of the
column dictionary (:mod:`bnstudy.column_docs`, ``results/README.md``), checked against the rows
it writes by ``tests/test_column_docs.py``. ``ROWS``: what one row of each table is.
"""

ROWS = {
    "partition_density": "one row per run, checkpoint, point set, radius and layer (and `all`) "
    "(`bnstudy.measures.partition.compute`)",
    "partition_density_maps": "2-D inputs only: one row per run, checkpoint, layer group and grid "
    "point, and one per training point, for the runs of the seeds `map_seeds` names (default "
    "all) (`bnstudy.measures.partition.maps`)",
    "partition_boundaries": "2-D inputs only: one row per run, checkpoint, layer (and `all`) "
    "and grid cell a boundary crosses, and one per training point, for the runs of the seeds "
    "`map_seeds` names (`bnstudy.measures.partition.boundaries`)",
}

COLUMNS = {
    "partition_density": {
        "step": ("integer",
                 "the checkpoint's step (W^t: the weights before update t; 0: the initialization)"),
        "diverged": ("boolean",
                     "whether the run diverged (its checkpoints stop at the failing step)"),
        "layer": ("string", 'the kinked layer\'s label, its 1-based block position ("3"), '
                            "or `all` (every kinked layer)"),
        "layer_index": ("integer",
                        "the layer's integer position (1: the first block); 0 for `all`"),
        "point_set": ("string", "`train`, `test` or `random` (Gaussian with the data's "
                                "per-feature mean and sd)"),
        "radius": ("float", "r, the neighbourhood's radius (input units)"),
        "effective_radius": ("float", "the epsilon-ball radius the count stands for: r "
                                      "(`distance`), r times the frame's shrink "
                                      "(`polytope`)"),
        "boundaries": ("float", "mean over the points of the units whose boundary passes "
                                "within r (count per point)"),
        "boundaries_std": "standard deviation of that count over the points (ddof 1)",
        "fraction": "boundaries / neurons: the fraction of the layer's units counted",
        "neurons": ("integer", "units of the layer (conv: channels x positions; `all`: "
                               "every kinked layer's) (count)"),
        "n_points": ("integer", "points in the point set (count)"),
        "n_directions": ("integer", "the polytope's directions k, or the input dimension D "
                                    "for `distance` (count)"),
        "method": ("string", "`distance` (first-order distance to the boundary) or "
                             "`polytope` (sign change over vertices)"),
        "bn_statistics": ("string", "BN frozen at `train_set`, `batch` or `running` "
                                    "statistics; `n/a` without BN"),
        "input_standardized": ("boolean", "whether the images were standardized per channel "
                                          "(the radii's units)"),
        "applicable": ("boolean", "false for a network without kinked layers (values NaN)"),
    },
    "partition_density_maps": {
        "step": "the checkpoint's step (W^t: the weights before update t; "
        "0: the initialization); data rows: the first checkpoint's",
        "diverged": "whether the run diverged (its checkpoints stop at the failing step)",
        "group": ("string",
                  "`first`, `middle` or `last` kinked layer, `all` (their sum), or `data`"),
        "layer_index": "the group's layer position (0 for `all`, -1 for data rows)",
        "x0": ("float",
               "first input coordinate of the grid point (data rows: of the training point)"),
        "x1": ("float",
               "second input coordinate of the grid point (data rows: of the training point)"),
        "boundaries": "units of the group whose boundary passes within the "
        "map radius of the grid point (count; NaN for data)",
        "radius": "the map radius, `map_radius` (input units; NaN for data)",
        "effective_radius": "the epsilon-ball radius the count stands for "
        "(as in partition_density)",
        "method": "`distance` or `polytope`; `n/a` for data rows",
        "bn_statistics": "as in partition_density; `n/a` for data rows",
        "label": ("integer", "data rows: the training point's class (empty for grid rows)"),
    },
    "partition_boundaries": {
        "step": "the checkpoint's step (W^t: the weights before update t; "
        "0: the initialization); data rows: the first checkpoint's",
        "diverged": "whether the run diverged (its checkpoints stop at the failing step)",
        "layer": 'the kinked layer\'s label, its 1-based block position ("3"), `all` (the '
        "union over the layers: the whole network's partition), or `data`",
        "layer_index": "the layer's integer position (1: the first block); 0 for `all`, "
        "-1 for data rows",
        "x0": "first input coordinate of the boundary cell's centre (data rows: of the "
        "training point)",
        "x1": "second input coordinate of the boundary cell's centre (data rows: of the "
        "training point)",
        "resolution": ("integer",
                       "`boundary_resolution`: cells per axis of the grid over the maps' extent "
                       "(count, stored as a float)"),
        "bn_statistics": "as in partition_density; `n/a` for data rows",
        "label": "data rows: the training point's class (empty for cell rows)",
    },
}
