"""Training: SGD over a seeded batch sampler, checkpoints that allow exact replay, history.

Checkpoint semantics (what later measures rely on): the checkpoint at step ``t`` holds

- ``model``: the weights W^t *before* update ``t`` (step 0 is the initialization), with BN buffers;
- ``optimizer``: the SGD state before update ``t`` (momentum buffers), so that loading both and
  calling ``optimizer.step()`` on the gradient of ``batch`` reproduces W^{t+1} exactly;
- ``batch``: the indices (into the training set) of the mini-batch update ``t`` uses.

A run whose mini-batch loss becomes NaN/inf stops at that step and is recorded as diverged: the
history and checkpoints up to that point are kept, and ``diverged`` is set. The losses are read
on the host only at evaluation and checkpoint steps (:mod:`bnstudy.train.watch`), in the same
transfer as the evaluation: between them a step makes no host-device sync (the epoch's
permutation and augmentation draws go to the device once per epoch, noise layers keep their seed
and step as Python ints), and the run is cut back to the failing step, so its history and
checkpoints are those of a check at every step.

Precision: ``precision: bf16`` runs the training and evaluation forward passes under bfloat16
autocast, normalizer statistics in float32 (:mod:`bnstudy.train.precision`); ``fp32`` (default)
is float32 throughout.

Progress: at every evaluation step one INFO line on the ``bnstudy`` logger gives step/total, the
losses, the test accuracy, elapsed seconds and an ETA (:mod:`bnstudy.train.progress`).

Normalizer hooks: a normalizer with an ``on_init`` hook (bn_init's whole-training-set BN fold,
weightnorm_gamma_decay's zeta) gets it once after the model is built, before the step-0
checkpoint; one with ``before_update`` (population_norm's statistics) gets it at the start of
every step, before that step's evaluation, checkpoint and update. Hooks keep all they compute in
parameters and buffers, so checkpoints restore and replay without them.

Learning rate and inputs: the lr of step ``t`` comes from the config's schedule
(:mod:`bnstudy.train.schedules`: decay, warm-up, batch-size scaling), set in the optimizer before
the checkpoint and recorded in the history; with ``augment: true`` update ``t`` sees its batch's
images randomly cropped and flipped as a function of (seed, ``t``) (:mod:`bnstudy.train.augment`).

A run can be resumed (:mod:`bnstudy.train.resume`): at every checkpoint before the last, the
new checkpoint goes to a file of its own beside ``resume_path`` (``<stem>.ckpt<step>.pt``, written
once) and the trainer state (model, optimizer, sampler and RNG states, history so far, and the
steps whose checkpoint files are on disk; no earlier checkpoint) to ``resume_path``; a restarted
job with the same spec reads them back and produces the same checkpoints and history as an
uninterrupted run. The checkpoints stay in memory too, for the result. Every resume file carries
a checksum (:func:`bnstudy.io.save_pt`); a corrupt or truncated one, or a missing checkpoint file,
is discarded with a warning and the run starts afresh (they are no workflow outputs, so nothing
else would remove them). :func:`train` leaves them; the train verb removes them after success.
"""

from __future__ import annotations

import inspect
import re
import time
from pathlib import Path

import torch
from torch import nn

from bnstudy.data import Dataset
from bnstudy.io import stable_hash
from bnstudy.networks import init, models, normalizers
from bnstudy.train import (
    augment,
    determinism,
    evaluation,
    precision,
    progress,
    resume,
    schedules,
)
from bnstudy.train.config import TrainConfig  # noqa: F401 (re-exported)
from bnstudy.train.evaluation import evaluate, loss_fn  # noqa: F401 (re-exported)
from bnstudy.train.resume import RESUME_KIND, to_cpu  # noqa: F401 (re-exported)
from bnstudy.train.spec import RunSpec
from bnstudy.train.watch import Watch


