"""The probe (bnstudy.networks.probe) against independent computations: pre-activations from a
forward written out layer by layer, frozen copies against a train-mode pass over the whole set
(what BN computes with the population statistics), the model untouched and the hooks gone (on
exceptions too); and the layout rule it made possible: no measure imports another measure."""

from __future__ import annotations

import ast
import copy
from pathlib import Path

import pytest
import torch
from torch import nn

from bnstudy.measures.partition.options import BN_STATISTICS as PARTITION_BN_STATISTICS
from bnstudy.networks import models, probe
from bnstudy.networks.blocks import Block, Residual
from bnstudy.networks.norms.layers import set_mean_var

MEASURES = Path(__file__).resolve().parents[1] / "src" / "bnstudy" / "measures"


def _net(arch="mlp", norm="batchnorm", slope=0.0, seed=0):
    torch.manual_seed(seed)
    cfg = {"mlp": {"arch": "mlp", "depth": 3, "width": 8, "slope": slope},
           "cnn": {"arch": "cnn", "width_mult": 0.125, "slope": slope},
           "resnet18": {"arch": "resnet18", "width": 4, "slope": slope}}[arch]
    shape = (5,) if arch == "mlp" else (1, 8, 8)
    net = models.build_model(cfg, norm, shape, 3)
    with torch.no_grad():  # non-trivial affine parameters and running statistics
        for m in net.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0.0, 0.3)
                m.running_mean.normal_(0.0, 0.2)
                m.running_var.uniform_(0.5, 2.0)
    return net


def _x(arch, n=24, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 5 if arch == "mlp" else 64, generator=g)


def _by_hand(net, x, site="preact"):
    """Every block's pre-activation (``site="norm"``: its normalizer's output) from the forward
    written out module by module: no hooks, no ``Block.forward``."""
    out = []

    def block(b, h, skip=None):
        z = b.norm(b.linear(h))
        out.append(z if site == "norm" or skip is None else z + skip)
        return b.act(z if skip is None else z + skip)

    def run(m, h):
        if isinstance(m, Block):
            return block(m, h)
        if isinstance(m, Residual):
            a = block(m.first, h)
            if m.add == "post":
                return h + block(m.second, a)
            return block(m.second, a, h if m.shortcut is None else block(m.shortcut, h))
        return m(h)

    h = x.reshape(len(x), *net.input_shape) if net.conv else x
    for m in net.features:
        h = run(m, h)
    return out


def _snapshot(model):
    return ({k: v.clone() for k, v in model.state_dict().items()},
            [m.training for m in model.modules()])


def _assert_unchanged(model, snap):
    state, modes = snap
    now = model.state_dict()
    assert state.keys() == now.keys()
    assert all(torch.equal(state[k], now[k]) for k in state)
    assert [m.training for m in model.modules()] == modes
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


@pytest.mark.parametrize("arch", ["mlp", "cnn", "resnet18"])
@pytest.mark.parametrize("train", [False, True])
@pytest.mark.parametrize("site", probe.SITES)
def test_preactivations_equal_a_forward_written_out(arch, train, site):
    net = _net(arch).train(train)
    x = _x(arch)
    with torch.no_grad():
        want = _by_hand(copy.deepcopy(net), x, site)
        snap = _snapshot(copy.deepcopy(net)) if not train else None
        got = probe.preactivations(net, x, site=site)
    assert len(got) == len(models.blocks(net)) == len(want)
    assert all(torch.equal(g, w) for g, w in zip(got, want, strict=True))
    if arch == "resnet18" and site == "preact":  # the join: the sum, not the norm's output
        second = [b.join is not None for b in models.blocks(net)].index(True)
        assert not torch.equal(got[second], probe.preactivations(net, x, site="norm")[second])
    if snap is not None:  # eval mode: nothing moves, not even BN's buffers
        _assert_unchanged(net, snap)


def test_preactivations_keep_the_graph_and_pick_blocks():
    net = _net("mlp").eval()
    x = torch.zeros(1, 5, requires_grad=True)
    b = models.blocks(net)[1]
    (h,) = probe.preactivations(net, x, [b])
    (g,) = torch.autograd.grad(h.sum(), x)
    assert torch.isfinite(g).all() and g.abs().sum() > 0
    with pytest.raises(ValueError, match="unknown site"):
        probe.preactivations(net, x, site="act")


