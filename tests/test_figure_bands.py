"""Figures draw the tables' interval (Student-t over seeds), deterministically."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import seaborn as sns  # noqa: E402
from scipy import stats  # noqa: E402

from bnstudy import io, plots  # noqa: E402


def _training(seeds=3):
    rng = np.random.default_rng(0)
    rows = []
    for norm in ("none", "batchnorm"):
        for seed in range(seeds):
            for step in (0, 10, 20):
                for split in ("train", "test"):
                    rows.append({"experiment": "e", "dataset": "d", "model": "m", "norm": norm,
                                 "seed": seed, "step": step, "split": split,
                                 # a loss is never negative (bnstudy.tables.ranges)
                                 "loss": float(abs(1.0 / (1 + step) + rng.normal(0, 0.1))),
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
    io.write_table(_training(), table, {})
    out = [tmp_path / "a.png", tmp_path / "b.png"]
    for o in out:
        plots.render("training_curves", [str(table)], str(o), {"dpi": 60}, experiment="e")
    assert out[0].read_bytes() == out[1].read_bytes()


def test_captions_name_the_interval():
    plots.load_all()
    for name, fam in plots.FAMILIES.items():
        if "95%" in fam.caption:
            assert "Student-t" in fam.caption, name


def _ics(cos, l2):
    """Three seeds whose arithmetic Student-t intervals leave the quantity's range."""
    rows = []
    for norm in ("none", "batchnorm"):
        for seed in range(3):
            for step in (0, 10, 100):
                for layer in (1, 2, 3):
                    rows.append({"experiment": "e", "dataset": "d", "model": "m",
                                 "norm": norm, "seed": seed, "step": step, "layer": str(layer),
                                 "layer_index": layer, "layer_name": f"l{layer}",
                                 "grad_l2_diff": l2[seed] * (1 + layer),
                                 "grad_rel_diff": l2[seed], "grad_cosine": cos[seed],
                                 "mean_shift": l2[seed], "var_shift": l2[seed],
                                 "step_mean_shift": l2[seed], "step_var_shift": l2[seed]})
    return pd.DataFrame(rows)


def test_bands_stay_in_the_quantitys_range():
    from bnstudy.plots import bands

    cos, l2 = [0.99, -0.2, 0.999], [1e-4, 1e-3, 1.0]  # t-intervals: cos below -1, l2 below 0
    assert plots.seed_ci(cos)[0] < -1 and plots.seed_ci(l2)[0] < 0  # the old bands
    lo, hi = bands.bounded_ci(-1, 1)(cos)
    assert -1 < lo < np.mean(cos) < hi < 1
    lo, hi = bands.log_ci(l2)
    assert 0 < lo < bands.geo_mean(l2) < hi
    assert bands.geo_mean(l2) == pytest.approx(np.exp(np.log(l2).mean()))

    plots.style({})
    fig = plots.get("ics_gradient").draw([_ics(cos, l2)], {})
    fig.canvas.draw()
    checked = 0
    for ax in fig.axes:
        for coll in ax.collections:
            for path in coll.get_paths():
                y = path.vertices[:, 1]
                if ax.get_yscale() == "log":
                    assert (y > 0).all()
                    checked += 1
                elif "cos" in ax.get_ylabel() or ax.get_ylim()[1] <= 1.5:
                    assert ((y >= -1) & (y <= 1)).all(), y
                    checked += 1
    plt.close(fig)
    assert checked > 0
