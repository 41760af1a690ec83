"""What the columns of the bn_jitter measure's tables mean, with units: its part of the
column dictionary (:mod:`bnstudy.column_docs`, ``results/README.md``), checked against the rows
it writes by ``tests/test_column_docs.py``. ``ROWS``: what one row of each table is.
"""

ROWS = {
    "bn_jitter": "one row per run, checkpoint, batch size and BN layer, and a `boundary` row for "
    "2-D classification data (`bnstudy.measures.jitter.compute`)",
    "bn_jitter_boundary": "2-D classification data only, first and last measured checkpoint: one "
    "row per disagreement-map point, one per boundary cell of the fine grid for the population "
    "boundary and each drawn realization, and one per training point, for the runs of the seeds "
    "`map_seeds` names (`bnstudy.measures.jitter.maps`, `bnstudy.measures.jitter.cells`)",
}

COLUMNS = {
    "bn_jitter": {
        "step": ("integer",
                 "the checkpoint's step (W^t: the weights before update t; 0: the initialization)"),
        "diverged": ("boolean",
                     "whether the run diverged (its checkpoints stop at the failing step)"),
        "batch_size": ("integer", "the configured batch size |B|"),
        "batch_size_effective": ("integer", "samples per batch statistic: |B| capped at the "
                                            "training set (ghost BN: its virtual batch)"),
        "sampling": ("string",
                     "`without_replacement` or `with_replacement`: how the batches are drawn"),
        "n_batches": ("integer", "K, the mini-batches the variances are over (count)"),
        "applicable": ("boolean", "false for a network without BatchNorm layers (values NaN)"),
        "layer": ("string", 'the BN layer\'s label, its 1-based block position ("3"); `boundary`: '
                            "the decision-boundary summary; `n/a`: no BN"),
        "layer_index": ("integer", "the layer's integer position (1: the first block) of the BN "
                                   "layer; 0 for `boundary` and `n/a` rows"),
        "units": ("integer", "the BN layer's units or channels (count)"),
        "samples_per_stat": ("integer", "n = |B| H W, the values each statistic is over (count)"),
        "population": ("integer", "the population the batch is drawn from, N H W values (count)"),
        "var_mu_emp": "mean over units of the variance of mu_B over the K batches (ddof "
        "1; input units^2)",
        "var_mu_pred": "mean over units of the exact predicted variance of mu_B for the sampling",
        "var_mu_prop2": "mean over units of Proposition 2's eq. (13) for var(mu_B), as printed",
        "var_sigma2_emp": "mean over units of the variance of BN's biased sigma_B^2 "
        "over the K batches (ddof 1)",
        "var_sigma2_pred": "mean over units of the exact predicted variance of sigma_B^2",
        "var_sigma2_prop2": "mean over units of eq. (13) for var(s^2), unbiased s^2, as printed",
        "ratio_mu": "var_mu_emp / var_mu_pred",
        "ratio_sigma2": "var_sigma2_emp / var_sigma2_pred",
        "median_ratio_mu": "median over units of the per-unit empirical / predicted var(mu_B)",
        "median_ratio_sigma2": "median over units of the per-unit empirical / predicted "
        "var(sigma_B^2)",
        "band_fraction": "boundary: fraction of grid points where a realization "
        "disagrees with the majority",
        "band_area": "boundary: band_fraction times the grid's area (input units^2)",
        "disagreement_mean": "boundary: mean over the grid of the fraction of "
        "realizations disagreeing",
        "margin_mean": "boundary: mean over realizations of the mean distance from the "
        "training points to the boundary (input units)",
        "margin_std": "boundary: standard deviation of that distance over realizations (ddof 1)",
        "margin_population": "boundary: the same distance for BN at whole-training-set statistics",
        "no_boundary": ("integer",
                        "boundary: realizations whose grid holds a single class (count)"),
        "realizations": ("integer", "boundary: R, the decision boundaries drawn (count)"),
        "grid_step": "boundary: mean grid spacing, the margins' resolution (input units)",
    },
    "bn_jitter_boundary": {
        "step": "the checkpoint's step (the first and last measured; data rows: the first)",
        "diverged": "whether the run diverged (its checkpoints stop at the failing step)",
        "batch_size": "the configured batch size (0 for data rows)",
        "kind": ("string",
                 "`disagreement` (coarse map point), `population` or `realization` (a cell of "
                 "that decision boundary on the fine grid of boundary_resolution points per "
                 "axis) or `data`"),
        "realization": ("integer", "the realization's index r (-1 for other kinds)"),
        "x0": ("float", "first input coordinate of the map point (population, realization: of the "
                        "boundary cell's centre; data: of the training point)"),
        "x1": ("float", "second input coordinate of the map point (population, realization: of the "
                        "boundary cell's centre; data: of the training point)"),
        "value": ("float", "disagreement: fraction of realizations disagreeing with the "
                           "majority (NaN for other kinds)"),
        "label": ("integer",
                  "disagreement: the majority class; data: the training point's class (NaN for "
                  "other kinds)"),
    },
}
