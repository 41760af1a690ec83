"""Population-statistics passes take one forward per image (issue 22, item 5).

The passes that fix normalization layers one after the other at their statistics over a data set
(frozen BN's train-set statistics, BN jitter's population moments, population norm's refresh,
bn_init's fold) used to run one chunked forward per layer, stopped at that layer. They now run
each chunk's forward once (:func:`bnstudy.networks.layer_stats.layer_by_layer`). The old
implementations are copied below as references: the new ones must give the same numbers,
bitwise (same operations on the same chunks, sums in the same order), on an MLP, a small CNN
and a tiny ResNet9 (residual blocks), both with one chunk and with many; and every hidden layer
must see each image once per pass. Past a memory budget the same passes run as per-layer
passes (the old scheme, each chunk's forward abandoned at the layer): the same numbers again, the
prefix run once per layer, as the references run it.
"""

from __future__ import annotations

import copy
import logging
import re
import threading

import numpy as np
import pytest
import torch
from torch import nn

from bnstudy.measures.jitter import stats as bjs
from bnstudy.networks import layer_stats, models, normalizers, probe
from bnstudy.networks.layer_stats import layer_by_layer
from bnstudy.networks.normalizers import batch_statistics_layers, batchnorm_modules
from bnstudy.networks.norms import bn_init
from bnstudy.networks.norms import layers as nl
from bnstudy.networks.norms import population as npop
from bnstudy.networks.norms.layers import set_mean_var

N = 50
CHUNKS = (1000, 7)  # one chunk (the inline path) and eight (the last one a single image)
ARCHS = {
    "mlp": ({"arch": "mlp", "depth": 3, "width": 6}, (4,)),
    "cnn": ({"arch": "cnn", "width_mult": 0.1}, (1, 8, 8)),
    "vgg": ({"arch": "vgg", "channels": [3, "M", 4]}, (2, 4, 4)),
    "resnet9": ({"arch": "resnet9", "width": 2}, (3, 8, 8)),
}


# ---- the old implementations (per-layer passes stopped at the layer), as references -------------
class _Stop(Exception):
    pass


def _for_each_input(model, x, chunk, grab, module):
    def hook(mod, inp):
        grab(inp[0])
        raise _Stop

    handle = module.register_forward_pre_hook(hook)
    try:
        for i in range(0, len(x), chunk):
            try:
                model(x[i: i + chunk])
            except _Stop:
                pass
    finally:
        handle.remove()


@torch.no_grad()
def old_population_statistics(net, x, chunk_rows=65536):
    layers = batch_statistics_layers(net)
    net.eval()
    stats = {}

    def freeze(j, layer, acc):
        stats[j] = layer.population(acc)
        layer.freeze(stats[j])

    if len(x) <= chunk_rows:
        hooks = [layer.register_forward_pre_hook(
            lambda m, inp, j=j: freeze(j, m, m.accumulate(None, inp[0])))
            for j, layer in enumerate(layers)]
        try:
            net(x)
        finally:
            for h in hooks:
                h.remove()
    else:
        for j, layer in enumerate(layers):
            acc = {}
            _for_each_input(net, x, chunk_rows,
                            lambda z, m=layer, acc=acc: acc.update(a=m.accumulate(acc.get("a"), z)),
                            layer)
            freeze(j, layer, acc["a"])
    return [stats[j] for j in range(len(layers))]


@torch.no_grad()
def old_population_moments(model, x, chunk_rows=65536):
    net = copy.deepcopy(model).eval()
    out = []
    for bn in batchnorm_modules(net):
        acc = {}

        def grab(z, acc=acc):
            h = z.double().transpose(0, 1).reshape(z.shape[1], -1)
            if "shift" not in acc:
                acc.update(shift=h.mean(1), n=0, s=[0.0] * 4)
            d = h - acc["shift"][:, None]
            acc["n"] += d.shape[1]
            acc["s"] = [acc["s"][p] + d.pow(p + 1).sum(1) for p in range(4)]

        _for_each_input(net, x, chunk_rows, grab, bn)
        e1, e2, e3, e4 = (s / acc["n"] for s in acc["s"])
        mean = acc["shift"] + e1
        m2 = (e2 - e1 ** 2).clamp_min(0.0)
        m4 = (e4 - 4 * e1 * e3 + 6 * e1 ** 2 * e2 - 3 * e1 ** 4).clamp_min(0.0)
        set_mean_var(bn, mean, m2)
        out.append(bjs.Moments(acc["n"], *(t.cpu().numpy() for t in (mean, m2, m4))))
    return out, net


