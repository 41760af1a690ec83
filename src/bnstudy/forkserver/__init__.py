"""A warm start for the workflow's local jobs: one process imports torch, pandas, matplotlib and
the package once, and each ``python -m bnstudy`` job runs in a child forked from it.

Every job of the workflow is a fresh ``python -m bnstudy VERB ...`` process, and most of a small
job is start-up: ``import torch`` alone is 1.4 s on the 2-core reference machine and pandas
0.45 s more, against half a second of training for a default-study run
(``benchmarks/bench_startup.py``). When Snakemake runs the jobs on this machine, the Snakefile's
``onstart`` calls :func:`start`: a server process (:mod:`bnstudy.forkserver.server`) imports
those libraries and every package module, then listens on a Unix socket. A job's
``python -m bnstudy`` then only connects (:func:`delegate`, tens of milliseconds): it passes its
arguments, working directory, environment and standard streams (the file descriptors
themselves, so its log is its own); the server forks a child that runs the verb exactly as the
job's own process would (:func:`bnstudy.cli.main`), and the job exits with the child's status,
or is killed by the child's signal.

What does not change: each job is still a Snakemake job with its command, log, exit status,
retries and rerun triggers, and its results are bitwise the same (``tests/test_forkserver.py``
compares them). A job that no server takes runs in its own process as before: none running
(``snakemake -n``, a job run by hand), not yet ready (its first seconds), or a refusal.

Safety:

- Only for jobs Snakemake runs on this machine (``workflow.local_exec``). A cluster's jobs never
  get the server's address, so none escapes the scheduler's accounting, not even on a node that
  also runs Snakemake.
- The socket is in Linux's abstract namespace (no file; gone with the server), named per
  Snakemake process with a random part. The server serves only peers of its own user
  (``SO_PEERCRED``) that present the random token :func:`start` puts in the jobs' environment,
  run the same Python and import this same package (a ``--use-conda`` job's other interpreter
  runs in its own process).
- Fork safety: the server forks from its only Python thread and never computes with torch nor
  initialises CUDA (a child initialises its device itself). The helper threads that numpy's
  OpenBLAS and pyarrow's jemalloc start at import register their own fork handlers, as for
  PyTorch's forked data-loader workers. Settings that libraries read from the environment at
  import (``OMP_NUM_THREADS`` ...) are Snakemake's; the package sets its torch threads itself.
- Lifetimes: :func:`stop` ends the server when Snakemake ends (``onsuccess``/``onerror``), and
  the server ends within a second of a killed Snakemake. A signal to a job (Snakemake cancelling
  it, Ctrl-C) is forwarded to its child, and a child whose job is gone (``SIGKILL``) ends too.
- ``BNSTUDY_FORKSERVER=0`` in Snakemake's environment turns the server off.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys

SWITCH = "BNSTUDY_FORKSERVER"  # 0, off, false or no: no server
ADDRESS = "BNSTUDY_FORKSERVER_ADDRESS"  # "<socket name>:<token>", set by start() for the jobs
TOKEN = "BNSTUDY_FORKSERVER_TOKEN"  # the server's copy of the token
INT = struct.Struct("!i")
# Imported by the server before it serves: what the jobs' verbs import (and bnstudy's modules).
PRELOAD = ("numpy", "torch", "pandas", "pyarrow.parquet", "scipy.stats", "matplotlib.pyplot",
           "seaborn")
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
              signal.SIGUSR2)
_server: subprocess.Popen | None = None


def enabled() -> bool:
    return os.environ.get(SWITCH, "1").strip().lower() not in {"0", "off", "false", "no"}


def identity() -> dict:
    """What a job and the server must share: the interpreter and this package's location."""
    return {"python": os.path.realpath(sys.executable),
            "package": os.path.dirname(os.path.realpath(__file__))}


# -- the Snakemake side ------------------------------------------------------------------------
def start(local: bool, log: str) -> None:
    """Start the server for this Snakemake process's local jobs (nothing for a cluster's or when
    switched off); the server logs to ``log``."""
    global _server
    if _server is not None:
        return
    os.environ.pop(ADDRESS, None)  # this run's server or none (not one this process inherited)
    if not local or not enabled():
        return
    import secrets

    name = f"bnstudy-{os.getuid()}-{os.getpid()}-{secrets.token_hex(8)}"
    token = secrets.token_hex(16)
    os.makedirs(os.path.dirname(log) or ".", exist_ok=True)
    with open(log, "ab") as out:
        # a session of its own: a Ctrl-C in the terminal reaches the jobs, which forward it
        _server = subprocess.Popen(
            [sys.executable, "-m", "bnstudy.forkserver.server", name, str(os.getpid())],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            env={**os.environ, TOKEN: token}, start_new_session=True)
    os.environ[ADDRESS] = f"{name}:{token}"


def stop() -> None:
    """End the server :func:`start` started (jobs started afterwards run in their own process)."""
    global _server
    os.environ.pop(ADDRESS, None)
    if _server is None:
        return
    _server.terminate()
    try:
        _server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        _server.kill()
        _server.wait()
    _server = None


# -- the job side ------------------------------------------------------------------------------
def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError("connection closed")
        buf += chunk
    return buf


def _message(sock: socket.socket) -> tuple[bytes, int]:
    """One reply: (kind, value): P (the child's pid), S (exit status; -N: killed by signal N)
    or R (refused)."""
    kind = recv_exact(sock, 1)
    return kind, (0 if kind == b"R" else INT.unpack(recv_exact(sock, INT.size))[0])


def _stdio() -> list[int]:
    out = []
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
            out.append(fd)
        except OSError:  # a closed standard stream: the child gets /dev/null there
            out.append(os.open(os.devnull, os.O_RDWR))
    return out


def delegate(argv: list[str]) -> int | None:
    """Run ``python -m bnstudy ARGV`` in the server's child; its exit status, or None when no
    server takes the job (the caller runs it itself). A child killed by a signal kills this
    process with the same signal."""
    address = os.environ.get(ADDRESS, "")
    name, _, token = address.partition(":")
    if not name or not enabled():
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect("\0" + name)
        payload = json.dumps({"token": token, "argv0": sys.argv[0], "argv": list(argv),
                              "cwd": os.getcwd(),
                              "env": dict(os.environ), **identity()}).encode()
        socket.send_fds(sock, [INT.pack(len(payload))], _stdio())
        sock.sendall(payload)
        kind, pid = _message(sock)
    except (OSError, EOFError):  # no server (yet), or it went away before taking the job
        sock.close()
        return None
    if kind != b"P":
        sock.close()
        return None

    def forward(signum, _frame):
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for s in _FORWARDED:
        signal.signal(s, forward)
    try:
        _, status = _message(sock)
    except (OSError, EOFError):
        print("bnstudy: the fork server ended before this job's child reported its exit "
              "status", file=sys.stderr)
        return 1
    finally:
        sock.close()
    if status < 0:  # end as the child did: killed by the same signal
        if -status not in (signal.SIGKILL, signal.SIGSTOP):  # those two keep their default
            signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
        return 128 - status
    return status
