"""One study per results directory.

Snakemake knows the jobs of its own working directory only (its metadata and lock live in
``.snakemake/`` there). Two working directories whose studies write the same ``results``
directory would each take the other's files for their own: the training table from one config,
a measure of the other run on the first one's checkpoints. So the results directory records its
study, and a second one is refused before any job:

- ``<results>/.bnstudy-study.json``: the study's config hash (the flat, checked config without
  its ``results`` path), its config files and its working directory. A run whose config has
  another hash *from another working directory* is refused with a message naming both; a run
  from the recording working directory may change its config (Snakemake's own metadata there
  reruns what the change affects), and a same-config run from anywhere proceeds. Written when a
  run starts work (:func:`claim`, Snakemake's ``onstart``), checked whenever the Snakefile is
  read (:func:`check`, dry runs included).
- ``<results>/.bnstudy-results``: the marker of a bnstudy results directory, written with the
  record: a config's ``results`` must be new, empty or so marked (:mod:`bnstudy.config.paths`).
- ``<results>/.bnstudy-study.lock``: held (``flock``) by the Snakemake process running the
  study, with its pid, host, working directory and config hash in it; a second run while it is
  held is refused, naming the holder. The lock goes with the process, so a killed run leaves
  none behind.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path

from bnstudy.config import paths
from bnstudy.config.loader import ConfigError
from bnstudy.jobs.run_writer import read_holder

STUDY_FILE = paths.STUDY_RECORD
MARKER_TEXT = (b"This directory holds a bnstudy study's results: a study config may name it as "
               b"`results:` (bnstudy.config.setup_checks.check_results).\n")
LOCK_FILE = ".bnstudy-study.lock"
_HELD: dict[str, int] = {}  # resolved results directory -> the open, locked file descriptor


def config_hash(cfg: dict) -> str:
    """The study's identity: a hash of its flat config, without the ``results`` path (and
    ``results_anywhere``, which only allows where it lies)."""
    from bnstudy import io

    return io.stable_hash({k: v for k, v in cfg.items()
                           if k not in ("results", "results_anywhere")})


def _record(cfg: dict, configfiles) -> dict:
    return {"config_hash": config_hash(cfg),
            "config_files": [str(Path(f).resolve()) for f in configfiles],
            "working_directory": str(Path.cwd().resolve())}


def _describe(r: dict) -> str:
    return (f"config hash {r.get('config_hash')} (config files "
            f"{', '.join(r.get('config_files') or []) or 'none'}; working directory "
            f"{r.get('working_directory')})")


def _refuse(root: Path, msg: str):
    raise ConfigError(f"results: {str(root)!r} {msg}")


def _recorded(root: Path) -> dict | None:
    path = root / STUDY_FILE
    if not path.is_file():
        return None
    try:
        rec = json.loads(path.read_text())
        if not isinstance(rec, dict) or not isinstance(rec.get("config_hash"), str):
            raise ValueError("no config hash in it")
    except (OSError, ValueError) as e:
        _refuse(root, f"has an unreadable study record {path} ({e}); delete it if this "
                      "directory holds only this study")
    return rec


def check(cfg: dict, configfiles) -> None:
    """Refuse (:class:`~bnstudy.config.loader.ConfigError`) when ``cfg``'s results directory holds
    another study or another run is writing it; reads only."""
    root = Path(cfg["results"])
    mine = _record(cfg, configfiles)
    have = _recorded(root)
    if have and mine["config_hash"] != have["config_hash"] and (
            mine["working_directory"] != have.get("working_directory")):
        _refuse(root, f"holds another study: {_describe(have)}, recorded "
                      f"{have.get('recorded', '?')}; this run has {_describe(mine)}. Two "
                      "studies writing one results directory mix their tables: give this study "
                      "its own `results:` directory, or, if it is the same study moved or "
                      f"edited on purpose, delete {root / STUDY_FILE}")
    lock = root / LOCK_FILE
    if str(root.resolve()) in _HELD or not lock.is_file():
        return
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:  # held: by a run of this study (its cluster jobs read this too)?
        h = read_holder(fd)
        if h.get("config_hash") != mine["config_hash"]:
            _refuse(root, f"is being written by another study's run: pid {h.get('pid')} on "
                          f"host {h.get('host')}, {_describe(h)}, since {h.get('since')}; this "
                          f"run has {_describe(mine)}. Wait for it to end, or give this study "
                          "its own `results:` directory")
    finally:
        os.close(fd)  # releases a lock taken here


def claim(cfg: dict, configfiles) -> None:
    """Check (:func:`check`), then hold the results directory's lock for this process's
    lifetime and record the study in it. Called when a run starts work (``onstart``)."""
    root = Path(cfg["results"])
    check(cfg, configfiles)
    key = str(root.resolve())
    mine = _record(cfg, configfiles)
    if key not in _HELD:
        try:
            root.mkdir(parents=True, exist_ok=True)
            fd = os.open(root / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            _refuse(root, f"cannot be created or locked: {e.strerror or e}")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            h = read_holder(fd)
            os.close(fd)
            _refuse(root, f"is being written by another run: pid {h.get('pid')} on host "
                          f"{h.get('host')}, {_describe(h)}, since {h.get('since')}; wait for "
                          "it to end (one run at a time per results directory)")
        holder = {**mine, "pid": os.getpid(), "host": socket.gethostname(),
                  "since": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(holder, indent=1).encode(), 0)
        _HELD[key] = fd
        check(cfg, configfiles)  # a study recorded while this run waited for the lock
    from bnstudy import io

    if not (root / paths.RESULTS_MARKER).exists():  # a bnstudy results directory from now on
        io.write_bytes(root / paths.RESULTS_MARKER, MARKER_TEXT)

    have = _recorded(root)  # kept for a same-config run from elsewhere: the owner stays
    if have is None or have["config_hash"] != mine["config_hash"]:
        rec = {**mine, "recorded": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
        io.write_bytes(root / STUDY_FILE, json.dumps(rec, indent=1).encode())


def release(results: str | Path) -> None:
    """Give up this process's lock on ``results`` (the lock otherwise ends with the process)."""
    fd = _HELD.pop(str(Path(results).resolve()), None)
    if fd is not None:
        os.close(fd)
