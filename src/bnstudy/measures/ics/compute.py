"""Internal covariate shift (ICS): Santurkar et al. 2018, §2, Definition 2.1, Figs. 3 and 8.

**Gradient ICS** (Def. 2.1). At checkpoint step ``t``, on that step's recorded mini-batch
``(x^t, y^t)`` (the inputs update ``t`` trained on: with ``augment: true``, the batch's images
cropped and flipped as that update drew them, :func:`bnstudy.train.augment.update_inputs`) and
for every parametrized layer ``i``::

    G_i  = grad_{W_i} L(W_1^t, ..., W_k^t; x^t, y^t)
    G'_i = grad_{W_i} L(W_1^{t+1}, ..., W_{i-1}^{t+1}, W_i^t, ..., W_k^t; x^t, y^t)

and the table records ``||G - G'||_2`` (``grad_l2_diff``), ``||G - G'||_2 / ||G||_2``
(``grad_rel_diff``) and ``cos(G, G')`` (``grad_cosine``); ``grad_norm`` and ``grad_prime_norm``
are ``||G||_2`` and ``||G'||_2``. Choices the paper leaves open:

- *Layer i* is the i-th :class:`~bnstudy.networks.models.Block`: the weight and bias of its
linear/conv
  map (weight norm's ``g`` and ``v``, the tensors SGD actually updates) together with its
  normalizer's parameters (BN's gamma and beta); the head is the last layer (``k = blocks + 1``).
  ``G_i`` is the concatenation of the flattened gradients of those tensors. Every parameter of
  the model belongs to exactly one layer (checked).
- ``W^{t+1}`` is the optimizer's *actual* update: a copy of the checkpoint's SGD state
  (momentum buffers, weight decay, learning rate) steps once on ``G``, exactly as training
  did, so ``W^{t+1}`` equals the next checkpoint's weights when that is step ``t + 1``
  (``update_replay_error``: max |difference| to it; NaN when the next checkpoint is later).
- The loss is the training loss (mean cross-entropy, or mean squared error for regression;
  Santurkar's DLN uses a summed squared error, which only rescales G and G' alike).
- BN statistics: every pass runs in train mode, so BN normalizes with the *mini-batch
  statistics of the step's batch*, as in the training update (``bn_statistics = "batch"``).
  All passes run on a deep copy of the model: the given model, its BN running buffers, its
  train/eval mode and the given optimizer's state are never touched.
- Stochastic normalizers (noisy BN): the noise drawn for step ``t`` is part of that step's
  function, so every pass (G, each G'_i, both probe passes) draws the noise of the checkpoint's
  step, the noise update ``t`` used (:mod:`bnstudy.networks.norms.noisy`): the measure compares
  weights, never two noise draws. With lr = 0, ``W^{t+1} = W^t`` and ``G' = G`` exactly, for
  every normalizer (``tests/test_normalizer_traits.py``).
- Layer 1 has no preceding layers, so its parameter point is W^t itself and ``G'_1 = G_1``
  (reported, no extra pass). Every other measured layer costs one extra forward and a backward
  that stops at that layer's parameters.

**Distributional ICS** (Fig. 8, Ioffe & Szegedy's notion). A fixed probe batch, the first
``probe_size`` training points (the same at every checkpoint; the dataset generators store the
training set in random order, so this is a random sample), is passed forward in train mode
(BN with the probe batch's own statistics) and the input of every layer is recorded (the input
of block i's linear/conv map; for the head, its input after pooling). Statistics are per unit
(feature; for conv maps per channel over batch, height and width, the BN convention used for
Santurkar's activation histograms), with the biased variance:

- ``input_mean``, ``input_var``: the per-unit mean and variance, averaged over the layer's units;
- ``mean_shift``, ``var_shift``: mean over units of ``|mu_j^t - mu_j^s|`` and
  ``|var_j^t - var_j^s|`` between this checkpoint and the previous one in the schedule
  (step ``shift_from_step = s``; NaN at the first checkpoint);
- ``step_mean_shift``, ``step_var_shift``: the same change across the single update t -> t+1
  (the probe passed through ``W^{t+1}``), i.e. Fig. 8's "two successive steps".

Layer 1's input is the data, so its distributional shifts are 0 by construction.
For noisy BN each checkpoint's probe pass draws that checkpoint's noise, so ``mean_shift`` and
``var_shift`` include the change of the injected noise between the two steps (Santurkar's
deliberate "covariate shift"), while ``step_*`` (both passes with the noise of step ``t``)
isolate the effect of the single weight update.

Cost per checkpoint: the forward+backward for G (the one training did), one extra forward and
partial backward per measured layer i > 1, and two probe forwards (at W^t and W^{t+1});
``benchmarks/bench_ics.py`` counts the passes and times them against that floor.

Options (config section ``ics``): ``probe_size`` (int >= 1, default 256, capped at the training
set size); ``layers``: ``"all"`` or a list of 1-based layer indices, negative counting from the
head (-1 is the head), so one list fits experiments of different depth.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.func import functional_call

from bnstudy.measures.ics.options import Options
from bnstudy.networks import models
from bnstudy.networks.probe import watch
from bnstudy.train import augment, checkpoints, stacked
from bnstudy.train.loop import loss_fn

BN_STATISTICS = "batch"
def layer_groups(model: nn.Module) -> list[tuple[str, list[str]]]:
    """``[(layer_name, parameter names)]`` input to output: blocks, then the head."""
    names = {id(p): n for n, p in model.named_parameters()}
    groups = [(f"block{k}", [names[id(p)] for m in (b.linear, b.norm) for p in m.parameters()])
              for k, b in enumerate(models.blocks(model), 1)]
    if models.maps(model)[-1] is model.head:  # the ``unit`` student has no head
        groups.append(("head", [names[id(p)] for p in model.head.parameters()]))
    grouped = [n for _, g in groups for n in g]
    if sorted(grouped) != sorted(names.values()):
        missing = sorted(set(names.values()) - set(grouped))
        raise ValueError(f"parameters outside any layer (blocks + head): {missing}")
    return groups


def resolve_layers(layers, n_layers: int) -> list[int]:
    """0-based indices of the measured layers ("all" or 1-based, negative from the head)."""
    if layers == "all":
        return list(range(n_layers))
    out = []
    for k in layers:
        i = k - 1 if k > 0 else n_layers + k
        if not 0 <= i < n_layers:
            raise ValueError(f"ics layer {k} out of range: the model has {n_layers} layers "
                             f"(valid: 1..{n_layers} or -{n_layers}..-1)")
        out.append(i)
    return sorted(set(out))


def _optimizer_copy(optimizer: torch.optim.Optimizer, model: nn.Module,
                    net: nn.Module) -> torch.optim.Optimizer:
    """An optimizer over ``net`` (a copy of ``model``) with a deep copy of ``optimizer``'s state."""
    name_of = {id(p): n for n, p in model.named_parameters()}
    params = dict(net.named_parameters())
    groups = [{**{k: v for k, v in g.items() if k != "params"},
               "params": [params[name_of[id(p)]] for p in g["params"]]}
              for g in optimizer.param_groups]
    opt = type(optimizer)(groups)
    opt.load_state_dict(copy.deepcopy(optimizer.state_dict()))  # never share momentum buffers
    return opt


