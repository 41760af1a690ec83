"""population_norm (Luo's PN + gamma decay) and bn_init (BN-Explained's smart init), and the
trainer hooks they use, against independent reference computations; exact checkpoint replay for
the stochastic and hook-driven normalizers."""

import copy

import numpy as np
import pytest
import torch
from specs import make_spec
from torch.func import functional_call

from bnstudy import io
from bnstudy.networks import models, normalizers
from bnstudy.networks.norms import bn_init
from bnstudy.networks.norms import population as npop
from bnstudy.train import checkpoints, stacked
from bnstudy.train import loop as training

EPS = 1e-5
MLP = {"arch": "mlp", "depth": 2, "width": 6}
VGG = {"arch": "vgg", "channels": [3, "M", 4]}


def _ctx(x, y=None, task="classification", batch_size=8, seed=0):
    y = torch.zeros(len(x), dtype=torch.long) if y is None else y
    return normalizers.HookContext(x=x, y=y, task=task, batch_size=batch_size, seed=seed)


def _model(cfg, norm, shape, out=2, seed=0, **options):
    torch.manual_seed(seed)
    return models.build_model({**cfg, "norm_options": {norm: options}}, norm, shape, out)


def _preacts(model, x):
    """Each block's pre-activation (the norm layer's input) and normalized output, for ``x``."""
    seen = []
    hooks = [b.norm.register_forward_hook(lambda m, i, o: seen.append((i[0], o)))
             for b in models.blocks(model)]
    with torch.no_grad():
        model(x)
    for h in hooks:
        h.remove()
    return seen


def _standardize(h):
    """numpy: each unit standardized over the batch (and positions) with biased variance."""
    a = np.moveaxis(h.double().numpy(), 1, 0).reshape(h.shape[1], -1)
    shape = (1, -1) + (1,) * (h.dim() - 2)
    m, v = a.mean(1).reshape(shape), a.var(1).reshape(shape)
    return (h.double().numpy() - m) / np.sqrt(v + EPS)


@pytest.mark.parametrize("cfg, shape", [(MLP, (3,)), (VGG, (2, 4, 4))])
def test_population_norm_uses_population_statistics_layer_by_layer(cfg, shape):
    net = _model(cfg, "population_norm", shape, zeta=0.0)
    x = torch.randn(50, *shape) * 2 + 1
    with pytest.raises(RuntimeError, match="no population statistics"):
        net(x)
    opts = normalizers.get("population_norm", {"zeta": 0.0}).options
    npop.refresh(net, _ctx(x), opts)
    for blk, (h, out) in zip(models.blocks(net), _preacts(net, x), strict=True):
        ref = _standardize(h)  # the subset is the whole set here
        np.testing.assert_allclose(blk.norm.normalized(h).detach().numpy(), ref, atol=2e-4)
        with torch.no_grad():  # gamma = 1, beta = 0: the output is the standardized input
            np.testing.assert_allclose(out.numpy(), ref, atol=2e-4)
    # train and eval mode compute the same function (no batch statistics)
    assert torch.allclose(net.train()(x[:3]), net.eval()(x)[:3], atol=1e-5)


def test_population_subset_is_fixed_by_the_seed():
    x = torch.randn(40, 3)
    a = npop.subset(_ctx(x, seed=1), 10)
    assert torch.equal(a, npop.subset(_ctx(x, seed=1), 10)) and len(set(a.tolist())) == 10
    assert not torch.equal(a, npop.subset(_ctx(x, seed=2), 10))
    assert torch.equal(npop.subset(_ctx(x), 100), torch.arange(40))
    net = _model(MLP, "population_norm", (3,), zeta=0.0)
    npop.refresh(net, _ctx(x, seed=1), {"n_samples": 10, "zeta": 0.0})
    h = _preacts(net, x[a])[0][0]
    out = models.blocks(net)[0].norm.normalized(h).detach().numpy()
    np.testing.assert_allclose(out, _standardize(h), atol=2e-4)


@pytest.mark.parametrize("cfg, shape", [(MLP, (3,)), (VGG, (2, 4, 4))])
def test_chunked_refresh_equals_single_pass_refresh(cfg, shape):
    x, y = torch.randn(50, *shape), torch.randint(0, 2, (50,))
    nets = [_model(cfg, "population_norm", shape) for _ in range(2)]
    opts = normalizers.get("population_norm").options
    npop.refresh(nets[0], _ctx(x, y), opts)  # one pass
    npop.refresh(nets[1], _ctx(x, y), opts, chunk=16)  # a chunked pass per layer
    for k, v in nets[0].state_dict().items():
        assert torch.allclose(v.float(), nets[1].state_dict()[k].float(), rtol=1e-4, atol=1e-6), k
    last = models.blocks(nets[0])[-1].norm
    assert float((last.zeta * last.weight.detach() ** 2).sum()) > 0  # a unit's share may be < 0


