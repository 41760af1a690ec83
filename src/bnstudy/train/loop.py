"""Training: SGD over a seeded batch sampler, checkpoints that allow exact replay, history.

Blocks of seeds: :func:`train_block` trains several seeds of one (experiment, normalizer)
together, each seed built, initialized, hooked and fed exactly as a lone run (its own model, its
own batch sampler), and stepped by one batched kernel (:mod:`bnstudy.train.stacked`): a seed's
numbers do not depend on which seeds share its block, on its slot or on the block size, and
:func:`train` is a block of one. Each seed keeps its own checkpoints, history, optimizer state,
resume file and divergence watch; a seed that diverges leaves the block at its check and the
others go on. A normalizer or model that cannot be stacked (:func:`bnstudy.train.stacked.batchable`)
trains its seeds one after another, unbatched: that is its only path.

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

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

from bnstudy.data import Dataset
from bnstudy.io import stable_hash
from bnstudy.networks import init, normalizers
from bnstudy.train import augment, precision, progress, resume, schedules, stacked
from bnstudy.train.config import TrainConfig  # noqa: F401 (re-exported)
from bnstudy.train.evaluation import evaluate, loss_fn  # noqa: F401 (re-exported)
from bnstudy.train.parts import (  # noqa: F401 (re-exported)
    BatchSampler,
    build,
    check,
    history_frame,
    resolve_device,
    snapshot,
    to_device,
)
from bnstudy.train.resume import RESUME_KIND, to_cpu  # noqa: F401 (re-exported)
from bnstudy.train.spec import RunSpec
from bnstudy.train.watch import Watch


def make_optimizer(model: nn.Module, cfg: TrainConfig) -> torch.optim.SGD:
    """The run's ``torch.optim.SGD``: its fused kernel on CUDA (one launch per step), else its
    single-tensor path (the CPU default). Its first step imports ``torch._dynamo`` (about 1.3 s
    of CPU), which the fork server imports once for every local job
    (``benchmarks/bench_sgd.py``). A block's stacked parameters get one optimizer."""
    import inspect

    params = list(model.parameters())
    fused = bool(params) and all(p.device.type == "cuda" for p in params)
    if fused and "fused" in inspect.signature(torch.optim.SGD).parameters:
        return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum,
                               weight_decay=cfg.weight_decay, fused=True)
    return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum,
                           weight_decay=cfg.weight_decay)


@dataclass
class Seed:
    """One seed of a block: its spec, model, data order, and what it has recorded so far."""

    spec: RunSpec
    model: nn.Module
    sampler: BatchSampler
    ctx: normalizers.HookContext
    key: str
    resume_path: Path | None
    optimizer_state: dict
    state: dict
    plan: augment.Plan | None = None
    watch: Watch = field(default_factory=Watch)
    batch: torch.Tensor | None = None
    bad: dict | None = None
    t0: float = 0.0


def train(spec: RunSpec | dict, ds: Dataset, device: str = "auto", resume_path=None) -> dict:
    """Train the run ``spec`` (a :class:`RunSpec`, or its JSON form, parsed here) on ``ds``: a
    block of one seed (:func:`train_block`).

    Returns ``{"spec", "checkpoints", "history", "diverged", "device"}``; ``history`` is a list of
    row dicts (step, split, loss, accuracy, lr, wall_time).
    """
    return train_block([spec], ds, device, [resume_path])[0]


def train_block(specs: list, ds: Dataset, device: str = "auto", resume_paths=None) -> list[dict]:
    """Train the runs ``specs`` (seeds of one arm: the same spec but for the seed) together;
    one result per spec (:func:`train`'s), in their order. ``resume_paths``: one per spec (or
    None: no resume files)."""
    specs = [RunSpec.parse(s) for s in specs]
    paths = list(resume_paths) if resume_paths is not None else [None] * len(specs)
    if not specs or len(paths) != len(specs):
        raise ValueError(f"a block needs one resume path per spec: {len(specs)} specs, "
                         f"{len(paths)} paths")
    arm = specs[0].replace(seed=0).to_dict()
    for s in specs[1:]:
        if s.replace(seed=0).to_dict() != arm:
            raise ValueError(f"a block trains seeds of one arm: seed {s.seed} of "
                             f"{s.experiment}/{s.norm} differs from seed {specs[0].seed} of "
                             f"{specs[0].experiment}/{specs[0].norm} in more than its seed")
    dev = resolve_device(device)
    data = {k: torch.as_tensor(getattr(ds, k), device=dev)
            for k in ("x_train", "y_train", "x_test", "y_test")}
    seeds = [_setup(s, ds, data, dev, p) for s, p in zip(specs, paths, strict=True)]
    batched, _ = stacked.batchable(specs[0])
    groups: dict[int, list[Seed]] = {}  # seeds resumed at different steps run apart
    for s in seeds:
        groups.setdefault(s.state["step"], []).append(s)
    for group in groups.values():
        for part in [group] if batched else [[s] for s in group]:
            _run(part, batched, ds, data, dev)
    return [{"spec": s.spec, "checkpoints": s.state["checkpoints"],
             "history": s.state["history"], "diverged": s.bad is not None, "device": str(dev)}
            for s in seeds]


