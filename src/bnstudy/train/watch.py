"""Divergence without a host-device sync per step: the trainer's watch over its mini-batch
losses.

A run whose mini-batch loss becomes NaN/inf is recorded as diverged at that step
(:func:`bnstudy.train.loop.train`). Reading ``isfinite(loss)`` on the host every step would stall
a GPU once per step, so the trainer hands each step's loss (a device tensor), step, lr and wall
time to a :class:`Watch` and reads them all only where it reads the device anyway: at its
evaluation and checkpoint steps, in the same transfer as the evaluation (:meth:`Watch.pending`
gives the losses to read, :meth:`Watch.first_bad` finds the first non-finite one). The steps
after the failing one ran on NaN weights and left no trace: an evaluation and a checkpoint always
come after a check, so the run is cut back to the failing step and its history and checkpoints
are those of a run that stopped there (the same as a check every step gives).
"""

from __future__ import annotations

import math

import torch


class Watch:
    """The mini-batch losses of the steps since the last check, kept on the device."""

    def __init__(self) -> None:
        self.losses: list[torch.Tensor] = []
        self.rows: list[tuple[int, float, float]] = []  # (step, lr, wall time)

    def add(self, step: int, loss: torch.Tensor, lr: float, wall_time: float) -> None:
        self.losses.append(loss.detach().reshape(1))  # a view: no kernel, no copy
        self.rows.append((step, lr, wall_time))

    def pending(self, device="cpu") -> torch.Tensor:
        """The unchecked losses, float64 ``(k,)`` on their device (``device`` when there are
        none); read them in one transfer."""
        if not self.losses:
            return torch.zeros(0, dtype=torch.float64, device=device)
        return torch.cat(self.losses).double()

    def first_bad(self, values: list[float]) -> dict | None:
        """The history row of the first non-finite loss among ``values`` (the host values of
        :meth:`pending`), or None; the watch is emptied either way."""
        if len(values) != len(self.rows):
            raise ValueError(f"{len(values)} loss values for {len(self.rows)} watched steps")
        rows, self.losses, self.rows = self.rows, [], []
        for (step, lr, wall), loss in zip(rows, values, strict=True):
            if not math.isfinite(loss):
                return {"step": step, "split": "batch", "loss": loss, "accuracy": float("nan"),
                        "lr": lr, "wall_time": wall}
        return None

    def check(self) -> dict | None:
        """:meth:`first_bad` of the pending losses, read here (one transfer; none if empty)."""
        if not self.losses:
            return None
        return self.first_bad(self.pending().tolist())
