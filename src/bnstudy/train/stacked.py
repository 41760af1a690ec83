"""The training step's kernels: K seeds of one arm stacked and stepped together, or one model.

A block of seeds of one (experiment, normalizer) has K models of the same shape, each built,
initialized and hooked exactly as a lone run's. :class:`Stacked` copies their parameters and
buffers into tensors with a leading seed dimension (``[K, ...]``) and then makes every seed's
model hold *views* of its slot: the per-seed models stay what the rest of the trainer reads
(their ``state_dict``, evaluation, checkpoints), while a training step is one batched pass,
``torch.func.vmap`` over ``functional_call`` of the first model's structure, one backward of
the sum of the seeds' mean losses (each seed's gradient is exactly that of its own loss: the
sum's derivative is 1) and one ``torch.optim.SGD`` step over the stacked tensors (elementwise:
a slot's update is the one its own optimizer would make). Per-operation overhead (dispatch,
autograd, the optimizer's Python) is paid once per block instead of once per seed. For fully
connected nets of linear maps, BN and ReLU, the forward pass runs vmap's own kernels written
out by hand (:mod:`bnstudy.train.bmm`: bitwise the same numbers, without vmap's cost per
operation); every other net goes through vmap.

A seed's numbers do not depend on K or on its slot (``tests/test_block_training.py`` pins it
bitwise for an MLP with and without BN and for a CNN, on the CPU): each batched kernel computes
a slot from that slot's inputs alone, in the same order for every K. They are the batched
kernels' numbers, though, which for BN differ from the unbatched layer's by float rounding, so
every batchable run, K = 1 included, trains through them, and the ICS measure replays an update
through them too (:func:`seed_gradients`).

:class:`Single` is the same interface over one model trained as it is (K = 1): the kernel of
the normalizers and models that cannot be batched (:func:`batchable`: noise drawn per step,
hooks that recompute statistics from the training set before every update, dropout), whose
seeds a block trains one after another.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.func import functional_call, vmap

from bnstudy.train import bmm

# seeds per training job when the config does not say (``benchmarks/bench_seeds.py``)
DEFAULT_BLOCK = 16


def batchable(spec) -> tuple[bool, str]:
    """Whether the runs of ``spec`` train stacked, and if not, why."""
    nz = spec.model_config.normalizer(spec.norm)
    if not nz.batched:  # the registry refuses batched with noise or a before_update hook
        return False, f"normalizer {spec.norm!r} is registered batched=False"
    if spec.model_config.dropout:
        return False, "the model has dropout (drawn per step)"
    return True, ""


def _slot_view(t: torch.Tensor, k: int, like: torch.Tensor) -> torch.Tensor:
    v = t[k]
    return nn.Parameter(v, requires_grad=False) if isinstance(like, nn.Parameter) else v


def _owners(model: nn.Module, kind: str):
    """``(qualified name, owning module, attribute)`` of every parameter or buffer."""
    out = []
    for mname, mod in model.named_modules():  # the order of parameters() and state_dict()
        table = mod._parameters if kind == "param" else mod._buffers  # noqa: SLF001
        for a, t in table.items():
            if t is not None:
                out.append((f"{mname}.{a}" if mname else a, mod, a))
    return out


class Single:
    """One model stepped as it is (the unbatched kernel, K = 1)."""

    def __init__(self, models: list[nn.Module], make_optimizer, cfg, loss):
        if len(models) != 1:
            raise ValueError(f"the unbatched kernel steps one model, got {len(models)}")
        self.models, self.loss = models, loss
        self.optimizer = make_optimizer(models[0], cfg)
        self.watched: list[torch.Tensor] = []  # the trainer's unread losses, one [K] per step

    def losses(self, xs: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
        """The seed's mean loss on its batch, ``[1]`` (``xs``, ``ys``: ``[1, B, ...]``)."""
        return self.loss(self.models[0](xs[0]), ys[0]).reshape(1)

    def optimizer_state(self, k: int) -> dict:
        return self.optimizer.state_dict()

    def load_optimizer_states(self, states: list[dict]) -> None:
        self.optimizer.load_state_dict(states[0])