def resolve_device(name: str = "auto") -> torch.device:
    """The torch device ``name`` names; a ValueError when it is unknown or absent here."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name not in ("cpu", "cuda") and not re.fullmatch(r"cuda:[0-9]+", name):
        raise ValueError(f"unknown device {name!r}; valid choices: auto, cpu, cuda, cuda:N")
    if name != "cpu":
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        index = int(name.split(":")[1]) if ":" in name else 0
        if index >= n:
            raise ValueError(f"device {name!r}: this machine has {n} CUDA device(s); use "
                             "device: auto (CUDA when present, else CPU) or cpu")
    dev = torch.device(name)
    determinism.configure(dev)
    return dev


class BatchSampler:
    """Epoch-wise random permutations drawn from a seeded generator (or the full batch).

    The permutation is drawn on the CPU (the same numbers on every device) and copied to
    ``device`` once per epoch; ``next`` slices it there, without a host-device sync."""

    def __init__(self, n: int, batch_size: int | None, seed: int, device="cpu"):
        self.n, self.batch_size = n, batch_size
        self.gen = torch.Generator().manual_seed(seed)
        self.perm, self.pos = torch.empty(0, dtype=torch.long), 0
        self.device, self.on_device = torch.device(device), None

    def next(self) -> torch.Tensor:
        if self.batch_size is None or self.batch_size >= self.n:
            if self.on_device is None:
                self.on_device = torch.arange(self.n, device=self.device)
            return self.on_device
        if self.pos + self.batch_size > self.perm.numel():
            self.perm, self.pos = torch.randperm(self.n, generator=self.gen), 0
            self.on_device = None
        if self.on_device is None:
            self.on_device = to_device(self.perm, self.device)
        idx = self.on_device[self.pos: self.pos + self.batch_size]
        self.pos += self.batch_size
        return idx

    def state(self) -> dict:
        return {"gen": self.gen.get_state(), "perm": self.perm, "pos": self.pos}

    def load_state(self, s: dict) -> None:
        self.gen.set_state(s["gen"])
        self.perm, self.pos, self.on_device = s["perm"], int(s["pos"]), None


def to_device(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A CPU tensor on ``device``: from pinned memory, asynchronously, on CUDA (no sync)."""
    if device.type == "cuda":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)


def make_optimizer(model: nn.Module, cfg: TrainConfig) -> torch.optim.SGD:
    """The run's ``torch.optim.SGD``: its fused kernel on CUDA (one launch per step), else its
    single-tensor path (the CPU default). Its first step imports ``torch._dynamo`` (about 1.3 s
    of CPU), which the fork server imports once for every local job
    (``benchmarks/bench_sgd.py``)."""
    params = list(model.parameters())
    fused = bool(params) and all(p.device.type == "cuda" for p in params)
    if fused and "fused" in inspect.signature(torch.optim.SGD).parameters:
        return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum,
                               weight_decay=cfg.weight_decay, fused=True)
    return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum,
                           weight_decay=cfg.weight_decay)


def build(spec: RunSpec | dict, ds: Dataset, device: torch.device | str = "cpu") -> nn.Module:
    """The model a run spec describes, freshly initialized from the run's seed."""
    spec = RunSpec.parse(spec)
    torch.manual_seed(spec.seed)
    net = models.build_model(spec.model_config, spec.norm, ds.input_shape, ds.out_dim)
    return net.to(device)


def _norm_hooks(spec: RunSpec, xtr, ytr, task: str):
    """The run's configured normalizer and the context its training hooks receive."""
    nz = spec.model_config.normalizer(spec.norm)
    ctx = normalizers.HookContext(x=xtr, y=ytr, task=task, seed=spec.seed,
                                  batch_size=spec.training.batch_size or len(xtr))
    return nz, ctx


def _snapshot(model, opt, batch, step) -> dict:
    return {
        "step": step,
        "model": {k: v.detach().cpu().clone() for k, v in model.state_dict().items()},
        "optimizer": to_cpu(opt.state_dict()),
        "batch": batch.cpu().clone(),
    }


