"""Figure style (issue 12): labels in words, legends outside the data, colour-blind-safe class
colours, shared colour scales with a colour bar on density maps, readable step ticks, one width.

Synthetic tables with the real tables' columns; every figure is drawn by its family's draw
function, as ``plots.render`` does.
"""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.image import AxesImage  # noqa: E402

from bnstudy import io, plots  # noqa: E402

IDS = {"experiment": "e", "dataset": "star2d", "model": "m"}
NORMS = ("none", "batchnorm")
SEEDS = (0, 1)
STEPS = (0, 1, 2, 5, 10, 50, 100, 200, 500, 1000)  # 500 and 1000 collided on symlog axes


def _runs():
    for norm in NORMS:
        for seed in SEEDS:
            yield {**IDS, "norm": norm, "seed": seed}


def _training():
    rng = np.random.default_rng(0)
    return pd.DataFrame([{**r, "step": s, "split": split, "diverged": False,
                          "loss": 1.0 / (1 + s) + rng.uniform(0, 0.1),
                          "accuracy": rng.uniform(0.5, 1)}
                         for r in _runs() for s in STEPS for split in ("train", "test")])


def _generalization():
    rng = np.random.default_rng(1)
    rows = []
    for r in _runs():
        tr, te = rng.uniform(0, 0.1), rng.uniform(0.1, 0.3)
        rows.append({**r, "step": 1000, "train_loss": tr, "test_loss": te, "loss_gap": te - tr,
                     "train_accuracy": 1.0, "test_accuracy": 0.9, "accuracy_gap": 0.1})
    return pd.DataFrame(rows)


def _partition_density():
    rng = np.random.default_rng(2)
    rows = []
    for r in _runs():
        for s in STEPS:
            for ps in ("train", "test", "random"):
                for radius in (0.01, 0.1):
                    for layer, idx in (("all", 0), ("1", 1), ("2", 2)):
                        rows.append({**r, "step": s, "layer": layer, "layer_index": idx,
                                     "point_set": ps, "radius": radius,
                                     "effective_radius": radius, "method": "distance",
                                     "boundaries": rng.uniform(1, 10), "fraction": rng.uniform(),
                                     "neurons": 16, "bn_statistics": "train_set",
                                     "applicable": True})
    return pd.DataFrame(rows)


def _maps():
    rng = np.random.default_rng(3)
    xs = np.linspace(-1, 1, 5)
    rows = []
    for r in _runs():
        for s in (0, 1000):
            for g, idx, top in (("first", 1, 4.0), ("last", 2, 40.0), ("all", 0, 80.0)):
                scale = top if r["norm"] == "none" else top / 4  # panels of a column differ
                rows += [{**r, "step": s, "group": g, "layer_index": idx, "x0": x0, "x1": x1,
                          "boundaries": rng.uniform(0, scale), "radius": 0.03,
                          "effective_radius": 0.03, "method": "distance", "label": np.nan}
                         for x0 in xs for x1 in xs]
        rows += [{**r, "step": 0, "group": "data", "layer_index": 0, "x0": rng.normal(),
                  "x1": rng.normal(), "boundaries": np.nan, "radius": 0.03,
                  "effective_radius": 0.03, "method": "distance", "label": float(k % 2)}
                 for k in range(10)]
    return pd.DataFrame(rows)


def _smoothness():
    rng = np.random.default_rng(4)
    return pd.DataFrame([{**r, "step": s, "loss": 1 / (1 + s), "loss_min": 0.5 / (1 + s),
                          "loss_max": 2 / (1 + s), "grad_pred_max": rng.uniform(0.1, 1),
                          "beta_eff": rng.uniform(1, 10), "hessian_top": rng.uniform(1, 5)}
                         for r in _runs() for s in STEPS])


def _ics():
    rng = np.random.default_rng(5)
    rows = []
    for r in _runs():
        for s in STEPS:
            for layer in (1, 2, 3):
                rows.append({**r, "step": s, "layer": layer, "layer_name": f"block{layer}",
                             "grad_l2_diff": rng.uniform(0.01, 1),
                             "grad_rel_diff": rng.uniform(0.01, 1),
                             "grad_cosine": rng.uniform(0.5, 1),
                             "step_mean_shift": rng.uniform(), "mean_shift": rng.uniform(),
                             "step_var_shift": rng.uniform(), "var_shift": rng.uniform()})
    return pd.DataFrame(rows)


