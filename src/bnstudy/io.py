"""Atomic writes, provenance, and run files that carry a checksum of their content.

Every file a job writes and a later job reads carries a SHA-256, verified on load, so that a
silently corrupted file is detected rather than measured:

- Parquet tables (:func:`write_table`): the SHA-256 of the *file's bytes* (its 64 digest
  characters counted as zeros), in the Parquet footer's key-value metadata as
  ``bnstudy-file-sha256:<hex>``, outside the Arrow schema. Every byte a reader can use is covered
  (data, types, the pandas metadata naming the columns, the provenance); :func:`read_table` and
  :func:`read_provenance` find the digest by its prefix, check the bytes *before* Parquet parses
  any of them, then parse the bytes they checked. No type is hashed as text, so nothing depends
  on how a type prints (``list<item>`` or ``list<element>``);
- ``.pt`` files (:func:`save_pt`): a wrapper ``{"format": "bnstudy", "kind", "version",
  "sha256", "payload"}`` whose payload is the ``torch.save`` bytes of the object; always loaded
  with ``weights_only=True``;
- dataset ``.npz`` files: see :mod:`bnstudy.data` (:func:`array_digest`).

A corrupt, truncated or foreign file raises :class:`CorruptFile`, naming the file and what to do
(whatever the reader's own exception was). :func:`read_table` is the one reader of a table: every
entry point (aggregate, claims, plots, report, ``compare``, ``ledger``, ``verify``,
:mod:`bnstudy.results`) reads through it, and a run's files are also checked against the place
they lie in (:mod:`bnstudy.tables.binding`, :class:`MisplacedFile`). A write that fails for
the disk (full, read-only, over quota) raises :class:`WriteFailed`, one line naming the file and
the cause; nothing partial is left and finished files are kept, so the rerun resumes.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io as _io
import json
import os
from collections.abc import Iterator
from pathlib import Path

from bnstudy import lazy
from bnstudy import provenance as _provenance
from bnstudy.provenance import git_commit, torch_version  # noqa: F401 (re-exported)

PROVENANCE_KEY = b"bnstudy.provenance"
CHECKSUM_KEY = b"bnstudy.sha256"
FILE_MARK = b"bnstudy-file-sha256:"  # the table digest's prefix: found without parsing the file
_BLANK = b"0" * 64  # the digest's place while the bytes are hashed
PT_VERSION = 1
REDO = "delete it and rerun the workflow, which writes it again"
# a write failing with one of these is the disk's fault, not the caller's: one line, no traceback
DISK_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO, errno.EACCES,
               errno.EPERM}
# imported on first use: a job that only writes bytes (the workflow's argument files, one small
# process per job) does not pay for pandas and pyarrow (about half a second)
pd = lazy.module("pandas")
pa = lazy.module("pyarrow")
pq = lazy.module("pyarrow.parquet")


class CorruptFile(ValueError):
    """A run file that is corrupt, truncated or not written by bnstudy."""


class ImpossibleValue(CorruptFile):
    """A table whose bytes are intact but which holds a value no run can produce (a value
    outside its column's declared range: :mod:`bnstudy.tables.ranges`)."""


class MisplacedFile(CorruptFile):
    """An intact run file that lies in another run's place (copied or moved there): see
    :mod:`bnstudy.tables.binding`."""


class WriteFailed(OSError):
    """A file that could not be written (full disk, read-only...); nothing partial is left."""


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only on success.

    An interrupted job never leaves a half-written file that looks valid. A write that fails for
    the disk (:data:`DISK_ERRNOS`: full, read-only, over quota...) raises :class:`WriteFailed`.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        yield tmp
        os.replace(tmp, path)
    except OSError as e:
        if isinstance(e, WriteFailed) or e.errno not in DISK_ERRNOS:
            raise
        err = WriteFailed(f"cannot write {path}: {e.strerror or e} (errno {e.errno}); nothing "
                          "partial was left: fix the cause and rerun, finished files are kept")
        err.errno = e.errno
        raise err from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def write_bytes(path: str | Path, data: bytes) -> None:
    """``data`` written to ``path`` atomically (:func:`atomic_path`)."""
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        fh.write(data)


def stable_hash(obj) -> str:
    """A short hash of a JSON-serializable object, independent of key order."""
    blob = json.dumps(obj, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def provenance(config_hash: str, device: str = "cpu", **extra) -> dict:
    """What a table records about how it was made (:mod:`bnstudy.provenance`)."""
    return _provenance.record(config_hash, device, **extra)


def _file_digest(raw, at: int) -> str:
    """SHA-256 of ``raw`` with its 64 bytes at ``at`` (the digest's place) counted as zeros."""
    view = memoryview(raw)
    h = hashlib.sha256(view[:at])
    h.update(_BLANK)
    h.update(view[at + 64:])
    return h.hexdigest()


def write_table(df: pd.DataFrame, path: str | Path, prov: dict,
                compression: str | None = None) -> None:
    """Write ``df`` to Parquet atomically with ``prov`` in the schema metadata and the SHA-256
    of the file's bytes in the footer (see the module's docstring). Columns get their declared
    types first (:func:`bnstudy.columns.normalize`, by the table's file name), whichever command
    writes the table. ``compression``: Parquet's codec (default snappy; ``"zstd"`` at level 19
    for the tables shipped into the repository, :mod:`bnstudy.report.ship`)."""
    from bnstudy import columns

    df = columns.normalize(Path(path).stem, df)
    table = pa.Table.from_pandas(df.reset_index(drop=True), preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[PROVENANCE_KEY] = json.dumps(prov, sort_keys=True, default=str).encode()
    table = table.replace_schema_metadata(meta)
    sink = pa.BufferOutputStream()
    codec = ({} if compression is None else
             {"compression": compression, "compression_level": 19 if compression == "zstd"
              else None})
    with pq.ParquetWriter(sink, table.schema, **codec) as writer:
        writer.write_table(table)
        writer.add_key_value_metadata({CHECKSUM_KEY: FILE_MARK + _BLANK})
    raw = bytearray(sink.getvalue().to_pybytes())
    at = raw.rfind(FILE_MARK) + len(FILE_MARK)
    if raw[at:at + 64] != _BLANK:  # a Parquet writer that moved it: never write a bad table
        raise RuntimeError(f"{path}: the checksum's place was not found in the Parquet footer")
    raw[at:at + 64] = _file_digest(raw, at).encode()
    write_bytes(path, raw)


def _verified(path: str | Path) -> bytes:
    """The bytes of table ``path``, their checksum verified before anything parses them."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise
    except OSError as e:
        raise CorruptFile(f"{path} cannot be read ({e.strerror or e}); if it is damaged, "
                          f"{REDO}") from None
    mark = raw.rfind(FILE_MARK)
    if mark < 0:
        what = ("is corrupt or truncated, or written by an older bnstudy: it has no content "
                "checksum"
                if b"bnstudy." in raw else
                "is truncated, corrupt or not a bnstudy table (no bnstudy checksum in it)")
        raise CorruptFile(f"{path} {what}; {REDO}")
    at = mark + len(FILE_MARK)
    if _file_digest(raw, at).encode() != raw[at:at + 64]:
        raise CorruptFile(f"{path} is corrupt or truncated: its bytes do not match the checksum "
                          f"stored in it; {REDO}")
    return raw


def _parsed(path, what: str, parse):
    """``parse()`` of checked bytes; any failure (none is expected) names the file."""
    try:
        return parse()
    except Exception as e:  # noqa: BLE001 (pyarrow, pandas and json raise many kinds)
        raise CorruptFile(f"{path} is corrupt ({what} failed: {type(e).__name__}: "
                          f"{str(e).splitlines()[0] if str(e) else ''}); {REDO}") from None


def read_table(path: str | Path) -> pd.DataFrame:
    """A table written by :func:`write_table`, its checksum verified (:class:`CorruptFile`,
    naming the file, when it is unreadable, foreign or altered in any byte) and its values
    checked against their declared types and ranges (:func:`_checked`)."""
    raw = _verified(path)
    df = _parsed(path, "reading the table",
                 lambda: pq.read_table(pa.BufferReader(raw)).to_pandas())
    _checked(path, df)
    return df


def _checked(path, df) -> None:
    """Refuse a table whose columns hold other types than declared (:func:`bnstudy.columns.
    normalize`) or values outside their declared ranges (:mod:`bnstudy.tables.ranges`), naming
    the file (:class:`CorruptFile`)."""
    from bnstudy import columns
    from bnstudy.tables import ranges

    table = ranges.table_of(path)
    try:
        columns.normalize(table, df)
    except (TypeError, ValueError) as e:
        raise CorruptFile(f"{path}: {e}; {REDO}") from None
    try:
        ranges.check(path, df, table)
    except ranges.Violation as e:
        raise ImpossibleValue(f"{e}; {REDO}") from None


def read_provenance(path: str | Path) -> dict:
    """The provenance stored in table ``path``, its checksum verified ({} for a readable Parquet
    file that bnstudy did not write: no bnstudy key in any byte)."""
    try:
        raw = _verified(path)
    except CorruptFile:
        with contextlib.suppress(Exception):  # noqa: BLE001 (anything: then it is corrupt)
            other = Path(path).read_bytes()
            if b"bnstudy." not in other and pq.read_schema(pa.BufferReader(other)) is not None:
                return {}
        raise

    def parse() -> dict:
        meta = pq.read_schema(pa.BufferReader(raw)).metadata or {}
        prov = json.loads(meta[PROVENANCE_KEY]) if PROVENANCE_KEY in meta else {}
        if not isinstance(prov, dict):
            raise ValueError(f"provenance is a {type(prov).__name__}, not a mapping")
        return prov

    return _parsed(path, "reading the provenance", parse)


def save_pt(obj, path: str | Path, kind: str) -> None:
    """``torch.save`` ``obj`` atomically inside a checksummed bnstudy wrapper of ``kind``."""
    import torch

    buf = _io.BytesIO()
    torch.save(obj, buf)
    payload = buf.getvalue()
    wrapper = {"format": "bnstudy", "kind": kind, "version": PT_VERSION,
               "sha256": hashlib.sha256(payload).hexdigest(), "payload": payload}
    buf = _io.BytesIO()
    torch.save(wrapper, buf)
    # written by Python, not torch's C++ writer: a full disk is an OSError naming the file
    write_bytes(path, buf.getvalue())


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
        if "weights_only" in str(e):  # e.g. a TorchScript archive: never torch's advice to load it
            raise CorruptFile(f"{path} is not a bnstudy {kind} file (a PyTorch file of another "
                              f"kind, such as a TorchScript archive) and will not be loaded; "
                              f"{REDO}") from None
        raise CorruptFile(f"{path} is corrupt or truncated ({type(e).__name__}: "
                          f"{str(e).splitlines()[0] if str(e) else ''}); {REDO}") from None


def load_pt(path: str | Path, kind: str | None):
    """What :func:`save_pt` wrote to ``path`` (``weights_only=True``), its checksum verified;
    :class:`CorruptFile` names the file when it is corrupt, truncated or not bnstudy's (a
    ``kind`` of None accepts a bnstudy file of any kind)."""
    wrapper = _torch_load(path, path, kind or "run")
    if not (isinstance(wrapper, dict) and wrapper.get("format") == "bnstudy"
            and wrapper.get("kind") == (kind or wrapper.get("kind"))
            and isinstance(wrapper.get("payload"), bytes)):
        raise CorruptFile(f"{path} is not a bnstudy {kind or 'run'} file (no bnstudy "
                          f"{kind or 'file'} header) "
                          f"and will not be loaded; {REDO}")
    if wrapper.get("version") != PT_VERSION:
        raise CorruptFile(f"{path} has format version {wrapper.get('version')!r}, this bnstudy "
                          f"reads {PT_VERSION}; {REDO}")
    if hashlib.sha256(wrapper["payload"]).hexdigest() != wrapper.get("sha256"):
        raise CorruptFile(f"{path} is corrupt: its content does not match the checksum stored "
                          f"in it; {REDO}")
    return _torch_load(_io.BytesIO(wrapper["payload"]), path, kind or wrapper["kind"])


def array_digest(arrays: dict, extra: str = "") -> str:
    """SHA-256 of named numpy arrays (name, dtype, shape, bytes) and a string."""
    import numpy as np

    h = hashlib.sha256(extra.encode())
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}\0{a.dtype.str}\0{a.shape}\0".encode())
        h.update(a.tobytes())
    return h.hexdigest()
