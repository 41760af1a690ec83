"""bnstudy's SGD against torch.optim.SGD: bitwise the same parameters, momentum buffers and
state_dict over many steps (learning-rate changes, weight decay, dampening, Nesterov, several
param groups), states exchangeable both ways, and clear errors for what it does not do."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from bnstudy.train import sgd


def _net(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 3))


def _steps(net: nn.Module, opt, n: int, seed: int = 1, lrs=None) -> None:
    gen = torch.Generator().manual_seed(seed)
    for t in range(n):
        if lrs is not None:
            for g in opt.param_groups:
                g["lr"] = lrs[t]
        x, y = torch.randn(8, 5, generator=gen), torch.randint(0, 3, (8,), generator=gen)
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(net(x), y).backward()
        opt.step()


def _same_params(a: nn.Module, b: nn.Module) -> None:
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(p, q), name


def _same_state(a: dict, b: dict) -> None:
    assert a["param_groups"] == b["param_groups"]
    assert a["state"].keys() == b["state"].keys()
    for k, s in a["state"].items():
        assert s.keys() == b["state"][k].keys()
        for key, v in s.items():
            assert torch.equal(v, b["state"][k][key]), (k, key)


OPTIONS = [
    {"lr": 0.05},
    {"lr": 0.05, "momentum": 0.9},
    {"lr": 0.1, "momentum": 0.9, "weight_decay": 5e-4},
    {"lr": 0.1, "momentum": 0.5, "dampening": 0.3, "weight_decay": 1e-3},
    {"lr": 0.02, "momentum": 0.9, "nesterov": True, "weight_decay": 1e-4},
]


@pytest.mark.parametrize("options", OPTIONS)
def test_bitwise_torch_sgd_over_many_steps(options):
    ours, theirs = _net(), _net()
    a, b = sgd.SGD(ours.parameters(), **options), torch.optim.SGD(theirs.parameters(), **options)
    lrs = [options["lr"] * (1 + (t % 7) / 3) for t in range(60)]  # a schedule's changes
    _steps(ours, a, 60, lrs=lrs)
    _steps(theirs, b, 60, lrs=lrs)
    _same_params(ours, theirs)
    _same_state(a.state_dict(), b.state_dict())


def test_several_groups_as_the_ics_copy_builds_them():
    ours, theirs = _net(), _net()

    def groups(net):
        ps = list(net.parameters())
        return [{"params": ps[:2], "lr": 0.0}, {"params": ps[2:], "lr": 0.1}]

    a = sgd.SGD(groups(ours), lr=0.05, momentum=0.9)
    b = torch.optim.SGD(groups(theirs), lr=0.05, momentum=0.9)
    _steps(ours, a, 10)
    _steps(theirs, b, 10)
    _same_params(ours, theirs)
    _same_state(a.state_dict(), b.state_dict())
    assert torch.equal(ours[0].weight, _net()[0].weight)  # lr 0: untouched


@pytest.mark.parametrize("load_into", ["ours", "torch"])
def test_states_load_both_ways_and_continue_identically(load_into):
    options = {"lr": 0.05, "momentum": 0.9, "weight_decay": 1e-4}
    net = _net()
    start = torch.optim.SGD(net.parameters(), **options) if load_into == "ours" \
        else sgd.SGD(net.parameters(), **options)
    _steps(net, start, 5)
    saved = copy.deepcopy(start.state_dict())
    ref, other = copy.deepcopy(net), copy.deepcopy(net)
    ref_opt = type(start)(ref.parameters(), **options)
    ref_opt.load_state_dict(copy.deepcopy(saved))
    cls = sgd.SGD if load_into == "ours" else torch.optim.SGD
    other_opt = cls(other.parameters(), **options)
    other_opt.load_state_dict(copy.deepcopy(saved))
    _steps(ref, ref_opt, 5, seed=2)
    _steps(other, other_opt, 5, seed=2)
    _same_params(ref, other)


def test_a_loaded_state_does_not_share_buffers_with_the_dict():
    net = _net()
    opt = sgd.SGD(net.parameters(), lr=0.1, momentum=0.9)
    _steps(net, opt, 2)
    saved = opt.state_dict()
    other = sgd.SGD(copy.deepcopy(net).parameters(), lr=0.1, momentum=0.9)
    other.load_state_dict(saved)
    before = {k: s["momentum_buffer"].clone() for k, s in saved["state"].items()}
    _steps(net, opt, 1)  # moves opt's own buffers, which saved references (as torch's does)
    for k, s in other.state_dict()["state"].items():
        assert torch.equal(s["momentum_buffer"], before[k])


def test_grads_none_are_skipped_like_torch():
    ours, theirs = _net(), _net()
    a = sgd.SGD(ours.parameters(), lr=0.1, momentum=0.9)
    b = torch.optim.SGD(theirs.parameters(), lr=0.1, momentum=0.9)
    for net, opt in ((ours, a), (theirs, b)):
        opt.zero_grad()
        net[-1].weight.grad = torch.ones_like(net[-1].weight)
        opt.step()
    _same_params(ours, theirs)
    _same_state(a.state_dict(), b.state_dict())


@pytest.mark.parametrize("kwargs, words", [
    ({"lr": -0.1}, "lr=-0.1"),
    ({"lr": 0.1, "momentum": -1}, "momentum=-1"),
    ({"lr": 0.1, "nesterov": True}, "nesterov=True needs momentum > 0"),
    ({"lr": 0.1, "maximize": True}, "maximize=True"),
    ({"lr": 0.1, "fused": True}, "fused=True"),
])
def test_bad_options_are_named(kwargs, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(")):
        sgd.SGD(_net().parameters(), **kwargs)
    with pytest.raises(TypeError, match="unknown options"):
        sgd.SGD(_net().parameters(), lr=0.1, betas=(0.9, 0.99))


def test_a_mismatched_state_is_refused():
    opt = sgd.SGD(_net().parameters(), lr=0.1, momentum=0.9)
    small = sgd.SGD(nn.Linear(2, 2).parameters(), lr=0.1, momentum=0.9)
    with pytest.raises(ValueError, match="do not match"):
        opt.load_state_dict(small.state_dict())


def test_make_is_ours_on_the_cpu():
    assert isinstance(sgd.make(list(_net().parameters()), 0.1, 0.9, 0.0), sgd.SGD)