def _ics_activations():
    rng = np.random.default_rng(7)
    rows = []
    for r in _runs():
        for s in STEPS:
            for layer in (1, 2, 3):
                centre = rng.normal()
                rows += [{**r, "step": s, "layer_index": layer, "layer_name": f"block{layer}",
                          "units": 16, "unit": 4, "quantile": q, "value": centre + q,
                          "samples_per_stat": 32, "probe_size": 32}
                         for q in (0.05, 0.25, 0.5, 0.75, 0.95)]
    return pd.DataFrame(rows)


def _jitter():
    rng = np.random.default_rng(6)
    xs = np.linspace(-1, 1, 6)
    grid, summary = [], []
    for r in _runs():
        if r["norm"] != "batchnorm":
            continue
        for s in (0, 1000):
            for b in (8, 64):
                base = {**r, "step": s, "batch_size": b, "label": np.nan}
                grid += [{**base, "kind": "disagreement", "realization": -1, "x0": a, "x1": c,
                          "value": rng.uniform(0, 0.5)} for a in xs for c in xs]
                grid += [{**base, "kind": "realization", "realization": k, "x0": a, "x1": c,
                          "value": float(a + 0.1 * k > 0)} for k in range(2) for a in xs
                         for c in xs]
                grid += [{**base, "kind": "population", "realization": -1, "x0": a, "x1": c,
                          "value": float(a > 0)} for a in xs for c in xs]
                summary.append({**r, "step": s, "batch_size": b, "layer": "boundary",
                                "band_fraction": 0.2, "margin_mean": 0.1,
                                "margin_population": 0.1})
        grid += [{**r, "step": 0, "batch_size": 8, "kind": "data", "realization": -1,
                  "x0": rng.normal(), "x1": rng.normal(), "value": np.nan,
                  "label": float(k % 2)} for k in range(10)]
    return pd.DataFrame(grid), pd.DataFrame(summary)


def _figures():
    tr, ge, pd_, mp, sm, ic = (_training(), _generalization(), _partition_density(), _maps(),
                               _smoothness(), _ics())
    jit, jsum = _jitter()
    return {"training_curves": [tr], "generalization_gap": [ge],
            "partition_density_steps": [pd_], "partition_density_sets": [pd_],
            "partition_density_layers": [pd_], "partition_density_maps": [mp],
            "smoothness_landscape": [sm], "ics_gradient": [ic], "ics_depth": [ic],
            "ics_distribution": [ic], "ics_activations": [_ics_activations()],
            "bn_jitter_boundaries": [jit, jsum]}


FRAMES = _figures()


@pytest.fixture(scope="module", params=sorted(FRAMES))
def drawn(request):
    """Each family's figure, drawn once for the module's tests (they only read it; the module
    runs on one worker: tests/conftest.py ONE_WORKER)."""
    plots.style({})
    frames = FRAMES[request.param]
    fig = plots.get(request.param).draw(frames, {})
    fig.canvas.draw()
    yield request.param, frames, fig
    plt.close(fig)


def test_axis_labels_are_words_not_column_names(drawn):
    name, frames, fig = drawn
    columns = {c for f in frames for c in f.columns if "_" in c}
    for ax in fig.axes:
        for text in (ax.get_xlabel(), ax.get_ylabel()):
            assert text not in columns, (name, text)
            assert not (text and " " not in text and "_" in text), (name, text)


def test_label_maps_columns_to_words():
    assert plots.label("grad_rel_diff") != "grad_rel_diff"
    assert plots.label("step") == "training step"
    assert "_" not in plots.label("some_new_column")


def _overlaps(a, b) -> bool:
    return a.x0 < b.x1 - 1 and b.x0 < a.x1 - 1 and a.y0 < b.y1 - 1 and b.y0 < a.y1 - 1


def test_legends_lie_outside_the_data_area(drawn):
    name, _, fig = drawn
    renderer = fig.canvas.get_renderer()
    data_axes = [a for a in fig.axes if a.get_visible() and a.axison and a.has_data()]
    legends = 0
    for ax in fig.axes:
        leg = ax.get_legend()
        if leg is not None:
            legends += 1
            box = leg.get_window_extent(renderer)
            for other in data_axes:
                assert not _overlaps(box, other.get_window_extent(renderer)), (name, ax.title)
    for leg in fig.legends:
        legends += 1
        box = leg.get_window_extent(renderer)
        for other in data_axes:
            assert not _overlaps(box, other.get_window_extent(renderer)), name
    if name not in ("partition_density_maps", "generalization_gap"):
        assert legends >= 1, name  # the figures with hues have a legend to check


def test_every_figure_is_full_width(drawn):
    name, _, fig = drawn
    assert fig.get_figwidth() == pytest.approx(plots.FULL_WIDTH), name


