"""The trainer's resume files, so that a restarted job continues exactly where the killed one
stopped (:func:`bnstudy.train.loop.train`'s ``resume_path``). On disk, beside each other:

- ``resume.pt`` (``resume_path``, kind :data:`RESUME_KIND`): the trainer state at the latest
  checkpoint (model, optimizer, sampler and RNG states, history so far, the pending batch), the
  run's key and ``checkpoint_steps``, the steps whose checkpoint files are on disk. Rewritten at
  every checkpoint, its size does not grow with their number: it holds no earlier checkpoint;
- ``resume.ckpt<step>.pt`` (:func:`checkpoint_path`, kind :data:`CHECKPOINT_KIND`): one
  checkpoint snapshot (the dict the loop keeps, :func:`bnstudy.train.parts.snapshot`) and the key,
  written once. Rewriting every earlier checkpoint at every checkpoint cost a VGG11 run with
  nine checkpoints a 500 MB file and 22 s of CPU; a file already valid for the run's key (the
  replayed step after a restart) is not written again.

Every file carries a checksum (:func:`bnstudy.io.save_pt`) and the place it was written to
(``place``: :mod:`bnstudy.tables.binding`, checked against where it lies by ``verify`` and on
load); a corrupt or truncated resume file, one copied from another run's place, or a checkpoint
file it lists that is missing, corrupt or another run's, discards the resume
with a warning and the run starts afresh (these are no workflow outputs, so nothing else would
remove them). The train verb removes them all (:func:`remove`) once the run's outputs are
written. The learning-rate schedule and the augmentation are functions of the step (and the
seed), so they need no saved state.
"""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path

import torch

from bnstudy import io
from bnstudy.tables import binding

RESUME_KIND = "resume state"
CHECKPOINT_KIND = "resume checkpoint"
log = logging.getLogger("bnstudy")


def to_cpu(obj):
    if torch.is_tensor(obj):
        return obj.detach().cpu().clone()
    if isinstance(obj, dict):
        return {k: to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [to_cpu(v) for v in obj]
    return obj


def checkpoint_path(path, step: int) -> Path:
    """The file of the checkpoint at ``step`` beside the resume file ``path``."""
    path = Path(path)
    return path.with_name(f"{path.stem}.ckpt{int(step)}.pt")


def _read_checkpoint(path, key: str, step: int) -> dict:
    """The snapshot in the checkpoint file of ``step``; CorruptFile (FileNotFoundError when
    missing) unless it is a valid file of run ``key`` for that step."""
    file = checkpoint_path(path, step)
    blob = binding.load_pt(file, CHECKPOINT_KIND)
    ok = isinstance(blob, dict) and blob.get("key") == key
    ck = blob.get("checkpoint") if ok else None
    if not isinstance(ck, dict) or ck.get("step") != step:
        raise io.CorruptFile(f"{file} holds no checkpoint of step {step} of this run")
    return ck


def _write_once(path, key: str, ck: dict) -> None:
    """Write checkpoint ``ck``'s file unless a valid one of run ``key`` is there already."""
    file = checkpoint_path(path, ck["step"])
    if file.exists():
        try:
            _read_checkpoint(path, key, ck["step"])
            return
        except (io.CorruptFile, FileNotFoundError):  # another run's or damaged: written anew
            pass
    io.save_pt({"key": key, "checkpoint": ck, **_place(file)}, file, CHECKPOINT_KIND)


def _place(file) -> dict:
    """The ``place`` entry of a resume file written to ``file`` (none outside the layout)."""
    where = binding.place_of(file)
    return {} if where is None else {binding.KEY: where}


def save(path, key, step, model, optimizer_state, sampler, state, t0, batch) -> None:
    """Write the checkpoint files not yet on disk (``state["on_disk"]``, the steps known to
    have one), then the resume file of ``step`` listing them."""
    on_disk = state.setdefault("on_disk", set())
    for ck in state["checkpoints"]:
        if ck["step"] not in on_disk:
            _write_once(path, key, ck)
            on_disk.add(ck["step"])
    blob = {"key": key, "step": step, "model": to_cpu(model.state_dict()),
            "optimizer": to_cpu(optimizer_state),
            "checkpoint_steps": [c["step"] for c in state["checkpoints"]],
            "history": state["history"], "elapsed": time.perf_counter() - t0,
            "sampler": sampler.state(), "torch_rng": torch.get_rng_state(),
            # taken *before* update ``step`` whose batch is already drawn: replay it on load
            "pending_batch": batch.cpu(), **_place(path)}
    io.save_pt(blob, path, RESUME_KIND)


def _discard(path, why: str) -> None:
    log.warning("discarding the resume state: %s; training starts afresh",
                why.split("; delete it")[0])
    remove(path)


def load(path, key, model, opt, sampler) -> dict | None:
    """The loop's state at the resume file's step, its model, optimizer and sampler loaded;
    None when there is no resume file, it is another run's, or it is discarded."""
    if not Path(path).exists():
        return None
    try:
        blob = binding.load_pt(path, RESUME_KIND)
    except io.CorruptFile as e:  # MisplacedFile too: another run's state
        _discard(path, str(e))
        return None
    if blob.get("key") != key:  # another spec, other data or other code: start afresh
        log.info("ignoring %s: saved by another run", path)
        return None
    steps, checkpoints = [int(s) for s in blob["checkpoint_steps"]], []
    for s in steps:
        try:
            checkpoints.append(_read_checkpoint(path, key, s))
        except FileNotFoundError:
            _discard(path, f"{path} needs {checkpoint_path(path, s)}, which is missing")
            return None
        except io.CorruptFile as e:
            _discard(path, f"{path} needs a checkpoint file that is unusable: {e}")
            return None
    log.info("resuming from %s at step %d", path, blob["step"])
    model.load_state_dict(blob["model"])
    opt.load_state_dict(blob["optimizer"])
    sampler.load_state(blob["sampler"])
    torch.set_rng_state(blob["torch_rng"])
    # Step ``blob["step"]`` is redone from its saved start (same eval, same snapshot, whose
    # file stays as it is).
    return {"step": blob["step"], "checkpoints": [c for c in checkpoints
                                                  if c["step"] < blob["step"]],
            "history": [h for h in blob["history"] if h["step"] < blob["step"]],
            "elapsed": blob["elapsed"], "replay_batch": blob["pending_batch"],
            "on_disk": set(steps)}


def remove(path) -> None:
    """Remove the resume file ``path``, its checkpoint files (any run's) and the temporaries a
    killed write left of them (:func:`bnstudy.io.atomic_path`)."""
    path = Path(path)
    path.unlink(missing_ok=True)
    ckpt = rf"{re.escape(path.stem)}\.ckpt[0-9]+\.pt"
    ours = re.compile(rf"{ckpt}|\.{ckpt}\.tmp[0-9]+|\.{re.escape(path.name)}\.tmp[0-9]+")
    if path.parent.is_dir():
        for p in path.parent.iterdir():
            if ours.fullmatch(p.name):
                p.unlink(missing_ok=True)
