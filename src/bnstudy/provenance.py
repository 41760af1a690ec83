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
- ``cpu`` (the CPU's model name) and ``kernels``: the CPU code paths the numbers were computed
  with where the job imported torch (:func:`kernels`: ATen's vector capability, the branch
  oneMKL ran as MKL itself reports it, oneDNN's ISA cap). Importing bnstudy asks for the AVX2
  branches (:func:`bnstudy.pin_kernels`), but MKL grants its AVX2 branch on Intel CPUs only: on
  others it runs AUTO (its own dispatch), and matrix products with long reductions round
  otherwise (``docs/reproducibility.md``). An aggregated table lists its inputs' values; a
  table computed without torch (the claims ledger, a replication table) says so
  (:data:`NO_TORCH`), in its own process and in a fork server's child alike;
- ``created``: the UTC time the table was written (ISO 8601). It is the only field that differs
  between two runs of the same config on one machine; the numbers do not.
"""

from __future__ import annotations

import functools
import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
NO_TORCH = "none (computed without torch)"  # kernels of a table whose job computes without it


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


# oneMKL's conditional-numerical-reproducibility branches (mkl_cbwr.h, MKL_CBWR_*)
MKL_BRANCHES = {0: "UNSET", 1: "OFF", 2: "AUTO", 3: "COMPATIBLE", 4: "SSE2", 6: "SSSE3",
                7: "SSE4_1", 8: "SSE4_2", 9: "AVX", 10: "AVX2", 11: "AVX512_MIC", 12: "AVX512",
                13: "AVX512_MIC_E1", 14: "AVX512_E1"}
MKL_STRICT = 0x10000
MKL_CBWR_ALL = -1  # mkl_cbwr_get's option for the branch and its flags


@functools.cache
def cpu_model() -> str | None:
    """The CPU's model name (``/proc/cpuinfo``; else what the platform says, None if nothing),
    read once per process."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip() or None
    except OSError:
        pass
    return platform.processor() or None


def mkl_branch_name(value: int) -> str:
    """``mkl_cbwr_get(MKL_CBWR_ALL)``'s value as ``MKL_CBWR`` spells it (``AVX2,STRICT``)."""
    name = MKL_BRANCHES.get(value & 0xFFFF, str(value & 0xFFFF))
    return name + (",STRICT" if value & MKL_STRICT else "")


def mkl_branch() -> str | None:
    """The branch oneMKL computes with in this process, as MKL reports it (the branch asked for
    in ``MKL_CBWR`` where MKL grants it, ``AUTO`` where it does not); None where torch is not
    imported, has no MKL, or its MKL does not say (the getter is read from torch's library)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.backends.mkl.is_available():
        return None
    get = _mkl_getter(os.path.dirname(torch.__file__))
    return None if get is None else mkl_branch_name(get(MKL_CBWR_ALL))


@functools.cache
def _mkl_getter(torch_dir: str):
    """MKL's branch getter in the CPU library of the torch in ``torch_dir`` (None where it has
    none), looked up once per process: a job writes several tables."""
    import ctypes

    try:  # torch links MKL into its CPU library, which exports MKL's service-layer getter
        lib = ctypes.CDLL(os.path.join(torch_dir, "lib", "libtorch_cpu.so"))
        get = lib.mkl_serv_cbwr_get  # (torch does not export the public mkl_cbwr_get)
    except (OSError, AttributeError):
        return None
    get.restype, get.argtypes = ctypes.c_int, [ctypes.c_int]
    return get


def kernels() -> str | None:
    """The CPU code paths in force where torch is imported (None elsewhere): ATen's vector
    capability, oneMKL's branch (with the one asked for, when MKL did not grant it) and
    oneDNN's ISA cap, e.g. ``ATen AVX2, MKL AUTO,STRICT (asked AVX2,STRICT), oneDNN <= AVX2``."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    parts = [f"ATen {torch.backends.cpu.get_cpu_capability()}"]
    mkl = mkl_branch()
    if mkl is not None:
        asked = os.environ.get("MKL_CBWR", "").replace(" ", "").upper()
        parts.append(f"MKL {mkl}" + (f" (asked {asked})" if asked and asked != mkl else ""))
    if os.environ.get("ONEDNN_MAX_CPU_ISA"):
        parts.append(f"oneDNN <= {os.environ['ONEDNN_MAX_CPU_ISA']}")
    return ", ".join(parts)


def record(config_hash: str, device: str = "cpu", torch_free: bool = False, **extra) -> dict:
    """The provenance of a table (see the module's docstring). ``torch_free``: the job computed
    its numbers without torch (the claims ledger, a replication table), so ``kernels`` says so
    (:data:`NO_TORCH`) whether or not torch happens to be imported: a fork server's child has
    it imported, a job in its own process does not, and the two must record the same."""
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
        "cpu": cpu_model(),
        "kernels": NO_TORCH if torch_free else kernels(),
        "git_commit": git_commit(),
        "git_dirty": git_dirty(),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        **extra,
    }
