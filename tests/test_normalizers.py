"""Every registered normalizer against an independent (numpy) reference computation.

The trainer-hook and gamma-decay normalizers (population_norm, weightnorm_gamma_decay, bn_init)
are tested in test_normalizers_population.py.
"""

import math

import numpy as np
import pytest
import torch
from torch import nn

from bnstudy.measures.generalization import compute as generalization
from bnstudy.networks import models, normalizers
from bnstudy.networks.norms import layers as nl

EPS = 1e-5


def _np(t):
    return t.detach().double().numpy()


def _units(a):
    """(N, C[, H, W]) -> (C, samples) array: per-unit values over batch (and positions)."""
    return np.moveaxis(a, 1, 0).reshape(a.shape[1], -1)


def _per_unit(v, a):
    return np.asarray(v).reshape(1, -1, *([1] * (a.ndim - 2)))


def _layer(name, c, kind, **options):
    torch.manual_seed(0)
    layer = normalizers.get(name, options).layer(c, kind)
    for p in layer.parameters():  # non-trivial affine parameters
        with torch.no_grad():
            p.copy_(torch.randn_like(p))
    return layer


def _x(kind, n=12, c=5, shift=1.5, seed=1):
    g = torch.Generator().manual_seed(seed)
    shape = (n, c) if kind == "fc" else (n, c, 3, 4)
    return torch.randn(shape, generator=g) * 2 + shift


def _bn_ref(a, w, b, mean=None, var=None):
    if mean is None:
        u = _units(a)
        mean, var = u.mean(1), u.var(1)
    y = (a - _per_unit(mean, a)) / np.sqrt(_per_unit(var, a) + EPS)
    return y * _per_unit(w, a) + _per_unit(b, a)


def test_registry_holds_every_entry_and_unknown_names_list_the_valid_ones():
    """Each entry is registered by the module that names it in its NORMALIZERS tuple (what the
    workflow reads, torch-free, for a run's code hash), and by no other."""
    from bnstudy.networks import norms

    declared = norms.entry_modules()
    assert sorted(declared) == normalizers.names() and len(declared) >= 20
    for name, path in declared.items():
        module = "bnstudy." + path.removesuffix(".py").replace("/", ".")
        assert normalizers.SOURCES[name] == module, (name, normalizers.SOURCES[name], module)
    with pytest.raises(ValueError, match="unknown normalizer 'bogus'.*batchnorm.*zero_bias"):
        normalizers.get("bogus")
    with pytest.raises(ValueError, match="layer kind"):
        normalizers.get("batchnorm").layer(3, "rnn")


@pytest.mark.parametrize("name, options, match", [
    ("ghost_batchnorm", {"size": 8}, "unknown option.*ghost_batch_size"),
    ("batchnorm", {"eps": 1}, "unknown option.*valid: none"),
    ("population_norm", {"zeta": "eq4"}, "zeta='eq4'.*eq3"),
    ("population_norm", {"n_samples": 1}, "n_samples=1"),
    ("bn_init", {"fold": "yes"}, "fold='yes'"),
    ("groupnorm", {"groups": 0}, "groups=0"),
    ("random_bias", {"bias_std": -1}, "bias_std=-1"),
])
def test_bad_options_fail_with_valid_choices(name, options, match):
    with pytest.raises(ValueError, match=match):
        normalizers.get(name, options)


@pytest.mark.parametrize("name, options, match", [
    ("ghost_batchnorm", {"ghost_batch_size": 1}, "ghost_batch_size=1; valid: an int >= 2"),
    ("noisy_batchnorm", {"n_sigma": 0.5}, "n_sigma=0.5; valid: a number >= 1"),
    ("noisy_batchnorm", {"eval_noise": "max"}, "eval_noise='max'; valid: 'mean' or 'off'"),
    ("instancenorm", {}, "conv layers"),
])
def test_bad_layer_settings_fail_clearly(name, options, match):
    with pytest.raises(ValueError, match=match):
        models.build_model({"arch": "mlp", "depth": 1, "width": 4,
                            "norm_options": {name: options}}, name, (2,), 2)


