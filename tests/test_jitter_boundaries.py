"""Fig. 6's decision boundaries as lines: the boundary cells of the fine grid against boundaries
known analytically (a network whose only hidden unit is linear, BN frozen at given statistics;
a three-class linear classifier), the measure's rows end to end, and the figure's lines."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from scipy.spatial import cKDTree  # noqa: E402

from bnstudy import plots  # noqa: E402
from bnstudy.measures.jitter import Options  # noqa: E402
from bnstudy.measures.jitter import cells as bjc  # noqa: E402
from bnstudy.measures.jitter import compute as bj  # noqa: E402
from bnstudy.measures.jitter import maps as bjm  # noqa: E402
from bnstudy.measures.jitter import stats as bjs  # noqa: E402
from bnstudy.networks import models  # noqa: E402
from bnstudy.networks.norms.layers import set_mean_var  # noqa: E402
from bnstudy.plots import bn_jitter_lines as lines  # noqa: E402

W, GAMMA, BETA, EPS = np.array([0.8, -0.6]), 1.3, 0.2, 1e-5
Z_STAR = 0.2  # head: logit_1 - logit_0 = 1.5 z - 0.3, so class 1 where BN's output z > 0.2


def _linear_net() -> torch.nn.Module:
    """``head(BN(w . x))`` with one hidden unit and the identity activation: the decision
    boundary under BN statistics ``(mu, var)`` is the line ``w . x = h*(mu, var)``."""
    net = models.build_model({"arch": "mlp", "depth": 1, "width": 1, "slope": 1.0},
                             "batchnorm", (2,), 2)
    block = models.blocks(net)[0]
    with torch.no_grad():
        block.linear.weight.copy_(torch.tensor(W[None], dtype=torch.float32))
        block.norm.weight.fill_(GAMMA)
        block.norm.bias.fill_(BETA)
        net.head.weight.copy_(torch.tensor([[-0.5], [1.0]]))
        net.head.bias.copy_(torch.tensor([0.1, -0.2]))
    return net


def _offset(mu: float, var: float) -> float:
    """``h*``: the pre-BN value where BN's output is ``Z_STAR``."""
    return mu + (Z_STAR - BETA) * np.sqrt(var + EPS) / GAMMA


def _line_distance(pts: np.ndarray, offset: float) -> np.ndarray:
    return np.abs(pts @ W - offset) / np.linalg.norm(W)


def _assert_traces_line(centres: np.ndarray, offset: float, xs, ys) -> None:
    """Every cell within half a cell diagonal of the line ``w . x = offset``, and every point of
    the line inside the grid within half a diagonal of a cell (covered along its length)."""
    half = 0.5 * np.hypot(np.diff(xs).max(), np.diff(ys).max())
    assert len(centres) > 0
    assert _line_distance(centres, offset).max() <= half + 1e-5
    t = np.linspace(ys[0], ys[-1], 2000)  # the line as x0(x1): w0 x0 + w1 x1 = offset
    on = np.stack([(offset - W[1] * t) / W[0], t], axis=1)
    on = on[(on[:, 0] > xs[0]) & (on[:, 0] < xs[-1])]
    assert len(on) > 500  # the line crosses the grid
    gaps = np.linalg.norm(on[:, None, :] - centres[None, :, :], axis=2).min(1)
    assert gaps.max() <= half + 1e-5
    assert len(centres) <= len(xs) + len(ys)  # a line crosses one cell per grid line: small


def _cells_of(rows: list[dict], kind: str, realization: int = -1, **ids) -> np.ndarray:
    return np.array([[r["x0"], r["x1"]] for r in rows if r["kind"] == kind
                     and r["realization"] == realization
                     and all(r[k] == v for k, v in ids.items())]).reshape(-1, 2)


def test_boundary_cells_trace_the_line_of_bn_frozen_at_given_statistics(star):
    net = _linear_net().eval()
    population = (0.05, 0.7)
    set_mean_var(models.blocks(net)[0].norm, torch.tensor([population[0]]),
                 torch.tensor([population[1]]))
    state = {k: v.clone() for k, v in net.state_dict().items()}
    # realizations 0 and 2 share their statistics, 1 differs in mean and variance
    stats = [(0.3, 1.2), (-0.25, 0.4), (0.3, 1.2)]
    emp = [(torch.tensor([[m] for m, _ in stats], dtype=torch.float64),
            torch.tensor([[v] for _, v in stats], dtype=torch.float64))]
    opts = Options.parse({"realizations": 3, "map_realizations": 3, "grid_resolution": 16,
                          "map_resolution": 4, "boundary_resolution": 97})
    boundary = bjm.Boundary(net, star, opts)
    xs, ys = boundary.fine.xs, boundary.fine.ys
    assert len(xs) == len(ys) == 97
    _, rows = boundary.realize(emp)
    _assert_traces_line(_cells_of(rows, "population"), _offset(*population), xs, ys)
    cells = [_cells_of(rows, "realization", r) for r in range(3)]
    for c, s in zip(cells, stats, strict=True):
        _assert_traces_line(c, _offset(*s), xs, ys)
    np.testing.assert_array_equal(cells[0], cells[2])  # equal statistics: one boundary
    assert {tuple(p) for p in cells[0]} != {tuple(p) for p in cells[1]}
    assert all(np.isnan(r["value"]) and np.isnan(r["label"]) for r in rows
               if r["kind"] != "disagreement")
    # deterministic, and the model it was given is unchanged
    _, again = bjm.Boundary(net, star, opts).realize(emp)
    pd.testing.assert_frame_equal(pd.DataFrame(rows), pd.DataFrame(again))
    assert not net.training
    for k, v in net.state_dict().items():
        assert torch.equal(v, state[k]), k
    # no maps asked for: no fine-grid rows
    assert bjm.Boundary(net, star, opts).realize(emp, maps=False)[1] == []