def test_step_tick_labels_do_not_collide(drawn):
    name, _, fig = drawn
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        if ax.get_xscale() != "symlog":
            continue
        lo, hi = ax.get_xlim()
        ticks = [t for t in ax.xaxis.get_major_ticks() if lo <= t.get_loc() <= hi
                 and t.label1.get_visible() and t.label1.get_text()]
        if not ticks:
            continue  # shared axis: labels only under the bottom row
        boxes = sorted((t.label1.get_window_extent(renderer) for t in ticks), key=lambda b: b.x0)
        assert len(boxes) >= 2, name
        for a, b in zip(boxes, boxes[1:], strict=False):
            assert a.x1 <= b.x0, (name, [t.label1.get_text() for t in ticks])


RED_GREEN = {"RdYlGn", "RdYlGn_r", "RdGn", "PiYG", "PRGn", "brg", "hsv", "jet"}


def test_class_colours_are_colour_blind_safe(drawn):
    name, _, fig = drawn
    for ax in fig.axes:
        for coll in ax.collections:
            if coll.get_array() is not None and hasattr(coll, "get_offsets"):
                assert coll.get_cmap().name not in RED_GREEN, (name, coll.get_cmap().name)
    for ax in fig.axes:
        for im in ax.images:
            assert im.get_cmap().name not in RED_GREEN, name


@pytest.mark.parametrize("name", ["partition_density_maps", "bn_jitter_boundaries"])
def test_density_maps_share_a_colour_scale_with_a_colour_bar(name):
    fig = plots.get(name).draw(FRAMES[name], {})
    bars = [a for a in fig.axes if getattr(a, "_colorbar", None) is not None]
    assert bars, "no colour bar"
    panels = [a for a in fig.axes if a not in bars and a.images]
    columns: dict[float, set] = {}
    for ax in panels:
        im = next(i for i in ax.get_children() if isinstance(i, AxesImage))
        x = round(ax.get_position().x0, 3)
        columns.setdefault(x, set()).add((im.norm.vmin, im.norm.vmax))
    assert len(columns) >= 2
    for scales in columns.values():
        assert len(scales) == 1, scales  # one scale per column of compared panels
    plt.close(fig)


def test_a_paper_width_scales_every_figure(tmp_path):
    """``plots.width``: the figures of a paper's text width, heights scaled alike."""
    name = "training_curves"
    try:
        plots.style({"width": 6.75, "context": "paper"})
        fig = plots.get(name).draw(FRAMES[name], {})
        narrow = fig.get_size_inches()
        plt.close(fig)
        plots.style({})
        fig = plots.get(name).draw(FRAMES[name], {})
        full = fig.get_size_inches()
        plt.close(fig)
    finally:
        plots.style({})
    assert narrow[0] == pytest.approx(6.75) and full[0] == pytest.approx(plots.FULL_WIDTH)
    assert narrow[1] / narrow[0] == pytest.approx(full[1] / full[0])
    with pytest.raises(ValueError, match="width"):
        plots.style({"width": 100})


def test_vector_copies_beside_each_png_are_deterministic(tmp_path):
    """``plots.formats``: PDF and SVG copies beside the PNG, written by the same call, with no
    creation date (the same table gives the same bytes)."""
    table = tmp_path / "training.parquet"
    io.write_table(_training(), table, {})
    opts = {"formats": ["pdf", "svg"], "dpi": 40}
    digests = []
    for k in range(2):
        out = tmp_path / f"r{k}" / "training_curves.png"
        out.parent.mkdir()
        plots.render_all("training_curves", [str(table)], {"e": str(out)}, opts)
        files = plots.export_paths(str(out), opts)
        assert [f.rsplit(".", 1)[1] for f in files] == ["png", "pdf", "svg"]
        raw = [open(f, "rb").read() for f in files]
        assert raw[0][:4] == b"\x89PNG" and raw[1][:5] == b"%PDF-" and b"<svg" in raw[2]
        digests.append(raw)
    assert digests[0] == digests[1]
    assert plots.export_paths("a/b.png", {}) == ["a/b.png"]


def test_figures_are_palette_pngs_a_third_the_size(tmp_path):
    """The report embeds every figure: each PNG is a 256-colour palette image (a third of the
    bytes of true colour), the same bytes for the same table."""
    from PIL import Image

    table = tmp_path / "training.parquet"
    io.write_table(_training(), table, {})
    out = tmp_path / "training_curves.png"
    plots.render_all("training_curves", [str(table)], {"e": str(out)}, {"dpi": 60})
    image = Image.open(out)
    assert image.mode == "P" and len(image.getcolors(256) or []) <= 256
    first = out.read_bytes()
    plots.render_all("training_curves", [str(table)], {"e": str(out)}, {"dpi": 60})
    assert out.read_bytes() == first
