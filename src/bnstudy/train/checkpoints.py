"""The on-disk run file (checkpoints.pt) and how measures get a model back from it.

A run file is a plain dict of tensors, numbers and strings, saved inside a checksummed wrapper
(:func:`bnstudy.io.save_pt`) and loaded with ``weights_only=True``::

    {"spec": {...run spec...}, "diverged": bool, "device": str,
     "checkpoints": [{"step", "model", "optimizer", "batch"}, ...]}

:func:`load` returns that dict with its spec parsed into a :class:`~bnstudy.train.spec.RunSpec`
(a run file is data, not trusted: a spec that does not parse names the file); :func:`save` writes
the spec's JSON form. Measures use :func:`restore`, which rebuilds the model from the spec and
loads the weights, BN buffers and optimizer state of one checkpoint.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from bnstudy.data import Dataset
from bnstudy.io import CorruptFile, load_pt, save_pt
from bnstudy.tables import binding
from bnstudy.train.loop import build, make_optimizer
from bnstudy.train.spec import RunSpec


@dataclass
class Restored:
    step: int
    model: nn.Module
    batch: torch.Tensor  # training-set indices of the mini-batch used by update ``step``
    spec: RunSpec
    optimizer_state: dict
    _optimizer: torch.optim.Optimizer | None = None

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        """The SGD optimizer over ``model`` with the checkpoint's state (momentum buffers).

        Built on first use, by the training's own factory
        (:func:`bnstudy.train.loop.make_optimizer`), so a replayed update is the one training took.
        It holds a copy of the state: ``torch.optim`` loads a state's tensors without copying
        them, and a step would move the checkpoint's own momentum buffers.
        """
        if self._optimizer is None:
            self._optimizer = make_optimizer(self.model, self.spec.training)
            self._optimizer.load_state_dict(copy.deepcopy(self.optimizer_state))
        return self._optimizer


KIND = "checkpoints"


def save(result: dict, path: str | Path) -> None:
    blob = {"spec": RunSpec.parse(result["spec"]).to_dict(),
            **{k: result[k] for k in ("checkpoints", "diverged", "device")}}
    save_pt(blob, path, KIND)


def load(path: str | Path) -> dict:
    """The run file at ``path``; :class:`bnstudy.io.CorruptFile` names a corrupt, truncated or
    foreign file (its checksum is verified), one whose run spec does not parse, or, under a
    results directory's ``runs/``, another run's file (its spec's experiment, normalizer and
    seed are not those of the place it lies in: :mod:`bnstudy.tables.binding`)."""
    run = load_pt(path, KIND)
    try:
        run["spec"] = RunSpec.parse(run.get("spec"), source=f"{path}: run spec")
    except ValueError as e:
        raise CorruptFile(str(e)) from None
    binding.check(path, binding.claimed_by_run_file(run))
    return run


def steps(run: dict) -> list[int]:
    return [int(c["step"]) for c in run["checkpoints"]]


def restore(run: dict, index: int, ds: Dataset, device="cpu") -> Restored:
    """Model, optimizer and batch of checkpoint number ``index`` (not step) of ``run``."""
    ck = run["checkpoints"][index]
    spec = run["spec"]
    model = build(spec, ds, device)
    model.load_state_dict(ck["model"])
    model.train()
    return Restored(int(ck["step"]), model, ck["batch"].to(device), spec, ck["optimizer"])
