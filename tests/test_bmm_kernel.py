"""The hand-written stacked forward (:mod:`bnstudy.train.bmm`) against vmap's kernels.

A block steps fully connected nets through :func:`bnstudy.train.bmm.forward` instead of
``vmap(functional_call(...))``; every stored run was trained through vmap. Checked bitwise over
several SGD steps with momentum: the stacked weights, BN's running statistics and batch counts
after training through either kernel, for the nets the studies train (MLP with and without BN,
leaky ReLU, the deep linear net, Luo's one-unit student with its frozen shift), at
K = 1 (the ghost slot), 3 and 16. And the nets it does not take go through vmap.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from bnstudy.networks import models
from bnstudy.train import bmm
from bnstudy.train.stacked import Stacked

CASES = {
    "mlp none": ("mlp", "none", {"depth": 3, "width": 16}, 4, 3),
    "mlp bn": ("mlp", "batchnorm", {"depth": 3, "width": 16}, 4, 3),
    "mlp bn K=1": ("mlp", "batchnorm", {"depth": 3, "width": 16}, 4, 1),
    "mlp bn K=16": ("mlp", "batchnorm", {"depth": 2, "width": 8}, 4, 16),
    "leaky bn": ("mlp", "batchnorm", {"depth": 2, "width": 8, "slope": 0.1}, 4, 3),
    "dln none": ("dln", "none", {"depth": 8, "width": 10}, 10, 3),
    "dln bn": ("dln", "batchnorm", {"depth": 8, "width": 10}, 10, 3),
    "unit bn": ("unit", "batchnorm", {}, 1, 2),
    "unit none": ("unit", "none", {}, 1, 2),
}


def _mse(out, y):
    return ((out.squeeze(-1) - y) ** 2).mean()


def _train(arch, norm, options, out_dim, k, hand: bool, steps: int = 8):
    cfg = models.ModelConfig(arch=arch, **options)
    nets = []
    for seed in range(k):
        torch.manual_seed(seed)
        nets.append(models.build_model(cfg, norm, (10,), out_dim))
    regression = arch == "unit"
    lr = 1e-4 if arch == "dln" else 0.01  # the plain DLN blows up at 0.01
    kern = Stacked(nets, lambda m, _c: torch.optim.SGD(m.parameters(), lr=lr, momentum=0.9),
                   None, _mse if regression else nn.functional.cross_entropy)
    assert kern.program is not None
    if not hand:
        kern.program = None
    gen = torch.Generator().manual_seed(1)
    for _ in range(steps):
        xs = torch.randn(k, 24, 10, generator=gen)
        ys = (torch.randn(k, 24, generator=gen) if regression
              else torch.randint(0, out_dim, (k, 24), generator=gen))
        kern.optimizer.zero_grad()
        kern.losses(xs, ys).sum().backward()
        kern.optimizer.step()
    return [t.detach().clone() for t in kern.p] + [t.clone() for t in kern.b]


@pytest.mark.parametrize("case", list(CASES))
def test_the_hand_written_kernel_is_bitwise_vmaps(case):
    hand = _train(*CASES[case], hand=True)
    vmapped = _train(*CASES[case], hand=False)
    assert len(hand) == len(vmapped)
    for a, b in zip(hand, vmapped, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert torch.isfinite(a).all() and torch.equal(a, b), case
    moved = _train(*CASES[case], hand=True, steps=1)
    assert any(not torch.equal(a, b) for a, b in zip(moved, hand, strict=True))


def test_it_leaves_to_vmap_what_it_does_not_run():
    def net(arch, norm, shape=(10,), **options):
        torch.manual_seed(0)
        return models.build_model(models.ModelConfig(arch=arch, **options), norm, shape, 4)

    def names(m):
        return [n for n, _ in m.named_parameters()] + [n for n, _ in m.named_buffers()]

    fc = net("mlp", "batchnorm", depth=2, width=8)
    assert [layer.kind for layer in bmm.program(fc, names(fc))] == [
        "linear", "bn", "relu", "linear", "bn", "relu", "linear"]
    for other in (net("mlp", "layernorm", depth=2, width=8),
                  net("mlp", "none", depth=2, width=8, dropout=0.1),
                  net("vgg", "batchnorm", shape=(1, 8, 8), channels=[4, "M"])):
        assert bmm.program(other, names(other)) is None
