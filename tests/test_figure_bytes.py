"""Every figure is byte-stable for the same tables (issue 50, item 5).

``generalization_gap.png`` (and ``batch_regularization``) differed on every run from identical
tables: seaborn's strip plots jitter their dots from NumPy's global generator, which nothing
seeded. :func:`bnstudy.plots._drawn` now draws every family with that generator seeded, and puts
the caller's state back.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bnstudy import io, plots


def _generalization() -> pd.DataFrame:
    rng = np.random.default_rng(1)
    rows = []
    for norm in ("none", "batchnorm"):
        for seed in range(6):
            tr, te = rng.uniform(0, 0.1), rng.uniform(0.1, 0.3)
            rows.append({"experiment": "e", "dataset": "d", "model": "m", "norm": norm,
                         "seed": seed, "step": 100, "train_loss": tr, "test_loss": te,
                         "loss_gap": te - tr, "train_accuracy": 1.0, "test_accuracy": 0.9,
                         "accuracy_gap": 0.1})
    return pd.DataFrame(rows)


def test_two_renders_of_a_strip_plot_are_byte_identical(tmp_path):
    table = tmp_path / "generalization.parquet"
    io.write_table(_generalization(), table, {})
    opts = {"dpi": 40, "formats": ["pdf", "svg"]}
    raw = []
    for k in range(2):
        np.random.seed(1000 + k)  # whatever the global generator held before
        out = tmp_path / f"r{k}" / "generalization_gap.png"
        plots.render("generalization_gap", [str(table)], str(out), opts, experiment="e")
        raw.append([open(f, "rb").read() for f in plots.export_paths(str(out), opts)])
    assert raw[0][0][:4] == b"\x89PNG"
    assert raw[0] == raw[1]


def test_the_callers_generator_is_left_as_it_was(tmp_path):
    table = tmp_path / "generalization.parquet"
    io.write_table(_generalization(), table, {})
    np.random.seed(7)
    expected = np.random.get_state()[1].copy()
    plots.render("generalization_gap", [str(table)], str(tmp_path / "g.png"), {"dpi": 30},
                 experiment="e")
    assert (np.random.get_state()[1] == expected).all()


def test_the_saved_box_measured_once_equals_savefigs_tight_box(tmp_path):
    """:func:`bnstudy.plots._save` passes the box :func:`bnstudy.plots.place_note` measured
    instead of ``bbox_inches="tight"`` (which lays the figure out twice more): the same pixels,
    for a tight-layout figure with an outside legend and for a constrained one with a colour
    bar labelled below its edge."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from PIL import Image

    plots.style({"dpi": 60})
    for constrained in (False, True):
        fig, axes = plt.subplots(1, 2, figsize=(6, 3), layout="constrained" if constrained
                                 else None)
        axes[0].plot([1, 10, 100], [3, 1, 2], label="batchnorm")
        axes[0].set_xscale("log")
        axes[0].legend(loc="upper left", bbox_to_anchor=(1.02, 1))
        image = axes[1].imshow(np.arange(12.0).reshape(3, 4))
        bar = fig.colorbar(image, ax=axes[1], orientation="horizontal")
        bar.set_label("a label that reaches below")
        plots.finish(fig)
        _, box = plots.place_note(fig, "seeds per arm: none 3, batchnorm 3")
        pad = plt.rcParams["savefig.pad_inches"]
        measured = tmp_path / f"measured{constrained}.png"
        fig.savefig(measured, dpi=60, bbox_inches=box.padded(pad, pad))
        tight = tmp_path / f"tight{constrained}.png"
        fig.savefig(tight, dpi=60, bbox_inches="tight")
        plt.close(fig)
        a, b = Image.open(measured), Image.open(tight)
        assert a.size == b.size, constrained
        assert np.array_equal(np.asarray(a), np.asarray(b)), constrained