def test_norm_options_are_keyed_by_normalizer():
    cfg = {"arch": "mlp", "depth": 1, "width": 4,
           "norm_options": {"ghost_batchnorm": {"ghost_batch_size": 5}, "groupnorm": {"groups": 2}}}
    ghost = models.build_model(cfg, "ghost_batchnorm", (2,), 2)
    assert models.blocks(ghost)[0].norm.ghost_batch_size == 5
    assert models.blocks(models.build_model(cfg, "groupnorm", (2,), 2))[0].norm.num_groups == 2
    plain = models.build_model(cfg, "batchnorm", (2,), 2)  # other entries do not apply to it
    assert isinstance(models.blocks(plain)[0].norm, nn.BatchNorm1d)
    with pytest.raises(ValueError, match="unknown normalizer.*'ghost'.*valid choices"):
        models.ModelConfig.from_dict({"arch": "mlp", "norm_options": {"ghost": {}}})
    with pytest.raises(ValueError, match="must map option names"):
        models.ModelConfig.from_dict({"arch": "mlp", "norm_options": {"ghost_batchnorm": 8}})


@pytest.mark.parametrize("kind", ["fc", "conv"])
def test_batchnorm_and_fixed_affine_train_eval_and_buffers(kind):
    x = _x(kind)
    bn = _layer("batchnorm", 5, kind).train()
    w, b = _np(bn.weight), _np(bn.bias)
    np.testing.assert_allclose(_np(bn(x)), _bn_ref(_np(x), w, b), atol=1e-5)
    u = _units(_np(x))
    np.testing.assert_allclose(_np(bn.running_mean), 0.1 * u.mean(1), atol=1e-6)
    np.testing.assert_allclose(_np(bn.running_var), 0.9 + 0.1 * u.var(1, ddof=1), atol=1e-5)
    bn.eval()
    ref = _bn_ref(_np(x), w, b, _np(bn.running_mean), _np(bn.running_var))
    np.testing.assert_allclose(_np(bn(x)), ref, atol=1e-5)
    fixed = _layer("batchnorm_fixed_affine", 5, kind).train()
    assert not list(fixed.parameters())
    np.testing.assert_allclose(_np(fixed(x)), _bn_ref(_np(x), 1.0, 0.0), atol=1e-5)


def test_layernorm_and_groupnorm_normalize_each_sample():
    x = _x("fc", c=6)
    ln = _layer("layernorm", 6, "fc")
    a = _np(x)
    ref = (a - a.mean(1, keepdims=True)) / np.sqrt(a.var(1, keepdims=True) + EPS)
    np.testing.assert_allclose(_np(ln(x)), ref * _np(ln.weight) + _np(ln.bias), atol=1e-5)
    xc = _x("conv", c=6)
    ac = _np(xc)
    lnc = _layer("layernorm", 6, "conv")  # channel-and-space layer norm
    m, v = ac.mean((1, 2, 3), keepdims=True), ac.var((1, 2, 3), keepdims=True)
    ref = (ac - m) / np.sqrt(v + EPS) * _per_unit(_np(lnc.weight), ac) + _per_unit(
        _np(lnc.bias), ac)
    np.testing.assert_allclose(_np(lnc(xc)), ref, atol=1e-5)
    for groups, expect in ((8, 6), (4, 3), (2, 2)):  # largest divisor of 6 <= groups
        gn = _layer("groupnorm", 6, "conv", groups=groups)
        assert gn.num_groups == expect
        g = ac.reshape(ac.shape[0], expect, -1)
        ref = ((g - g.mean(2, keepdims=True)) / np.sqrt(g.var(2, keepdims=True) + EPS))
        ref = ref.reshape(ac.shape) * _per_unit(_np(gn.weight), ac) + _per_unit(_np(gn.bias), ac)
        np.testing.assert_allclose(_np(gn(xc)), ref, atol=1e-5)


