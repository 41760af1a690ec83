"""A local job does not outlive the Snakemake that started it.

Snakemake starts each job as a shell running ``python -m bnstudy ...``. Killed itself (SIGKILL,
an out-of-memory kill, a closed terminal's SIGHUP to it alone), it cannot stop them: its jobs went
on training for minutes, and after ``--unlock`` a new run trained the same runs beside them. So
the Snakefile's ``onstart`` records this Snakemake in the jobs' environment (:func:`export`:
host, pid and the process's start time, :data:`ENV`; only when jobs run on this machine), and
every job, in its own process or in a fork server's child alike (both run
:func:`bnstudy.cli.main.main`, which calls :func:`watch`), watches that process from a daemon
thread: a ``pidfd`` when the kernel has them (woken at the exit, no polling), else a check every
:data:`POLL` seconds. A Snakemake that is gone (exited, a zombie, or its pid reused by another
process: the start time differs) ends the job with SIGTERM after one line on its log, and with
SIGKILL :data:`GRACE` seconds later. Its writes are atomic (:func:`bnstudy.io.atomic_path`):
nothing half-written is left as a result, and the rerun resumes.

Why not ``prctl(PR_SET_PDEATHSIG)``: it fires when the *parent* (thread) of the process ends, and
a job's parent is Snakemake's shell, not Snakemake (and a fork server's child's parent is the
server); nor a pipe: Snakemake closes every other file descriptor of the jobs it starts. Its pid
in the environment reaches both process models.

On a cluster the scheduler owns the jobs: Snakemake's SLURM executor cancels its jobs
(``scancel``) when it is interrupted; a Snakemake killed with SIGKILL cannot, and its jobs run
to their end or their time limit (``docs/safety.md``). A cluster job never watches the submitting
host's pid: :func:`export` runs for local jobs only, and :func:`watch` ignores another host's
record.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import sys
import threading
import time

ENV = "BNSTUDY_SNAKEMAKE"  # "<host> <pid> <start time>" of the Snakemake whose jobs these are
POLL = 0.5  # seconds between checks where there is no pidfd
GRACE = 5.0  # seconds between the SIGTERM and the SIGKILL of a job whose Snakemake is gone


def start_time(pid: int) -> str:
    """The process's start time (clock ticks since boot, ``/proc/<pid>/stat``), '' if unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read().decode(errors="replace")
    except OSError:
        return ""
    return stat.rpartition(")")[2].split()[19]


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().decode(errors="replace").rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return ""


def alive(pid: int, started: str) -> bool:
    """Whether process ``pid`` that started at ``started`` still runs (not a zombie, not another
    process under a reused pid)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    if _state(pid) in ("Z", "X"):
        return False
    return not started or start_time(pid) in ("", started)


def export(local: bool) -> None:
    """Record this process (Snakemake) in the environment its local jobs inherit."""
    if local:
        pid = os.getpid()
        os.environ[ENV] = f"{socket.gethostname()} {pid} {start_time(pid)}"
    else:
        os.environ.pop(ENV, None)


def recorded() -> tuple[int, str] | None:
    """``(pid, start time)`` of this job's Snakemake on this host, or None."""
    host, _, rest = os.environ.get(ENV, "").partition(" ")
    pid, _, started = rest.partition(" ")
    if host != socket.gethostname() or not pid.isdigit():
        return None
    return int(pid), started.strip()


def watch() -> threading.Thread | None:
    """End this process when its Snakemake is gone (a daemon thread; None when there is no
    Snakemake of this host to watch, e.g. a verb run by hand)."""
    found = recorded()
    if found is None or found[0] == os.getpid():
        return None
    pid, started = found
    if not alive(pid, started):
        _stop(pid)
    t = threading.Thread(target=_wait, args=(pid, started), name="bnstudy-lifeline", daemon=True)
    t.start()
    return t


def _wait(pid: int, started: str) -> None:
    fd = None
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        fd = None
    if fd is not None and alive(pid, started):  # the pidfd is of the recorded process
        select.select([fd], [], [])  # readable once the process has exited
        os.close(fd)
    else:
        while alive(pid, started):
            time.sleep(POLL)
    _stop(pid)


def _stop(pid: int) -> None:
    try:
        print(f"bnstudy: the Snakemake that started this job (pid {pid}) is gone; stopping the "
              "job (its outputs are written atomically: the rerun starts it again)",
              file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(GRACE)
    os.kill(os.getpid(), signal.SIGKILL)
