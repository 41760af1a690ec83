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


# -- Luo §5 across experiments ------------------------------------------------------------------

def _luo5_config(measures=None, scaled=True):
    t = {"lr": 0.05, "momentum": 0.9, "steps": 10}
    ref = {"lr_reference_batch": 128} if scaled else {}
    cfg = {"generalization": {"bn_statistics": "running"},
           "models": {"r": {"arch": "resnet18", "width": 4},
                      "rd": {"arch": "resnet18", "width": 4, "dropout": 0.1},
                      "c": {"arch": "cnn"}},
           "trainings": {"m128": {**t, **ref, "batch_size": 128},
                         "m1024": {**t, **ref, "batch_size": 1024}},
           "experiments": {"r128": {"dataset": "d", "model": "r", "training": "m128"},
                           "c128": {"dataset": "d", "model": "c", "training": "m128"}}}
    for e in cfg["experiments"].values():
        e.update(norms=["batchnorm"], seeds=[0, 1])
        if measures is not None:
            e["measures"] = measures
    return cfg


def test_batch_regularization_needs_two_settings_of_one_architecture():
    from bnstudy.plots import batch_regularization as br

    cfg = _luo5_config()
    assert not br.compared(cfg)  # two architectures at one batch size each
    cfg["experiments"]["r1024"] = {**cfg["experiments"]["r128"], "training": "m1024"}
    assert br.compared(cfg)
    drop = _luo5_config()
    drop["experiments"]["r128d"] = {**drop["experiments"]["r128"], "model": "rd"}
    assert br.compared(drop)  # the same batch size, with and without dropout
    unscaled = _luo5_config(scaled=False)
    unscaled["experiments"]["r1024"] = {**unscaled["experiments"]["r128"], "training": "m1024"}
    assert not br.compared(unscaled)  # lr not scaled with the batch: not Luo's protocol
    other = _luo5_config(measures=["ics"])
    other["experiments"]["r1024"] = {**other["experiments"]["r128"], "training": "m1024"}
    assert not br.compared(other)  # no generalization measured
    no_section = {k: v for k, v in cfg.items() if k != "generalization"}
    assert not br.compared(no_section)


def test_batch_regularization_draws_the_compared_arms_only():
    from bnstudy import plots
    from bnstudy.plots import batch_regularization as br

    rows, hist = [], []
    arms = [("r128", "batchnorm", "resnet18", 128, 0.0), ("r128", "population_norm", "resnet18",
                                                          128, 0.0),
            ("r1024", "batchnorm", "resnet18", 1024, 0.0),
            ("r1024d", "batchnorm", "resnet18", 1024, 0.1), ("c128", "batchnorm", "cnn", 128, 0.0)]
    for i, (exp, norm, arch, bs, drop) in enumerate(arms):
        for seed in (0, 1, 2):
            ids = {"experiment": exp, "dataset": "d", "model": arch, "norm": norm, "seed": seed}
            rows.append({**ids, "step": 100, "test_loss": 0.2 + 0.05 * i + 0.01 * seed,
                         "gamma_sq": 1.0 + i, "arch": arch, "train_batch_size": bs,
                         "dropout": drop, "lr_batch_scaled": True})
            hist += [{**ids, "step": s, "split": sp, "loss": 1.0 / (1 + s)}
                     for s in (0, 50, 100) for sp in ("train", "test")]
    gen, train = pd.DataFrame(rows), pd.DataFrame(hist)
    runs = br.arms(gen)
    assert set(runs["experiment"]) == {"r128", "r1024", "r1024d"}  # the cnn has one setting
    assert list(dict.fromkeys(runs["arm"])) == [
        "batchnorm, M=128", "population_norm, M=128", "batchnorm, M=1024",
        "batchnorm, M=1024, dropout 0.1"]
    curves = br._curves(train, runs)
    assert set(curves["split"]) == {"train", "test"}  # the generalization gap (Luo Fig. 2)
    assert curves.loc[curves["experiment"] == "r1024", "samples"].max() == pytest.approx(102.4)
    fig = plots.FAMILIES["batch_regularization"].draw([gen, train], {})
    assert len(fig.axes) == 3
    styles = {ln.get_linestyle() for ln in fig.axes[0].get_lines() if len(ln.get_xdata()) > 1}
    assert len(styles) == 2, styles  # train and test drawn apart
    # a study's sweep axes are columns of every table: luo.yaml sweeps an axis named `arm`
    swept = [gen.assign(arm="gd"), train.assign(arm="gd", train_batch_size=0)]
    fig = plots.FAMILIES["batch_regularization"].draw(swept, {})
    assert len(fig.axes) == 3
    text = br.findings({"generalization": gen})
    assert "d / resnet18: batchnorm, M=128: test loss 0.21 [" in text and "cnn" not in text
    assert br.findings({"generalization": gen[gen["arch"] == "cnn"]}) == ""
    with pytest.raises(ValueError, match="two or more batch-size/dropout settings"):
        plots.FAMILIES["batch_regularization"].draw([gen[gen["arch"] == "cnn"], train], {})