@torch.no_grad()
def old_pn_moments(model, x, chunk=4096):
    """The old refresh's moment pass (its ``"eq3"`` part after it is unchanged)."""
    pairs = [(b, b.norm) for b in models.blocks(model) if isinstance(b.norm, npop.PopulationNorm)]
    if len(x) <= chunk:
        def set_moments(mod, inp, pn):
            acc = {"n": 0, "s": 0.0, "q": 0.0}
            npop._accumulate(pn, acc, inp[0])
            npop._store(pn, acc)

        handles = [b.linear.register_forward_pre_hook(
            lambda mod, inp, pn=pn: set_moments(mod, inp, pn)) for b, pn in pairs]
        try:
            model(x)
        finally:
            for h in handles:
                h.remove()
    else:
        for block, pn in pairs:
            acc = {"n": 0, "s": 0.0, "q": 0.0}
            _for_each_input(model, x, chunk, lambda z, pn=pn, acc=acc: npop._accumulate(pn, acc, z),
                            block.linear)
            npop._store(pn, acc)


@torch.no_grad()
def old_fold_bn_init(model, x, eps, fold, chunk=4096):
    for block in models.blocks(model):
        acc = {"n": 0, "s": 0.0, "q": 0.0}

        def grab(h, acc=acc):
            h = h.transpose(0, 1).reshape(h.shape[1], -1).double()
            acc["n"] += h.shape[1]
            acc["s"] = acc["s"] + h.sum(1)
            acc["q"] = acc["q"] + (h * h).sum(1)

        _for_each_input(model, x, chunk, grab, block.norm)
        mean = acc["s"] / acc["n"]
        sigma = torch.sqrt((acc["q"] / acc["n"] - mean * mean).clamp_min(0) + eps)
        if fold:
            w, b = block.linear.weight, block.linear.bias
            w.copy_(w / sigma.view(-1, *([1] * (w.dim() - 1))).to(w.dtype))
            if b is not None:
                b.copy_(((b.double() - mean) / sigma).to(b.dtype))
            else:
                block.norm.shift.copy_((mean / sigma).to(block.norm.shift.dtype))
        else:
            block.norm.shift.copy_(mean.to(block.norm.shift.dtype))
            block.norm.scale.copy_((1 / sigma).to(block.norm.scale.dtype))


# ---- helpers ------------------------------------------------------------------------------------
def _model(arch, norm, **options):
    cfg, shape = ARCHS[arch]
    torch.manual_seed(0)
    net = models.build_model({**cfg, "norm_options": {norm: options}}, norm, shape, 3)
    torch.manual_seed(1)
    return net, torch.randn(N, *shape) * 1.5 + 0.5


class _Rows:
    """Counts the images each hidden layer's linear/conv map and the head are called on."""

    def __init__(self, net):
        self.mods = [b.linear for b in models.blocks(net)] + [net.head]
        self.rows = [0] * len(self.mods)
        self.hooks = [m.register_forward_pre_hook(
            lambda m, inp, j=j: self.rows.__setitem__(j, self.rows[j] + len(inp[0])))
            for j, m in enumerate(self.mods)]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for h in self.hooks:
            h.remove()