def _flat(tensors) -> torch.Tensor:
    return torch.cat([t.reshape(-1) for t in tensors]).double()


def _compare(g: torch.Tensor, gp: torch.Tensor) -> dict:
    n, n_p, d = float(g.norm()), float(gp.norm()), float((g - gp).norm())
    cos = float(g @ gp) / (n * n_p) if n > 0 and n_p > 0 else math.nan
    return {"grad_norm": n, "grad_prime_norm": n_p, "grad_l2_diff": d,
            "grad_rel_diff": d / n if n > 0 else math.nan, "grad_cosine": cos}


def _input_stats(net: nn.Module, params: dict, probe: torch.Tensor) -> list[tuple]:
    """Per-unit (mean, biased variance) of every layer's input on ``probe``, in train mode."""
    found: list[torch.Tensor] = []
    with watch(models.maps(net), lambda _j, h: found.append(h.detach()), inputs=True), \
            torch.no_grad():
        functional_call(net, params, (probe,))
    out = []
    for h in found:
        dims = (0,) if h.dim() == 2 else (0, *range(2, h.dim()))
        h = h.double()
        out.append((h.mean(dims), h.var(dims, unbiased=False)))
    return out


@dataclass
class CheckpointICS:
    rows: list[dict]  # one per measured layer, without the cross-checkpoint shift columns
    stats: list[tuple]  # per-unit (mean, var) of every layer's input at W^t
    grads: dict  # layer index -> (G_i, G'_i) as flat float64 tensors
    new_params: dict  # W^{t+1} by parameter name