def test_measure_rows_follow_each_batchs_statistics(star):
    """End to end: realization r's line is that of batch r's mean and variance of ``w . x``; a
    batch of the whole training set (without replacement) is the population: every
    realization's boundary is the population's."""
    net = _linear_net().train()
    state = {k: v.clone() for k, v in net.state_dict().items()}
    n = len(star.x_train)
    opts = {"batch_sizes": [8, n], "n_batches": 4, "realizations": 3, "map_realizations": 2,
            "grid_resolution": 12, "map_resolution": 4, "boundary_resolution": 81}
    rows = bj.measure(net, star, opts)["bn_jitter_boundary"]
    again = bj.measure(net, star, opts)["bn_jitter_boundary"]  # deterministic
    pd.testing.assert_frame_equal(pd.DataFrame(rows), pd.DataFrame(again))
    for k, v in net.state_dict().items():
        assert torch.equal(v, state[k]), k
    assert net.training
    grid = bjc.FineGrid(star, 81, 0.1, 65536)
    h = star.x_train.reshape(n, -1).astype(np.float64) @ W
    pop = _cells_of(rows, "population", batch_size=n)
    _assert_traces_line(pop, _offset(h.mean(), h.var()), grid.xs, grid.ys)
    for r in range(2):
        np.testing.assert_allclose(_cells_of(rows, "realization", r, batch_size=n), pop)
    batches = bjs.draw_batches(n, 8, 4, "without_replacement", 0, 0)
    small = [_cells_of(rows, "realization", r, batch_size=8) for r in range(2)]
    for r, c in enumerate(small):
        hb = h[batches[r].numpy()]
        _assert_traces_line(c, _offset(hb.mean(), hb.var()), grid.xs, grid.ys)
    assert {tuple(p) for p in small[0]} != {tuple(p) for p in small[1]}
    assert not [r for r in rows if r["kind"] == "realization" and r["realization"] >= 2]


def test_multiclass_cells_trace_every_pairwise_boundary():
    """A three-class linear classifier on a non-square grid: its boundary is three rays
    meeting at a point; the cells trace them (to half a diagonal) and cover them."""
    a = np.array([[1.0, 0.2], [-0.6, 0.9], [-0.3, -1.1]])
    b = np.array([0.1, 0.0, -0.15])
    xs, ys = np.linspace(-1.0, 1.4, 131), np.linspace(-0.8, 1.0, 83)
    g0, g1 = np.meshgrid(xs, ys)
    classes = np.argmax(np.stack([a[k, 0] * g0 + a[k, 1] * g1 + b[k] for k in range(3)]), 0)
    centres = bjc.boundary_cells(classes, xs, ys)
    # the boundary, sampled: points of each pairwise tie where the pair is on top
    t = np.linspace(-3, 3, 60001)
    samples = []
    for i, j in ((0, 1), (0, 2), (1, 2)):
        d, c = a[i] - a[j], b[i] - b[j]  # tie: d . x + c = 0
        n = d / np.linalg.norm(d)
        p = -c * d / (d @ d) + t[:, None] * np.array([-n[1], n[0]])
        logits = p @ a.T + b
        k = 3 - i - j
        keep = ((logits[:, i] >= logits[:, k]) & (p[:, 0] >= xs[0]) & (p[:, 0] <= xs[-1])
                & (p[:, 1] >= ys[0]) & (p[:, 1] <= ys[-1]))
        samples.append(p[keep])
    samples = np.concatenate(samples)
    assert len(samples) > 1000
    half = 0.5 * np.hypot(xs[1] - xs[0], ys[1] - ys[0])
    assert cKDTree(samples).query(centres)[0].max() <= half + 1e-4  # t's spacing: 1e-4
    assert cKDTree(centres).query(samples)[0].max() <= half + 1e-9
    with pytest.raises(ValueError, match=r"shape \(83, 130\).*\(83, 131\)"):
        bjc.boundary_cells(classes[:, 1:], xs, ys)


