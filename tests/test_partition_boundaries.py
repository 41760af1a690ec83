"""Exact partition boundaries on a fine 2-D grid (partition_boundaries table and figure):
first-layer lines against the closed form, deeper layers against an independent numpy forward,
the union, the options, purity, determinism and the figure."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from specs import make_spec

from bnstudy import io, plots
from bnstudy.measures.partition import boundaries as pb
from bnstudy.measures.partition import compute as pdm
from bnstudy.measures.partition.options import Options
from bnstudy.networks import models
from bnstudy.plots import partition_boundaries as pbplots
from bnstudy.train import loop as training

SMALL = {"n_points": 5, "radii": [0.1], "map_resolution": 4}


def _net(norm, depth=1, width=6, seed=0):
    torch.manual_seed(seed)
    cfg = {"arch": "mlp", "depth": depth, "width": width, "slope": 0.0,
           "bias_init": "random", "bias_std": 0.5}
    net = models.build_model(cfg, norm, (2,), 2)
    with torch.no_grad():  # non-trivial BN affine parameters
        for m in net.modules():
            if isinstance(m, torch.nn.BatchNorm1d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0.0, 0.3)
    return net.train()


def _masks(rows, ds, res, margin=0.1) -> dict[str, np.ndarray]:
    """``{layer: (res, res) mask [i1, i0]}`` rebuilt from the boundary rows."""
    c0, c1 = ((a[:-1] + a[1:]) / 2 for a in pb.corners(ds, res, margin))
    out = {}
    for r in rows:
        if r["layer"] == pb.DATA:
            continue
        m = out.setdefault(r["layer"], np.zeros((res, res), dtype=bool))
        i0, i1 = np.searchsorted(c0, r["x0"]), np.searchsorted(c1, r["x1"])
        assert c0[i0] == r["x0"] and c1[i1] == r["x1"]  # exactly a cell centre
        m[i1, i0] = True
    return out


def _numpy_preacts(net, x, x_train) -> list[np.ndarray]:
    """Every block's pre-activation at ``x`` in float64 numpy, BN frozen at the training set's
    mean and biased variance layer by layer (the earlier layers already frozen)."""
    h, h_tr, out = x, x_train, []
    for block in net.features:
        w = block.linear.weight.detach().double().numpy()
        b = (block.linear.bias.detach().double().numpy() if block.linear.bias is not None
             else 0.0)
        z, z_tr = h @ w.T + b, h_tr @ w.T + b
        if isinstance(block.norm, torch.nn.BatchNorm1d):
            g = block.norm.weight.detach().double().numpy()
            beta = block.norm.bias.detach().double().numpy()
            mu, var = z_tr.mean(0), z_tr.var(0)
            z, z_tr = ((g * (v - mu) / np.sqrt(var + block.norm.eps) + beta) for v in (z, z_tr))
        out.append(z)
        h, h_tr = np.maximum(z, 0.0), np.maximum(z_tr, 0.0)
    return out


def _sign_cells(h: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """From corner pre-activations ``h`` ((n+1)^2, units), x0 fastest: the cells whose corners
    do not all share a sign, and the cells with a corner within 1e-4 of zero (ambiguous in
    float32)."""
    pos = (h > 0).reshape(n + 1, n + 1, -1)
    near = (np.abs(h) < 1e-4).any(-1).reshape(n + 1, n + 1)
    c = [pos[:-1, :-1], pos[:-1, 1:], pos[1:, :-1], pos[1:, 1:]]
    cells = np.zeros((n, n), dtype=bool)
    for a in c[1:]:
        cells |= (a != c[0]).any(-1)
    close = near[:-1, :-1] | near[:-1, 1:] | near[1:, :-1] | near[1:, 1:]
    return cells, close


def _corner_points(ds, res):
    a0, a1 = pb.corners(ds, res, 0.1)
    g0, g1 = np.meshgrid(a0, a1, indexing="xy")
    return np.stack([g0.ravel(), g1.ravel()], 1), a0, a1


# ---- first layer: the analytic lines ---------------------------------------------------------

@pytest.mark.parametrize("norm", ["none", "batchnorm"])
def test_first_layer_cells_are_the_analytic_lines(star, norm):
    res = 60
    net = _net(norm, depth=1, width=6)
    rows = pdm.measure(net, star, {**SMALL, "boundary_resolution": res})["partition_boundaries"]
    got = _masks(rows, star, res)
    assert set(got) == {"1", "all"}
    # the frozen first layer is affine: h(x) = a * (W x + b - mu) + beta
    lin, bn = net.features[0].linear, net.features[0].norm
    w = lin.weight.detach().double().numpy()
    b = lin.bias.detach().double().numpy() if lin.bias is not None else np.zeros(len(w))
    if norm == "batchnorm":  # train-set mean and biased variance
        pre = star.x_train.astype(np.float64) @ w.T + b
        a = bn.weight.detach().double().numpy() / np.sqrt(pre.var(0) + bn.eps)
        w, b = a[:, None] * w, a * (b - pre.mean(0)) + bn.bias.detach().double().numpy()
    pts, a0, a1 = _corner_points(star, res)
    cell = np.array([a0[1] - a0[0], a1[1] - a1[0]])
    # every boundary cell's centre lies within half a cell diagonal of some line
    i1, i0 = np.nonzero(got["1"])
    centres = np.stack([(a0[i0] + a0[i0 + 1]) / 2, (a1[i1] + a1[i1 + 1]) / 2], 1)
    dist = np.abs(centres @ w.T + b) / np.linalg.norm(w, axis=1)
    assert len(centres) and (dist.min(1) <= np.hypot(*cell) / 2 + 1e-6).all()
    # every line crossing the extent marks the cells along its whole length
    crossing = 0
    for wi, bi in zip(w, b, strict=True):
        t = np.linspace(-10, 10, 200001)
        p = -bi * wi / (wi @ wi) + t[:, None] * np.array([-wi[1], wi[0]]) / np.linalg.norm(wi)
        inside = (p[:, 0] > a0[0]) & (p[:, 0] < a0[-1]) & (p[:, 1] > a1[0]) & (p[:, 1] < a1[-1])
        p = p[inside]
        if not len(p):
            continue
        crossing += 1
        f = (p - [a0[0], a1[0]]) / cell
        on_edge = (np.abs(f - np.round(f)) < 1e-6).any(1)
        j = np.floor(f[~on_edge]).astype(int)
        assert got["1"][j[:, 1], j[:, 0]].all()
    assert crossing >= 3
    # and brute force: exactly the cells whose corners' signs differ (numpy, float64)
    want, close = _sign_cells(pts @ w.T + b, res)
    assert not ((want != got["1"]) & ~close).any()
    np.testing.assert_array_equal(got["all"], got["1"])


# ---- deeper layers: an independent numpy forward ---------------------------------------------

@pytest.mark.parametrize("norm", ["none", "batchnorm"])
@pytest.mark.parametrize("rows", [65536, 100])  # one band; bands of 3 corner rows
def test_deeper_layers_are_sign_changes_between_neighbours(star, norm, rows):
    res, net = 32, _net(norm, depth=3, width=8, seed=1)
    frozen = pdm.frozen_copy(net, "train_set", torch.as_tensor(star.x_train))
    layers = pdm.kinked_blocks(frozen)
    axes = pb.corners(star, res, 0.1)
    got = pb.cell_masks(frozen, [b.preact for _, b in layers], axes, rows)
    pts = _corner_points(star, res)[0]
    want = _numpy_preacts(net, pts, star.x_train.astype(np.float64))
    assert got.shape == (3, res, res)
    for j, h in enumerate(want):
        cells, close = _sign_cells(h, res)
        assert cells.sum() > res  # a real partition, not an empty picture
        assert not ((cells != got[j]) & ~close).any(), j


def test_all_is_the_union_of_the_layers_and_rows_are_the_masks(star):
    res, net = 40, _net("batchnorm", depth=3, width=8, seed=2)
    rows = pdm.measure(net, star, {**SMALL, "boundary_resolution": res})["partition_boundaries"]
    got = _masks(rows, star, res)
    assert sorted(got) == ["1", "2", "3", "all"]
    np.testing.assert_array_equal(got["all"], got["1"] | got["2"] | got["3"])
    assert not np.array_equal(got["all"], got["3"])  # the union adds cells to the last layer
    df = pd.DataFrame(rows)
    assert len(df) == sum(m.sum() for m in got.values())  # one row per cell and layer
    assert (df["resolution"] == res).all() and (df["bn_statistics"] == "train_set").all()
    assert df["label"].isna().all()
    assert (df.loc[df["layer"] == "all", "layer_index"] == 0).all()
    assert (df.loc[df["layer"] != "all", "layer"].astype(int)
            == df.loc[df["layer"] != "all", "layer_index"]).all()
    frozen = pdm.frozen_copy(net, "train_set", torch.as_tensor(star.x_train))
    masks = pb.cell_masks(frozen, [b.preact for _, b in pdm.kinked_blocks(frozen)],
                          pb.corners(star, res, 0.1), 65536)
    for j in range(3):
        np.testing.assert_array_equal(got[str(j + 1)], masks[j])


def test_non_finite_preactivations_mark_nothing(star):
    net = _net("none", depth=2, width=4)
    with torch.no_grad():
        net.features[1].linear.weight.fill_(float("nan"))
    rows = pdm.measure(net, star, {**SMALL, "boundary_resolution": 20})["partition_boundaries"]
    assert {r["layer"] for r in rows} == {"1", "all"}  # layer 2 is NaN everywhere: no cells


# ---- rows per run, options, purity, determinism ---------------------------------------------

def _run(star, norm="batchnorm", seed=0, steps=6):
    spec = make_spec(norm, seed=seed, model={"arch": "mlp", "depth": 3, "width": 8},
                     training={"lr": 0.05, "batch_size": 16, "steps": steps,
                               "checkpoints": [0, 2]})
    return training.train(spec, star, "cpu")


def test_run_rows_first_and_last_checkpoint_data_rows_and_determinism(star):
    run = _run(star)
    opts = {**SMALL, "boundary_resolution": 30}
    out = pdm.run(run, star, opts, torch.device("cpu"))
    again = pdm.run(run, star, opts, torch.device("cpu"))
    df = pd.DataFrame(out["partition_boundaries"])
    pd.testing.assert_frame_equal(df, pd.DataFrame(again["partition_boundaries"]))
    cells, data = df[df["layer"] != pb.DATA], df[df["layer"] == pb.DATA]
    # the first and last checkpoint (what the figure draws), not the one between
    assert sorted(cells["step"].unique()) == [0, 6]
    assert sorted(pd.DataFrame(out["partition_density_maps"])["step"].dropna().unique()) == [
        0, 2, 6]  # the density maps: every checkpoint
    assert set(cells["layer"]) == {"1", "2", "3", "all"}
    assert len(data) == len(star.x_train) and (data["step"] == 0).all()
    np.testing.assert_array_equal(data["label"], star.y_train.astype(float))
    np.testing.assert_array_equal(data[["x0", "x1"]].to_numpy(), star.x_train)
    assert (data["layer_index"] == -1).all() and not df["diverged"].any()


@pytest.mark.parametrize("opts", [{"boundary_resolution": 0}, {"maps": False}])
def test_no_rows_when_off(star, opts):
    out = pdm.run(_run(star, steps=2), star, {**SMALL, **opts}, torch.device("cpu"))
    assert out["partition_boundaries"] == []
    assert pdm.measure(_net("none"), star, {**SMALL, **opts})["partition_boundaries"] == []


def test_no_rows_for_inputs_that_are_not_2d(linear_ds):
    torch.manual_seed(0)
    net = models.build_model({"arch": "mlp", "depth": 2, "width": 4}, "batchnorm", (4,), 4)
    assert pdm.measure(net, linear_ds, SMALL)["partition_boundaries"] == []


def test_the_default_resolution_and_bad_values():
    assert Options().boundary_resolution == 200
    schema = Options.json_schema()["properties"]["boundary_resolution"]
    assert schema["minimum"] == 0 and schema["default"] == 200
    for bad, why in ((-1, ">= 0"), (2.5, "integer"), (True, "integer")):
        with pytest.raises(ValueError, match=f"boundary_resolution.*{why}"):
            Options.parse({"boundary_resolution": bad})


@pytest.mark.parametrize("norm", ["none", "batchnorm"])
def test_the_model_is_unchanged(star, norm):
    net = _net(norm, depth=3, width=8)
    state, mode = {k: v.clone() for k, v in net.state_dict().items()}, net.training
    pdm.measure(net, star, {**SMALL, "boundary_resolution": 25})
    assert net.training == mode
    for k, v in net.state_dict().items():
        assert torch.equal(v, state[k]), k
    for m in net.modules():
        assert not m._forward_hooks and not m._forward_pre_hooks


# ---- the figure --------------------------------------------------------------------------------

def _table(star):
    rows = []
    for norm in ("none", "batchnorm"):
        for seed in (0, 1):
            out = pdm.run(_run(star, norm, seed, steps=4), star,
                          {**SMALL, "boundary_resolution": 50}, torch.device("cpu"))
            ids = {"experiment": "star", "dataset": "star2d", "model": "m", "norm": norm,
                   "seed": seed}
            rows += [{**ids, **r} for r in out["partition_boundaries"]]
    return pd.DataFrame(rows)


def test_figure_draws_one_panel_per_layer_group_and_normalizer_row(star, tmp_path):
    import matplotlib.pyplot as plt

    df = _table(star)
    plots.style({})
    fig = pbplots.draw([df], {"dpi": 110})
    axes = [a for a in fig.axes if a.get_visible()]
    assert len(axes) == 4 * 2 * 2  # groups x (norms x init/final)
    assert fig.get_figwidth() == pytest.approx(plots.FULL_WIDTH)
    first = df[df["seed"] == 0]
    groups = {"first": 1, "middle": 2, "last": 3, "all": 0}
    for i, (norm, step) in enumerate([("none", 0), ("none", 4), ("batchnorm", 0),
                                      ("batchnorm", 4)]):
        for j, (group, index) in enumerate(groups.items()):
            ax = fig.axes[i * 4 + j]
            n = int(((first["norm"] == norm) & (first["step"] == step)
                     & (first["layer_index"] == index) & (first["layer"] != pb.DATA)).sum())
            assert n > 0 and ax.get_title().endswith(f"\n{n} boundary cells"), ax.get_title()
            assert group in ax.get_title() or index == 0
            marks, points = ax.collections
            assert len(marks.get_offsets()) == n
            assert marks.get_sizes()[0] >= (pbplots.PIXEL * 72 / 110) ** 2
            assert len(points.get_offsets()) == len(star.x_train)
        assert norm in fig.axes[i * 4].get_ylabel()
    plt.close(fig)
    table = tmp_path / "partition_boundaries.parquet"
    io.write_table(df, table, {})
    out = tmp_path / "fig.png"
    plots.render_all("partition_boundaries", [str(table)], {"star": str(out)}, {"dpi": 40})
    assert out.read_bytes()[:4] == b"\x89PNG"


def test_family_is_registered_in_the_section_and_scheduled_like_the_maps():
    fam = plots.get("partition_boundaries")
    assert fam.tables == ("partition_boundaries",) and fam.datasets == ("star2d",)
    assert "partition_boundaries" in plots.SECTIONS["partition_density"].families
    star = {"models": {"m": {"arch": "mlp"}}, "experiments": {"e": {"model": "m"}}}
    dln = {"models": {"m": {"arch": "dln"}}, "experiments": {"e": {"model": "m"}}}
    assert fam.in_experiment({**star, "partition_density": {}}, "e")
    assert fam.in_experiment({**star, "partition_density": None}, "e")
    assert not fam.in_experiment({**star, "partition_density": {"maps": False}}, "e")
    assert not fam.in_experiment({**star, "partition_density": {"boundary_resolution": 0}}, "e")
    assert not fam.in_experiment({**dln, "partition_density": {}}, "e")
