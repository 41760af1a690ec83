"""What the columns of the smoothness measure's tables mean, with units: its part of the
column dictionary (:mod:`bnstudy.column_docs`, ``results/README.md``), checked against the rows
it writes by ``tests/test_column_docs.py``. ``ROWS``: what one row of each table is.
"""

from bnstudy.tables.value_range import NONNEGATIVE

ROWS = {
    "smoothness": "one row per run and checkpoint (`bnstudy.measures.smoothness.compute`)",
    "smoothness_probes": "one row per run, checkpoint and probe step along -g",
}

COLUMNS = {
    "smoothness": {
        "step": ("integer",
                 "the checkpoint's step (W^t: the weights before update t; 0: the initialization)"),
        "diverged": ("boolean",
                     "whether the run diverged (its checkpoints stop at the failing step)"),
        "loss": ("float", "L(w), the loss on the step's mini-batch at the checkpoint's weights"),
        "grad_norm": ("float", "||g||_2, g = grad L(w) over every trainable parameter"),
        "loss_min": "smallest finite loss over the probes w - eta g (Fig. 4a's band)",
        "loss_max": "largest loss over the probes (inf if one is not finite)",
        "grad_pred_max": "max over the probes of ||grad L(w - eta g) - g||_2 (Fig. 4b)",
        "beta_eff": "effective beta-smoothness: max over the probes of ||grad L(w - "
        "eta g) - g|| / ||eta g|| (Fig. 4c)",
        "nonfinite_probes": ("integer", "probes whose loss is not finite (count)"),
        "hessian_top": "largest eigenvalue of L's Hessian at w (NaN when not computed)",
        "hessian_dominant": "the Hessian's eigenvalue of largest magnitude, signed",
        "hessian_iterations": ("integer", "Hessian-vector products used (count; 0 when off)"),
        "hessian_converged": ("boolean", "whether the Lanczos iteration met its tolerance "
                              "(the top's and the dominant's eigen-residual <= hessian_tol x "
                              "their own magnitude)"),
        "lr": ("float", "lr_t, the scheduled learning rate of the step: eta = multiplier x lr_t"),
        "n_probes": ("integer", "probes along -g (count)"),
        "n_params": ("integer", "trainable parameters (count)"),
        "bn_statistics": ("string", "`batch` (train mode) or `running` (eval mode)"),
    },
    "smoothness_probes": {
        "step": "the checkpoint's step (W^t: the weights before update t; 0: the initialization)",
        "diverged": "whether the run diverged (its checkpoints stop at the failing step)",
        "multiplier": "m, the probe's step as a multiple of lr_t",
        "eta": "the probe's step size, m x lr_t",
        "distance": "eta ||g||_2, the probe's distance from w",
        "loss": "L(w - eta g), the mini-batch loss at the probe",
        "grad_diff": "||grad L(w - eta g) - g||_2",
        "beta": "grad_diff / distance (NaN at distance 0)",
        "bn_statistics": "`batch` (train mode) or `running` (eval mode)",
    },
}

# The values each column can hold, checked on every read of the tables (bnstudy.tables.ranges)
RANGES = {
    "smoothness": {
        "loss": NONNEGATIVE, "grad_norm": NONNEGATIVE, "loss_min": NONNEGATIVE,
        "loss_max": NONNEGATIVE, "grad_pred_max": NONNEGATIVE, "beta_eff": NONNEGATIVE,
        "nonfinite_probes": NONNEGATIVE, "hessian_iterations": NONNEGATIVE, "lr": NONNEGATIVE,
        "n_probes": NONNEGATIVE, "n_params": NONNEGATIVE,
    },
    "smoothness_probes": {
        "loss": NONNEGATIVE, "distance": NONNEGATIVE, "grad_diff": NONNEGATIVE,
        "beta": NONNEGATIVE,
    },
}
