"""The trainer's resume file: the full trainer state at its latest checkpoint (model, optimizer,
sampler and RNG states, history so far), so that a restarted job continues exactly where the
killed one stopped (:func:`bnstudy.train.loop.train`'s ``resume_path``). The file carries a
checksum (:func:`bnstudy.io.save_pt`); a corrupt or truncated one is discarded with a warning.
The learning-rate schedule and the augmentation are functions of the step (and the seed), so
they need no saved state.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import torch

from bnstudy.io import CorruptFile, load_pt, save_pt

RESUME_KIND = "resume state"


def to_cpu(obj):
    if torch.is_tensor(obj):
        return obj.detach().cpu().clone()
    if isinstance(obj, dict):
        return {k: to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [to_cpu(v) for v in obj]
    return obj


def save(path, key, step, model, opt, sampler, state, t0, batch) -> None:
    blob = {"key": key, "step": step, "model": to_cpu(model.state_dict()),
            "optimizer": to_cpu(opt.state_dict()), "checkpoints": state["checkpoints"],
            "history": state["history"], "elapsed": time.perf_counter() - t0,
            "sampler": sampler.state(), "torch_rng": torch.get_rng_state(),
            # taken *before* update ``step`` whose batch is already drawn: replay it on load
            "pending_batch": batch.cpu()}
    save_pt(blob, path, RESUME_KIND)


def load(path, key, model, opt, sampler) -> dict | None:
    if not Path(path).exists():
        return None
    try:
        blob = load_pt(path, RESUME_KIND)
    except CorruptFile as e:  # not a workflow output: nobody else would ever remove it
        logging.getLogger("bnstudy").warning("discarding the resume state: %s; training starts "
                                             "afresh", str(e).split("; delete it")[0])
        Path(path).unlink(missing_ok=True)
        return None
    if blob.get("key") != key:  # another spec, other data or other code: start afresh
        logging.getLogger("bnstudy").info("ignoring %s: saved by another run", path)
        return None
    logging.getLogger("bnstudy").info("resuming from %s at step %d", path, blob["step"])
    model.load_state_dict(blob["model"])
    opt.load_state_dict(blob["optimizer"])
    sampler.load_state(blob["sampler"])
    torch.set_rng_state(blob["torch_rng"])
    # Step ``blob["step"]`` is redone from its saved start (same eval, same snapshot).
    return {"step": blob["step"], "checkpoints": blob["checkpoints"][:-1],
            "history": [h for h in blob["history"] if h["step"] < blob["step"]],
            "elapsed": blob["elapsed"], "replay_batch": blob["pending_batch"]}
