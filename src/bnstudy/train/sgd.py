"""The training optimizer: SGD with momentum and weight decay, without ``torch.optim`` on the CPU.

Why not ``torch.optim.SGD`` everywhere: every ``torch.optim`` optimizer wraps
``add_param_group`` and ``step`` in ``torch._disable_dynamo``, whose first call imports
``torch._dynamo`` (and sympy with it): about 1.3 s of CPU per process on this project's machines,
against 1.4 s for ``import torch`` itself and under a second of training for most runs of the
default study. Each training run and each measure that replays an update is its own process, so
that import was a third of the default study's training time.

:class:`SGD` is the update of torch's single-tensor SGD path (the one torch takes on the CPU)
written out, operation for operation, so its parameters, momentum buffers and ``state_dict`` are
bitwise those of ``torch.optim.SGD`` (``tests/test_sgd.py`` checks it against torch over many
steps, learning-rate changes, weight decay, dampening and Nesterov). Its ``state_dict`` has
torch's layout, so either optimizer loads the other's state, and checkpoint files do not depend
on which one wrote them.

On CUDA, :func:`make` returns ``torch.optim.SGD`` with its fused kernel (one launch per step
instead of a loop over tensors), where the start-up cost is noise against the run.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable

import torch

# torch.optim.SGD's param-group keys, in its order (state_dict layout).
_GROUP_DEFAULTS = {"lr": 1e-3, "momentum": 0.0, "dampening": 0.0, "weight_decay": 0.0,
                   "nesterov": False, "maximize": False, "foreach": None,
                   "differentiable": False, "fused": None}
_HYPER = ("lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize")


def _check_group(group: dict) -> None:
    for key in ("lr", "momentum", "weight_decay"):
        value = group[key]
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
            raise ValueError(f"SGD {key}={value!r}: must be a number >= 0")
    if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
        raise ValueError(f"SGD nesterov=True needs momentum > 0 and dampening = 0 "
                         f"(got momentum={group['momentum']!r}, "
                         f"dampening={group['dampening']!r})")
    for key in ("maximize", "differentiable", "fused"):
        if group[key]:
            raise ValueError(f"SGD {key}={group[key]!r}: not supported by bnstudy's SGD "
                             "(use torch.optim.SGD)")


class SGD:
    """``torch.optim.SGD``'s CPU update and state, with no import of ``torch._dynamo``.

    ``SGD(params_or_groups, lr=..., momentum=..., dampening=..., weight_decay=...,
    nesterov=...)`` as torch's: ``params_or_groups`` is an iterable of tensors or of param-group
    dicts (``{"params": [...], "lr": ...}``) whose missing keys take the keyword defaults.
    """

    def __init__(self, params: Iterable, **defaults) -> None:
        unknown = sorted(set(defaults) - set(_GROUP_DEFAULTS))
        if unknown:
            raise TypeError(f"SGD: unknown options {unknown}; allowed: {sorted(_GROUP_DEFAULTS)}")
        self.defaults = {**_GROUP_DEFAULTS, **defaults}
        params = list(params)
        if not params:
            raise ValueError("SGD got an empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        self.param_groups: list[dict] = []
        self.state: dict[torch.Tensor, dict] = {}
        for g in groups:
            group = {**self.defaults, **{k: v for k, v in g.items() if k != "params"}}
            _check_group(group)
            group["params"] = list(g["params"])
            self.param_groups.append(group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.detach_()
                    p.grad.requires_grad_(False)
                    p.grad.zero_()

    @torch.no_grad()
    def step(self) -> None:
        """One update of every parameter with a gradient (torch's ``_single_tensor_sgd``)."""
        for group in self.param_groups:
            lr, momentum, wd = group["lr"], group["momentum"], group["weight_decay"]
            dampening, nesterov = group["dampening"], group["nesterov"]
            for param in group["params"]:
                if param.grad is None:
                    continue
                grad = param.grad
                if wd != 0:
                    grad = grad.add(param, alpha=wd)
                if momentum != 0:
                    state = self.state.setdefault(param, {})
                    buf = state.get("momentum_buffer")
                    if buf is None:
                        buf = grad.detach().clone()
                        state["momentum_buffer"] = buf
                    else:
                        buf.mul_(momentum).add_(grad, alpha=1 - dampening)
                    grad = grad.add(buf, alpha=momentum) if nesterov else buf
                param.add_(grad, alpha=-lr)

    def state_dict(self) -> dict:
        """torch.optim's layout: parameters numbered in group order, state by number."""
        index, groups, k = {}, [], 0
        for group in self.param_groups:
            ids = []
            for p in group["params"]:
                if id(p) not in index:
                    index[id(p)] = k
                    k += 1
                ids.append(index[id(p)])
            groups.append({**{key: v for key, v in group.items() if key != "params"},
                           "params": ids})
        state = {index[id(p)]: dict(s) for p, s in self.state.items() if id(p) in index}
        return {"state": dict(sorted(state.items())), "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Load a state saved by this class or by ``torch.optim.SGD`` (same layout)."""
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups) or any(
                len(g["params"]) != len(own["params"])
                for g, own in zip(groups, self.param_groups, strict=True)):
            raise ValueError("loaded SGD state has groups or parameters that do not match "
                             f"this optimizer's ({[len(g['params']) for g in groups]} vs "
                             f"{[len(g['params']) for g in self.param_groups]})")
        by_id = {}
        for saved, own in zip(groups, self.param_groups, strict=True):
            by_id.update(zip(saved["params"], own["params"], strict=True))
            for key in _HYPER:  # foreach/fused name torch's implementation, not the update
                if key in saved:
                    own[key] = saved[key]
            _check_group(own)
        self.state = {}
        for k, s in state_dict["state"].items():
            p = by_id[k]
            self.state[p] = {key: (v.to(device=p.device, dtype=p.dtype).clone()
                                   if isinstance(v, torch.Tensor) else v)
                             for key, v in s.items()}


def make(params: list, lr: float, momentum: float, weight_decay: float):
    """The training optimizer over ``params``: torch's fused SGD on CUDA where this torch has
    it (one kernel launch per step), else :class:`SGD` (torch's CPU update, no dynamo import)."""
    on_cuda = bool(params) and all(p.device.type == "cuda" for p in params)
    if on_cuda and "fused" in inspect.signature(torch.optim.SGD).parameters:
        return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay,
                               fused=True)
    return SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay)
