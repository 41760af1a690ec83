"""A training setup, typed: the config's ``trainings:`` entry, parsed and checked."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from bnstudy.train import augment, precision, schedules


@dataclass(frozen=True)
class TrainConfig:
    lr: float = 0.1
    momentum: float = 0.0
    weight_decay: float = 0.0
    batch_size: int | None = 64  # None: full batch
    steps: int = 500
    eval_every: int = 50
    checkpoints: tuple = (0,)  # steps at which checkpoints are saved; the last step is added
    # the learning-rate schedule (:mod:`bnstudy.train.schedules`)
    lr_schedule: str = "constant"  # constant | inverse_time | exponential | step
    lr_decay: float = 0.0  # inverse_time, exponential: decay rate per step
    lr_milestones: tuple = ()  # step: where the lr is multiplied by lr_step_factor
    lr_milestone_unit: str = "step"  # step | epoch
    lr_step_factor: float = 0.1
    warmup_steps: int = 0  # linear warm-up
    lr_reference_batch: int | None = None  # lr * batch_size / lr_reference_batch when set
    augment: bool = False  # random crop + horizontal flip (:mod:`bnstudy.train.augment`)
    augment_padding: int = 4
    precision: str = "fp32"  # fp32 | bf16 autocast (:mod:`bnstudy.train.precision`)

    @classmethod
    def from_dict(cls, d: dict) -> TrainConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown training option(s) {unknown}; valid: {sorted(known)}")
        d = dict(d)
        if d.get("batch_size") in ("full", 0):
            d["batch_size"] = None
        for key in ("lr", "momentum", "weight_decay"):
            v = d.get(key, 0.0)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < math.inf:
                raise ValueError(f"training {key}={v!r}: allowed: a finite number >= 0")
        for key, low in (("steps", 0), ("eval_every", 1), ("batch_size", 1)):
            v = d.get(key, 1)
            if (v is not None or key != "batch_size") and (
                    isinstance(v, bool) or not isinstance(v, int) or v < low):
                allowed = f"an integer >= {low}" + (" or 'full'" if key == "batch_size" else "")
                raise ValueError(f"training {key}={v!r}: allowed: {allowed}")
        if "checkpoints" in d:
            ck = d["checkpoints"]
            steps = d.get("steps", cls.steps)
            if isinstance(ck, (str, bytes)) or not all(
                    isinstance(s, int) and not isinstance(s, bool) and 0 <= s <= steps
                    for s in ck):
                raise ValueError(f"training checkpoints={ck!r}: allowed: a list of integer steps "
                                 f"in 0..{steps} (steps)")
            d["checkpoints"] = tuple(ck)
        d.update(schedules.check(d))
        augment.check(d.get("augment", False), d.get("augment_padding", cls.augment_padding))
        precision.check(d.get("precision", cls.precision))
        if "augment_padding" in d and d.get("augment") is not True:
            raise ValueError(f"training augment_padding={d['augment_padding']!r}: allowed: leave "
                             "it out unless augment is true (it pads the augmented images)")
        return cls(**d)

    def batch_for(self, n_train: int) -> int:
        """The batch size a run of ``n_train`` training samples uses (full batch: all)."""
        return n_train if self.batch_size is None else min(self.batch_size, n_train)

    def checkpoint_steps(self) -> list[int]:
        return sorted({s for s in self.checkpoints if 0 <= s <= self.steps} | {0, self.steps})
