"""Host-device syncs of the trainer (issue 22 item 4), counted on the CPU: every conversion that
would stall a GPU (``item``/``int``/``float``/``bool`` of a tensor, i.e. ``_local_scalar_dense``;
ops whose output shape depends on the data; ``tolist``/``cpu``/``numpy``) is logged against the
training step running it. Steps between evaluations and checkpoints make none; an evaluation
step makes one (the evaluation of both splits and the divergence check, read together)."""

from __future__ import annotations

import collections

import pytest
import torch
from specs import make_spec
from torch.utils._python_dispatch import TorchDispatchMode

from bnstudy import data
from bnstudy.networks import normalizers
from bnstudy.networks.norms.noisy import StepNoise
from bnstudy.train import loop as training
from bnstudy.train import schedules

SYNC_OPS = {"_local_scalar_dense", "nonzero", "masked_select", "_unique2", "unique_dim",
            "unique_consecutive", "equal", "is_nonzero"}
READS = ("tolist", "cpu", "numpy")


class _Ops(TorchDispatchMode):
    def __init__(self, log):
        super().__init__()
        self.log = log

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket.__name__ in SYNC_OPS:
            self.log(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


def count_syncs(monkeypatch, run) -> dict[int, collections.Counter]:
    """``{step: Counter(sync kind)}`` of ``run()`` (a training call); step -1 is the setup."""
    per_step: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    now = {"step": -1}

    def log(kind):
        per_step[now["step"]][kind] += 1

    from_config = schedules.from_config

    def tracking(cfg, n_train):  # the trainer reads the step's lr first thing in a step
        lr_at = from_config(cfg, n_train)

        def at(step):
            now["step"] = step
            return lr_at(step)

        return at

    monkeypatch.setattr(schedules, "from_config", tracking)
    for name in READS:
        original = getattr(torch.Tensor, name)

        def wrapped(self, *a, _original=original, _name=name, **k):
            log(_name)
            return _original(self, *a, **k)

        monkeypatch.setattr(torch.Tensor, name, wrapped)
    with _Ops(log):
        run()
    return per_step


@pytest.fixture(scope="module")
def images():
    return data.make("digits", {"seed": 0, "image": True, "test_fraction": 0.85})


TRAIN = {"lr": 0.05, "momentum": 0.9, "batch_size": 32, "steps": 24, "eval_every": 8,
         "checkpoints": [0, 12]}
CONV = {"arch": "vgg", "channels": [4, "M", 8, "M"]}
RUNS = {
    "mlp_batchnorm": ("batchnorm", {"arch": "mlp", "depth": 3, "width": 16}, {}),
    "mlp_l2norm": ("l2norm", {"arch": "mlp", "depth": 3, "width": 16}, {}),
    "conv_noisy_bn_augment": ("noisy_batchnorm", CONV, {"augment": True, "augment_padding": 1}),
    "conv_ghost_bn": ("ghost_batchnorm", CONV, {}),
    "conv_bn_jitter": ("batchnorm_jitter", CONV, {}),
    "resnet_dropout": ("batchnorm", {"arch": "resnet9", "width": 4, "dropout": 0.2}, {}),
    "mlp_weightnorm_gamma_decay": ("weightnorm_gamma_decay", {"arch": "mlp", "depth": 3,
                                                              "width": 16}, {}),
    "mlp_full_batch": ("layernorm", {"arch": "mlp", "depth": 3, "width": 16},
                       {"batch_size": "full"}),
    "conv_population_norm": ("population_norm", {**CONV, "norm_options": {
        "population_norm": {"refresh_every": 100}}}, {}),
}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_no_sync_between_evaluations_one_per_evaluation(name, images, monkeypatch):
    norm, model, extra = RUNS[name]
    cfg = {**TRAIN, **extra}
    spec = make_spec(norm=norm, model=model, training=cfg)
    noise_layers = sum(isinstance(m, StepNoise) for m in training.build(spec, images).modules())
    per_step = count_syncs(monkeypatch, lambda: training.train(spec, images, "cpu"))
    evals = {s for s in range(cfg["steps"] + 1) if s % cfg["eval_every"] == 0} | {cfg["steps"]}
    ckpts = set(cfg["checkpoints"]) | {0, cfg["steps"]}
    for step in range(cfg["steps"] + 1):
        got = per_step.get(step, collections.Counter())
        if step in ckpts:  # a checkpoint copies the model to the host: only the reads count
            got = collections.Counter({k: v for k, v in got.items() if k != "cpu"})
        if step == 0 and noise_layers:  # the first training forward reads each noise layer's
            # seed (and jitter's calibration step) once: host ints from then on
            assert noise_layers <= got["_local_scalar_dense"] <= 2 * noise_layers, dict(got)
            del got["_local_scalar_dense"]
        if step == 0 and norm == "population_norm":  # the refresh at step 0 is a statistics
            # pass over the population subset (like an evaluation); between refreshes: none
            got.pop("_local_scalar_dense", None)
        expected = 1 if step in evals or step in ckpts else 0
        assert sum(got.values()) == expected, (step, dict(got))
        if expected:
            assert got == collections.Counter(tolist=1), (step, dict(got))


def test_noise_layers_read_their_buffers_once(monkeypatch):
    """Noisy BN draws the same noise as a fresh generator seeded from its buffers, without
    reading them again until they change (set_step, load_state_dict)."""
    torch.manual_seed(0)
    layer = normalizers.get("noisy_batchnorm").layer(3, "fc").train()
    x = torch.randn(8, 3)
    layer.set_step(5)
    reads = collections.Counter()
    with _Ops(lambda kind: reads.update([kind])):
        a = layer(x)
        b = layer(x)
    assert reads["_local_scalar_dense"] == 1  # noise_seed, once; noise_step was just written
    seed = (int(layer.noise_seed) * 6364136223846793005 + 5 * 1442695040888963407) % 2**63
    fresh = torch.Generator().manual_seed(seed)  # the generator the layer used to build
    assert torch.equal(layer.generator("cpu").get_state(), fresh.get_state())
    assert torch.equal(a, b)
    state = {k: v.clone() for k, v in layer.state_dict().items()}
    layer.set_step(6)
    c = layer(x)
    layer.load_state_dict(state)  # noise_step back to 5: the next forward reads it again
    assert torch.equal(layer(x), a) and not torch.equal(c, a)
