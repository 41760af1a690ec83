"""What the columns of the generalization measure's tables mean, with units: its part of the
column dictionary (:mod:`bnstudy.column_docs`, ``results/README.md``), checked against the rows
it writes by ``tests/test_column_docs.py``. ``ROWS``: what one row of each table is.
"""

from bnstudy.tables.value_range import FRACTION, NONNEGATIVE, Range

ROWS = {
    "generalization": "one row per run, at its last checkpoint "
    "(`bnstudy.measures.generalization.compute`)"
}

COLUMNS = {
    "generalization": {
        "step": ("integer", "the last checkpoint's step, where the run is evaluated"),
        "train_loss": "mean loss over the training set (eval mode)",
        "test_loss": "mean loss over the test set (eval mode)",
        "loss_gap": "test_loss - train_loss",
        "train_accuracy": "fraction of the training set classified correctly, 0 to "
        "1 (NaN for regression)",
        "test_accuracy": "fraction of the test set classified correctly, 0 to 1 "
        "(NaN for regression)",
        "accuracy_gap": "train_accuracy - test_accuracy (fraction)",
        "bn_statistics": ("string", "`running`: BN's running averages; `recomputed`: "
                                    "whole-training-set statistics at the final weights"),
        "gamma_sq": ("float", "mean over hidden layers with a learned per-unit scale of mean "
                              "gamma^2 (Luo Fig. 2e; NaN if none)"),
        "arch": ("string", "the model's architecture (a user's model: its from target)"),
        "dropout": ("float", "the model's dropout probability"),
        "train_batch_size": ("integer", "the mini-batch the run trained with (full batch: the "
                                        "training set's size)"),
        "lr_batch_scaled": ("boolean", "whether the learning rate was scaled with the batch "
                                       "size (`lr_reference_batch`)"),
        "training_schedule": ("string",
                              "the run's learning-rate schedule, momentum, weight decay and "
                              "steps in words (equal for runs trained alike)"),
        "diverged": ("boolean", "whether the run diverged (its checkpoints stop at the failing "
                                "step); its metrics are NaN"),
    }
}

# The values each column can hold, checked on every read of the table (bnstudy.tables.ranges)
RANGES = {
    "generalization": {
        "train_loss": NONNEGATIVE, "test_loss": NONNEGATIVE,
        "train_accuracy": FRACTION, "test_accuracy": FRACTION,
        "accuracy_gap": Range(low=-1, high=1), "gamma_sq": NONNEGATIVE, "dropout": FRACTION,
        "train_batch_size": Range(low=1),
    }
}
