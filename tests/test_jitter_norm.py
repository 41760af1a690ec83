"""Jitter-augmented BN (BN-Explained §5): the extra variance of mu and sigma, measured by Monte
Carlo through the layer's forward map, is the configured fraction of the batch's own; eval mode
and extra_variance 0 are plain BN; the noise is a function of the step; inside a network the
increase is the configured fraction at every layer (calibrated to the empirical batch-to-batch
variance, not the i.i.d. plug-in)."""

import math

import pytest
import torch
from specs import make_spec

from bnstudy.networks import normalizers
from bnstudy.networks.norms import jitter
from bnstudy.train import loop as training


def _used_statistics(layer, x):
    """``(mu_used, sigma_used)`` read off the forward map: with gamma = 1, beta = 0 the output of
    each unit is ``(x - mu) / sigma``, so two samples give ``sigma`` and ``mu``."""
    with torch.no_grad():
        y = layer(x)
    rows = lambda t: t.transpose(0, 1).reshape(t.shape[1], -1)  # noqa: E731
    xr, yr = rows(x), rows(y)
    lo, hi = xr.argmin(1, keepdim=True), xr.argmax(1, keepdim=True)  # two distinct values
    (x0, x1), (y0, y1) = ((t.gather(1, lo)[:, 0], t.gather(1, hi)[:, 0]) for t in (xr, yr))
    sigma = (x1 - x0) / (y1 - y0)
    return x0 - y0 * sigma, sigma


@pytest.mark.parametrize("f, shape", [(0.15, (32, 300)), (0.5, (32, 300)),
                                      (0.5, (4, 300, 2, 2))])  # conv: N x H x W values per unit
def test_extra_variance_of_mu_and_sigma_is_the_configured_fraction(f, shape):
    torch.manual_seed(0)
    layer = normalizers.get("batchnorm_jitter", {"extra_variance": f}).layer(
        shape[1], "fc" if len(shape) == 2 else "conv").double().train()
    g = torch.Generator().manual_seed(1)
    mu_b, sigma_b, mu_u, sigma_u = [], [], [], []
    for step in range(200):  # 200 steps x 300 units of Gaussian batches
        normalizers.set_step(layer, step)
        x = torch.randn(*shape, generator=g, dtype=torch.float64) * 2 + 1
        dims = (0, *range(2, x.dim()))
        mu_b.append(x.mean(dims))
        sigma_b.append(torch.sqrt(x.var(dims, unbiased=False) + layer.eps))
        mu, sigma = _used_statistics(layer, x)
        mu_u.append(mu)
        sigma_u.append(sigma)
    var = lambda v: torch.stack(v).var(0).mean().item()  # noqa: E731 (per unit, then averaged)
    assert var(mu_u) / var(mu_b) == pytest.approx(1 + f, abs=0.03)
    assert var(sigma_u) / var(sigma_b) == pytest.approx(1 + f, abs=0.04)
    # unbiased noise: the used statistics are centred on the batch's
    assert (torch.stack(mu_u) - torch.stack(mu_b)).mean().abs() < 0.01
    assert (torch.stack(sigma_u) / torch.stack(sigma_b)).mean().item() == pytest.approx(1, abs=2e-3)


