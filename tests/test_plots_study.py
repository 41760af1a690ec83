"""Study-wide figures are scheduled only when the study gives them something to show."""

import numpy as np
import pandas as pd
import pytest

from bnstudy.plots import lr_sweep
from bnstudy.plots import teacher_student as pts


def _config(lrs=(0.1,), batch_sizes=(32,), kind="teacher_student"):
    trainings = {f"t{i}_{j}": {"lr": lr, "batch_size": b}
                 for i, lr in enumerate(lrs) for j, b in enumerate(batch_sizes)}
    experiments = {f"e_{t}": {"dataset": "d", "model": "m", "training": t,
                              "norms": ["batchnorm"], "seeds": [0]} for t in trainings}
    return {"datasets": {"d": {"kind": kind, "options": {"alpha": 2.0, "N": 100}}},
            "trainings": trainings, "experiments": experiments}


def test_lr_sweep_needs_two_learning_rates_for_one_normalizer():
    assert not lr_sweep.swept(_config(lrs=(0.1,)))
    assert lr_sweep.swept(_config(lrs=(0.1, 0.5)))
    cfg = _config(lrs=(0.1, 0.5))
    cfg["experiments"]["e_t1_0"]["norms"] = ["none"]  # two lrs, but for different normalizers
    assert not lr_sweep.swept(cfg)


def test_batch_size_figure_needs_a_teacher_student_sweep():
    assert not pts.batch_swept(_config(batch_sizes=(32,)))
    assert pts.batch_swept(_config(batch_sizes=(16, 128)))
    assert not pts.batch_swept(_config(batch_sizes=(16, 128), kind="star2d"))
    assert not pts.batch_swept(_config(batch_sizes=("full", 32)))


def _history(runs):
    rows = []
    for ds, norm, lr, seed, loss, diverged in runs:
        for step in (0, 10):
            rows.append({"experiment": f"{ds}{lr}", "dataset": ds, "model": "m", "norm": norm,
                         "seed": seed, "step": step, "split": "train", "lr": lr,
                         "loss": loss if step == 10 else 9.0, "diverged": diverged})
    return pd.DataFrame(rows)


def test_lr_sweep_draws_only_swept_panels_and_marks_divergence():
    h = _history([("a", "none", 0.1, 0, 0.5, False), ("a", "none", 1.0, 0, np.nan, True),
                  ("a", "batchnorm", 0.1, 0, 0.4, False), ("a", "batchnorm", 1.0, 0, 0.2, False),
                  ("b", "none", 0.1, 0, 0.3, False)])  # b: one lr, no panel
    runs = lr_sweep.final_losses(h)
    assert runs.loc[runs["diverged"], "final_train_loss"].tolist() == [np.inf]
    fig = lr_sweep.draw([h], {})
    assert [ax.get_title() for ax in fig.axes if ax.get_title()] == ["a / m"]
    text = lr_sweep.findings({"training": h})
    assert "a/m none: trained at 1 of 2 learning rates (largest without divergence: 0.1)" in text
    assert "a/m batchnorm: trained at 2 of 2" in text
    with pytest.raises(ValueError, match="two or more learning rates"):
        lr_sweep.draw([h[h["dataset"] == "b"]], {})
