"""A small on-disk cache of JSON values keyed by the content of everything they derive from.

Every Snakemake start (the study's own, and the two of each cluster job: its batch script's and
its job step's) parses the Snakefile, which checks the config completely -- each model built once
on the CPU, counted on the meta device, run forward -- and sizes each job's cluster request from
its model (:mod:`bnstudy.model_size`). Both need torch, whose import is about 2.7 s of CPU of the
6.5 s a start costs. Their results depend only on the config, the package's source, the schema and
the installed torch, so a start whose inputs an earlier start already checked reads the result
here instead (:func:`bnstudy.config.study.check_cached`, :func:`bnstudy.model_size.size`):
no torch import, about 2.5 s less per start.

The key (:func:`key`) is a SHA-256 over the value's own inputs (its ``payload``: a config, a model
entry and input shape, ...), every file of the installed ``bnstudy`` package (:func:`package_hash`:
any edit of any module is a new key), the installed torch's version (read from its metadata, not
imported) and Python's. Entries are JSON files, read as data (never code): one that does not
parse, or whose stored key differs, is a miss. What a check must see of this machine each time
(the results directory, a dataset's files, a CUDA device) is checked again on a hit, by the
caller. Only successes are stored, so a bad config fails every time with its message.

Where: ``$BNSTUDY_CACHE`` when set (``off`` or ``0``: no cache), else
``$XDG_CACHE_HOME/bnstudy``, else ``~/.cache/bnstudy``; one folder per kind of value, at most
:data:`MAX_ENTRIES` entries each (the oldest removed). A folder that cannot be written is no
error: the value is computed every time, as without the cache.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

ENV = "BNSTUDY_CACHE"
OFF = ("off", "0")
MAX_ENTRIES = 512
VERSION = 1  # of the entries' layout: a new one reads no old entry
PACKAGE = Path(__file__).resolve().parent


def folder() -> Path | None:
    """The cache's folder, or None when ``$BNSTUDY_CACHE`` turns it off."""
    value = os.environ.get(ENV, "").strip()
    if value.lower() in OFF:
        return None
    if value:
        return Path(value).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "bnstudy"


@functools.cache
def file_digests(root: Path = PACKAGE) -> dict[str, str]:
    """``{relative path: SHA-256 hex}`` of every file of the package under ``root``, in sorted
    order (compiled files left out): read once per process, for :func:`package_hash` and the
    import graph's per-module entries (:mod:`bnstudy.planning.codeversion`)."""
    return {path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(p for p in root.rglob("*") if p.is_file()
                               and "__pycache__" not in p.parts and p.suffix != ".pyc")}


@functools.cache
def package_hash(root: Path = PACKAGE) -> str:
    """SHA-256 over every file of the package under ``root`` (relative path and the bytes'
    digest, in sorted order; compiled files left out)."""
    h = hashlib.sha256()
    for rel, digest in file_digests(root).items():
        h.update(rel.encode() + b"\0")
        h.update(bytes.fromhex(digest))
    return h.hexdigest()


@functools.cache
def torch_version() -> str:
    """The installed torch's version, from its metadata (torch is not imported)."""
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "none"


def key(kind: str, payload, *, package: bool = True) -> str:
    """The key of a value of ``kind`` computed from ``payload`` (anything JSON can write; other
    objects by their ``repr``) by this package under this torch and Python. ``package=False``
    leaves the package's files out: for a value whose ``payload`` names all it derives from
    (the import graph: each module's digest and the parser's own). The mappings' order is part
    of the key, as it is of a value computed from them (a config's experiments, in its file's
    order)."""
    text = json.dumps({"kind": kind, "payload": payload,
                       "package": package_hash() if package else None,
                       "torch": torch_version(), "python": sys.version, "version": VERSION},
                      default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


def remember(kind: str, payload, compute, valid=lambda value: True):
    """``compute()``, or the value stored for ``payload`` when a ``valid`` one is; a computed value
    is stored (the key is taken before ``compute`` runs: it may change ``payload``)."""
    k = key(kind, payload)
    hit = get(kind, k)
    if hit is not None and valid(hit):
        return hit
    value = compute()
    put(kind, k, value)
    return value


def _path(kind: str, k: str) -> Path | None:
    root = folder()
    return None if root is None else root / kind / f"{k}.json"


def get(kind: str, k: str):
    """The value stored under key ``k``, or None (a miss: none stored, unreadable, or another
    key's)."""
    path = _path(kind, k)
    if path is None:
        return None
    try:
        entry = json.loads(path.read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(entry, dict) or entry.get("key") != k or "value" not in entry:
        return None
    return entry["value"]


def put(kind: str, k: str, value) -> bool:
    """Store ``value`` under key ``k`` (atomically); False when it is not stored: the cache is
    off or cannot be written, or ``value`` does not survive JSON unchanged (its types kept)."""
    path = _path(kind, k)
    if path is None:
        return False
    try:
        text = json.dumps({"key": k, "value": value}, allow_nan=False)
    except (TypeError, ValueError):
        return False
    if not _same(json.loads(text)["value"], value):
        return False
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
        _prune(path.parent)
    except OSError:
        return False
    return True


def _same(a, b) -> bool:
    """``a == b`` with the same types throughout (1 is not 1.0 nor True; a tuple is no list)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[x], b[x]) for x in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _prune(where: Path) -> None:
    entries = sorted(where.glob("*.json"), key=lambda p: p.stat().st_mtime)
    for old in entries[:max(0, len(entries) - MAX_ENTRIES)]:
        old.unlink(missing_ok=True)