@pytest.mark.parametrize("name", ["weightnorm", "weightnorm_meanonly_bn", "weightnorm_varonly_bn"])
@pytest.mark.parametrize("arch", ["mlp", "vgg"])
def test_weight_norm_maps_are_g_v_over_norm_v(name, arch):
    torch.manual_seed(0)
    cfg = {"arch": arch, "depth": 2, "width": 6, "channels": [4, "M", 6]}
    net = models.build_model(cfg, name, (2,) if arch == "mlp" else (1, 4, 4), 2)
    for blk in models.blocks(net):
        p = blk.linear.parametrizations.weight
        v, g = _np(p.original1), _np(p.original0)
        norms = np.sqrt((v.reshape(v.shape[0], -1) ** 2).sum(1))
        np.testing.assert_allclose(g.reshape(-1), norms, rtol=1e-6)  # init: w equals v
        with torch.no_grad():
            p.original0.mul_(torch.linspace(0.5, 2, g.shape[0]).view(g.shape))
        ref = _np(p.original0).reshape(-1, *[1] * (v.ndim - 1)) * v / norms.reshape(
            -1, *[1] * (v.ndim - 1))
        np.testing.assert_allclose(_np(blk.linear.weight), ref, rtol=1e-5)


@pytest.mark.parametrize("kind", ["fc", "conv"])
def test_mean_only_and_variance_only_bn(kind):
    x = _x(kind)
    a, u = _np(x), _units(_np(x))
    mo = _layer("weightnorm_meanonly_bn", 5, kind).train()
    assert [n for n, _ in mo.named_parameters()] == ["bias"]
    ref = a - _per_unit(u.mean(1), a) + _per_unit(_np(mo.bias), a)
    np.testing.assert_allclose(_np(mo(x)), ref, atol=1e-5)
    vo = _layer("weightnorm_varonly_bn", 5, kind).train()
    ref = a / np.sqrt(_per_unit(u.var(1), a) + EPS) * _per_unit(_np(vo.weight), a)
    ref = ref + _per_unit(_np(vo.bias), a)  # the input is scaled, never centered
    np.testing.assert_allclose(_np(vo(x)), ref, atol=1e-5)
    for layer in (mo, vo):  # BN's running buffers, used in eval mode
        np.testing.assert_allclose(_np(layer.running_mean), 0.1 * u.mean(1), atol=1e-6)
        np.testing.assert_allclose(_np(layer.running_var), 0.9 + 0.1 * u.var(1, ddof=1),
                                   atol=1e-5)
    mo.eval()
    vo.eval()
    np.testing.assert_allclose(_np(mo(x)), a - _per_unit(_np(mo.running_mean - mo.bias), a),
                               atol=1e-5)
    ref = a / np.sqrt(_per_unit(_np(vo.running_var), a) + EPS) * _per_unit(_np(vo.weight), a)
    np.testing.assert_allclose(_np(vo(x)), ref + _per_unit(_np(vo.bias), a), atol=1e-5)


@pytest.mark.parametrize("kind", ["fc", "conv"])
@pytest.mark.parametrize("name, p", [("l1norm", 1), ("l2norm", 2), ("linfnorm", math.inf)])
def test_lp_normalization_divides_by_uncentered_average_lp_norm(kind, name, p):
    x = _x(kind, shift=3.0)  # a large mean: the scale must include it (taken before centering)
    a, u = _np(x), _units(_np(x))
    layer = _layer(name, 5, kind).train()
    mean = u.mean(1)
    scale = np.abs(u).max(1) if p == math.inf else (np.abs(u) ** p).mean(1) ** (1 / p)
    w, b = _per_unit(_np(layer.weight), a), _per_unit(_np(layer.bias), a)
    ref = (a - _per_unit(mean, a)) / (_per_unit(scale, a) + EPS) * w + b
    np.testing.assert_allclose(_np(layer(x)), ref, atol=1e-5)
    np.testing.assert_allclose(_np(layer.running_mean), 0.1 * mean, atol=1e-6)
    np.testing.assert_allclose(_np(layer.running_scale), 0.9 + 0.1 * scale, atol=1e-5)
    layer.eval()
    rm, rs = _np(layer.running_mean), _np(layer.running_scale)
    ref = (a - _per_unit(rm, a)) / (_per_unit(rs, a) + EPS) * w + b
    np.testing.assert_allclose(_np(layer(x)), ref, atol=1e-5)
    np.testing.assert_allclose(_np(layer(x[:1])), ref[:1], atol=1e-5)  # no batch dependence