def _equal_states(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        assert torch.equal(sa[k], sb[k]), k


def _check_one_forward(rows, chunk, old_rows):
    """Every hidden layer and the head saw each image once; the per-layer passes saw more."""
    assert rows.rows == [N] * len(rows.mods)
    if chunk < N:  # the old per-layer passes ran the first layer once per normalization layer
        assert old_rows.rows[0] > N


MODES = {"single": 2 ** 62, "per_layer": 0}  # the CPU budget, bytes: never or always exceeded


@pytest.fixture(params=list(MODES))
def mode(request, monkeypatch, caplog):
    """The statistics pass under a CPU budget that the suspended forwards fit, or not."""
    monkeypatch.setattr(layer_stats, "CPU_BUDGET_BYTES", MODES[request.param])
    caplog.set_level(logging.INFO, logger="bnstudy")
    return request.param


def _messages(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "bnstudy"]


def _check_mode(mode, caplog, rows, chunk, old_rows):
    """The mode the pass logged, once, and the images each layer saw in it: one forward per
    image, or the references' per-layer passes, which run the prefix once per layer."""
    msgs = _messages(caplog)
    assert len(msgs) == 1, msgs
    if chunk >= N:
        assert msgs[0].startswith("layer_by_layer: one pass, inline")
    elif mode == "single":
        assert msgs[0].startswith("layer_by_layer: one suspended forward per image")
    else:
        assert msgs[0].startswith("layer_by_layer: per-layer passes from listed module 0 on")
        assert rows.rows == old_rows.rows and rows.rows[0] > N and rows.rows[-1] == 0
        return
    _check_one_forward(rows, chunk, old_rows)


# ---- frozen BN (partition density, recomputed generalization statistics) ------------------------
@pytest.mark.parametrize("chunk", CHUNKS)
@pytest.mark.parametrize("arch, norm", [("mlp", "batchnorm"), ("mlp", "l2norm"),
                                        ("mlp", "ghost_batchnorm"), ("cnn", "batchnorm"),
                                        ("vgg", "noisy_batchnorm"), ("resnet9", "batchnorm")])
def test_frozen_bn_statistics_bitwise_and_one_forward(arch, norm, chunk, mode, caplog):
    net, x = _model(arch, norm)
    net.train()  # BN in train mode: the measure freezes it at the data's statistics
    before = copy.deepcopy(net.state_dict())
    old_net, new_net = copy.deepcopy(net), copy.deepcopy(net)
    with _Rows(old_net) as old_rows:
        old = old_population_statistics(old_net, x, chunk)
    caplog.clear()
    with _Rows(new_net) as rows:
        new = probe.population_statistics(new_net, x, chunk)
    for a, b in zip(old, new, strict=True):
        assert all(torch.equal(u, v) for u, v in zip(a, b, strict=True))
    _equal_states(old_net, new_net)
    _check_mode(mode, caplog, rows, chunk, old_rows)
    frozen = probe.frozen_copy(net, "train_set", x, chunk_rows=chunk)  # a pure measure
    _equal_states(frozen, new_net)
    assert net.training and not frozen.training
    assert all(torch.equal(v, net.state_dict()[k]) for k, v in before.items())


# ---- BN jitter's population moments -------------------------------------------------------------
@pytest.mark.parametrize("chunk", CHUNKS)
@pytest.mark.parametrize("arch", ["mlp", "cnn", "resnet9"])
def test_jitter_population_moments_bitwise_and_one_forward(arch, chunk, mode, caplog):
    net, x = _model(arch, "batchnorm")
    net.train()
    before = copy.deepcopy(net.state_dict())
    with _Rows(net) as old_rows:
        old, old_net = old_population_moments(net, x, chunk)
    caplog.clear()
    with _Rows(net) as rows:  # the hooks are deep-copied with the model
        new, new_net = bjs.population_moments(net, x, chunk)
    for a, b in zip(old, new, strict=True):
        assert a.count == b.count
        for f in ("mean", "m2", "m4"):
            assert np.array_equal(getattr(a, f), getattr(b, f))
    _equal_states(old_net, new_net)
    _check_mode(mode, caplog, rows, chunk, old_rows)
    assert net.training and all(torch.equal(v, net.state_dict()[k]) for k, v in before.items())


# ---- population norm's refresh and bn_init's fold -----------------------------------------------
@pytest.mark.parametrize("chunk", CHUNKS)
@pytest.mark.parametrize("arch", ["mlp", "vgg", "resnet9"])
def test_population_norm_refresh_bitwise_and_one_forward(arch, chunk, mode, caplog):
    net, x = _model(arch, "population_norm", zeta=0.0)
    net.train()
    old_net = copy.deepcopy(net)
    with _Rows(old_net) as old_rows:
        old_pn_moments(old_net, x, chunk)
    ctx = normalizers.HookContext(x=x, y=torch.zeros(N, dtype=torch.long),
                                  task="classification", batch_size=8, seed=0)
    caplog.clear()
    with _Rows(net) as rows:
        npop.refresh(net, ctx, {"n_samples": N, "zeta": 0.0}, chunk=chunk)
    _equal_states(old_net, net)
    _check_mode(mode, caplog, rows, chunk, old_rows)


@pytest.mark.parametrize("chunk", CHUNKS)
@pytest.mark.parametrize("fold", [True, False])
@pytest.mark.parametrize("arch", ["mlp", "vgg", "resnet9"])
def test_bn_init_fold_bitwise_and_one_forward(arch, fold, chunk, mode, caplog):
    """With ``fold``, the statistics of a block's pre-activation are taken before its map is
    folded, the forward goes on after: the map itself runs twice on each image (the first
    time inside the pass's ``grab``, not a module call, so the count below is one)."""
    net, x = _model(arch, "bn_init")
    old_net = copy.deepcopy(net)
    with _Rows(old_net) as old_rows:
        old_fold_bn_init(old_net, x, 1e-5, fold, chunk)
    ctx = normalizers.HookContext(x=x, y=None, task="classification", batch_size=8, seed=0)
    caplog.clear()
    with _Rows(net) as rows:
        bn_init.fold_bn_init(net, ctx, {"fold": fold, "eps": 1e-5}, chunk=chunk)
    _equal_states(old_net, net)
    _check_mode(mode, caplog, rows, chunk, old_rows)


# ---- the pass itself: order, errors, the caller's grad mode, the memory budget ------------------
BUDGETS = (None, 0)  # the default (the suspended forwards fit) and one that forces per-layer passes


def _mlp_bn(wide=2):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, wide),
                         nn.BatchNorm1d(wide)).eval()


