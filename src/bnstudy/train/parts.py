"""The trainer's parts that do not depend on how seeds are stepped: the device, the seeded batch
sampler, a run's model, a checkpoint snapshot, the evaluation-and-divergence check, the history
frame (:mod:`bnstudy.train.loop` puts them together)."""

from __future__ import annotations

import re
import time

import torch
from torch import nn

from bnstudy.data import Dataset
from bnstudy.networks import models
from bnstudy.train import determinism, evaluation
from bnstudy.train.config import TrainConfig
from bnstudy.train.resume import to_cpu
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


def build(spec: RunSpec | dict, ds: Dataset, device: torch.device | str = "cpu") -> nn.Module:
    """The model a run spec describes, freshly initialized from the run's seed."""
    spec = RunSpec.parse(spec)
    torch.manual_seed(spec.seed)
    net = models.build_model(spec.model_config, spec.norm, ds.input_shape, ds.out_dim)
    return net.to(device)


def snapshot(model: nn.Module, optimizer_state: dict, batch: torch.Tensor, step: int) -> dict:
    """A checkpoint: the model's state, its optimizer's state, the batch of update ``step``."""
    return {
        "step": step,
        "model": {k: v.detach().cpu().clone() for k, v in model.state_dict().items()},
        "optimizer": to_cpu(optimizer_state),
        "batch": batch.cpu().clone(),
    }


def check(model, watch: Watch, splits, task: str, cfg: TrainConfig, step: int, lr: float,
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


def history_frame(result: dict):
    import pandas as pd

    df = pd.DataFrame(result["history"])
    df["diverged"] = bool(result["diverged"])
    return df
