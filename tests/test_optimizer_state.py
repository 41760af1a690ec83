"""The training optimizer is ``torch.optim.SGD`` (issue 33: the hand-written copy of its CPU
update, ``train/sgd.py``, was removed; ``benchmarks/bench_sgd.py``). Checkpoints and resume
states written by that copy still load: it wrote torch's ``state_dict`` layout, spelled out here
as it wrote it, and a restored optimizer continues exactly as the one that saved it."""

from __future__ import annotations

import copy

import torch
from specs import make_spec
from torch import nn

from bnstudy.train import checkpoints, stacked
from bnstudy.train import loop as training
from bnstudy.train.config import TrainConfig


def _net(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 3))


def _steps(net: nn.Module, opt, n: int, seed: int = 1) -> None:
    gen = torch.Generator().manual_seed(seed)
    for _ in range(n):
        x, y = torch.randn(8, 5, generator=gen), torch.randint(0, 3, (8,), generator=gen)
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(net(x), y).backward()
        opt.step()


def _old_copy_state(opt: torch.optim.SGD) -> dict:
    """The state_dict the removed train/sgd.py's SGD wrote for the same optimizer: param groups
    with exactly these keys in this order (params last), state numbered in group order."""
    groups = [{"lr": g["lr"], "momentum": g["momentum"], "dampening": g["dampening"],
               "weight_decay": g["weight_decay"], "nesterov": g["nesterov"], "maximize": False,
               "foreach": None, "differentiable": False, "fused": None,
               "params": list(range(len(g["params"])))} for g in opt.param_groups]
    params = opt.param_groups[0]["params"]
    state = {k: {"momentum_buffer": opt.state[p]["momentum_buffer"].clone()}
             for k, p in enumerate(params) if p in opt.state}
    return {"state": state, "param_groups": groups}


def test_the_training_optimizer_is_torch_sgd_with_the_configs_options():
    cfg = TrainConfig.from_dict({"lr": 0.05, "momentum": 0.9, "weight_decay": 1e-4, "steps": 1})
    opt = training.make_optimizer(_net(), cfg)
    assert type(opt) is torch.optim.SGD
    g = opt.param_groups[0]
    assert (g["lr"], g["momentum"], g["weight_decay"], g["nesterov"]) == (0.05, 0.9, 1e-4, False)
    assert not g["foreach"] and not g["fused"]  # the CPU's single-tensor path


def test_a_state_written_by_the_old_copy_loads_and_continues_identically():
    cfg = TrainConfig.from_dict({"lr": 0.05, "momentum": 0.9, "weight_decay": 1e-4, "steps": 1})
    net = _net()
    opt = training.make_optimizer(net, cfg)
    _steps(net, opt, 5)
    old = _old_copy_state(opt)
    a, b = copy.deepcopy(net), copy.deepcopy(net)
    opt_a = training.make_optimizer(a, cfg)
    opt_a.load_state_dict(copy.deepcopy(opt.state_dict()))
    opt_b = training.make_optimizer(b, cfg)
    opt_b.load_state_dict(old)
    _steps(a, opt_a, 5, seed=2)
    _steps(b, opt_b, 5, seed=2)
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(p, q), name


def test_a_checkpoint_with_the_old_layout_replays_its_update(star):
    """A run's checkpoint whose optimizer state is in the old copy's layout gives, through
    Restored.optimizer (what ICS replays), the next checkpoint's weights bitwise."""
    spec = make_spec(norm="batchnorm", training={
        "lr": 0.1, "momentum": 0.9, "weight_decay": 1e-3, "batch_size": 8, "steps": 3,
        "eval_every": 1, "checkpoints": [0, 1, 2]})
    run = training.train(spec, star, "cpu")
    ck = run["checkpoints"][1]
    model = training.build(spec, star)
    ref = training.make_optimizer(model, TrainConfig.from_dict(spec["training"]))
    ref.load_state_dict(ck["optimizer"])
    ck["optimizer"] = _old_copy_state(ref)
    r = checkpoints.restore(run, 1, star)
    x, y = torch.as_tensor(star.x_train)[r.batch], torch.as_tensor(star.y_train)[r.batch]
    r.optimizer.zero_grad()
    stacked.seed_gradients(r.model, x, y, training.loss_fn(star.task))  # training's kernel
    r.optimizer.step()
    for k, v in r.model.state_dict().items():
        assert torch.equal(v, run["checkpoints"][2]["model"][k]), k


def test_a_restored_optimizer_does_not_move_the_checkpoints_buffers(star):
    """torch.optim loads a state's tensors without copying them: Restored.optimizer loads a copy,
    so stepping it (a replayed update) leaves the run's checkpoint as it was."""
    spec = make_spec(norm="none", training={
        "lr": 0.1, "momentum": 0.9, "batch_size": 8, "steps": 3, "eval_every": 3,
        "checkpoints": [0, 1, 2]})
    run = training.train(spec, star, "cpu")
    saved = copy.deepcopy(run["checkpoints"][1]["optimizer"])
    r = checkpoints.restore(run, 1, star)
    x, y = torch.as_tensor(star.x_train)[r.batch], torch.as_tensor(star.y_train)[r.batch]
    for _ in range(2):
        r.optimizer.zero_grad()
        training.loss_fn(star.task)(r.model(x), y).backward()
        r.optimizer.step()
    for k, s in saved["state"].items():
        assert torch.equal(s["momentum_buffer"],
                           run["checkpoints"][1]["optimizer"]["state"][k]["momentum_buffer"])
