"""A training setup, typed: the config's ``trainings:`` entry, parsed and checked.

:class:`TrainConfig`'s fields are the one declaration of a training's keys: each field's
metadata holds the key's JSON-schema fragment (``schema``: types and ranges as a config writes
them, e.g. ``batch_size: full``), its description (``doc``) and whether the config must give it
(``config: required``) or gets the field's default written in when it leaves it out (``config:
filled``). The study config's ``trainings`` entry schema is generated from them
(:func:`bnstudy.config.entries.entry_schema`), and sweeps take their keys from it, so a new
training option is one field here. Keys without ``config`` are optional and nothing is written
for them: a default written into every training would change every existing run's spec (and
rerun it), so options added later stay out of the configs that do not set them.
:meth:`TrainConfig.from_dict` checks what a schema cannot say (finite numbers, checkpoints
within ``0..steps``, the schedule's and augmentation's own rules).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from bnstudy.options import config_key
from bnstudy.train import augment, precision, schedules

_NUMBER = {"type": "number", "minimum": 0}


@dataclass(frozen=True)
class TrainConfig:
    lr: float = config_key(0.1, _NUMBER, "the learning rate (the base of the schedule)", "required")
    momentum: float = config_key(0.0, _NUMBER, "SGD momentum", "filled")
    weight_decay: float = config_key(0.0, _NUMBER, "L2 weight decay (SGD's)", "filled")
    batch_size: int | None = config_key(  # None: full batch
        64, {"anyOf": [{"type": "integer", "minimum": 1}, {"const": "full"}]},
        "examples per step, or full (the whole training set)", "filled")
    steps: int = config_key(500, {"type": "integer", "minimum": 1}, "optimizer steps", "required")
    eval_every: int = config_key(50, {"type": "integer", "minimum": 1},
                                 "steps between evaluations (the history's rows)", "filled")
    checkpoints: tuple = config_key(
        (0,), {"type": "array", "items": {"type": "integer", "minimum": 0}},
        "steps at which checkpoints are saved (0..steps); the last step is added", "filled")
    # the learning-rate schedule (:mod:`bnstudy.train.schedules`); no defaults written below
    lr_schedule: str = config_key(
        "constant", {"enum": list(schedules.KINDS)},
        "learning-rate decay (bnstudy.train.schedules; constant when absent)")
    lr_decay: float = config_key(0.0, {"type": "number", "minimum": 0, "exclusiveMaximum": 1},
                                 "inverse_time, exponential: the decay rate per step")
    lr_milestones: tuple = config_key(
        (), {"type": "array", "items": {"type": "integer", "minimum": 1}},
        "step schedule: where the lr is multiplied by lr_step_factor")
    lr_milestone_unit: str = config_key("step", {"enum": list(schedules.UNITS)},
                                        "what lr_milestones count: steps or epochs")
    lr_step_factor: float = config_key(0.1, {"type": "number", "exclusiveMinimum": 0},
                                       "step schedule: the factor at each milestone")
    warmup_steps: int = config_key(0, {"type": "integer", "minimum": 0},
                                   "steps of linear warm-up (0: none)")
    lr_reference_batch: int | None = config_key(
        None, {"anyOf": [{"type": "null"}, {"type": "integer", "minimum": 1}]},
        "lr is scaled to lr * batch_size / lr_reference_batch when set")
    augment: bool = config_key(  # :mod:`bnstudy.train.augment`
        False, {"type": "boolean"},
        "random crop with zero padding + horizontal flip of training images")
    augment_padding: int = config_key(4, {"type": "integer", "minimum": 0},
                                      "augment: the zero padding of the random crop, in pixels")
    precision: str = config_key(  # :mod:`bnstudy.train.precision`
        "fp32", {"enum": list(precision.PRECISIONS)},
        "fp32 (when left out) or bf16 autocast for training and evaluation forwards; "
        "normalizer statistics and measures stay float32")

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
        d.update(schedules.check(d, {f.name: f.default for f in fields(cls)}))
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
