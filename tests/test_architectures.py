"""The convolutional and residual architectures (cnn, resnet9, resnet18): shapes, injected
normalizers, parameter counts, the residual connections, dropout, and every measure on them."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from specs import make_spec
from torch import nn
from torch.func import jacrev

from bnstudy import data, measures
from bnstudy.measures.ics import compute as ics
from bnstudy.measures.partition import compute as pdm
from bnstudy.measures.partition import polytope as pdp
from bnstudy.networks import models, normalizers
from bnstudy.networks.norms import layers as nl
from bnstudy.networks.resnet import ScaledLinear
from bnstudy.train import loop as training

CPU = torch.device("cpu")
SMALL = {"resnet9": {"width": 4}, "resnet18": {"width": 4}, "cnn": {"width_mult": 0.125}}
NEW = tuple(SMALL)


def _build(arch, norm="batchnorm", shape=(1, 8, 8), **kw):
    return models.build_model({"arch": arch, **SMALL[arch], **kw}, norm, shape, 10)


@pytest.fixture(scope="module")
def tiny_digits(digits):
    return data.Dataset(digits.x_train[:96], digits.y_train[:96], digits.x_test[:48],
                        digits.y_test[:48], digits.meta)


# ---- shapes, structure, parameter counts ---------------------------------------------------------

@pytest.mark.parametrize("arch", NEW)
@pytest.mark.parametrize("shape", [(3, 32, 32), (1, 8, 8)])
def test_shapes_on_cifar_and_digits_images(arch, shape):
    torch.manual_seed(0)
    net = _build(arch, shape=shape)
    x = torch.randn(3, int(np.prod(shape)))
    assert net(x).shape == (3, 10)
    assert net.eval()(x.reshape(3, *shape)).shape == (3, 10)


def test_resnet18_has_the_cifar_parameter_count():
    net = models.build_model({"arch": "resnet18", "width": 64}, "batchnorm", (3, 32, 32), 10)
    assert sum(p.numel() for p in net.parameters()) == 11_173_962  # kuangliu/pytorch-cifar
    convs = [m for m in net.modules() if isinstance(m, nn.Conv2d)]
    assert len(convs) == 1 + 16 + 3  # stem, 8 BasicBlocks x 2, 3 projection shortcuts
    assert [c.stride for c in convs if c.kernel_size == (1, 1)] == [(2, 2)] * 3
    assert sorted({c.out_channels for c in convs}) == [64, 128, 256, 512]


def test_resnet9_and_cnn_parameter_counts_match_their_layer_lists():
    def conv_bn(i, o):  # 3x3 conv without bias, BN's gamma and beta
        return 9 * i * o + 2 * o

    r9 = models.build_model({"arch": "resnet9"}, "batchnorm", (3, 32, 32), 10)
    want = (conv_bn(3, 64) + conv_bn(64, 128) + 2 * conv_bn(128, 128) + conv_bn(128, 256)
            + conv_bn(256, 512) + 2 * conv_bn(512, 512) + 512 * 10)  # head: no bias
    assert sum(p.numel() for p in r9.parameters()) == want == 6_573_120
    c = models.build_model({"arch": "cnn"}, "batchnorm", (3, 32, 32), 10)
    want = (conv_bn(3, 32) + conv_bn(32, 32) + conv_bn(32, 64) + conv_bn(64, 64)
            + 64 * 16 * 16 * 512 + 2 * 512 + 512 * 10 + 10)
    assert sum(p.numel() for p in c.parameters()) == want


def test_width_scales_the_resnets_and_width_mult_the_cnn():
    widths = {m.out_channels for m in _build("resnet18").modules() if isinstance(m, nn.Conv2d)}
    assert widths == {4, 8, 16, 32}
    widths = [m.out_channels for m in _build("resnet9").modules() if isinstance(m, nn.Conv2d)]
    assert widths == [4, 8, 8, 8, 16, 32, 32, 32]
    cnn = _build("cnn")
    assert [b.linear.weight.shape[0] for b in models.blocks(cnn)] == [4, 4, 8, 8, 64]
    assert models.blocks(cnn)[-1].linear.in_features == 8 * 4 * 4  # pooled 8x8 -> 4x4


def test_resnet18_basic_block_is_relu_of_branch_plus_shortcut():
    torch.manual_seed(0)
    net = _build("resnet18").eval()
    res = [m for m in net.modules() if isinstance(m, models.Residual)]
    assert len(res) == 8 and all(r.add == "pre" for r in res)
    assert [r.shortcut is not None for r in res] == [False, False] + [True, False] * 3
    x = torch.randn(5, 4, 8, 8)
    for r in (res[0], res[2]):
        h = torch.relu(r.first.norm(r.first.linear(x)))
        skip = x if r.shortcut is None else r.shortcut.norm(r.shortcut.linear(x))
        want = torch.relu(r.second.norm(r.second.linear(h)) + skip)
        assert torch.allclose(r(x), want, atol=1e-6)
        if r.shortcut is not None:
            assert isinstance(r.shortcut.act, nn.Identity)
        x = r(x)
    # layers, input to output: stem, then per residual block first, shortcut, second
    bl = models.blocks(net)
    assert len(bl) == 20 and bl[1] is res[0].first and bl[2] is res[0].second
    assert bl[5:8] == [res[2].first, res[2].shortcut, res[2].second]
    assert sum(b.join is not None for b in bl) == 8


def test_resnet9_adds_after_the_second_activation_and_scales_its_head():
    torch.manual_seed(0)
    net = _build("resnet9").eval()
    res = [m for m in net.modules() if isinstance(m, models.Residual)]
    assert len(res) == 2 and all(r.add == "post" and r.shortcut is None for r in res)
    x = torch.randn(2, 8, 4, 4)
    r = res[0]
    h = torch.relu(r.first.norm(r.first.linear(x)))
    want = x + torch.relu(r.second.norm(r.second.linear(h)))
    assert torch.allclose(r(x), want, atol=1e-6)
    assert all(b.join is None for b in models.blocks(net))
    assert isinstance(net.head, ScaledLinear) and net.head.bias is None and net.head.scale == 0.125
    z = torch.randn(3, 32)
    assert torch.allclose(net.head(z), 0.125 * z @ net.head.weight.T)


# ---- injected normalizers ------------------------------------------------------------------------

@pytest.mark.parametrize("arch", NEW)
@pytest.mark.parametrize("norm,layer", [("batchnorm", (nn.BatchNorm2d, nn.BatchNorm1d)),
                                        ("none", nn.Identity), ("layernorm", (nn.GroupNorm,
                                                                                nn.LayerNorm)),
                                        ("groupnorm", nn.GroupNorm), ("weightnorm", nn.Identity)])
def test_normalizer_is_injected_into_every_layer(arch, norm, layer):
    torch.manual_seed(0)
    net = _build(arch, norm)
    nz = normalizers.get(norm)
    bl = models.blocks(net)
    maps = [m for m in net.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    assert len(maps) == len(bl) + 1  # every conv/fc map is a block's (shortcuts too), or the head
    for b in bl:
        assert isinstance(b.norm, layer), (b, norm)
        assert (b.linear.bias is not None) == nz.linear_bias
        wn = getattr(b.linear, "parametrizations", None)
        assert (wn is not None and "weight" in wn) == (norm == "weightnorm")
    if norm == "groupnorm":
        assert all(b.norm.num_groups == min(8, b.norm.num_channels) for b in bl)
    net.train()(torch.randn(4, 64)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())


@pytest.mark.parametrize("arch", NEW)
def test_every_registered_normalizer_trains_a_step(arch, tiny_digits):
    """All normalizers, hook-driven ones included (population_norm's statistics, bn_init's fold,
    which must reach the projection shortcuts too), but instancenorm, which needs more than one
    position per channel (the 8x8 ResNets end at 1x1; the cnn's fc block is not a conv)."""
    for norm in normalizers.names():
        if norm == "instancenorm":
            continue
        spec = make_spec(norm, model={"arch": arch, **SMALL[arch]}, dataset="digits",
                         training={"lr": 0.01, "momentum": 0.9, "batch_size": 16, "steps": 1,
                                   "eval_every": 1, "checkpoints": [0, 1]})
        run = training.train(spec, tiny_digits, "cpu")
        assert not run["diverged"] and np.isfinite(run["history"][-1]["loss"]), norm


def test_population_norm_covers_the_shortcut(tiny_digits):
    spec = make_spec("population_norm", model={"arch": "resnet18", **SMALL["resnet18"]},
                     dataset="digits", training={"lr": 0.01, "momentum": 0.9, "batch_size": 16,
                                                 "steps": 1, "eval_every": 1,
                                                 "checkpoints": [0, 1]})
    model = training.build(spec, tiny_digits)
    model.load_state_dict(training.train(spec, tiny_digits, "cpu")["checkpoints"][-1]["model"])
    shortcuts = [r.shortcut for r in model.modules()
                 if isinstance(r, models.Residual) and r.shortcut is not None]
    assert len(shortcuts) == 3 and all(bool(s.norm.calibrated) for s in shortcuts)


# ---- dropout -------------------------------------------------------------------------------------

@pytest.mark.parametrize("arch,count", [("resnet9", 2), ("resnet18", 8), ("cnn", 5)])
def test_dropout_after_each_residual_block_or_block(arch, count):
    assert not any(isinstance(m, models.StepDropout) for m in _build(arch).modules())
    torch.manual_seed(3)
    plain = _build(arch)
    torch.manual_seed(3)
    net = _build(arch, dropout=0.1)
    drops = [m for m in net.modules() if isinstance(m, models.StepDropout)]
    assert len(drops) == count and all(d.p == 0.1 for d in drops)
    seq = list(net.features)
    after = models.Residual if arch != "cnn" else models.Block
    assert all(isinstance(seq[seq.index(d) - 1], after) for d in drops)
    assert len({int(d.noise_seed) for d in drops}) == count
    # the same initial weights as without dropout, and eval mode is the same function
    ours = [t for k, t in net.state_dict().items() if not k.endswith(("noise_seed", "noise_step"))]
    assert len(ours) == len(plain.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(ours, plain.state_dict().values(), strict=True))
    x = torch.randn(6, 64)
    assert torch.equal(net.eval()(x), plain.eval()(x))


def test_dropout_mask_is_a_function_of_the_step():
    torch.manual_seed(0)
    drop = models.StepDropout(0.25)
    drop.noise_seed.fill_(12345)
    x = torch.ones(400, 50)
    a, b = drop(x), drop(x)
    assert torch.equal(a, b)  # one step, one mask, however many passes
    assert abs(float((a == 0).float().mean()) - 0.25) < 0.01
    assert torch.allclose(a[a != 0], torch.tensor(1 / 0.75))
    normalizers.set_step(drop, 1)
    assert not torch.equal(drop(x), a)
    normalizers.set_step(drop, 0)
    assert torch.equal(drop(x), a)


@pytest.mark.parametrize("bad", [1.0, -0.1, True, "0.1"])
def test_bad_dropout_fails_clearly(bad):
    with pytest.raises(ValueError, match="dropout"):
        models.ModelConfig.from_dict({"arch": "resnet9", "dropout": bad})


def test_unit_has_no_block_to_drop_out_after():
    with pytest.raises(ValueError, match="dropout=0.1.*unit"):
        models.ModelConfig.from_dict({"arch": "unit", "dropout": 0.1})


def test_dropout_applies_to_the_older_archs_too():
    for cfg, shape in (({"arch": "mlp", "depth": 3}, (64,)), ({"arch": "dln", "depth": 3}, (10,)),
                       ({"arch": "vgg", "channels": [4, "M", 8]}, (1, 8, 8))):
        net = models.build_model({**cfg, "dropout": 0.2}, "none", shape, 10)
        n = sum(isinstance(m, models.StepDropout) for m in net.modules())
        assert n == len(models.blocks(net)), cfg


# ---- the measures on residual and conv nets ------------------------------------------------------

@pytest.mark.parametrize("arch", NEW)
def test_every_parameter_belongs_to_one_ics_layer(arch):
    net = _build(arch, "weightnorm_meanonly_bn", dropout=0.1)
    groups = ics.layer_groups(net)
    assert len(groups) == len(models.blocks(net)) + 1
    names = [n for _, g in groups for n in g]
    assert sorted(names) == sorted(n for n, _ in net.named_parameters())


def test_ics_at_lr_zero_is_exact_with_dropout(tiny_digits):
    """Dropout masks are the step's: G' = G exactly when nothing moves (fresh masks per pass
    would make G' differ)."""
    torch.manual_seed(0)
    net = _build("resnet18", "batchnorm", dropout=0.1).train()
    opt = torch.optim.SGD(net.parameters(), lr=0.0, momentum=0.9)
    x, y = torch.as_tensor(tiny_digits.x_train[:16]), torch.as_tensor(tiny_digits.y_train[:16])
    res = ics.measure_checkpoint(net, opt, x, y, "classification", x)
    assert all(r["grad_l2_diff"] == 0.0 for r in res.rows)


def _manual_join_preact(net, x):
    """The true pre-activation of the first residual block's second block (conv2 -> norm, plus
    the identity skip), computed from the modules by hand, without the join or any hook."""
    stem, res = net.features[0], net.features[1]
    z = stem(x.reshape(-1, *net.input_shape))
    pre = res.second.norm(res.second.linear(res.first(z))) + z
    return pre.reshape(len(x), -1)


@pytest.mark.parametrize("method", ["polytope", "distance"])
def test_partition_density_counts_the_residual_sum(tiny_digits, method):
    """The unit of a residual block's second layer is ``norm(conv(h)) + skip``: the count for
    that layer equals a hand count on the sum (not on the normalizer's output)."""
    torch.manual_seed(1)
    net = _build("resnet18", "batchnorm").train()
    xtr = torch.as_tensor(tiny_digits.x_train)
    frozen = pdm.frozen_copy(net, "train_set", xtr)
    layers = pdm.kinked_blocks(frozen)
    k = [i for i, b in layers].index(3)  # stem 1, first 2, second (join) 3
    assert layers[k][1] is frozen.features[1].second and layers[k][1].join is not None
    opts = pdm.Options.parse({"method": method, "n_points": 6, "radii": [0.3],
                              "n_vertices": 16})
    sets = pdm.point_sets(tiny_digits, opts)
    directions = pdp.frame(64, opts.n_vertices, opts.seed)
    blocks, _, idx, neurons, _, _ = pdm.count_blocks(frozen, opts, sets, None, directions, CPU)
    got = blocks[("train", 0.3)][:, k]
    c = torch.as_tensor(sets["train"])
    with torch.no_grad():
        if method == "polytope":
            signs = torch.cat([directions, -directions])
            v = (c[:, None, :] + 0.3 * signs[None]).reshape(-1, 64)
            h = _manual_join_preact(frozen, v).reshape(len(c), len(signs), -1)
            want = ((h.amax(1) > 0) & (h.amin(1) < 0)).sum(1).float()
        else:
            h = _manual_join_preact(frozen, c)
            jac = torch.stack([jacrev(lambda p: _manual_join_preact(frozen, p[None])[0])(p)
                               for p in c])
            want = (h.abs() < 0.3 * jac.norm(dim=2)).sum(1).float()
    assert neurons[k] == h.shape[-1] == 4 * 64
    assert torch.equal(got, want)
    assert want.sum() > 0


@pytest.mark.parametrize("arch", NEW)
def test_every_measure_runs_on_the_new_archs(arch, tiny_digits):
    spec = make_spec("batchnorm", model={"arch": arch, "dropout": 0.1, **SMALL[arch]},
                     dataset="digits",
                     training={"lr": 0.05, "momentum": 0.9, "batch_size": 16, "steps": 2,
                               "eval_every": 1, "checkpoints": [0, 1, 2]})
    run = training.train(spec, tiny_digits, "cpu")
    before = copy.deepcopy(run["checkpoints"])
    n_blocks = len(models.blocks(training.build(spec, tiny_digits)))
    n_kinked = len(pdm.kinked_blocks(training.build(spec, tiny_digits)))
    options = {"partition_density": {"n_points": 4, "radii": [0.5]},
               "ics": {"probe_size": 16}, "smoothness": {"n_probes": 2},
               "generalization": {},
               "bn_jitter": {"batch_sizes": [8], "n_batches": 4, "realizations": 2}}
    out = {}
    for name, o in options.items():
        m = measures.get(name)
        out[name] = m.run(run, tiny_digits, m.options.parse(o), CPU)
    pd_rows = out["partition_density"]["partition_density"]
    assert len(pd_rows) == 3 * (n_kinked + 1) * 3  # checkpoints x (layers + all) x point sets
    assert all(np.isfinite(r["boundaries"]) for r in pd_rows)
    ics_rows = out["ics"]["ics"]
    assert len(ics_rows) == 3 * (n_blocks + 1)
    assert all(r["update_replay_error"] < 1e-5 for r in ics_rows if r["step"] < 2)
    assert all(np.isfinite(r["beta_eff"]) for r in out["smoothness"]["smoothness"])
    assert out["generalization"]["generalization"]
    n_bn = sum(isinstance(m, nl.BatchStatistics)
               for m in training.build(spec, tiny_digits).modules())
    assert len({r["layer_index"] for r in out["bn_jitter"]["bn_jitter"]}) == n_bn
    for a, b in zip(before, run["checkpoints"], strict=True):  # measures never change the run
        assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])


# ---- config --------------------------------------------------------------------------------------

def test_schema_names_every_arch():
    from bnstudy.config.entries import entry_schemas

    model = entry_schemas()["models"]["properties"]  # generated from ModelConfig's fields
    assert model["arch"]["enum"] == list(models.ARCHS)
    assert "dropout" in model
    # smoothness's per-arch ranges name archs too: its options refuse any other
    from bnstudy.measures.smoothness.options import Options as SmoothnessOptions
    with pytest.raises(ValueError, match="valid choices: " + ", ".join(models.ARCHS)):
        SmoothnessOptions.parse({"multipliers_by_arch": {"transformer": [1.0, 2.0]}})
