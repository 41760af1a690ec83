"""Jitter-augmented BN (BN-Explained §5): the extra variance of mu and sigma, measured by Monte
Carlo through the layer's forward map, is the configured fraction of the batch's own; eval mode
and extra_variance 0 are plain BN; the noise is a function of the step."""

import math

import pytest
import torch

from bnstudy.networks import normalizers
from bnstudy.networks.norms import jitter


def _used_statistics(layer, x):
    """``(mu_used, sigma_used)`` read off the forward map: with gamma = 1, beta = 0 the output of
    each unit is ``(x - mu) / sigma``, so two samples give ``sigma`` and ``mu``."""
    with torch.no_grad():
        y = layer(x)
    rows = lambda t: t.transpose(0, 1).reshape(t.shape[1], -1)  # noqa: E731
    xr, yr = rows(x), rows(y)
    sigma = (xr[:, 1] - xr[:, 0]) / (yr[:, 1] - yr[:, 0])
    return xr[:, 0] - yr[:, 0] * sigma, sigma


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
