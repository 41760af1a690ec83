"""What the columns of the ics measure's tables mean, with units: its part of the
column dictionary (:mod:`bnstudy.column_docs`, ``results/README.md``), checked against the rows
it writes by ``tests/test_column_docs.py``. ``ROWS``: what one row of each table is.
"""

ROWS = {
    "ics": "one row per run, checkpoint and measured layer (`bnstudy.measures.ics.compute`)",
    "ics_activations": "one row per run, checkpoint, hidden layer, sampled unit and quantile "
    "(`bnstudy.measures.ics.activations`)",
}

COLUMNS = {
    "ics": {
        "step": ("integer",
                 "the checkpoint's step (W^t: the weights before update t; 0: the initialization)"),
        "layer": ("string",
                  'the layer\'s label, its 1-based position ("3"); the head is the last, k = '
                  "blocks + 1"),
        "layer_index": ("integer", "the layer's integer position (1: the first block)"),
        "layer_name": ("string", "the layer's module: `block<i>` or `head`"),
        "n_layers": ("integer", "the model's layers k, blocks + head (count)"),
        "n_params": ("integer", "parameters of layer i: the length of G_i (count)"),
        "batch_loss": "loss on the step's mini-batch at W^t (train mode), whose gradient is G",
        "grad_norm": ("float", "||G_i||_2, the gradient of layer i at W^t"),
        "grad_prime_norm": "||G'_i||_2, the gradient of layer i after the earlier layers' update",
        "grad_l2_diff": "||G_i - G'_i||_2, Santurkar's gradient ICS (Def. 2.1)",
        "grad_rel_diff": "||G_i - G'_i||_2 / ||G_i||_2 (fraction; NaN when G_i = 0)",
        "grad_cosine": "cos(G_i, G'_i), -1 to 1 (1: no shift; NaN when either is 0)",
        "input_mean": "mean over the layer's units of its input's per-unit mean on the probe "
        "batch at W^t (input units of the layer)",
        "input_var": "mean over units of the input's per-unit variance (biased) on the probe "
        "batch at W^t",
        "step_mean_shift": "mean over units of |change of the per-unit input mean| over the "
        "update t -> t+1 (Fig. 8)",
        "step_var_shift": "mean over units of |change of the per-unit input variance| over "
        "the update t -> t+1",
        "mean_shift": "the same as step_mean_shift, between this checkpoint and the previous "
        "one (NaN at the first)",
        "var_shift": "the same as step_var_shift, between this checkpoint and the previous "
        "one (NaN at the first)",
        "shift_from_step": ("integer",
                            "the previous checkpoint's step the shifts are from (empty at the "
                            "first)"),
        "update_replay_error": "max |W^{t+1} replayed - the next checkpoint's weights| (NaN "
        "when the next checkpoint is not step t+1)",
        "probe_size": ("integer", "points in the probe batch: the first training points (count)"),
        "bn_statistics": ("string",
                          "`batch`: every pass normalizes with the mini-batch's statistics"),
    },
    "ics_activations": {
        "step": "the checkpoint's step (0: the initialization)",
        "layer_index": "the hidden layer's position (1: the first block)",
        "layer_name": "the layer's module: `block<i>`",
        "units": ("integer", "the layer's units (features; channels of a conv map) (count)"),
        "unit": ("integer",
                 "the sampled unit's index in its layer (0-based; drawn once per run from a "
                 "fixed seed, the same at every checkpoint)"),
        "quantile": "the quantile level: 0.05, 0.25, 0.5, 0.75 or 0.95 (fraction)",
        "value": ("float", "that quantile of the unit's normalizer output (the batch-normalized "
                           "activation before the nonlinearity, noisy BN's noise included; the "
                           "linear/conv output without a normalizer) over the probe batch, train "
                           "mode (activation units)"),
        "samples_per_stat": ("integer",
                             "the values the quantile is over: the probe batch's points, "
                             "times height x width for conv maps (count)"),
        "probe_size": "points in the probe batch: the first training points (count)",
    },
}
