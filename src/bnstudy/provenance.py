"""What every table records about how it was made (its Parquet metadata, :mod:`bnstudy.io`).

- ``config_hash``: the hash of what the job computed from (a run's spec, a measure's options
  and grid, the tables an aggregate read); ``config``: that configuration itself where the job
  passes it (a run's resolved spec), so a table says what produced it without the study file;
- versions: bnstudy, torch, numpy, pandas, Python, and, where installed, Snakemake and seaborn
  (read from the package metadata, without importing them: table-only jobs stay cheap);
- ``device`` and the precision in force (``deterministic_algorithms``, ``tf32``; set where a
  job resolves a CUDA device, :mod:`bnstudy.train.determinism`; torch's state is read only
  when torch is already imported);
- ``git_commit`` and ``git_dirty`` (uncommitted changes to tracked files) of the package's
  checkout when it is one, else None;
- ``created``: the UTC time the table was written (ISO 8601). It is the only field that differs
  between two runs of the same config; the numbers do not.
"""

from __future__ import annotations

import platform
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _git(*args: str) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, timeout=5,
                              cwd=HERE)
    except (OSError, subprocess.SubprocessError):
        return None


def git_commit() -> str | None:
    out = _git("rev-parse", "HEAD")
    return (out.stdout.strip() or None) if out is not None and out.returncode == 0 else None


def git_dirty() -> bool | None:
    """Whether the checkout holding the package has uncommitted changes to tracked files
    (None outside a git checkout)."""
    out = _git("status", "--porcelain", "--untracked-files=no")
    return bool(out.stdout.strip()) if out is not None and out.returncode == 0 else None


def version(package: str) -> str | None:
    """An installed package's version from its metadata (None when it is not installed)."""
    if package in sys.modules and hasattr(sys.modules[package], "__version__"):
        return sys.modules[package].__version__
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def torch_version() -> str:
    """The installed torch's version, without importing torch (two seconds) where it is not
    imported yet: table-only jobs (aggregate, claims) record it in their provenance too."""
    found = version("torch")
    if found is None:  # installed without package metadata
        import torch

        return torch.__version__
    return found


def precision() -> dict:
    """The precision settings in force where torch is already imported (else the defaults a
    CPU job runs with)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return {"deterministic_algorithms": False, "tf32": False}
    return {"deterministic_algorithms": bool(torch.are_deterministic_algorithms_enabled()),
            "tf32": bool(torch.backends.cuda.matmul.allow_tf32)}


def record(config_hash: str, device: str = "cpu", **extra) -> dict:
    import numpy
    import pandas

    from bnstudy import __version__

    return {
        "config_hash": config_hash,
        "bnstudy_version": __version__,
        "torch_version": torch_version(),
        "numpy_version": numpy.__version__,
        "pandas_version": pandas.__version__,
        "snakemake_version": version("snakemake"),
        "seaborn_version": version("seaborn"),
        "python_version": platform.python_version(),
        "device": device,
        **precision(),
        "git_commit": git_commit(),
        "git_dirty": git_dirty(),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        **extra,
    }