def train(spec: RunSpec | dict, ds: Dataset, device: str = "auto", resume_path=None) -> dict:
    """Train the run ``spec`` (a :class:`RunSpec`, or its JSON form, parsed here) on ``ds``.

    Returns ``{"spec", "checkpoints", "history", "diverged", "device"}``; ``history`` is a list of
    row dicts (step, split, loss, accuracy, lr, wall_time).
    """
    spec = RunSpec.parse(spec)
    cfg = spec.training
    dev = resolve_device(device)
    seed = spec.seed
    model = build(spec, ds, dev)
    init.init_in_data_span(model, spec.model_config, ds.x_train)  # unit: init_span
    opt = make_optimizer(model, cfg)
    lf = loss_fn(ds.task)
    xtr, ytr = torch.as_tensor(ds.x_train, device=dev), torch.as_tensor(ds.y_train, device=dev)
    xte, yte = torch.as_tensor(ds.x_test, device=dev), torch.as_tensor(ds.y_test, device=dev)
    nz, ctx = _norm_hooks(spec, xtr, ytr, ds.task)
    if nz.on_init is not None:  # e.g. bn_init; a resumed run then loads its saved state over it
        nz.on_init(model, ctx, nz.options)
    sampler = BatchSampler(len(xtr), cfg.batch_size, seed, dev)
    lr_at = schedules.from_config(cfg, len(xtr))
    plan = None
    if cfg.augment:
        augment.check_images(ds.input_shape)
        n = cfg.batch_for(len(xtr))  # one epoch's draws at a time
        plan = augment.Plan(n, cfg.augment_padding, seed, len(xtr) // n, dev)
    ckpt_steps = set(cfg.checkpoint_steps())
    key = _resume_key(spec, ds)
    state = {"step": 0, "checkpoints": [], "history": [], "elapsed": 0.0}
    if resume_path is not None:
        state = resume.load(resume_path, key, model, opt, sampler) or state
    t0 = time.perf_counter() - state["elapsed"]
    pending, watch, bad = state.get("replay_batch"), Watch(), None
    splits = (("train", (xtr, ytr)), ("test", (xte, yte)))
    model.train()
    for step in range(state["step"], cfg.steps + 1):
        try:
            batch = sampler.next() if pending is None else to_device(pending, dev)
            pending = None
            normalizers.set_step(model, step)  # noisy BN: this step's noise in every pass
            lr = lr_at(step)
            for group in opt.param_groups:  # before the checkpoint: its optimizer replays update t
                group["lr"] = lr
            if nz.before_update is not None:  # e.g. population_norm's statistics, before eval/ckpt
                nz.before_update(model, ctx, step, nz.options)
            evaluating = step % cfg.eval_every == 0 or step == cfg.steps
            if evaluating or step in ckpt_steps:  # the one host read since the last one
                bad, rows = _check(model, watch, splits if evaluating else (), ds.task, cfg,
                                   step, lr, t0)
                if bad is not None:
                    break
                state["history"] += rows
                if evaluating:
                    progress.report(spec, step, cfg.steps, state["history"], ds.task)
            if step in ckpt_steps:
                state["checkpoints"].append(_snapshot(model, opt, batch, step))
                if resume_path is not None and step < cfg.steps:
                    resume.save(resume_path, key, step, model, opt, sampler, state, t0, batch)
            if step == cfg.steps:
                break
            opt.zero_grad(set_to_none=True)
            xb = xtr[batch] if plan is None else augment.batch_inputs(
                xtr[batch], seed, step, cfg.augment_padding, ds.input_shape, plan.at(step))
            with precision.autocast(dev, cfg.precision):
                loss = lf(model(xb), ytr[batch])
            watch.add(step, loss, lr, time.perf_counter() - t0)
            loss.backward()
            opt.step()
        except Exception:  # NaN weights after an unchecked divergence may raise: check first
            bad = watch.check()
            if bad is None:
                raise
            break
    if bad is not None:  # the run stops at the failing step; nothing after it was recorded
        state["history"].append(bad)
    return {"spec": spec, "checkpoints": state["checkpoints"], "history": state["history"],
            "diverged": bad is not None, "device": str(dev)}


def _check(model, watch: Watch, splits, task: str, cfg: TrainConfig, step: int, lr: float,
           t0: float):
    """``(the first non-finite loss's row or None, the evaluation rows of ``splits``)`` from one
    host read of the watched losses and the evaluation sums of step ``step`` (none when there
    is nothing to read)."""
    if not splits and not watch.rows:
        return None, []
    dev = next(model.parameters(), torch.empty(0)).device
    sums = [evaluation.evaluation_sums(model, x, y, task, autocast=cfg.precision)
            for _, (x, y) in splits]
    values = torch.cat([watch.pending(dev), *sums]).tolist()
    k = len(watch.rows)
    bad, rows, wall = watch.first_bad(values[:k]), [], time.perf_counter() - t0
    for (split, (x, y)), part in zip(splits, sums, strict=True):
        loss, acc = evaluation.evaluation_result(values[k: k + len(part)], x, y, task)
        k += len(part)
        rows.append({"step": step, "split": split, "loss": loss, "accuracy": acc, "lr": lr,
                     "wall_time": wall})
    return bad, rows


def _resume_key(spec: RunSpec, ds: Dataset) -> str:
    """What a saved trainer state must match to be resumed: the run spec, the data arrays (a
    dataset whose options changed keeps its name in the spec) and this package's source (a code
    change reruns the job, which must not continue a state the old code produced)."""
    import hashlib

    import numpy as np

    h = hashlib.sha256(stable_hash(spec.to_dict()).encode())
    for a in (ds.x_train, ds.y_train, ds.x_test, ds.y_test):
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype}{a.shape}".encode())
        h.update(a.tobytes())
    root = Path(__file__).resolve().parent
    for f in sorted(root.rglob("*.py")):
        h.update(f.relative_to(root).as_posix().encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def history_frame(result: dict):
    import pandas as pd

    df = pd.DataFrame(result["history"])
    df["diverged"] = bool(result["diverged"])
    return df