def measure_checkpoint(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor,
                       y: torch.Tensor, task: str, probe: torch.Tensor,
                       layers="all", batched: bool = False) -> CheckpointICS:
    """Gradient and per-update distributional ICS at one checkpoint (pure: works on a copy).
    ``batched``: the run trained through the stacked kernel (:func:`stacked.batchable`), so the
    update is replayed through it (:func:`stacked.seed_gradients`): bitwise the training's."""
    net = copy.deepcopy(model).train()
    groups = layer_groups(net)
    measured = resolve_layers(layers, len(groups))
    params = dict(net.named_parameters())
    old = {n: p.detach().clone() for n, p in params.items()}
    opt = _optimizer_copy(optimizer, model, net)
    lf = loss_fn(task)
    opt.zero_grad(set_to_none=True)
    if batched:
        loss = stacked.seed_gradients(net, x, y, lf)
    else:
        loss = lf(net(x), y)
        loss.backward()
    grad = {n: p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p)
            for n, p in params.items()}
    opt.step()  # the actual update: W^{t+1}
    new = {n: p.detach().clone() for n, p in params.items()}
    grads, rows = {}, []
    for i in measured:
        name, names = groups[i]
        g = _flat(grad[n] for n in names)
        if i == 0:
            gp = g.clone()  # no preceding layers: G'_1 is G_1 at the same point
        else:
            earlier = {n for _, gr in groups[:i] for n in gr}
            point = {n: (new[n] if n in earlier else old[n]) for n in old}
            leaves = [old[n].clone().requires_grad_(True) for n in names]
            point.update(zip(names, leaves, strict=True))
            out = functional_call(net, point, (x,))
            parts = torch.autograd.grad(lf(out, y), leaves, allow_unused=True)
            gp = _flat(p if p is not None else torch.zeros_like(q)
                       for p, q in zip(parts, leaves, strict=True))
        grads[i] = (g, gp)
        rows.append({"layer": i + 1, "layer_name": name, "n_layers": len(groups),
                     "n_params": int(g.numel()), "batch_loss": loss.item(), **_compare(g, gp)})
    stats = _input_stats(net, old, probe)
    stats_next = _input_stats(net, new, probe)
    for row in rows:
        (m0, v0), (m1, v1) = stats[row["layer"] - 1], stats_next[row["layer"] - 1]
        row.update({"input_mean": float(m0.mean()), "input_var": float(v0.mean()),
                    "step_mean_shift": float((m1 - m0).abs().mean()),
                    "step_var_shift": float((v1 - v0).abs().mean())})
    return CheckpointICS(rows, stats, grads, new)


def _replay_error(new: dict, next_state: dict) -> float:
    return max(float((p.cpu() - next_state[n]).abs().max()) for n, p in new.items())


def run_ics(run: dict, ds, options: Options, device: torch.device) -> list[dict]:
    """ICS rows for every checkpoint of a run (the ``ics`` measure's entry point)."""
    opts = Options.parse(options)
    xtr = torch.as_tensor(ds.x_train, device=device)
    ytr = torch.as_tensor(ds.y_train, device=device)
    probe_size = min(opts.probe_size, len(xtr))
    probe = xtr[:probe_size]
    cks = run["checkpoints"]
    rows, prev = [], None
    for idx in range(len(cks)):
        r = checkpoints.restore(run, idx, ds, device)
        x = augment.update_inputs(xtr[r.batch], r.spec, r.step, ds.input_shape)
        res = measure_checkpoint(r.model, r.optimizer, x, ytr[r.batch], ds.task, probe,
                                 opts.layers, stacked.batchable(r.spec)[0])
        consecutive = idx + 1 < len(cks) and int(cks[idx + 1]["step"]) == r.step + 1
        replay = _replay_error(res.new_params, cks[idx + 1]["model"]) if consecutive else math.nan
        for row in res.rows:
            m, v = res.stats[row["layer"] - 1]
            if prev is None:
                shift = {"mean_shift": math.nan, "var_shift": math.nan, "shift_from_step": math.nan}
            else:
                pm, pv = prev[1][row["layer"] - 1]
                shift = {"mean_shift": float((m - pm).abs().mean()),
                         "var_shift": float((v - pv).abs().mean()), "shift_from_step": prev[0]}
            rows.append({"step": r.step, **row, **shift, "update_replay_error": replay,
                         "probe_size": probe_size, "bn_statistics": BN_STATISTICS})
        prev = (r.step, res.stats)
    return rows