def test_preactivations_name_a_block_off_the_forward_path():
    net = _net("mlp").eval()
    stray = Block(nn.Linear(5, 2), nn.Identity(), nn.ReLU())
    with pytest.raises(RuntimeError, match=r"skipped the preact of \['block2'\]"):
        probe.preactivations(net, _x("mlp"), [models.blocks(net)[0], stray])
    _assert_unchanged(stray, _snapshot(stray))


def test_capture_and_watch_inputs_outputs_first_last():
    lin = nn.Linear(3, 2)
    x1, x2 = torch.randn(4, 3), torch.randn(4, 3)
    with probe.capture([lin], inputs=True) as last, probe.capture([lin], first=True) as first:
        lin(x1)
        y2 = lin(x2)
    assert torch.equal(last[0], x2) and torch.equal(first[0], lin(x1))
    seen = []
    with probe.watch([lin], lambda j, t: seen.append(j) or t * 0):  # a return value is ignored
        assert torch.equal(lin(x2), y2)
    assert seen == [0] and not lin._forward_hooks


@pytest.mark.parametrize("inputs", [False, True])
def test_hooks_are_removed_on_exceptions(inputs):
    net = _net("mlp").eval()
    mods = [b.norm for b in models.blocks(net)]
    with pytest.raises(KeyError), probe.capture(mods, inputs=inputs):
        assert all(m._forward_hooks or m._forward_pre_hooks for m in mods)
        raise KeyError("inside")

    def boom(j, t):
        raise ArithmeticError(f"block {j}")

    with pytest.raises(ArithmeticError, match="block 0"), probe.watch(mods, boom, inputs):
        net(_x("mlp"))
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in net.modules())


def test_training_mode_restores_each_modules_mode_on_exceptions():
    net = _net("mlp").train()
    models.blocks(net)[1].norm.eval()  # a mixed model: restored as it was, not uniformly
    snap = _snapshot(net)
    with pytest.raises(ValueError), probe.training_mode(net, False) as m:
        assert m is net and not any(x.training for x in net.modules())
        raise ValueError
    _assert_unchanged(net, snap)


def test_kinked_blocks():
    assert [i for i, _ in probe.kinked_blocks(_net("mlp", slope=0.0))] == [1, 2, 3]
    assert [i for i, _ in probe.kinked_blocks(_net("mlp", slope=0.1))] == [1, 2, 3]
    assert probe.kinked_blocks(_net("mlp", slope=1.0)) == []
    res = _net("resnet18")
    kinked = {id(b) for _, b in probe.kinked_blocks(res)}
    shortcuts = [m.shortcut for m in res.modules() if isinstance(m, Residual) and m.shortcut]
    assert shortcuts and not kinked & {id(s) for s in shortcuts}  # identity: no kink
    assert len(kinked) == len(models.blocks(res)) - len(shortcuts)
    assert not probe.kinked(nn.LeakyReLU(1.0)) and probe.kinked(nn.LeakyReLU(0.0))
    net = _net("mlp")
    models.blocks(net)[1].act = nn.Tanh()
    with pytest.raises(ValueError, match=r"layer 2 has Tanh"):
        probe.kinked_blocks(net)


@pytest.mark.parametrize("arch", ["mlp", "cnn"])
@pytest.mark.parametrize("chunk", [1000, 7])
def test_frozen_copy_is_bn_at_the_population_statistics(arch, chunk):
    """A train-mode forward over the whole set normalizes every BN layer with exactly the
    statistics of its input over the set, each earlier layer already at its own: what the
    frozen copy's eval mode must compute, for every input."""
    net = _net(arch).train()
    x, snap = _x(arch, n=60), _snapshot(net)
    frozen = probe.frozen_copy(net, "train_set", x, chunk_rows=chunk)
    _assert_unchanged(net, snap)
    assert not any(m.training for m in frozen.modules())
    with torch.no_grad():
        want = copy.deepcopy(net).train()(x)
        got = frozen(x)
        one = frozen(x[:3])  # a fixed map: a point's output does not depend on its batch
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(one, got[:3], rtol=0, atol=1e-6)
    batch = torch.arange(10, 30)
    fb = probe.frozen_copy(net, "batch", x, batch, chunk_rows=chunk)
    with torch.no_grad():
        torch.testing.assert_close(fb(x[batch]), copy.deepcopy(net).train()(x[batch]),
                                   rtol=1e-4, atol=1e-4)
        assert torch.equal(probe.frozen_copy(net, "running")(x), copy.deepcopy(net).eval()(x))
    _assert_unchanged(net, snap)


