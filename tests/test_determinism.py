"""Exact replays on CUDA (issue 22, item 3): global pooling without adaptive pools (whose CUDA
backward is nondeterministic) gives the old values and gradients exactly; resolving a device
configures deterministic kernels and TF32 off on CUDA and leaves the CPU alone."""

import copy

import pytest
import torch
from torch import nn

from bnstudy import provenance
from bnstudy.networks import models, pooling
from bnstudy.train import loop


def _old_pooling(net: nn.Module) -> nn.Module:
    """The model as it was built before: AdaptiveMaxPool2d(1) + Flatten in ResNet9's
    features, adaptive_avg_pool2d in Net.forward."""
    old = copy.deepcopy(net)
    feats = old.features
    for i, m in enumerate(feats):
        if isinstance(m, pooling.GlobalMaxPool):
            feats[i] = nn.Sequential(nn.AdaptiveMaxPool2d(1), nn.Flatten())
    if old.conv and old.pool:
        inner = old.features

        class Old(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = old

            def forward(self, x):
                h = inner(x.reshape(x.shape[0], *old.input_shape))
                return old.head(torch.flatten(nn.functional.adaptive_avg_pool2d(h, 1), 1))

        return Old()
    return old


@pytest.mark.parametrize("arch,shape", [("resnet9", (3, 16, 16)), ("resnet18", (3, 16, 16)),
                                        ("vgg", (1, 8, 8)), ("resnet9", (1, 8, 8))])
@pytest.mark.parametrize("norm", ["none", "batchnorm"])
def test_global_pooling_equals_the_adaptive_pools_values_and_gradients(arch, shape, norm):
    torch.manual_seed(0)
    cfg = {"arch": arch, "width": 4} if arch != "vgg" else {"arch": "vgg", "width_mult": 0.125}
    net = models.build_model(cfg, norm, shape, 10)
    old = _old_pooling(net)
    x = torch.randn(6, *shape)
    y = torch.randint(0, 10, (6,))
    outs, grads = [], []
    for m in (net, old):
        m.zero_grad()
        out = m(x)
        nn.functional.cross_entropy(out, y).backward()
        outs.append(out.detach())
        grads.append([p.grad.clone() for p in m.parameters()])
    assert torch.equal(outs[0], outs[1])
    for a, b in zip(*grads, strict=True):
        assert torch.allclose(a, b, rtol=0, atol=1e-7)


def test_no_adaptive_pool_left_in_any_conv_model():
    for arch in ("resnet9", "resnet18", "vgg", "cnn"):
        net = models.build_model({"arch": arch, "width": 4, "width_mult": 0.125}
                                 if arch in ("vgg", "cnn") else {"arch": arch, "width": 4},
                                 "batchnorm", (3, 32, 32), 10)
        kinds = {type(m).__name__ for m in net.modules()}
        assert not any(k.startswith("Adaptive") for k in kinds), (arch, kinds)


def test_deterministic_training_step_under_deterministic_algorithms():
    torch.use_deterministic_algorithms(True)
    try:
        torch.manual_seed(0)
        net = models.build_model({"arch": "resnet9", "width": 4}, "batchnorm", (3, 16, 16), 10)
        x, y = torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,))
        nn.functional.cross_entropy(net(x), y).backward()  # no op refuses determinism
    finally:
        torch.use_deterministic_algorithms(False)


def test_resolving_the_cpu_leaves_global_settings_alone():
    before = torch.are_deterministic_algorithms_enabled()
    assert loop.resolve_device("cpu").type == "cpu"
    assert torch.are_deterministic_algorithms_enabled() == before
    s = provenance.precision()
    assert set(s) == {"deterministic_algorithms", "tf32"}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_resolving_cuda_turns_on_determinism_and_tf32_off():
    loop.resolve_device("cuda")
    assert torch.are_deterministic_algorithms_enabled()
    assert not torch.backends.cuda.matmul.allow_tf32
    assert not torch.backends.cudnn.allow_tf32
