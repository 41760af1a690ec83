"""Partition density's distance test: exact epsilon-ball counts whatever the input dimension."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from bnstudy.measures.partition import compute as pdm
from bnstudy.measures.partition import distance as pdd
from bnstudy.measures.partition import polytope as pdp
from bnstudy.networks import models

RADII = (0.05, 0.3, 1.0)


def _frozen(cfg, norm, shape, x_train, seed=0):
    torch.manual_seed(seed)
    net = models.build_model(cfg, norm, shape, 3)
    with torch.no_grad():  # non-trivial BN affine parameters
        for m in net.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.affine:
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0.0, 0.3)
    return pdm.frozen_copy(net.train(), "train_set", x_train)


def _norms(net):
    return [b.norm for _, b in pdm.kinked_blocks(net)]


def _affine(block, flat_pre):
    """The first block's frozen normalizer as ``a * pre + shift`` (per unit or channel)."""
    bn = block.norm
    if isinstance(bn, torch.nn.modules.batchnorm._BatchNorm):
        a = bn.weight.detach().double() / torch.sqrt(bn.running_var.double() + bn.eps)
        return a, bn.bias.detach().double() - a * bn.running_mean.double()
    n = flat_pre.shape[1]
    return torch.ones(n, dtype=torch.float64), torch.zeros(n, dtype=torch.float64)


def _check(got, h, g, radii):
    """``got[:, i]`` equals #{units: |h| < r_i g} up to the units at a float32 tie."""
    h, g = h.abs().numpy(), g.numpy()
    exact = (h[:, None] < np.asarray(radii)[None, :, None] * g[:, None]).sum(2)
    for i, r in enumerate(radii):
        ties = (np.abs(h - r * g) <= 1e-5 * (h + r * g) + 1e-7).sum(1)
        assert ties.sum() <= 0.01 * h.size
        assert (np.abs(got[:, i].numpy() - exact[:, i]) <= ties).all()
    return exact


@pytest.mark.parametrize("dim", [2, 64, 3072])
@pytest.mark.parametrize("norm", ["none", "batchnorm"])
def test_mlp_first_layer_counts_the_hyperplanes_crossing_the_ball(dim, norm):
    gen = torch.Generator().manual_seed(dim)
    x_train = torch.randn(300, dim, generator=gen)
    cfg = {"arch": "mlp", "depth": 2, "width": 24, "bias_init": "random", "bias_std": 0.5}
    net = _frozen(cfg, norm, (dim,), x_train)
    centers = torch.randn(20, dim, generator=gen)
    got = pdd.distance_counts(net, _norms(net), centers, RADII, chunk_rows=8192)[0][:, :, 0]
    # exact: the distance from x to the hyperplane {a (w.x + b) + shift = 0} is |h| / (|a| ||w||)
    lin = net.features[0].linear
    w = lin.weight.detach().double()
    pre = centers.double() @ w.T + (lin.bias.detach().double() if lin.bias is not None else 0)
    a, shift = _affine(net.features[0], pre)
    exact = _check(got, pre * a + shift, (w * a[:, None]).norm(dim=1).abs()[None], RADII)
    assert 0 < exact[:, 1].mean() < 24  # neither trivially none nor all
    # the polytope along 20 directions catches a hyperplane only within r max_j |u . v_j|, u the
    # unit normal: that shrinks with the dimension; polytope_shrink measures it
    v = pdp.frame(dim, 40, 0)
    u = w / w.norm(dim=1, keepdim=True)
    ratio = float((v.double() @ u.T).abs().amax(0).mean())
    shrink = pdd.polytope_shrink(net, _norms(net)[0], x_train.mean(0, keepdim=True), v)
    assert shrink == pytest.approx(ratio, rel=1e-5)
    assert {2: 0.7, 64: 0.2, 3072: 0.02}[dim] < shrink < {2: 1.0, 64: 0.4, 3072: 0.07}[dim]


def test_conv_first_layer_counts_the_hyperplanes_crossing_the_ball():
    """CIFAR-sized inputs (3 x 32 x 32 = 3072); a unit per channel and position, whose gradient
    is the filter restricted to the pixels inside the image (zero padding at the border)."""
    gen = torch.Generator().manual_seed(0)
    x_train = torch.rand(200, 3072, generator=gen)
    cfg = {"arch": "vgg", "channels": [4, "M", 4], "bias_init": "random", "bias_std": 0.5}
    net = _frozen(cfg, "batchnorm", (3, 32, 32), x_train)
    centers = x_train[:3]
    counts, neurons = pdd.distance_counts(net, _norms(net), centers, RADII, chunk_rows=4096)
    assert neurons == [4 * 32 * 32, 4 * 16 * 16]
    conv = net.features[0].linear
    w = conv.weight.detach().double().reshape(4, -1)  # (channels, 27)
    patches = F.unfold(centers.double().reshape(-1, 3, 32, 32), 3, padding=1)  # (n, 27, 1024)
    inside = F.unfold(torch.ones(1, 3, 32, 32, dtype=torch.float64), 3, padding=1)[0]
    b = conv.bias.detach().double() if conv.bias is not None else torch.zeros(4).double()
    pre = torch.einsum("ck,nkp->ncp", w, patches) + b[None, :, None]
    a, shift = _affine(net.features[0], pre)
    h = (pre * a[None, :, None] + shift[None, :, None]).reshape(len(centers), -1)
    g = (torch.einsum("ck,kp->cp", w.square(), inside).sqrt() * a.abs()[:, None]).reshape(1, -1)
    exact = _check(counts[:, :, 0], h, g, RADII)
    assert 0 < exact.mean() < 4096