def _sweep_table():
    """A training table of three learning rates, 12 seeds at 1e-2 and 3 at the others."""
    rows = []
    for lr, seeds in ((1e-3, 3), (3e-3, 3), (1e-2, 12)):
        for norm in ("none", "batchnorm"):
            for seed in range(seeds):
                for split in ("train", "test"):
                    rows.append({"experiment": f"e{lr:g}", "dataset": "d", "model": "m",
                                 "norm": norm, "seed": seed, "lr": lr, "step": 10,
                                 "split": split, "loss": 0.5 + lr, "diverged": False})
    return pd.DataFrame(rows)


def test_lr_sweep_labels_every_learning_rate_and_states_seeds_per_point():
    import matplotlib

    matplotlib.use("Agg")
    from bnstudy import plots

    df = _sweep_table()
    fig = lr_sweep.draw([df], {})
    fig.canvas.draw()
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert labels == ["0.001", "0.003", "0.01"], labels
    note = plots.seeds_note([df], plots.FAMILIES["lr_sweep"].seeds_by)
    assert note == ("seeds per arm: lr 0.001: 3 each (none, batchnorm); lr 0.003: 3 each "
                    "(none, batchnorm); lr 0.01: 12 each (none, batchnorm)"), note
    assert plots.seeds_note([df]) == "seeds per arm: 12 each (none, batchnorm)"  # the old one


def _maps_table():
    """A partition-density map table: 2 normalizers, init and final, four layer groups on a
    6 x 6 grid, and 8 data points."""
    rng = np.random.default_rng(0)
    rows = []
    for norm in ("none", "batchnorm"):
        for step in (0, 20):
            for k, group in enumerate(("first", "middle", "last", "all")):
                for x0 in np.linspace(-1, 1, 6):
                    for x1 in np.linspace(-1, 1, 6):
                        rows.append({"norm": norm, "step": step, "group": group,
                                     "layer_index": k + 1,
                                     "x0": x0, "x1": x1, "boundaries": float(rng.integers(0, 9)),
                                     "radius": 0.03, "label": pd.NA})
            for i in range(8):
                rows.append({"norm": norm, "step": step, "group": "data", "layer_index": 0,
                             "x0": rng.uniform(-1, 1), "x1": rng.uniform(-1, 1),
                             "boundaries": np.nan, "radius": 0.03, "label": i % 2})
    df = pd.DataFrame(rows)
    df["label"] = df["label"].astype("Int64")
    return df.assign(experiment="star", dataset="star2d", model="mlp", seed=0, diverged=False)


def test_the_seeds_note_never_overprints_a_colour_bar_label():
    """The partition-density maps' footer sat on the fourth colour bar's label (a horizontal bar
    at the bottom of a constrained layout, whose label reaches below the figure's edge): the
    note now goes below every drawn artist."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bnstudy import plots

    plots.load_all()
    plots.style({"dpi": 60})
    df = _maps_table()
    fig = plots.get("partition_density_maps").draw([df], {"dpi": 60})
    note, _ = plots.place_note(fig, plots.seeds_note([df]))
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = note.get_window_extent(renderer)
    bars = [a for a in fig.axes if a.get_label() == "<colorbar>"]
    assert len(bars) == 4
    for cax in bars:
        assert box.y1 <= cax.get_tightbbox(renderer).y0 + 1e-6
        assert not box.overlaps(cax.xaxis.label.get_window_extent(renderer))
    plt.close(fig)
