"""Atomic writes, provenance and Parquet tables with provenance in their schema metadata."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

PROVENANCE_KEY = b"bnstudy.provenance"


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only on success.

    An interrupted job never leaves a half-written file that looks valid.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def stable_hash(obj) -> str:
    """A short hash of a JSON-serializable object, independent of key order."""
    blob = json.dumps(obj, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
            cwd=Path(__file__).resolve().parent,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def provenance(config_hash: str, device: str = "cpu", **extra) -> dict:
    import numpy
    import torch

    from . import __version__

    return {
        "config_hash": config_hash,
        "bnstudy_version": __version__,
        "torch_version": torch.__version__,
        "numpy_version": numpy.__version__,
        "pandas_version": pd.__version__,
        "python_version": platform.python_version(),
        "device": device,
        "git_commit": git_commit(),
        **extra,
    }


def write_table(df: pd.DataFrame, path: str | Path, prov: dict) -> None:
    """Write ``df`` to Parquet atomically with ``prov`` in the schema metadata."""
    table = pa.Table.from_pandas(df.reset_index(drop=True), preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[PROVENANCE_KEY] = json.dumps(prov, sort_keys=True, default=str).encode()
    table = table.replace_schema_metadata(meta)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def read_table(path: str | Path) -> pd.DataFrame:
    return pd.read_parquet(path)


def read_provenance(path: str | Path) -> dict:
    meta = pq.read_schema(path).metadata or {}
    raw = meta.get(PROVENANCE_KEY)
    return json.loads(raw) if raw else {}


def write_json(obj, path: str | Path) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=str))
