"""The registry's traits against the layers and the measures, for every registered normalizer.

- ``uses_batch_statistics``: the layers implement the batch-statistics interface, the training
  map depends on the other samples of the batch, and freezing population statistics
  (partition density's frozen network, generalization's ``recomputed``) gives the full-batch
  training map, whatever the statistics are (BN's mean/variance, the l_p norms' mean/scale).
- ``stochastic``: the noise of a training step is part of that step's function: every pass a
  measure compares at one checkpoint sees the same noise (lr = 0 gives G' = G in gradient ICS;
  a probe step of 0 gives no gradient difference in the smoothness measure), training draws new
  noise at each step, the same for a seed.
- Deterministic maps in the statistics pass: ghost and noisy BN are frozen at statistics of
  the inputs the frozen network itself computes (whole-set BN, the noise's expectation).
"""

import math

import numpy as np
import pytest
import torch
from specs import make_spec

from bnstudy.measures.generalization import compute as generalization
from bnstudy.measures.ics import compute as ics
from bnstudy.measures.smoothness import compute as smoothness
from bnstudy.networks import models, normalizers, probe
from bnstudy.networks.norms import layers as nl
from bnstudy.networks.norms import noisy as nln
from bnstudy.train import checkpoints
from bnstudy.train import loop as training

MLP = {"arch": "mlp", "depth": 2, "width": 6}
VGG = {"arch": "vgg", "channels": [3, "M", 4]}
QUIET = {"noisy_batchnorm": {"n_mu": 0.0, "n_sigma": 1.0, "r_mu": 0.0, "r_sigma": 0.0},
         "ghost_batchnorm": {"ghost_batch_size": 1000},
         "batchnorm_jitter": {"extra_variance": 0.0}}  # their training maps made deterministic


def _cfg(name, options=None):
    cfg = VGG if name == "instancenorm" else MLP
    return {**cfg, "norm_options": {name: options} if options else {}}


def _ready(name, options=None, n=40, seed=0):
    """A model of normalizer ``name`` with its trainer hooks run, and inputs for it."""
    cfg = _cfg(name, options)
    shape = (1, 4, 4) if cfg["arch"] == "vgg" else (3,)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, *shape, generator=g) * 1.5 + 0.5
    y = torch.randint(0, 2, (n,), generator=g)
    torch.manual_seed(seed)
    model = models.build_model(cfg, name, shape, 2)
    nz = models.ModelConfig.from_dict(cfg).normalizer(name)
    ctx = normalizers.HookContext(x=x, y=y, task="classification", batch_size=16, seed=seed)
    for hook in (nz.on_init, nz.before_update):
        if hook is not None:
            hook(model, ctx, *([0] if hook is nz.before_update else []), nz.options)
    return model, x


@pytest.mark.parametrize("name", normalizers.names())
def test_traits_match_the_layers_and_the_training_map(name):
    norm = normalizers.get(name)
    model, x = _ready(name)
    layers = normalizers.batch_statistics_layers(model)
    assert norm.uses_batch_statistics == bool(layers)
    assert all(isinstance(m, nl.BatchStatistics) for m in layers)
    assert norm.stochastic == any(isinstance(m, nln.StepNoise) for m in model.modules())
    other = x.clone()
    other[1:] = other[1:] * 2 + 1  # the same first sample in another batch
    model.train()
    with torch.no_grad():
        depends = not torch.allclose(model(x)[0], model(other)[0], atol=1e-6)
    assert depends == norm.uses_batch_statistics


@pytest.mark.parametrize("name", normalizers.names())
def test_frozen_statistics_give_the_full_batch_training_map(name):
    """Every batch-statistics normalizer (l_p norms included) is frozen at its own statistics of
    the whole set: the frozen network is its full-batch training map; others are unchanged."""
    model, x = _ready(name, QUIET.get(name))
    with torch.no_grad():
        full_batch = model.train()(x)
        for chunk in (len(x), 7):
            frozen = probe.frozen_copy(model, "train_set", x, chunk_rows=chunk)
            torch.testing.assert_close(frozen(x), full_batch, atol=2e-5, rtol=1e-4)
            recomputed = generalization.recompute_bn_statistics(model, x, chunk=chunk)
            torch.testing.assert_close(recomputed(x), full_batch, atol=2e-5, rtol=1e-4)
            assert not frozen.training and frozen(x[:3]).shape == (3, 2)


def _whole_set_reference(model, x):
    """The MLP with every BN layer normalizing by its input's whole-set mean and biased variance
    and noisy BN applying the noise's expectation: the network frozen at ``train_set``."""
    z = x
    for blk in models.blocks(model):
        h = blk.linear(z)
        n = (h - h.mean(0)) / torch.sqrt(h.var(0, unbiased=False) + blk.norm.eps)
        n = n * blk.norm.weight + blk.norm.bias
        if isinstance(blk.norm, nln.NoisyBatchNorm):
            n = n * (1 + blk.norm.n_sigma) / 2
        z = blk.act(n)
    return model.head(z)


