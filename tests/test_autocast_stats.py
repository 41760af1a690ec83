"""``precision: bf16`` (issue 22 item 8): under autocast every registered normalizer computes its
statistics in float32 (torch's BN, LayerNorm and GroupNorm do; the package's own layers by
:class:`bnstudy.networks.norms.float32.Float32Statistics`), so the training precision cannot make
normalizers differ by how they round; the option is checked, recorded in the run spec, and a bf16
run trains."""

from __future__ import annotations

import math

import pytest
import torch
from specs import make_spec
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from bnstudy import data
from bnstudy.networks import models, normalizers
from bnstudy.networks.norms import registry
from bnstudy.networks.norms.float32 import Float32Statistics
from bnstudy.train import loop as training
from bnstudy.train import precision

# reductions and the matmuls that make statistics; fused norm ops: their statistics outputs
REDUCTIONS = {"mean", "var", "var_mean", "std", "std_mean", "sum", "amax", "amin", "norm",
              "linalg_vector_norm", "mm", "mv", "addmm", "addmv", "dot", "bmm", "rsqrt", "pow"}
FUSED = {"native_batch_norm", "_native_batch_norm_legit", "native_group_norm",
         "native_layer_norm", "_batch_norm_with_update", "_native_batch_norm_legit_functional"}


class _StatDtypes(TorchDispatchMode):
    """Logs ``(op, dtypes of its statistics outputs)`` of ops run inside a normalizer layer."""

    def __init__(self, inside):
        super().__init__()
        self.inside, self.seen = inside, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if self.inside() and name in REDUCTIONS | FUSED:
            outs = list(out) if isinstance(out, (tuple, list)) else [out]
            stats = outs[1:3] if name in FUSED else outs
            self.seen.append((name, [o.dtype for o in stats if isinstance(o, torch.Tensor)
                                     and o.is_floating_point() and o.numel()]))
        return out


@pytest.fixture(scope="module")
def images():
    return data.make("digits", {"seed": 0, "image": True, "test_fraction": 0.9})


# bn_init's layers apply a map fixed at step 0 (its statistics come from a float32 hook)
NO_BATCH_STATISTICS = {"bn_init"}
CONV = {"arch": "vgg", "channels": [4, "M", 8]}


@pytest.mark.parametrize("name", normalizers.names())
def test_normalizer_statistics_are_float32_under_bf16_autocast(name, images):
    spec = training.RunSpec.parse(make_spec(norm=name, model=CONV))
    nz = spec.model_config.normalizer(name)
    torch.manual_seed(0)
    model = models.build_model(spec.model_config, name, images.input_shape, images.out_dim)
    x, y = torch.as_tensor(images.x_train), torch.as_tensor(images.y_train)
    ctx = normalizers.HookContext(x=x, y=y, task="classification", seed=0, batch_size=16)
    if nz.on_init is not None:  # hooks run in float32, outside autocast, as in the trainer
        nz.on_init(model, ctx, nz.options)
    if nz.before_update is not None:
        nz.before_update(model, ctx, 0, nz.options)
    kinds = tuple({type(nz.layer(8, "conv"))} - {nn.Identity})
    layers = [m for m in model.modules() if kinds and isinstance(m, kinds)]
    depth = [0]
    for m in layers:
        m.register_forward_pre_hook(lambda *_: depth.__setitem__(0, depth[0] + 1))
        m.register_forward_hook(lambda *_: depth.__setitem__(0, depth[0] - 1))
    mode = _StatDtypes(lambda: depth[0] > 0)
    for train in (True, False):
        model.train(train)
        with torch.autocast("cpu", dtype=torch.bfloat16), mode:
            out = model(x[:16])
            loss = nn.functional.cross_entropy(out, y[:16])
        assert loss.dtype == torch.float32 and math.isfinite(float(loss.detach()))
    if not layers or name in NO_BATCH_STATISTICS:
        return  # no normalization layer (none, weightnorm, the bias baselines)
    assert mode.seen, f"{name}: no statistics seen in its layers {kinds}"
    low = [(op, d) for op, d in mode.seen if any(t in (torch.bfloat16, torch.float16) for t in d)]
    assert not low, f"{name}: statistics in low precision: {low[:5]}"


def test_float32_guard_changes_nothing_outside_autocast():
    torch.manual_seed(0)
    x = torch.randn(16, 6, 5, 5)
    for name in ("batchnorm", "l2norm", "weightnorm_varonly_bn", "ghost_batchnorm"):
        layer = normalizers.get(name).layer(6, "conv").train()
        ref = nn.Module.__call__(layer, x)  # the layer without the guard
        assert torch.equal(layer(x), ref)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low = layer(x.bfloat16())
        assert low.dtype == torch.bfloat16
        assert torch.allclose(low.float(), layer(x.bfloat16().float()), atol=0.02, rtol=0.02)


def test_precision_option_is_checked_recorded_and_trains(images):
    with pytest.raises(ValueError, match="precision='fp16'.*fp32, bf16"):
        training.TrainConfig.from_dict({"precision": "fp16"})
    cfg = {"lr": 0.05, "batch_size": 16, "steps": 4, "eval_every": 2, "precision": "bf16"}
    spec = make_spec(norm="l2norm", model=CONV, training=cfg)
    run = training.train(spec, images, "cpu")
    assert run["spec"].training.precision == "bf16"
    assert run["spec"].to_dict()["training"]["precision"] == "bf16"  # the provenance
    assert not run["diverged"] and all(math.isfinite(h["loss"]) for h in run["history"])
    fp32 = training.train(make_spec(norm="l2norm", model=CONV,
                                    training={**cfg, "precision": "fp32"}), images, "cpu")
    assert fp32["history"][0]["loss"] != run["history"][0]["loss"]  # autocast was on
    assert fp32["history"][0]["loss"] == pytest.approx(run["history"][0]["loss"], rel=0.05)
    assert "fp32" in precision.PRECISIONS


class _Rms(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(c))

    def forward(self, x):
        return x / x.pow(2).mean(dim=1, keepdim=True).sqrt() * self.weight.view(1, -1, *(
            (1,) * (x.dim() - 2)))


class _Rms32(Float32Statistics, _Rms):
    pass


def test_the_registry_enforces_the_normalizer_conventions():
    """Issue 33: EXTENDING.md's normalizer had bfloat16 statistics under autocast and nothing
    said so; the registry now refuses a layer that breaks a convention, naming the normalizer
    and the rule."""
    def entry(name, build):
        return registry.Normalizer(name, build)

    with pytest.raises(ValueError, match="normalizer 'plain_rms' breaks the autocast rule: its fc "
                                         "layer _Rms .*Float32Statistics"):
        registry.register(entry("plain_rms", lambda c, kind, **o: _Rms(c)))
    with pytest.raises(ValueError, match="normalizer 'flat' breaks the weight rule.*per-unit"):
        registry.conventions(entry("flat", lambda c, kind, **o: _Rms32(2 * c)))
    with pytest.raises(ValueError, match="normalizer 'broken' breaks the input-kinds rule"):
        registry.conventions(entry("broken", lambda c, kind, **o: 1 / 0))
    assert "plain_rms" not in registry.REGISTRY
    registry.conventions(entry("rms32", lambda c, kind, **o: _Rms32(c)))  # obeys them all
    for name in normalizers.names():  # every shipped one keeps them
        registry.conventions(normalizers.get(name))