def test_bound_norms_follow_copies_and_functional_calls():
    """Measures work on deep copies and torch.func.functional_call: a PN / WN-gamma-decay layer
    must read the weights of its own (copied or substituted) map."""
    x = torch.randn(20, 3)
    for norm in ("population_norm", "weightnorm_gamma_decay"):
        net = _model(MLP, norm, (3,))
        if norm == "population_norm":
            npop.refresh(net, _ctx(x), normalizers.get(norm).options)
        twin = copy.deepcopy(net)
        assert models.blocks(twin)[0].norm._source[0] is models.blocks(twin)[0].linear
        with torch.no_grad():
            models.blocks(twin)[0].linear.weight.add_(1.0)
        assert not torch.allclose(twin(x), net(x))
        params = {k: v + 0.1 for k, v in net.named_parameters()}
        with torch.no_grad():
            twin.load_state_dict(net.state_dict())
            for v in twin.parameters():
                v.add_(0.1)
        assert torch.allclose(functional_call(net, params, (x,)), twin(x), atol=1e-6)


def test_population_norm_differentiates_through_its_statistics():
    """mu_P, sigma_P follow the layer's weights: PN is scale-invariant in w, its gradient is
    orthogonal to w (as BN's and WN's are)."""
    net = _model(MLP, "population_norm", (3,), zeta=0.0)
    x, y = torch.randn(30, 3), torch.randint(0, 2, (30,))
    npop.refresh(net, _ctx(x), {"n_samples": 100, "zeta": 0.0})
    lin = models.blocks(net)[0].linear
    before = net(x)
    with torch.no_grad():
        lin.weight.mul_(3.0)
    assert torch.allclose(net(x), before, atol=1e-4)
    torch.nn.functional.cross_entropy(net(x), y).backward()
    radial = (lin.weight.grad * lin.weight).sum(1)
    assert radial.abs().max() < 1e-5 * lin.weight.grad.norm() * lin.weight.norm()
    assert lin.weight.grad.norm() > 1e-4


def test_gamma_decay_adds_2_zeta_gamma_in_training_mode_only():
    x, y = torch.randn(30, 3), torch.randint(0, 2, (30,))
    nets = [_model(MLP, "population_norm", (3,), zeta=z) for z in (0.3, 0.0)]
    for net in nets:
        npop.refresh(net, _ctx(x), {"n_samples": 100, "zeta": 0.0})
        with torch.no_grad():
            for b in models.blocks(net):
                b.norm.weight.copy_(torch.linspace(0.5, 1.5, 6))
    decayed, plain = nets
    torch.nn.functional.cross_entropy(decayed.train()(x), y).backward()
    penalty = sum(0.3 * (b.norm.weight ** 2).sum() for b in models.blocks(plain))
    (torch.nn.functional.cross_entropy(plain(x), y) + penalty).backward()
    for bd, bp in zip(models.blocks(decayed), models.blocks(plain), strict=True):
        assert torch.allclose(bd.norm.weight.grad, bp.norm.weight.grad, atol=1e-6)
        assert torch.allclose(bd.linear.weight.grad, bp.linear.weight.grad, atol=1e-6)
    decayed.zero_grad()
    plain.zero_grad()
    torch.nn.functional.cross_entropy(decayed.eval()(x), y).backward()
    torch.nn.functional.cross_entropy(plain.eval()(x), y).backward()
    g = models.blocks(decayed)[0].norm.weight.grad
    assert torch.allclose(g, models.blocks(plain)[0].norm.weight.grad, atol=1e-6)