def test_population_statistics_are_each_layers_input_moments():
    net = _net("mlp").train()
    x = _x("mlp", n=50)
    stats = probe.population_statistics(copy.deepcopy(net), x)
    frozen = probe.frozen_copy(net, "train_set", x)
    inputs, h = [], x
    with torch.no_grad():  # each BN layer's input in the frozen network, written out
        for b in models.blocks(frozen):
            inputs.append(b.linear(h))
            h = b.act(b.norm(inputs[-1]))
    for (mean, var), z in zip(stats, inputs, strict=True):
        z = z.double()
        torch.testing.assert_close(mean, z.mean(0), rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(var, z.var(0, unbiased=False), rtol=1e-5, atol=1e-6)
    bn = models.blocks(frozen)[0].norm
    set_mean_var(bn, torch.ones(8), torch.full((8,), 2.0))
    assert torch.equal(bn.running_mean, torch.ones(8)) and torch.equal(bn.running_var,
                                                                      torch.full((8,), 2.0))


def test_frozen_copy_refuses_what_it_cannot_freeze():
    net = _net("mlp")
    with pytest.raises(ValueError, match="unknown bn_statistics"):
        probe.frozen_copy(net, "recomputed", _x("mlp"))
    with pytest.raises(ValueError, match="the step's batch"):
        probe.frozen_copy(net, "batch", _x("mlp"))
    assert probe.BN_STATISTICS == PARTITION_BN_STATISTICS  # the option passes straight through


# ---- no measure imports another measure's package ------------------------------------------

def measure_imports(package: str, source: str, module: str = "compute") -> set[str]:
    """The ``bnstudy.measures.<name>`` packages other than ``package`` that ``source`` (a module
    ``module`` of ``measures/<package>/``) imports, anywhere in its code."""
    here = ["bnstudy", "measures", package, module]  # level 1: the package, even for __init__
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = (node.module or "").split(".") if node.module else []
            if node.level:
                base = here[: len(here) - node.level] + base
            names = [".".join([*base, a.name]) for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[:2] == ["bnstudy", "measures"] and len(parts) > 2 and parts[2] != package:
                found.add(".".join(parts[:3]))
    return found


def test_no_measure_imports_another_measures_package():
    packages = sorted(p.name for p in MEASURES.iterdir() if (p / "__init__.py").is_file())
    assert {"partition", "ics", "jitter", "teacher_student", "generalization"} <= set(packages)
    bad = {f"{pkg}/{f.name}": sorted(got) for pkg in packages
           for f in sorted((MEASURES / pkg).glob("*.py"))
           if (got := measure_imports(pkg, f.read_text(encoding="utf-8"), f.stem))}
    assert bad == {}


def test_the_measure_import_check_sees_the_old_imports():
    old = ("from bnstudy.measures.partition.frozen_bn import set_buffers\n"
           "from bnstudy.measures.jitter import cells\n"
           "def f():\n    from ..generalization.compute import recompute_bn_statistics\n")
    assert measure_imports("jitter", old, "stats") == {"bnstudy.measures.partition",
                                                       "bnstudy.measures.generalization"}
    assert measure_imports("ics", "import bnstudy.measures.partition.compute\n") == {
        "bnstudy.measures.partition"}
    assert measure_imports("ics", "from bnstudy import measures\nfrom . import options\n",
                           "__init__") == set()
    assert measure_imports("ics", "from .. import partition\n", "__init__") == {
        "bnstudy.measures.partition"}
