"""Exact replays on CUDA: deterministic kernels and full float32 precision.

Resume replays a run exactly and ICS replays the next weights; both need a training step that
gives the same bits twice. On the CPU PyTorch's kernels are deterministic; on CUDA some are not
(atomic adds in the backward of adaptive pooling, scatter, index_add; cuBLAS's split-K
workspaces), and TF32 matmuls move ICS's gradient differences and small-step smoothness at
1e-3 relative. :func:`configure` is called wherever the package resolves a CUDA device
(:func:`bnstudy.train.loop.resolve_device`): it turns on ``torch.use_deterministic_algorithms``
(an op without a deterministic CUDA kernel then raises instead of silently differing; the
models pool globally with :mod:`bnstudy.networks.pooling`, whose backward is deterministic),
sets the cuBLAS workspace that determinism needs, turns cuDNN's autotuner off and TF32 off.
``BNSTUDY_TF32=1`` in the environment allows TF32 (faster, not exact); a table's provenance
records the settings in force (:func:`bnstudy.provenance.precision`).
"""

from __future__ import annotations

import os

import torch


def tf32_allowed() -> bool:
    return os.environ.get("BNSTUDY_TF32", "0") == "1"


def configure(device: torch.device) -> None:
    """Deterministic, full-precision kernels for ``device`` (a no-op on the CPU)."""
    if device.type != "cuda":
        return
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    tf32 = tf32_allowed()
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