class Stacked:
    """K models of one structure stepped as one: stacked leaf tensors, per-seed views."""

    def __init__(self, models: list[nn.Module], make_optimizer, cfg, loss):
        self.models, self.loss = models, loss
        self.params = _owners(models[0], "param")
        self.buffers = _owners(models[0], "buffer")
        self.names = [n for n, _, _ in self.params] + [n for n, _, _ in self.buffers]
        self.holder = nn.Module()
        self.holder.p = nn.ParameterList()
        self._stack(models)
        self.optimizer = make_optimizer(self.holder, cfg)
        self._step = vmap(self._one, in_dims=(0, 0, 0), randomness="error")
        self.program = bmm.program(models[0], self.names)  # None: vmap's kernels
        self.watched: list[torch.Tensor] = []  # the trainer's unread losses, one [K] per step

    def _stack(self, models: list[nn.Module]) -> None:
        """Copy the models' tensors into stacked ones; bind each model to its slot's views."""
        per = [{n: getattr(o, a) for n, o, a in _owners(m, "param")} for m in models]
        bufs = [{n: getattr(o, a) for n, o, a in _owners(m, "buffer")} for m in models]
        if len(models) == 1:  # a ghost copy in slot 1: batched BN rounds differently at K = 1
            per, bufs = per * 2, bufs * 2
        self.p = [nn.Parameter(torch.stack([p[n].detach() for p in per]))
                  for n, _, _ in self.params]
        self.b = [torch.stack([b[n] for b in bufs]) for n, _, _ in self.buffers]
        for k, m in enumerate(models):
            for (_, o, a), t in zip(_owners(m, "param"), self.p, strict=True):
                o._parameters[a] = _slot_view(t.detach(), k, o._parameters[a])  # noqa: SLF001
            for (_, o, a), t in zip(_owners(m, "buffer"), self.b, strict=True):
                o._buffers[a] = t[k]  # noqa: SLF001
        self.holder.p = nn.ParameterList(self.p)

    def _one(self, p, b, x):
        return functional_call(self.models[0], dict(zip(self.names, [*p, *b], strict=True)),
                               (x,), tie_weights=False, strict=True)

    def losses(self, xs: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
        """The K seeds' mean losses on their own batches ``xs``, ``ys`` (``[K, B, ...]``),
        ``[K]`` (a graph to the stacks; one more, the ghost's, when K = 1: backward the sum of
        all)."""
        if len(xs) == 1:  # the ghost's inputs
            xs, ys = torch.cat([xs, xs]), torch.cat([ys, ys])
        if (self.program is not None and self.models[0].training
                and not torch.is_autocast_enabled(xs.device.type) and xs.dtype == torch.float32):
            out = bmm.forward(self.program, [*self.p, *self.b], xs)
        else:
            out = self._step(tuple(self.p), tuple(self.b), xs)
        return vmap(self.loss)(out, ys)

    def optimizer_state(self, k: int) -> dict:
        """Seed ``k``'s SGD state as its own ``torch.optim.SGD`` would hold it."""
        sd = self.optimizer.state_dict()
        state = {i: {key: (v[k].clone() if torch.is_tensor(v) and v.dim() > 0 and key
                           == "momentum_buffer" else v) for key, v in s.items()}
                 for i, s in sd["state"].items()}
        return {"state": state, "param_groups": sd["param_groups"]}

    def load_optimizer_states(self, states: list[dict]) -> None:
        """Stack the seeds' SGD states (all of one step) into the stacked optimizer."""
        states = states * 2 if len(states) == 1 else states  # and the ghost's
        first = states[0]
        state = {i: {key: (torch.stack([st["state"][i][key] for st in states])
                           if key == "momentum_buffer" and torch.is_tensor(v) else v)
                     for key, v in s.items()} for i, s in first["state"].items()}
        self.optimizer.load_state_dict({"state": state, "param_groups": first["param_groups"]})

    def keep(self, slots: list[int]) -> None:
        """Drop every slot not in ``slots`` (diverged seeds): re-stack the rest."""
        states = [self.optimizer_state(k) for k in slots]
        self.models = [self.models[k] for k in slots]
        self._stack(self.models)
        self.optimizer.param_groups[0]["params"] = list(self.p)
        self.optimizer.state.clear()
        self.load_optimizer_states(states)


def kernel(models: list[nn.Module], batched: bool, make_optimizer, cfg, loss):
    """The step kernel of a block: :class:`Stacked` when ``batched``, else :class:`Single`."""
    return (Stacked if batched else Single)(models, make_optimizer, cfg, loss)


def seed_gradients(model: nn.Module, x: torch.Tensor, y: torch.Tensor, loss) -> torch.Tensor:
    """The mini-batch loss of ``model`` on ``(x, y)`` through the stacked kernel (a block of
    one, as training ran it), its gradients left in the parameters' ``.grad`` as a backward
    would; the model's buffers (BN running statistics) are updated as a training step does."""
    params = _owners(model, "param")
    buffers = _owners(model, "buffer")
    p = [getattr(o, a).detach().expand(2, *getattr(o, a).shape).clone().requires_grad_(True)
         for _, o, a in params]  # slot 1: the ghost, as in training
    b = [getattr(o, a).expand(2, *getattr(o, a).shape).clone() for _, o, a in buffers]
    names = [n for n, _, _ in params] + [n for n, _, _ in buffers]

    def one(pp, bb, xx):
        return functional_call(model, dict(zip(names, [*pp, *bb], strict=True)), (xx,),
                               tie_weights=False, strict=True)

    out = vmap(one, in_dims=(0, 0, 0), randomness="error")(tuple(p), tuple(b), torch.stack([x, x]))
    val = vmap(loss)(out, torch.stack([y, y]))
    val.sum().backward()
    with torch.no_grad():
        for (_, o, a), t in zip(buffers, b, strict=True):
            getattr(o, a).copy_(t[0])
    for (_, o, a), t in zip(params, p, strict=True):
        param = getattr(o, a)
        param.grad = t.grad[0].clone() if param.grad is None else param.grad + t.grad[0]
    return val[0].detach()
