"""BN mini-batch jitter: Prop. 2 against enumeration and Monte Carlo, exact batch statistics,
population moments, decision-boundary jitter, purity, options, figures."""

from __future__ import annotations

import copy
import itertools

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from specs import make_spec

from bnstudy import data, measures, plots
from bnstudy.measures.jitter import compute as bj
from bnstudy.measures.jitter import maps as bjm
from bnstudy.measures.jitter import stats as bjs
from bnstudy.networks import models, normalizers
from bnstudy.plots import bn_jitter as bjplots
from bnstudy.train import loop as training


def _net(norm="batchnorm", d_in=3, depth=2, width=6, seed=0, **cfg):
    torch.manual_seed(seed)
    net = models.build_model({"arch": "mlp", "depth": depth, "width": width, **cfg}, norm,
                             (d_in,), 2)
    with torch.no_grad():  # non-trivial BN affine parameters
        for m in net.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.affine:
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0.0, 0.3)
    return net


def _skewed(n, d, seed=0):
    rng = np.random.default_rng(seed)
    return torch.as_tensor(rng.exponential(1.0, (n, d)) + rng.normal(0, 0.3, (n, d)),
                           dtype=torch.float32)


# ---- Proposition 2 against exhaustive enumeration on a tiny population -----------------------

@pytest.mark.parametrize("n", [2, 3, 4, 6])
def test_formula_matches_enumeration(n):
    pop = np.array([0.3, -1.2, 2.5, 0.0, 4.1, -0.7])
    big = len(pop)
    m2 = ((pop - pop.mean()) ** 2).mean()
    m4 = ((pop - pop.mean()) ** 4).mean()
    for sampling, tuples in (
            ("with_replacement", itertools.product(range(big), repeat=n)),
            ("without_replacement", itertools.permutations(range(big), n))):
        samples = pop[np.array(list(tuples))]  # every equally likely ordered batch
        means, variances = samples.mean(1), samples.var(1)  # BN's biased variance
        exact_mu, exact_var = means.var(), variances.var()  # over the uniform distribution
        var_mu, var_sigma2 = bjs.predicted(m2, m4, n, big, sampling)
        np.testing.assert_allclose(var_mu, exact_mu, rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(var_sigma2, exact_var, rtol=1e-10, atol=1e-14)
        if sampling == "with_replacement":  # eq. (13) for the unbiased s^2 = n/(n-1) sigma_B^2
            p_mu, p_s2 = bjs.prop2(m2, m4, n)
            np.testing.assert_allclose(p_mu, exact_mu, rtol=1e-10)
            np.testing.assert_allclose(p_s2, (samples.var(1, ddof=1)).var(), rtol=1e-10)
    if n == big:  # the whole population without replacement: no jitter
        assert bjs.predicted(m2, m4, n, big, "without_replacement") == (0.0, 0.0)


def test_predicted_rejects_bad_arguments():
    with pytest.raises(ValueError, match="valid choices"):
        bjs.predicted(1.0, 3.0, 4, 10, "bootstrap")
    with pytest.raises(ValueError, match="n >= 2"):
        bjs.predicted(1.0, 3.0, 1, 10, "with_replacement")


# ---- the statistics are exactly what training on the batch uses -----------------------------

def test_batch_statistics_match_a_manual_train_mode_forward():
    net = _net()
    x = _skewed(100, 3)
    idx = [torch.arange(0, 16), torch.arange(40, 72)]
    got = bjs.batch_statistics(net, x, idx)
    b1, b2 = models.blocks(net)
    for k, i in enumerate(idx):
        with torch.no_grad():
            h1 = b1.linear(x[i]).double()
            z1 = F.relu(F.batch_norm(h1, None, None, b1.norm.weight.double(),
                                     b1.norm.bias.double(), True, 0.0, b1.norm.eps))
            h2 = F.linear(z1, b2.linear.weight.double())
        for j, h in enumerate((h1, h2)):
            torch.testing.assert_close(got[j][0][k], h.mean(0), rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(got[j][1][k], h.var(0, unbiased=False), rtol=1e-5,
                                       atol=1e-6)


@pytest.mark.parametrize("norm", ["batchnorm", "ghost_batchnorm", "weightnorm_meanonly_bn"])
def test_grouped_batch_statistics_equal_the_per_batch_loop(norm):
    """Issue 47: a size's batches in one grouped pass give the per-batch forwards' statistics
    (float rounding apart), in chunks too, and leave the model as it was."""
    torch.manual_seed(0)
    net = models.build_model({"arch": "mlp", "depth": 3, "width": 16}, norm, (3,), 2).train()
    x = _skewed(200, 3)
    idx = bjs.draw_batches(len(x), 16, 9, "without_replacement", seed=1)
    before = {k: v.clone() for k, v in net.state_dict().items()}
    grouped = bjs.batch_statistics(net, x, idx)
    twin = copy.deepcopy(net)
    chunked = bjs._grouped(twin, normalizers.batchnorm_modules(twin), x, torch.stack(idx),
                           max_rows=16 * 4)
    loop = bjs.batch_statistics(net, x, idx + [torch.arange(7)])  # mixed sizes: the loop
    assert all(torch.equal(v, net.state_dict()[k]) for k, v in before.items())
    for (gm, gv), (lm, lv), (cm, cv) in zip(grouped, loop, chunked, strict=True):
        assert gm.shape == (9, lm.shape[1])
        torch.testing.assert_close(gm, lm[:9], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(gv, lv[:9], rtol=1e-5, atol=1e-6)
        assert torch.equal(cm, gm) and torch.equal(cv, gv)


def test_grouped_statistics_of_a_conv_net_do_not_depend_on_the_chunk_size():
    """The CPU's default chunk (4096 rows) and others give bitwise the same statistics, so the
    chunk size is a speed setting only (``_grouped``)."""
    torch.manual_seed(0)
    net = models.build_model({"arch": "cnn", "channels": [4, 8]}, "batchnorm", (3, 8, 8),
                             10).train()
    x = torch.randn(300, 3, 8, 8)
    idx = torch.stack(bjs.draw_batches(len(x), 32, 40, "without_replacement", seed=2))
    bns = normalizers.batchnorm_modules(net)
    ref = bjs._grouped(net, bns, x, idx)
    for rows in (1 << 16, 32 * 3, 64):
        got = bjs._grouped(net, bns, x, idx, max_rows=rows)
        for (rm, rv), (gm, gv) in zip(ref, got, strict=True):
            assert torch.equal(rm, gm) and torch.equal(rv, gv), rows


def test_population_moments_reference_and_chunking():
    net = _net(depth=3)
    x = _skewed(300, 3, seed=1)
    moments, frozen = bjs.population_moments(net, x)
    chunked, _ = bjs.population_moments(net, x, chunk_rows=7)
    h = x.double()
    for j, block in enumerate(models.blocks(net)):
        with torch.no_grad():
            w = block.linear.weight.double()
            h = h @ w.T + (block.linear.bias.double() if block.linear.bias is not None else 0)
        c = h - h.mean(0)
        ref = (h.mean(0), (c ** 2).mean(0), (c ** 4).mean(0))
        for got in (moments[j], chunked[j]):
            assert got.count == len(x)
            for a, b in zip((got.mean, got.m2, got.m4), ref, strict=True):
                np.testing.assert_allclose(a, b.numpy(), rtol=1e-5, atol=1e-6)
        bn = block.norm  # the next layer sees this layer normalized by population statistics
        h = torch.relu((h - ref[0]) / torch.sqrt(ref[1] + bn.eps) * bn.weight.double()
                       + bn.bias.double())
    with torch.no_grad():  # the frozen copy computes the same function in eval mode
        torch.testing.assert_close(frozen(x).double(), net.head(h.float()).double(), rtol=1e-4,
                                   atol=1e-4)


def _z(stat: torch.Tensor, predicted: np.ndarray, k: int) -> np.ndarray:
    """Per-unit z-score of the empirical variance over ``k`` batches against a prediction."""
    y = stat.numpy()
    c = y - y.mean(0)
    se = np.sqrt(((c ** 4).mean(0) - (c ** 2).mean(0) ** 2) / k)  # s.e. of a variance
    return (y.var(0, ddof=1) - predicted) / se


@pytest.mark.parametrize("sampling", bjs.SAMPLING)
def test_first_layer_empirical_variance_matches_prop2(sampling):
    """The first BN layer's input is a fixed population sampled exactly: Monte Carlo agrees,
    and it is precise enough to reject the neighbouring (wrong) formulas."""
    net, x, n, k = _net(width=8), _skewed(40, 3, seed=2), 8, 3000
    moments, _ = bjs.population_moments(net, x)
    emp = bjs.batch_statistics(net, x, bjs.draw_batches(len(x), n, k, sampling, seed=3))
    mom = moments[0]
    pred = bjs.predicted(mom.m2, mom.m4, n, mom.count, sampling)
    for stat, p in zip(emp[0], pred, strict=True):
        assert np.all(np.abs(_z(stat, p, k)) < 4.5)
    iid_mu, iid_s2 = bjs.prop2(mom.m2, mom.m4, n)
    if sampling == "without_replacement":  # without the finite-population correction: rejected
        assert np.abs(_z(emp[0][0], iid_mu, k)).max() > 4.5
    else:  # eq. (13) as printed is for the unbiased s^2, not BN's biased sigma_B^2: rejected
        assert np.abs(_z(emp[0][1], iid_s2, k)).max() > 4.5


def test_ghost_batchnorm_uses_its_virtual_batch():
    ds = data.make("star2d", {"n_train": 128, "n_test": 32, "seed": 0})
    torch.manual_seed(0)
    cfg = {"arch": "mlp", "depth": 2, "width": 8,
           "norm_options": {"ghost_batchnorm": {"ghost_batch_size": 8}}}
    net = models.build_model(cfg, "ghost_batchnorm", (2,), 2)
    assert bjs.effective_batch_size(net, 64) == 8
    assert bjs.effective_batch_size(net, 9) == 9  # a remainder of one joins the virtual batch
    rows = bj.measure(net, ds, {"batch_sizes": [64], "n_batches": 20, "realizations": 2,
                                "grid_resolution": 8, "map_resolution": 4})["bn_jitter"]
    layer_rows = [r for r in rows if r["layer"] != "boundary"]
    assert {r["batch_size_effective"] for r in layer_rows} == {8}
    assert {r["samples_per_stat"] for r in layer_rows} == {8}


# ---- decision-boundary jitter -----------------------------------------------------------------

def test_vote_and_boundary_distance():
    classes = np.array([[0, 0, 1, 1], [0, 1, 1, 0], [0, 0, 1, 0]])
    majority, disagreement = bjm.vote(classes, 2)
    np.testing.assert_array_equal(majority, [0, 0, 1, 0])
    np.testing.assert_allclose(disagreement, [0, 1 / 3, 0, 1 / 3])
    xs, ys = np.linspace(-1, 1, 41), np.linspace(-1, 1, 21)
    cls = np.broadcast_to(xs > 0.12, (len(ys), len(xs))).astype(int)  # boundary at x = 0.125
    pts = np.random.default_rng(0).uniform(-0.9, 0.9, (50, 2))
    true = np.abs(pts[:, 0] - 0.125).mean()
    got = bjm.mean_distance(cls, xs, ys, pts)
    assert 0 <= got - true <= (ys[1] - ys[0]) / 2  # midpoints lie on the line, spaced by dy
    fine = np.linspace(-1, 1, 4001)
    cls = np.broadcast_to(xs > 0.12, (len(fine), len(xs))).astype(int)
    assert 0 <= bjm.mean_distance(cls, xs, fine, pts) - true < 1e-5
    assert np.isnan(bjm.mean_distance(np.zeros((3, 4), int), xs[:4], ys[:3], pts))


def test_jitter_shrinks_with_batch_size_and_vanishes_for_the_full_set():
    ds = data.make("star2d", {"n_train": 256, "n_test": 64, "seed": 1})
    net = _net(d_in=2, depth=3, width=16, seed=1)
    out = bj.measure(net, ds, {"batch_sizes": [8, 64, 256], "n_batches": 60, "realizations": 16,
                               "grid_resolution": 40, "map_resolution": 10,
                               "map_realizations": 2})
    df = pd.DataFrame(out["bn_jitter"])
    layer = df[df["layer"] == "1"].set_index("batch_size")
    assert layer.loc[8, "var_mu_emp"] > layer.loc[64, "var_mu_emp"] > 0
    assert layer.loc[256, "var_mu_pred"] == 0 and layer.loc[256, "var_mu_emp"] < 1e-12  # whole set
    band = df[df["layer"] == "boundary"].set_index("batch_size")["band_fraction"]
    assert band[8] > band[64] > band[256] == 0
    maps = pd.DataFrame(out["bn_jitter_boundary"])
    assert set(maps["kind"]) == {"disagreement", "population", "realization"}
    assert len(maps[(maps["kind"] == "disagreement") & (maps["batch_size"] == 8)]) == 100


# ---- the measure: purity, determinism, applicability, options --------------------------------

@pytest.mark.parametrize("mode", ["train", "eval"])
def test_measure_is_pure_and_deterministic(star, mode):
    net = _net(d_in=2, depth=2, width=8, norm="noisy_batchnorm")
    net.train(mode == "train")
    state = {k: v.clone() for k, v in net.state_dict().items()}
    opts = {"batch_sizes": [8, 32], "n_batches": 10, "realizations": 3, "grid_resolution": 10,
            "map_resolution": 5, "map_realizations": 1}
    a, b = bj.measure(net, star, opts), bj.measure(net, star, opts)
    assert net.training == (mode == "train")
    for k, v in net.state_dict().items():
        assert torch.equal(v, state[k]), k
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in net.modules())
    pd.testing.assert_frame_equal(pd.DataFrame(a["bn_jitter"]), pd.DataFrame(b["bn_jitter"]))
    pd.testing.assert_frame_equal(pd.DataFrame(a["bn_jitter_boundary"]),
                                  pd.DataFrame(b["bn_jitter_boundary"]))


def test_bad_options_name_the_value_and_the_choices():
    for bad, match in (({"sampling": "bootstrap"}, "bootstrap.*without_replacement"),
                       ({"checkpoints": "some"}, "some.*first_last"),
                       ({"batch_sizes": [1, 16]}, r"\[1, 16\].*>= 2"),
                       ({"batch_sizes": 16}, "batch_sizes=16: need a list"),
                       ({"n_batches": 1}, "n_batches=1"),
                       ({"grid_margin": -1}, "grid_margin=-1"),
                       ({"colour": 1}, "unknown bn_jitter option")):
        with pytest.raises(ValueError, match=match):
            bj.Options.parse(bad)


def _frame(rows, spec, ds_name):
    df = pd.DataFrame(rows)
    for k, v in {"experiment": "t", "dataset": ds_name, "model": "m", "norm": spec["norm"],
                 "seed": spec["seed"]}.items():
        df[k] = v
    return df


def test_run_tables_and_figures(star, linear_ds, tmp_path):
    opts = {"batch_sizes": [8, 32], "n_batches": 10, "realizations": 4, "grid_resolution": 12,
            "map_resolution": 6, "map_realizations": 2, "checkpoints": "first_last"}
    assert measures.get("bn_jitter").tables == ("bn_jitter", "bn_jitter_boundary")
    frames = {"bn_jitter": [], "bn_jitter_boundary": []}
    for norm in ("batchnorm", "none"):
        spec = make_spec(norm)
        out = bj.run(training.train(spec, star, "cpu"), star, opts, torch.device("cpu"))
        for t in frames:
            frames[t].append(_frame(out[t], spec, "star2d"))
        if norm == "none":
            assert not any(r["applicable"] for r in out["bn_jitter"])
            assert {r["kind"] for r in out["bn_jitter_boundary"]} == {"data"}
        else:
            assert sorted({r["step"] for r in out["bn_jitter"]}) == [0, 20]
    tables = {t: pd.concat(f, ignore_index=True) for t, f in frames.items()}
    for name in ("bn_jitter_boundaries", "bn_jitter_prop2"):
        fam = plots.FAMILIES[name]
        fig = fam.draw([tables[t] for t in fam.tables], {})
        fig.savefig(tmp_path / f"{name}.png")
    none = {t: f[f["norm"] == "none"] for t, f in tables.items()}  # not applicable: a message
    for name in ("bn_jitter_boundaries", "bn_jitter_prop2"):
        fam = plots.FAMILIES[name]
        fam.draw([none[t] for t in fam.tables], {}).savefig(tmp_path / f"{name}_none.png")
    assert "not applicable" in bjplots.findings(none)
    text = bjplots.findings(tables)
    assert "|B|=8 band" in text and "at init (step 0)" in text and "first BN layer" in text
    # a regression data set (no boundary) with a deep linear network
    spec = make_spec("batchnorm", model={"arch": "dln", "depth": 3},
                     training={"lr": 0.01, "batch_size": 16, "steps": 2, "checkpoints": [0]})
    out = bj.run(training.train(spec, linear_ds, "cpu"), linear_ds, opts, torch.device("cpu"))
    assert out["bn_jitter_boundary"] == []
    assert {r["layer"] for r in out["bn_jitter"]} == {"1", "2"}


def test_conv_layers_count_positions(digits):
    torch.manual_seed(0)
    net = models.build_model({"arch": "vgg", "channels": [4, "M", 4]}, "batchnorm",
                             digits.input_shape, 10)
    small = copy.copy(digits)
    small.x_train = digits.x_train[:200]
    rows = bj.measure(net, small, {"batch_sizes": [8], "n_batches": 5})["bn_jitter"]
    assert [r["samples_per_stat"] for r in rows] == [8 * 64, 8 * 16]
    assert [r["population"] for r in rows] == [200 * 64, 200 * 16]