def test_gaussian_relative_variance_of_sigma_closed_form():
    m = 50
    draws = torch.randn(200000, m, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    s = draws.var(1, unbiased=False).sqrt()
    assert jitter.gaussian_rel_var(m) == pytest.approx((s.var() / (s * s).mean()).item(),
                                                       rel=0.02)
    assert jitter.gaussian_rel_var(m) == pytest.approx(1 / (2 * m), rel=0.05)


def test_eval_mode_and_zero_extra_variance_are_plain_batchnorm():
    torch.manual_seed(0)
    x = torch.randn(16, 5) * 3 + 2
    for f in (0.0, 0.3):
        layer = jitter.JitterBatchNorm(5, f)
        normalizers.set_step(layer, 7)
        ref, train = torch.nn.BatchNorm1d(5).train(), layer(x)  # train: updates running stats
        ref_out = ref(x)
        torch.testing.assert_close(layer.running_mean, ref.running_mean)
        torch.testing.assert_close(layer.running_var, ref.running_var)
        assert torch.allclose(train, ref_out, atol=1e-5) == (f == 0)
        layer.eval()
        ref.eval()
        torch.testing.assert_close(layer(x), ref(x))  # eval: no noise, running statistics
        assert torch.equal(layer(x), layer(x))


def test_noise_is_a_function_of_the_step():
    torch.manual_seed(0)
    layer = jitter.JitterBatchNorm(6, 0.3).train()
    x = torch.randn(20, 6, 3, 3)
    outs = []
    for step in (1, 1, 2):
        normalizers.set_step(layer, step)
        outs.append(layer(x))
    assert torch.equal(outs[0], outs[1]) and not torch.allclose(outs[0], outs[2])


def test_bad_extra_variance_is_named():
    for bad in (-0.1, math.inf, "x", True):
        with pytest.raises(ValueError, match="extra_variance.*finite number >= 0"):
            normalizers.get("batchnorm_jitter", {"extra_variance": bad})
    with pytest.raises(ValueError, match="more than 1 value per unit"):
        jitter.JitterBatchNorm(3).train()(torch.randn(1, 3))


@pytest.mark.parametrize("model", [{"arch": "mlp", "depth": 3, "width": 32},
                                   {"arch": "resnet9", "width": 4}])
def test_increase_is_the_configured_fraction_at_every_layer_of_a_network(digits, model):
    """Deeper layers' batch statistics vary less than the i.i.d. plug-in says (the samples of a
    batch share the earlier layers' statistics): calibrated to it, var(mu_B) rose by +80% in an
    MLP's hidden layers and +38-88% in a ResNet9's for f = 0.15. Random batches of the digits
    through a fixed network, after the calibration's start has faded."""
    f, burn, steps, batch = 0.15, 250, 250, 32
    spec = make_spec(norm="batchnorm_jitter", model={
        **model, "norm_options": {"batchnorm_jitter": {"extra_variance": f}}})
    net = training.build(spec, digits).train()
    layers = [m for m in net.modules() if isinstance(m, jitter.JitterBatchNorm)]
    assert len(layers) >= 3 and all(m.extra_variance == f for m in layers)
    seen: dict = {m: [] for m in layers}

    def record(m, inp, out):  # gamma = 1, beta = 0 at init: out = (x - mu_used) / sigma_used
        x = inp[0]
        dims = (0, *range(2, x.dim()))
        mu, sigma = _used_statistics(lambda _: out, x)
        seen[m].append((x.mean(dims), (x.var(dims, unbiased=False) + m.eps).sqrt(), mu, sigma))

    hooks = [m.register_forward_hook(record) for m in layers]
    xtr, g = torch.as_tensor(digits.x_train), torch.Generator().manual_seed(0)
    with torch.no_grad():
        for step in range(burn + steps):
            normalizers.set_step(net, step)
            if step == burn:
                for v in seen.values():
                    v.clear()
            net(xtr[torch.randperm(len(xtr), generator=g)[:batch]])
    for h in hooks:
        h.remove()
    # The noise is independent of the batch, so var(used) - var(batch) = var(used - batch): the
    # increase read without the sampling noise of the cross term (a few units per conv layer).
    for k, m in enumerate(layers, 1):
        mu_b, sigma_b, mu_u, sigma_u = (torch.stack(v) for v in zip(*seen[m], strict=True))
        live = (mu_b.var(0) > 0) & (sigma_b.var(0) > 0)
        up_mu = ((mu_u - mu_b).var(0)[live] / mu_b.var(0)[live]).mean().item()
        up_sigma = ((sigma_u - sigma_b).var(0)[live] / sigma_b.var(0)[live]).mean().item()
        assert up_mu == pytest.approx(f, abs=0.03), (k, up_mu)
        assert up_sigma == pytest.approx(f, abs=0.03), (k, up_sigma)


def test_calibration_is_per_step_and_in_the_state_dict():
    """One update of the estimates per step (the first pass), the same noise in every pass of a
    step, and a layer restored from the state dict draws exactly what the original draws."""
    torch.manual_seed(0)
    layer = jitter.JitterBatchNorm(4, 0.3).train()
    g = torch.Generator().manual_seed(0)
    for step in range(5):
        normalizers.set_step(layer, step)
        layer(torch.randn(16, 4, generator=g))
    state = {k: v.clone() for k, v in layer.state_dict().items()}
    twin = jitter.JitterBatchNorm(4, 0.3).train()
    twin.load_state_dict(state)
    x = torch.randn(16, 4, generator=g)
    normalizers.set_step(layer, 5)
    normalizers.set_step(twin, 5)
    first = layer(x)
    assert int(layer.calibration_step) == 5 and not torch.equal(layer.var_mu, state["var_mu"])
    after = layer.var_mu.clone()
    assert torch.equal(layer(x), first) and torch.equal(layer.var_mu, after)  # no 2nd update
    assert torch.equal(twin(x), first)
