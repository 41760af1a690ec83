"""population_norm's gamma decay (Luo Eq. 3 / App. C.4, networks/norms/population_decay.py)
against a Monte Carlo of what it approximates: the expected increase of the loss when a PN
layer's population statistics are replaced by those of a random batch of M samples (one layer at
a time, the others at their population statistics), less its first-order part (the term Eq. 3
drops, App. C.1's R^f), summed over layers."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch.func import functional_call

from bnstudy.networks import models, normalizers
from bnstudy.networks.norms import population as npop

EPS = 1e-5


def _loss(pred, y, task):
    return F.cross_entropy(pred, y) if task == "classification" else F.mse_loss(pred, y)


def _forward_with(net, pn, fn, x):
    handle = pn.register_forward_hook(lambda mod, inp, out: fn(mod, inp[0]))
    try:
        return net(x)
    finally:
        handle.remove()


def batch_noise_quadratic(net, x, y, task, m, draws, gen):
    """Monte Carlo over ``draws`` batches per layer of E[L(batch stats) - L(population stats) -
    first-order term], the first-order term computed exactly for each draw."""
    net.eval()
    with torch.no_grad():
        base = float(_loss(net(x), y, task))
    total = 0.0
    for blk in models.blocks(net):
        pn = blk.norm
        got = []
        with torch.no_grad():
            _forward_with(net, pn, lambda mod, h, got=got: got.append(h), x)
        h = got[0].double()
        dims = tuple(range(2, h.dim()))
        s1, s2 = (h.sum(dims), (h * h).sum(dims)) if dims else (h, h * h)
        npos = h[0, 0].numel()
        mu_p, var_p = (v.detach().double() for v in pn.population_stats())
        sp = torch.sqrt(var_p + EPS)
        net.zero_grad()
        _loss(net(x), y, task).backward()
        g_gamma = pn.weight.grad.double()
        g_beta = torch.zeros_like(g_gamma) if pn.bias.grad is None else pn.bias.grad.double()
        gamma = pn.weight.detach().double()
        out = []
        for _ in range(draws):
            idx = torch.randint(0, len(x), (m,), generator=gen)
            mu = s1[idx].sum(0) / (m * npos)
            sb = torch.sqrt(s2[idx].sum(0) / (m * npos) - mu * mu + EPS)
            shape = (1, -1) + (1,) * len(dims)

            def swap(mod, hin, mu=mu, sb=sb, shape=shape):
                n = (hin - mu.view(shape).to(hin.dtype)) / sb.view(shape).to(hin.dtype)
                return n * mod.weight.view(shape) + mod.bias.view(shape)

            with torch.no_grad():
                loss = float(_loss(_forward_with(net, pn, swap, x), y, task))
            first = (gamma * ((sp / sb - 1) * g_gamma + (mu_p - mu) / sb * g_beta)).sum()
            out.append(loss - base - float(first))
        total += float(np.mean(out))
    return total


def _decay(net):
    return sum(float((b.norm.zeta * b.norm.weight.detach() ** 2).sum())
               for b in models.blocks(net))


def _digits(conv):
    d = load_digits()
    x = torch.tensor(d.data / 16.0, dtype=torch.float32)
    return (x.reshape(-1, 1, 8, 8) if conv else x), torch.tensor(d.target)


@pytest.mark.parametrize("arch", ["mlp", "conv"])
def test_gamma_decay_is_the_expected_loss_increase_under_batch_statistics(arch):
    """At init and after training, sum zeta gamma^2 is within 25% of the Monte Carlo (the old
    single-layer formula, sigmoid curvature of the unit's own activation, was 10-25x too strong
    at init and more after training)."""
    conv = arch == "conv"
    x, y = _digits(conv)
    cfg, shape = (({"arch": "vgg", "channels": [8, "M", 16]}, (1, 8, 8)) if conv
                  else ({"arch": "mlp", "depth": 3, "width": 64}, (64,)))
    torch.manual_seed(0)
    net = models.build_model(cfg, "population_norm", shape, 10)
    m, p = 128, 256
    ctx = normalizers.HookContext(x=x, y=y, task="classification", batch_size=m, seed=0)
    opts = {"n_samples": p, "zeta": "eq3", "zeta_batch_size": m, "zeta_probes": 16}
    sub = npop.subset(ctx, p)
    gen = torch.Generator().manual_seed(1)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for steps in (0, 150):
        for step in range(steps):
            if step % 10 == 0:
                npop.refresh(net, ctx, {**opts, "zeta": 0.0})
            b = torch.randint(0, len(x), (m,), generator=gen)
            net.train()
            opt.zero_grad()
            F.cross_entropy(net(x[b]), y[b]).backward()
            opt.step()
        npop.refresh(net, ctx, opts, step=steps)
        mc = batch_noise_quadratic(net, x[sub], y[sub], "classification", m, 120, gen)
        assert _decay(net) == pytest.approx(mc, rel=0.25), (steps, _decay(net), mc)


def test_gauss_newton_part_equals_an_exact_hessian_reference():
    """Identity activations (the Gauss-Newton part is the exact Hessian, no probes needed):
    zeta_i gamma_i^2 = gamma_i (K gamma)_i / 2 with K_ii' the batch-noise covariance of (a, b)
    times the Hessian of the mean loss in (gamma, beta), summed over the four blocks."""
    torch.manual_seed(3)
    x, y = torch.randn(60, 4), torch.randint(0, 3, (60,))
    net = models.build_model({"arch": "mlp", "depth": 2, "width": 5, "slope": 1.0},
                             "population_norm", (4,), 3)
    ctx = normalizers.HookContext(x=x, y=y, task="classification", batch_size=16, seed=0)
    npop.refresh(net, ctx, {"n_samples": 60, "zeta": 0.0})
    with torch.no_grad():
        for b in models.blocks(net):
            b.norm.weight.copy_(torch.rand(5) + 0.5)
            b.norm.bias.copy_(torch.randn(5) * 0.3)
    npop.refresh(net, ctx, {"n_samples": 60, "zeta": "eq3", "zeta_probes": 0})
    net.eval()
    params = dict(net.named_parameters())
    for k, blk in enumerate(models.blocks(net)):
        pn = blk.norm
        names = [n for n, v in params.items() if v is pn.weight or v is pn.bias]

        def loss(gb, names=names):
            gb_params = {**params, names[0]: gb[:5], names[1]: gb[5:]}
            return F.cross_entropy(functional_call(net, gb_params, (x,)), y)

        hess = torch.autograd.functional.hessian(loss, torch.cat([pn.weight, pn.bias]).detach())
        with torch.no_grad():
            h = blk.linear(x if k == 0 else _hidden(net, x, k))
            n = ((h - pn.population_stats()[0]) / torch.sqrt(pn.population_stats()[1] + EPS))
        v = torch.cat([n * n / 2, n], 1).double()
        cov = torch.cov(v.T, correction=0) / 16
        k2 = cov * hess.double()
        kmat = k2[:5, :5] + k2[:5, 5:] + k2[5:, :5] + k2[5:, 5:]
        gamma = pn.weight.detach().double()
        ref = gamma * (kmat @ gamma) / 2
        np.testing.assert_allclose((pn.zeta.double() * gamma ** 2).numpy(), ref.numpy(),
                                   rtol=1e-3, atol=1e-9)


def _hidden(net, x, k):
    got = []
    lin = models.blocks(net)[k].linear
    handle = lin.register_forward_pre_hook(lambda mod, inp: got.append(inp[0]))
    with torch.no_grad():
        net(x)
    handle.remove()
    return got[0]


@pytest.mark.parametrize("S", [0.25, 1.0])
def test_regression_zeta_uses_the_curvature_at_any_residual_variance(S):
    """Luo's linear student (S = label-noise variance): zeta against the Monte Carlo at the
    least-squares optimum. The old code's empirical Fisher equals the curvature only at S = 1
    (at S = 0.25: 1.107/M against 1.466/M)."""
    p, d_in, m = 4000, 4, 256
    g = torch.Generator().manual_seed(0)
    x = torch.randn(p, d_in, generator=g, dtype=torch.float64).float()
    sign = torch.where(torch.rand(p, 1, generator=g) < 0.5, -1.0, 1.0)
    torch.manual_seed(0)
    net = models.build_model({"arch": "unit", "slope": 1}, "population_norm", (d_in,), 1)
    ctx0 = normalizers.HookContext(x=x, y=torch.zeros(p, 1), task="regression", batch_size=m,
                                   seed=0)
    npop.refresh(net, ctx0, {"n_samples": p, "zeta": 0.0})
    with torch.no_grad():
        y = net(x) + np.sqrt(S) * sign  # residuals +-sqrt(S): gamma, beta are least squares
    ctx = normalizers.HookContext(x=x, y=y, task="regression", batch_size=m, seed=0)
    npop.refresh(net, ctx, {"n_samples": p, "zeta": "eq3", "zeta_probes": 0})
    zeta = float(models.blocks(net)[0].norm.zeta[0])
    mc = batch_noise_quadratic(net, x, y, "regression", m, 3000, g)
    gamma = float(models.blocks(net)[0].norm.weight.detach()[0])
    assert zeta * gamma ** 2 == pytest.approx(mc, rel=0.08)


def test_bad_probe_options_name_the_value():
    with pytest.raises(ValueError, match="zeta_probes=-1.*int >= 0"):
        normalizers.get("population_norm", {"zeta_probes": -1})
    x, y = torch.randn(10, 3), torch.randint(0, 2, (10,))
    net = models.build_model({"arch": "mlp", "depth": 1, "width": 4}, "population_norm", (3,), 2)
    ctx = normalizers.HookContext(x=x, y=y, task="ranking", batch_size=4, seed=0)
    with pytest.raises(ValueError, match="'ranking'.*classification, regression"):
        npop.refresh(net, ctx, {"n_samples": 10, "zeta": "eq3"})


def test_probes_are_deterministic_per_seed_and_step():
    x, y = _digits(False)
    x, y = x[:200], y[:200]
    zetas = []
    for step in (3, 3, 4):
        torch.manual_seed(0)
        net = models.build_model({"arch": "mlp", "depth": 2, "width": 8}, "population_norm",
                                 (64,), 10)
        ctx = normalizers.HookContext(x=x, y=y, task="classification", batch_size=32, seed=5)
        npop.refresh(net, ctx, {"n_samples": 200, "zeta": "eq3"}, step=step)
        zetas.append(models.blocks(net)[0].norm.zeta.clone())
    assert torch.equal(zetas[0], zetas[1]) and not torch.equal(zetas[0], zetas[2])