def test_instancenorm_normalizes_each_sample_and_channel_over_space():
    x = _x("conv")
    a = _np(x)
    layer = _layer("instancenorm", 5, "conv")
    m, v = a.mean((2, 3), keepdims=True), a.var((2, 3), keepdims=True)
    ref = (a - m) / np.sqrt(v + EPS) * _per_unit(_np(layer.weight), a) + _per_unit(
        _np(layer.bias), a)
    for mode in (True, False):
        np.testing.assert_allclose(_np(layer.train(mode)(x)), ref, atol=1e-5)


@pytest.mark.parametrize("n, size, expect", [(33, 16, [16, 17]), (40, 16, [16, 16, 8]),
                                             (10, 16, [10]), (32, 16, [16, 16])])
def test_ghost_batch_sizes(n, size, expect):
    assert nl.ghost_sizes(n, size) == expect


@pytest.mark.parametrize("kind", ["fc", "conv"])
def test_ghost_batchnorm_normalizes_each_virtual_batch(kind):
    x = _x(kind, n=20)
    a = _np(x)
    layer = _layer("ghost_batchnorm", 5, kind, ghost_batch_size=8).train()
    w, b = _np(layer.weight), _np(layer.bias)
    ref = np.concatenate([_bn_ref(a[s], w, b) for s in (slice(0, 8), slice(8, 16),
                                                       slice(16, 20))])
    np.testing.assert_allclose(_np(layer(x)), ref, atol=1e-5)
    u = _units(a)  # running buffers: whole-batch statistics, as BN's
    np.testing.assert_allclose(_np(layer.running_mean), 0.1 * u.mean(1), atol=1e-6)
    np.testing.assert_allclose(_np(layer.running_var), 0.9 + 0.1 * u.var(1, ddof=1), atol=1e-5)
    layer.eval()
    ref = _bn_ref(a, w, b, _np(layer.running_mean), _np(layer.running_var))
    np.testing.assert_allclose(_np(layer(x)), ref, atol=1e-5)


def test_noisy_batchnorm_without_noise_is_batchnorm():
    x = _x("conv")
    quiet = _layer("noisy_batchnorm", 5, "conv", n_mu=0.0, n_sigma=1.0, r_mu=0.0, r_sigma=0.0)
    bn = _layer("batchnorm", 5, "conv")
    quiet.load_state_dict(bn.state_dict(), strict=False)
    for mode in (True, False):
        assert torch.allclose(quiet.train(mode)(x), bn.train(mode)(x), atol=1e-6)


@pytest.mark.parametrize("kind", ["fc", "conv"])
def test_noisy_batchnorm_is_algorithm_1(kind):
    """y = s * BN(x) + m; per step and unit mu_j ~ U(-.5,.5), sigma_j ~ U(1,1.25); per sample
    m ~ U(mu_j -+ .1), s ~ N(sigma_j, .1); H, W count as batch; the eval map is E[s] BN(x)."""
    layer = _layer("noisy_batchnorm", 400, kind).train()
    x = _x(kind, n=300 if kind == "fc" else 25, c=400)
    y = layer(x)
    assert int(layer.noise_step) == 0 and torch.equal(layer(x), y)  # a step's noise is fixed
    s, m = layer.noise(x.shape, x.device, x.dtype)
    bn = _bn_ref(_np(x), _np(layer.weight), _np(layer.bias))
    np.testing.assert_allclose(_np(y), _np(s) * bn + _np(m), atol=1e-4)
    su, mu_ = _units(_np(s)), _units(_np(m))  # (units, samples x positions)
    centers, sig = (mu_.max(1) + mu_.min(1)) / 2, su.mean(1)
    assert np.all(np.abs(centers) <= 0.5 + 0.01) and centers.min() < -0.4 < 0.4 < centers.max()
    assert np.all(mu_.max(1) - mu_.min(1) <= 0.2) and np.all(mu_.max(1) - mu_.min(1) > 0.19)
    assert abs(np.var(centers) - 1 / 12) < 0.02  # U(-.5, .5) across units
    assert np.all((sig > 1 - 0.03) & (sig < 1.25 + 0.03))
    assert abs(su.std(1).mean() - 0.1) < 0.005
    np.testing.assert_allclose(mu_.var(1).mean(), 0.2 ** 2 / 12, rtol=0.05)
    layer.set_step(1)
    y2 = layer(x)  # a new step draws new distribution parameters
    assert not torch.allclose(y, y2)
    layer.eval()
    ref = _bn_ref(_np(x), _np(layer.weight), _np(layer.bias), _np(layer.running_mean),
                  _np(layer.running_var))
    np.testing.assert_allclose(_np(layer(x)), 1.125 * ref, atol=1e-4)
    off = _layer("noisy_batchnorm", 400, kind, eval_noise="off").eval()
    off.load_state_dict(layer.state_dict())
    np.testing.assert_allclose(_np(off(x)), ref, atol=1e-4)