def test_boundary_resolution_option_is_checked():
    assert Options.parse({}).boundary_resolution == 200
    with pytest.raises(ValueError, match="boundary_resolution=1: need a value >= 2"):
        Options.parse({"boundary_resolution": 1})


def test_path_joins_a_digital_line_into_one_chain():
    """The cells a line crosses are joined as one chain: cells - 1 segments, no triangles on
    its staircase, and every vertex is a cell centre; the lattice is read off the cells."""
    xs, ys = np.linspace(-1, 1, 201), np.linspace(-0.5, 0.7, 151)
    g0, g1 = np.meshgrid(xs, ys)
    centres = bjc.boundary_cells((0.37 * g0 + g1 > 0.0123).astype(int), xs, ys)
    s0, s1 = lines.steps(pd.DataFrame(centres, columns=["x0", "x1"]))
    np.testing.assert_allclose((s0, s1), (xs[1] - xs[0], ys[1] - ys[0]), rtol=1e-9)
    px, py = lines.path(centres[:, 0], centres[:, 1], s0, s1)
    assert len(px) == 3 * (len(centres) - 1)
    assert np.isnan(px[2::3]).all()
    ends = np.stack([np.delete(px, np.s_[2::3]), np.delete(py, np.s_[2::3])], axis=1)
    assert cKDTree(centres).query(ends)[0].max() < 1e-9


def _synthetic(sizes=(8, 64), steps=(0, 500), r_count=3):
    """A boundary table as the measure writes it: coarse disagreement, fine boundary cells of
    lines (population, realizations shifted by |B|-dependent jitter), training points; and the
    boundary summaries."""
    xs = np.linspace(-1, 1, 121)
    g0, g1 = np.meshgrid(xs, xs)
    coarse = np.linspace(-1, 1, 9)
    ids = {"experiment": "e", "dataset": "star2d", "model": "m", "norm": "batchnorm",
           "seed": 0, "diverged": False}
    rows, summary = [], []
    for s in steps:
        for b in sizes:
            base = {**ids, "step": s, "batch_size": b}
            rows += [{**base, "kind": "disagreement", "realization": -1, "x0": u, "x1": v,
                      "value": 0.5 * np.exp(-abs(u - 0.3 * v) * 3), "label": 0.0}
                     for u in coarse for v in coarse]
            for kind, r, shift in [("population", -1, 0.0)] + [
                    ("realization", r, 0.4 * (r - 1) / np.sqrt(b)) for r in range(r_count)]:
                cls = (g0 - 0.3 * g1 > shift + 0.001).astype(int)
                rows += [{**base, **c} for c in bjc.rows(kind, r, bjc.boundary_cells(cls, xs, xs))]
            summary.append({**ids, "step": s, "batch_size": b, "layer": "boundary",
                            "band_fraction": 0.1, "margin_mean": 0.2, "margin_population": 0.2})
    rng = np.random.default_rng(0)
    rows += [{**ids, "step": steps[0], "batch_size": 0, "kind": "data", "realization": -1,
              "x0": p[0], "x1": p[1], "value": np.nan, "label": float(p[0] > 0.3 * p[1])}
             for p in rng.uniform(-0.9, 0.9, (40, 2))]
    return pd.DataFrame(rows), pd.DataFrame(summary)


def test_figure_draws_each_boundary_as_a_line(tmp_path):
    table, summary = _synthetic()
    plots.style({})
    fig = plots.get("bn_jitter_boundaries").draw([table, summary], {})
    panels = [ax for ax in fig.axes if ax.images]
    assert len(panels) == 4  # batch sizes in columns, checkpoints in rows
    assert len({round(ax.get_position().x0, 3) for ax in panels}) == 2
    assert "|B| = 8, step 0" in panels[0].get_title()
    assert "|B| = 64, step 0" in panels[1].get_title()
    assert "|B| = 8, step 500" in panels[2].get_title()
    for ax in panels:
        real = [ln for ln in ax.lines if ln.get_color() == lines.REALIZATION]
        pop = [ln for ln in ax.lines if ln.get_color() == lines.POPULATION]
        assert len(real) == 3 and len(pop) == 1
        assert pop[0].get_linewidth() > real[0].get_linewidth()
        assert all(0 < ln.get_alpha() < 1 for ln in real)
        x, y = pop[0].get_data()
        ok = np.isfinite(x)
        assert ok.sum() > 200  # a line of segments, not a few coarse pixels
        half = 0.5 * np.hypot(2 / 120, 2 / 120)
        assert np.abs(x[ok] - 0.3 * y[ok] - 0.001).max() / np.hypot(1, 0.3) <= half + 1e-9
    fig.savefig(tmp_path / "fig6.png", dpi=110)
    width, _ = plt.imread(tmp_path / "fig6.png").shape[1::-1]
    assert width == round(plots.FULL_WIDTH * 110)
    plt.close(fig)
