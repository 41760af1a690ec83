"""One colour per normalizer everywhere (issue 23): a normalizer's colour does not depend on
which other normalizers a study or a figure shows, each shipped study's normalizers are told
apart by colour, and every registered normalizer by colour and marker together."""

import matplotlib

matplotlib.use("Agg")

from pathlib import Path  # noqa: E402

import matplotlib.colors as mcolors  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from bnstudy import plots
from bnstudy.config import study  # noqa: E402
from bnstudy.networks import normalizers  # noqa: E402
from bnstudy.plots import colors  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
STUDIES = sorted([ROOT / "config" / "config.yaml", *(ROOT / "config" / "studies").glob("*.yaml")])


def test_every_registered_normalizer_has_a_unique_colour_and_marker():
    pairs = {n: (colors.norm_color(n), colors.norm_marker(n)) for n in normalizers.names()}
    assert len(set(pairs.values())) == len(pairs), pairs


def test_a_normalizer_outside_the_table_never_takes_a_shipped_ones_pair():
    """A new normalizer needs no entry in the colour table (its module and its test only)."""
    fixed = set(colors.NORMS.values())
    names = [f"my_norm_{i}" for i in range(200)]
    pairs = [(colors.norm_color(n), colors.norm_marker(n)) for n in names]
    assert not fixed & set(pairs)
    assert len(set(pairs)) > 40  # spread over the free pairs
    assert pairs == [(colors.norm_color(n), colors.norm_marker(n)) for n in names]  # stable


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.stem)
def test_each_shipped_study_shows_its_normalizers_in_distinct_colours(path):
    cfg = study.load([str(path)])
    norms = sorted({n for e in cfg["experiments"].values() for n in e["norms"]})
    cols = [colors.norm_color(n) for n in norms]
    assert len(set(cols)) == len(cols), dict(zip(norms, cols, strict=True))


def test_ten_colours_and_black_are_distinct_and_unknown_names_are_stable():
    rgb = [mcolors.to_rgb(c) for c in (*colors.CB, colors.BLACK)]
    d = min(np.linalg.norm(np.subtract(a, b)) for i, a in enumerate(rgb) for b in rgb[i + 1:])
    assert d > 0.15
    assert colors.norm_color("my_new_norm") == colors.norm_color("my_new_norm")
    assert colors.norm_color("my_new_norm") in colors.NEW


def test_a_new_normalizers_colour_is_its_own():
    """Issue 33: a normalizer outside the table took a shipped one's colour with another marker
    (rmsnorm hashed to zero_bias's grey); now its hue is apart from every shipped normalizer's
    and every non-normalizer hue, and the shipped colours are as before."""
    shipped = [mcolors.to_rgb(c) for c, _ in colors.NORMS.values()]
    others = [mcolors.to_rgb(c) for c in colors.OTHER]
    for name in ("rmsnorm", "rms_norm", *(f"my_norm_{i}" for i in range(100))):
        rgb = mcolors.to_rgb(colors.norm_color(name))
        d = min(np.linalg.norm(np.subtract(rgb, c)) for c in shipped + others)
        assert d >= 0.2, (name, colors.norm_color(name))
    new = [mcolors.to_rgb(c) for c in colors.NEW]
    assert min(np.linalg.norm(np.subtract(a, b)) for i, a in enumerate(new)
               for b in new[i + 1:]) >= 0.2
    assert colors.norm_color("batchnorm") == "#0173b2" and colors.norm_color("none") == "#000000"
    assert colors.norm_color("zero_bias") == "#949494" and colors.norm_marker("l2norm") == "s"


def _training(norms):
    return pd.DataFrame([{"experiment": "e", "dataset": "star2d", "model": "m", "norm": n,
                          "seed": s, "step": st, "split": sp, "diverged": False,
                          "loss": 1.0 / (1 + st) + s * 0.01, "accuracy": 0.5}
                         for n in norms for s in (0, 1) for st in (0, 1, 10)
                         for sp in ("train", "test")])


def _line_colours(norms) -> dict[str, str]:
    plots.style({})
    fig = plots.get("training_curves").draw([_training(norms)], {})
    fig.canvas.draw()
    out = {}
    for ax in fig.axes:
        leg = ax.get_legend()
        if leg is None:
            continue
        for text, handle in zip(leg.get_texts(), leg.legend_handles, strict=False):
            if text.get_text() in norms:
                out[text.get_text()] = mcolors.to_hex(handle.get_color())
    plt.close(fig)
    return out


def test_batchnorm_keeps_its_colour_between_two_studies_figures():
    a = _line_colours(["none", "batchnorm", "layernorm"])
    b = _line_colours(["batchnorm", "zero_bias", "random_bias", "bn_init"])
    assert a["batchnorm"] == b["batchnorm"] == colors.norm_color("batchnorm")
    assert a["none"] == colors.norm_color("none")