def test_noisy_batchnorm_noise_follows_its_buffers():
    a, b = _layer("noisy_batchnorm", 4, "fc"), _layer("noisy_batchnorm", 4, "fc")
    torch.manual_seed(5)
    c = normalizers.get("noisy_batchnorm").layer(4, "fc")
    c.load_state_dict(a.state_dict())
    x = _x("fc", c=4)
    assert torch.equal(a.train()(x), c.train()(x))  # same seed and step: same noise
    b.noise_seed.add_(1)
    assert not torch.allclose(a(x), b.train()(x))


def test_bias_init_baselines():
    cfg = {"arch": "mlp", "depth": 2, "width": 3000, "bias_init": "random", "bias_std": 0.1}
    torch.manual_seed(0)
    zero = models.build_model(cfg, "zero_bias", (2,), 2)
    assert all(torch.all(m.bias == 0) for m in [b.linear for b in models.blocks(zero)])
    opts = {"random_bias": {"bias_std": 0.5}}
    rnd = models.build_model({**cfg, "norm_options": opts}, "random_bias", (2,), 2)
    for blk in models.blocks(rnd):
        b = blk.linear.bias
        assert abs(b.std().item() - 0.5) < 0.03 and b.mean().abs() < 0.03
        assert isinstance(blk.norm, nn.Identity)
    rnd = models.build_model(cfg, "random_bias", (2,), 2)  # default: the model's bias_std
    assert abs(models.blocks(rnd)[0].linear.bias.std().item() - 0.1) < 0.01
    none = models.build_model({**cfg, "bias_init": "zero"}, "none", (2,), 2)
    assert torch.all(models.blocks(none)[0].linear.bias == 0)


@pytest.mark.parametrize("name", ["batchnorm", "noisy_batchnorm", "ghost_batchnorm",
                                  "weightnorm_meanonly_bn", "weightnorm_varonly_bn", "l1norm",
                                  "l2norm", "linfnorm"])
def test_batch_statistics_layers_take_population_statistics(name):
    """Recomputed statistics of the first layer: mean and biased variance (BN variants) or mean
    and l_p scale (l_p norms) of its input over the whole set, in one pass or in chunks."""
    torch.manual_seed(0)
    x = torch.randn(64, 3) * 2 + 1
    net = models.build_model({"arch": "mlp", "depth": 2, "width": 6}, name, (3,), 2)
    assert len(normalizers.batch_statistics_layers(net)) == 2
    h = _np(models.blocks(net)[0].linear(x))
    p = {"l1norm": 1, "l2norm": 2, "linfnorm": math.inf}.get(name)
    for chunk in (4096, 10):
        layer = normalizers.batch_statistics_layers(
            generalization.recompute_bn_statistics(net, x, chunk=chunk))[0]
        np.testing.assert_allclose(_np(layer.running_mean), h.mean(0), atol=1e-5)
        if p is None:
            np.testing.assert_allclose(_np(layer.running_var), h.var(0), rtol=1e-5)
        else:
            scale = np.abs(h).max(0) if p == math.inf else (np.abs(h) ** p).mean(0) ** (1 / p)
            np.testing.assert_allclose(_np(layer.running_scale), scale, rtol=1e-5)
