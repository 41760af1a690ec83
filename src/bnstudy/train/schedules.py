"""Learning-rate schedules: the learning rate of every training step, a pure function of the step.

``lr_t = base * warmup(t) * decay(t)`` with

- ``base = lr`` or, with ``lr_reference_batch = B0`` set, ``lr * batch_size / B0`` (the linear
  scaling rule of Goyal et al. 2017 that Luo et al. §5 use across batch sizes, e.g. ``B0 = 128``;
  a full-batch run's batch size is the training-set size);
- ``warmup(t) = min(1, (t + 1) / warmup_steps)`` (linear warm-up: ``base / warmup_steps`` at step
  0, the full ``base`` from step ``warmup_steps - 1`` on; 1 when ``warmup_steps = 0``);
- ``decay(t)`` by ``lr_schedule``:

  - ``constant``: 1;
  - ``inverse_time``: ``1 / (1 + lr_decay * t)``. Luo et al. (App. B) "continuously decay the
    learning rate by a factor of 1e-4 each step": this is the per-update ``decay`` of Keras'
    SGD, the common reading of that sentence;
  - ``exponential``: ``(1 - lr_decay) ** t``, the literal reading (the lr shrinks by the factor
    ``1 - lr_decay`` at every step);
  - ``step``: ``lr_step_factor ** k``, ``k`` the number of ``lr_milestones`` at or before ``t``
    (He et al.'s x0.1 at epochs 30, 60, 90); milestones count steps, or epochs with
    ``lr_milestone_unit: epoch`` (an epoch is ``n_train // batch_size`` steps, what the batch
    sampler draws before it reshuffles; 1 step for full batch).

The decay counts from step 0, during the warm-up too. The trainer sets ``lr_t`` in the optimizer
before step ``t``'s checkpoint, so a checkpoint's optimizer state replays update ``t`` with the
learning rate it used, and records it in the history's ``lr`` column.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

KINDS = ("constant", "inverse_time", "exponential", "step")
UNITS = ("step", "epoch")
# a training's schedule keys (their defaults are TrainConfig's fields, the one declaration)
KEYS = ("lr_schedule", "lr_decay", "lr_milestones", "lr_milestone_unit", "lr_step_factor",
        "warmup_steps", "lr_reference_batch")


def _is_int(v, low: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= low


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


# the options each schedule reads (any other given is an error: it would be ignored)
USES = {"constant": (), "inverse_time": ("lr_decay",), "exponential": ("lr_decay",),
        "step": ("lr_milestones", "lr_milestone_unit", "lr_step_factor")}


def check(d: dict, defaults: dict) -> dict:
    """The schedule options (:data:`KEYS`) of a training config ``d`` checked (a ValueError
    naming the bad value and the valid ones); returns them with ``defaults`` (TrainConfig's)
    filled in, milestones as a sorted tuple.

    A schedule does what it says or is refused: an option its ``lr_schedule`` does not read
    (:data:`USES`), a milestone given twice or at or past the last step (``steps`` of ``d``;
    epoch milestones are checked against the training set by :mod:`bnstudy.config.setup_checks`), a
    warm-up longer than the run, and a ``lr_step_factor`` whose power over the milestones
    overflows a float."""
    o = {**{k: defaults[k] for k in KEYS}, **{k: d[k] for k in KEYS if k in d}}

    def bad(key: str, valid: str):
        return ValueError(f"training {key}={o[key]!r}: allowed: {valid}")

    if o["lr_schedule"] not in KINDS:
        raise bad("lr_schedule", ", ".join(KINDS))
    if not (_is_number(o["lr_decay"]) and 0 <= o["lr_decay"] < 1):
        raise bad("lr_decay", "a number in [0, 1) (the decay rate per step)")
    if o["lr_milestone_unit"] not in UNITS:
        raise bad("lr_milestone_unit", ", ".join(UNITS))
    ms = o["lr_milestones"]
    if isinstance(ms, (str, bytes)) or not all(_is_int(m, 1) for m in ms):
        raise bad("lr_milestones", "a list of integers >= 1 (steps or epochs)")
    o["lr_milestones"] = tuple(sorted(ms))
    if not (_is_number(o["lr_step_factor"]) and 0 < o["lr_step_factor"]):
        raise bad("lr_step_factor", "a number > 0 (the lr is multiplied by it at each milestone)")
    if not _is_int(o["warmup_steps"], 0):
        raise bad("warmup_steps", "an integer >= 0")
    if o["lr_reference_batch"] is not None and not _is_int(o["lr_reference_batch"], 1):
        raise bad("lr_reference_batch", "null (no scaling) or an integer >= 1")
    if o["lr_schedule"] in ("inverse_time", "exponential") and o["lr_decay"] == 0:
        raise bad("lr_decay", f"a number in (0, 1) for lr_schedule {o['lr_schedule']}")
    if o["lr_schedule"] == "step" and not o["lr_milestones"]:
        raise bad("lr_milestones", "a non-empty list of integers >= 1 for lr_schedule step")
    for key in sorted(set(USES["step"] + USES["exponential"]) - set(USES[o["lr_schedule"]])):
        if key in d:
            users = [k for k, used in USES.items() if key in used]
            raise ValueError(f"training {key}={d[key]!r}: allowed: leave it out unless "
                             f"lr_schedule is {' or '.join(users)} (lr_schedule "
                             f"{o['lr_schedule']} does not use it)")
    if len(set(ms)) != len(ms):
        raise bad("lr_milestones", "distinct milestones (each one multiplies the lr by "
                                   "lr_step_factor once more)")
    steps = d.get("steps")
    if _is_int(steps, 1) and o["lr_milestone_unit"] == "step" and ms and max(ms) >= steps:
        raise bad("lr_milestones", f"steps before the last step {steps - 1} (steps: {steps}), "
                                   "or the milestone never applies")
    if _is_int(steps, 1) and o["warmup_steps"] > steps:
        raise bad("warmup_steps", f"at most the run's {steps} steps")
    try:
        lr = d["lr"] if _is_number(d.get("lr")) else 1.0
        top = lr * max(1.0, o["lr_step_factor"] ** len(ms))
    except OverflowError:
        top = math.inf
    if not math.isfinite(top):
        raise bad("lr_step_factor", f"a factor whose power {len(ms)} (the milestones) times lr "
                                    "is a finite float")
    return o


def scaled_lr(lr: float, batch_size: int, reference: int | None) -> float:
    """Goyal et al.'s linear scaling: ``lr * batch_size / reference`` (``lr`` when ``None``)."""
    return lr if reference is None else lr * batch_size / reference


def steps_per_epoch(n_train: int, batch_size: int | None) -> int:
    """Updates per pass over the data as the batch sampler draws them (the last partial batch
    is dropped; one update for full batch)."""
    if batch_size is None or batch_size >= n_train:
        return 1
    return n_train // batch_size


@dataclass(frozen=True)
class Schedule:
    base: float  # the lr after batch scaling
    kind: str = "constant"
    decay: float = 0.0
    milestones: tuple[int, ...] = ()  # in steps
    factor: float = 0.1
    warmup: int = 0

    def __call__(self, step: int) -> float:
        if self.kind == "inverse_time":
            lr = self.base / (1.0 + self.decay * step)
        elif self.kind == "exponential":
            lr = self.base * (1.0 - self.decay) ** step
        elif self.kind == "step":
            lr = self.base * self.factor ** bisect.bisect_right(self.milestones, step)
        else:
            lr = self.base
        if self.warmup and step < self.warmup:
            lr *= (step + 1) / self.warmup
        return lr


def from_config(cfg, n_train: int) -> Schedule:
    """The schedule of a :class:`bnstudy.train.loop.TrainConfig` on ``n_train`` samples."""
    batch = cfg.batch_size if cfg.batch_size is not None and cfg.batch_size < n_train else n_train
    per = steps_per_epoch(n_train, cfg.batch_size) if cfg.lr_milestone_unit == "epoch" else 1
    return Schedule(base=scaled_lr(cfg.lr, batch, cfg.lr_reference_batch), kind=cfg.lr_schedule,
                    decay=cfg.lr_decay, milestones=tuple(m * per for m in cfg.lr_milestones),
                    factor=cfg.lr_step_factor, warmup=cfg.warmup_steps)
