"""Figures draw the tables' interval (Student-t over seeds), deterministically."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import seaborn as sns  # noqa: E402
from scipy import stats  # noqa: E402

from bnstudy import plots  # noqa: E402


def _training(seeds=3):
    rng = np.random.default_rng(0)
    rows = []
    for norm in ("none", "batchnorm"):
        for seed in range(seeds):
            for step in (0, 10, 20):
                for split in ("train", "test"):
                    rows.append({"experiment": "e", "dataset": "d", "model": "m", "norm": norm,
                                 "seed": seed, "step": step, "split": split,
                                 "loss": float(1.0 / (1 + step) + rng.normal(0, 0.1)),
                                 "accuracy": float(rng.uniform(0.5, 1.0))})
    return pd.DataFrame(rows)


def test_band_is_the_student_t_interval_of_the_seeds():
    values = np.array([0.0445, 0.0714, 0.0585])
    lo, hi = plots.seed_ci(values)
    half = stats.t.ppf(0.975, 2) * values.std(ddof=1) / np.sqrt(3)
    assert (lo, hi) == pytest.approx((values.mean() - half, values.mean() + half))
    assert lo < values.min() and hi > values.max()  # with 3 seeds, wider than the seeds' range
    assert plots.seed_ci([2.0]) == (2.0, 2.0)

    df = pd.DataFrame({"x": [0, 0, 0, 1, 1, 1], "y": [*values, 1.0, 2.0, 4.0]})
    fig, ax = plt.subplots()
    sns.lineplot(df, x="x", y="y", errorbar=plots.seed_ci, ax=ax)
    band = ax.collections[0].get_paths()[0].vertices
    at0 = band[np.isclose(band[:, 0], 0), 1]
    plt.close(fig)
    assert (at0.min(), at0.max()) == pytest.approx((lo, hi))


def test_same_table_gives_byte_identical_png(tmp_path):
    table = tmp_path / "training.parquet"
    _training().to_parquet(table)
    out = [tmp_path / "a.png", tmp_path / "b.png"]
    for o in out:
        plots.render("training_curves", [str(table)], str(o), {"dpi": 60}, experiment="e")
    assert out[0].read_bytes() == out[1].read_bytes()


def test_captions_name_the_interval():
    plots.load_all()
    for name, fam in plots.FAMILIES.items():
        if "95%" in fam.caption:
            assert "Student-t" in fam.caption, name