def _grid_net(slope):
    torch.manual_seed(3)
    cfg = {"arch": "mlp", "depth": 3, "width": 6, "slope": slope, "bias_init": "random",
           "bias_std": 0.5}
    return models.build_model(cfg, "none", (1,), 1).eval()


@pytest.mark.parametrize("slope", [0.0, 0.2])
def test_deeper_units_use_the_local_affine_piece(slope):
    """1-D input: a deeper unit counts when |h(x)| / |h'(x)| < r, h' its slope on the piece
    around x (central differences of the float64 network, away from every kink)."""
    net = _grid_net(slope)
    x = torch.linspace(-3, 3, 301)[:, None]
    got, _ = pdd.distance_counts(net, _norms(net), x, [0.1, 0.4])
    net64, eps = copy.deepcopy(net).double(), 1e-6
    grab = []
    hooks = [n.register_forward_hook(lambda m, i, o: grab.append(o)) for n in _norms(net64)]
    with torch.no_grad():
        for z in (x.double(), x.double() + eps, x.double() - eps):
            net64(z)
    for hk in hooks:
        hk.remove()
    deep, crossed = 0, 0
    for k in range(3):
        h, up, down = grab[k], grab[k + 3], grab[k + 6]
        slope_k = (up - down) / (2 * eps)
        kink = ((up - h) / eps - (h - down) / eps).abs() > 1e-3  # a kink within eps of x
        for i, r in enumerate((0.1, 0.4)):
            want = (h.abs() < r * slope_k.abs()).sum(1).float()
            ok = ~kink.any(1) & ((h.abs() - r * slope_k.abs()).abs() > 1e-6).all(1)
            np.testing.assert_array_equal(got[ok, i, k].numpy(), want[ok].numpy())
            if k:
                deep, crossed = deep + int(ok.sum()), crossed + int(want[ok].sum())
    assert deep > 1000 and crossed > 100


def test_chunking_and_nan():
    torch.manual_seed(0)
    net = _frozen({"arch": "mlp", "depth": 3, "width": 16}, "batchnorm", (8,), torch.randn(64, 8))
    c = torch.randn(30, 8)
    stats = {}
    ref, _ = pdd.distance_counts(net, _norms(net), c, RADII, stats=stats)
    assert stats == {"forwards": 1, "rows": 30 * 8}
    for chunk in (3, 8, 20):  # tangent chunks of 3 (1 point), one point, 2 points per pass
        torch.testing.assert_close(pdd.distance_counts(net, _norms(net), c, RADII,
                                                       chunk_rows=chunk)[0], ref)
    assert ref.sum() > 0
    c[4, 2] = float("nan")
    bad, _ = pdd.distance_counts(net, _norms(net), c, RADII)
    assert torch.isnan(bad[4]).all() and torch.equal(bad[torch.arange(30) != 4],
                                                      ref[torch.arange(30) != 4])


@pytest.mark.parametrize("method", ["distance", "polytope"])
def test_rows_state_the_method_and_effective_radius(digits, method):
    torch.manual_seed(0)
    net = models.build_model({"arch": "mlp", "depth": 2, "width": 16}, "batchnorm", (64,), 10)
    opts = {"n_points": 10, "radii": [0.5, 2.0], "method": method}
    rows = pdm.measure(net.train(), digits, opts)["partition_density"]
    assert {r["method"] for r in rows} == {method}
    ratio = {r["effective_radius"] / r["radius"] for r in rows}
    if method == "distance":
        assert ratio == {1.0} and {r["n_directions"] for r in rows} == {64}
    else:  # r times the mean over first-layer units of max_j |u . v_j|, u the unit normal
        w = net.features[0].linear.weight.detach().double()
        u = w / w.norm(dim=1, keepdim=True)
        want = float((pdp.frame(64, 40, 0).double() @ u.T).abs().amax(0).mean())
        assert len(ratio) == 1 and ratio.pop() == pytest.approx(want, rel=1e-4)
        assert {r["n_directions"] for r in rows} == {20}
    assert all(r["boundaries"] > 0 for r in rows if r["layer"] == "all" and r["radius"] == 2.0)


def test_maps_state_the_method(star):
    torch.manual_seed(0)
    net = models.build_model({"arch": "mlp", "depth": 2, "width": 8}, "none", (2,), 2)
    for method in pdm.METHODS:
        maps = pdm.measure(net, star, {"n_points": 5, "map_resolution": 4,
                                       "method": method})["partition_density_maps"]
        assert len(maps) == 4 * 16 and {m["method"] for m in maps} == {method}
    with pytest.raises(ValueError, match="distance"):
        pdm.Options.parse({"method": "ball"})
