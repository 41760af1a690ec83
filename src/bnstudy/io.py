"""Atomic writes, provenance, and run files that carry a checksum of their content.

Every file a job writes and a later job reads carries a SHA-256 of its content, verified on load,
so that a silently corrupted file is detected rather than measured:

- Parquet tables (:func:`write_table`): the checksum of the table's data (column names, types
  and values) in the schema metadata, beside the provenance;
- ``.pt`` files (:func:`save_pt`): a wrapper ``{"format": "bnstudy", "kind", "version",
  "sha256", "payload"}`` whose payload is the ``torch.save`` bytes of the object; always loaded
  with ``weights_only=True``;
- dataset ``.npz`` files: see :mod:`bnstudy.data` (:func:`array_digest`).

A corrupt, truncated or foreign file raises :class:`CorruptFile`, naming the file and what to do.
"""

from __future__ import annotations

import contextlib
import hashlib
import io as _io
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
CHECKSUM_KEY = b"bnstudy.sha256"
PT_VERSION = 1
REDO = "delete it and rerun the workflow, which writes it again"


class CorruptFile(ValueError):
    """A run file that is corrupt, truncated or not written by bnstudy."""


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


def torch_version() -> str:
    """The installed torch's version, without importing torch (two seconds) where it is not
    imported yet: table-only jobs (aggregate, claims) record it in their provenance too."""
    import sys
    from importlib import metadata

    if "torch" in sys.modules:
        return sys.modules["torch"].__version__
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:  # installed without package metadata
        import torch

        return torch.__version__


def provenance(config_hash: str, device: str = "cpu", **extra) -> dict:
    import numpy

    from bnstudy import __version__

    return {
        "config_hash": config_hash,
        "bnstudy_version": __version__,
        "torch_version": torch_version(),
        "numpy_version": numpy.__version__,
        "pandas_version": pd.__version__,
        "python_version": platform.python_version(),
        "device": device,
        "git_commit": git_commit(),
        **extra,
    }


def table_digest(table: pa.Table) -> str:
    """SHA-256 of a table's data: column names, types and values (not its metadata)."""
    import numpy as np

    h = hashlib.sha256()
    for name, col in zip(table.column_names, table.columns, strict=True):
        h.update(f"{name}\0{col.type}\0{len(col)}\0".encode())
        t = col.type
        if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
            h.update(np.asarray(col.is_null()).tobytes())
            h.update(np.asarray(col.fill_null(False if pa.types.is_boolean(t) else 0)).tobytes())
        else:
            h.update(repr(col.to_pylist()).encode())
    return h.hexdigest()


def write_table(df: pd.DataFrame, path: str | Path, prov: dict) -> None:
    """Write ``df`` to Parquet atomically with ``prov`` and the data's checksum in the schema
    metadata. Columns get their declared types first (:func:`bnstudy.columns.normalize`, by the
    table's file name), whichever command writes the table."""
    from bnstudy import columns

    df = columns.normalize(Path(path).stem, df)
    table = pa.Table.from_pandas(df.reset_index(drop=True), preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[PROVENANCE_KEY] = json.dumps(prov, sort_keys=True, default=str).encode()
    meta[CHECKSUM_KEY] = table_digest(table).encode()
    table = table.replace_schema_metadata(meta)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def read_table(path: str | Path) -> pd.DataFrame:
    """A table written by :func:`write_table`, its checksum verified (:class:`CorruptFile` when
    the file is unreadable or its data do not match)."""
    try:
        table = pq.read_table(path)
    except FileNotFoundError:
        raise
    except (OSError, pa.ArrowException) as e:
        raise CorruptFile(f"{path} is corrupt or truncated (not a readable Parquet file: "
                          f"{e}); {REDO}") from None
    meta = table.schema.metadata or {}
    want = meta.get(CHECKSUM_KEY)
    if want is None and PROVENANCE_KEY in meta:
        raise CorruptFile(f"{path} has no content checksum (written by an older bnstudy or "
                          f"altered); {REDO}")
    if want is not None and table_digest(table) != want.decode():
        raise CorruptFile(f"{path} is corrupt: its data do not match the checksum stored in "
                          f"it; {REDO}")
    return table.to_pandas()


def read_provenance(path: str | Path) -> dict:
    meta = pq.read_schema(path).metadata or {}
    raw = meta.get(PROVENANCE_KEY)
    return json.loads(raw) if raw else {}


def save_pt(obj, path: str | Path, kind: str) -> None:
    """``torch.save`` ``obj`` atomically inside a checksummed bnstudy wrapper of ``kind``."""
    import torch

    buf = _io.BytesIO()
    torch.save(obj, buf)
    payload = buf.getvalue()
    wrapper = {"format": "bnstudy", "kind": kind, "version": PT_VERSION,
               "sha256": hashlib.sha256(payload).hexdigest(), "payload": payload}
    with atomic_path(path) as tmp:
        torch.save(wrapper, tmp)


def _torch_load(source, path, kind: str):
    import pickle

    import torch

    try:
        return torch.load(source, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise
    except pickle.UnpicklingError as e:
        if "weights only" in str(e).lower():
            raise CorruptFile(f"{path} is not a bnstudy {kind} file (it holds Python objects "
                              "other than tensors and plain data) and will not be loaded; "
                              f"{REDO}") from None
        raise CorruptFile(f"{path} is corrupt or truncated ({e}); {REDO}") from None
    except Exception as e:  # noqa: BLE001 (torch raises RuntimeError, OSError, EOFError...)
        raise CorruptFile(f"{path} is corrupt or truncated ({type(e).__name__}: "
                          f"{str(e).splitlines()[0] if str(e) else ''}); {REDO}") from None


def load_pt(path: str | Path, kind: str):
    """What :func:`save_pt` wrote to ``path`` (``weights_only=True``), its checksum verified;
    :class:`CorruptFile` names the file when it is corrupt, truncated or not bnstudy's."""
    wrapper = _torch_load(path, path, kind)
    if not (isinstance(wrapper, dict) and wrapper.get("format") == "bnstudy"
            and wrapper.get("kind") == kind and isinstance(wrapper.get("payload"), bytes)):
        raise CorruptFile(f"{path} is not a bnstudy {kind} file (no bnstudy {kind} header) "
                          f"and will not be loaded; {REDO}")
    if wrapper.get("version") != PT_VERSION:
        raise CorruptFile(f"{path} has format version {wrapper.get('version')!r}, this bnstudy "
                          f"reads {PT_VERSION}; {REDO}")
    if hashlib.sha256(wrapper["payload"]).hexdigest() != wrapper.get("sha256"):
        raise CorruptFile(f"{path} is corrupt: its content does not match the checksum stored "
                          f"in it; {REDO}")
    return _torch_load(_io.BytesIO(wrapper["payload"]), path, kind)


def array_digest(arrays: dict, extra: str = "") -> str:
    """SHA-256 of named numpy arrays (name, dtype, shape, bytes) and a string."""
    import numpy as np

    h = hashlib.sha256(extra.encode())
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}\0{a.dtype.str}\0{a.shape}\0".encode())
        h.update(a.tobytes())
    return h.hexdigest()
