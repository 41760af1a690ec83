"""One writer per run directory at a time.

A job that outlived its Snakemake (:mod:`bnstudy.jobs.lifeline` now ends it) went on training
its run while a new Snakemake, after ``--unlock``, trained the same run beside it: two writers of
one run's files, which only the atomic writes and determinism kept right. The results lock
(:mod:`bnstudy.planning.lock`) is held by a Snakemake process, not by its jobs, so it cannot see
them. So a job that writes a run's (or a block's) directory holds :data:`WRITER_FILE` in it,
``flock``'d, with its pid, host, verb and start in it (:func:`one_writer`; in a block's
directory, which the measures write side by side, one lock per measure); a second writer is
refused at once with a one-line :class:`RunBusy` naming the first. The lock ends with the
process (a killed job leaves none held); the file is removed when the writer is done, so a
finished run's directory holds only its outputs.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

WRITER_FILE = ".bnstudy-writer.lock"


def lock_file(files: str = "") -> str:
    """The writer lock's name: :data:`WRITER_FILE` for a run's directory, one per ``files`` in
    a directory that several jobs write (``.bnstudy-writer-smoothness.lock``)."""
    return WRITER_FILE if not files else f".bnstudy-writer-{files}.lock"


class RunBusy(ValueError):
    """Another process is writing the same run directory."""


def read_holder(fd: int) -> dict:
    """The JSON record a lock file's holder wrote (pid, host, what, since); {} when unreadable.
    Shared with the results lock (:mod:`bnstudy.planning.lock`)."""
    try:
        rec = json.loads(os.pread(fd, 65536, 0) or b"{}")
    except (OSError, ValueError):
        return {}
    return rec if isinstance(rec, dict) else {}


def _same_file(fd: int, path: Path) -> bool:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    own = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)


@contextlib.contextmanager
def one_writer(directory: str | Path, what: str = "", files: str = "") -> Iterator[None]:
    """Hold ``directory``'s writer lock while the block runs; :class:`RunBusy` names the holder
    when another process holds it. ``files``: the writer's share of a directory that several
    jobs write side by side (a block's directory: each measure its own tables), which has a
    lock of its own (:func:`lock_file`)."""
    d = Path(directory)
    made = [p for p in (d, *d.parents) if not p.exists()]  # removed again if left empty
    d.mkdir(parents=True, exist_ok=True)
    path = d / lock_file(files)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            h = read_holder(fd)
            os.close(fd)
            raise RunBusy(
                f"{d} is being written by another job: pid {h.get('pid', '?')} on host "
                f"{h.get('host', '?')} ({h.get('what') or 'a bnstudy job'}), since "
                f"{h.get('since', '?')}; one writer per run at a time: wait for it to end, or "
                "stop it (a job whose Snakemake was killed ends by itself within seconds)"
            ) from None
        if _same_file(fd, path):  # not a file its last writer removed while we opened it
            break
        os.close(fd)
    try:
        holder = {"pid": os.getpid(), "host": socket.gethostname(),
                  "what": what or " ".join(sys.argv[:3]),
                  "since": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(holder).encode(), 0)
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)  # before the lock ends: a waiting opener sees it gone and retries
        os.close(fd)
        for p in made:  # a job that wrote nothing leaves no folder behind (innermost first)
            with contextlib.suppress(OSError):
                p.rmdir()