@pytest.mark.parametrize("cfg, shape", [(MLP, (3,)), (VGG, (2, 4, 4))])
def test_weightnorm_gamma_decay_is_isotropic_population_norm(cfg, shape):
    """gamma w^T z / (||w|| sqrt(input_var)) + beta (input_var 1, a number or 1/fan_in)."""
    for input_var in (1.0, 0.5, "fan_in"):
        net = _model(cfg, "weightnorm_gamma_decay", shape, zeta=0.2, input_var=input_var)
        for blk in models.blocks(net):
            with torch.no_grad():
                blk.norm.weight.uniform_(0.5, 1.5)
                blk.norm.bias.uniform_(-1, 1)
        x = torch.randn(7, *shape)
        for blk, (h, out) in zip(models.blocks(net), _preacts(net, x), strict=True):
            w = blk.linear.weight.detach().double().numpy()
            w = w.reshape(w.shape[0], -1)
            var = 1 / w.shape[1] if input_var == "fan_in" else input_var
            shape_u = (1, -1) + (1,) * (h.dim() - 2)
            ref = h.double().numpy() / (np.sqrt((w ** 2).sum(1) * var)).reshape(shape_u)
            ref = ref * blk.norm.weight.detach().double().numpy().reshape(shape_u)
            ref = ref + blk.norm.bias.detach().double().numpy().reshape(shape_u)
            np.testing.assert_allclose(out.double().numpy(), ref, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(blk.norm.zeta.numpy(), 0.2)


@pytest.mark.parametrize("cfg, zeta", [({"arch": "mlp", "depth": 1, "width": 4}, 1 / (4 * 8)),
                                       ({"arch": "dln", "depth": 3}, 1 / (2 * 8))])
def test_weightnorm_gamma_decay_luo_zeta_is_set_at_init(linear_ds, cfg, zeta):
    spec, run = _train("weightnorm_gamma_decay", linear_ds, cfg=cfg, steps=1)
    for k, v in run["checkpoints"][0]["model"].items():
        if k.endswith("norm.zeta"):
            np.testing.assert_allclose(v.numpy(), zeta)  # ReLU: 1/(4M); linear: 1/(2M); M = 8
    _, run = _train("weightnorm_gamma_decay", linear_ds, cfg=cfg, steps=1,
                    options={"zeta_batch_size": 32})
    z = [v for k, v in run["checkpoints"][0]["model"].items() if k.endswith("norm.zeta")]
    np.testing.assert_allclose(torch.cat(z).numpy(), zeta * 8 / 32)


def _train(norm, ds, cfg=None, options=None, steps=6, seed=0):
    tr = {"lr": 0.1, "momentum": 0.9, "batch_size": 8, "steps": steps, "eval_every": 1,
          "checkpoints": list(range(steps + 1))}
    model = {**(cfg or {"arch": "mlp", "depth": 2, "width": 8}),
             "norm_options": {norm: options or {}}}
    spec = make_spec(norm=norm, seed=seed, model=model, training=tr)
    return spec, training.train(spec, ds, "cpu")


@pytest.mark.parametrize("norm, options", [
    ("population_norm", {"n_samples": 32, "refresh_every": 2}),
    ("population_norm", {"zeta": 0.05}),
    ("noisy_batchnorm", {}), ("ghost_batchnorm", {"ghost_batch_size": 3}),
    ("bn_init", {}), ("bn_init", {"fold": False}),
    ("l1norm", {}), ("linfnorm", {}), ("weightnorm_varonly_bn", {}), ("random_bias", {}),
    ("weightnorm_gamma_decay", {}),
])
def test_checkpoints_restore_and_replay_exactly(star, norm, options):
    spec, run = _train(norm, star, options=options)
    again = training.train(spec, star, "cpu")
    xtr, ytr = torch.as_tensor(star.x_train), torch.as_tensor(star.y_train)
    lf = training.loss_fn(star.task)
    hist = {h["step"]: h["loss"] for h in run["history"] if h["split"] == "train"}
    for i, ck in enumerate(run["checkpoints"]):
        for k, v in ck["model"].items():  # same seed, same numbers
            assert torch.equal(v, again["checkpoints"][i]["model"][k]), k
        r = checkpoints.restore(run, i, star)
        assert abs(training.evaluate(r.model, xtr, ytr, star.task)[0] - hist[r.step]) < 1e-6
        if i + 1 == len(run["checkpoints"]):
            break
        r.optimizer.zero_grad()
        if stacked.batchable(r.spec)[0]:  # the kernel training stepped it with
            stacked.seed_gradients(r.model, xtr[r.batch], ytr[r.batch], lf)
        else:
            lf(r.model(xtr[r.batch]), ytr[r.batch]).backward()
        r.optimizer.step()
        nxt = run["checkpoints"][i + 1]["model"]
        for name, p in r.model.named_parameters():
            assert torch.equal(p.detach(), nxt[name]), (i, name)


def _bn_reference(weights, biases, x, eps=EPS):
    """numpy forward: each hidden layer standardized over the whole set, ReLU, linear head."""
    z = x.astype(np.float64)
    for w, b in zip(weights[:-1], biases[:-1], strict=True):
        h = z @ w.T + b
        z = np.maximum((h - h.mean(0)) / np.sqrt(h.var(0) + eps), 0)
    return z @ weights[-1].T + biases[-1]


def test_bn_init_freezes_whole_training_set_bn(star):
    spec, run = _train("bn_init", star, steps=0)
    fresh = training.build(spec, star)  # the random initialization before the hook
    maps = [b.linear for b in models.blocks(fresh)] + [fresh.head]
    ws = [m.weight.detach().double().numpy() for m in maps]
    bs = [m.bias.detach().double().numpy() for m in maps]
    r = checkpoints.restore(run, 0, star)
    out = r.model(torch.as_tensor(star.x_train)).detach().double().numpy()
    np.testing.assert_allclose(out, _bn_reference(ws, bs, star.x_train), rtol=1e-4, atol=1e-4)
    for h, _ in _preacts(r.model, torch.as_tensor(star.x_train)):
        np.testing.assert_allclose(h.double().mean(0).numpy(), 0, atol=1e-5)
        var = h.double().var(0, unbiased=False).numpy()  # var0 / (var0 + eps): just below 1
        assert np.all(var <= 1 + 1e-6) and np.all(var > 0.99)
    assert not torch.equal(models.blocks(r.model)[0].linear.weight, maps[0].weight)
    x = torch.as_tensor(star.x_test)  # no BN left: a sample's output ignores its batch
    assert torch.allclose(r.model.train()(x)[:1], r.model(x[:1]), atol=1e-6)
    _, unfolded = _train("bn_init", star, options={"fold": False}, steps=0)
    u = checkpoints.restore(unfolded, 0, star).model
    assert torch.equal(models.blocks(u)[0].linear.weight, maps[0].weight)
    assert torch.allclose(u(x), r.model(x), atol=1e-5)


@pytest.mark.parametrize("cfg, shape", [(VGG, (2, 5, 5)), ({"arch": "dln", "depth": 4}, (3,))])
def test_bn_init_conv_and_bias_free_maps(cfg, shape):
    """Each unit's map is only rescaled by a positive factor and shifted, and its output over the
    set has mean 0 and variance var / (var + eps): that determines the frozen BN map."""
    net = _model(cfg, "bn_init", shape, out=2 if cfg["arch"] == "vgg" else 3)
    before = [b.linear.weight.detach().clone() for b in models.blocks(net)]
    x = torch.randn(40, *shape) + 0.5
    bn_init.fold_bn_init(net, _ctx(x), {"fold": True, "eps": EPS})
    for w0, blk, (_, out) in zip(before, models.blocks(net), _preacts(net, x), strict=True):
        ratio = (w0 / blk.linear.weight).reshape(w0.shape[0], -1)
        assert torch.allclose(ratio, ratio[:, :1].expand_as(ratio), rtol=1e-4)
        assert torch.all(ratio > 0)
        a = np.moveaxis(out.double().numpy(), 1, 0).reshape(out.shape[1], -1)
        np.testing.assert_allclose(a.mean(1), 0, atol=1e-5)
        assert np.all(a.var(1) <= 1 + 1e-6) and np.all(a.var(1) > 0.99)


@pytest.mark.parametrize("norm, options", [
    ("population_norm", {"n_samples": 32, "refresh_every": 2}), ("noisy_batchnorm", {}),
    ("bn_init", {}), ("weightnorm_gamma_decay", {}),
])
def test_resumed_run_equals_uninterrupted_run(star, tmp_path, norm, options):
    tr = {"lr": 0.1, "momentum": 0.9, "batch_size": 8, "steps": 6, "eval_every": 1,
          "checkpoints": [0, 3]}
    model = {"arch": "mlp", "depth": 2, "width": 8, "norm_options": {norm: options}}
    spec = make_spec(norm=norm, model=model, training=tr)
    path = tmp_path / "resume.pt"
    full = training.train(spec, star, "cpu", resume_path=path)  # leaves its step-3 state
    blob = io.load_pt(path, training.RESUME_KIND)
    assert blob["step"] == 3
    blob["history"][0]["loss"] = -1.0  # a marker: only a run that resumed carries it
    io.save_pt(blob, path, training.RESUME_KIND)
    resumed = training.train(spec, star, "cpu", resume_path=path)
    assert resumed["history"][0]["loss"] == -1.0
    strip = [{k: v for k, v in h.items() if k != "wall_time"} for h in full["history"][1:]]
    assert strip == [{k: v for k, v in h.items() if k != "wall_time"}
                     for h in resumed["history"][1:]]
    for a, b in zip(full["checkpoints"], resumed["checkpoints"], strict=True):
        for k, v in a["model"].items():
            assert torch.equal(v, b["model"][k]), k