@pytest.mark.parametrize("name, options", [("ghost_batchnorm", {"ghost_batch_size": 8}),
                                           ("noisy_batchnorm", {})])
def test_statistics_pass_uses_each_layers_deterministic_map(name, options):
    model, x = _ready(name, options)
    normalizers.set_step(model, 3)
    with torch.no_grad():
        ref = _whole_set_reference(model, x)
        for chunk in (len(x), 7):  # one pass, and layer by layer in chunks
            frozen = probe.frozen_copy(model, "train_set", x, chunk_rows=chunk)
            torch.testing.assert_close(frozen(x), ref, atol=1e-5, rtol=1e-4)
            batch = torch.arange(8, 40)
            frozen = probe.frozen_copy(model, "batch", x, batch, chunk_rows=chunk)
            torch.testing.assert_close(frozen(x[batch]), _whole_set_reference(model, x[batch]),
                                       atol=1e-5, rtol=1e-4)


def _lr0_run(name, star, digits):
    ds = digits if name == "instancenorm" else star
    model = ({**VGG, "width_mult": 1.0} if name == "instancenorm"
             else {"arch": "mlp", "depth": 3, "width": 8})
    spec = make_spec(name, model=model, training={
        "lr": 0.0, "momentum": 0.9, "batch_size": 16, "steps": 2, "eval_every": 2,
        "checkpoints": [0, 1, 2]})
    return training.train(spec, ds, "cpu"), ds


@pytest.mark.parametrize("name", normalizers.names())
def test_measures_compare_one_function_per_step(name, star, digits):
    """At a checkpoint, every pass a measure compares sees the same function: with lr = 0 (W at
    t+1 equals W at t) G' = G exactly, and a probe step of 0 gives a zero gradient difference."""
    run, ds = _lr0_run(name, star, digits)
    r = checkpoints.restore(run, 2, ds)
    assert r.step == 2
    x, y = torch.as_tensor(ds.x_train), torch.as_tensor(ds.y_train)
    res = ics.measure_checkpoint(r.model, r.optimizer, x[r.batch], y[r.batch], ds.task, x[:32])
    assert res.rows and all(row["grad_l2_diff"] == 0.0 for row in res.rows), res.rows
    assert res.rows[-1]["grad_norm"] > 0  # the head (groupnorm of 1-unit groups has none)
    assert all(row["step_mean_shift"] == 0.0 for row in res.rows)
    _, probes, line = smoothness.measure(r.model, x[r.batch], y[r.batch], ds.task, 0.0,
                                         {"n_probes": 3})
    assert line.grad_norm > 0 and all(p["grad_diff"] == 0.0 for p in probes), probes


def test_noise_changes_with_the_step_and_is_fixed_per_seed(star):
    run, _ = _lr0_run("noisy_batchnorm", star, None)
    again, _ = _lr0_run("noisy_batchnorm", star, None)
    for a, b in zip(run["checkpoints"], again["checkpoints"], strict=True):
        assert all(torch.equal(v, b["model"][k]) for k, v in a["model"].items())
    x = torch.as_tensor(star.x_train[:16])
    outs = []
    for i in range(3):  # lr = 0: the same weights at every checkpoint, the noise of its step
        r = checkpoints.restore(run, i, star)
        steps = {int(m.noise_step) for m in r.model.modules() if isinstance(m, nln.StepNoise)}
        assert steps == {i}
        with torch.no_grad():
            outs.append(r.model.train()(x))
            assert torch.equal(r.model(x), outs[-1])  # any number of passes: the same noise
    assert not torch.allclose(outs[0], outs[1]) and not torch.allclose(outs[1], outs[2])
    other = training.train(run["spec"].replace(seed=1), star, "cpu")
    seeds = [[int(m.noise_seed) for n, m in checkpoints.restore(r, 0, star).model.named_modules()
              if isinstance(m, nln.StepNoise)] for r in (run, other)]
    assert seeds[0] != seeds[1]


def test_set_step_rejects_bad_steps():
    model, _ = _ready("noisy_batchnorm")
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="bad training step.*int >= 0"):
            normalizers.set_step(model, bad)


@pytest.mark.parametrize("p", [1.0, 2.0, math.inf])
def test_lp_population_sums_match_the_batch_statistics(p):
    layer = nl.LpBatchNorm(4, p)
    x = torch.randn(30, 4, 3, 3) * 2 + 1
    acc = layer.accumulate(layer.accumulate(None, x[:11]), x[11:])
    mean, scale = layer.statistics(x)
    got = layer.population(acc)
    np.testing.assert_allclose(got[0].numpy(), mean.double().numpy(), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got[1].numpy(), scale.double().numpy(), rtol=1e-6)