def _count(module):
    """The images ``module`` is called on, in ``counter[0]``."""
    counter = [0]

    def hook(m, inp):
        counter[0] += len(inp[0])

    module.register_forward_pre_hook(hook)
    return counter


@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("chunk", CHUNKS)
def test_layer_by_layer_order_and_grad_mode(chunk, budget):
    net, x = _mlp_bn(), torch.randn(N, 3)
    first = _count(net[0])
    log = []
    with torch.no_grad():
        reached = layer_by_layer(net, x, chunk, [net[1], net[4]],
                                 lambda j, z: log.append(("grab", j, len(z),
                                                          torch.is_grad_enabled())),
                                 lambda j: log.append(("freeze", j)), budget_bytes=budget)
    assert reached == [0, 1]
    sizes = [min(chunk, N - i) for i in range(0, N, chunk)]
    assert log == [("grab", 0, s, False) for s in sizes] + [("freeze", 0)] + \
        [("grab", 1, s, False) for s in sizes] + [("freeze", 1)]
    # one forward per image, or the prefix once per layer
    assert first[0] == (2 * N if budget == 0 and chunk < N else N)
    grads = []
    layer_by_layer(net, x, chunk, [net[1]], lambda j, z: grads.append(z.requires_grad),
                   lambda j: None, budget_bytes=budget)
    assert grads and all(grads)  # grad mode on: the forwards build the graph as the caller would


def _run(net, x, chunk, budget):
    """layer_by_layer freezing ``net``'s BN layers at their inputs' mean and variance: what
    ``grab`` saw and the frozen state."""
    bns, seen, accs = [net[1], net[4]], [], [[], []]

    def grab(j, z):
        seen.append((j, z.clone()))
        accs[j].append(z)

    def freeze(j):
        z = torch.cat(accs[j])
        bns[j].running_mean.copy_(z.mean(0))
        bns[j].running_var.copy_(z.var(0))

    with torch.no_grad():
        reached = layer_by_layer(net, x, chunk, bns, grab, freeze, budget_bytes=budget)
    return reached, seen, copy.deepcopy(net.state_dict())


@pytest.mark.parametrize("budget, mode, held, calls", [
    (6400, "one suspended forward per image", 6400, (N, N)),
    (6399, "per-layer passes from listed module 1 on", 6400, (2 * N - 7, N)),  # switch at 1
    (3199, "per-layer passes from listed module 0 on", 3200, (2 * N, N)),
])
def test_budget_picks_the_mode_from_the_first_chunk(budget, mode, held, calls, caplog):
    """Chunks of 7 of 50 images; the CPU estimate of what the first chunk holds at module 0 is
    HELD_FACTOR x its input (7 x 4 floats), 448 B, 3200 B for 50 images; at module 1 (8
    features) twice that. The mode is the budget's; the grabbed inputs and the frozen layers are
    the single pass's, bitwise, and the model before each layer's input is run once per image,
    or once per layer from the switch on (the first chunk's forward reaching module 1 is its
    per-layer pass)."""
    caplog.set_level(logging.INFO, logger="bnstudy")
    x = torch.randn(N, 3)
    ref = _run(_mlp_bn(wide=8), x, 7, None)
    caplog.clear()
    net = _mlp_bn(wide=8)
    first, second = _count(net[0]), _count(net[3])
    got = _run(net, x, 7, budget)
    assert got[0] == ref[0] == [0, 1]
    assert [j for j, _ in got[1]] == [j for j, _ in ref[1]]
    assert all(torch.equal(a, b) for (_, a), (_, b) in zip(got[1], ref[1], strict=True))
    assert got[2].keys() == ref[2].keys() and all(torch.equal(got[2][k], ref[2][k]) for k in ref[2])
    assert (first[0], second[0]) == calls
    msgs = _messages(caplog)
    assert len(msgs) == 1 and msgs[0].startswith(f"layer_by_layer: {mode}"), msgs
    assert f" {held} B " in msgs[0] and f"budget of {budget} B" in msgs[0]


