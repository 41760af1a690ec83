import pytest
import torch
from torch import nn

from bnstudy.networks import models


def test_mlp_structure_and_injected_norm():
    net = models.build_model({"arch": "mlp", "depth": 3, "width": 8}, "batchnorm", (2,), 2)
    blocks = models.blocks(net)
    assert len(blocks) == 3
    assert all(isinstance(b.norm, nn.BatchNorm1d) for b in blocks)
    assert all(b.linear.bias is None for b in blocks), "BN's beta makes the linear bias redundant"
    assert net(torch.randn(5, 2)).shape == (5, 2)


def test_no_norm_keeps_bias_and_leaky_slope():
    net = models.build_model({"arch": "mlp", "depth": 2, "width": 4, "slope": 0.1}, "none",
                             (3,), 1)
    b = models.blocks(net)[0]
    assert isinstance(b.norm, nn.Identity) and b.linear.bias is not None
    assert isinstance(b.act, nn.LeakyReLU) and b.act.negative_slope == 0.1


def test_dln_is_a_product_of_matrices():
    torch.manual_seed(0)
    net = models.build_model({"arch": "dln", "depth": 5, "init": "xavier"}, "none", (4,), 4)
    assert len(models.blocks(net)) == 4
    prod = torch.eye(4)
    for b in models.blocks(net):
        prod = b.linear.weight @ prod
    prod = net.head.weight @ prod
    x = torch.randn(7, 4)
    assert torch.allclose(net(x), x @ prod.T, atol=1e-5)


def test_dln_needs_square_maps():
    with pytest.raises(ValueError, match="square"):
        models.build_model({"arch": "dln", "depth": 3}, "none", (4,), 2)


def test_vgg_on_8x8_and_32x32():
    cfg = {"arch": "vgg", "channels": [8, "M", 16, "M", 32], "width_mult": 0.5}
    net = models.build_model(cfg, "batchnorm", (1, 8, 8), 10)
    assert net(torch.randn(4, 64)).shape == (4, 10)
    convs = [b.linear for b in models.blocks(net)]
    assert [c.out_channels for c in convs] == [4, 8, 16]
    assert all(isinstance(b.norm, nn.BatchNorm2d) for b in models.blocks(net))
    net = models.build_model(cfg, "groupnorm", (3, 32, 32), 10)
    assert net(torch.randn(2, 3, 32, 32)).shape == (2, 10)


def test_kaiming_init_variance():
    torch.manual_seed(0)
    net = models.build_model({"arch": "mlp", "depth": 1, "width": 2000}, "none", (500,), 2)
    w = models.blocks(net)[0].linear.weight
    assert abs(w.var().item() - 2 / 500) < 0.05 * 2 / 500
    assert torch.all(models.blocks(net)[0].linear.bias == 0)


def test_random_bias_init():
    torch.manual_seed(0)
    cfg = {"arch": "mlp", "depth": 1, "width": 4000, "bias_init": "random", "bias_std": 0.5}
    b = models.blocks(models.build_model(cfg, "none", (2,), 2))[0].linear.bias
    assert abs(b.std().item() - 0.5) < 0.03


def test_weightnorm_starts_at_the_initialized_weight():
    torch.manual_seed(0)
    net = models.build_model({"arch": "mlp", "depth": 2, "width": 6}, "weightnorm", (3,), 2)
    lin = models.blocks(net)[0].linear
    p = lin.parametrizations.weight
    assert torch.allclose(lin.weight, p.original1, atol=1e-6)
    names = {n for n, _ in net.named_parameters()}
    assert any("original0" in n for n in names) and any("original1" in n for n in names)


def test_bad_config_values_are_named():
    with pytest.raises(ValueError, match="unknown model arch 'resnet'.*mlp, dln, vgg"):
        models.ModelConfig.from_dict({"arch": "resnet"})
    with pytest.raises(ValueError, match="unknown model option.*'widht'"):
        models.ModelConfig.from_dict({"arch": "mlp", "widht": 3})
    with pytest.raises(ValueError, match="unknown normalizer 'bn'.*batchnorm"):
        models.build_model({"arch": "mlp"}, "bn", (2,), 2)


@pytest.mark.parametrize("slope,act", [(1.0, lambda h: h), (0.0, torch.relu)])
def test_unit_is_luos_single_layer_student(slope, act):
    """``unit``: y = g(gamma (w^T x - mu_B) / sigma_B) with beta frozen at 0 and no head."""
    torch.manual_seed(0)
    cfg = {"arch": "unit", "slope": slope, "init": "orthogonal"}
    net = models.build_model(cfg, "batchnorm", (6,), 1)
    assert isinstance(net.head, nn.Identity) and len(models.blocks(net)) == 1
    names = sorted(n for n, _ in net.named_parameters())
    assert names == ["features.0.linear.weight", "features.0.norm.weight"], names
    assert "features.0.norm.bias" in dict(net.named_buffers())  # beta: a zero buffer
    w = net.features[0].linear.weight.detach()
    assert w.norm() == pytest.approx(1.0)
    with torch.no_grad():
        net.features[0].norm.weight.fill_(1.7)
        x = torch.randn(32, 6)
        h = x @ w.T
        ref = 1.7 * (h - h.mean()) / torch.sqrt(h.var(unbiased=False) + 1e-5)
        assert torch.allclose(net.train()(x), act(ref), atol=1e-5)
    plain = models.build_model(cfg, "none", (6,), 1)
    assert [n for n, _ in plain.named_parameters()] == ["features.0.linear.weight"]
    with torch.no_grad():
        assert torch.allclose(plain(x), act(x @ plain.features[0].linear.weight.T))
    assert isinstance(models.blocks(plain)[0].act, nn.Identity if slope == 1 else nn.ReLU)