def _setup(spec: RunSpec, ds: Dataset, data: dict, dev, resume_path) -> Seed:
    """A seed as a lone run starts it: model, hooks' init, sampler, and its resumed state."""
    cfg = spec.training
    model = build(spec, ds, dev)
    init.init_in_data_span(model, spec.model_config, ds.x_train)  # unit: init_span
    xtr, ytr = data["x_train"], data["y_train"]
    nz = spec.model_config.normalizer(spec.norm)
    ctx = normalizers.HookContext(x=xtr, y=ytr, task=ds.task, seed=spec.seed,
                                  batch_size=cfg.batch_size or len(xtr))
    if nz.on_init is not None:  # e.g. bn_init; a resumed run then loads its saved state over it
        nz.on_init(model, ctx, nz.options)
    sampler = BatchSampler(len(xtr), cfg.batch_size, spec.seed, dev)
    plan = None
    if cfg.augment:
        augment.check_images(ds.input_shape)
        n = cfg.batch_for(len(xtr))  # one epoch's draws at a time
        plan = augment.Plan(n, cfg.augment_padding, spec.seed, len(xtr) // n, dev)
    key = _resume_key(spec, ds)
    opt = make_optimizer(model, cfg)  # holds a resumed state until the block's kernel takes it
    state = {"step": 0, "checkpoints": [], "history": [], "elapsed": 0.0}
    if resume_path is not None:
        state = resume.load(resume_path, key, model, opt, sampler) or state
    seed = Seed(spec, model, sampler, ctx, key, resume_path, opt.state_dict(), state, plan)
    pending = state.pop("replay_batch", None)  # update ``step``'s batch, drawn before the save
    seed.batch = None if pending is None else to_device(pending, dev)
    return seed


def _run(seeds: list[Seed], batched: bool, ds: Dataset, data: dict, dev) -> None:
    """Train ``seeds`` (all at the same step) to the end or to their divergence."""
    spec, cfg = seeds[0].spec, seeds[0].spec.training
    nz = spec.model_config.normalizer(spec.norm)
    kern = stacked.kernel([s.model for s in seeds], batched, make_optimizer, cfg,
                          loss_fn(ds.task))
    kern.load_optimizer_states([s.optimizer_state for s in seeds])
    xtr, ytr = data["x_train"], data["y_train"]
    splits = (("train", (xtr, ytr)), ("test", (data["x_test"], data["y_test"])))
    lr_at, ckpt_steps = schedules.from_config(cfg, len(xtr)), set(cfg.checkpoint_steps())
    active = list(seeds)
    for s in active:
        s.t0 = time.perf_counter() - s.state["elapsed"]
        s.model.train()
    for step in range(seeds[0].state["step"], cfg.steps + 1):
        lr = lr_at(step)
        for group in kern.optimizer.param_groups:  # before the checkpoint: it replays update t
            group["lr"] = lr
        evaluating = step % cfg.eval_every == 0 or step == cfg.steps
        if evaluating or step in ckpt_steps:  # the watched losses go to the seeds' checks
            _flush(kern, active)
        for s in active:
            try:
                _prepare(s, nz, batched, step, evaluating or step in ckpt_steps, splits, ds,
                         cfg, lr)
            except Exception:  # an error after an unchecked divergence is the divergence
                s.bad = _diverged_at(s, step, lr)
                if s.bad is None:
                    raise
        active = _without_diverged(kern, active)
        if not active:
            return
        if step in ckpt_steps:
            for k, s in enumerate(active):
                opt_state = kern.optimizer_state(k)
                s.state["checkpoints"].append(snapshot(s.model, opt_state, s.batch, step))
                if s.resume_path is not None and step < cfg.steps:
                    resume.save(s.resume_path, s.key, step, s.model, opt_state, s.sampler,
                                s.state, s.t0, s.batch)
        if step == cfg.steps:
            return
        while True:  # an update that raises after an unchecked divergence is the divergence
            try:
                _update(kern, active, step, lr, xtr, ytr, ds, cfg, dev)
                break
            except Exception:
                _flush(kern, active)
                for s in active:
                    s.bad = _diverged_at(s, step, lr)
                if all(s.bad is None for s in active):
                    raise
                active = _without_diverged(kern, active)
                if not active:
                    return


def _diverged_at(s: Seed, step: int, lr: float) -> dict | None:
    """After an error at ``step``: seed ``s``'s divergence row (its first non-finite watched
    loss, or, when its weights are no longer finite, a NaN loss at ``step``: the loss a step on
    them gives), else None (the error is not a divergence)."""
    bad = s.watch.check()
    if bad is None and not all(bool(torch.isfinite(p).all()) for p in s.model.parameters()):
        bad = {"step": step, "split": "batch", "loss": float("nan"), "accuracy": float("nan"),
               "lr": lr, "wall_time": time.perf_counter() - s.t0}
    return bad


def _prepare(s: Seed, nz, batched: bool, step: int, checking: bool, splits, ds, cfg,
             lr: float) -> None:
    """Seed ``s``'s part of step ``step`` before the update: its batch, noise step and hook,
    then (at evaluation and checkpoint steps) its one host read: evaluation and watched losses."""
    if s.batch is None:
        s.batch = s.sampler.next()
    if not batched:  # noisy BN: this step's noise in every pass (batched: none is stochastic)
        normalizers.set_step(s.model, step)
    if nz.before_update is not None:  # e.g. population_norm's statistics, before eval/ckpt
        nz.before_update(s.model, s.ctx, step, nz.options)
    if checking:
        evaluating = step % cfg.eval_every == 0 or step == cfg.steps
        s.bad, rows = check(s.model, s.watch, splits if evaluating else (), ds.task, cfg, step,
                            lr, s.t0)
        if s.bad is None:
            s.state["history"] += rows
            if evaluating:
                progress.report(s.spec, step, cfg.steps, s.state["history"], ds.task)


def _without_diverged(kern, active: list[Seed]) -> list[Seed]:
    """The seeds of ``active`` that go on; a diverged one stops at its failing step (its row is
    the last of its history) and leaves the kernel."""
    keep = [k for k, s in enumerate(active) if s.bad is None]
    if len(keep) == len(active):
        return active
    for s in active:
        if s.bad is not None:
            s.state["history"].append(s.bad)
    if keep and len(keep) < len(active):
        kern.keep(keep)
    return [active[k] for k in keep]


def _update(kern, active: list[Seed], step: int, lr: float, xtr, ytr, ds, cfg, dev) -> None:
    """Update ``step`` of every active seed, on its own batch, in one kernel step."""
    kern.optimizer.zero_grad(set_to_none=True)
    idx = torch.stack([s.batch for s in active])  # [K, B]: one gather for the block
    xs = xtr[idx]
    if active[0].plan is not None:
        xs = torch.stack([augment.batch_inputs(x, s.spec.seed, step, cfg.augment_padding,
                                               ds.input_shape, s.plan.at(step))
                          for x, s in zip(xs, active, strict=True)])
    with precision.autocast(dev, cfg.precision):
        losses = kern.losses(xs, ytr[idx])
    wall = time.perf_counter()
    kern.watched.append(losses.detach())  # read at the next check (_flush)
    for s in active:
        s.watch.rows.append((step, lr, wall - s.t0))
    losses.sum().backward()
    kern.optimizer.step()
    for s in active:
        s.batch = None


def _flush(kern, active: list[Seed]) -> None:
    """Hand the block's watched losses since the last check to each seed's watch."""
    if kern.watched:
        m = torch.stack(kern.watched)  # [steps, K (+ the ghost)]
        for k, s in enumerate(active):
            s.watch.losses.append(m[:, k])
        kern.watched = []


def _resume_key(spec: RunSpec, ds: Dataset) -> str:
    """What a saved trainer state must match to be resumed: the run spec, the data arrays (a
    dataset whose options changed keeps its name in the spec) and this package's source (a code
    change reruns the job, which must not continue a state the old code produced)."""
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