class _Branchy(nn.Module):
    """Skips its second BN layer on a batch of one: the last chunk of 50 in 7s takes another
    path."""

    def __init__(self):
        super().__init__()
        self.bn1, self.bn2 = nn.BatchNorm1d(3), nn.BatchNorm1d(3)

    def forward(self, x):
        h = self.bn1(x)
        return self.bn2(h) if len(x) > 1 else h


@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("chunk", CHUNKS)
def test_layer_by_layer_errors(chunk, budget, monkeypatch):
    if budget == 0:  # the users' calls too
        monkeypatch.setattr(layer_stats, "CPU_BUDGET_BYTES", 0)
    net, x = _mlp_bn(), torch.randn(N, 3)
    threads = threading.active_count()

    def lbl(modules, grab=lambda j, z: None, freeze=lambda j: None, model=net, data=x):
        return layer_by_layer(model, data, chunk, modules, grab, freeze, budget_bytes=budget)

    with pytest.raises(RuntimeError, match="listed module 0 ran after listed module 1"):
        lbl([net[4], net[1]])
    unused = nn.BatchNorm1d(4)
    assert lbl([net[1], unused]) == [0]
    bn_net, bx = _model("mlp", "batchnorm")
    bn_net.spare = nl.BatchNorm1d(6)  # a batch-statistics layer the forward never calls
    with pytest.raises(RuntimeError, match=r"layers \[3\] are not on the forward path"):
        probe.population_statistics(bn_net, bx, chunk)
    with pytest.raises(RuntimeError, match=r"BN layers \[3\] are not on the forward path"):
        bjs.population_moments(bn_net, bx, chunk)

    def fail(j):
        raise ValueError("freeze failed")

    with pytest.raises(ValueError, match="freeze failed"):
        lbl([net[1]], freeze=fail)
    with pytest.raises(ValueError, match="grab failed"):  # raised in a worker: handed back
        lbl([net[1]], grab=lambda j, z: (_ for _ in ()).throw(ValueError("grab failed")))
    branchy = _Branchy().eval()
    if chunk < N:
        with pytest.raises(RuntimeError, match="their forwards must take the same path"):
            lbl([branchy.bn1, branchy.bn2], model=branchy, data=torch.randn(N, 3))
    assert threading.active_count() == threads  # every suspended forward was unwound
    with pytest.raises(ValueError, match="chunk=0: allowed: an int >= 1"):
        layer_by_layer(net, x, 0, [net[1]], lambda j, z: None, lambda j: None)
    for bad in (-1, True, 1.5):
        with pytest.raises(ValueError, match=re.escape(f"budget_bytes={bad!r}: allowed: None")):
            layer_by_layer(net, x, 7, [net[1]], lambda j, z: None, lambda j: None,
                           budget_bytes=bad)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_budget_on_cuda_measures_the_suspended_forward(caplog):
    """On CUDA the first chunk's hold is measured (torch.cuda.memory_allocated); both modes give
    the same numbers there too."""
    caplog.set_level(logging.INFO, logger="bnstudy")
    x = torch.randn(N, 3, device="cuda")
    runs = {}
    for budget, mode in ((None, "one suspended forward per image"),
                         (0, "per-layer passes from listed module 0 on")):
        caplog.clear()
        runs[budget] = _run(_mlp_bn(wide=8).cuda(), x, 7, budget)
        (msg,) = _messages(caplog)
        assert msg.startswith(f"layer_by_layer: {mode}") and "torch.cuda.memory_allocated" in msg
        assert int(re.search(r"hold (?:at most )?(\d+) B", msg).group(1)) > 0
    a, b = runs[None], runs[0]
    assert a[0] == b[0] == [0, 1]
    assert all(torch.equal(u, v) for (_, u), (_, v) in zip(a[1], b[1], strict=True))
    assert all(torch.equal(a[2][k], b[2][k]) for k in a[2])
