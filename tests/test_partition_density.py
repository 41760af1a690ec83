"""Partition density: closed forms, analytic 1-D breakpoints, batch invariance, purity, plots."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest
import torch
from specs import make_spec

from bnstudy.measures.partition import compute as pdm
from bnstudy.measures.partition import maps as partition_maps
from bnstudy.measures.partition import polytope as pdp
from bnstudy.networks import models, probe
from bnstudy.plots import partition_density as pdplots
from bnstudy.train import loop as training


def _net(norm, d_in, depth=2, width=8, slope=0.0, seed=0, bias_init="random", out=2):
    torch.manual_seed(seed)
    cfg = {"arch": "mlp", "depth": depth, "width": width, "slope": slope,
           "bias_init": bias_init, "bias_std": 0.5}
    net = models.build_model(cfg, norm, (d_in,), out)
    with torch.no_grad():  # non-trivial BN affine parameters
        for m in net.modules():
            if isinstance(m, torch.nn.BatchNorm1d) and m.affine:
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0.0, 0.3)
    return net


def _cross(net, centers, radii, directions, **kw):
    return pdp.crossing_counts(net, pdm.kinked_blocks(net), centers, radii, directions, **kw)


def _snapshot(model):
    return {k: v.clone() for k, v in model.state_dict().items()}, model.training


def _assert_unchanged(model, snap):
    state, mode = snap
    now = model.state_dict()
    assert model.training == mode
    assert state.keys() == now.keys()
    for k in state:
        assert torch.equal(state[k], now[k]), k
    for m in model.modules():
        assert not m._forward_hooks and not m._forward_pre_hooks


# ---- first layer against the closed form and against explicit vertex signs -------------------

@pytest.mark.parametrize("norm", ["none", "batchnorm", "weightnorm"])
@pytest.mark.parametrize("n_vertices", [6, 40])  # a 3-direction slice, and all 5 directions
def test_first_layer_matches_closed_form_and_brute_force(norm, n_vertices):
    d = 5
    rng = np.random.default_rng(1)
    x_train = torch.as_tensor(rng.normal(0.3, 1.2, (300, d)), dtype=torch.float32)
    for seed in range(3):
        net = _net(norm, d, seed=seed)
        frozen = pdm.frozen_copy(net, "train_set", x_train)
        centers = torch.as_tensor(rng.normal(0.0, 1.5, (200, d)), dtype=torch.float32)
        radii = torch.as_tensor(rng.uniform(0.05, 1.0, 200), dtype=torch.float32)
        v = pdp.frame(d, n_vertices, seed=3)
        got = _cross(frozen, centers, radii, v).counts[:, 0].numpy()

        # The first block's pre-activation is affine: h(x) = a * (W x + b - mu) + beta.
        lin, bn = net.features[0].linear, net.features[0].norm
        w = lin.weight.detach().double().numpy()
        b = lin.bias.detach().double().numpy() if lin.bias is not None else np.zeros(len(w))
        xd, c, r, vd = (t.double().numpy() for t in (x_train, centers, radii, v))
        if norm == "batchnorm":  # population statistics of the whole training set, biased var
            pre = xd @ w.T + b
            a = bn.weight.detach().double().numpy() / np.sqrt(pre.var(0) + bn.eps)
            shift = bn.bias.detach().double().numpy() - a * pre.mean(0)
        else:
            a, shift = np.ones(len(w)), np.zeros(len(w))
        h_center = (c @ w.T + b) * a + shift  # (points, neurons)
        slopes = np.abs(vd @ w.T * a)  # |dh along v_k|, (directions, neurons)
        closed = np.abs(h_center) < r[:, None] * slopes.max(0)[None]
        verts = c[:, None, :] + r[:, None, None] * np.concatenate([vd, -vd])[None]
        h_verts = (verts @ w.T + b) * a + shift  # (points, vertices, neurons)
        brute = (h_verts.max(1) > 0) & (h_verts.min(1) < 0)
        np.testing.assert_array_equal(closed, brute)
        margin = np.abs(np.abs(h_center) - r[:, None] * slopes.max(0)[None])
        clear = (margin > 1e-4).all(1)  # float32 vs float64: skip exact ties
        assert clear.mean() > 0.95
        np.testing.assert_array_equal(got[clear], closed.sum(1)[clear])
        assert 0 < closed.sum(1).mean() < w.shape[0]  # the test is not trivially all/none


# ---- a 1-D-input network whose breakpoints are known analytically -----------------------------

def _hand_net():
    """layer 1: x+1, x, x-0.5, x-2 (breakpoints -1, 0, 0.5, 2); layer 2 on z = relu(layer 1):
    z1-0.25 (root 0.25), -z1-z2+1 (root 0.75), z0-0.5 (root -0.5), z1-2 z2-0.1 (roots 0.1, 0.9)."""
    net = models.build_model({"arch": "mlp", "depth": 2, "width": 4}, "none", (1,), 1)
    with torch.no_grad():
        l1, l2 = net.features[0].linear, net.features[1].linear
        l1.weight.copy_(torch.ones(4, 1))
        l1.bias.copy_(torch.tensor([1.0, 0.0, -0.5, -2.0]))
        l2.weight.copy_(torch.tensor([[0.0, 1, 0, 0], [0, -1, -1, 0], [1, 0, 0, 0],
                                      [0, 1, -2, 0]]))
        l2.bias.copy_(torch.tensor([-0.25, 1.0, -0.5, -0.1]))
    return net


def test_hand_built_1d_network_breakpoints():
    net = _hand_net()
    # (center, radius) -> expected (layer 1, layer 2) counts from the breakpoints above
    cases = [(0.25, 0.3, 2, 2), (0.5, 0.45, 1, 2), (-0.6, 0.2, 0, 1), (1.5, 0.1, 0, 0),
             (2.0, 0.25, 1, 0), (0.0, 1.2, 3, 3)]
    c = torch.tensor([[x] for x, *_ in cases])
    r = torch.tensor([rad for _, rad, *_ in cases])
    got = _cross(net.eval(), c, r, pdp.frame(1, 40, 0)).counts.numpy()
    np.testing.assert_array_equal(got, [[a, b] for *_, a, b in cases])
    # (0.5, 0.45): the last neuron's folded hyperplane enters and leaves the interval (roots 0.1
    # and 0.9 both inside): the vertex test cannot see it, as documented.


def _exact_roots(net, lo, hi):
    """Per layer and neuron, the roots of the pre-activation on [lo, hi], found exactly: between
    consecutive roots of all earlier layers every pre-activation is affine in x."""
    net64 = copy.deepcopy(net).double().eval()
    blocks = models.blocks(net64)
    knots, roots = np.array([lo, hi]), []
    for blk in blocks:
        grab = {}
        hook = blk.norm.register_forward_hook(lambda m, i, o, g=grab: g.__setitem__("h", o))
        with torch.no_grad():
            net64(torch.as_tensor(knots[:, None]))
        hook.remove()
        h = grab["h"].numpy()
        layer = []
        for k in range(h.shape[1]):
            a, b = h[:-1, k], h[1:, k]
            cross = np.nonzero(a * b < 0)[0]
            layer.append(knots[cross] - a[cross] * (knots[cross + 1] - knots[cross])
                         / (b[cross] - a[cross]))
        roots.append(layer)
        knots = np.unique(np.concatenate([knots, *layer]))
    return roots


@pytest.mark.parametrize("slope", [0.0, 0.2])
def test_random_1d_network_matches_analytic_breakpoints(slope):
    for seed in range(3):
        net = _net("none", 1, depth=3, width=6, slope=slope, seed=seed).eval()
        roots = _exact_roots(net, -4.0, 4.0)
        centers = np.linspace(-3, 3, 241)
        r = 0.35
        got = _cross(net, torch.tensor(centers[:, None], dtype=torch.float32),
                     torch.full((len(centers),), r), pdp.frame(1, 40, 0))
        assert got.layers == [1, 2, 3] and got.neurons == [6, 6, 6]
        all_roots = np.concatenate([np.concatenate(layer) for layer in roots])
        assert len(all_roots) > 6
        checked, crossings = 0, 0
        for i, x in enumerate(centers):
            if np.min(np.abs(all_roots[:, None] - [x - r, x + r])) < 1e-4:
                continue  # a root at a vertex: float32 may round either way
            # sign differs at the two vertices iff an odd number of roots lies between them
            want = [sum(int(np.sum((rt > x - r) & (rt < x + r))) % 2 for rt in layer)
                    for layer in roots]
            np.testing.assert_array_equal(got.counts[i].numpy(), want, err_msg=f"x={x}")
            checked, crossings = checked + 1, crossings + sum(want)
        assert checked > 200 and crossings > 50


# ---- independence of how points are batched, exact BN statistics, purity ---------------------

@pytest.mark.parametrize("stats", ["train_set", "batch", "running"])
def test_counts_do_not_depend_on_the_batch_of_points(stats):
    torch.manual_seed(0)
    net = _net("batchnorm", 3, depth=3, width=16)
    x_train = torch.randn(128, 3)
    net.train()
    net(x_train[:64])  # running buffers that differ from the population statistics
    frozen = pdm.frozen_copy(net, stats, x_train, batch=torch.arange(32))
    centers, radii = torch.randn(50, 3), torch.rand(50) * 0.5 + 0.05
    v = pdp.frame(3, 6, 0)
    ref = _cross(frozen, centers, radii, v).counts
    assert ref.sum() > 0
    perm = torch.randperm(50)
    for chunk in (6, 18, 60):  # 1, 3 and 10 points per forward pass
        alone = _cross(frozen, centers[perm], radii[perm], v, chunk_rows=chunk)
        assert torch.equal(alone.counts, ref[perm])
    # the same computation without freezing BN (train mode) does depend on the batch
    unfrozen = copy.deepcopy(net).train()
    big = _cross(unfrozen, centers, radii, v).counts
    small = _cross(unfrozen, centers, radii, v, chunk_rows=12).counts
    assert not torch.equal(big, small)


def test_population_statistics_single_pass_and_chunked_agree():
    torch.manual_seed(1)
    net = _net("batchnorm", 4, depth=3, width=8)
    x = torch.randn(200, 4) * 2 + 1
    one = probe.population_statistics(copy.deepcopy(net), x, chunk_rows=1000)
    chunked = probe.population_statistics(copy.deepcopy(net), x, chunk_rows=37)
    for (m1, v1), (m2, v2) in zip(one, chunked, strict=True):
        torch.testing.assert_close(m1, m2, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(v1, v2, rtol=1e-5, atol=1e-5)
    # frozen eval-mode copy == a full-batch train-mode forward of the training set
    frozen = pdm.frozen_copy(net, "train_set", x, chunk_rows=37)
    with torch.no_grad():
        torch.testing.assert_close(frozen(x), copy.deepcopy(net).train()(x), rtol=1e-4,
                                   atol=1e-4)


@pytest.mark.parametrize("stats", ["train_set", "batch", "running"])
@pytest.mark.parametrize("mode", ["train", "eval"])
def test_measure_is_pure(star, stats, mode):
    net = _net("batchnorm", 2, depth=3, width=8)
    net.train(mode == "train")
    snap = _snapshot(net)
    out = pdm.measure(net, star, {"bn_statistics": stats, "n_points": 20, "map_resolution": 8},
                      batch=torch.arange(16))
    _assert_unchanged(net, snap)
    assert {r["bn_statistics"] for r in out["partition_density"]} == {stats}


def test_conv_network_counts_channels_times_positions(digits):
    torch.manual_seed(0)
    cfg = {"arch": "vgg", "channels": [4, "M", 6], "slope": 0.1}
    net = models.build_model(cfg, "batchnorm", (1, 8, 8), 10).train()
    snap = _snapshot(net)
    xtr = torch.as_tensor(digits.x_train)
    frozen = pdm.frozen_copy(net, "train_set", xtr)
    c, r, v = xtr[:12], torch.full((12,), 0.2), pdp.frame(64, 8, 0)
    whole = _cross(frozen, c, r, v)
    assert whole.layers == [1, 2] and whole.neurons == [4 * 64, 6 * 16]
    assert torch.equal(_cross(frozen, c, r, v, chunk_rows=8).counts, whole.counts)
    assert 0 < whole.counts.sum()
    rows = pdm.measure(net, digits, {"n_points": 8, "radii": [0.2]})["partition_density"]
    assert {r["neurons"] for r in rows} == {256, 96, 352}
    _assert_unchanged(net, snap)


# ---- rows, options, not applicable, non-finite --------------------------------------------------

def test_run_covers_every_checkpoint_and_is_deterministic(star):
    spec = make_spec("batchnorm", model={"arch": "mlp", "depth": 3, "width": 16},
                     training={"lr": 0.05, "batch_size": 16, "steps": 10,
                               "checkpoints": [0, 1, 5]})
    run = training.train(spec, star, "cpu")
    opts = {"n_points": 30, "radii": [0.05, 0.2], "map_resolution": 10}
    out = pdm.run(run, star, opts, torch.device("cpu"))
    again = pdm.run(run, star, opts, torch.device("cpu"))
    df, maps = pd.DataFrame(out["partition_density"]), pd.DataFrame(out["partition_density_maps"])
    pd.testing.assert_frame_equal(df, pd.DataFrame(again["partition_density"]))
    assert sorted(df["step"].unique()) == [0, 1, 5, 10]
    assert len(df) == 4 * 3 * 2 * 4  # steps x point sets x radii x (3 layers + all)
    per_layer = df[df["layer"] != "all"].groupby(["step", "point_set", "radius"])["boundaries"]
    total = df[df["layer"] == "all"].set_index(["step", "point_set", "radius"])["boundaries"]
    np.testing.assert_allclose(per_layer.sum().loc[total.index], total, rtol=1e-6)
    np.testing.assert_allclose(df["fraction"], df["boundaries"] / df["neurons"])
    assert (df.loc[df["layer"] == "all", "neurons"] == 48).all()
    assert df["applicable"].all() and (df["bn_statistics"] == "train_set").all()
    assert (df["method"] == "distance").all() and (df["effective_radius"] == df["radius"]).all()
    # a larger radius crosses at least as many boundaries on average
    wide = df.set_index(["step", "point_set", "layer", "radius"])["boundaries"].unstack()
    assert (wide[0.2] >= wide[0.05]).all().all()
    grid = maps[maps["group"] != "data"]
    assert len(grid) == 4 * 4 * 100 and set(grid["group"]) == set(partition_maps.groups([1, 2, 3]))
    assert sorted(grid.loc[grid["group"] != "all", "layer_index"].unique()) == [1, 2, 3]
    assert len(maps[maps["group"] == "data"]) == len(star.x_train)


def test_non_2d_data_has_no_maps_and_no_bn_is_recorded(linear_ds):
    net = _net("layernorm", 4, depth=2, width=8, out=4)
    out = pdm.measure(net, linear_ds, {"n_points": 10})
    assert out["partition_density_maps"] == []
    assert {r["bn_statistics"] for r in out["partition_density"]} == {pdm.NO_BN}


@pytest.mark.parametrize("norm", ["l2norm", "linfnorm", "ghost_batchnorm", "batchnorm"])
def test_every_batch_statistics_normalizer_records_its_statistics(linear_ds, norm):
    """l_p norms normalize with batch statistics too: their rows name the statistics used, not
    n/a (the frozen copy takes their population statistics, partition_bn)."""
    net = _net(norm, 4, depth=2, width=8, out=4)
    out = pdm.measure(net, linear_ds, {"n_points": 10, "bn_statistics": "train_set"})
    assert {r["bn_statistics"] for r in out["partition_density"]} == {"train_set"}


def test_linear_network_is_not_applicable(linear_ds):
    torch.manual_seed(0)
    net = models.build_model({"arch": "dln", "depth": 3}, "batchnorm", (4,), 4)
    out = pdm.measure(net, linear_ds, {"n_points": 10, "radii": [0.1, 0.2]})
    rows = out["partition_density"]
    assert len(rows) == 3 * 2 and not any(r["applicable"] for r in rows)
    assert all(np.isnan(r["boundaries"]) for r in rows)


def test_non_finite_preactivations_count_as_nan(star):
    net = _net("none", 2, depth=2)
    with torch.no_grad():
        net.features[1].linear.weight[0, 0] = float("inf")
    rows = pdm.measure(net, star, {"n_points": 5, "maps": False})["partition_density"]
    by_layer = {r["layer"]: r["boundaries"] for r in rows if r["radius"] == 0.03}
    assert np.isfinite(by_layer["1"]) and np.isnan(by_layer["2"]) and np.isnan(by_layer["all"])


def test_frame_is_a_seeded_orthonormal_frame():
    v = pdp.frame(64, 40, 0)
    assert v.shape == (20, 64)
    torch.testing.assert_close(v @ v.T, torch.eye(20), atol=1e-5, rtol=0)
    assert torch.equal(v, pdp.frame(64, 40, 0)) and not torch.equal(v, pdp.frame(64, 40, 1))
    assert pdp.frame(2, 40, 0).shape == (2, 2)


@pytest.mark.parametrize("options, match", [
    ({"bn_statistics": "population"}, "train_set"),
    ({"n_vertices": 5}, "even"),
    ({"point_sets": ["train", "noise"]}, "random"),
    ({"radii": [0.1, -1]}, "positive"),
    ({"radii": 0.1}, "list"),
    ({"radius": [0.1]}, "valid"),
    ({"map_resolution": 1}, "map_resolution"),
])
def test_bad_options_fail_clearly(options, match):
    with pytest.raises(ValueError, match=match):
        pdm.Options.parse(options)


def test_batch_statistics_need_the_batch(star):
    with pytest.raises(ValueError, match="batch"):
        pdm.measure(_net("batchnorm", 2), star, {"bn_statistics": "batch"})


# ---- figures and findings --------------------------------------------------------------------

def _table(star):
    rows, maps = [], []
    for norm in ("none", "batchnorm"):
        for seed in (0, 1):
            spec = make_spec(norm, seed=seed, model={"arch": "mlp", "depth": 2, "width": 8},
                             training={"lr": 0.05, "batch_size": 16, "steps": 4,
                                       "checkpoints": [0]})
            run = training.train(spec, star, "cpu")
            out = pdm.run(run, star, {"n_points": 10, "map_resolution": 6}, torch.device("cpu"))
            ids = {"experiment": "star", "dataset": "star2d", "model": "m", "norm": norm,
                   "seed": seed}
            rows += [{**ids, **r} for r in out["partition_density"]]
            maps += [{**ids, **r} for r in out["partition_density_maps"]]
    return pd.DataFrame(rows), pd.DataFrame(maps)


def test_figures_and_findings(star):
    import matplotlib.pyplot as plt

    df, maps = _table(star)
    for draw, frame in ((pdplots.draw_steps, df), (pdplots.draw_sets, df),
                        (pdplots.draw_layers, df), (pdplots.draw_maps, maps)):
        fig = draw([frame], {})
        assert fig.axes
        plt.close(fig)
    na = df.assign(applicable=False, boundaries=np.nan, experiment="dln")
    fig = pdplots.draw_steps([na], {})
    assert "not applicable" in fig.texts[0].get_text() or "not applicable" in \
        fig.axes[0].texts[0].get_text()
    plt.close(fig)
    text = pdplots.findings({"partition_density": pd.concat([df, na])})
    assert "dln" in text and "not applicable" in text
    final = df[(df["norm"] == "batchnorm") & (df["layer"] == "all") & (df["radius"] == 0.03)]
    mean_init = final[(final["point_set"] == "train") & (final["step"] == 0)]["boundaries"].mean()
    assert f"train {mean_init:.1f}" in text
