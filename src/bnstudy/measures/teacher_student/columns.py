"""What the columns of the teacher_student measure's tables mean, with units: its part of the
column dictionary (:mod:`bnstudy.column_docs`, ``results/README.md``), checked against the rows
it writes by ``tests/test_column_docs.py``. ``ROWS``: what one row of each table is.
"""

ROWS = {
    "teacher_student": "teacher-student data only: one row per run and checkpoint (or the last "
    "only, `checkpoints: last`) (`bnstudy.measures.teacher_student.compute`)"
}

COLUMNS = {
    "teacher_student": {
        "step": ("integer",
                 "the checkpoint's step (W^t: the weights before update t; 0: the initialization)"),
        "alpha": "alpha = P / N, training points per input dimension",
        "N": ("integer", "N, the input dimension (count)"),
        "P": ("integer", "P, the training points (count)"),
        "S": "S, the variance of the training targets' label noise",
        "data_seed": ("integer", "the dataset's draw (teacher and data)"),
        "batch_size": ("integer", "the training batch M (full batch: P)"),
        "lr": ("float", "the run's configured learning rate"),
        "diverged": ("boolean",
                     "whether the run diverged (its checkpoints stop at the failing step)"),
        "bn_statistics": ("string", "`running` or `recomputed` (whole-training-set statistics)"),
        "epochs": ("float", "passes over the training set: step x batch_size / P"),
        "train_mse": "mean squared error on the noisy training targets",
        "test_mse": "mean squared error on the noise-free test targets",
        "activation": ("string",
                       "the single-unit student's activation, `linear` or `relu` (empty: none)"),
        "gen_error": "Luo's generalization error E_x[(w*^T x - y(x))^2] (Eq. "
        "16-17), exact (NaN: no closed form)",
        "gamma2": "gamma^2 = ||w~||^2 / N of the effective weight w~ = a u",
        "R": "R = cos(w~, w*), the overlap with the teacher",
        "norm_gamma2": "the normalizer's own gamma^2 (NaN without a scalar gamma)",
        "head_weight": "a, the head's weight (1 without a head)",
        "null_error": "the part of gen_error from the student's weight outside the span "
        "of the training inputs (training never moves it; NaN: not computed)",
        "zeta": "zeta of the curve `theory` (0 for vanilla SGD; NaN: none)",
        "curve": ("string", "the closed form `theory` is: `sgd` (minimum-norm least squares), "
                            "`shrinkage` (least squares shrunk by 1 / (1 + zeta): the BN family) "
                            "or `ridge` (WN + gamma decay)"),
        "theory": "the closed-form generalization error of the objective the run trains or is "
        "equivalent to (`curve`)",
        "theory_sgd": "the closed form of vanilla SGD for the activation",
        "theory_shrinkage": "least squares shrunk by 1 / (1 + zeta): the objective of "
        "gamma decay on the output variance over the training set (BN family, PN)",
        "rel_error": "gen_error / theory - 1 (fraction)",
        "convention": ("string",
                       "the ridge of `theory`: `loss` (lam = alpha zeta) or `paper` (lam = "
                       "zeta); empty when `theory` is no ridge"),
        "zeta_main": "zeta = 1/(2M) of Luo Fig. 1a's printed BN curve (sigma_B arms)",
        "theory_main": "Luo Fig. 1a's printed BN curve: WN + gamma decay at 1/(2M), lam = "
        "zeta (Luo's own claim for its BN student)",
        "rel_error_main": "gen_error / theory_main - 1 (fraction)",
        "erm_sgd": "error of the minimum-norm least-squares fit to this training "
        "set (linear student, `erm`)",
        "erm_theory": "error of the exact minimizer of `theory`'s objective on this "
        "training set",
        "erm_shrinkage": "error of least squares shrunk by 1 / (1 + zeta) on this training set",
    }
}
